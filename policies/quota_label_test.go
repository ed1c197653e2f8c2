package policies

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
	"pgregory.net/rapid"
)

// TestMarkOverQuota: the in-quota/borrowed label of running workspaces,
// from the admission record when there is one, from start order when not.
func TestMarkOverQuota(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	type w struct {
		name     string
		held     int
		started  int // minutes after t0
		queued   int // minutes after t0
		admitted admission
	}
	in, bor, unk := admittedInQuota, admittedBorrowing, admittedUnknown
	tests := []struct {
		name  string
		quota int
		ws    []w
		want  string // the borrowed ones
	}{
		{"no record: start order", 4, []w{{"old", 2, 0, 0, unk}, {"b", 4, 10, 1, unk}, {"y", 2, 10, 2, unk}}, "[b]"},
		// Re-derived, b (queued first) would take the room old left.
		{"no record, older work gone: labels swap", 4, []w{{"b", 4, 10, 1, unk}, {"y", 2, 10, 2, unk}}, "[y]"},
		{"recorded, older work gone: labels kept", 4, []w{{"b", 4, 10, 1, bor}, {"y", 2, 10, 2, in}}, "[b]"},
		{"recorded borrower fits: promoted", 4, []w{{"b", 2, 10, 1, bor}, {"y", 2, 10, 2, in}}, "[]"},
		{"recorded borrower fits beside in-quota work only", 4, []w{{"b", 2, 10, 1, bor}, {"c", 2, 20, 3, bor}, {"y", 2, 30, 2, in}}, "[c]"},
		// A borrower promoted before (recorded in-quota now) keeps its
		// place when an older, larger borrower could fit after more work
		// leaves.
		{"promoted stays in-quota", 4, []w{{"big", 4, 5, 0, bor}, {"z", 2, 20, 3, in}}, "[big]"},
		{"promotion follows admission order", 4, []w{{"x", 2, 0, 0, bor}, {"b", 4, 10, 1, bor}, {"c", 2, 20, 3, bor}}, "[b c]"},
		{"quota lowered below in-quota work: latest beyond it", 2, []w{{"a", 2, 0, 0, in}, {"b", 2, 10, 1, in}}, "[b]"},
		{"unrecorded after recorded in-quota", 4, []w{{"a", 2, 0, 0, unk}, {"b", 4, 10, 1, in}}, "[a]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ws []*wsState
			total := 0
			for _, x := range tt.ws {
				ws = append(ws, &wsState{ref: schema.Ref{Project: "p", Name: x.name}, held: x.held, startedAt: t0.Add(time.Duration(x.started) * time.Minute),
					queuedSince: t0.Add(time.Duration(x.queued) * time.Minute), admitted: x.admitted})
				total += x.held
			}
			if held, _ := markOverQuota(ws, tt.quota, quotaRes{}, nil); held != total {
				t.Errorf("held %d, want %d", held, total)
			}
			var got []string
			in := 0
			for _, w := range ws {
				if w.overQuota {
					got = append(got, w.ref.Name)
				} else {
					in += w.held
				}
			}
			if s := fmt.Sprint(got); s != tt.want {
				t.Errorf("borrowed %s, want %s", s, tt.want)
			}
			if in > tt.quota {
				t.Errorf("%d GPUs in-quota, quota %d", in, tt.quota)
			}
		})
	}
}

// TestMarkOverQuotaMemory: a quota naming memory labels as it does GPUs,
// in every dimension: a workspace is beyond the quota when it is in
// either; a recorded in-quota one stays inside; one with no record is
// labelled in start order.
func TestMarkOverQuotaMemory(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	const gi = 1 << 30
	type w struct {
		name     string
		gpus     int
		mem      int64
		started  int // minutes after t0
		admitted admission
	}
	in, unk := admittedInQuota, admittedUnknown
	tests := map[string]struct {
		ws   []w
		want string // the borrowed ones
	}{
		"inside in both":                    {[]w{{"a", 1, 32 * gi, 0, unk}, {"b", 1, 32 * gi, 10, unk}}, "[]"},
		"beyond in memory alone":            {[]w{{"a", 1, 48 * gi, 0, unk}, {"b", 1, 32 * gi, 10, unk}}, "[b]"},
		"beyond in GPUs alone":              {[]w{{"a", 3, 8 * gi, 0, unk}, {"b", 2, 8 * gi, 10, unk}}, "[b]"},
		"no GPU, beyond in memory":          {[]w{{"a", 1, 48 * gi, 0, unk}, {"cpu", 0, 32 * gi, 10, unk}}, "[cpu]"},
		"recorded in-quota keeps its place": {[]w{{"a", 1, 48 * gi, 0, unk}, {"b", 1, 32 * gi, 10, in}}, "[a]"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var ws []*wsState
			for _, x := range tt.ws {
				ws = append(ws, &wsState{ref: schema.Ref{Project: "p", Name: x.name}, held: x.gpus, rheld: quotaRes{mem: x.mem},
					startedAt: t0.Add(time.Duration(x.started) * time.Minute), admitted: x.admitted})
			}
			// Quota: 4 GPUs and 64Gi.
			markOverQuota(ws, 4, quotaRes{mem: 64 * gi}, nil)
			var got []string
			for _, w := range ws {
				if w.overQuota {
					got = append(got, w.ref.Name)
				}
			}
			if s := fmt.Sprint(got); s != tt.want {
				t.Errorf("borrowed %s, want %s", s, tt.want)
			}
		})
	}
}

// TestPropLabelsOutliveDepartures runs cycles over generated inputs in
// which, now and then, a running workspace is set to Stopped (its
// project's older work leaves), and checks the admission labels: a
// workspace labelled in-quota stays in-quota while it runs, and no
// workspace that a reclaim took GPUs from takes them back from its
// reclaimer while itself borrowing.
func TestPropLabelsOutliveDepartures(t *testing.T) {
	verifying(t)
	rapid.Check(t, func(t *rapid.T) {
		cur := genInput(t)
		inQuota := map[schema.Ref]bool{}
		reclaimedBy := map[[2]schema.Ref]bool{} // (reclaimer, victim)
		for cycle := range 30 {
			d := Decide(cur)
			checkDecision(t, cur, d)
			starts := map[schema.Ref]WorkspaceDecision{}
			for _, w := range d.Workspaces {
				if w.Verdict == VerdictStart {
					starts[w.Ref] = w
				}
			}
			for _, w := range d.Workspaces {
				if w.Verdict == VerdictRun && inQuota[w.Ref] && w.Borrowed {
					t.Fatalf("cycle %d: %s, in-quota, now counted as borrowed\n%s", cycle, w.Ref, Render(d))
				}
				if w.Verdict != VerdictPreempt || w.PreemptedBy == nil {
					continue
				}
				by := *w.PreemptedBy
				if reclaimedBy[[2]schema.Ref{w.Ref, by}] && starts[by].Borrowed {
					t.Fatalf("cycle %d: %s, borrowing, takes back %s, which reclaimed from it\n%s", cycle, by, w.Ref, Render(d))
				}
				if w.Right == RightReclaim {
					reclaimedBy[[2]schema.Ref{by, w.Ref}] = true
				}
			}
			clear(inQuota)
			for _, w := range d.Workspaces {
				if (w.Verdict == VerdictRun || w.Verdict == VerdictStart) && !w.Borrowed {
					inQuota[w.Ref] = true
				}
			}
			cur = apply(cur, d, cur.Now.Add(time.Minute))
			// Now and then one running workspace leaves.
			var running []schema.Ref
			for _, a := range cur.Snapshot.Allocs {
				if len(running) == 0 || running[len(running)-1] != a.Workspace {
					running = append(running, a.Workspace)
				}
			}
			if len(running) > 0 && rapid.IntRange(0, 3).Draw(t, "leave") == 0 {
				gone := running[rapid.IntRange(0, len(running)-1).Draw(t, "who")]
				set := *cur.Specs
				set.Workspaces = append([]schema.Workspace(nil), set.Workspaces...)
				for i := range set.Workspaces {
					if set.Workspaces[i].Ref() == gone {
						set.Workspaces[i].Spec.State = schema.DesiredStopped
					}
				}
				cur.Specs = &set
			}
		}
	})
}
