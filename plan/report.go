package plan

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/policies"
	"github.com/berth-dev/berth/schema"
)

// PlanVersion is the version of the JSON document `berth plan` writes.
const PlanVersion = "berth.dev/plan/v1"

// Report is what a change to the specs would do: the spec changes per
// project, at the level people think in, and the consequences on the
// observed cluster of running the decision engine on the new specs.
// Slices are sorted by name; it is a pure function of its inputs.
type Report struct {
	Version string `json:"version"`
	// Base and Head name the two revisions compared (Base empty: none).
	Base    string `json:"base,omitempty"`
	Head    string `json:"head"`
	Cluster string `json:"cluster"`
	// ObservedAt is the snapshot's time: the consequences' now.
	ObservedAt time.Time `json:"observedAt"`
	Summary    Summary   `json:"summary"`
	// Tiers are changes to priority tiers ("tier high 80 → 90").
	Tiers    []string        `json:"tiers,omitempty"`
	Projects []ProjectReport `json:"projects"`
	// Warnings are what a reviewer must know before merging.
	Warnings []string `json:"warnings"`
	// MassPrune is what berth reconcile's deletion guard says of it.
	MassPrune MassPrune `json:"massPrune"`
}

// Summary counts the report's lines.
type Summary struct {
	SpecChanges int `json:"specChanges"`
	Start       int `json:"start"`
	Preempt     int `json:"preempt"`
	Stop        int `json:"stop"`
	Purge       int `json:"purge"`
	Wait        int `json:"wait"`
	Update      int `json:"update"`
}

// Changes reports whether the change does anything: a spec change or a
// consequence other than waiting.
func (s Summary) Changes() bool {
	return s.SpecChanges+s.Start+s.Preempt+s.Stop+s.Purge+s.Update > 0
}

// ProjectReport is one project's changes and consequences.
type ProjectReport struct {
	Name string `json:"name"`
	// Change is added, removed, changed or unchanged.
	Change       string            `json:"change"`
	Changes      []string          `json:"changes,omitempty"`
	Workspaces   []WorkspaceChange `json:"workspaces,omitempty"`
	Consequences []Consequence     `json:"consequences,omitempty"`
}

// WorkspaceChange is one workspace added, removed or changed in the specs.
type WorkspaceChange struct {
	Name    string   `json:"name"`
	Change  string   `json:"change"`
	Details []string `json:"details,omitempty"`
}

// Consequence is what would happen to one workspace on the cluster.
type Consequence struct {
	Workspace schema.Ref `json:"workspace"`
	// Kind is start, preempt, wait, stop, purge (stopped now, purged
	// after the prune delay unless it comes back), update (running; what
	// its task sees or its priority changed: exactly the updates apply
	// makes) or limit (running or starting, under a time limit the
	// change sets or changes: when it stops).
	Kind  string   `json:"kind"`
	Node  string   `json:"node,omitempty"`
	GPUs  []string `json:"gpus,omitempty"`
	After []string `json:"after,omitempty"` // start: victims that must be gone first
	// By is the preemptor of a preempt.
	By *schema.Ref `json:"by,omitempty"`
	// Restarts (update only): the update restarts the task where it runs,
	// losing the work since its last checkpoint (AtRisk); false: only its
	// priority changes, in place.
	Restarts bool `json:"restarts,omitempty"`
	// AtRisk is the work a preempted (or restarted) workspace did since
	// its last checkpoint, which it loses if it cannot checkpoint in its
	// grace.
	AtRisk        time.Duration `json:"-"`
	AtRiskSeconds int64         `json:"atRiskSeconds,omitempty"`
	Reason        string        `json:"reason,omitempty"`
}

var consequenceOrder = map[string]int{"preempt": 0, "stop": 1, "purge": 2, "start": 3, "update": 4, "limit": 5, "wait": 6}

// PlanInput is what NewReport compares.
type PlanInput struct {
	// Base is the revision before the change (nil: none known); Head
	// the one after (required).
	Base, Head         *schema.Set
	BaseName, HeadName string
	Cluster            string
	// Snapshot is the cluster as observed.
	Snapshot *drivers.Snapshot
	// Decision and Plan are what one cycle of berth reconcile does on
	// Head and Snapshot (reconcile.DryRun runs that cycle); the report
	// renders them.
	Decision policies.Decision
	Plan     Plan
	// History is the history that cycle's decision read (nil: none),
	// for how long limited workspaces have run.
	History *drivers.History
	// AllowMassPrune is berth reconcile's --allow-mass-prune.
	AllowMassPrune bool
	// MassPrune is berth reconcile's threshold (PruneGuard; Allow is
	// AllowMassPrune).
	MassPrunePercent, MassPruneMin int
	// PruneDelay is berth reconcile's --prune-delay (default 24h).
	PruneDelay time.Duration
	// NativePreemption lists the Nomad schedulers ("batch", "service")
	// with native preemption on.
	NativePreemption []string
}

// NewReport builds the report. It mutates none of its inputs.
func NewReport(in PlanInput) Report {
	delay := in.PruneDelay
	if delay <= 0 {
		delay = DefaultPruneDelay
	}
	snap := in.Snapshot
	if snap == nil {
		snap = &drivers.Snapshot{}
	}
	r := Report{Version: PlanVersion, Base: in.BaseName, Head: in.HeadName, Cluster: in.Cluster, ObservedAt: snap.ObservedAt, Warnings: []string{}}
	projects := map[string]*ProjectReport{}
	project := func(name string) *ProjectReport {
		if p := projects[name]; p != nil {
			return p
		}
		p := &ProjectReport{Name: name, Change: "unchanged"}
		projects[name] = p
		return p
	}

	// 1. Spec changes.
	if in.Base != nil {
		r.Tiers = tierChanges(in.Base, in.Head)
		diffProjects(in.Base, in.Head, project)
	}
	for _, p := range in.Head.Projects {
		project(p.Meta.Name)
	}

	// 2. Consequences: what the loop's cycle does on the new specs
	// against the snapshot.
	d, plan := in.Decision, in.Plan
	allocs := drivers.ByWorkspace(snap.Allocs)
	waits := map[schema.Ref][]schema.Ref{}
	for _, a := range plan.Actions {
		if a.Kind == drivers.ActionWait {
			waits[a.Workspace] = a.Victims
		}
	}
	for _, a := range plan.Actions {
		c := Consequence{Workspace: a.Workspace, Reason: a.Reason}
		switch a.Kind {
		case drivers.ActionStart:
			c.Kind = "start"
			c.Node, c.GPUs = drivers.WherePlaced(a.Placements)
			for _, v := range waits[a.Workspace] {
				c.After = append(c.After, v.String())
			}
		case drivers.ActionPreempt:
			c.Kind = "preempt"
			by := a.By
			c.By = &by
			c.Node, c.GPUs = drivers.Where(allocs[a.Workspace])
			c.AtRisk = atRisk(allocs[a.Workspace], snap.ObservedAt)
			c.AtRiskSeconds = int64(c.AtRisk / time.Second)
		case drivers.ActionUpdate:
			// Exactly the updates apply makes (New): a changed task
			// restarts; a changed priority is applied in place.
			c.Kind = "update"
			c.Node, c.GPUs = drivers.Where(allocs[a.Workspace])
			c.Restarts = a.Restarts
			var old *schema.Workspace
			if in.Base != nil {
				old = in.Base.Workspace(a.Workspace)
			}
			detail := ""
			if old != nil && a.Spec != nil && !reflect.DeepEqual(old.Spec, a.Spec.Spec) {
				detail = " (" + strings.Join(workspaceDetails(old.Spec, a.Spec.Spec), "; ") + ")"
			}
			if a.Restarts {
				c.AtRisk = atRisk(allocs[a.Workspace], snap.ObservedAt)
				c.AtRiskSeconds = int64(c.AtRisk / time.Second)
				c.Reason = "restarts: " + strings.TrimSuffix(a.Reason, ": restarts it where it runs") + detail + "; the work since its last checkpoint is lost"
			} else {
				c.Reason = a.Reason
			}
		case drivers.ActionStop:
			c.Kind = "stop"
			c.Node, c.GPUs = drivers.Where(allocs[a.Workspace])
			if in.Head.Workspace(a.Workspace) == nil {
				c.Kind = "purge"
				c.Reason = fmt.Sprintf("removed from the specs: stopped now, its job purged after %s unless it comes back", text.Duration(delay))
			}
		default:
			continue
		}
		p := project(a.Workspace.Project)
		p.Consequences = append(p.Consequences, c)
	}
	// Removed workspaces that hold nothing now are still purged later.
	if in.Base != nil {
		for _, w := range in.Base.Workspaces {
			ref := w.Ref()
			if in.Head.Workspace(ref) != nil || len(allocs[ref]) > 0 {
				continue
			}
			p := project(ref.Project)
			p.Consequences = append(p.Consequences, Consequence{Workspace: ref, Kind: "purge",
				Reason: fmt.Sprintf("removed from the specs: not running; its job is purged after %s unless it comes back", text.Duration(delay))})
		}
	}
	for _, wd := range d.Workspaces {
		if wd.Verdict != policies.VerdictWait {
			continue
		}
		c := Consequence{Workspace: wd.Ref, Kind: "wait", Reason: orDefault(wd.Reason.Message, wd.Reason.Kind.String())}
		if wd.PreemptedBy != nil {
			by := *wd.PreemptedBy
			c.By = &by
		}
		p := project(wd.Ref.Project)
		p.Consequences = append(p.Consequences, c)
	}

	// Time limits the change sets or changes: when what runs (or
	// starts) under them stops.
	for _, wd := range d.Workspaces {
		if wd.Verdict != policies.VerdictRun && wd.Verdict != policies.VerdictStart {
			continue
		}
		if c, ok := limitConsequence(in, wd.Ref, snap, allocs[wd.Ref]); ok {
			p := project(wd.Ref.Project)
			p.Consequences = append(p.Consequences, c)
		}
	}

	// 3. Warnings.
	r.MassPrune = CheckMassPrune(in.Base, in.Head, snap, PruneGuard{Percent: in.MassPrunePercent, Min: in.MassPruneMin, Allow: in.AllowMassPrune})
	if r.MassPrune.Refused() {
		r.Warnings = append(r.Warnings, "berth reconcile will refuse this revision: "+r.MassPrune.Problem())
	} else if r.MassPrune.Mass() {
		r.Warnings = append(r.Warnings, fmt.Sprintf("this revision stops or removes %d of %d managed workspaces (allowed)", len(r.MassPrune.Affected), r.MassPrune.Managed))
	}
	for _, s := range in.NativePreemption {
		r.Warnings = append(r.Warnings, "Nomad native preemption is on for "+s+" jobs: Nomad may evict workspaces without their checkpoint grace and outside berth's rules (berth doctor --fix turns it off)")
	}
	r.Warnings = append(r.Warnings, closeTiers(in.Head)...)
	r.Warnings = append(r.Warnings, guessedTopology(snap)...)
	r.Warnings = append(r.Warnings, KindWarnings(in.Head, snap)...)

	// 4. Sort and count.
	for _, name := range sortedKeys(projects) {
		p := projects[name]
		sort.SliceStable(p.Workspaces, func(i, j int) bool { return p.Workspaces[i].Name < p.Workspaces[j].Name })
		sort.SliceStable(p.Consequences, func(i, j int) bool {
			a, b := p.Consequences[i], p.Consequences[j]
			if consequenceOrder[a.Kind] != consequenceOrder[b.Kind] {
				return consequenceOrder[a.Kind] < consequenceOrder[b.Kind]
			}
			return a.Workspace.Less(b.Workspace)
		})
		r.Summary.SpecChanges += len(p.Changes) + len(p.Workspaces)
		for _, c := range p.Consequences {
			switch c.Kind {
			case "start":
				r.Summary.Start++
			case "preempt":
				r.Summary.Preempt++
			case "stop":
				r.Summary.Stop++
			case "purge":
				r.Summary.Purge++
			case "wait":
				r.Summary.Wait++
			case "update":
				r.Summary.Update++
			}
		}
		if p.Change == "unchanged" && len(p.Consequences) == 0 {
			continue
		}
		r.Projects = append(r.Projects, *p)
	}
	r.Summary.SpecChanges += len(r.Tiers)
	if r.Projects == nil {
		r.Projects = []ProjectReport{}
	}
	return r
}

// limitConsequence says when workspace ref, running or starting, stops
// at a time limit that Head sets and Base (when known) did not, or set
// to another value or from another level.
func limitConsequence(in PlanInput, ref schema.Ref, snap *drivers.Snapshot, own []drivers.Alloc) (Consequence, bool) {
	w := in.Head.Workspace(ref)
	if w == nil {
		return Consequence{}, false
	}
	lim := in.Head.MaxRuntime(w)
	if lim.Max <= 0 {
		return Consequence{}, false
	}
	if in.Base != nil {
		if bw := in.Base.Workspace(ref); bw != nil && in.Base.MaxRuntime(bw) == lim {
			return Consequence{}, false
		}
	}
	left, _ := policies.RemainingRuntime(in.Head, ref, own, in.History, snap.ObservedAt)
	c := Consequence{Workspace: ref, Kind: "limit",
		Reason: fmt.Sprintf("stops at its time limit in %s (%s maxRuntime of %s)", text.RoughDuration(left), lim.From, text.Duration(lim.Max))}
	c.Node, c.GPUs = drivers.Where(own)
	return c, true
}

// atRisk is the work since the last checkpoint (or the start) of the
// longest-running replica.
func atRisk(allocs []drivers.Alloc, now time.Time) time.Duration {
	var risk time.Duration
	for _, a := range allocs {
		since := a.StartedAt
		if a.LastCheckpoint.After(since) {
			since = a.LastCheckpoint
		}
		if !since.IsZero() && now.After(since) {
			risk = max(risk, now.Sub(since))
		}
	}
	return risk
}

func tierValue(s *schema.Set, name string) string {
	if t := s.Tier(name); t != nil {
		return fmt.Sprintf("%s (%d)", name, t.Spec.Value)
	}
	return name
}

// maxTierText shows a project's maxTier; empty is "any".
func maxTierText(s *schema.Set, name string) string {
	if name == "" {
		return "any"
	}
	return tierValue(s, name)
}

func tierChanges(base, head *schema.Set) []string {
	var out []string
	for _, t := range head.Tiers {
		old := base.Tier(t.Meta.Name)
		switch {
		case old == nil:
			out = append(out, fmt.Sprintf("tier %s added (value %d)", t.Meta.Name, t.Spec.Value))
		case old.Spec.Value != t.Spec.Value:
			out = append(out, fmt.Sprintf("tier %s value %d → %d", t.Meta.Name, old.Spec.Value, t.Spec.Value))
		}
		if old != nil && old.Spec.Preemptible != t.Spec.Preemptible {
			out = append(out, fmt.Sprintf("tier %s preemptible %v → %v", t.Meta.Name, old.Spec.Preemptible, t.Spec.Preemptible))
		}
		if old != nil && old.Spec.CanPreempt != t.Spec.CanPreempt {
			out = append(out, fmt.Sprintf("tier %s canPreempt %v → %v", t.Meta.Name, old.Spec.CanPreempt, t.Spec.CanPreempt))
		}
		if old != nil {
			out = append(out, limitChanges("tier "+t.Meta.Name+" ", old.Spec.MaxRuntime, t.Spec.MaxRuntime, old.Spec.Idle, t.Spec.Idle)...)
		}
	}
	for _, t := range base.Tiers {
		if head.Tier(t.Meta.Name) == nil {
			out = append(out, fmt.Sprintf("tier %s removed", t.Meta.Name))
		}
	}
	return out
}

func diffProjects(base, head *schema.Set, project func(string) *ProjectReport) {
	for _, p := range head.Projects {
		old := base.Project(p.Meta.Name)
		pr := project(p.Meta.Name)
		if old == nil {
			pr.Change = "added"
			pr.Changes = append(pr.Changes, fmt.Sprintf("added: tier %s, quota %d GPUs", tierValue(head, p.Spec.Tier), p.Spec.Quota.GPUs))
			continue
		}
		a, b := old.Spec, p.Spec
		var ch []string
		if a.Tier != b.Tier {
			ch = append(ch, fmt.Sprintf("tier %s → %s", tierValue(base, a.Tier), tierValue(head, b.Tier)))
		}
		if a.MaxTier != b.MaxTier {
			ch = append(ch, fmt.Sprintf("maxTier %s → %s", maxTierText(base, a.MaxTier), maxTierText(head, b.MaxTier)))
		}
		if a.Quota.GPUs != b.Quota.GPUs {
			ch = append(ch, fmt.Sprintf("quota %d → %d GPUs", a.Quota.GPUs, b.Quota.GPUs))
		}
		if a.Quota.CPUMHz != b.Quota.CPUMHz {
			ch = append(ch, fmt.Sprintf("quota CPU %s → %s", quotaCPUText(a.Quota.CPUMHz), quotaCPUText(b.Quota.CPUMHz)))
		}
		if a.Quota.MemoryBytes != b.Quota.MemoryBytes {
			ch = append(ch, fmt.Sprintf("quota memory %s → %s", quotaMemText(a.Quota.MemoryBytes), quotaMemText(b.Quota.MemoryBytes)))
		}
		if a.BorrowLimit.GPUs != b.BorrowLimit.GPUs {
			ch = append(ch, fmt.Sprintf("borrow limit %s → %s", borrowText(a.BorrowLimit.GPUs), borrowText(b.BorrowLimit.GPUs)))
		}
		if a.BorrowLimit.CPUMHz != b.BorrowLimit.CPUMHz {
			ch = append(ch, fmt.Sprintf("borrow limit CPU %s → %s", borrowQtyText(a.BorrowLimit.CPUMHz, quotaCPUText), borrowQtyText(b.BorrowLimit.CPUMHz, quotaCPUText)))
		}
		if a.BorrowLimit.MemoryBytes != b.BorrowLimit.MemoryBytes {
			ch = append(ch, fmt.Sprintf("borrow limit memory %s → %s", borrowQtyText(a.BorrowLimit.MemoryBytes, quotaMemText), borrowQtyText(b.BorrowLimit.MemoryBytes, quotaMemText)))
		}
		ch = append(ch, limitChanges("", a.MaxRuntime, b.MaxRuntime, a.Idle, b.Idle)...)
		if policies.Weight(*old) != policies.Weight(p) {
			ch = append(ch, fmt.Sprintf("fair-share weight %g → %g", policies.Weight(*old), policies.Weight(p)))
		}
		if added, removed := setDiff(a.Members, b.Members); len(added)+len(removed) > 0 {
			var parts []string
			for _, m := range added {
				parts = append(parts, "+"+m)
			}
			for _, m := range removed {
				parts = append(parts, "-"+m)
			}
			ch = append(ch, "members "+strings.Join(parts, " "))
		}
		if a.Namespace != b.Namespace {
			ch = append(ch, fmt.Sprintf("namespace %q → %q", a.Namespace, b.Namespace))
		}
		if a.Description != b.Description {
			ch = append(ch, "description changed")
		}
		if x, y := a.Placement.String(), b.Placement.String(); x != y {
			ch = append(ch, fmt.Sprintf("placement %s → %s", orDefault(x, "any node"), orDefault(y, "any node")))
		}
		pr.Changes = ch
		if len(ch) > 0 {
			pr.Change = "changed"
		}
	}
	for _, p := range base.Projects {
		if head.Project(p.Meta.Name) == nil {
			pr := project(p.Meta.Name)
			pr.Change = "removed"
			pr.Changes = append(pr.Changes, "removed")
		}
	}
	for _, w := range head.Workspaces {
		old := base.Workspace(w.Ref())
		pr := project(w.Meta.Project)
		switch {
		case old == nil:
			pr.Workspaces = append(pr.Workspaces, WorkspaceChange{Name: w.Meta.Name, Change: "added",
				Details: []string{fmt.Sprintf("%s, %s", w.Spec.State, gpusText(w.Spec))}})
		case !reflect.DeepEqual(old.Spec, w.Spec):
			pr.Workspaces = append(pr.Workspaces, WorkspaceChange{Name: w.Meta.Name, Change: "changed", Details: workspaceDetails(old.Spec, w.Spec)})
		}
		if pr.Change == "unchanged" && len(pr.Workspaces) > 0 {
			pr.Change = "changed"
		}
	}
	for _, w := range base.Workspaces {
		if head.Workspace(w.Ref()) == nil {
			pr := project(w.Meta.Project)
			pr.Workspaces = append(pr.Workspaces, WorkspaceChange{Name: w.Meta.Name, Change: "removed"})
			if pr.Change == "unchanged" {
				pr.Change = "changed"
			}
		}
	}
}

func workspaceDetails(a, b schema.WorkspaceSpec) []string {
	var out []string
	add := func(what string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			out = append(out, fmt.Sprintf("%s %v → %v", what, x, y))
		}
	}
	add("state", a.State, b.State)
	if a.Resources.GPUs != b.Resources.GPUs || a.Replicas != b.Replicas {
		out = append(out, fmt.Sprintf("GPUs %s → %s", gpusText(a), gpusText(b)))
	}
	add("GPU model", orDefault(a.Resources.GPUModel, "any"), orDefault(b.Resources.GPUModel, "any"))
	add("image", a.Task.Image, b.Task.Image)
	add("command", a.Task.Command, b.Task.Command)
	add("nvlink", a.Topology.NVLink, b.Topology.NVLink)
	add("numa", a.Topology.NUMA, b.Topology.NUMA)
	add("tier", orDefault(a.Tier, "the project's"), orDefault(b.Tier, "the project's"))
	add("preemptible", a.Preemptible, b.Preemptible)
	add("checkpoint grace", a.Checkpoint.GracePeriod, b.Checkpoint.GracePeriod)
	add("checkpoint interval", a.Checkpoint.Interval, b.Checkpoint.Interval)
	add("owner", a.Owner, b.Owner)
	add("placement", orDefault(a.Placement.String(), "any node"), orDefault(b.Placement.String(), "any node"))
	add("ports", portsText(a.Ports), portsText(b.Ports))
	add("service", serviceText(a.Service), serviceText(b.Service))
	add("maxRuntime", runtimeText(a.MaxRuntime), runtimeText(b.MaxRuntime))
	add("idle", idleText(a.Idle), idleText(b.Idle))
	add("secrets", secretsText(a.Task.Secrets), secretsText(b.Task.Secrets))
	if len(out) == 0 {
		out = append(out, "spec changed (task, volumes or resources)")
	}
	return out
}

// limitChanges writes what changed of a tier's or project's limits,
// each line after prefix: "maxRuntime none → 24h", "idle … → …".
func limitChanges(prefix string, a, b *time.Duration, ia, ib schema.IdleRule) []string {
	var out []string
	if ra, rb := runtimeText(a), runtimeText(b); ra != rb {
		out = append(out, fmt.Sprintf("%smaxRuntime %s → %s", prefix, ra, rb))
	}
	if ia != ib {
		out = append(out, fmt.Sprintf("%sidle %s → %s", prefix, idleText(ia), idleText(ib)))
	}
	return out
}

// runtimeText writes a maxRuntime as written: "not set", "0s (no
// limit)", "24h".
func runtimeText(d *time.Duration) string {
	switch {
	case d == nil:
		return "not set"
	case *d == 0:
		return "0s (no limit)"
	}
	return text.Duration(*d)
}

// idleText writes an idle rule as written: "not set", "after 4h, below
// 5%, report".
func idleText(r schema.IdleRule) string {
	if r.IsZero() {
		return "not set"
	}
	var parts []string
	if r.After > 0 {
		parts = append(parts, "after "+text.Duration(r.After))
	}
	if r.Below > 0 {
		parts = append(parts, fmt.Sprintf("below %g%%", r.Below))
	}
	if r.Action != "" {
		parts = append(parts, string(r.Action))
	}
	return strings.Join(parts, ", ")
}

// portsText writes ports as "http, ssh:2222" (a static port after its
// label), "none" when there are none.
func portsText(ps []schema.Port) string {
	if len(ps) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range ps {
		s := p.Label
		if p.Static > 0 {
			s += fmt.Sprintf(":%d", p.Static)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// secretsText writes a task's secrets by reference, never a value (berth
// never reads one): "ml/hf:token as $HF_TOKEN, ml/gcp:key as
// secrets/gcp.json, restart on change"; "none" when there are none.
func secretsText(ss []schema.Secret) string {
	if len(ss) == 0 {
		return "none"
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// serviceText writes a service as "llm on api (http check /health)",
// "none" when there is none.
func serviceText(s *schema.Service) string {
	if s == nil {
		return "none"
	}
	out := s.Name + " on " + s.Port
	if c := s.Check; c != nil {
		out += " (" + c.Type + " check"
		if c.Path != "" {
			out += " " + c.Path
		}
		out += ")"
	}
	return out
}

func gpusText(w schema.WorkspaceSpec) string {
	r := max(w.Replicas, 1)
	if r == 1 {
		return fmt.Sprintf("%d GPU", w.Resources.GPUs)
	}
	return fmt.Sprintf("gang %d×%d GPU", r, w.Resources.GPUs)
}

func borrowText(n int) string {
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// quotaCPUText and quotaMemText write a CPU or memory quota as YAML
// writes it ("8", "64Gi"), or "none" for one not named.
func quotaCPUText(m int64) string {
	if m <= 0 {
		return "none"
	}
	return text.CPUQuantity(m)
}

func quotaMemText(b int64) string {
	if b <= 0 {
		return "none"
	}
	return text.BytesQuantity(b)
}

// borrowQtyText writes a CPU or memory borrow limit, "unlimited" below 0.
func borrowQtyText(n int64, text func(int64) string) string {
	switch {
	case n < 0:
		return "unlimited"
	case n == 0:
		return "0"
	}
	return text(n)
}

func setDiff(a, b []string) (added, removed []string) {
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

// closeTiers warns of tiers whose values are less than 10 apart: Nomad's
// own preemption treats such priorities as equal.
func closeTiers(s *schema.Set) []string {
	tiers := slices.Clone(s.Tiers)
	sort.SliceStable(tiers, func(i, j int) bool { return tiers[i].Spec.Value < tiers[j].Spec.Value })
	var out []string
	for i := 1; i < len(tiers); i++ {
		a, b := tiers[i-1], tiers[i]
		if d := b.Spec.Value - a.Spec.Value; d < 10 {
			out = append(out, fmt.Sprintf("tiers %s (%d) and %s (%d) are %d apart: Nomad's native preemption ignores priority differences under 10, so if it is ever on it will not keep this order",
				a.Meta.Name, a.Spec.Value, b.Meta.Name, b.Spec.Value, d))
		}
	}
	return out
}

// guessedTopology warns of GPU nodes whose NVLink/NUMA topology the driver
// did not get from berth agent: berth placed on them as if all their GPUs
// shared one NVLink domain and one NUMA node.
func guessedTopology(snap *drivers.Snapshot) []string {
	var names []string
	for _, n := range snap.Nodes {
		if n.TopologyGuessed && len(n.GPUs) > 0 {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	const most = 5
	list := strings.Join(names[:min(len(names), most)], ", ")
	if len(names) > most {
		list += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return []string{fmt.Sprintf("%d node(s) have no GPU topology from berth agent (%s): berth assumes one NVLink domain and one NUMA node on each, so nvlink/numa requirements there are not checked against the hardware; run berth agent on them", len(names), list)}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
