package load

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/berth-dev/berth/schema"
)

// TestMaxRuntime: a workspace's maxRuntime is optional, a Go duration
// ("0s": no limit, overriding its project's and tier's); one that is not
// a duration is an error at the field that says what to write.
func TestMaxRuntime(t *testing.T) {
	tests := map[string]struct {
		field string
		want  *time.Duration
		err   string
	}{
		"absent":   {"", nil, ""},
		"hours":    {"maxRuntime: 72h", new(72 * time.Hour), ""},
		"none":     {"maxRuntime: 0s", new(time.Duration(0)), ""},
		"days":     {"maxRuntime: 3d", nil, "write maxRuntime as a duration such as 72h, or 0s for no limit"},
		"negative": {"maxRuntime: -1h", nil, "write maxRuntime as a duration such as 72h, or 0s for no limit"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set := loadWithSpecLines(t, tt.field, tt.err)
			if set == nil {
				return
			}
			got := set.Workspaces[0].Spec.MaxRuntime
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("maxRuntime = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestIdleRule: idle is read on a workspace; a zero after, a below out
// of (0, 100] and an unknown action are errors at the field.
func TestIdleRule(t *testing.T) {
	tests := map[string]struct {
		field string
		want  schema.IdleRule
		err   string
	}{
		"absent": {"", schema.IdleRule{}, ""},
		"all":    {"idle: {after: 4h, below: 5, action: report}", schema.IdleRule{After: 4 * time.Hour, Below: 5, Action: schema.IdleReport}, ""},
		"off":    {"idle: {action: off}", schema.IdleRule{Action: schema.IdleOff}, ""},
		"zero":   {"idle: {after: 0s}", schema.IdleRule{}, "spec.idle.after is 0s; a GPU is idle only for some time"},
		"below0": {"idle: {after: 1h, below: 0}", schema.IdleRule{}, "idle.below is a percentage, more than 0 and at most 100"},
		"over":   {"idle: {after: 1h, below: 101}", schema.IdleRule{}, "idle.below is a percentage, more than 0 and at most 100"},
		"action": {"idle: {after: 1h, action: kill}", schema.IdleRule{}, `spec.idle.action: "kill" is not allowed; use one of "stop", "report", "off"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set := loadWithSpecLines(t, tt.field, tt.err)
			if set == nil {
				return
			}
			if got := set.Workspaces[0].Spec.Idle; got != tt.want {
				t.Errorf("idle = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLimitsResolve: a workspace's time limit and idle rule come from
// the most specific level that sets them (the workspace, its project,
// its tier; for idle, then the SchedulingPolicy), field by field for
// idle, and say where they came from.
func TestLimitsResolve(t *testing.T) {
	src := strings.NewReplacer(
		"spec: {value: 20}", "spec: {value: 20, maxRuntime: 24h, idle: {after: 8h, below: 10}}",
		"spec: {tier: low}", "spec: {tier: low, idle: {after: 2h}}",
	).Replace(minimal) + `---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: notebook, project: ml}
spec:
  task: {image: x}
  resources: {gpus: 1}
  maxRuntime: 0s
  idle: {action: report}
---
apiVersion: berth.dev/v1
kind: SchedulingPolicy
metadata: {name: default}
spec:
  idle: {after: 12h, action: stop}
`
	set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
	if err != nil || set == nil {
		t.Fatalf("FS: %v %v", err, diags)
	}
	train := set.Workspace(schema.Ref{Project: "ml", Name: "train"})
	if got, want := set.MaxRuntime(train), (schema.RuntimeLimit{Max: 24 * time.Hour, From: schema.Level{Kind: "tier", Name: "low"}}); got != want {
		t.Errorf("train's time limit = %+v, want %+v", got, want)
	}
	if got, want := set.Idle(train), (schema.ResolvedIdle{After: 2 * time.Hour, Below: 10, Action: schema.IdleStop, From: schema.Level{Kind: "project", Name: "ml"}}); got != want {
		t.Errorf("train's idle rule = %+v, want %+v", got, want)
	}
	nb := set.Workspace(schema.Ref{Project: "ml", Name: "notebook"})
	if got, want := set.MaxRuntime(nb), (schema.RuntimeLimit{Max: 0, From: schema.Level{Kind: "workspace"}}); got != want {
		t.Errorf("notebook's time limit = %+v, want %+v", got, want)
	}
	if got, want := set.Idle(nb), (schema.ResolvedIdle{After: 2 * time.Hour, Below: 10, Action: schema.IdleReport, From: schema.Level{Kind: "project", Name: "ml"}}); got != want {
		t.Errorf("notebook's idle rule = %+v, want %+v", got, want)
	}
	if !set.HasRuntimeLimits() || !set.HasIdleRules() {
		t.Error("HasRuntimeLimits, HasIdleRules: want true")
	}
}
