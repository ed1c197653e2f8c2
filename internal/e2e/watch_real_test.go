package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/drivers/nomad"
	"github.com/berth-dev/berth/internal/realnomad"
	"github.com/hashicorp/nomad/api"
)

// TestRealWatch: on a real Nomad, Watch sees a job registered after an
// Observe (any namespace) within a second or two, and WaitForChange
// returns for it.
func TestRealWatch(t *testing.T) {
	c := realnomad.Client(t)
	d := realnomad.NewDriver(t, nomad.ConfigFromEnv(""))
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := d.Watch(wctx)
	time.Sleep(300 * time.Millisecond) // the stream is open
	register := func(id string) {
		job := api.NewServiceJob(id, id, "global", 50)
		job.Datacenters = []string{"*"}
		job.Meta = map[string]string{nomad.MetaProject: "watch", nomad.MetaWorkspace: id}
		tg := api.NewTaskGroup("main", 1)
		task := api.NewTask("main", "raw_exec")
		task.Config = map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 3600"}}
		task.Resources = &api.Resources{CPU: ptr(100), MemoryMB: ptr(32)}
		tg.AddTask(task)
		job.AddTaskGroup(tg)
		if _, _, err := c.Jobs().Register(job, nil); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	register("berth-watch-a")
	select {
	case <-ch:
		t.Logf("change seen after %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not see a registered job within 5s")
	}
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.WaitForChange(ctx, 10*time.Second) }()
	time.Sleep(300 * time.Millisecond)
	start = time.Now()
	register("berth-watch-b")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("WaitForChange returned %s after the change", el)
	}
}
