package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

type fixedReader struct{ gpus []gpumeta.GPU }

func (r *fixedReader) Read() ([]gpumeta.GPU, error) { return r.gpus, nil }
func (r *fixedReader) Close() error                 { return nil }

func dgx(n int) []gpumeta.GPU {
	buses := []string{"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"}
	var out []gpumeta.GPU
	for i := 0; i < n; i++ {
		out = append(out, gpumeta.GPU{Index: i, UUID: "GPU-" + buses[i], Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920,
			PCIBusID: "00000000:" + strings.ToUpper(buses[i]) + ":00.0", NUMA: i / 4, Domain: i / 4})
	}
	return out
}

// TestPublishAndObserve: the agent publishes the node's topology once,
// only again when it changes, unsets keys it no longer wants, and the
// Nomad driver reads it into the snapshot.
func TestPublishAndObserve(t *testing.T) {
	fake := nomadfake.New()
	var insts []nomadfake.GPU
	for _, g := range dgx(8) {
		insts = append(insts, nomadfake.GPU{ID: g.UUID, PCIBusID: strings.ToLower(g.PCIBusID), Healthy: true})
	}
	fake.AddNode(nomadfake.Node{ID: "node-1", Name: "dgx-1", GPUs: insts, Meta: map[string]string{"rack": "r1"}})
	url := fake.Start(t).URL
	client, err := api.NewClient(&api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := &fixedReader{gpus: dgx(8)}
	a := &Agent{Reader: r, Client: client, NodeID: "node-1", Log: &log}
	ctx := context.Background()

	d, _ := nomad.New(nomad.Config{Address: url})
	snap, _ := d.Observe(ctx)
	if !snap.Nodes[0].TopologyGuessed {
		t.Errorf("before the agent ran the topology must be guessed")
	}

	for i, want := range []bool{true, false} {
		changed, err := a.Once(ctx)
		if err != nil || changed != want {
			t.Fatalf("round %d: changed=%v err=%v, want changed=%v", i, changed, err, want)
		}
	}
	meta, _ := client.Nodes().Meta().Read("node-1", nil)
	if got := meta.Meta[gpumeta.KeyTopology]; got != "v1;pci=18,2a,3a,5d,9a,ab,ba,db;nvlink=0-3,4-7;numa=0:0-3,1:4-7" {
		t.Errorf("published topology %q", got)
	}
	if meta.Meta["rack"] != "r1" {
		t.Errorf("the agent disturbed static meta: %v", meta.Meta)
	}
	snap, err = d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := snap.Nodes[0]
	var domains, numa []int
	for _, g := range n.GPUs {
		domains, numa = append(domains, g.Domain), append(numa, g.NUMA)
	}
	if n.TopologyGuessed || !cmp.Equal(domains, []int{0, 0, 0, 0, 1, 1, 1, 1}) || !cmp.Equal(numa, []int{0, 0, 0, 0, 1, 1, 1, 1}) {
		t.Errorf("driver read guessed=%v domains=%v numa=%v", n.TopologyGuessed, domains, numa)
	}

	// A GPU falls off the bus: the agent republishes and unsets its key.
	r.gpus = dgx(7)
	if changed, err := a.Once(ctx); err != nil || !changed {
		t.Fatalf("after a change: changed=%v err=%v", changed, err)
	}
	meta, _ = client.Nodes().Meta().Read("node-1", nil)
	if _, ok := meta.Meta["berth.gpu.g7"]; ok || meta.Meta[gpumeta.KeyCount] != "7" {
		t.Errorf("stale keys left: %v", meta.Meta)
	}
	if !strings.Contains(log.String(), "published berth.gpu.topology=") {
		t.Errorf("log: %q", log.String())
	}
	// Nomad's instances no longer all match the topology: the driver
	// falls back to a guess rather than trusting half of it.
	snap, _ = d.Observe(ctx)
	if !snap.Nodes[0].TopologyGuessed {
		t.Errorf("a topology that misses a GPU must not be trusted")
	}
}

func TestDiff(t *testing.T) {
	s := func(v string) *string { return &v }
	got := Diff(map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"a": "1", "b": "9", "d": "4"})
	want := map[string]*string{"b": s("9"), "c": nil, "d": s("4")}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// TestPublishAndObserveMIG: the agent publishes a MIG-enabled GPU's
// instances (berth.gpu.g2.mig); the driver gives each instance Nomad shows
// its parent's NUMA node and a Domain of the parent's own; when MIG is
// turned off the agent unsets the key.
func TestPublishAndObserveMIG(t *testing.T) {
	const a100, mig = "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
	var gpus []gpumeta.GPU
	for i, bus := range []string{"18", "2A", "BA", "DB"} {
		gpus = append(gpus, gpumeta.GPU{Index: i, UUID: "GPU-" + bus, Model: a100, MemoryMiB: 81920,
			PCIBusID: "00000000:" + bus + ":00.0", NUMA: i / 2, Domain: []int{0, 0, 1, 2}[i]})
	}
	gpus[3].Model = "NVIDIA L40S"
	fakeNode := nomadfake.Node{ID: "node-1", Name: "a100-1", GPUModel: a100, GPUMemoryMiB: 81920}
	for _, i := range []int{0, 1, 3} {
		g := nomadfake.GPU{ID: gpus[i].UUID, PCIBusID: strings.ToLower(gpus[i].PCIBusID), Healthy: true}
		if i == 3 {
			g.Model, g.MemoryMiB = "NVIDIA L40S", 46068
		}
		fakeNode.GPUs = append(fakeNode.GPUs, g)
	}
	for k := range 7 {
		id := fmt.Sprintf("MIG-%08d-0000-5000-8000-000000000000", k)
		gpus[2].MIG = append(gpus[2].MIG, id)
		fakeNode.GPUs = append(fakeNode.GPUs, nomadfake.GPU{ID: id, PCIBusID: "00000000:ba:00.0", Healthy: true, Model: mig, MemoryMiB: 9728})
	}
	fake := nomadfake.New()
	fake.AddNode(fakeNode)
	url := fake.Start(t).URL
	client, err := api.NewClient(&api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	r := &fixedReader{gpus: gpus}
	a := &Agent{Reader: r, Client: client, NodeID: "node-1"}
	ctx := context.Background()
	if _, err := a.Once(ctx); err != nil {
		t.Fatal(err)
	}
	meta, _ := client.Nodes().Meta().Read("node-1", nil)
	if got := meta.Meta["berth.gpu.g2.mig"]; got != strings.Join(gpus[2].MIG, ",") {
		t.Errorf("berth.gpu.g2.mig = %q", got)
	}
	if got := meta.Meta[gpumeta.KeyTopology]; got != "v1;pci=18,2a,ba,db;nvlink=0-1,2,3;numa=0:0-1,1:2-3" {
		t.Errorf("topology %q", got)
	}
	d, _ := nomad.New(nomad.Config{Address: url})
	snap, err := d.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := snap.Nodes[0]
	var got []string
	for _, g := range n.GPUs {
		got = append(got, fmt.Sprintf("%d %s d%d n%d", g.Index, g.ID[:6], g.Domain, g.NUMA))
	}
	want := []string{"0 GPU-18 d0 n0", "1 GPU-2A d0 n0", "3 GPU-DB d2 n1"}
	for k := range 7 {
		want = append(want, fmt.Sprintf("%d MIG-00 d5 n1", 4+k))
	}
	if n.TopologyGuessed || !cmp.Equal(got, want) {
		t.Errorf("guessed=%v GPUs %q\nwant %q", n.TopologyGuessed, got, want)
	}

	// MIG turned off: the key goes.
	r.gpus = append([]gpumeta.GPU(nil), gpus...)
	r.gpus[2].MIG = nil
	if changed, err := a.Once(ctx); err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	meta, _ = client.Nodes().Meta().Read("node-1", nil)
	if v, ok := meta.Meta["berth.gpu.g2.mig"]; ok {
		t.Errorf("berth.gpu.g2.mig left: %q", v)
	}
}

// TestOpenWaitsForTheDriver: without NVML, Open says why once and tries
// again every interval, quietly, until a try succeeds (it says so), or
// until its context ends.
func TestOpenWaitsForTheDriver(t *testing.T) {
	missing := errors.New("NVML is not available on this node: the NVIDIA kernel driver is not loaded")
	tries := 0
	open := func() (Reader, error) {
		if tries++; tries < 4 {
			return nil, missing
		}
		return &fixedReader{gpus: dgx(2)}, nil
	}
	var log bytes.Buffer
	r, err := Open(context.Background(), open, time.Millisecond, &log)
	if err != nil || r == nil || tries != 4 {
		t.Fatalf("Open = %v, %v after %d tries; want the reader after 4", r, err, tries)
	}
	want := "berth agent: " + missing.Error() + "; publishing nothing, trying again every 1ms\nberth agent: NVML is available (try 4)\n"
	if d := cmp.Diff(want, log.String()); d != "" {
		t.Errorf("log (-want +got)\n%s", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	log.Reset()
	tries = 0
	r, err = Open(ctx, func() (Reader, error) { tries++; return nil, missing }, time.Millisecond, &log)
	if r != nil || !errors.Is(err, context.DeadlineExceeded) || tries < 2 {
		t.Errorf("Open without a driver = %v, %v after %d tries; want the context's error after tries", r, err, tries)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 {
		t.Errorf("Open logged %d lines without a driver, want 1:\n%s", n, log.String())
	}

	// A berth without cgo never loads NVML: no wait.
	tries = 0
	r, err = Open(context.Background(), func() (Reader, error) { tries++; return nil, fmt.Errorf("agent: %w", ErrNoCgo) }, time.Millisecond, nil)
	if r != nil || !errors.Is(err, ErrNoCgo) || tries != 1 {
		t.Errorf("Open in a build without cgo = %v, %v after %d tries; want ErrNoCgo after 1", r, err, tries)
	}
}
