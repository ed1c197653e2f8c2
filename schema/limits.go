package schema

import "time"

// A workspace's limits: how long it may run (maxRuntime) and how long
// its GPUs may sit idle (idle). Each is set on the workspace, else on its
// project, else on its tier (idle: else on the SchedulingPolicy); the
// most specific level that sets a field wins, so a team's default can be
// overridden by one workspace, in either direction ("0s": no time
// limit; action: off: never idle-stopped).

// IdleAction is what berth does with a workspace whose GPUs stayed idle
// for IdleRule.After.
type IdleAction string

const (
	// IdleStop stops it with its checkpoint grace; it does not start
	// again until its spec changes.
	IdleStop IdleAction = "stop"
	// IdleReport only reports it (status, explain, the event feed, the
	// notifications); it runs on.
	IdleReport IdleAction = "report"
	// IdleOff turns the rule off at this level and below.
	IdleOff IdleAction = "off"
)

// DefaultIdleBelow is the utilization (percent) under which a GPU counts
// as idle when no level sets idle.below: a GPU that ran no kernel in
// the sample.
const DefaultIdleBelow = 1.0

// IdleRule is when a running workspace's GPUs count as idle, and what
// berth does then. The zero IdleRule sets nothing.
type IdleRule struct {
	// After is how long every GPU of the workspace must stay under Below
	// before Action; zero: not set at this level.
	After time.Duration `json:"after,omitempty"`
	// Below is the utilization, in percent (0–100], under which a GPU is
	// idle; zero: not set at this level.
	Below float64 `json:"below,omitempty"`
	// Action is stop, report or off; empty: not set at this level.
	Action IdleAction `json:"action,omitempty"`
}

// IsZero reports whether r sets nothing.
func (r IdleRule) IsZero() bool { return r == IdleRule{} }

// Level names the level a limit was set at (Kind: workspace, project,
// tier or policy; Name: the project's or tier's), for reasons; it is
// written only when a reason is ("project ml's").
type Level struct {
	Kind, Name string
}

// String writes the level as a reason says it: "its own", "project ml's",
// "tier batch's", "the policy's".
func (l Level) String() string {
	switch l.Kind {
	case "workspace":
		return "its own"
	case "policy":
		return "the policy's"
	}
	return l.Kind + " " + l.Name + "'s"
}

// RuntimeLimit is a workspace's resolved time limit.
type RuntimeLimit struct {
	// Max is how long it may run, over all its runs of one spec; zero:
	// no limit.
	Max time.Duration
	// From says which level set it.
	From Level
}

// ResolvedIdle is a workspace's resolved idle rule.
type ResolvedIdle struct {
	After  time.Duration // zero: the rule is off
	Below  float64
	Action IdleAction // IdleStop or IdleReport when After > 0
	// From says which level set After.
	From Level
}

// On reports whether the idle rule applies.
func (r ResolvedIdle) On() bool { return r.After > 0 && r.Action != IdleOff }

// MaxRuntime resolves w's time limit: its own spec.maxRuntime, else its
// project's, else its tier's; zero Max when none sets one (or the most
// specific that does sets 0s).
func (s *Set) MaxRuntime(w *Workspace) RuntimeLimit {
	if d := w.Spec.MaxRuntime; d != nil {
		return RuntimeLimit{*d, Level{Kind: "workspace"}}
	}
	if p := s.Project(w.Meta.Project); p != nil && p.Spec.MaxRuntime != nil {
		return RuntimeLimit{*p.Spec.MaxRuntime, Level{"project", p.Meta.Name}}
	}
	if t := s.TierFor(w); t != nil && t.Spec.MaxRuntime != nil {
		return RuntimeLimit{*t.Spec.MaxRuntime, Level{"tier", t.Meta.Name}}
	}
	return RuntimeLimit{}
}

// HasRuntimeLimits reports whether any tier, project or workspace of s
// sets a time limit: without one, no run time needs keeping.
func (s *Set) HasRuntimeLimits() bool {
	for i := range s.Tiers {
		if s.Tiers[i].Spec.MaxRuntime != nil {
			return true
		}
	}
	for i := range s.Projects {
		if s.Projects[i].Spec.MaxRuntime != nil {
			return true
		}
	}
	for i := range s.Workspaces {
		if s.Workspaces[i].Spec.MaxRuntime != nil {
			return true
		}
	}
	return false
}

// Idle resolves w's idle rule, field by field: its own spec.idle, else
// its project's, else its tier's, else the SchedulingPolicy's; Below
// defaults to DefaultIdleBelow and Action to IdleStop.
func (s *Set) Idle(w *Workspace) ResolvedIdle {
	levels := [4]struct {
		r    IdleRule
		from Level
	}{{r: w.Spec.Idle, from: Level{Kind: "workspace"}}}
	if p := s.Project(w.Meta.Project); p != nil {
		levels[1].r, levels[1].from = p.Spec.Idle, Level{"project", p.Meta.Name}
	}
	if t := s.TierFor(w); t != nil {
		levels[2].r, levels[2].from = t.Spec.Idle, Level{"tier", t.Meta.Name}
	}
	levels[3].r, levels[3].from = s.Policy.Spec.Idle, Level{Kind: "policy"}
	var out ResolvedIdle
	for _, l := range levels {
		if out.After == 0 && l.r.After > 0 {
			out.After, out.From = l.r.After, l.from
		}
		if out.Below == 0 {
			out.Below = l.r.Below
		}
		if out.Action == "" {
			out.Action = l.r.Action
		}
	}
	if out.Below == 0 {
		out.Below = DefaultIdleBelow
	}
	if out.Action == "" {
		out.Action = IdleStop
	}
	if out.Action == IdleOff {
		out.After = 0
	}
	return out
}

// HasIdleRules reports whether any level of s sets idle.after: without
// one, no utilization needs keeping.
func (s *Set) HasIdleRules() bool {
	if s.Policy.Spec.Idle.After > 0 {
		return true
	}
	for i := range s.Tiers {
		if s.Tiers[i].Spec.Idle.After > 0 {
			return true
		}
	}
	for i := range s.Projects {
		if s.Projects[i].Spec.Idle.After > 0 {
			return true
		}
	}
	for i := range s.Workspaces {
		if s.Workspaces[i].Spec.Idle.After > 0 {
			return true
		}
	}
	return false
}
