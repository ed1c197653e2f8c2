package load

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestExamples loads every example spec repo: each must be valid, with no
// warnings. (examples/ci is a workflow, checked by TestCIExample.)
func TestExamples(t *testing.T) {
	for _, dir := range []string{"walkthrough", "multi-team"} {
		t.Run(dir, func(t *testing.T) {
			set, diags, err := Paths(filepath.Join("..", "examples", dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diags {
				t.Error(d)
			}
			if set == nil || len(set.Workspaces) == 0 {
				t.Fatal("Paths returned no Set, or one without workspaces")
			}
		})
	}
}

// TestCIExample: the GitHub Actions example runs berth's action on pull
// requests (its validate step runs berth validate with GitHub
// annotations: go test ./action runs it).
func TestCIExample(t *testing.T) {
	b, err := os.ReadFile("../examples/ci/validate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On map[string]any `json:"on"`
		// YAML 1.1 readers take the key on for true.
		OnTrue map[string]any `json:"true"`
		Jobs   map[string]struct {
			Steps []struct {
				Uses string `json:"uses"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	_, onPR := wf.On["pull_request"]
	_, onPRTrue := wf.OnTrue["pull_request"]
	if !onPR && !onPRTrue {
		t.Error("the workflow does not run on pull requests")
	}
	found := false
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			found = found || strings.HasPrefix(s.Uses, "berth-dev/berth@")
		}
	}
	sh, err := os.ReadFile("../action/validate.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !found || !strings.Contains(string(sh), "validate --format github") {
		t.Error("no step runs berth's action, whose validate step runs berth validate --format github")
	}
}
