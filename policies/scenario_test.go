package policies

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/clustertest"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

// scenarioFiles lists the scenarios, testdata/FOLDER/*.txtar, folder by
// folder. A scenario left in testdata itself would never run: it fails.
func scenarioFiles(t *testing.T) []string {
	t.Helper()
	if stray, _ := filepath.Glob("testdata/*.txtar"); len(stray) > 0 {
		t.Fatalf("scenarios outside a rule's folder (move them to testdata/FOLDER/): %v", stray)
	}
	files, err := filepath.Glob("testdata/*/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata")
	}
	return files
}

// scenarioName is a scenario's subtest name: FOLDER/NAME, from
// testdata/FOLDER/NAME.txtar.
func scenarioName(file string) string {
	return filepath.Base(filepath.Dir(file)) + "/" + strings.TrimSuffix(filepath.Base(file), ".txtar")
}

// TestScenarios runs every policies/testdata/FOLDER/*.txtar (a folder per
// rule file, named after it, and walkthrough/): specs, cluster, history
// and now in (compact line formats, see parseScenario), the rendered
// decision out. Subtests are named FOLDER/NAME. BERTH_UPDATE=1 rewrites
// the "decision" sections.
func TestScenarios(t *testing.T) {
	files := scenarioFiles(t)
	verifying(t)
	update := os.Getenv("BERTH_UPDATE") != ""
	for _, file := range files {
		t.Run(scenarioName(file), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in, err := parseScenario(ar)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			d := Decide(in)
			got := renderScenario(d)
			// Deciding twice gives the same bytes.
			if again := renderScenario(Decide(in)); again != got {
				t.Errorf("second decision differs:\n%s", cmp.Diff(got, again))
			}
			idx, recIdx := -1, -1
			for i, f := range ar.Files {
				switch f.Name {
				case "decision":
					idx = i
				case "recorded":
					recIdx = i
				}
			}
			rec := renderAdmitted(RecordDecision(*in.History, in.Specs, d))
			if update {
				if idx < 0 {
					ar.Files = append(ar.Files, txtar.File{Name: "decision"})
					idx = len(ar.Files) - 1
				}
				ar.Files[idx].Data = []byte(got)
				if recIdx >= 0 {
					ar.Files[recIdx].Data = []byte(rec)
				}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if idx < 0 {
				t.Fatalf("no decision section; run with BERTH_UPDATE=1")
			}
			if diff := cmp.Diff(string(ar.Files[idx].Data), got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			if recIdx >= 0 {
				if diff := cmp.Diff(string(ar.Files[recIdx].Data), rec); diff != "" {
					t.Errorf("recorded (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// renderScenario is Render, and a last line when the starvation guard let
// go of GPUs at the starved workspace's turn (Decision.GuardReleased).
func renderScenario(d Decision) string {
	out := Render(d)
	if d.GuardReleased {
		out += "guard released GPUs at " + d.Starved.String() + "'s turn\n"
	}
	return out
}

// parseScenario reads a scenario archive. Sections:
//
//	-- now --      2026-03-02T10:00:00Z (every other time is relative to it: -30m)
//	-- specs --    tier NAME VALUE [nopreempt] [noevict] [cohortBelow=TIER] [ordering=on|off|all]
//	               kind NAME match=PATTERN (spaces written as _)
//	               project NAME tier=T [quota=N] [borrow=N|unlimited] [weight=W|quota]
//	                       [quotaCPU=CORES|500m] [quotaMem=SIZE] [borrowCPU=CORES] [borrowMem=SIZE]
//	                       [quota.KIND=N] [borrow.KIND=N]
//	               workspace PROJECT/NAME gpus=N [replicas=K] [model=M] [kind=K] [kinds=K1,K2] [nvlink=C] [numa=C]
//	                         [state=Stopped] [preemptible=false] [cpu=CORES|500m] [mem=64Gi]
//	                         [grace=D] [unhealthyGPU=stay] [nocheckpoint] [interactive]
//	                         (nocheckpoint: no signal, grace or interval; interactive: a port)
//	               (tiers, projects and workspaces: [maxRuntime=D] [idle=AFTER[/BELOW[/ACTION]]];
//	                the policy: [idle=…])
//	               policy [minRuntime=D] [maxVictims=N] [halfLife=D] [aging=INTERVAL/STEP/MAX]
//	                      [service=off|STEP,STEP…/PROMOTE] (GPU-hours; off: no attained-service ordering)
//	                      [preemption=off] [nvlink=C] [numa=C]
//	-- cluster --  nodes, allocations and ends as internal/clustertest reads them:
//	               node NAME gpus=N [domains=D] …, alloc PROJECT/NAME node=N gpus=I,J …,
//	               exit PROJECT/NAME class=… (GPU IDs are g0…gN-1)
//	-- history --  usageAt -1h | usage PROJECT GPU-SECONDS | queued PROJECT/NAME -30m
//	               preempted PROJECT/NAME by=PROJECT/NAME at=-5m
//	               admitted PROJECT/NAME in-quota|borrowing
//	               ran PROJECT/NAME 1h30m [spec=HASH] | idle PROJECT/NAME since=-5h last=-1m
//	               ended PROJECT/NAME class=idle at=-1h spec=HASH reason=WORDS_WITH_UNDERSCORES
//	               (spec=current: the fingerprint of its spec in the specs)
//	-- decision -- the rendered decision (golden), and "guard released GPUs
//	               at REF's turn" when the decision says so
//	               (Decision.GuardReleased)
//	-- recorded -- optional golden: the admission labels RecordDecision
//	               keeps from the decision, as "admitted" history lines
//
// Lines starting with # are comments; the archive's comment describes it.
func parseScenario(ar *txtar.Archive) (Input, error) {
	sections := map[string]string{}
	for _, f := range ar.Files {
		sections[f.Name] = string(f.Data)
	}
	nowText := strings.TrimSpace(sections["now"])
	now, err := time.Parse(time.RFC3339, nowText)
	if err != nil {
		return Input{}, fmt.Errorf("now: %w", err)
	}
	set, err := parseSpecs(sections["specs"], now)
	if err != nil {
		return Input{}, fmt.Errorf("specs: %w", err)
	}
	snap, err := clustertest.Parse(sections["cluster"], now, clustertest.Options{})
	if err != nil {
		return Input{}, fmt.Errorf("cluster: %w", err)
	}
	hist, err := parseHistory(sections["history"], now)
	if err != nil {
		return Input{}, fmt.Errorf("history: %w", err)
	}
	// spec=current: the fingerprint of the workspace's spec in the specs.
	current := func(ref schema.Ref, hash *string) {
		if w := set.Workspace(ref); w != nil && *hash == "current" {
			*hash = drivers.Fingerprint(&w.Spec)
		}
	}
	for ref, e := range hist.Ended {
		current(ref, &e.SpecHash)
		hist.Ended[ref] = e
	}
	for ref, r := range hist.Ran {
		current(ref, &r.SpecHash)
		hist.Ran[ref] = r
	}
	return Input{Specs: set, Snapshot: snap, History: hist, Now: now}, nil
}

func parseSpecs(text string, now time.Time) (*schema.Set, error) {
	set := &schema.Set{Revision: "test", Policy: schema.DefaultPolicy()}
	for _, l := range clustertest.Lines(text) {
		f := clustertest.Fields(l)
		switch f.Words[0] {
		case "tier":
			v, err := strconv.Atoi(f.Words[2])
			if err != nil {
				return nil, fmt.Errorf("%q: %w", l, err)
			}
			t := schema.PriorityTier{Meta: schema.Meta{Name: f.Words[1]}, Spec: schema.TierSpec{Value: v, Preemptible: !f.Flags["noevict"], CanPreempt: !f.Flags["nopreempt"]}}
			if b, ok := f.KV["cohortBelow"]; ok {
				t.Spec.BorrowWithinCohort = &schema.BorrowWithinCohort{Below: b}
			}
			t.Spec.Ordering = schema.Ordering(f.KV["ordering"])
			if t.Spec.MaxRuntime, t.Spec.Idle, err = limitsOf(f); err != nil {
				return nil, fmt.Errorf("%q: %w", l, err)
			}
			set.Tiers = append(set.Tiers, t)
		case "project":
			p := schema.Project{Meta: schema.Meta{Name: f.Words[1]}, Spec: schema.ProjectSpec{Tier: f.KV["tier"], BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited}, FairShare: schema.FairShare{Weight: 1}}}
			var err error
			// CPU and memory quota and borrow limit: the workspace syntax
			// under other names; absent, each keeps its default.
			for _, r := range []struct {
				key  string
				read func(key string) (int64, error)
				dst  *int64
			}{
				{"quotaCPU", f.CPU, &p.Spec.Quota.CPUMHz},
				{"quotaMem", f.Size, &p.Spec.Quota.MemoryBytes},
				{"borrowCPU", f.CPU, &p.Spec.BorrowLimit.CPUMHz},
				{"borrowMem", f.Size, &p.Spec.BorrowLimit.MemoryBytes},
			} {
				if _, ok := f.KV[r.key]; ok {
					if *r.dst, err = r.read(r.key); err != nil {
						return nil, err
					}
				}
			}
			if p.Spec.Quota.GPUs, err = f.Int("quota", 0); err != nil {
				return nil, err
			}
			if p.Spec.BorrowLimit.GPUs, err = f.Int("borrow", schema.Unlimited); err != nil {
				return nil, err
			}
			if w, ok := f.KV["weight"]; ok && w == "quota" {
				p.Spec.FairShare.Weight = 0 // none set: the default, by quota
			} else if ok {
				if p.Spec.FairShare.Weight, err = strconv.ParseFloat(w, 64); err != nil {
					return nil, err
				}
			}
			p.Spec.Placement = f.Placement()
			if p.Spec.MaxRuntime, p.Spec.Idle, err = limitsOf(f); err != nil {
				return nil, fmt.Errorf("%q: %w", l, err)
			}
			// Per kind: quota.KIND=N, borrow.KIND=N.
			for k, v := range f.KV {
				dst := &p.Spec.Quota.Kinds
				kind, ok := strings.CutPrefix(k, "quota.")
				if !ok {
					if kind, ok = strings.CutPrefix(k, "borrow."); !ok {
						continue
					}
					dst = &p.Spec.BorrowLimit.Kinds
				}
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("%q: %s: %w", l, k, err)
				}
				if *dst == nil {
					*dst = map[string]int{}
				}
				(*dst)[kind] = n
			}
			set.Projects = append(set.Projects, p)
		case "kind":
			// A pattern's spaces are written as _, as a model's are.
			k := schema.GPUKind{Meta: schema.Meta{Name: f.Words[1]}, Spec: schema.GPUKindSpec{Match: strings.ReplaceAll(f.KV["match"], "_", " ")}}
			set.Kinds = append(set.Kinds, k)
		case "workspace":
			ref, err := clustertest.ParseRef(f.Words[1])
			if err != nil {
				return nil, err
			}
			w := schema.Workspace{Meta: schema.Meta{Name: ref.Name, Project: ref.Project}, Spec: schema.WorkspaceSpec{State: schema.DesiredRunning, Preemptible: f.KV["preemptible"] != "false", Checkpoint: set.Policy.Spec.Defaults.Checkpoint}}
			if w.Spec.Resources.GPUs, err = f.Int("gpus", 1); err != nil {
				return nil, err
			}
			if w.Spec.Replicas, err = f.Int("replicas", 1); err != nil {
				return nil, err
			}
			// A model name's spaces are written as _ (A100_MIG_1g.10gb).
			w.Spec.Resources.GPUModel = strings.ReplaceAll(f.KV["model"], "_", " ")
			w.Spec.Resources.GPUKind = f.KV["kind"]
			w.Spec.Resources.GPUKinds = f.List("kinds")
			w.Spec.Tier = f.KV["tier"]
			w.Spec.Topology = set.Policy.Spec.Defaults.Topology
			if c, ok := f.KV["nvlink"]; ok {
				w.Spec.Topology.NVLink = schema.Constraint(c)
			}
			if c, ok := f.KV["numa"]; ok {
				w.Spec.Topology.NUMA = schema.Constraint(c)
			}
			if s, ok := f.KV["state"]; ok {
				w.Spec.State = schema.DesiredState(s)
			}
			r := &w.Spec.Resources
			if r.CPUMHz, r.MemoryBytes, r.DiskBytes, r.ExclusiveCores, err = f.Resources(); err != nil {
				return nil, err
			}
			w.Spec.Task.Driver = f.KV["driver"]
			w.Spec.UnhealthyGPU = f.KV["unhealthyGPU"]
			if g, ok := f.KV["grace"]; ok {
				if w.Spec.Checkpoint.GracePeriod, err = time.ParseDuration(g); err != nil {
					return nil, err
				}
			}
			if f.Flags["nocheckpoint"] {
				w.Spec.Checkpoint = schema.Checkpoint{}
			}
			if f.Flags["interactive"] {
				w.Spec.Ports = []schema.Port{{Label: "http"}}
			}
			w.Spec.Placement = f.Placement()
			if w.Spec.MaxRuntime, w.Spec.Idle, err = limitsOf(f); err != nil {
				return nil, fmt.Errorf("%q: %w", l, err)
			}
			for _, v := range f.List("volumes") {
				w.Spec.Volumes = append(w.Spec.Volumes, schema.VolumeMount{Name: v, MountPath: "/" + v})
			}
			set.Workspaces = append(set.Workspaces, w)
		case "policy":
			ps := &set.Policy.Spec
			for k, v := range f.KV {
				var err error
				switch k {
				case "minRuntime":
					ps.Preemption.MinRuntime, err = time.ParseDuration(v)
				case "maxVictims":
					ps.Preemption.MaxVictims, err = strconv.Atoi(v)
				case "halfLife":
					ps.FairShare.HalfLife, err = time.ParseDuration(v)
				case "maxWait":
					ps.Aging.MaxWait, err = time.ParseDuration(v)
				case "preemption":
					ps.Preemption.Enabled = v != "off"
				case "aging":
					parts := strings.Split(v, "/")
					if len(parts) != 3 {
						return nil, fmt.Errorf("aging=%q: want INTERVAL/STEP/MAX", v)
					}
					if ps.Aging.Interval, err = time.ParseDuration(parts[0]); err == nil {
						if ps.Aging.Step, err = strconv.Atoi(parts[1]); err == nil {
							ps.Aging.MaxBoost, err = strconv.Atoi(parts[2])
						}
					}
				case "idle":
					ps.Idle, err = idleOf(v)
				case "service":
					ps.Service, err = schema.ParseServicePolicy(v)
				case "nvlink":
					ps.Defaults.Topology.NVLink = schema.Constraint(v)
				case "numa":
					ps.Defaults.Topology.NUMA = schema.Constraint(v)
				default:
					return nil, fmt.Errorf("policy: unknown %s", k)
				}
				if err != nil {
					return nil, fmt.Errorf("policy %s=%q: %w", k, v, err)
				}
			}
			// Workspaces declared before the policy line keep its old
			// defaults; state the policy first.
		default:
			return nil, fmt.Errorf("unknown line %q", l)
		}
	}
	set.Sort()
	// A project's placement fills what its workspaces leave out, as the
	// loader does.
	for i := range set.Workspaces {
		w := &set.Workspaces[i]
		if p := set.Project(w.Meta.Project); p != nil {
			w.Spec.Placement = w.Spec.Placement.Or(p.Spec.Placement)
		}
	}
	return set, nil
}

func parseHistory(text string, now time.Time) (*drivers.History, error) {
	h := &drivers.History{}
	for _, l := range clustertest.Lines(text) {
		f := clustertest.Fields(l)
		var err error
		switch f.Words[0] {
		case "usageAt":
			h.UsageAt, err = clustertest.Rel(now, f.Words[1])
		case "usage":
			if h.Usage == nil {
				h.Usage = map[string]float64{}
			}
			h.Usage[f.Words[1]], err = strconv.ParseFloat(f.Words[2], 64)
		case "queued":
			var ref schema.Ref
			if ref, err = clustertest.ParseRef(f.Words[1]); err == nil {
				if h.QueuedSince == nil {
					h.QueuedSince = map[schema.Ref]time.Time{}
				}
				h.QueuedSince[ref], err = clustertest.Rel(now, f.Words[2])
			}
		case "admitted":
			var ref schema.Ref
			if ref, err = clustertest.ParseRef(f.Words[1]); err == nil {
				if h.Borrowing == nil {
					h.Borrowing = map[schema.Ref]bool{}
				}
				switch label := f.Words[2]; label {
				case "in-quota", "borrowing":
					h.Borrowing[ref] = label == "borrowing"
				default:
					err = fmt.Errorf("admitted %s %q: want in-quota or borrowing", ref, label)
				}
			}
		case "ran":
			var ref schema.Ref
			if ref, err = clustertest.ParseRef(f.Words[1]); err == nil {
				var d time.Duration
				if d, err = time.ParseDuration(f.Words[2]); err == nil {
					if h.Ran == nil {
						h.Ran = map[schema.Ref]drivers.RunTime{}
					}
					h.Ran[ref] = drivers.RunTime{SpecHash: f.KV["spec"], Ran: d}
				}
			}
		case "idle":
			var ref schema.Ref
			if ref, err = clustertest.ParseRef(f.Words[1]); err == nil {
				var span drivers.IdleSpan
				if span.Since, err = clustertest.Rel(now, f.KV["since"]); err == nil {
					span.Last, err = clustertest.Rel(now, f.KV["last"])
				}
				if h.Idle == nil {
					h.Idle = map[schema.Ref]drivers.IdleSpan{}
				}
				h.Idle[ref] = span
			}
		case "ended":
			var ref schema.Ref
			if ref, err = clustertest.ParseRef(f.Words[1]); err == nil {
				e := drivers.Ended{SpecHash: f.KV["spec"], Reason: strings.ReplaceAll(f.KV["reason"], "_", " ")}
				if err = e.Class.UnmarshalText([]byte(f.KV["class"])); err == nil {
					e.At, err = clustertest.Rel(now, f.KV["at"])
				}
				if h.Ended == nil {
					h.Ended = map[schema.Ref]drivers.Ended{}
				}
				h.Ended[ref] = e
			}
		case "preempted":
			var p drivers.Preemption
			if p.Victim, err = clustertest.ParseRef(f.Words[1]); err == nil {
				if p.By, err = clustertest.ParseRef(f.KV["by"]); err == nil {
					p.At, err = clustertest.Rel(now, f.KV["at"])
				}
			}
			if h.Preempted == nil {
				h.Preempted = map[schema.Ref]drivers.Preemption{}
			}
			h.Preempted[p.Victim] = p
		default:
			err = fmt.Errorf("unknown line %q", l)
		}
		if err != nil {
			return nil, err
		}
	}
	if h.UsageAt.IsZero() {
		h.UsageAt = now
	}
	return h, nil
}

// renderAdmitted writes h's admission labels as "admitted" history lines,
// by Ref.
func renderAdmitted(h drivers.History) string {
	refs := make([]schema.Ref, 0, len(h.Borrowing))
	for r := range h.Borrowing {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Less(refs[j]) })
	var b strings.Builder
	for _, r := range refs {
		label := "in-quota"
		if h.Borrowing[r] {
			label = "borrowing"
		}
		fmt.Fprintf(&b, "admitted %s %s\n", r, label)
	}
	return b.String()
}

// limitsOf reads a spec line's maxRuntime=D (0s: none) and
// idle=AFTER[/BELOW[/ACTION]] (an empty AFTER: not set at this level).
func limitsOf(f clustertest.Line) (*time.Duration, schema.IdleRule, error) {
	var max *time.Duration
	if v, ok := f.KV["maxRuntime"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, schema.IdleRule{}, fmt.Errorf("maxRuntime=%q: %w", v, err)
		}
		max = &d
	}
	var idle schema.IdleRule
	if v, ok := f.KV["idle"]; ok {
		var err error
		if idle, err = idleOf(v); err != nil {
			return nil, idle, err
		}
	}
	return max, idle, nil
}

// idleOf reads AFTER[/BELOW[/ACTION]].
func idleOf(v string) (schema.IdleRule, error) {
	parts := strings.Split(v, "/")
	var r schema.IdleRule
	var err error
	if parts[0] != "" {
		if r.After, err = time.ParseDuration(parts[0]); err != nil {
			return r, fmt.Errorf("idle=%q: %w", v, err)
		}
	}
	if len(parts) > 1 && parts[1] != "" {
		if r.Below, err = strconv.ParseFloat(parts[1], 64); err != nil {
			return r, fmt.Errorf("idle=%q: %w", v, err)
		}
	}
	if len(parts) > 2 {
		r.Action = schema.IdleAction(parts[2])
	}
	return r, nil
}
