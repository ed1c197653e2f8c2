package e2e

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/nomad/api"
)

// TestRealVersionMemo (issue 25): on a real Nomad, a driver given the
// version memo another one saved (what berth apply carries from one run
// to the next) takes the job versions from it and observes what a full
// read observes; after a job is changed outside berth, the memo's entry
// for it no longer matches Nomad's listing: the job is read, and found
// drifted.
func TestRealVersionMemo(t *testing.T) {
	c := realnomad.Client(t)
	first := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	snap, err := first.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) == 0 {
		t.Skip("no node")
	}
	for i := range 3 {
		if err := first.Apply(ctx, realSmallStart(fmt.Sprintf("memo-%d", i), snap.Nodes[i%len(snap.Nodes)].Name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := realnomad.WaitFor(ctx, first, 60*time.Second, func(s drivers.Snapshot) bool {
		n := 0
		for _, a := range s.Allocs {
			if a.Workspace.Project == "berth-real" && len(a.Workspace.Name) > 5 && a.Workspace.Name[:5] == "memo-" && a.Phase == drivers.AllocRunning {
				n++
			}
		}
		return n == 3
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	var memo bytes.Buffer
	if err := first.SaveVersions(&memo); err != nil {
		t.Fatal(err)
	}
	// cold observes with the memo, and compares with a full read
	// without it, until both saw the same cluster.
	cold := func(step string) (drivers.Snapshot, nomad.FollowStats) {
		t.Helper()
		var diff string
		for try := 0; try < 20; try++ {
			d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
			if err := d.RestoreVersions(memo.Bytes()); err != nil {
				t.Fatal(err)
			}
			got, err := d.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fresh := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
			want, err := fresh.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			diff = cmp.Diff(want, got, cmpopts.IgnoreFields(drivers.Snapshot{}, "ObservedAt"), cmpopts.EquateEmpty())
			if diff == "" {
				return got, d.FollowStats()
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("%s: the snapshot with the memo differs from a full read (-full +memo):\n%s", step, diff)
		return drivers.Snapshot{}, nomad.FollowStats{}
	}
	_, st := cold("unchanged")
	if st.FromMemo < 3 {
		t.Errorf("unchanged: %d versions taken from the memo, want the 3 started at least (%+v)", st.FromMemo, st)
	}
	// memo-1 changed by hand.
	j, _, err := c.Jobs().Info("memo-1", &api.QueryOptions{Namespace: "berth-real"})
	if err != nil {
		t.Fatal(err)
	}
	j.TaskGroups[0].Tasks[0].Env = map[string]string{"CHANGED": "by hand"}
	if _, _, err := c.Jobs().Register(j, &api.WriteOptions{Namespace: "berth-real"}); err != nil {
		t.Fatal(err)
	}
	var got drivers.Snapshot
	for try := 0; ; try++ {
		got, _ = cold("memo-1 changed by hand")
		drifted := map[string]bool{}
		for _, a := range got.Allocs {
			if a.Drift != "" {
				drifted[a.Workspace.Name] = true
			}
		}
		if drifted["memo-1"] && !drifted["memo-0"] && !drifted["memo-2"] {
			break
		}
		if try == 20 {
			t.Fatalf("memo-1 changed by hand: drifted %v, want memo-1 alone", drifted)
		}
		time.Sleep(500 * time.Millisecond) // Nomad replaces the allocation
	}
}
