package replay

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestReadPhilly(t *testing.T) {
	in := "timestamp,duration,num_gpus,gpu_time,cluster\n" +
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
		"2017-10-09 06:13:03,2951.0,16,47216.0,6214e9\n" +
		"\n"
	jobs, err := Read(strings.NewReader(in), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "j000001", Submit: time.Date(2017, 10, 9, 6, 13, 3, 0, time.UTC), Duration: 2951 * time.Second, GPUs: 16, Project: "vc-6214e9", Checkpoint: -1, Source: FormatPhilly, Line: 3},
		{ID: "j000002", Submit: time.Date(2017, 10, 9, 7, 1, 55, 0, time.UTC), Duration: 66 * time.Second, GPUs: 1, Project: "vc-11cb48", Checkpoint: -1, Source: FormatPhilly, Line: 2},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("sorted by submit, numbered in that order (-want +got)\n%s", diff)
	}
}

func TestReadCSV(t *testing.T) {
	in := "# my cluster's history\nsubmit,duration,gpus,project,tier,checkpoint\n" +
		"2026-01-01T00:10:00Z,1h,8,vision,high,15m\n" +
		"0,3600,2,nlp,,\n"
	jobs, err := Read(strings.NewReader(in), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "j000001", Submit: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Duration: time.Hour, GPUs: 2, Project: "nlp", Checkpoint: -1, Source: FormatCSV, Line: 4},
		{ID: "j000002", Submit: time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC), Duration: time.Hour, GPUs: 8, Project: "vision", Tier: "high", Checkpoint: 15 * time.Minute, Source: FormatCSV, Line: 3},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// WriteCSV writes what Read reads back.
	var buf bytes.Buffer
	if err := WriteCSV(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "submit,duration,gpus,project,tier,checkpoint\n") {
		t.Errorf("jobs of no kind: WriteCSV wrote %q, want no gpu_kind column", buf.String())
	}
	again, err := Read(&buf, FormatCSV)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, again, wherever); diff != "" {
		t.Errorf("round trip (-want +got)\n%s", diff)
	}
}

// wherever compares jobs without where the trace gave them.
var wherever = cmpopts.IgnoreFields(Job{}, "File", "Line")

// TestReadCSVKinds: the gpu_kind column, in any place, names each job's
// kind (empty: none); WriteCSV writes it back when a job has one.
func TestReadCSVKinds(t *testing.T) {
	in := "gpu_kind,submit,duration,gpus,project\n" +
		"h100,0,1h,8,vision\n" +
		",60,1h,1,nlp\n" +
		"NVIDIA A100-SXM4-80GB MIG 1g.10gb,120,10m,1,nlp\n"
	jobs, err := Read(strings.NewReader(in), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, fmt.Sprintf("%s line %d: %q", j.ID, j.Line, j.Kind))
	}
	want := []string{`j000001 line 2: "h100"`, `j000002 line 3: ""`, `j000003 line 4: "NVIDIA A100-SXM4-80GB MIG 1g.10gb"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "submit,duration,gpus,project,tier,checkpoint,gpu_kind\n") {
		t.Errorf("WriteCSV wrote %q, want a gpu_kind column", buf.String())
	}
	again, err := Read(&buf, FormatCSV)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, again, wherever); diff != "" {
		t.Errorf("round trip (-want +got)\n%s", diff)
	}
}

func TestReadErrors(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"no header":      {"", "empty trace"},
		"missing column": {"submit,duration,gpus\n0,1,1\n", `no "project" column`},
		"bad gpus":       {"submit,duration,gpus,project\n0,1,zero,p\n", `line 2: gpus "zero"`},
		"bad duration":   {"submit,duration,gpus,project\n0,-5,1,p\n", `line 2: duration "-5"`},
		"bad submit":     {"submit,duration,gpus,project\nyesterday,5,1,p\n", `line 2: submit "yesterday"`},
		"philly bad ts":  {"timestamp,duration,num_gpus,gpu_time,cluster\n10/09/2017,1,1,1,x\n", `line 2: timestamp "10/09/2017"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.in), "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestReadFiles: several files read as one trace, merged by submit time
// (ties: file order, then line order), each file's format detected from
// its own header, the IDs numbered over the whole; one file reads as
// ReadFile reads it; a mistake is reported with its file's name.
func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	philly := write("philly.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"+
		"2017-10-09 07:00:00,60,1,60,p1\n"+
		"2017-10-09 06:00:00,60,2,120,p2\n")
	generic := write("generic.csv", "submit,duration,gpus,project\n"+
		"2017-10-09T07:00:00Z,60,3,g1\n"+
		"2017-10-09T06:30:00Z,60,4,g2\n"+
		"2017-10-09T07:00:00Z,60,5,g3\n")
	jobs, err := ReadFiles([]string{philly, generic}, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, fmt.Sprintf("%s %s %s %d %s", j.ID, j.Submit.Format("15:04"), j.Project, j.GPUs, j.Source))
	}
	want := []string{
		"j000001 06:00 vc-p2 2 philly",
		"j000002 06:30 g2 4 csv",
		"j000003 07:00 vc-p1 1 philly", // a tie: the first file first,
		"j000004 07:00 g1 3 csv",       // then the second's in line order
		"j000005 07:00 g3 5 csv",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged by submit, ties in file then line order, numbered over the whole (-want +got)\n%s", diff)
	}

	// The halves of a trace read as the whole does.
	whole, err := ReadFile("testdata/philly-sample.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/philly-sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	half := 1 + (len(lines)-1)/2
	first := write("first.csv", strings.Join(lines[:half], ""))
	second := write("second.csv", lines[0]+strings.Join(lines[half:], ""))
	halves, err := ReadFiles([]string{first, second}, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(whole, halves, wherever); diff != "" {
		t.Errorf("the halves of philly-sample.csv read otherwise than the whole (-whole +halves)\n%s", diff)
	}
	one, err := ReadFiles([]string{"testdata/philly-sample.csv"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(whole, one); diff != "" {
		t.Errorf("one file (-ReadFile +ReadFiles)\n%s", diff)
	}

	// Errors name the file at fault; --format applies to every file.
	bad := write("bad.csv", "submit,duration,gpus,project\n0,1h,two,a\n")
	if _, err := ReadFiles([]string{philly, bad}, ""); err == nil || !strings.Contains(err.Error(), bad+": line 2: gpus \"two\"") {
		t.Errorf("a bad second file: error %v, want it to name %s and its line", err, bad)
	}
	if _, err := ReadFiles([]string{generic, philly}, FormatCSV); err == nil || !strings.HasPrefix(err.Error(), philly+": ") {
		t.Errorf("a Philly file read as CSV: error %v, want it to name %s", err, philly)
	}
	if _, err := ReadFiles([]string{philly, filepath.Join(dir, "missing.csv")}, ""); err == nil || !strings.Contains(err.Error(), "missing.csv") {
		t.Errorf("a missing file: error %v, want it to name the file", err)
	}
}

// TestMapDuplicateIDs: two jobs of one ID (their workspace's name) are
// refused: the replay would take them for one workspace, and never end.
func TestMapDuplicateIDs(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := []Job{
		{ID: "j000001", Submit: at, Duration: time.Hour, GPUs: 1, Project: "a", Checkpoint: -1},
		{ID: "j000001", Submit: at, Duration: time.Hour, GPUs: 1, Project: "b", Checkpoint: -1},
	}
	if _, err := Map(jobs, 8, 8, DefaultMapping()); err == nil || !strings.Contains(err.Error(), "job j000001: the ID of an earlier job") {
		t.Errorf("two jobs j000001: error %v, want the duplicate named", err)
	}
}

func TestMap(t *testing.T) {
	var jobs []Job
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		jobs = append(jobs, Job{Submit: at.Add(time.Duration(i) * time.Minute), Duration: time.Duration(i%60+1) * time.Minute, GPUs: 1, Project: "a", Checkpoint: -1})
	}
	for i := range 20 {
		jobs = append(jobs, Job{Submit: at.Add(time.Duration(i) * time.Minute), Duration: 3 * time.Hour, GPUs: 12, Project: "b", Checkpoint: -1})
	}
	jobs = append(jobs, Job{Submit: at, Duration: time.Hour, GPUs: 1024, Project: "b", Checkpoint: -1})
	for i := range jobs {
		jobs[i].ID = "j" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	wl, err := Map(jobs, 64, 8, DefaultMapping())
	if err != nil {
		t.Fatal(err)
	}
	if mw, def := wl.Base.Policy.Spec.Aging.MaxWait, schema.DefaultPolicy().Spec.Aging.MaxWait; mw != def {
		t.Errorf("the default mapping replays berth with aging.maxWait %s, want its default policy's %s", mw, def)
	}
	for _, mw := range []time.Duration{24 * time.Hour, 0} {
		bound := DefaultMapping()
		bound.MaxWait = mw
		if wb, err := Map(jobs, 64, 8, bound); err != nil || wb.Base.Policy.Spec.Aging.MaxWait != mw {
			t.Errorf("Mapping.MaxWait %s: the replayed policy's aging.maxWait is %v (%v)", mw, wb.Base.Policy.Spec.Aging.MaxWait, err)
		}
	}
	if wl.Skipped != 1 {
		t.Errorf("skipped %d, want the 1024-GPU job", wl.Skipped)
	}
	count := map[string]int{}
	for _, j := range wl.Jobs {
		count[j.Ref.Project+"/"+j.Workspace().Spec.Tier]++
		if j.Ref.Project != j.Tenant {
			t.Errorf("%s: project %s; want one berth project per trace project, %s", j.ID, j.Ref.Project, j.Tenant)
		}
		if j.Tenant == "b" && (j.Replicas != 2 || j.PerGPUs != 8 || j.Checkpoint != 30*time.Minute) {
			t.Errorf("%s: %d×%d GPUs, checkpoint %s; want a gang of 2×8 saving every 30m", j.ID, j.Replicas, j.PerGPUs, j.Checkpoint)
		}
		if j.Tenant == "a" && j.Checkpoint != 0 {
			t.Errorf("%s: a job of at most an hour checkpoints every %s", j.ID, j.Checkpoint)
		}
	}
	want := map[string]int{"a/high": 10, "a/medium": 30, "a/low": 60, "b/high": 2, "b/medium": 6, "b/low": 12}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("exact tier shares per project, each job's tier its workspace's own (-want +got)\n%s", diff)
	}
	if len(wl.Base.Projects) != 2 {
		t.Errorf("%d berth projects, want one per trace project", len(wl.Base.Projects))
	}
	total := 0
	for _, p := range wl.Base.Projects {
		total += p.Spec.Quota.GPUs
	}
	if total != 64 {
		t.Errorf("quotas add up to %d, want the cluster's 64", total)
	}
	// b asks 20×3h×16 GPU-hours, a 100 jobs of 1–60 minutes on 1 GPU.
	if got := wl.Projects[1]; got.Name != "b" || got.Quota < 55 {
		t.Errorf("project b: %+v, want most of the quota", got)
	}
}
