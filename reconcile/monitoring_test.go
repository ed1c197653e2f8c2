package reconcile

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"sigs.k8s.io/yaml"
)

// The Grafana board and the alert rules berth ships
// (examples/monitoring) name only metrics a running loop serves: a loop
// over the simulator, where a workspace waits and then starts and two
// move off a draining node, is scraped, and every berth_ metric any panel
// query or rule names is in the scrape (a histogram's _bucket, _sum and
// _count are its own name's).
func TestMonitoringNamesServedMetrics(t *testing.T) {
	names := map[string][]string{} // metric → where it is named
	board, err := os.ReadFile("../examples/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(board, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			note(names, tg.Expr, "panel "+p.Title)
		}
	}
	rules, err := os.ReadFile("../examples/monitoring/berth-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf struct { // Prometheus's rule file, strictly: a misspelt field fails
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For    string
				Labels, Annotations map[string]string
			}
		}
	}
	if err := yaml.UnmarshalStrict(rules, &rf); err != nil {
		t.Fatalf("berth-alerts.yaml: %v", err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("a rule without its alert name, expr, severity or summary: %+v", r)
			}
			note(names, r.Expr, "alert "+r.Alert)
		}
	}
	if len(names) < 10 {
		t.Fatalf("%d metrics named in the board and rules; want the board's dozen at least", len(names))
	}

	synctest.Test(t, func(t *testing.T) {
		// Three 2-GPU workspaces on two nodes of two GPUs, berth's own
		// decision: a and b run, c waits; a is stopped and c starts after
		// its wait; then c's node drains, c moves and waits for room.
		ws := func(name string, state schema.DesiredState) schema.Workspace {
			w := workspace("med", name, state)
			w.Spec.Resources.GPUs = 2
			return w
		}
		running := withWorkspaces(ws("a", schema.DesiredRunning), ws("b", schema.DesiredRunning), ws("c", schema.DesiredRunning))
		stopped := withWorkspaces(ws("a", schema.DesiredStopped), ws("b", schema.DesiredRunning), ws("c", schema.DesiredRunning))
		for _, set := range []*schema.Set{running, stopped} {
			for i := range set.Projects {
				set.Projects[i].Spec.Quota.GPUs = 6
			}
		}
		spec, err := sim.Parse([]byte(twoNodes))
		if err != nil {
			t.Fatal(err)
		}
		clk := sim.NewManualClock(time.Now())
		c := sim.New(*spec, clk)
		src := &fakeSource{rev: "r1", clock: clk}
		l, err := New(Config{Source: src, Cluster: c, Store: c, Load: testSets{"r1": running, "r2": stopped}.load, Decide: policies.Decide, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{loop: l, cluster: c, source: src, clock: clk}
		once := func() {
			t.Helper()
			res, err := h.loop.Once(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range res.Transitions {
				t.Logf("%s: %s -> %s %s", tr.Workspace, tr.From, tr.To, tr.Reason)
			}
		}
		once()
		h.sleep(sim.DefaultStartDelay + time.Minute)
		once()
		h.source.set("r2")
		once()
		h.sleep(time.Minute) // a's grace
		once()
		h.sleep(sim.DefaultStartDelay + time.Minute)
		once()
		cNode := h.status(t, schema.Ref{Project: "med", Name: "c"}).Node
		if err := h.cluster.SetNodeDraining(cNode, true, h.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		once()
		h.sleep(time.Minute)
		once()

		mfs, err := h.loop.Metrics().Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		served := map[string]float64{} // a counter's or a histogram's total, summed over its series
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				served[mf.GetName()] += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
			if _, ok := served[mf.GetName()]; !ok {
				served[mf.GetName()] = 0
			}
		}
		for name, where := range names {
			if _, ok := served[name]; !ok {
				t.Errorf("%s (named by %s) is not served", name, strings.Join(where, ", "))
			}
		}
		if served["berth_wait_seconds"] < 1 {
			t.Errorf("berth_wait_seconds observed %v starts after a wait, want c's", served["berth_wait_seconds"])
		}
		if served["berth_moves_total"] < 1 {
			t.Errorf("berth_moves_total is %v after the node drained, want its workspaces' moves", served["berth_moves_total"])
		}
	})
}

// metricName is a berth metric in a PromQL expression; suffix is a
// histogram's series.
var (
	metricName = regexp.MustCompile(`\bberth_[a-z0-9_]+`)
	suffix     = regexp.MustCompile(`_(bucket|sum|count)$`)
)

// note adds the berth metrics expr names to names, as from where.
func note(names map[string][]string, expr, where string) {
	for _, n := range metricName.FindAllString(expr, -1) {
		n = suffix.ReplaceAllString(n, "")
		if !slices.Contains(names[n], where) {
			names[n] = append(names[n], where)
		}
	}
}
