package replay

import (
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"
)

const fullTrace = "../../shared/traces/philly-pollux/philly.csv"

// BenchmarkSimulate replays the whole Philly trace under the four
// policies when ../shared holds it, and prints the table.
func BenchmarkSimulate(b *testing.B) {
	if _, err := os.Stat(fullTrace); err != nil {
		b.Skip("no Philly trace at " + fullTrace)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for b.Loop() {
		start := time.Now()
		jobs, err := ReadFile(fullTrace, "")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := strconv.Atoi(os.Getenv("BERTH_SIM_LIMIT")); err == nil && n > 0 {
			jobs = jobs[:min(n, len(jobs))]
		}
		spec := DefaultCluster()
		gpus, per := Shape(spec)
		m := DefaultMapping()
		wl, err := Map(jobs, gpus, per, m)
		if err != nil {
			b.Fatal(err)
		}
		pols := Policies()
		if p := os.Getenv("BERTH_SIM_POLICY"); p != "" {
			pp, _ := PolicyByName(p)
			pols = []Policy{pp}
		}
		opt := Options{Parallel: 2}
		opt.Verify, _ = strconv.Atoi(os.Getenv("BERTH_SIM_VERIFY"))
		rep, err := Run(wl, spec, m, pols, opt)
		if err != nil {
			b.Fatal(err)
		}
		rep.WriteTable(os.Stdout)
		for _, p := range rep.Policies {
			b.Logf("%s: %+v", p.Name, p.Timing)
		}
		b.Logf("wall %s", time.Since(start))
	}
}
