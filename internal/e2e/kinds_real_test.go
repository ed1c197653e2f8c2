package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// kindsSpecs declares three GPU kinds (the kit's whole GPUs, node-1's
// MIG instances and its L40S), tiers low, medium and high, project cv
// with no quota and project ml guaranteed 4 MIG instances, then the
// workspaces: name → spec body.
func kindsSpecs(workspaces ...string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: h100}
spec: {match: "H100-fake"}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: slice}
spec: {match: "* MIG 1g.10gb"}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: l40s}
spec: {match: "NVIDIA L40S"}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: b200}
spec: {match: "NVIDIA B200*"}
---
apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: low}
spec: {value: 20}
---
apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: medium}
spec: {value: 50}
---
apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: high}
spec: {value: 80}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: cv}
spec: {tier: medium}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec:
  tier: medium
  quota: {gpus: 0, kinds: {slice: 4}}
`)
	for _, w := range workspaces {
		b.WriteString("---\n" + w)
	}
	return b.String()
}

// kindWorkspace is a workspace of project that asks for gpus GPUs of
// kind, of tier (empty: its project's), that sleeps and checkpoints on
// SIGTERM within its 2 s grace.
func kindWorkspace(project, name, kind string, gpus int, tier string) string {
	t := ""
	if tier != "" {
		t = "\n  tier: " + tier
	}
	return `apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: ` + name + `, project: ` + project + `}
spec:` + t + `
  task: {driver: raw_exec, command: /bin/sh, args: ["-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}
  resources: {gpus: ` + strconv.Itoa(gpus) + `, gpuKind: ` + kind + `, memory: 32Mi}
  checkpoint: {signal: SIGTERM, gracePeriod: 2s}
`
}

// TestRealKindQuotaAndPreemption (issue 36, rows c, d, and a and e with
// kinds): node-1
// gains 7 MIG instances and an L40S. Project cv, with no quota, borrows
// 4 instances (cv/slices) and the L40S (cv/l40s). ml, guaranteed 4
// instances, asks for them (ml/train): only 3 are free, so it reclaims
// cv/slices and never cv/l40s, which holds another kind (row c), and
// the status charges them to ml's slice quota (row a). Then
// ml/urgent, of tier high, asks for the L40S: it preempts cv/l40s, the
// one holder of that kind, and not ml/train, of a lower tier too but
// holding instances (row d). Every start is on devices of its kind; a
// workspace asking for a kind no node has waits, with a reason that
// names it (row e).
func TestRealKindQuotaAndPreemption(t *testing.T) {
	kit := realnomad.KitDir(t)
	r := newRealLoop(t)
	addGroup(t, kit, r.c, "node-1", migGroup, 9728, 7)
	addGroup(t, kit, r.c, "node-1", "NVIDIA L40S", 46068, 1)
	state := func(project, name string) view.WorkspaceStatus {
		w, _ := r.loop.Workspace(schema.Ref{Project: project, Name: name})
		return w.Workspace
	}
	runs := func(ws ...[2]string) func() bool {
		return func() bool {
			for _, w := range ws {
				if state(w[0], w[1]).State != view.StateRunning {
					return false
				}
			}
			return true
		}
	}
	onKind := func(project, name, prefix, node string) {
		t.Helper()
		st := state(project, name)
		if st.Node != node {
			t.Errorf("%s/%s runs on %s, want %s", project, name, st.Node, node)
		}
		for _, g := range st.GPUs {
			if !strings.HasPrefix(g, prefix) {
				t.Errorf("%s/%s holds %v: %s is not a %s… device", project, name, st.GPUs, g, prefix)
			}
		}
	}
	cvSlices := kindWorkspace("cv", "slices", "slice", 4, "")
	cvL40S := kindWorkspace("cv", "l40s", "l40s", 1, "")
	r.write("specs.yaml", kindsSpecs(cvSlices, cvL40S, kindWorkspace("cv", "b200", "b200", 1, "")))
	r.until(60*time.Second, "cv's workspaces run", runs([2]string{"cv", "slices"}, [2]string{"cv", "l40s"}))
	onKind("cv", "slices", "MIG-", "node-1")
	// Row e, with kinds: a kind no node has waits, and says so.
	if st := state("cv", "b200"); st.State != view.StatePending || !strings.HasPrefix(st.Reason, "capacity: no usable GPU of kind b200 in the cluster; the cluster has ") {
		t.Errorf("cv/b200 is %s: %q; want Pending for want of a b200", st.State, st.Reason)
	}
	l40sGPU := state("cv", "l40s").GPUs

	// Row c: ml reclaims its 4 instances from cv/slices, never cv/l40s.
	start := time.Now()
	r.write("specs.yaml", kindsSpecs(cvSlices, cvL40S, kindWorkspace("ml", "train", "slice", 4, "")))
	r.until(60*time.Second, "ml/train runs", runs([2]string{"ml", "train"}))
	took := time.Since(start)
	onKind("ml", "train", "MIG-", "node-1")
	if st := state("cv", "slices"); st.State == view.StateRunning {
		t.Errorf("cv/slices still runs beside ml/train (%v)", st.GPUs)
	}
	if st := state("cv", "l40s"); st.State != view.StateRunning || strings.Join(st.GPUs, ",") != strings.Join(l40sGPU, ",") {
		t.Errorf("cv/l40s is %s on %v; reclaiming instances must not touch the L40S it holds (%v)", st.State, st.GPUs, l40sGPU)
	}
	realnomad.Report(t, "per-kind reclaim: ml/train runs on 4 MIG instances %.1fs after it was written", took.Seconds())
	// Row a: charged to its kind, as the status counts it.
	for _, p := range r.loop.Status().Projects {
		if p.Name == "ml" && (len(p.Kinds) != 1 || p.Kinds[0].Kind != "slice" || p.Kinds[0].UsedGPUs != 4 || p.Kinds[0].BorrowedGPUs != 0 || p.UsedGPUs != 0) {
			t.Errorf("ml's status: %d GPUs used in its gpus account, kinds %+v; want 4 slice GPUs inside the slice quota", p.UsedGPUs, p.Kinds)
		}
	}

	// Row d: a higher tier preempts only holders of the kind it needs.
	r.write("specs.yaml", kindsSpecs(cvSlices, cvL40S, kindWorkspace("ml", "train", "slice", 4, ""), kindWorkspace("ml", "urgent", "l40s", 1, "high")))
	r.until(60*time.Second, "ml/urgent runs", runs([2]string{"ml", "urgent"}))
	if st := state("ml", "urgent"); strings.Join(st.GPUs, ",") != strings.Join(l40sGPU, ",") {
		t.Errorf("ml/urgent holds %v, want the L40S %v", st.GPUs, l40sGPU)
	}
	if st := state("cv", "l40s"); st.State == view.StateRunning {
		t.Errorf("cv/l40s still runs on %v beside ml/urgent", st.GPUs)
	}
	if st := state("ml", "train"); st.State != view.StateRunning {
		t.Errorf("ml/train is %s (%s): ml/urgent needs the L40S, not its MIG instances", st.State, st.Reason)
	}
}
