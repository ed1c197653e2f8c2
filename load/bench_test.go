package load

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

// writeRepo writes a valid generated spec repo of n files into dir: four
// tiers, one project per 100 files, one volume, and a workspace in every
// other file.
func writeRepo(tb testing.TB, dir string, n int) {
	tb.Helper()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for i, t := range []string{"low", "medium", "high", "highest"} {
		write("tiers/"+t+".yaml", fmt.Sprintf("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: %s}\nspec:\n  value: %d\n", t, 20+i*25))
	}
	projects := max(1, n/100)
	var names string
	for p := range projects {
		names += fmt.Sprintf("  - team-%d\n", p)
	}
	write("volumes/shared.yaml", "apiVersion: berth.dev/v1\nkind: Volume\nmetadata: {name: shared}\nspec:\n  size: 10Ti\n  projects:\n"+names)
	for p := range projects {
		write(fmt.Sprintf("team-%d/project.yaml", p), fmt.Sprintf(`apiVersion: berth.dev/v1
kind: Project
metadata:
  name: team-%d
spec:
  tier: %s
  members: [user-%d, user-%d]
  quota: {gpus: 64, cpu: 512, memory: 4Ti}
  borrowLimit: {gpus: 32}
  fairShare: {weight: %d}
`, p, []string{"low", "medium", "high"}[p%3], p, p+1, 1+p%4))
	}
	for i := range n - projects - 5 {
		p := i % projects
		write(fmt.Sprintf("team-%d/ws-%05d.yaml", p, i), fmt.Sprintf(`apiVersion: berth.dev/v1
kind: Workspace
metadata:
  name: ws-%d
  project: team-%d
  labels: {purpose: training}
spec:
  owner: user-%d
  state: Running
  task:
    image: nvcr.io/nvidia/pytorch:24.10-py3
    command: torchrun
    args: [--nproc-per-node=%d, train.py]
    env: {RUN_ID: "%d"}
  resources: {gpus: %d, cpu: 8, memory: 64Gi}
  topology: {nvlink: preferred}
  replicas: %d
  volumes:
  - {name: shared, mountPath: /data, readOnly: true}
  checkpoint: {signal: SIGUSR1, gracePeriod: 2m, interval: 30m}
`, i, p, p, 1+i%8, i, 1+i%8, 1+i%4))
	}
}

// BenchmarkValidate loads generated repos of 1,000 and 10,000 files.
// scripts/bench-validate-vs-cue.sh compares it with `cue vet` and reports
// peak memory.
func BenchmarkValidate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("files="+strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			writeRepo(b, dir, n)
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for b.Loop() {
				set, diags, err := Paths(dir)
				if err != nil {
					b.Fatal(err)
				}
				if set == nil {
					b.Fatalf("generated repo is invalid: %v", diags.Err())
				}
			}
			// CPU time is steadier than wall time on a shared machine.
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N)/1e9, "cpu-s/op")
		})
	}
}

// TestGeneratedRepo checks the generator writes a valid repo, and writes
// one to $BERTH_GEN_DIR (of $BERTH_GEN_FILES files) for the comparison
// script.
func TestGeneratedRepo(t *testing.T) {
	dir, n := t.TempDir(), 200
	if d := os.Getenv("BERTH_GEN_DIR"); d != "" {
		dir = d
		if v, err := strconv.Atoi(os.Getenv("BERTH_GEN_FILES")); err == nil {
			n = v
		}
	}
	writeRepo(t, dir, n)
	r, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Diagnostics.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Summary.Files != n {
		t.Errorf("generated %d files, want %d", r.Summary.Files, n)
	}
}

// largeDocument is one Workspace of about size bytes: half a list of
// arguments, half a mapping of environment variables.
func largeDocument(size int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w, project: p}\nspec:\n  resources: {gpus: 1}\n  task:\n    image: x\n    args:\n")
	n := size / 100
	for i := range n {
		fmt.Fprintf(&b, "      - \"value-%d-abcdefghijklmnopqrstuvwxyz\"\n", i)
	}
	b.WriteString("    env:\n")
	for i := range n {
		fmt.Fprintf(&b, "      K%d: \"value-%d-abcdefghijklmnopqrstuvwxyz\"\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkLargeDocument loads one document of 1 MB and of 10 MB: the
// time must grow linearly (issue 14 measured 14.9 s for 10 MB; CUE looks
// up each value of a collection by a scan of its siblings, so the loader
// hands it large collections in pieces).
func BenchmarkLargeDocument(b *testing.B) {
	for _, mb := range []int{1, 10} {
		b.Run(fmt.Sprintf("MB=%d", mb), func(b *testing.B) {
			fsys := fstest.MapFS{"w.yaml": {Data: largeDocument(mb << 20)}}
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for b.Loop() {
				r, err := CheckFS(fsys, ".")
				if err != nil {
					b.Fatal(err)
				}
				if r.Summary.Workspaces != 1 {
					b.Fatalf("read %d workspaces: %v", r.Summary.Workspaces, r.Diagnostics)
				}
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N)/1e9, "cpu-s/op")
		})
	}
}

// BenchmarkValidateOneFileChanged loads a generated repo of 10,000 files
// through a Cache after one workspace's file changed (issue 25): the file
// is parsed and validated again, the rest comes from the cache, and the
// checks that span documents run over all of them. BenchmarkValidate is
// the same tree loaded whole.
func BenchmarkValidateOneFileChanged(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	writeRepo(b, dir, n)
	cache := &Cache{}
	if _, err := CheckWith(Options{Cache: cache}, dir); err != nil {
		b.Fatal(err)
	}
	changed := filepath.Join(dir, "team-0", "ws-00000.yaml")
	orig, err := os.ReadFile(changed)
	if err != nil {
		b.Fatal(err)
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	i := 0
	for b.Loop() {
		i++
		body := strings.Replace(string(orig), `RUN_ID: "0"`, fmt.Sprintf("RUN_ID: %q", strconv.Itoa(i)), 1)
		if err := os.WriteFile(changed, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		r, err := CheckWith(Options{Cache: cache}, dir)
		if err != nil {
			b.Fatal(err)
		}
		if r.Set == nil {
			b.Fatalf("generated repo is invalid: %v", r.Diagnostics.Err())
		}
		if st := cache.Stats(); st.FilesParsed != 1 {
			b.Fatalf("parsed %d files, want 1", st.FilesParsed)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N)/1e9, "cpu-s/op")
}
