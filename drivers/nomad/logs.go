package nomad

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// Logs writes the output of workspace ref's task, replica replica, to w,
// through Nomad's API: stream is "stdout" or "stderr". It reads the
// allocation of the replica's current run, else of its latest (a run
// that has ended: its logs stay until Nomad collects the allocation).
// follow keeps streaming what the task writes until ctx ends; without
// it, Logs returns once it has written what there is.
func (d *Driver) Logs(ctx context.Context, ref schema.Ref, replica int, stream string, follow bool, w io.Writer) error {
	if stream != "stdout" && stream != "stderr" {
		return fmt.Errorf("logs of %s: stream %q: want stdout or stderr", ref, stream)
	}
	alloc, err := d.logAlloc(ctx, ref, replica)
	if err != nil {
		return err
	}
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errs := d.client.AllocFS().Logs(alloc, follow, TaskName, stream, api.OriginStart, 0, cancel, d.q(ctx, alloc.Namespace))
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-errs:
			if ok && err != nil {
				return wrap(err, ref, "read logs of allocation "+alloc.ID)
			}
			errs = nil
		case f, ok := <-frames:
			if !ok {
				return nil
			}
			if f == nil || len(f.Data) == 0 {
				continue
			}
			if _, err := w.Write(f.Data); err != nil {
				return err
			}
		}
	}
}

// logAlloc finds the allocation whose logs Logs reads: berth's job for
// ref (in whichever namespace it is), replica's group, its running
// allocation, else its most recent.
func (d *Driver) logAlloc(ctx context.Context, ref schema.Ref, replica int) (*api.Allocation, error) {
	jobs, _, err := d.client.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}},
		(&api.QueryOptions{Namespace: "*", Filter: berthFilter}).WithContext(ctx))
	if err != nil {
		return nil, wrap(err, ref, "list berth's jobs")
	}
	var job *api.JobListStub
	for _, j := range jobs {
		if isBerths(j.Meta) && refOf(j.Meta) == ref {
			job = j
			break
		}
	}
	if job == nil {
		return nil, errorf(drivers.ClassInvalid, ref, "logs", "Nomad has no job of workspace %s: it has not been started (or its job was purged)", ref)
	}
	stubs, _, err := d.client.Jobs().Allocations(job.ID, true, d.q(ctx, job.Namespace))
	if err != nil {
		return nil, wrap(err, ref, "list allocations of job "+job.ID)
	}
	group := "replica-" + strconv.Itoa(replica)
	var pick *api.AllocationListStub
	for _, s := range stubs {
		if s.TaskGroup != group {
			continue
		}
		switch {
		case pick == nil,
			s.ClientStatus == "running" && pick.ClientStatus != "running",
			(s.ClientStatus == "running") == (pick.ClientStatus == "running") && s.CreateIndex > pick.CreateIndex:
			pick = s
		}
	}
	if pick == nil {
		return nil, errorf(drivers.ClassInvalid, ref, "logs", "workspace %s has no allocation of replica %d in Nomad (job %s in namespace %s)", ref, replica, job.ID, job.Namespace)
	}
	a, _, err := d.client.Allocations().Info(pick.ID, d.q(ctx, job.Namespace))
	if err != nil {
		return nil, wrap(err, ref, "read allocation "+pick.ID)
	}
	return a, nil
}

// StderrLines is how many of the last lines a failed task wrote to
// stderr an Exit carries (Exit.Stderr), from at most stderrTailBytes.
const (
	StderrLines     = 20
	stderrTailBytes = 4096
)

// stderrTail reads the last lines (StderrLines) the task of allocation a
// wrote to stderr; "" when there are none or they cannot be read (its
// node is gone, Nomad collected it).
func (d *Driver) stderrTail(ctx context.Context, a *api.Allocation) string {
	ctx, stop := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer stop()
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errs := d.client.AllocFS().Logs(a, false, TaskName, "stderr", api.OriginEnd, stderrTailBytes, cancel, d.q(ctx, a.Namespace))
	var b []byte
	for {
		select {
		case <-ctx.Done():
			return ""
		case err, ok := <-errs:
			if ok && err != nil {
				return ""
			}
			errs = nil
		case f, ok := <-frames:
			if !ok {
				return lastLines(string(b), StderrLines)
			}
			if f != nil {
				b = append(b, f.Data...)
			}
		}
	}
}

// lastLines is the last n lines of s, without a trailing newline.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
