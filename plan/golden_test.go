package plan_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/plan"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/schema/schematest"
	"github.com/berth-dev/berth/source"
	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestPlanGoldens runs every testdata/*.txtar: the specs before
// (base/…) and after (head/…), the cluster observed at now, in; the plan
// as text, markdown and json out, rendered from the loop's cycle run dry
// (reconcile.DryRun), as berth plan renders it. BERTH_UPDATE=1 rewrites the outputs.
//
//	-- now --     2026-03-02T10:00:00Z
//	-- cluster -- as internal/clustertest reads it, GPU IDs NAME-g0…:
//	              node NAME gpus=N [domains=D] …
//	              alloc PROJECT/NAME node=N gpus=0,1 [started=-1h] [checkpoint=-5m] [phase=stopping] …
//	-- flags --   allow-mass-prune | native=batch
func TestPlanGoldens(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	if len(files) < 5 {
		t.Fatalf("%d plan scenarios, want at least 5", len(files))
	}
	update := os.Getenv("BERTH_UPDATE") != ""
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in := planInput(t, ar)
			r := plan.NewReport(in)
			js, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{
				"text":     r.Text(),
				"markdown": strings.Join(r.Markdown(0), plan.MarkdownSplit),
				"json":     string(js) + "\n",
			}
			if again := plan.NewReport(in); !cmp.Equal(r, again) {
				t.Errorf("the same inputs gave another report")
			}
			for _, name := range []string{"text", "markdown", "json"} {
				idx := -1
				for i, f := range ar.Files {
					if f.Name == name {
						idx = i
					}
				}
				if update {
					if idx < 0 {
						ar.Files = append(ar.Files, txtar.File{Name: name})
						idx = len(ar.Files) - 1
					}
					ar.Files[idx].Data = []byte(got[name])
					continue
				}
				if idx < 0 {
					t.Fatalf("no %s section; run with BERTH_UPDATE=1", name)
				}
				if diff := cmp.Diff(string(ar.Files[idx].Data), got[name]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", name, diff)
				}
			}
			if update {
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func planInput(t *testing.T, ar *txtar.Archive) plan.PlanInput {
	t.Helper()
	base, head := fstest.MapFS{}, fstest.MapFS{}
	sections := map[string]string{}
	for _, f := range ar.Files {
		switch {
		case strings.HasPrefix(f.Name, "base/"):
			base[strings.TrimPrefix(f.Name, "base/")] = &fstest.MapFile{Data: f.Data}
		case strings.HasPrefix(f.Name, "head/"):
			head[strings.TrimPrefix(f.Name, "head/")] = &fstest.MapFile{Data: f.Data}
		default:
			sections[f.Name] = string(f.Data)
		}
	}
	now, err := time.Parse(time.RFC3339, strings.TrimSpace(sections["now"]))
	if err != nil {
		t.Fatalf("now: %v", err)
	}
	in := plan.PlanInput{Cluster: "test", HeadName: "head", Snapshot: plan.ParsePlanCluster(t, sections["cluster"], now)}
	in.Head = plan.LoadTestSpecs(t, head, "head")
	if len(base) > 0 {
		in.Base = plan.LoadTestSpecs(t, base, "base")
		in.BaseName = "base"
	}
	// The allocations run what the base revision (else the head) asked:
	// its task fingerprint and its tier's priority, as a driver reports.
	started := in.Base
	if started == nil {
		started = in.Head
	}
	for i := range in.Snapshot.Allocs {
		a := &in.Snapshot.Allocs[i]
		if w := started.Workspace(a.Workspace); w != nil {
			a.SpecHash = drivers.Fingerprint(&w.Spec)
		}
		if p := started.Project(a.Workspace.Project); p != nil {
			if tr := started.Tier(p.Spec.Tier); tr != nil {
				a.Priority = tr.Spec.Value
			}
		}
	}
	for _, f := range strings.Fields(sections["flags"]) {
		switch {
		case f == "allow-mass-prune":
			in.AllowMassPrune = true
		case strings.HasPrefix(f, "native="):
			in.NativePreemption = append(in.NativePreemption, strings.TrimPrefix(f, "native="))
		default:
			t.Fatalf("flag %q", f)
		}
	}
	// What the loop's cycle does on the head: run dry, as berth plan
	// runs it.
	// It changes neither the specs nor the snapshot it is given.
	before := mustJSON(t, in.Head, in.Snapshot)
	dry, err := reconcile.DryRun(context.Background(), reconcile.DryRunInput{Set: in.Head, Snapshot: *in.Snapshot})
	if err != nil {
		t.Fatal(err)
	}
	if after := mustJSON(t, in.Head, in.Snapshot); after != before {
		t.Errorf("the dry run changed its input")
	}
	in.Decision, in.Plan, in.History = dry.Decision, dry.Result.Plan, &dry.History
	return in
}

func mustJSON(t *testing.T, v ...any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPlanSaysWhatTheLoopDoes runs every scenario through berth
// reconcile's loop (one cycle, against a cluster that records what it is
// sent) and through berth plan's report, and compares what each says
// happens to each workspace: the report's starts, preemptions, stops,
// purges and updates are exactly what the loop sends or holds back.
func TestPlanSaysWhatTheLoopDoes(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in := planInput(t, ar)
			l, cl, _ := newTestLoop(t, in.Head, *in.Snapshot, drivers.History{})
			res, err := l.Once(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(loopSays(res, cl), planSays(plan.NewReport(in))); diff != "" {
				t.Errorf("the loop (-) and the plan (+) disagree:\n%s", diff)
			}
		})
	}
}

// TestPlanGivesUpOnNodeFaultsAsTheLoopDoes: a workspace whose runs the
// node ends again and again is started again until
// drivers.NodeFaultAttempts ends in a row, then the loop gives up. The
// plan, made from the history the loop saved, says so at every step:
// berth plan once said "start" for ever, which the loop did not do.
func TestPlanGivesUpOnNodeFaultsAsTheLoopDoes(t *testing.T) {
	w := schematest.Workspace("med", "train", schema.DesiredRunning)
	set := schematest.WithWorkspaces(w)
	set.Revision = "head"
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	snapAt := func(k int) drivers.Snapshot {
		end := at.Add(time.Duration(k) * time.Hour)
		return drivers.Snapshot{ObservedAt: end.Add(30 * time.Minute), // past any backoff
			Nodes: []drivers.Node{{Name: "a", ID: "a", Ready: true, Eligible: true,
				GPUs: []drivers.GPU{{ID: "a-g0", Model: "H100", Healthy: true}}}},
			Exits: []drivers.Exit{{Workspace: w.Ref(), Failed: true, At: end, Node: "a", Class: drivers.EndNodeFault,
				SpecHash: drivers.Fingerprint(&w.Spec), Message: "node lost"}}}
	}
	snap := snapAt(1)
	l, cl, store := newTestLoop(t, set, snap, drivers.History{})
	started := 0
	for k := 1; k <= drivers.NodeFaultAttempts+2; k++ {
		snap = snapAt(k)
		cl.snap = snap
		dry, err := reconcile.DryRun(context.Background(), reconcile.DryRunInput{Set: set, Snapshot: snap, History: store.hist})
		if err != nil {
			t.Fatal(err)
		}
		rep := plan.NewReport(plan.PlanInput{Head: set, HeadName: "head", Snapshot: &snap, Decision: dry.Decision, Plan: dry.Result.Plan})
		res, err := l.Once(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		loop, planned := loopSays(res, cl), planSays(rep)
		if diff := cmp.Diff(loop, planned); diff != "" {
			t.Fatalf("end %d: the loop (-) and the plan (+) disagree:\n%s", k, diff)
		}
		if loop["med/train"] == "start" {
			started++
		}
	}
	if started != drivers.NodeFaultAttempts {
		t.Errorf("started again %d times after the node's faults, want %d (drivers.NodeFaultAttempts)", started, drivers.NodeFaultAttempts)
	}
}

// loopSays is what one cycle of the loop did to each workspace: the
// actions it sent (cl records them) and the starts it held back.
func loopSays(res reconcile.Result, cl *testCluster) map[string]string {
	out := map[string]string{}
	for _, a := range cl.take() {
		out[a.Workspace.String()] = a.Kind.String()
	}
	for _, ref := range res.Deferred {
		out[ref.String()] = "start"
	}
	return out
}

// planSays is what the report says happens to each workspace in this
// cycle, in the loop's words: a purge is stopped now (one that holds
// nothing is purged after the prune delay).
func planSays(r plan.Report) map[string]string {
	out := map[string]string{}
	for _, p := range r.Projects {
		for _, c := range p.Consequences {
			switch c.Kind {
			case "wait", "limit":
				continue // no action: it waits, or runs until a time limit
			case "purge":
				if c.Node == "" {
					continue // holds nothing: purged after the prune delay, not in this cycle
				}
				out[c.Workspace.String()] = "stop"
			default:
				out[c.Workspace.String()] = c.Kind
			}
		}
	}
	return out
}

// newTestLoop is berth reconcile's loop on set, against a cluster
// observed as snap that records what it is sent, with hist in its store.
func newTestLoop(t *testing.T, set *schema.Set, snap drivers.Snapshot, hist drivers.History) (*reconcile.Loop, *testCluster, *testStore) {
	t.Helper()
	cl := &testCluster{snap: snap}
	store := &testStore{hist: hist}
	l, err := reconcile.New(reconcile.Config{
		Source:         testSource{id: set.Revision},
		Load:           func(fs.FS, string) (*schema.Set, []string, error) { return set, nil, nil },
		Cluster:        cl,
		Store:          store,
		AllowMassPrune: true, // the report warns of the guard beside what the revision does
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, cl, store
}

type testSource struct{ id string }

func (s testSource) Read(context.Context) (source.Revision, error) {
	return source.Revision{ID: s.id}, nil
}

type testCluster struct {
	snap drivers.Snapshot
	mu   sync.Mutex
	sent []drivers.Action
}

func (c *testCluster) Observe(context.Context) (drivers.Snapshot, error) { return c.snap, nil }

func (c *testCluster) Apply(_ context.Context, a drivers.Action) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, a)
	return nil
}

func (c *testCluster) take() []drivers.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	sent := c.sent
	c.sent = nil
	return sent
}

type testStore struct{ hist drivers.History }

func (s *testStore) LoadHistory(context.Context) (drivers.History, error) { return s.hist, nil }

func (s *testStore) SaveHistory(_ context.Context, h drivers.History) error {
	s.hist = h
	return nil
}
