package reconcile

import (
	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// keepView remembers the cycle's inputs and outcome for the dashboard
// (published with the model). The loop replaces them whole each cycle
// and never mutates them: hist is copied, as the cycle goes on to save
// it.
func (l *Loop) keepView(set *schema.Set, snap *drivers.Snapshot, d *policies.Decision, hist *drivers.History) {
	h := *hist
	l.view = view.Inputs{Set: set, Snapshot: snap, Decision: d, History: &h}
}

// events turns a cycle's transitions into timeline events (without
// Seq), with the inputs of the cycle that made them. The cycle's only.
func (l *Loop) events(ts []view.WorkspaceTransition) []view.Event {
	if len(ts) == 0 {
		return nil
	}
	return view.Events(ts, l.view)
}

// dashboard returns the dashboard document of the model the last cycle
// published, with events (oldest first) as given. The caller owns it.
func (l *Loop) dashboard(events []view.Event) view.Dashboard {
	m := l.model.Load()
	return view.NewDashboard(m.Page(schema.Ref{}, 0), m.Inputs, events)
}
