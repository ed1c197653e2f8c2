// Package readfile reads the files berth is pointed at, the files of a
// spec tree or a cluster file named on a command line, as the loader
// reads them: only a regular file, opened without waiting (a FIFO or a
// device is refused at once, never waited on), and at most a limit of
// bytes. It is a leaf, so that the loader (load) and the simulator's
// cluster file (drivers/sim) read files one way without the drivers
// reaching the loader's CUE.
package readfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DefaultLimit is the most one file may hold when no limit is given: the
// loader's default for a spec or rule file (load.DefaultMaxFileBytes).
const DefaultLimit = 16 << 20

// OpenFlags open a file for reading without waiting for a writer, for
// os.OpenFile and os.Root.OpenFile.
const OpenFlags = os.O_RDONLY | oNonblock

// Read reads the file at name, an OS path such as a cluster file named
// on a command line, as the loader reads a spec file: only a regular
// file of at most limit bytes (0 or less: DefaultLimit).
func Read(name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	f, err := OS{}.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not read: %s; berth reads only regular files", name, NotRegular(st.Mode()))
	}
	size := st.Size()
	var b []byte
	if size <= limit {
		if b, err = io.ReadAll(io.LimitReader(f, limit+1)); err != nil {
			return nil, err
		}
		size = int64(len(b))
	}
	if size > limit {
		return nil, fmt.Errorf("%s: not read: the file is too large (%s, more than the limit of %s)", name, Size(size), Size(limit))
	}
	return b, nil
}

// OS is the file system of OS paths, as named on a command line, whose
// files open without waiting.
type OS struct{}

// Open opens the file at name for reading, without waiting.
func (OS) Open(name string) (fs.File, error) {
	return os.OpenFile(name, OpenFlags, 0)
}

// Size writes n bytes in the largest binary unit that keeps it at least
// 1: "512 bytes", "2 KiB", "1.5 MiB".
func Size(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d %s", int64(f), units[i])
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// NotRegular says what kind of file mode is, for a message: "it is a
// directory", "it is a named pipe (FIFO), not a regular file", ...
func NotRegular(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case mode.IsDir():
		return "it is a directory"
	case t&fs.ModeNamedPipe != 0:
		return "it is a named pipe (FIFO), not a regular file"
	case t&fs.ModeSocket != 0:
		return "it is a socket, not a regular file"
	case t&fs.ModeCharDevice != 0, t&fs.ModeDevice != 0:
		return "it is a device, not a regular file"
	case t&fs.ModeSymlink != 0:
		return "it is a symbolic link"
	}
	return "it is not a regular file"
}
