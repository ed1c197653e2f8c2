package schema

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamples loads every example spec repo: each must be valid, with no
// warnings.
func TestExamples(t *testing.T) {
	dirs, err := filepath.Glob("../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || filepath.Base(dir) == "ci" {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			set, diags, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diags {
				t.Error(d)
			}
			if set == nil {
				t.Fatal("Load returned no Set")
			}
		})
	}
}
