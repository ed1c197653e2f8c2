package main

import (
	"os"
	"strings"
	"testing"

	"github.com/berth-dev/berth/plan"
	"sigs.k8s.io/yaml"
)

// TestCIPlanExample: the plan workflow parses and runs berth's GitHub
// Action with a cluster, so that it plans and comments; the action's
// plan step runs berth plan for markdown with --detailed-exitcode, and
// its comment step splits the comments on the marker berth writes
// (go test ./action runs both on an example repository).
func TestCIPlanExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/ci/plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Permissions map[string]string `json:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Uses string            `json:"uses"`
				With map[string]string `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	uses := false
	for _, s := range wf.Jobs["plan"].Steps {
		uses = uses || (strings.HasPrefix(s.Uses, "berth-dev/berth@") && s.With["cluster"] != "")
	}
	if !uses || wf.Permissions["pull-requests"] != "write" {
		t.Errorf("the workflow does not run berth's action with a cluster and leave to comment (permissions %v)", wf.Permissions)
	}
	sh, err := os.ReadFile("../../action/plan.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`plan "${BERTH_SPECS:-.}"`, "--output markdown", "--detailed-exitcode", "--cluster"} {
		if !strings.Contains(string(sh), want) {
			t.Errorf("the action's plan step does not run %q", want)
		}
	}
	js, err := os.ReadFile("../../action/comment.js")
	if err != nil {
		t.Fatal(err)
	}
	if marker := strings.Trim(plan.MarkdownSplit, "\n"); !strings.Contains(string(js), marker) {
		t.Errorf("the action's comment step does not split on %q", marker)
	}
}
