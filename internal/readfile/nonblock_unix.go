//go:build unix

package readfile

import "syscall"

// oNonblock is O_NONBLOCK: opening a FIFO with it returns at once
// instead of waiting for a writer.
const oNonblock = syscall.O_NONBLOCK
