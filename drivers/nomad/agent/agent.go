package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
	"github.com/hashicorp/nomad/api"
)

// Reader reads the node's GPUs. NVMLReader is the real one.
type Reader interface {
	Read() ([]gpumeta.GPU, error)
	Close() error
}

// Agent publishes what Reader sees as node metadata through the local
// Nomad client agent.
type Agent struct {
	Reader Reader
	Client *api.Client
	// NodeID is the node to write; empty means the client agent's own.
	NodeID string
	// Interval between reads (default 30s).
	Interval time.Duration
	// Log receives one line per change; nil discards.
	Log io.Writer
}

// Once reads the GPUs and, when the node's berth.gpu.* metadata differs,
// writes it: new and changed keys set, berth.gpu.* keys no longer wanted
// unset (null). It reports whether it wrote.
func (a *Agent) Once(ctx context.Context) (bool, error) {
	gpus, err := a.Reader.Read()
	if err != nil {
		return false, err
	}
	want := gpumeta.Encode(gpus)
	q := (&api.QueryOptions{}).WithContext(ctx)
	cur, err := a.Client.Nodes().Meta().Read(a.NodeID, q)
	if err != nil {
		return false, fmt.Errorf("agent: read node metadata: %w", err)
	}
	have := map[string]string{}
	for k, v := range cur.Dynamic {
		if strings.HasPrefix(k, gpumeta.Prefix) && v != nil {
			have[k] = *v
		}
	}
	patch := Diff(have, want)
	if len(patch) == 0 {
		return false, nil
	}
	if _, err := a.Client.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: a.NodeID, Meta: patch}, q); err != nil {
		return false, fmt.Errorf("agent: write node metadata: %w", err)
	}
	if a.Log != nil {
		fmt.Fprintf(a.Log, "berth agent: published %s=%s (%d keys changed)\n", gpumeta.KeyTopology, want[gpumeta.KeyTopology], len(patch))
	}
	return true, nil
}

// Diff returns the metadata patch that turns have into want: changed
// and new keys with their value, keys to remove with nil.
func Diff(have, want map[string]string) map[string]*string {
	patch := map[string]*string{}
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			patch[k] = &v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			patch[k] = nil
		}
	}
	return patch
}

// Run publishes now and then every Interval until ctx ends. A failed
// round is logged and retried at the next tick; the first round's error
// is returned, so a misconfigured agent exits at once.
func (a *Agent) Run(ctx context.Context) error {
	interval := a.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if _, err := a.Once(ctx); err != nil {
		return err
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := a.Once(ctx); err != nil && a.Log != nil {
				fmt.Fprintln(a.Log, "berth agent:", err)
			}
		}
	}
}

// ErrNoCgo is NewNVMLReader's error in a berth built without cgo, which
// can never load NVML.
var ErrNoCgo = errors.New("NVML is not available: this berth was built with CGO_ENABLED=0 and cannot load libnvidia-ml.so.1; use a berth built with cgo on GPU nodes")

// Open returns the Reader open gives. When open fails (a node without
// the NVIDIA driver, or with its kernel module not loaded yet), Open says
// why on log once and tries again every interval (default 30s), quietly,
// until open succeeds, saying so, or ctx ends (it then returns ctx's
// error). A system job on a GPU node without its driver so waits for it
// instead of failing and restarting over and over. ErrNoCgo, which no
// wait mends, is returned at once.
func Open(ctx context.Context, open func() (Reader, error), interval time.Duration, log io.Writer) (Reader, error) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if log == nil {
		log = io.Discard
	}
	var t *time.Ticker
	for tries := 1; ; tries++ {
		r, err := open()
		if errors.Is(err, ErrNoCgo) {
			return nil, err
		}
		if err == nil {
			if tries > 1 {
				fmt.Fprintf(log, "berth agent: NVML is available (try %d)\n", tries)
			}
			return r, nil
		}
		if t == nil {
			fmt.Fprintf(log, "berth agent: %v; publishing nothing, trying again every %s\n", err, interval)
			t = time.NewTicker(interval)
			defer t.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// Domains groups n GPUs into NVLink domains from a symmetric "linked"
// relation (union-find): GPUs linked directly or through others share a
// domain. Domains are numbered from 0 by their lowest index.
func Domains(n int, linked func(i, j int) bool) []int {
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if linked(i, j) {
				a, b := find(i), find(j)
				if a < b {
					parent[b] = a
				} else {
					parent[a] = b
				}
			}
		}
	}
	roots := map[int]int{}
	out := make([]int, n)
	for i := 0; i < n; i++ {
		r := find(i)
		if _, ok := roots[r]; !ok {
			roots[r] = len(roots)
		}
		out[i] = roots[r]
	}
	return out
}

// Summary is a human line about gpus: count, models, domains and MIG
// instances (said only where there are some).
func Summary(gpus []gpumeta.GPU) string {
	models := map[string]int{}
	domains := map[int]bool{}
	migs, parents := 0, 0
	for _, g := range gpus {
		models[g.Model]++
		domains[g.Domain] = true
		if len(g.MIG) > 0 {
			migs += len(g.MIG)
			parents++
		}
	}
	var parts []string
	for m, n := range models {
		parts = append(parts, fmt.Sprintf("%d× %s", n, m))
	}
	sort.Strings(parts)
	s := fmt.Sprintf("%d GPUs (%s) in %d NVLink domain(s)", len(gpus), strings.Join(parts, ", "), len(domains))
	if migs > 0 {
		s += fmt.Sprintf(", %d MIG instance(s) on %d of them", migs, parents)
	}
	return s
}
