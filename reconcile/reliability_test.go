package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
	"github.com/google/go-cmp/cmp"
)

// hangingCluster is the simulator, except that its first hangs
// observations never answer: they return only when their context ends,
// as a request to a cluster that never answers and has no deadline.
type hangingCluster struct {
	*sim.Cluster
	mu    sync.Mutex
	hangs int
	saves int
}

func (c *hangingCluster) Observe(ctx context.Context) (drivers.Snapshot, error) {
	c.mu.Lock()
	hang := c.hangs > 0
	if hang {
		c.hangs--
	}
	c.mu.Unlock()
	if hang {
		<-ctx.Done()
		return drivers.Snapshot{}, ctx.Err()
	}
	return c.Cluster.Observe(ctx)
}

func (c *hangingCluster) SaveHistory(ctx context.Context, h drivers.History) error {
	c.mu.Lock()
	c.saves++
	c.mu.Unlock()
	return c.Cluster.SaveHistory(ctx, h)
}

func (c *hangingCluster) saveCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saves
}

func hangOver(h *harness, hangs int) *hangingCluster {
	c := &hangingCluster{Cluster: h.cluster, hangs: hangs}
	h.loop.cfg.Cluster, h.loop.cfg.Store = c, c
	return c
}

// TestHungCycleIsCut: a cycle whose observation never answers is cut at
// CycleTimeout with an error that says so; the loop goes on, and a spec
// change made while it hung is applied by the next cycle. The status
// never shows a zero time for the cut cycle.
func TestHungCycleIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("med", "b", schema.DesiredRunning), workspace("hi", "a", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.CycleTimeout = time.Minute
		hangOver(h, 1)
		ctx, cancel := context.WithCancel(t.Context())
		changes := make(chan struct{}, 1)
		done := make(chan error)
		go func() { done <- h.loop.Run(ctx, changes) }()
		// The cycle's deadline is its context's: the bubble's time, not the
		// loop's clock.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := h.loop.Status(); st.LastReconcile != nil {
			t.Fatalf("a cycle ended while the observation hung: %+v", st.LastReconcile)
		}
		h.source.set("r2") // while it hangs
		changes <- struct{}{}
		time.Sleep(50 * time.Second) // the cycle's deadline: a minute after it began
		synctest.Wait()
		st := h.loop.Status()
		if st.LastReconcile == nil || !strings.Contains(st.LastReconcile.Error, "the cycle ran for 1m0s, its limit, and was cut") ||
			!strings.Contains(st.LastReconcile.Error, "observe cluster: context deadline exceeded") {
			t.Fatalf("last reconcile %+v, want the cut cycle's error naming what hung", st.LastReconcile)
		}
		b, _ := json.Marshal(st)
		if strings.Contains(string(b), "0001-01-01") {
			t.Errorf("the status shows a zero time after the cut cycle: %s", b)
		}
		h.sleep(time.Second) // the backoff after a failed cycle
		synctest.Wait()
		if diff := cmp.Diff(map[string]view.State{"hi/a": view.StateStarting, "med/b": view.StateStarting}, h.states()); diff != "" {
			t.Errorf("after the cut, the spec change made meanwhile (-want +got):\n%s", diff)
		}
		if st := h.loop.Status(); st.Revision == nil || st.Revision.ID != "r2" {
			t.Errorf("revision in force %+v, want r2", st.Revision)
		}
		cancel()
		<-done
	})
}

// healthz is what /healthz answers (package api serves it: 200 while
// the health is ok, 503 once stale) with the body as JSON fields.
func healthz(t *testing.T, l *Loop) (int, map[string]any) {
	t.Helper()
	h := l.Health()
	code := http.StatusOK
	if h.Status != view.HealthOK {
		code = http.StatusServiceUnavailable
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("health %s: %v", b, err)
	}
	return code, body
}

// TestHealthzTellsTheTruth: /healthz reports the age of the last
// successful cycle and fails (503) once it is older than HealthMaxAge
// (counted from the start before the first success); failed cycles do
// not count; a success makes it healthy again.
func TestHealthzTellsTheTruth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning))}, "r1")
		h.loop.cfg.HealthMaxAge = 2 * time.Minute
		if code, body := healthz(t, h.loop); code != http.StatusOK || body["status"] != "ok" || body["lastSuccessAt"] != nil {
			t.Fatalf("at start: %d %v, want ok without a last success", code, body)
		}
		if _, err := h.loop.Once(t.Context()); err != nil {
			t.Fatal(err)
		}
		okAt := h.clock.Now()
		h.source.err = context.DeadlineExceeded // every cycle fails from now on
		for range 3 {
			h.sleep(time.Minute)
			h.loop.Once(t.Context())
		}
		code, body := healthz(t, h.loop)
		if code != http.StatusServiceUnavailable || body["status"] != "stale" || body["ageSeconds"] != 180.0 || body["maxAgeSeconds"] != 120.0 {
			t.Errorf("3 minutes of failed cycles: %d %v, want 503 stale, age 180 s of 120", code, body)
		}
		if at, _ := time.Parse(time.RFC3339Nano, body["lastSuccessAt"].(string)); !at.Equal(okAt) {
			t.Errorf("lastSuccessAt %v, want %v", body["lastSuccessAt"], okAt)
		}
		if st := h.loop.Status(); st.LastReconcile == nil || !st.LastReconcile.At.IsZero() {
			t.Errorf("last reconcile %+v: a cycle that failed before observing has no time", st.LastReconcile)
		}
		h.source.err = nil
		h.loop.Once(t.Context())
		if code, body := healthz(t, h.loop); code != http.StatusOK || body["ageSeconds"] != 0.0 {
			t.Errorf("after a success: %d %v", code, body)
		}
	})
}

// TestHealthzBeforeAnySuccess: a berth whose first cycle never succeeds
// fails its health check once HealthMaxAge has passed since it started.
func TestHealthzBeforeAnySuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, testSets{}, "broken") // no valid revision
		h.loop.cfg.HealthMaxAge = time.Minute
		h.loop.Once(t.Context())
		h.sleep(time.Minute + time.Second)
		if code, body := healthz(t, h.loop); code != http.StatusServiceUnavailable || body["lastSuccessAt"] != nil {
			t.Errorf("%d %v, want 503 and no last success", code, body)
		}
	})
}

// TestHistoryNotRewrittenEveryCycle: cycles that change nothing but the
// clock (usage decays and accrues, AppliedAt) do not save the history,
// not even past Interval; one that changes it does, and so does the first
// after UsageInterval, with the usage the unsaved cycles accrued. A Run
// that stops saves what its cycles kept in memory.
func TestHistoryNotRewrittenEveryCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("med", "b", schema.DesiredRunning), workspace("hi", "a", schema.DesiredRunning)),
		}
		h := newHarness(t, sets, "r1")
		c := hangOver(h, 0)
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(sim.DefaultStartDelay + time.Second)
		h.loop.Once(ctx) // b runs
		saves := c.saveCount()
		for range 9 { // 4.5 minutes, short of UsageInterval
			h.sleep(h.loop.cfg.Interval)
			h.loop.Once(ctx)
		}
		if n := c.saveCount() - saves; n != 0 {
			t.Errorf("%d saves in 9 cycles %s apart that changed nothing but the clock, want 0", n, h.loop.cfg.Interval)
		}
		h.source.set("r2") // a starts: its place in the queue, the applied revision
		h.loop.Once(ctx)
		if n := c.saveCount() - saves; n != 1 {
			t.Errorf("%d saves after a cycle that changed the history, want 1", n)
		}
		h.sleep(sim.DefaultStartDelay + time.Second)
		h.loop.Once(ctx) // a runs
		stored := func() drivers.History {
			t.Helper()
			hist, err := h.cluster.LoadHistory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return hist
		}
		before := stored().Usage["med"]
		saves = c.saveCount()
		for range 9 {
			h.sleep(h.loop.cfg.UsageInterval / 10)
			h.loop.Once(ctx)
		}
		if n := c.saveCount() - saves; n != 0 {
			t.Errorf("%d saves before UsageInterval, want 0", n)
		}
		h.sleep(h.loop.cfg.UsageInterval / 10)
		h.loop.Once(ctx)
		if n := c.saveCount() - saves; n != 1 {
			t.Errorf("%d saves after UsageInterval, want 1 (usage reaches the store)", n)
		}
		hist := stored()
		if hist.AppliedRevision != "r2" || hist.Usage["med"] <= before {
			t.Errorf("stored history: applied %q, usage of med %v (%v before): want r2 and more usage", hist.AppliedRevision, hist.Usage["med"], before)
		}

		// Run's stop saves what the cycles since kept in memory.
		before, saves = hist.Usage["med"], c.saveCount()
		h.sleep(time.Minute)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- h.loop.Run(runCtx, nil) }()
		h.sleep(time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := c.saveCount() - saves; n != 1 {
			t.Errorf("%d saves from a Run that stopped, want 1", n)
		}
		if u := stored().Usage["med"]; u <= before {
			t.Errorf("usage of med %v after Run stopped, %v before: the usage accrued in memory was lost", u, before)
		}
	})
}

// TestFreedCapacityRetriesOnlyUnplaceable: capacity freed since a failure
// makes an unplaceable start due at once (after BackoffMin), never a
// conflict or a transient one: those wait out their backoff.
func TestFreedCapacityRetriesOnlyUnplaceable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := drivers.Action{Kind: drivers.ActionStart, Workspace: schema.Ref{Project: "p", Name: "w"}}
	for class, want := range map[string]bool{"unplaceable": true, "conflict": false, "transient": false} {
		var r retries
		r.failed(a, class, context.DeadlineExceeded, now, time.Second, time.Minute)
		f := r.failed(a, class, context.DeadlineExceeded, now, time.Second, time.Minute) // retry at +2s
		r.freedAt = now.Add(500 * time.Millisecond)
		if got := r.due(f, a, now.Add(time.Second), time.Second); got != want {
			t.Errorf("%s, capacity freed, 1s later: due %v, want %v", class, got, want)
		}
		if !r.due(f, a, f.retryAt, time.Second) {
			t.Errorf("%s: not due at its retry time", class)
		}
	}
}

// lossyCluster applies every action but answers a stop with an error, as
// a connection reset after Nomad applied it.
type lossyCluster struct{ *sim.Cluster }

func (c lossyCluster) Apply(ctx context.Context, a drivers.Action) error {
	if err := c.Cluster.Apply(ctx, a); err != nil {
		return err
	}
	if a.Kind == drivers.ActionStop {
		return errors.New("read: connection reset by peer")
	}
	return nil
}

// TestLostStopAnswerIsNotAFailure: berth stops a workspace the specs
// want stopped; the cluster does it but the answer is lost. When its
// allocation is gone the workspace is Stopped, never Failed: berth
// stopped it.
func TestLostStopAnswerIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sets := testSets{
			"r1": withWorkspaces(workspace("med", "b", schema.DesiredRunning)),
			"r2": withWorkspaces(workspace("med", "b", schema.DesiredStopped)),
		}
		h := newHarness(t, sets, "r1")
		h.loop.cfg.Cluster = lossyCluster{h.cluster}
		ctx := t.Context()
		h.loop.Once(ctx)
		h.sleep(sim.DefaultStartDelay + time.Second)
		h.loop.Once(ctx)
		h.source.set("r2")
		if res, _ := h.loop.Once(ctx); len(res.Failed) != 1 {
			t.Fatalf("the stop's lost answer: failed %+v", res.Failed)
		}
		h.sleep(time.Minute) // past the grace period: the allocation is gone
		h.loop.Once(ctx)
		d, _ := h.loop.Workspace(schema.Ref{Project: "med", Name: "b"})
		var path []string
		for _, tr := range d.History {
			path = append(path, string(tr.To))
		}
		if diff := cmp.Diff([]string{"Starting", "Running", "Stopped"}, path); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
}

// nonZero returns a value of type t that is not its zero value (for the
// kinds drivers.History is made of).
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	v := reflect.New(typ).Elem()
	switch {
	case typ == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return v
	case typ == reflect.TypeFor[json.RawMessage](): // a journal entry
		v.Set(reflect.ValueOf(json.RawMessage(`{"workLost":1}`)))
		return v
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Struct:
		for i := range typ.NumField() {
			v.Field(i).Set(nonZero(t, typ.Field(i).Type))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(nonZero(t, typ.Key()), nonZero(t, typ.Elem()))
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(typ, 0, 1), nonZero(t, typ.Elem())))
	default:
		t.Fatalf("nonZero: no value for %s: teach this test (and sameHistory) the new field", typ)
	}
	return v
}

// TestSameHistorySeesEveryField: a change to any field of drivers.History
// (and of a Preemption in it) but the clock's own makes sameHistory
// false, so a field added to the history later is saved when it changes
// (this test fails until sameHistory compares it).
func TestSameHistorySeesEveryField(t *testing.T) {
	clock := map[string]bool{"UsageAt": true, "Usage": true, "AppliedAt": true, "Ran": true, "Idle": true}
	typ := reflect.TypeFor[drivers.History]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var h drivers.History
		reflect.ValueOf(&h).Elem().Field(i).Set(nonZero(t, f.Type))
		if got := sameHistory(drivers.History{}, h); got != clock[f.Name] {
			t.Errorf("History.%s changed: sameHistory %v, want %v", f.Name, got, clock[f.Name])
		}
	}
	ref := schema.Ref{Project: "p", Name: "w"}
	base := nonZero(t, reflect.TypeFor[drivers.Preemption]()).Interface().(drivers.Preemption)
	ptyp := reflect.TypeFor[drivers.Preemption]()
	for i := range ptyp.NumField() {
		changed := base
		reflect.ValueOf(&changed).Elem().Field(i).Set(reflect.Zero(ptyp.Field(i).Type))
		a := drivers.History{Preempted: map[schema.Ref]drivers.Preemption{ref: base}}
		b := drivers.History{Preempted: map[schema.Ref]drivers.Preemption{ref: changed}}
		if sameHistory(a, b) {
			t.Errorf("Preemption.%s changed: sameHistory true", ptyp.Field(i).Name)
		}
	}
}
