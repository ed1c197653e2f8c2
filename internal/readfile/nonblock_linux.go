package readfile

// oNonblock is O_NONBLOCK, written out so that the loader need not import
// syscall (deps_test keeps it out of pure packages): opening a FIFO with
// it returns at once instead of waiting for a writer.
const oNonblock = 0x800
