package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderToDir: nomad-pack's render flags, --var in both spellings and
// --to-dir, write each job as PACK/NAME.nomad; a bad flag is refused.
func TestRenderToDir(t *testing.T) {
	out := t.TempDir()
	err := run([]string{"render", "../../../packs/berth", "--var", "image=reg/berth:v1", "--var=specs_repo=https://g/specs",
		"--var", "agent_enabled=false", "--to-dir", out})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "berth", "berth.nomad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`image = "reg/berth:v1"`, `"--repo=https://g/specs"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("berth.nomad lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "berth", "berth_agent.nomad")); !os.IsNotExist(err) {
		t.Errorf("agent_enabled=false still writes berth_agent.nomad (%v)", err)
	}
	if err := run([]string{"render", "../../../packs/berth", "--colour"}); err == nil || !strings.Contains(err.Error(), "--colour") {
		t.Errorf("an unknown flag: %v", err)
	}
}
