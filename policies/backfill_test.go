package policies

import (
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// TestBackfill: with Input.Backfill, a workspace predicted to end before
// the waiting gang can have room starts on the GPUs held for it; one
// predicted to run longer, or with no run time known, waits; without
// Backfill, all wait.
func TestBackfill(t *testing.T) {
	ar := txtar.Parse([]byte(`-- now --
2026-03-02T10:00:00Z
-- specs --
tier medium 50
project ml tier=medium
project other tier=medium
project third tier=medium
workspace ml/gang gpus=4 replicas=2 nvlink=required
workspace ml/busy gpus=2
workspace other/short gpus=1
workspace other/long gpus=2
workspace third/unknown gpus=1
-- cluster --
node n1 gpus=4
node n2 gpus=4
alloc ml/busy node=n2 gpus=0,1 started=-1h
-- history --
usage other 10000000
usage third 10000000
queued ml/gang -1h
queued other/short -10m
queued other/long -9m
queued third/unknown -8m
`))
	in, err := parseScenario(ar)
	if err != nil {
		t.Fatal(err)
	}
	// busy: runs of 2h to 3h, 1h done; other's 1-GPU runs take 10m to
	// 30m, its 2-GPU ones 5h to 6h.
	in.History.RunTimes = map[string][]time.Duration{
		"ml//2":    hours(2, 2.5, 3),
		"other//1": hours(1.0/6, 0.25, 0.5),
		"other//2": hours(5, 5.5, 6),
	}
	verdicts := func(in Input) map[string]string {
		out := map[string]string{}
		for _, w := range Decide(in).Workspaces {
			out[w.Ref.Name] = w.Verdict.String() + ": " + w.Reason.Message
		}
		return out
	}
	off := verdicts(in)
	for _, n := range []string{"short", "long", "unknown"} {
		if !strings.HasPrefix(off[n], "wait") {
			t.Errorf("without Backfill, %s: %s; want it to wait", n, off[n])
		}
	}
	in.Backfill = true
	on := verdicts(in)
	if want := "start: starts on GPUs held for ml/gang: predicted to end before it can start"; on["short"] != want {
		t.Errorf("short: %q, want %q", on["short"], want)
	}
	for _, n := range []string{"long", "unknown"} {
		if !strings.HasPrefix(on[n], "wait") {
			t.Errorf("with Backfill, %s: %s; want it to wait", n, on[n])
		}
	}
	if !strings.HasPrefix(on["gang"], "wait") || !strings.Contains(on["gang"], "holds free GPUs for itself") {
		t.Errorf("gang: %s; want it to wait holding GPUs", on["gang"])
	}
}
