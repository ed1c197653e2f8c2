package nomad_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/drivers/nomad/nomadfake"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/berth-dev/berth/schema"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/nomad/api"
	"pgregory.net/rapid"
)

const historyPath = "berth/state/history"

// varsUnder lists the fake's Variables under the state path and their
// sizes as Nomad counts them.
func varsUnder(t testing.TB, url string) map[string]int {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	metas, _, err := c.Variables().PrefixList(historyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range metas {
		v, _, err := c.Variables().Read(m.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[m.Path] = nomadfake.VariableSize(v.Items)
	}
	return out
}

func historyStore(t testing.TB, url string) *nomad.Driver {
	t.Helper()
	d := realnomad.NewDriver(t, nomad.Config{Address: url})
	return d
}

// varWrites counts the Variable writes (PUT and DELETE) since from.
func varWrites(fake *nomadfake.Server, from int) (puts, deletes int) {
	for _, r := range fake.Requests()[from:] {
		switch {
		case strings.HasPrefix(r, "PUT /v1/var/"):
			puts++
		case strings.HasPrefix(r, "DELETE /v1/var/"):
			deletes++
		}
	}
	return puts, deletes
}

func TestHistoryInVariables(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	a, b := historyStore(t, url), historyStore(t, url)
	h, err := a.LoadHistory(ctx)
	if err != nil || h.Usage != nil {
		t.Fatalf("empty store: %+v, %v", h, err)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h = drivers.History{
		UsageAt:     at,
		Usage:       map[string]float64{"vision": 3600},
		QueuedSince: map[schema.Ref]time.Time{{Project: "vision", Name: "train"}: at},
		Preempted:   map[schema.Ref]drivers.Preemption{{Project: "vision", Name: "train"}: {Victim: schema.Ref{Project: "vision", Name: "train"}, By: schema.Ref{Project: "nlp", Name: "big"}, At: at, Reason: "tier high > low"}},
		Borrowing:   map[schema.Ref]bool{{Project: "nlp", Name: "big"}: false, {Project: "nlp", Name: "extra"}: true},
		// The loop's journal travels as it is.
		Journal: map[schema.Ref]json.RawMessage{{Project: "vision", Name: "train"}: json.RawMessage(`{"history":[{"at":"2026-11-29T12:00:00Z","to":"Preempted"}],"held":true}`)},
		// What the limits read: how long each ran, idle readings, ends.
		Ran:   map[schema.Ref]drivers.RunTime{{Project: "vision", Name: "train"}: {SpecHash: "0123456789abcdef", Ran: 90 * time.Minute}},
		Idle:  map[schema.Ref]drivers.IdleSpan{{Project: "nlp", Name: "big"}: {Since: at.Add(-time.Hour), Last: at}},
		Ended: map[schema.Ref]drivers.Ended{{Project: "nlp", Name: "nb"}: {Class: drivers.EndIdle, At: at, SpecHash: "fedcba9876543210", Reason: "idle: every GPU under 1% for 4h"}},
	}
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadHistory(ctx) // a restarted berth decides the same
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(h, got); d != "" {
		t.Errorf("round trip (-want +got)\n%s", d)
	}
	got.UsageAt = at.Add(time.Minute)
	if err := b.SaveHistory(ctx, got); err != nil {
		t.Fatal(err)
	}
	// a saw the head at index N; b wrote N+1: a's write must not
	// overwrite b's, even a write of what a saved before.
	for _, save := range []drivers.History{h, got} {
		if err := a.SaveHistory(ctx, save); drivers.ClassOf(err) != drivers.ClassConflict {
			t.Fatalf("stale SaveHistory = %v, want a conflict", err)
		}
	}
	if _, err := a.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Errorf("after reloading, SaveHistory = %v", err)
	}
}

// TestHistoryFiftyThousandWorkspaces saves and loads the history of
// 50,000 workspaces: every Variable within Nomad's limit (the fake
// refuses larger ones as Nomad does), the history whole.
func TestHistoryFiftyThousandWorkspaces(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	h := realnomad.SampleHistory(50000, 1)
	a := historyStore(t, url)
	if _, err := a.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	saved := time.Since(start)
	vars := varsUnder(t, url)
	total := 0
	for p, n := range vars {
		if n > nomadfake.MaxVariableBytes {
			t.Errorf("%s is %d bytes", p, n)
		}
		total += n
	}
	if len(vars) < 3 {
		t.Errorf("%d Variables for 50,000 workspaces: %v", len(vars), vars)
	}
	start = time.Now()
	got, err := historyStore(t, url).LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(h)
	t.Logf("50,000 workspaces: %d bytes of JSON in %d Variables, %d bytes; save %v, load %v", len(raw), len(vars), total, saved, time.Since(start))
	if d := cmp.Diff(h, got); d != "" {
		t.Errorf("round trip (-want +got)\n%.2000s", d)
	}
}

// TestHistoryWritesOnlyWhatChanged: a save of the same history writes
// nothing; a change to one workspace rewrites its shard and the head and
// deletes the shard it replaced; a change to the global fields writes
// only the head.
func TestHistoryWritesOnlyWhatChanged(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	h := realnomad.SampleHistory(8000, 2)
	a := historyStore(t, url)
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	before := varsUnder(t, url)
	from := len(fake.Requests())
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	if p, d := varWrites(fake, from); p+d != 0 {
		t.Errorf("an unchanged history wrote %d and deleted %d Variables", p, d)
	}
	if _, err := a.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	h.QueuedSince[schema.Ref{Project: "team-001", Name: "train-00052"}] = time.Date(2026, 12, 1, 8, 0, 0, 1, time.UTC)
	from = len(fake.Requests())
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	if p, d := varWrites(fake, from); p != 2 || d != 1 {
		t.Errorf("one changed workspace: %d writes, %d deletes; want 2 (its shard, the head) and 1 (the shard replaced)", p, d)
	}
	if after := varsUnder(t, url); len(after) != len(before) {
		t.Errorf("%d Variables before, %d after", len(before), len(after))
	}
	h.UsageAt = h.UsageAt.Add(time.Second)
	h.AppliedRevision = "next"
	from = len(fake.Requests())
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	if p, d := varWrites(fake, from); p != 1 || d != 0 {
		t.Errorf("global fields: %d writes, %d deletes; want the head alone", p, d)
	}
	reader := historyStore(t, url)
	got, err := reader.LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(h, got); d != "" {
		t.Errorf("(-want +got)\n%.2000s", d)
	}

	// A driver that loaded the history before reads again only the head
	// and the shards whose names changed.
	delete(h.Borrowing, schema.Ref{Project: "team-000", Name: "train-00001"})
	if err := a.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	from = len(fake.Requests())
	if got, err = reader.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	gets := 0
	for _, r := range fake.Requests()[from:] {
		if strings.HasPrefix(r, "GET /v1/var/") {
			gets++
		}
	}
	if gets != 2 {
		t.Errorf("reloading after one change read %d Variables, want 2 (the head, the changed shard)", gets)
	}
	if d := cmp.Diff(h, got); d != "" {
		t.Errorf("(-want +got)\n%.2000s", d)
	}
}

// TestHistoryUsageMovesToShards: per-project usage lives in the head
// while it is small, in the shards when there are too many projects for
// the head, and back in the head when they are few again.
func TestHistoryUsageMovesToShards(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	c, _ := api.NewClient(&api.Config{Address: url})
	a := historyStore(t, url)
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	for _, projects := range []int{3, 4000, 3} {
		h := drivers.History{UsageAt: at, Usage: map[string]float64{}}
		for p := range projects {
			h.Usage[fmt.Sprintf("project-with-a-long-name-%05d", p)] = float64(p) + 0.123456789
		}
		if err := a.SaveHistory(ctx, h); err != nil {
			t.Fatal(err)
		}
		head, _, err := c.Variables().Read(historyPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		if inShards := strings.Contains(head.Items["head"], `"usageInShards":true`); inShards != (projects > 1000) {
			t.Errorf("%d projects: usage in shards = %v", projects, inShards)
		}
		got, err := historyStore(t, url).LoadHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(h, got); d != "" {
			t.Errorf("%d projects (-want +got)\n%.2000s", projects, d)
		}
	}
}

// TestHistoryShrinkDeletesShards: a history that shrinks uses fewer
// shards and deletes the others.
func TestHistoryShrinkDeletesShards(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	a := historyStore(t, url)
	if err := a.SaveHistory(ctx, realnomad.SampleHistory(8000, 3)); err != nil {
		t.Fatal(err)
	}
	big := len(varsUnder(t, url))
	small := realnomad.SampleHistory(10, 3)
	if err := a.SaveHistory(ctx, small); err != nil {
		t.Fatal(err)
	}
	vars := varsUnder(t, url)
	if big < 3 || len(vars) != 2 {
		t.Errorf("8,000 workspaces: %d Variables; then 10: %d, want the head and one shard: %v", big, len(vars), vars)
	}
	got, err := historyStore(t, url).LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(small, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// cutAfter passes requests to next until it has seen n shard writes,
// then answers every later request with a broken connection: the berth
// writing has died.
type cutAfter struct {
	next http.Handler
	mu   sync.Mutex
	n    int
}

func (c *cutAfter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	dead := c.n < 0
	if r.Method == "PUT" && strings.HasPrefix(r.URL.Path, "/v1/var/"+historyPath+"/") {
		if c.n == 0 {
			dead = true
		}
		c.n--
	}
	c.mu.Unlock()
	if dead {
		panic(http.ErrAbortHandler)
	}
	c.next.ServeHTTP(w, r)
}

// TestHistoryCrashBetweenShardWrites: a save that dies after writing
// some of its shards leaves the previous history whole for any reader,
// and the next save deletes what it left.
func TestHistoryCrashBetweenShardWrites(t *testing.T) {
	for _, written := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(written), func(t *testing.T) {
			fake := nomadfake.New()
			url := fake.Start(t).URL
			old := realnomad.SampleHistory(8000, 4)
			if err := historyStore(t, url).SaveHistory(ctx, old); err != nil {
				t.Fatal(err)
			}
			shards := len(varsUnder(t, url)) - 1

			cut := &cutAfter{next: fake, n: written}
			dying := httptest.NewServer(cut)
			defer dying.Close()
			d := historyStore(t, dying.URL)
			if _, err := d.LoadHistory(ctx); err != nil {
				t.Fatal(err)
			}
			next := realnomad.SampleHistory(8000, 5) // every shard changes
			if err := d.SaveHistory(ctx, next); err == nil {
				t.Fatal("the dying save succeeded")
			}
			if got := len(varsUnder(t, url)) - 1; got != shards+written {
				t.Fatalf("%d shards after the crash, want %d old + %d left over", got, shards, written)
			}

			b := historyStore(t, url)
			got, err := b.LoadHistory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(old, got); d != "" {
				t.Fatalf("after the crash (-want the old history +got)\n%.2000s", d)
			}
			if err := b.SaveHistory(ctx, next); err != nil {
				t.Fatal(err)
			}
			if got := len(varsUnder(t, url)) - 1; got != shards {
				t.Errorf("the next save left %d shards, want %d", got, shards)
			}
			got, err = historyStore(t, url).LoadHistory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(next, got); d != "" {
				t.Errorf("(-want +got)\n%.2000s", d)
			}
		})
	}
}

// saveDuringRead runs save once, on the reader's first shard read, before
// that read reaches the fake.
type saveDuringRead struct {
	next http.Handler
	once sync.Once
	save func()
}

func (s *saveDuringRead) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/var/"+historyPath+"/") {
		s.once.Do(s.save)
	}
	s.next.ServeHTTP(w, r)
}

// TestHistoryLoadDuringSave: a save that commits and deletes the shards
// a reader is reading makes the reader start over; it returns the new
// history whole, not a mix.
func TestHistoryLoadDuringSave(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	w := historyStore(t, url)
	if err := w.SaveHistory(ctx, realnomad.SampleHistory(5000, 6)); err != nil {
		t.Fatal(err)
	}
	next := realnomad.SampleHistory(5000, 7)
	hook := &saveDuringRead{next: fake, save: func() {
		if err := w.SaveHistory(ctx, next); err != nil {
			t.Error(err)
		}
	}}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	got, err := historyStore(t, srv.URL).LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(next, got); d != "" {
		t.Errorf("(-want +got)\n%.2000s", d)
	}
}

// TestHistoryUpgradesSingleVariable: the format of earlier berths (one
// Variable, one JSON item) loads, and the next save replaces it in
// place with the sharded format.
func TestHistoryUpgradesSingleVariable(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	c, _ := api.NewClient(&api.Config{Address: url})
	const legacy = `{"appliedRevision":"abc","usageAt":"2026-11-29T12:00:00Z","usage":{"vision":3600},` +
		`"queuedSince":{"vision/train":"2026-11-29T11:00:00Z"},"borrowing":{"nlp/big":true}}`
	if _, _, err := c.Variables().Create(&api.Variable{Path: historyPath, Items: api.VariableItems{"history": legacy}}, nil); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	want := drivers.History{
		AppliedRevision: "abc", UsageAt: at, Usage: map[string]float64{"vision": 3600},
		QueuedSince: map[schema.Ref]time.Time{{Project: "vision", Name: "train"}: at.Add(-time.Hour)},
		Borrowing:   map[schema.Ref]bool{{Project: "nlp", Name: "big"}: true},
	}
	d := historyStore(t, url)
	got, err := d.LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("legacy load (-want +got)\n%s", diff)
	}
	if err := d.SaveHistory(ctx, got); err != nil {
		t.Fatal(err)
	}
	head, _, err := c.Variables().Read(historyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := head.Items["history"]; ok || head.Items["head"] == "" {
		t.Errorf("after the save the head still has the legacy item: %v", head.Items)
	}
	got, err = historyStore(t, url).LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the upgrade (-want +got)\n%s", diff)
	}
}

// TestHistoryConcurrentSaves: of two savers that loaded the same head,
// the second fails with a conflict and leaves the first's history whole.
func TestHistoryConcurrentSaves(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	a, b := historyStore(t, url), historyStore(t, url)
	if err := a.SaveHistory(ctx, realnomad.SampleHistory(8000, 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LoadHistory(ctx); err != nil {
		t.Fatal(err)
	}
	ha, hb := realnomad.SampleHistory(8000, 9), realnomad.SampleHistory(8000, 10)
	if err := a.SaveHistory(ctx, ha); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveHistory(ctx, hb); drivers.ClassOf(err) != drivers.ClassConflict {
		t.Fatalf("second save = %v, want a conflict", err)
	}
	got, err := historyStore(t, url).LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ha, got); d != "" {
		t.Errorf("(-want +got)\n%.2000s", d)
	}
}

// TestHistoryStoreProperty: any sequence of saves, each of a history of
// random size and content, loads back as the last one saved; no Variable
// is over Nomad's limit and only the head and the shards it names remain.
func TestHistoryStoreProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fake := nomadfake.New()
		srv := httptest.NewServer(fake)
		defer srv.Close()
		d := historyStore(t, srv.URL)
		var last drivers.History
		for step := range rapid.IntRange(1, 3).Draw(rt, "saves") {
			n := rapid.SampledFrom([]int{0, 1, 50, 4000}).Draw(rt, fmt.Sprint("workspaces", step))
			last = realnomad.SampleHistory(n, rapid.Uint64().Draw(rt, fmt.Sprint("seed", step)))
			if n == 0 {
				last = drivers.History{}
			}
			if err := d.SaveHistory(ctx, last); err != nil {
				rt.Fatal(err)
			}
		}
		got, err := historyStore(t, srv.URL).LoadHistory(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		if diff := cmp.Diff(last, got, cmpopts.EquateEmpty()); diff != "" {
			rt.Fatalf("(-want +got)\n%.2000s", diff)
		}
		vars := varsUnder(t, srv.URL)
		c, _ := api.NewClient(&api.Config{Address: srv.URL})
		head, _, err := c.Variables().Read(historyPath, nil)
		if err != nil {
			rt.Fatal(err)
		}
		var named []string
		for p := range vars {
			if p != historyPath {
				named = append(named, strings.TrimPrefix(p, historyPath+"/"))
			}
		}
		sort.Strings(named)
		for _, name := range named {
			if !strings.Contains(head.Items["head"], `"`+name+`"`) {
				rt.Errorf("shard %s is not named by the head", name)
			}
		}
	})
}

// BenchmarkSaveHistory: the first save of a history (every shard
// written) and a save where one workspace changed (one shard and the
// head), for 1,000 and 50,000 workspaces, against the fake.
func BenchmarkSaveHistory(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		h := realnomad.SampleHistory(n, 11)
		b.Run(fmt.Sprintf("workspaces=%d/first", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				fake := nomadfake.New()
				srv := httptest.NewServer(fake)
				d := historyStore(b, srv.URL)
				b.StartTimer()
				if err := d.SaveHistory(ctx, h); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				vars := varsUnder(b, srv.URL)
				total := 0
				for _, s := range vars {
					total += s
				}
				b.ReportMetric(float64(len(vars)), "variables")
				b.ReportMetric(float64(total), "stored-bytes")
				srv.Close()
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("workspaces=%d/one-change", n), func(b *testing.B) {
			fake := nomadfake.New()
			srv := httptest.NewServer(fake)
			defer srv.Close()
			d := historyStore(b, srv.URL)
			if err := d.SaveHistory(ctx, h); err != nil {
				b.Fatal(err)
			}
			ref := schema.Ref{Project: "team-000", Name: "train-00002"}
			at := h.QueuedSince[ref]
			i := 0
			for b.Loop() {
				i++
				h.QueuedSince[ref] = at.Add(time.Duration(i))
				if err := d.SaveHistory(ctx, h); err != nil {
					b.Fatal(err)
				}
			}
			h.QueuedSince[ref] = at
		})
	}
}

// TestHistoryStatePathTooLong: a state path whose shards Nomad would
// refuse is an error that says how long it may be, before any write.
func TestHistoryStatePathTooLong(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	ok := realnomad.NewDriver(t, nomad.Config{Address: url, StatePath: strings.Repeat("p", 85)})
	if err := ok.SaveHistory(ctx, realnomad.SampleHistory(10, 1)); err != nil {
		t.Errorf("85 characters: %v", err)
	}
	long := realnomad.NewDriver(t, nomad.Config{Address: url, StatePath: strings.Repeat("p", 86)})
	err := long.SaveHistory(ctx, realnomad.SampleHistory(10, 1))
	if drivers.ClassOf(err) != drivers.ClassInvalid || !strings.Contains(err.Error(), "at most 85") {
		t.Errorf("86 characters: %v", err)
	}
}

// TestHistoryJournalSize saves the journal a loop keeps for 1,000
// workspaces with their 32 last transitions each (the most it keeps)
// beside a history of 1,000 workspaces: every Variable within Nomad's
// limit, the whole read back, and the size reported.
func TestHistoryJournalSize(t *testing.T) {
	fake := nomadfake.New()
	url := fake.Start(t).URL
	d := historyStore(t, url)
	h := realnomad.SampleHistory(1000, 14)
	h.Journal = map[schema.Ref]json.RawMessage{}
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	states := []string{"Pending", "Starting", "Running", "Preempting", "Preempted"}
	for i := range 1000 {
		ref := schema.Ref{Project: fmt.Sprintf("team-%03d", i/50), Name: fmt.Sprintf("train-%05d", i)}
		var b strings.Builder
		b.WriteString(`{"history":[`)
		for k := range 32 {
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"at":%q,"from":%q,"to":%q,"reason":"preempted by team-000/train-%05d: tier high (80) outranks tier medium (50)","node":"node-%d","gpus":["GPU-%08d-0000-4000-8000-00000000000%d"],"progress":%d}`,
				at.Add(time.Duration(i*32+k)*time.Second).Format(time.RFC3339Nano), states[k%5], states[(k+1)%5], (i*7+k)%1000, i%64, i, k%8, k*int(time.Minute))
		}
		b.WriteString(`],"held":true,"workLost":120000000000}`)
		h.Journal[ref] = json.RawMessage(b.String())
	}
	if err := d.SaveHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	got, err := historyStore(t, url).LoadHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Journal) != 1000 {
		t.Fatalf("read back %d journal entries, want 1000", len(got.Journal))
	}
	total, vars := 0, varsUnder(t, url)
	for _, n := range vars {
		total += n
	}
	raw := 0
	for _, j := range h.Journal {
		raw += len(j)
	}
	t.Logf("1,000 workspaces, 32 transitions each: journal %d bytes of JSON; the whole history %d bytes in %d Variables", raw, total, len(vars))
}
