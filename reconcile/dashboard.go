package reconcile

import (
	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/view"
)

// keepView remembers the cycle's inputs and outcome for the dashboard.
// The loop replaces them whole each cycle and never mutates them.
func (l *Loop) keepView(set *schema.Set, snap *drivers.Snapshot, d *policies.Decision, hist *drivers.History) {
	l.mu.Lock()
	l.view = view.Inputs{Set: set, Snapshot: snap, Decision: d, History: hist}
	l.mu.Unlock()
}

// events turns a cycle's transitions into timeline events (without Seq).
func (l *Loop) events(ts []view.WorkspaceTransition) []view.Event {
	if len(ts) == 0 {
		return nil
	}
	l.mu.Lock()
	v := l.view
	l.mu.Unlock()
	return view.Events(ts, v)
}

// dashboard returns the dashboard document as of the last cycle, with
// events (oldest first) as given. The caller owns it.
func (l *Loop) dashboard(events []view.Event) view.Dashboard {
	st := l.Status()
	l.mu.Lock()
	v := l.view
	l.mu.Unlock()
	return view.NewDashboard(st, v, events)
}
