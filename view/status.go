package view

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/leader"
	"github.com/berth-dev/berth/schema"
	"github.com/berth-dev/berth/source"
)

// APIVersion is the version of the status documents the HTTP API serves.
// v2 (from v1): durations are seconds in fields named …Seconds, not
// nanoseconds; an unlimited borrow limit is absent, not -1; every time is
// the cluster's clock (Status.Clock); lists are [] when empty, never null.
const APIVersion = "berth.dev/v2"

// Seconds is a duration that the API writes as a number of seconds (JSON
// numbers with up to millisecond precision), as Kubernetes' …Seconds
// fields do; in Go it is a time.Duration.
type Seconds time.Duration

// D returns s as a time.Duration.
func (s Seconds) D() time.Duration { return time.Duration(s) }

func (s Seconds) String() string { return time.Duration(s).String() }

// MarshalJSON writes s in seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, math.Round(time.Duration(s).Seconds()*1000)/1000, 'f', -1, 64), nil
}

// UnmarshalJSON reads seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("a duration in seconds: %w", err)
	}
	*s = Seconds(math.Round(f * float64(time.Second)))
	return nil
}

// State is where a workspace is in its life, as berth reports it.
type State string

// The states of a workspace (DESIGN.md).
const (
	// StatePending: it wants to run and waits; the reason says why.
	StatePending State = "Pending"
	// StateStarting: placed; its allocation is not running yet.
	StateStarting State = "Starting"
	// StateRunning: running and holding its GPUs.
	StateRunning State = "Running"
	// StatePreempting: it got its checkpoint signal to make room for a
	// higher tier and still holds its GPUs.
	StatePreempting State = "Preempting"
	// StatePreempted: it was preempted and waits to resume on its own.
	StatePreempted State = "Preempted"
	// StateMoving: its node is draining or down, or a GPU it holds is
	// unhealthy or gone: it got its checkpoint signal, as a preempted
	// workspace does, and starts again elsewhere once it is gone, from
	// its checkpoint, keeping its place in the queue.
	StateMoving State = "Moving"
	// StateStopped: the specs want it stopped or no longer list it.
	StateStopped State = "Stopped"
	// StateFailed: its task failed on its own (a non-zero exit, after the
	// restarts its spec's restart allows), or its starts failed for the
	// node's reason drivers.NodeFaultAttempts times in a row; the reason
	// says which, with the exit code and the cluster's message (LastEnd
	// has them as data). It is not run again until its spec changes.
	StateFailed State = "Failed"
	// StateCompleted: its task exited 0 on its own. It is not run again
	// until its spec changes (or the specs set it Stopped, then Running).
	StateCompleted State = "Completed"
)

func (s State) String() string { return string(s) }

// Status is the reconciler's report: what is in force, what was last
// tried, and every project and workspace. Slices are sorted by name
// (workspaces by project, then name).
type Status struct {
	Version string `json:"version"`
	// Berth is the berth build serving the status.
	Berth   string `json:"berth,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// Clock names the clock of every time in the document but the
	// source's: "cluster", the cluster's own (the simulator's under
	// --cluster sim, which may run faster than this machine's). The
	// source's times (git fetches) are this machine's.
	Clock string `json:"clock"`
	// Revision is the revision in force (last good); absent before the
	// first.
	Revision *RevisionStatus `json:"revision,omitempty"`
	// Attempted is the last revision read, when it differs from Revision
	// (it was refused: Errors say why).
	Attempted *RevisionStatus `json:"attempted,omitempty"`
	// Source is where the specs come from (the git source reports its
	// fetches, applied and attempted revisions, force-pushes); nil for a
	// source that reports nothing.
	Source *source.Status `json:"source,omitempty"`
	// Leader is the election among replicas (nil: this berth is the
	// only one). A follower's status is read-only: it shows the leader's
	// journal and its own observation, and applies nothing.
	Leader *leader.Status `json:"leader,omitempty"`
	// LastReconcile is the last completed cycle.
	LastReconcile *CycleStatus    `json:"lastReconcile,omitempty"`
	Projects      []ProjectStatus `json:"projects"`
	// Workspaces are the workspaces of this page: all of them unless the
	// request limited the page (GET /api/v1/status lists at most
	// DefaultStatusLimit by default), then those after its cursor.
	Workspaces []WorkspaceStatus `json:"workspaces"`
	// Next, when set, is the cursor of the next page (the last workspace
	// listed, PROJECT/NAME): GET /api/v1/status?after=NEXT. Absent on the
	// last page.
	Next string `json:"next,omitempty"`
	// Summary counts every workspace, on this page or not.
	Summary *StatusSummary `json:"summary,omitempty"`
	// ClusterGPUs are the cluster's GPUs by kind, where the specs
	// declare GPU kinds (absent where they declare none): each declared
	// kind, then each model whose device group matches no kind
	// (drivers.GPUsByKind).
	ClusterGPUs []KindCapacity `json:"clusterGPUs,omitempty"`
}

// StatusSummary counts the workspaces berth knows, whatever page the
// status lists.
type StatusSummary struct {
	Workspaces int `json:"workspaces"`
	// States counts them per state (only states some workspace is in).
	States map[State]int `json:"states"`
	// Projects counts them per project, sorted by name: the projects of
	// the specs that have workspaces, and any the cluster still runs.
	Projects []ProjectCount `json:"projects"`
}

// ProjectCount is one project's workspaces, counted.
type ProjectCount struct {
	Name       string        `json:"name"`
	Workspaces int           `json:"workspaces"`
	States     map[State]int `json:"states"`
}

// RevisionStatus is one revision of the specs.
type RevisionStatus struct {
	ID       string    `json:"id"`
	LoadedAt time.Time `json:"loadedAt"`
	// Errors are the problems that made it invalid, "file:line:col: message".
	Errors []string `json:"errors,omitempty"`
}

// CycleStatus is the outcome of one reconcile cycle.
type CycleStatus struct {
	// At is the cluster's time of the cycle's observation; absent for a
	// cycle that failed before it observed.
	At       time.Time `json:"at,omitzero"`
	Duration Seconds   `json:"durationSeconds"`
	Actions  int       `json:"actions"`
	Error    string    `json:"error,omitempty"`
}

// ProjectStatus is one project's standing.
type ProjectStatus struct {
	Name      string `json:"name"`
	Tier      string `json:"tier"`
	TierValue int    `json:"tierValue"`
	QuotaGPUs int    `json:"quotaGPUs"`
	// BorrowLimitGPUs is how many GPUs it may borrow beyond its quota;
	// nil (absent) when unlimited.
	BorrowLimitGPUs *int `json:"borrowLimitGPUs,omitempty"`
	UsedGPUs        int  `json:"usedGPUs"`
	// BorrowedGPUs are the GPUs it uses beyond its quota.
	BorrowedGPUs int `json:"borrowedGPUs"`
	// QuotaCPUMHz and QuotaMemoryBytes are the CPU (MHz shares, as
	// resources.cpu counts them: a core is 1000) and memory its quota
	// names (the JSON keeps the API's names, …CPUMilli); absent: not named, so not
	// limited. The other CPU fields are present only with QuotaCPUMHz,
	// the memory fields only with QuotaMemoryBytes: the borrow limit
	// (absent: unlimited), what it uses as the decision counts it
	// (policies.QuotaPerReplica per allocation) and what of that is
	// beyond the quota.
	QuotaCPUMHz            int64  `json:"quotaCPUMilli,omitempty"`
	BorrowLimitCPUMHz      *int64 `json:"borrowLimitCPUMilli,omitempty"`
	UsedCPUMHz             int64  `json:"usedCPUMilli,omitempty"`
	BorrowedCPUMHz         int64  `json:"borrowedCPUMilli,omitempty"`
	QuotaMemoryBytes       int64  `json:"quotaMemoryBytes,omitempty"`
	BorrowLimitMemoryBytes *int64 `json:"borrowLimitMemoryBytes,omitempty"`
	UsedMemoryBytes        int64  `json:"usedMemoryBytes,omitempty"`
	BorrowedMemoryBytes    int64  `json:"borrowedMemoryBytes,omitempty"`
	// Kinds are its quota accounts per GPU kind, where its quota names
	// kinds (quota.kinds), sorted by kind; then QuotaGPUs,
	// BorrowLimitGPUs, UsedGPUs and BorrowedGPUs above are its gpus
	// account's: the workspaces that ask for no kind its quota names
	// (schema.Set.QuotaAccount).
	Kinds []KindQuotaStatus `json:"kinds,omitempty"`
	// DecayedUsage is its time-decayed usage in GPU-seconds.
	DecayedUsage float64 `json:"decayedUsage"`
	// Share is its fair-share weight over the sum of all weights;
	// UsageShare its decayed usage over all projects' decayed usage.
	Share      float64 `json:"share"`
	UsageShare float64 `json:"usageShare"`
}

// WorkspaceStatus is one workspace's state and why.
type WorkspaceStatus struct {
	Project string `json:"project"`
	Name    string `json:"name"`
	State   State  `json:"state"`
	// ReasonKind classifies Reason (quota, capacity, topology, queue,
	// preempted, stopped, preempting, waiting) when there is one.
	ReasonKind string   `json:"reasonKind,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	Node       string   `json:"node,omitempty"`
	GPUs       []string `json:"gpus,omitempty"`
	// GPUKind is the GPU kind it asks for (resources.gpuKind); empty:
	// none.
	GPUKind     string      `json:"gpuKind,omitempty"`
	PreemptedBy *schema.Ref `json:"preemptedBy,omitempty"`
	// Since is when it entered State.
	Since time.Time `json:"since"`
	// Progress is the work it holds (when the driver knows it) and
	// WorkLost the work it lost to preemptions and failures, over all runs.
	Progress Seconds `json:"progressSeconds"`
	WorkLost Seconds `json:"workLostSeconds"`
	Revision string  `json:"revision,omitempty"`
	// Decision is the last decision's verdict for it and why.
	Decision string `json:"decision,omitempty"`
	// Endpoints are where its ports are reachable now (reconcile/reach.go).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// RunTime is its predicted run time, when berth knows one (its
	// expectedDuration, or runs of its project that completed); absent
	// for a workspace that has ended (likely.go).
	RunTime *RunTimeStatus `json:"runTime,omitempty"`
	// LikelyStart is when it is likely to start: Pending and Preempted
	// workspaces in the queue that need GPUs (likely.go).
	LikelyStart *LikelyStart `json:"likelyStart,omitempty"`
	// LastEnd is how its last run that berth did not stop ended, with
	// its class (drivers.EndClass); absent when none has.
	LastEnd *EndStatus `json:"lastEnd,omitempty"`
	// GPUUse is the last reading of its GPUs' utilization, while it runs
	// and the driver has one (drivers.Alloc.Use); absent otherwise.
	GPUUse *GPUUseStatus `json:"gpuUse,omitempty"`
}

// GPUUseStatus is the last reading of a running workspace's GPU
// utilization, over the GPUs of all its replicas that report one.
type GPUUseStatus struct {
	// At is when the oldest of the readings was measured (the
	// cluster's clock).
	At time.Time `json:"at"`
	// MaxPercent and MeanPercent are the highest and the mean
	// utilization of the GPUs read, 0–100.
	MaxPercent  float64 `json:"maxPercent"`
	MeanPercent float64 `json:"meanPercent"`
	// GPUs is how many of its GPUs were read (the others report none:
	// MIG instances, a GPU the device plugin could not read).
	GPUs int `json:"gpus"`
}

// UseOf sums up the readings of a workspace's allocations
// (drivers.Alloc.Use): nil when none has one.
func UseOf(allocs []drivers.Alloc) *GPUUseStatus {
	var u *GPUUseStatus
	sum := 0.0
	for _, a := range allocs {
		if a.Use == nil || len(a.Use.Percent) == 0 {
			continue
		}
		if u == nil {
			u = &GPUUseStatus{At: a.Use.At, MaxPercent: -1}
		}
		if a.Use.At.Before(u.At) {
			u.At = a.Use.At
		}
		for _, p := range a.Use.Percent {
			u.MaxPercent = max(u.MaxPercent, p)
			sum += p
			u.GPUs++
		}
	}
	if u != nil {
		u.MeanPercent = sum / float64(u.GPUs)
	}
	return u
}

// EndStatus is how a run ended without berth stopping it.
type EndStatus struct {
	// Class is completed, task-failed or node-fault (drivers.EndClass).
	Class    string    `json:"class"`
	At       time.Time `json:"at,omitzero"`
	Node     string    `json:"node,omitempty"`
	ExitCode int       `json:"exitCode,omitempty"`
	// Message is the cluster's account; Stderr the last lines its task
	// wrote to stderr, when the driver could read them.
	Message string `json:"message,omitempty"`
	Stderr  string `json:"stderr,omitempty"`
	// Restarts is the in-place restarts before it ended; Attempts, for a
	// node's fault, how many ends of the node's fault came in a row.
	Restarts int `json:"restarts,omitempty"`
	Attempts int `json:"attempts,omitempty"`
	// RanFor is how long it had been Running when it ended, as berth saw
	// it (zero: it never ran): what is at risk back to its last
	// checkpoint when the driver does not report progress.
	RanFor Seconds `json:"ranForSeconds,omitempty"`
}

// Ref returns the workspace's reference.
func (w WorkspaceStatus) Ref() schema.Ref { return schema.Ref{Project: w.Project, Name: w.Name} }

// Transition is one change of a workspace's state.
type Transition struct {
	At          time.Time   `json:"at"`
	From        State       `json:"from,omitempty"`
	To          State       `json:"to"`
	Reason      string      `json:"reason,omitempty"`
	Node        string      `json:"node,omitempty"`
	GPUs        []string    `json:"gpus,omitempty"`
	PreemptedBy *schema.Ref `json:"preemptedBy,omitempty"`
	Progress    Seconds     `json:"progressSeconds"`
	WorkLost    Seconds     `json:"workLostSeconds,omitempty"`
}

// WorkspaceDetail is one workspace with its history and an explanation of
// its current state in sentences.
type WorkspaceDetail struct {
	Version     string          `json:"version"`
	Workspace   WorkspaceStatus `json:"workspace"`
	History     []Transition    `json:"history"`
	Explanation []string        `json:"explanation"`
}

// Paging of the status (GET /api/v1/status, StatusPage).
const (
	// DefaultStatusLimit is how many workspaces the status lists when
	// the request sets no limit: a tree of up to this many is listed
	// whole, as before paging, and a larger one a page at a time (0.2 to
	// 0.5 MB of JSON per page: 459 KB of 100,000 workspaces in 100
	// projects) with Next set.
	DefaultStatusLimit = 1000
	// MaxStatusLimit is the most one page may list.
	MaxStatusLimit = 10000
)

// WorkspaceTransition is a Transition of a named workspace.
type WorkspaceTransition struct {
	Workspace schema.Ref `json:"workspace"`
	Transition
}

// ReasonWaiting is the ReasonKind of a Starting workspace whose task the
// cluster holds back, placed and holding its GPUs, for something it needs
// and cannot get (drivers.Alloc.Waiting: a secret's Variable that does
// not exist or that the job may not read); the reason says what to do.
const ReasonWaiting = "waiting"

// ReasonExited is the ReasonKind of a workspace whose task ended on its
// own (Completed, or Failed with its exit code): it does not wait to run.
const ReasonExited = "exited"
