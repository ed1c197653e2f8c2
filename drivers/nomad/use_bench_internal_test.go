package nomad

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
)

// useFleet is 10,000 running one-GPU workspaces on 1,250 nodes of 8
// GPUs, on a fake Nomad whose node stats are the size of a real node's
// (the NVIDIA plugin's eleven attributes per GPU), and a driver whose
// last Observe named the nodes.
func useFleet(b *testing.B) (*Driver, drivers.Snapshot, *httptest.Server) {
	b.Helper()
	const nodes, perNode = 1250, 8
	fake := nomadfake.New()
	var snap drivers.Snapshot
	for n := range nodes {
		id := fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", n+1, n+1)
		name := fmt.Sprintf("gpu-%04d", n)
		spec := nomadfake.Node{ID: id, Name: name}
		node := drivers.Node{Name: name, ID: id, Ready: true, Eligible: true}
		for g := range perNode {
			gid := fmt.Sprintf("GPU-%04d-%d", n, g)
			spec.GPUs = append(spec.GPUs, nomadfake.GPU{ID: gid, Healthy: true})
			node.GPUs = append(node.GPUs, drivers.GPU{ID: gid, Index: g, Model: "H100-fake", Healthy: true})
			snap.Allocs = append(snap.Allocs, drivers.Alloc{ID: fmt.Sprintf("alloc-%04d-%d", n, g), Node: name,
				GPUs: []string{gid}, Phase: drivers.AllocRunning})
			fake.SetGPUUse(id, gid, float64(g*10))
		}
		fake.AddNode(spec)
		snap.Nodes = append(snap.Nodes, node)
	}
	ts := httptest.NewServer(fake)
	b.Cleanup(ts.Close)
	d, err := New(Config{Address: ts.URL})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	d.attachUse(&snap)
	return d, snap, ts
}

// BenchmarkUseRound: one sampling round at 10,000 workspaces: the 1,250
// node stats requests (over HTTP to the fake, which serves them in the
// same process: its CPU is in the figure), then an Observe's part, each
// allocation given its new reading.
func BenchmarkUseRound(b *testing.B) {
	d, snap, ts := useFleet(b)
	resp, err := http.Get(ts.URL + "/v1/client/stats?node_id=" + snap.Nodes[0].ID)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	before := d.UseStats().Requests
	b.ResetTimer()
	for range b.N {
		d.SampleNow(context.Background())
		s := snap
		s.Allocs = slices.Clone(snap.Allocs)
		d.attachUse(&s)
		if s.Allocs[9].Use == nil || s.Allocs[9].Use.Percent[0] != 10 {
			b.Fatalf("allocation 9 reads %+v, want 10%%", s.Allocs[9].Use)
		}
	}
	b.StopTimer()
	st := d.UseStats()
	b.ReportMetric(float64(st.Requests-before)/float64(b.N), "requests/round")
	b.ReportMetric(float64(len(body)), "bytes/answer")
	if st.Failures > 0 {
		b.Fatalf("%d requests failed", st.Failures)
	}
}

// BenchmarkUseAttach: what sampling adds to each Observe between
// rounds at 10,000 workspaces: every allocation given the reading it had
// (shared, not built again).
func BenchmarkUseAttach(b *testing.B) {
	d, snap, _ := useFleet(b)
	d.SampleNow(context.Background())
	s := snap
	s.Allocs = slices.Clone(snap.Allocs)
	d.attachUse(&s)
	b.ResetTimer()
	for range b.N {
		s := snap
		s.Allocs = slices.Clone(snap.Allocs)
		d.attachUse(&s)
	}
}
