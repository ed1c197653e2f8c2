package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file holds what was written, its directory is made, and
// no temporary file is left beside it.
func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "f")
	for _, body := range []string{"one", "two"} {
		if err := Write(path, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != body {
			t.Fatalf("read %q, %v; want %q", got, err, body)
		}
	}
	if es, _ := os.ReadDir(filepath.Dir(path)); len(es) != 1 {
		t.Errorf("%d entries beside the file, want it alone", len(es))
	}
}
