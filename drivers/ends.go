package drivers

import (
	"fmt"
	"time"
)

// EndClass is how a workspace's run ended: the one classification the
// status, explain, the dashboard and the metrics
// (berth_workspace_failures_total{class}) share. Each class has one
// consequence:
//
//   - EndCompleted: every replica's task exited 0. The workspace is
//     Completed and does not run again until its spec changes (or it is
//     set Stopped, then Running).
//
//   - EndTaskFailed: the task failed on its own (a non-zero exit, an OOM
//     kill) after the in-place restarts its spec's restart allowed. The
//     workspace is Failed, with the exit code and its last stderr lines,
//     and does not run again until its spec changes.
//
//   - EndNodeFault: the node ended it, not the task: the node was lost
//     or drained, or the start failed for the node's reason (a device,
//     driver or volume that failed, an image that would not pull). It is
//     not the workspace's failure: berth starts it again, on another node
//     where it may, after a backoff that doubles with each attempt, and
//     gives up (Failed) only after NodeFaultAttempts in a row.
//
//   - EndTimeLimit: berth stopped it, with its checkpoint grace, at its
//     time limit (spec.maxRuntime). It does not start again until its
//     spec changes, or its limit is raised (it runs for what is left).
//
//   - EndIdle: berth stopped it, with its checkpoint grace, because its
//     GPUs stayed idle for its idle rule's after (spec.idle). It does not
//     start again until its spec changes (or it is set Stopped, then
//     Running).
//
// Any other run berth stopped (a stop, a preemption, a move) is no end
// and no failure: berth knows it stopped it, and why. The last two are
// never an Exit: the decision makes them (policies' limits.go) and the
// history keeps them (History.Ran, History.Ended).
type EndClass int

const (
	// EndUnknown: an Exit written before ends had classes.
	EndUnknown EndClass = iota
	EndCompleted
	EndTaskFailed
	EndNodeFault
	EndTimeLimit
	EndIdle
)

var endNames = [...]string{"", "completed", "task-failed", "node-fault", "time-limit", "idle"}

func (c EndClass) String() string {
	if c >= 0 && int(c) < len(endNames) {
		return endNames[c]
	}
	return "unknown"
}

// MarshalText writes the class's name ("completed", "task-failed", …).
func (c EndClass) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a class's name.
func (c *EndClass) UnmarshalText(b []byte) error {
	for k := range endNames {
		if endNames[k] == string(b) {
			*c = EndClass(k)
			return nil
		}
	}
	return fmt.Errorf("unknown end class %q: want completed, task-failed, node-fault, time-limit or idle", b)
}

// NodeFaultAttempts is how many starts in a row a workspace gets after
// ends the node caused (EndNodeFault) before berth gives up on it;
// NodeFaultBackoff the wait before the second (the first is at once),
// doubling up to NodeFaultMaxBackoff.
const (
	NodeFaultAttempts   = 5
	NodeFaultBackoff    = 10 * time.Second
	NodeFaultMaxBackoff = 5 * time.Minute
)

// NodeFaultWait is the wait before start attempt n (1, 2, …) after an
// end the node caused: none before the first, then NodeFaultBackoff
// doubling up to NodeFaultMaxBackoff.
func NodeFaultWait(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	w := NodeFaultBackoff
	for i := 2; i < n && w < NodeFaultMaxBackoff; i++ {
		w *= 2
	}
	return min(w, NodeFaultMaxBackoff)
}
