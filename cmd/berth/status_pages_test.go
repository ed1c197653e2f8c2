package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/reconcile"
	"github.com/berth-dev/berth/source"
	"github.com/berth-dev/berth/view"
)

// berth status against a loop that serves its workspaces in pages: the
// first page, the counts of all and a hint; --all lists every one.
func TestStatusPages(t *testing.T) {
	const n = view.DefaultStatusLimit + 200
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: berth.dev/v1\nkind: PriorityTier\nmetadata: {name: medium}\nspec: {value: 50}\n")
	b.WriteString("---\napiVersion: berth.dev/v1\nkind: Project\nmetadata: {name: research}\nspec: {tier: medium, quota: {gpus: 2}}\n")
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: berth.dev/v1\nkind: Workspace\nmetadata: {name: w%04d, project: research}\nspec:\n  state: Running\n  task: {driver: docker, image: x}\n  resources: {gpus: 1}\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "specs.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := sim.Parse([]byte("apiVersion: berth.dev/v1\nkind: Cluster\nmetadata: {name: two}\nspec:\n  nodes:\n  - name: n\n    gpus:\n    - {model: H100, memory: 80Gi, domain: 0, numa: 0}\n    - {model: H100, memory: 80Gi, domain: 0, numa: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := sim.New(*spec, sim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	loop, err := reconcile.New(reconcile.Config{Source: source.DirSource{Dir: dir}, Cluster: c, Store: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(loop, nil))
	defer srv.Close()

	var out, errs strings.Builder
	if code := run([]string{"status", "--server", srv.URL}, &out, &errs); code != 0 {
		t.Fatalf("berth status: exit %d: %s", code, errs.String())
	}
	got := out.String()
	table, _, _ := strings.Cut(got, "\nWAITING")
	if rows := strings.Count(table, "\nresearch/w"); rows != view.DefaultStatusLimit {
		t.Errorf("berth status listed %d workspaces; want the first page, %d", rows, view.DefaultStatusLimit)
	}
	for _, want := range []string{
		"… and 200 more: 1,200 workspaces in all (berth status --all lists them; --output json --all as one document)\n",
		"  2 Starting, 1,198 Pending\n",
		"  research  1,200  2 Starting, 1,198 Pending\n",
		"… and 978 more waiting (-o json gives each one's likelyStart)\n", // of the page's 998
	} {
		if !strings.Contains(got, want) {
			t.Errorf("berth status: no line %q in:\n%s", want, got[max(0, len(got)-600):])
		}
	}

	out.Reset()
	if code := run([]string{"status", "--server", srv.URL, "--all"}, &out, &errs); code != 0 {
		t.Fatalf("berth status --all: exit %d: %s", code, errs.String())
	}
	table, _, _ = strings.Cut(out.String(), "\nWAITING")
	if rows := strings.Count(table, "\nresearch/w"); rows != n || strings.Contains(out.String(), "more:") {
		t.Errorf("berth status --all listed %d workspaces (and a hint: %v); want all %d", rows, strings.Contains(out.String(), "more:"), n)
	}
	out.Reset()
	if code := run([]string{"status", "--server", srv.URL, "--all", "-o", "json"}, &out, &errs); code != 0 {
		t.Fatalf("berth status --all -o json: exit %d: %s", code, errs.String())
	}
	var st view.Status
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Workspaces) != n || st.Next != "" || st.Summary.Workspaces != n {
		t.Errorf("berth status --all -o json: %d workspaces, next %q, summary %d; want %d, none, %d", len(st.Workspaces), st.Next, st.Summary.Workspaces, n, n)
	}
	for i, w := range st.Workspaces {
		if want := fmt.Sprintf("w%04d", i); w.Name != want {
			t.Fatalf("workspace %d is %s, want %s", i, w.Name, want)
		}
	}
}
