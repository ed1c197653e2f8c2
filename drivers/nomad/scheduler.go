package nomad

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// SchedulerReport is what `berth doctor` says about Nomad's scheduler
// configuration. Native preemption evicts whole allocations of jobs 10 or
// more priority points lower, without berth's rules (checkpoint grace,
// quotas, fewest victims); berth wants it off for batch and service jobs.
type SchedulerReport struct {
	Config api.SchedulerConfiguration
	// Problems are sentences a person acts on; empty when all is well.
	Problems []string
}

// Scheduler reads Nomad's scheduler configuration and reports what
// conflicts with berth. It changes nothing.
func (d *Driver) Scheduler(ctx context.Context) (SchedulerReport, error) {
	resp, _, err := d.client.Operator().SchedulerGetConfiguration(d.q(ctx, ""))
	if err != nil {
		return SchedulerReport{}, wrap(err, schema.Ref{}, "read scheduler configuration")
	}
	if resp.SchedulerConfig == nil {
		return SchedulerReport{}, fmt.Errorf("nomad: read scheduler configuration: empty answer")
	}
	r := SchedulerReport{Config: *resp.SchedulerConfig}
	pc := r.Config.PreemptionConfig
	if pc.BatchSchedulerEnabled {
		r.Problems = append(r.Problems, "native preemption is on for batch jobs: Nomad may evict berth's workspaces without their checkpoint grace; berth doctor --fix turns it off")
	}
	if pc.ServiceSchedulerEnabled {
		r.Problems = append(r.Problems, "native preemption is on for service jobs: Nomad may evict berth's workspaces without their checkpoint grace; berth doctor --fix turns it off")
	}
	return r, nil
}

// FixScheduler turns native preemption off for batch and service jobs
// with a read-modify-write of the whole configuration and ?cas= (a partial
// PUT silently resets the other fields). It reports whether it changed
// anything; a concurrent change makes it retry from a fresh read, up to
// three times.
func (d *Driver) FixScheduler(ctx context.Context) (bool, error) {
	for attempt := 0; attempt < 3; attempt++ {
		resp, _, err := d.client.Operator().SchedulerGetConfiguration(d.q(ctx, ""))
		if err != nil {
			return false, wrap(err, schema.Ref{}, "read scheduler configuration")
		}
		c := *resp.SchedulerConfig
		if !c.PreemptionConfig.BatchSchedulerEnabled && !c.PreemptionConfig.ServiceSchedulerEnabled {
			return false, nil
		}
		c.PreemptionConfig.BatchSchedulerEnabled = false
		c.PreemptionConfig.ServiceSchedulerEnabled = false
		out, _, err := d.client.Operator().SchedulerCASConfiguration(&c, d.w(ctx, ""))
		if err != nil {
			return false, wrap(err, schema.Ref{}, "write scheduler configuration")
		}
		if out.Updated {
			return true, nil
		}
		// A stale cas is answered 200 {"Updated": false} (recording 14).
	}
	return false, fmt.Errorf("nomad: write scheduler configuration: it kept changing under berth (3 tries); run doctor again")
}
