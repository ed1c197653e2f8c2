package replay

import (
	"os"
	"testing"
	"time"
)

const fullTrace = "../../../../shared/traces/philly-pollux/philly.csv"

// BenchmarkSimulate replays the whole Philly trace under the four
// policies when ../shared holds it, and prints the table.
func BenchmarkSimulate(b *testing.B) {
	if _, err := os.Stat(fullTrace); err != nil {
		b.Skip("no Philly trace at " + fullTrace)
	}
	for b.Loop() {
		start := time.Now()
		jobs, err := ReadFile(fullTrace, "")
		if err != nil {
			b.Fatal(err)
		}
		if n := os.Getenv("BERTH_SIM_LIMIT"); n != "" {
			var k int
			for _, c := range n {
				k = k*10 + int(c-'0')
			}
			jobs = jobs[:min(k, len(jobs))]
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
		rep, err := Run(wl, spec, m, pols, Options{Parallel: 2})
		if err != nil {
			b.Fatal(err)
		}
		rep.WriteTable(os.Stdout)
		b.Logf("wall %s", time.Since(start))
	}
}
