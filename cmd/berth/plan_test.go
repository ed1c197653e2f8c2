package main

import (
	"os"
	"strings"
	"testing"

	"github.com/berth-dev/berth/plan"
	"sigs.k8s.io/yaml"
)

// TestCIPlanExample: the plan workflow parses, runs berth plan for
// markdown with --detailed-exitcode, and splits the comments on the
// marker berth writes.
func TestCIPlanExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/ci/plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run  string            `json:"run"`
				With map[string]string `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	var run, script string
	for _, s := range wf.Jobs["plan"].Steps {
		run += s.Run
		script += s.With["script"]
	}
	for _, want := range []string{"berth plan", "--output markdown", "--detailed-exitcode", "--cluster snapshot:"} {
		if !strings.Contains(run, want) {
			t.Errorf("the workflow does not run %q", want)
		}
	}
	marker := strings.Trim(plan.MarkdownSplit, "\n")
	if !strings.Contains(script, marker) {
		t.Errorf("the comment script does not split on %q", marker)
	}
}
