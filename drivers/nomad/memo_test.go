package nomad_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/nomad/api"
)

// TestVersionMemoSparesAColdReadTheJobs: a driver given the version memo
// another one saved observes the same snapshot without reading the jobs
// or the nodes' allocation lists; a job changed since (outside berth:
// drift) is read again, and found drifted; a memo of another cluster's
// jobs (other submit times) is not used; a driver that read nothing
// saves no memo.
func TestVersionMemoSparesAColdReadTheJobs(t *testing.T) {
	fake := nomadfake.New()
	for i := range 4 {
		fake.AddNode(nomadfake.Node{ID: fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", i+1, i+1), Name: fmt.Sprintf("node-%d", i), HostVolumes: []string{"datasets"},
			GPUs: []nomadfake.GPU{{ID: fmt.Sprintf("GPU-%d", i), PCIBusID: "00000000:18:00.0", Healthy: true}}})
	}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	first := realnomad.NewDriver(t, nomad.Config{Address: srv.URL, PlacementTimeout: time.Second})
	if _, err := first.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := first.Apply(ctx, startAction(fmt.Sprintf("train-%d", i), fmt.Sprintf("node-%d", i), fmt.Sprintf("GPU-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	fake.Settle()
	want, err := first.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var memo bytes.Buffer
	if err := first.SaveVersions(&memo); err != nil {
		t.Fatal(err)
	}
	// A driver that has not read the cluster (unreachable) writes no
	// memo: the one before it stays.
	var none bytes.Buffer
	if err := realnomad.NewDriver(t, nomad.Config{Address: srv.URL}).SaveVersions(&none); err != nil || none.Len() != 0 {
		t.Errorf("a driver that read nothing wrote a memo of %d bytes (%v), want none", none.Len(), err)
	}
	// jobReads are the requests that read jobs whole.
	jobReads := func(from int) []string {
		var out []string
		for _, r := range fake.Requests()[from:] {
			if strings.HasPrefix(r, "GET /v1/job/") || (strings.HasPrefix(r, "GET /v1/node/") && strings.Contains(r, "/allocations")) {
				out = append(out, r)
			}
		}
		return out
	}
	cold := func(memo []byte) (drivers.Snapshot, []string) {
		t.Helper()
		d := realnomad.NewDriver(t, nomad.Config{Address: srv.URL})
		if err := d.RestoreVersions(memo); err != nil {
			t.Fatal(err)
		}
		from := len(fake.Requests())
		snap, err := d.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap, jobReads(from)
	}
	same := cmpopts.IgnoreFields(drivers.Snapshot{}, "ObservedAt")
	got, reads := cold(memo.Bytes())
	if len(reads) != 0 {
		t.Errorf("a cold Observe with the memo read jobs: %v", reads)
	}
	if diff := cmp.Diff(want, got, same, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the snapshot with the memo differs (-without +with):\n%s", diff)
	}
	if _, reads := cold(nil); len(reads) == 0 {
		t.Errorf("a cold Observe without a memo read no job: the count above measures nothing")
	}
	// Another cluster's memo (the same jobs, submitted at other times).
	other := bytes.ReplaceAll(memo.Bytes(), []byte(`"submitTime":1`), []byte(`"submitTime":2`))
	if _, reads := cold(other); len(reads) == 0 {
		t.Errorf("a memo whose versions the listing does not name was used")
	}
	// A job changed outside berth since the memo: read, and drifted.
	c := first.Client()
	j, _, err := c.Jobs().Info("train-2", &api.QueryOptions{Namespace: "vision"})
	if err != nil {
		t.Fatal(err)
	}
	j.TaskGroups[0].Tasks[0].Env = map[string]string{"CHANGED": "by hand"}
	if _, _, err := c.Jobs().Register(j, &api.WriteOptions{Namespace: "vision"}); err != nil {
		t.Fatal(err)
	}
	fake.Settle()
	got, reads = cold(memo.Bytes())
	if len(reads) == 0 || len(reads) > 2 {
		t.Errorf("after one job changed, a cold Observe read %v; want that job's", reads)
	}
	drifted := 0
	for _, a := range got.Allocs {
		if a.Drift != "" {
			drifted++
			if a.Workspace.Name != "train-2" {
				t.Errorf("%s drifted, want train-2 alone", a.Workspace)
			}
		}
	}
	if drifted == 0 {
		t.Errorf("the job changed outside berth is not drifted: %+v", got.Allocs)
	}
}
