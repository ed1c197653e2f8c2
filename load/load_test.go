package load

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"cuelang.org/go/cue"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-dev/berth/schema"
)

const minimal = `apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec: {tier: low}
---
apiVersion: berth.dev/v1
kind: Volume
metadata: {name: data}
spec: {projects: [ml]}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: train, project: ml}
spec:
  task: {image: x}
  resources: {gpus: 1}
`

var ignorePositions = cmpopts.IgnoreFields(schema.Meta{}, "Source", "Fields")

// TestDefaults: every field a document leaves out gets its documented
// default.
func TestDefaults(t *testing.T) {
	set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(minimal)}}, ".")
	if err != nil || set == nil {
		t.Fatalf("FS: %v %v", err, diags)
	}
	def := schema.DefaultPolicy()
	want := &schema.Set{
		Tiers: []schema.PriorityTier{{Meta: schema.Meta{Name: "low"}, Spec: schema.TierSpec{Value: 20, Preemptible: true, CanPreempt: true}}},
		Projects: []schema.Project{{Meta: schema.Meta{Name: "ml"}, Spec: schema.ProjectSpec{
			Tier: "low", BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited},
		}}},
		Volumes: []schema.Volume{{Meta: schema.Meta{Name: "data"}, Spec: schema.VolumeSpec{Type: "host", Source: "data", Projects: []string{"ml"}}}},
		Workspaces: []schema.Workspace{{Meta: schema.Meta{Name: "train", Project: "ml"}, Spec: schema.WorkspaceSpec{
			State:       schema.DesiredRunning,
			Task:        schema.Task{Driver: "docker", Image: "x"},
			Resources:   schema.WorkResources{GPUs: 1, CPUMHz: schema.DefaultCPUMHz, MemoryBytes: schema.DefaultMemoryBytes, DiskBytes: schema.DefaultDiskBytes},
			Topology:    def.Spec.Defaults.Topology,
			Replicas:    1,
			Checkpoint:  def.Spec.Defaults.Checkpoint,
			Preemptible: true,
		}}},
		Policy: def,
	}
	if diff := cmp.Diff(want, set, ignorePositions); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestPolicyDefaults: a SchedulingPolicy's defaults fill workspaces, field
// by field, and its own unset fields keep berth's defaults.
func TestPolicyDefaults(t *testing.T) {
	src := minimal + `---
apiVersion: berth.dev/v1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  preemption: {minRuntime: 15m}
  defaults:
    topology: {numa: required}
    checkpoint: {gracePeriod: 2m}
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: tuned, project: ml}
spec:
  task: {image: x}
  resources: {gpus: 2, cpu: 500m, memory: 1.5Gi}
  topology: {nvlink: none}
  checkpoint: {signal: SIGUSR1, interval: 1h}
  replicas: 3
  preemptible: false
  state: Stopped
`
	set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
	if err != nil || set == nil {
		t.Fatalf("FS: %v %v", err, diags)
	}
	wantPolicy := schema.DefaultPolicy().Spec
	wantPolicy.Preemption.MinRuntime = 15 * time.Minute
	wantPolicy.Defaults.Topology.NUMA = schema.ConstraintRequired
	wantPolicy.Defaults.Checkpoint.GracePeriod = 2 * time.Minute
	if diff := cmp.Diff(wantPolicy, set.Policy.Spec); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if got := set.Workspace(schema.Ref{Project: "ml", Name: "train"}); got == nil ||
		got.Spec.Topology != (schema.Topology{NVLink: schema.ConstraintPreferred, NUMA: schema.ConstraintRequired}) ||
		got.Spec.Checkpoint != (schema.Checkpoint{Signal: "SIGTERM", GracePeriod: 2 * time.Minute}) {
		t.Errorf("train did not take the policy's defaults: %+v", got)
	}
	want := schema.WorkspaceSpec{
		State:       schema.DesiredStopped,
		Task:        schema.Task{Driver: "docker", Image: "x"},
		Resources:   schema.WorkResources{GPUs: 2, CPUMHz: 500, MemoryBytes: 3 << 29, DiskBytes: schema.DefaultDiskBytes},
		Topology:    schema.Topology{NVLink: schema.ConstraintNone, NUMA: schema.ConstraintRequired},
		Replicas:    3,
		Checkpoint:  schema.Checkpoint{Signal: "SIGUSR1", GracePeriod: 2 * time.Minute, Interval: time.Hour},
		Preemptible: false,
	}
	if diff := cmp.Diff(want, set.Workspace(schema.Ref{Project: "ml", Name: "tuned"}).Spec); diff != "" {
		t.Errorf("tuned (-want +got):\n%s", diff)
	}
}

// TestWaitBoundDefault: the wait bound is on unless a policy turns it
// off, and the policy's value is taken as written.
func TestWaitBoundDefault(t *testing.T) {
	for _, tc := range []struct {
		aging string
		want  time.Duration
	}{
		{"", 72 * time.Hour},
		{"aging: {step: 2}", 72 * time.Hour},
		{"aging: {maxWait: 0s}", 0},
		{`aging: {maxWait: "0"}`, 0},
		{"aging: {maxWait: 24h}", 24 * time.Hour},
	} {
		src := minimal + "---\napiVersion: berth.dev/v1\nkind: SchedulingPolicy\nmetadata: {name: p}\nspec: {" + tc.aging + "}\n"
		set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
		if err != nil || set == nil {
			t.Fatalf("%q: FS: %v %v", tc.aging, err, diags)
		}
		if got := set.Policy.Spec.Aging.MaxWait; got != tc.want {
			t.Errorf("%q: aging.maxWait %s, want %s", tc.aging, got, tc.want)
		}
	}
}

// TestInvalidHasNoSet: any error means no Set; warnings alone keep it.
func TestInvalidHasNoSet(t *testing.T) {
	tests := map[string]struct {
		src      string
		wantSet  bool
		errs     int
		warnings int
	}{
		"valid":   {minimal, true, 0, 0},
		"warning": {minimal + "---\napiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low2}\nspec: {value: 25}\n", true, 0, 1},
		"error":   {minimal + "---\napiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: low2}\nspec: {value: 20}\n", false, 1, 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set, diags, err := FS(fstest.MapFS{"s.yaml": {Data: []byte(tt.src)}}, ".")
			if err != nil {
				t.Fatal(err)
			}
			if (set != nil) != tt.wantSet || diags.Errors() != tt.errs || diags.Warnings() != tt.warnings {
				t.Errorf("set=%v errors=%d warnings=%d; want set=%v errors=%d warnings=%d: %v", set != nil, diags.Errors(), diags.Warnings(), tt.wantSet, tt.errs, tt.warnings, diags)
			}
			if (diags.Err() != nil) != (tt.errs > 0) || (tt.errs > 0 && !IsInvalid(diags.Err())) {
				t.Errorf("Err() = %v", diags.Err())
			}
		})
	}
}

// TestDiagnosticsSorted: problems in several files come back sorted by
// file, line and column, whatever order the checks found them in.
func TestDiagnosticsSorted(t *testing.T) {
	fsys := fstest.MapFS{
		"b.yaml":   {Data: []byte("apiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: p}\nspec: {tier: nope}\n")},
		"a.yaml":   {Data: []byte("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: X}\nspec: {value: 0, extra: 1}\n")},
		"c/d.yaml": {Data: []byte("kind: Nope\n")},
	}
	_, diags, err := FS(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.Pos.String())
	}
	want := []string{"a.yaml:3:12", "a.yaml:4:8", "a.yaml:4:18", "b.yaml:4:8", "c/d.yaml:1:1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions (-want +got):\n%s\n%v", diff, diags)
	}
}

func TestDiagnosticString(t *testing.T) {
	tests := map[string]struct {
		d    Diagnostic
		want string
	}{
		"error":   {Diagnostic{Pos: schema.Pos{File: "a.yaml", Line: 3, Col: 5}, Message: "bad"}, "a.yaml:3:5: bad"},
		"warning": {Diagnostic{Pos: schema.Pos{File: "a.yaml", Line: 3}, Severity: SeverityWarning, Message: "hmm"}, "a.yaml:3: warning: hmm"},
		"no pos":  {Diagnostic{Message: "bad"}, "bad"},
	}
	for name, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("%s: String() = %q, want %q", name, got, tt.want)
		}
	}
}

// TestLoadFSRoot: FS reads only under root and names files by their
// path in the file system; hidden and ignored paths are skipped.
func TestLoadFSRoot(t *testing.T) {
	fsys := fstest.MapFS{
		"repo/specs.yaml":       {Data: []byte(minimal)},
		"repo/.berthignore":     {Data: []byte("drafts/\n")},
		"repo/drafts/x.yaml":    {Data: []byte("broken: [")},
		"repo/.github/ci.yaml":  {Data: []byte("on: push")},
		"elsewhere/broken.yaml": {Data: []byte("broken: [")},
		"repo/sub/more.yml":     {Data: []byte("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: high}\nspec: {value: 80}\n")},
		"repo/sub/notes.txt":    {Data: []byte("ignored")},
	}
	set, diags, err := FS(fsys, "repo")
	if err != nil || set == nil {
		t.Fatalf("FS: %v %v", err, diags)
	}
	if len(set.Tiers) != 2 || set.Tiers[0].Meta.Name != "high" || set.Tiers[1].Meta.Source.File != "repo/specs.yaml" {
		t.Errorf("tiers = %+v", set.Tiers)
	}
}

// TestFieldPositions: cross-document errors point at the field.
func TestFieldPositions(t *testing.T) {
	set, _, err := FS(fstest.MapFS{"s.yaml": {Data: []byte(minimal)}}, ".")
	if err != nil || set == nil {
		t.Fatal(err)
	}
	w := set.Workspaces[0]
	if got := w.Meta.FieldPos("spec.resources.gpus"); got != (schema.Pos{File: "s.yaml", Line: 21, Col: 15}) {
		t.Errorf("spec.resources.gpus at %v", got)
	}
	if got := w.Meta.FieldPos("no.such.field"); got != w.Meta.Source || got.Line != 16 {
		t.Errorf("fallback = %v, want the document start %v", got, w.Meta.Source)
	}
}

func TestLoadIOError(t *testing.T) {
	if _, _, err := Paths("does/not/exist"); err == nil || !strings.Contains(err.Error(), "does/not/exist") {
		t.Errorf("Paths of a missing path: err = %v", err)
	}
}

// TestNameMatchesSchema: the Go copy of #Name agrees with the schema.
func TestNameMatchesSchema(t *testing.T) {
	c := newChecker()
	name := c.root.LookupPath(cue.ParsePath("#Name"))
	for _, s := range []string{"a", "ml", "team-1", "a-b-c", "1a", "-a", "a-", "A", "a_b", "", "a.b", strings.Repeat("a", 63), strings.Repeat("a", 64), "é"} {
		schemaOK := name.Unify(c.ctx.Encode(s)).Validate(cue.Concrete(true)) == nil
		if isName(s) != schemaOK {
			t.Errorf("%q: isName=%v, schema says %v", s, isName(s), schemaOK)
		}
	}
}

// TestWorkResources: what a workspace's resources load as is what the
// replica will reserve on Nomad: defaults filled, memory and disk in whole
// MiB, cpu and exclusiveCores exclusive of each other.
func TestWorkResources(t *testing.T) {
	tests := map[string]struct {
		res  string
		want schema.WorkResources
		err  string // part of the one error, if any
	}{
		"defaults":  {`{gpus: 0}`, schema.WorkResources{CPUMHz: 100, MemoryBytes: 300 << 20, DiskBytes: 300 << 20}, ""},
		"share":     {`{gpus: 1, cpu: 500m, memory: 1Gi, disk: 2Gi}`, schema.WorkResources{GPUs: 1, CPUMHz: 500, MemoryBytes: 1 << 30, DiskBytes: 2 << 30}, ""},
		"MHz":       {`{gpus: 0, cpu: 2400MHz}`, schema.WorkResources{CPUMHz: 2400, MemoryBytes: 300 << 20, DiskBytes: 300 << 20}, ""},
		"cores":     {`{gpus: 0, exclusiveCores: 2}`, schema.WorkResources{ExclusiveCores: 2, MemoryBytes: 300 << 20, DiskBytes: 300 << 20}, ""},
		"rounded":   {`{gpus: 0, memory: 1G, disk: 200000001}`, schema.WorkResources{CPUMHz: 100, MemoryBytes: 954 << 20, DiskBytes: 191 << 20}, ""},
		"tiny disk": {`{gpus: 0, disk: 100Mi}`, schema.WorkResources{}, "Nomad keeps the task's logs"},
		"both":      {`{gpus: 0, cpu: 1, exclusiveCores: 1}`, schema.WorkResources{}, "cpu and exclusiveCores are both set"},
		"zero cpu":  {`{gpus: 0, cpu: 0}`, schema.WorkResources{}, "Nomad reserves at least 1 MHz"},
		"tiny mem":  {`{gpus: 0, memory: 1Mi}`, schema.WorkResources{}, "below 10Mi"},
		"cores 0":   {`{gpus: 0, exclusiveCores: 0}`, schema.WorkResources{}, "exclusiveCores is a whole number"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(minimal, "resources: {gpus: 1}", "resources: "+tt.res, 1)
			set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
			if err != nil {
				t.Fatal(err)
			}
			if tt.err != "" {
				if len(diags) != 1 || !strings.Contains(diags[0].String(), tt.err) {
					t.Fatalf("diagnostics %v; want one containing %q", diags, tt.err)
				}
				return
			}
			if set == nil {
				t.Fatalf("diagnostics: %v", diags)
			}
			if diff := cmp.Diff(tt.want, set.Workspaces[0].Spec.Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMountSource: a mount carries the Nomad host volume it asks for, the
// Volume's spec.source (its name by default), so placement checks and
// the job agree on it.
func TestMountSource(t *testing.T) {
	for source, want := range map[string]string{"": "data", "source: nfs-data, ": "nfs-data"} {
		src := strings.Replace(minimal, "spec: {projects: [ml]}", "spec: {"+source+"projects: [ml]}", 1)
		src = strings.Replace(src, "resources: {gpus: 1}", "resources: {gpus: 1}\n  volumes: [{name: data, mountPath: /data}]", 1)
		set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
		if err != nil || set == nil {
			t.Fatalf("FS: %v %v", err, diags)
		}
		if got := set.Workspaces[0].Spec.Volumes[0].Source; got != want {
			t.Errorf("source %q: mount source %q, want %q", source, got, want)
		}
	}
}

// TestLargeCollectionsInPieces: values of a list or mapping past the
// first pieces the loader hands CUE are still checked, and reported at
// their own index and line.
func TestLargeCollectionsInPieces(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w, project: ml}\nspec:\n  resources: {gpus: 1}\n  task:\n    image: x\n    args:\n")
	for i := range 1000 {
		if i == 700 {
			b.WriteString("      - 7\n") // line 709
			continue
		}
		fmt.Fprintf(&b, "      - a%d\n", i)
	}
	b.WriteString("    env:\n") // line 1009
	for i := range 1000 {
		if i == 900 {
			b.WriteString("      K900: [x]\n") // line 1910
			continue
		}
		fmt.Fprintf(&b, "      K%d: v\n", i)
	}
	b.WriteString("  volumes:\n") // line 2010
	for i := range 300 {
		if i == 260 {
			b.WriteString("  - {name: data}\n") // line 2271
			continue
		}
		fmt.Fprintf(&b, "  - {name: data, mountPath: /d%d}\n", i)
	}
	src := strings.Replace(minimal, "  task: {image: x}\n  resources: {gpus: 1}\n", "", 1)
	src = src[:strings.LastIndex(src, "---")] + "---\n" + b.String()
	_, diags, err := FS(fstest.MapFS{"a.yaml": {Data: []byte(src)}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	offset := strings.Count(src[:strings.Index(src, "kind: Workspace")], "\n") - 1
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d: %s", d.Pos.Line-offset, d.Message))
	}
	want := []string{
		`709: spec.task.args.700: got 7, want a string`,
		`1910: spec.task.env.K900: got ["x"], want a string`,
		`2271: spec.volumes.260.mountPath is missing: mountPath is an absolute path such as /data`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

// TestYAMLBadBytes: invalid UTF-8 and control characters are reported at
// their line and column, and the file's other documents are still checked.
func TestYAMLBadBytes(t *testing.T) {
	src := "apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: l\x07ow}\nspec: {value: 20}\n" +
		"---\napiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: ok}\nspec: {value: 30, bogus: 1}\n" +
		"---\n# caf\xe9\napiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: x}\nspec: {value: 40}\n"
	_, diags, err := FS(fstest.MapFS{"a.yaml": {Data: []byte(src)}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	want := []string{
		"a.yaml:3:19: invalid YAML: a control character (U+0007) is not allowed in YAML; remove it, or write it as an escape inside a double-quoted string",
		`a.yaml:9:19: unknown field "bogus" in spec of a PriorityTier; allowed fields are borrowWithinCohort, canPreempt, description, idle, maxRuntime, ordering, preemptible, value`,
		"a.yaml:11:6: invalid YAML: invalid UTF-8 (byte 0xE9); YAML files must be UTF-8: save the file as UTF-8",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

// TestExpectedDuration: expectedDuration is optional, a positive Go
// duration; zero, a negative one and one that is not a duration are
// errors at the field that say what to write.
func TestExpectedDuration(t *testing.T) {
	tests := map[string]struct {
		field string
		want  time.Duration
		err   string // part of the one error, if any
	}{
		"absent":   {"", 0, ""},
		"hours":    {"expectedDuration: 6h", 6 * time.Hour, ""},
		"mixed":    {"expectedDuration: 1h30m", 90 * time.Minute, ""},
		"zero":     {`expectedDuration: "0"`, 0, `spec.expectedDuration is 0; a run takes some time: write a positive duration such as 6h`},
		"zero s":   {"expectedDuration: 0s", 0, `spec.expectedDuration is 0s; a run takes some time`},
		"negative": {"expectedDuration: -1h", 0, "write expectedDuration as a duration such as 6h or 90m"},
		"days":     {"expectedDuration: 2d", 0, "write expectedDuration as a duration such as 6h or 90m"},
		"number":   {"expectedDuration: 3600", 0, "write expectedDuration as a duration such as 6h or 90m"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set := loadWithSpecLines(t, tt.field, tt.err)
			if set == nil {
				return
			}
			if got := set.Workspaces[0].Spec.ExpectedDuration; got != tt.want {
				t.Errorf("expectedDuration = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestBorrowWithinCohort: a tier's opt-in to take other teams' in-quota
// work is off by default, reads its threshold tier, and names a tier that
// exists (else an error at the field, with the tiers there are).
func TestBorrowWithinCohort(t *testing.T) {
	tier := func(spec string) string {
		return minimal + "---\napiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: top}\nspec: {" + spec + "}\n"
	}
	set, diags, err := FS(fstest.MapFS{"s.yaml": {Data: []byte(tier("value: 80"))}}, ".")
	if err != nil || set == nil {
		t.Fatalf("off: %v %v", err, diags)
	}
	if b := set.Tier("top").Spec.BorrowWithinCohort; b != nil {
		t.Errorf("off by default: got %+v", b)
	}
	set, diags, err = FS(fstest.MapFS{"s.yaml": {Data: []byte(tier("value: 80, borrowWithinCohort: {below: top}"))}}, ".")
	if err != nil || set == nil {
		t.Fatalf("on: %v %v", err, diags)
	}
	if b := set.Tier("top").Spec.BorrowWithinCohort; b == nil || b.Below != "top" {
		t.Errorf("on: got %+v, want below top", b)
	}
	_, diags, err = FS(fstest.MapFS{"s.yaml": {Data: []byte(tier("value: 80, borrowWithinCohort: {below: hihg}"))}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	want := `s.yaml:26:40: tier "top": borrowWithinCohort.below: there is no PriorityTier "hihg"`
	if diags.Errors() != 1 || !strings.HasPrefix(diags[0].String(), want) {
		t.Errorf("a missing tier: %v; want one error starting %q", diags, want)
	}
}

// TestRestartAndUnhealthyGPU: restart is optional (nothing restarts),
// attempts alone take the default delay, restartOnFailure: true is the
// shorthand for three restarts 15 s apart, and writing both, a delay
// under a second, too many attempts or an unknown unhealthyGPU are
// errors that say what to write.
func TestRestartAndUnhealthyGPU(t *testing.T) {
	tests := map[string]struct {
		fields    string
		want      schema.Restart
		unhealthy string
		err       string // part of the one error, if any
	}{
		"absent":          {"", schema.Restart{}, "", ""},
		"attempts":        {"restart: {attempts: 2}", schema.Restart{Attempts: 2, Delay: schema.DefaultRestartDelay}, "", ""},
		"attempts, delay": {"restart: {attempts: 1, delay: 1m}", schema.Restart{Attempts: 1, Delay: time.Minute}, "", ""},
		"zero attempts":   {"restart: {attempts: 0, delay: 1m}", schema.Restart{}, "", ""},
		"shorthand":       {"restartOnFailure: true", schema.LegacyRestart, "", ""},
		"stay":            {"unhealthyGPU: stay", schema.Restart{}, schema.GPUStay, ""},
		"both":            {"restartOnFailure: true\n  restart: {attempts: 1}", schema.Restart{}, "", "spec.restartOnFailure and spec.restart are both set"},
		"fast":            {"restart: {attempts: 1, delay: 100ms}", schema.Restart{}, "", "spec.restart.delay is 100ms; a task that fails is restarted no faster than once a second"},
		"many":            {"restart: {attempts: 1000}", schema.Restart{}, "", "attempts is a whole number from 0 to 100"},
		"unknown":         {"unhealthyGPU: ignore", schema.Restart{}, "", `spec.unhealthyGPU: "ignore" is not allowed; use one of "move", "stay"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set := loadWithSpecLines(t, tt.fields, tt.err)
			if set == nil {
				return
			}
			if got := set.Workspaces[0].Spec; got.Restart != tt.want || got.UnhealthyGPU != tt.unhealthy {
				t.Errorf("restart %+v, unhealthyGPU %q; want %+v, %q", got.Restart, got.UnhealthyGPU, tt.want, tt.unhealthy)
			}
		})
	}
}

// loadWithSpecLines loads minimal with lines added to its workspace's
// spec. With wantErr it checks that the load gives one diagnostic
// containing it and returns nil; without, it returns the set.
func loadWithSpecLines(t *testing.T, lines, wantErr string) *schema.Set {
	t.Helper()
	src := minimal
	if lines != "" {
		src += "  " + lines + "\n"
	}
	set, diags, err := FS(fstest.MapFS{"specs.yaml": {Data: []byte(src)}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if wantErr != "" {
		if len(diags) != 1 || !strings.Contains(diags[0].String(), wantErr) {
			t.Fatalf("diagnostics %v; want one containing %q", diags, wantErr)
		}
		return nil
	}
	if set == nil {
		t.Fatalf("diagnostics: %v", diags)
	}
	return set
}
