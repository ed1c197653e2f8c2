package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/replay"
	"github.com/google/go-cmp/cmp"
)

// sampleHead writes the header and the first n jobs of the replay's
// sample trace (in submit order) to dir/name and returns its path and
// its lines.
func sampleHead(t *testing.T, dir, name string, n int) (string, []string) {
	t.Helper()
	b, err := os.ReadFile("../../replay/testdata/philly-sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")[:1+n]
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, lines
}

// TestSimulateTraceFiles: a trace given as several files, --trace
// repeated, replays as the whole trace in one file does, and the report
// names every file.
func TestSimulateTraceFiles(t *testing.T) {
	dir := t.TempDir()
	whole, lines := sampleHead(t, dir, "whole.csv", 300)
	// The halves, the later one first: the order of the files does not
	// matter but for ties.
	first, second := filepath.Join(dir, "first.csv"), filepath.Join(dir, "second.csv")
	if err := os.WriteFile(first, []byte(strings.Join(lines[:151], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, []byte(lines[0]+strings.Join(lines[151:], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	simulate := func(traces ...string) replay.Report {
		t.Helper()
		args := []string{"simulate", "--cluster", "../../replay/testdata/cluster-64.yaml", "--output", "json"}
		for _, tr := range traces {
			args = append(args, "--trace", tr)
		}
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("berth %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		var rep replay.Report
		if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
			t.Fatal(err)
		}
		// What measures the machine.
		for i := range rep.Policies {
			tm := &rep.Policies[i].Timing
			tm.P50Millis, tm.P99Millis, tm.TotalSeconds = 0, 0, 0
			for k := range tm.Months {
				tm.Months[k].DecideMillis, tm.Months[k].LoopMillis = 0, 0
			}
		}
		return rep
	}
	want := simulate(whole)
	got := simulate(second, first)
	if got.Trace.Name != second+", "+first {
		t.Errorf("the report names the trace %q, want both files in the order given", got.Trace.Name)
	}
	if want.Trace.Jobs != 300 {
		t.Fatalf("the whole trace: %d jobs, want 300", want.Trace.Jobs)
	}
	got.Trace.Name = want.Trace.Name
	if diff := cmp.Diff(reportJSON(t, want), reportJSON(t, got)); diff != "" {
		t.Errorf("the halves replay otherwise than the whole (-whole +halves)\n%s", diff)
	}
}

// reportJSON is rep as JSON, indented: the report's figures, without
// its unexported fields.
func reportJSON(t *testing.T, rep replay.Report) string {
	t.Helper()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProgressLog: the line a log that is no terminal gets at each tick
// of its ticker, and none before the first.
func TestProgressLog(t *testing.T) {
	began := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var pols []replay.Policy
	for _, name := range []string{"fifo", "nomad", "quota", "berth"} {
		p, _ := replay.PolicyByName(name)
		pols = append(pols, p)
	}
	var out strings.Builder
	l := newProgressLog(&out, pols, began)
	ticks := make(chan time.Time)
	stop := l.start(ticks)
	l.update(replay.Progress{Policy: "fifo", Now: time.Date(2017, 11, 20, 9, 30, 0, 0, time.UTC), Done: 101234, Total: 246741})
	// quota ends with jobs that could never run.
	l.update(replay.Progress{Policy: "quota", Now: time.Date(2017, 12, 14, 0, 0, 0, 0, time.UTC), Done: 246700, Total: 246741, Finished: true})
	l.update(replay.Progress{Policy: "berth", Now: time.Date(2017, 10, 3, 0, 0, 0, 0, time.UTC), Done: 999, Total: 246741})
	ticks <- began.Add(3*time.Minute + 20*time.Millisecond)
	l.update(replay.Progress{Policy: "berth", Now: time.Date(2017, 10, 4, 0, 0, 0, 0, time.UTC), Done: 24675, Total: 246741})
	l.update(replay.Progress{Policy: "nomad", Now: time.Date(2017, 10, 1, 0, 0, 0, 0, time.UTC), Total: 246741})
	ticks <- began.Add(time.Hour + 4*time.Minute)
	stop()
	want := "simulate: 3m00s: fifo 41% (2017-11-20, 101,234/246,741 jobs), nomad waiting, quota done, berth 0% (2017-10-03, 999/246,741 jobs)\n" +
		"simulate: 1h04m00s: fifo 41% (2017-11-20, 101,234/246,741 jobs), nomad 0% (2017-10-01, 0/246,741 jobs), quota done, berth 10% (2017-10-04, 24,675/246,741 jobs)\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("progress lines (-want +got)\n%s", diff)
	}

	out.Reset()
	newProgressLog(&out, pols, began).start(make(chan time.Time))()
	if out.Len() > 0 {
		t.Errorf("stopped before its first tick, the log wrote %q", out.String())
	}
}

// TestSimulateProgress: on a stderr that is no terminal, a replay done
// within the interval (a minute) writes nothing; one that lasts longer
// writes a line each interval.
func TestSimulateProgress(t *testing.T) {
	path, _ := sampleHead(t, t.TempDir(), "trace.csv", 300)
	jobs, err := replay.ReadFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sim.ReadFile("../../replay/testdata/cluster-64.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := replay.DefaultMapping()
	wl, err := replay.MapCluster(jobs, *spec, m)
	if err != nil {
		t.Fatal(err)
	}
	var pols []replay.Policy
	for _, name := range []string{"fifo", "berth"} {
		p, _ := replay.PolicyByName(name)
		pols = append(pols, p)
	}

	var quiet strings.Builder
	o := simulateOptions{}
	if _, err := o.replay(&quiet, wl, *spec, m, pols); err != nil {
		t.Fatal(err)
	}
	if quiet.Len() > 0 {
		t.Errorf("a replay of under a minute wrote progress: %q", quiet.String())
	}

	var out strings.Builder
	o.progressEvery = time.Millisecond
	if _, err := o.replay(&out, wl, *spec, m, pols); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^simulate: \d+m\d\ds: fifo (waiting|done|\d+% \(2017-\d\d-\d\d, \d+/300 jobs\)), berth (waiting|done|\d+% \(2017-\d\d-\d\d, \d+/300 jobs\))$`)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if out.Len() == 0 {
		t.Fatal("a replay longer than the interval wrote no progress")
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("progress line %q, want it to match %s", l, line)
		}
	}
}
