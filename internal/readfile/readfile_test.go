//go:build unix

package readfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Read reads a file named on a command line as the loader reads a
// spec file: regular, within a size, a FIFO refused without waiting.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	big := filepath.Join(dir, "big.yaml")
	fifo := filepath.Join(dir, "pipe.yaml")
	os.WriteFile(ok, []byte("kind: Cluster\n"), 0o644)
	os.WriteFile(big, []byte(strings.Repeat("x", 2048)), 0o644)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if b, err := Read(ok, 1024); err != nil || string(b) != "kind: Cluster\n" {
		t.Errorf("Read(ok) = %q, %v", b, err)
	}
	for name, want := range map[string]string{
		big:  big + ": not read: the file is too large (2 KiB, more than the limit of 1 KiB)",
		fifo: fifo + ": not read: it is a named pipe (FIFO), not a regular file; berth reads only regular files",
	} {
		if _, err := Read(name, 1024); err == nil || err.Error() != want {
			t.Errorf("Read(%s): %v, want %q", filepath.Base(name), err, want)
		}
	}
}
