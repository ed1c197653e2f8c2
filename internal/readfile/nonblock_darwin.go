package readfile

// oNonblock is O_NONBLOCK (see nonblock_linux.go).
const oNonblock = 0x4
