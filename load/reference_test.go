package load

import (
	"bytes"
	"os"
	"testing"
)

const referencePath = "../docs/reference.md"

// TestReferenceDocumented: every field of the schema has a comment.
func TestReferenceDocumented(t *testing.T) {
	fields := ReferenceFields()
	if len(fields) < 50 {
		t.Fatalf("only %d fields found; the walk is broken", len(fields))
	}
	for _, f := range fields {
		if f.Doc == "" {
			t.Errorf("%s.%s has no comment in schema.cue; document it", f.Kind, f.Path)
		}
	}
}

// TestReferenceCurrent: docs/reference.md is what the schema generates.
// BERTH_UPDATE=1 rewrites it.
func TestReferenceCurrent(t *testing.T) {
	want := Reference()
	if os.Getenv("BERTH_UPDATE") != "" {
		if err := os.MkdirAll("../docs", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(referencePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v; run BERTH_UPDATE=1 go test ./load", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; run BERTH_UPDATE=1 go test ./load", referencePath)
	}
}
