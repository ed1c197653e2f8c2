package reconcile

import (
	"fmt"
	"os"
	"testing"
)

// TestMain keeps the git sources' clones (under os.TempDir) out of the
// machine's temporary directory: they go to one removed at the end.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-reconcile-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
