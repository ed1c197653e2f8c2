//go:build !unix

package readfile

// oNonblock is 0 where berth does not know O_NONBLOCK: the walk still
// refuses FIFOs by their type before opening them.
const oNonblock = 0
