package replay

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"
)

const fullTrace = "../traces/philly-pollux/philly.csv.gz"

// BenchmarkSimulate replays the whole Philly trace under the four
// policies, and prints the table.
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

// TestShippedTrace: the trace in traces/ is the file its PROVENANCE.md
// describes, and it reads compressed as it is.
func TestShippedTrace(t *testing.T) {
	f, err := os.Open(fullTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, zr); err != nil {
		t.Fatal(err)
	}
	const want = "ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("decompressed sha256 %s, want %s (traces/PROVENANCE.md)", got, want)
	}
	jobs, err := ReadFile(fullTrace, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 82247 {
		t.Errorf("%d jobs, want 82,247", len(jobs))
	}
}
