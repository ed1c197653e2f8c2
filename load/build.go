package load

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// build converts the documents that passed the schema into a Set with
// defaults filled, and checks the rules that span documents. Documents
// that failed the schema still count as existing, so a reference to them
// is not reported a second time.
func build(docs []*doc) (*schema.Set, []Diagnostic) {
	var diags []Diagnostic
	add := func(d ...Diagnostic) { diags = append(diags, d...) }
	byKind := map[string][]*doc{}
	for _, d := range docs {
		byKind[d.kind] = append(byKind[d.kind], d)
	}
	set := &schema.Set{Policy: schema.DefaultPolicy()}

	// 1. The policy first: workspace defaults come from it.
	var policyDoc *doc
	for _, d := range byKind[schema.KindSchedulingPolicy] {
		if policyDoc != nil {
			add(errorf(d.start, "a second SchedulingPolicy %q: a repo has at most one (the first is %q at %s); merge them", d.name, policyDoc.name, policyDoc.start))
			continue
		}
		policyDoc = d
		if d.valid {
			p, ds := convertPolicy(d)
			add(ds...)
			set.Policy = p
		}
	}

	// 2. Names: duplicates per kind (per project for workspaces).
	firsts := map[string]*doc{}
	for _, kind := range []string{schema.KindPriorityTier, schema.KindProject, schema.KindVolume, schema.KindGPUKind, schema.KindNotification, schema.KindWorkspace} {
		for _, d := range byKind[kind] {
			if d.name == "" {
				continue
			}
			key := kind + "/" + d.name
			if kind == schema.KindWorkspace {
				key = kind + "/" + d.project + "/" + d.name
			}
			if first, dup := firsts[key]; dup {
				what := fmt.Sprintf("%s %q", kind, d.name)
				if kind == schema.KindWorkspace {
					what = fmt.Sprintf("Workspace %q in project %q", d.name, d.project)
				}
				add(errorf(d.pos("metadata.name"), "duplicate %s: it is already defined at %s; rename or remove one", what, first.start))
				d.valid = false
				continue
			}
			firsts[key] = d
		}
	}
	exists := func(kind, name string) bool { _, ok := firsts[kind+"/"+name]; return ok }
	names := func(kind string) []string {
		var out []string
		for _, d := range byKind[kind] {
			if isName(d.name) && !contains(out, d.name) {
				out = append(out, d.name)
			}
		}
		sort.Strings(out)
		return out
	}
	missing := func(kind, name string) string {
		msg := fmt.Sprintf("there is no %s %q", kind, name)
		all := names(kind)
		if s := closest(name, all); s != "" {
			return msg + fmt.Sprintf("; did you mean %q?", s)
		}
		if len(all) == 0 {
			return msg + fmt.Sprintf("; define one (the specs have no %s yet)", kind)
		}
		return msg + "; use one of " + strings.Join(all, ", ")
	}

	// 3. Tiers: values unique, and far enough apart for Nomad.
	for _, d := range byKind[schema.KindPriorityTier] {
		if d.valid {
			t, ds := convertTier(d)
			add(ds...)
			set.Tiers = append(set.Tiers, t)
		}
	}
	diags = append(diags, checkTierValues(set.Tiers)...)
	for _, d := range byKind[schema.KindPriorityTier] {
		if !d.valid {
			continue
		}
		if t, _ := convertTier(d); t.Spec.BorrowWithinCohort != nil && !exists(schema.KindPriorityTier, t.Spec.BorrowWithinCohort.Below) {
			b := t.Spec.BorrowWithinCohort
			add(errorf(d.pos("spec.borrowWithinCohort.below"), "tier %q: borrowWithinCohort.below: %s; it names the tier below whose value other teams' in-quota work may be taken", d.name, missing(schema.KindPriorityTier, b.Below)))
		}
	}

	// 3b. GPU kinds: no two match one device group.
	for _, d := range byKind[schema.KindGPUKind] {
		if !d.valid {
			continue
		}
		k := convertKind(d)
		for _, other := range set.Kinds {
			if k.Overlaps(&other) {
				add(errorf(d.pos("spec.match"), "GPU kind %q: spec.match %q overlaps kind %q's match %q (%s): a device group both match would be of two kinds; narrow one of the patterns", k.Meta.Name, k.Spec.Match, other.Meta.Name, other.Spec.Match, other.Meta.FieldPos("spec.match")))
				break
			}
		}
		set.Kinds = append(set.Kinds, k)
	}

	// 4. Projects: their tier exists; namespaces unique.
	nsOwner := map[string]*schema.Project{}
	for _, d := range byKind[schema.KindProject] {
		if !d.valid {
			// Still check the reference, so one run shows every problem.
			if isName(d.tier) && !exists(schema.KindPriorityTier, d.tier) {
				add(errorf(d.pos("spec.tier"), "project %q: %s", d.name, missing(schema.KindPriorityTier, d.tier)))
			}
			continue
		}
		p, ds := convertProject(d)
		add(ds...)
		if !exists(schema.KindPriorityTier, p.Spec.Tier) {
			add(errorf(d.pos("spec.tier"), "project %q: %s", p.Meta.Name, missing(schema.KindPriorityTier, p.Spec.Tier)))
		}
		if mt := p.Spec.MaxTier; mt != "" {
			if !exists(schema.KindPriorityTier, mt) {
				add(errorf(d.pos("spec.maxTier"), "project %q: maxTier: %s", p.Meta.Name, missing(schema.KindPriorityTier, mt)))
			} else if t, m := tierValue(set.Tiers, p.Spec.Tier), tierValue(set.Tiers, mt); t > m && m > 0 {
				add(errorf(d.pos("spec.tier"), "project %q: tier %q (value %d) is above its own maxTier %q (value %d); lower the tier or raise maxTier", p.Meta.Name, p.Spec.Tier, t, mt, m))
			}
		}
		add(checkKindCounts(d, &p, exists, missing)...)
		ns := p.Spec.Namespace
		if ns == "" {
			ns = p.Meta.Name
		}
		if other, dup := nsOwner[ns]; dup {
			add(errorf(d.pos("spec.namespace"), "project %q uses Nomad namespace %q, which project %q (%s) already uses; give each project its own namespace", p.Meta.Name, ns, other.Meta.Name, other.Meta.Source))
		} else {
			nsOwner[ns] = &p
		}
		set.Projects = append(set.Projects, p)
	}

	// 4b. CPU and memory quotas against the cluster files' nodes.
	add(checkQuotaCapacity(set.Projects, clusterShapes(byKind[schema.KindCluster]))...)

	// 5. Volumes: the projects they list exist.
	for _, d := range byKind[schema.KindVolume] {
		if !d.valid {
			continue
		}
		v, ds := convertVolume(d)
		add(ds...)
		for i, p := range v.Spec.Projects {
			if !exists(schema.KindProject, p) {
				add(errorf(d.pos(fmt.Sprintf("spec.projects.%d", i)), "volume %q: %s", v.Meta.Name, missing(schema.KindProject, p)))
			}
		}
		set.Volumes = append(set.Volumes, v)
	}
	set.Sort()

	// 6. Workspaces: project, owner and volumes resolve; the workspace can
	// fit its project's quota plus borrow limit, and some set of nodes.
	clusters := clusterShapes(byKind[schema.KindCluster])
	if n := len(byKind[schema.KindWorkspace]); n > 0 {
		set.Workspaces = make([]schema.Workspace, 0, n) // one allocation, not a doubling of large values
	}
	for _, d := range byKind[schema.KindWorkspace] {
		if !d.valid {
			// Still check the references, so one run shows every problem.
			if isName(d.project) && !exists(schema.KindProject, d.project) {
				add(errorf(d.pos("metadata.project"), "workspace %q: %s", d.name, missing(schema.KindProject, d.project)))
			}
			if p := set.Project(d.project); p != nil && d.owner != "" {
				if dg, ok := checkOwner(d, d.name, d.owner, p); !ok {
					add(dg)
				}
			}
			continue
		}
		w, ds := convertWorkspace(d, set.Policy)
		add(ds...)
		set.Workspaces = append(set.Workspaces, w)
		if !exists(schema.KindProject, w.Meta.Project) {
			add(errorf(d.pos("metadata.project"), "workspace %q: %s", w.Meta.Name, missing(schema.KindProject, w.Meta.Project)))
			continue
		}
		p := set.Project(w.Meta.Project)
		if p == nil {
			continue // the project is invalid; its own errors say why
		}
		w.Spec.Placement = w.Spec.Placement.Or(p.Spec.Placement)
		set.Workspaces[len(set.Workspaces)-1].Spec.Placement = w.Spec.Placement
		if wt := w.Spec.Tier; wt != "" {
			if !exists(schema.KindPriorityTier, wt) {
				add(errorf(d.pos("spec.tier"), "workspace %q: %s", w.Meta.Name, missing(schema.KindPriorityTier, wt)))
			} else if mt := p.Spec.MaxTier; mt != "" {
				if v, m := tierValue(set.Tiers, wt), tierValue(set.Tiers, mt); v > m && m > 0 {
					add(errorf(d.pos("spec.tier"), "workspace %q: tier %q (value %d) is above project %q's maxTier %q (value %d); use a tier of value %d or less, or raise the project's spec.maxTier (%s)", w.Meta.Name, wt, v, p.Meta.Name, mt, m, m, p.Meta.FieldPos("spec.maxTier")))
				}
			}
		}
		if dg, ok := checkOwner(d, w.Meta.Name, w.Spec.Owner, p); !ok {
			add(dg)
		}
		seenMount := map[string]int{}
		for i, m := range w.Spec.Volumes {
			field := fmt.Sprintf("spec.volumes.%d", i)
			if j, dup := seenMount[m.MountPath]; dup {
				add(errorf(d.pos(field+".mountPath"), "workspace %q mounts two volumes at %s (spec.volumes.%d and spec.volumes.%d); give each its own mountPath", w.Meta.Name, m.MountPath, j, i))
			}
			seenMount[m.MountPath] = i
			if !exists(schema.KindVolume, m.Name) {
				add(errorf(d.pos(field+".name"), "workspace %q: %s", w.Meta.Name, missing(schema.KindVolume, m.Name)))
				continue
			}
			if v := set.Volume(m.Name); v != nil {
				w.Spec.Volumes[i].Source = v.Spec.Source
			}
			if v := set.Volume(m.Name); v != nil && !contains(v.Spec.Projects, p.Meta.Name) {
				add(errorf(d.pos(field+".name"), "workspace %q may not mount volume %q: the volume is not shared with project %q; add %s to spec.projects of the volume (%s)", w.Meta.Name, m.Name, p.Meta.Name, p.Meta.Name, v.Meta.FieldPos("spec.projects")))
			}
		}
		// The kinds it asks for (none: [nil]), each declared.
		kinds := []*schema.GPUKind{nil}
		if ks := w.Spec.Resources.Kinds(); len(ks) > 0 {
			kinds = kinds[:0]
			for i, k := range ks {
				kind := set.Kind(k)
				if kind == nil {
					if !exists(schema.KindGPUKind, k) {
						field, what := "spec.resources.gpuKind", "resources.gpuKind"
						if len(w.Spec.Resources.GPUKinds) > 0 {
							field, what = fmt.Sprintf("spec.resources.gpuKinds.%d", i), "resources.gpuKinds"
						}
						add(errorf(d.pos(field), "workspace %q: %s: %s", w.Meta.Name, what, missing(schema.KindGPUKind, k)))
					}
					continue
				}
				kinds = append(kinds, kind)
			}
		}
		add(checkQuotaFitCPUMem(&w, p, d)...)
		if len(kinds) == 0 || len(kinds) < len(w.Spec.Resources.Kinds()) {
			// No kind to count or fit GPUs by: said above, or the kind's
			// own errors say why.
			continue
		}
		if dg, ok := checkQuotaFits(&w, p, d, kinds); !ok {
			add(dg)
		}
		// With several cluster files, fitting any one of them is enough;
		// with several kinds, any one of them.
		var misfits []Diagnostic
	clusters:
		for _, c := range clusters {
			for _, kind := range kinds {
				dg, ok := c.fits(&w, kind, d)
				if ok {
					misfits = nil
					break clusters
				}
				misfits = append(misfits, dg)
			}
		}
		if len(misfits) > 0 {
			add(misfits[0])
		}
	}

	// 7. Notifications: the projects they name exist.
	for _, d := range byKind[schema.KindNotification] {
		if !d.valid {
			continue
		}
		n, ds := convertNotification(d)
		add(ds...)
		for i, p := range n.Spec.Projects {
			if !exists(schema.KindProject, p) {
				add(errorf(d.pos(fmt.Sprintf("spec.projects.%d", i)), "notification %q: %s", n.Meta.Name, missing(schema.KindProject, p)))
			}
		}
		set.Notifications = append(set.Notifications, n)
	}
	set.Sort()
	return set, diags
}

// checkOwner reports a workspace whose owner is not a member of its
// project (a project without members admits anyone).
func checkOwner(d *doc, name, owner string, p *schema.Project) (Diagnostic, bool) {
	if owner == "" || len(p.Spec.Members) == 0 || contains(p.Spec.Members, owner) {
		return Diagnostic{}, true
	}
	return errorf(d.pos("spec.owner"), "workspace %q: owner %q is not a member of project %q; add them to the project's spec.members (%s) or change the owner", name, owner, p.Meta.Name, p.Meta.FieldPos("spec.members")), false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkTierValues reports tier values used twice and, as warnings,
// neighbours less than 10 apart where the higher may preempt the lower:
// Nomad only preempts across a priority gap of at least 10.
func checkTierValues(tiers []schema.PriorityTier) []Diagnostic {
	var diags []Diagnostic
	sorted := append([]schema.PriorityTier(nil), tiers...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Spec.Value != sorted[j].Spec.Value {
			return sorted[i].Spec.Value < sorted[j].Spec.Value
		}
		return posLess(sorted[i].Meta.Source, sorted[j].Meta.Source)
	})
	for i := 1; i < len(sorted); i++ {
		lo, hi := sorted[i-1], sorted[i]
		gap := hi.Spec.Value - lo.Spec.Value
		switch {
		case gap == 0:
			diags = append(diags, errorf(hi.Meta.FieldPos("spec.value"), "tier %q has value %d, which tier %q (%s) already has; give each tier its own value", hi.Meta.Name, hi.Spec.Value, lo.Meta.Name, lo.Meta.Source))
		case gap < 10 && hi.Spec.CanPreempt && lo.Spec.Preemptible:
			diags = append(diags, warnf(hi.Meta.FieldPos("spec.value"), "tier %q (%d) is only %d above tier %q (%d): Nomad's own preemption needs priorities at least 10 apart; space the values further if you rely on it", hi.Meta.Name, hi.Spec.Value, gap, lo.Meta.Name, lo.Spec.Value))
		}
	}
	return diags
}

// posLess orders positions as diagnostics are sorted: by file, line
// and column.
func posLess(p, o schema.Pos) bool {
	return Diagnostic{Pos: p}.less(Diagnostic{Pos: o})
}

// checkKindCounts reports a project's quota.kinds and borrowLimit.kinds
// that name no GPUKind, a borrow limit of a kind the quota does not
// name, and quota.kinds beside a CPU or memory quota: the decision
// counts a kind's quota account in GPUs alone, so a CPU or memory quota
// could not bound what the project's work of that kind holds.
func checkKindCounts(d *doc, p *schema.Project, exists func(kind, name string) bool, missing func(kind, name string) string) []Diagnostic {
	var out []Diagnostic
	if q := p.Spec.Quota; len(q.Kinds) > 0 && (q.CPUMHz > 0 || q.MemoryBytes > 0) {
		field := "spec.quota.cpu"
		if q.CPUMHz == 0 {
			field = "spec.quota.memory"
		}
		out = append(out, errorf(d.pos(field), "project %q: a quota that names GPU kinds (quota.kinds) cannot name cpu or memory too: berth counts a kind's quota in GPUs alone; leave cpu and memory out of this quota, or the kinds", p.Meta.Name))
	}
	for _, k := range slices.Sorted(maps.Keys(p.Spec.Quota.Kinds)) {
		if !exists(schema.KindGPUKind, k) {
			out = append(out, errorf(d.pos("spec.quota.kinds."+k), "project %q: quota.kinds: %s", p.Meta.Name, missing(schema.KindGPUKind, k)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Spec.BorrowLimit.Kinds)) {
		switch _, named := p.Spec.Quota.Kinds[k]; {
		case !exists(schema.KindGPUKind, k):
			out = append(out, errorf(d.pos("spec.borrowLimit.kinds."+k), "project %q: borrowLimit.kinds: %s", p.Meta.Name, missing(schema.KindGPUKind, k)))
		case !named:
			out = append(out, errorf(d.pos("spec.borrowLimit.kinds."+k), "project %q: borrowLimit.kinds names kind %q, which quota.kinds does not: a kind's borrow limit bounds borrowing beyond its own quota; name it in quota.kinds (%s: 0 for none), or leave it out here", p.Meta.Name, k, k))
		}
	}
	return out
}

// checkQuotaFits reports a workspace whose gang can never fit its
// project's quota plus borrow limit in any of the kinds it asks for
// (kinds; [nil]: none): checkQuotaFit's report for the first, when none
// fits.
func checkQuotaFits(w *schema.Workspace, p *schema.Project, d *doc, kinds []*schema.GPUKind) (Diagnostic, bool) {
	var first Diagnostic
	for i, k := range kinds {
		name := ""
		if k != nil {
			name = k.Meta.Name
		}
		dg, ok := checkQuotaFit(w, p, d, name)
		if ok {
			return Diagnostic{}, true
		}
		if i == 0 {
			first = dg
		}
	}
	if len(kinds) > 1 {
		first.Message += fmt.Sprintf("; nor does any other kind it lists (%d in all)", len(kinds))
	}
	return first, false
}

// checkQuotaFit reports a workspace whose gang can never fit its
// project's quota plus borrow limit, in the account it counts against
// under kind (empty: none): the kind's, when the quota names it, else
// the GPUs'.
func checkQuotaFit(w *schema.Workspace, p *schema.Project, d *doc, kind string) (Diagnostic, bool) {
	kind = p.Spec.Quota.KindQuota(kind)
	quota, borrow := p.Spec.AccountLimits(kind)
	if borrow < 0 {
		return Diagnostic{}, true
	}
	need := w.Spec.Resources.GPUs * w.Spec.Replicas
	limit := quota + borrow
	if need <= limit {
		return Diagnostic{}, true
	}
	needs := fmt.Sprintf("%d GPUs", need)
	if w.Spec.Replicas > 1 {
		needs = fmt.Sprintf("%d GPUs (%d replicas × %d)", need, w.Spec.Replicas, w.Spec.Resources.GPUs)
	}
	if kind != "" {
		return errorf(d.pos("spec.resources.gpus"), "workspace %q can never run: it needs %s of kind %q but project %q may use at most %d of that kind (quota.kinds.%s %d + borrowLimit.kinds.%s %d); lower its GPUs or replicas, or raise the project's quota.kinds.%s or borrowLimit.kinds.%s",
			w.Meta.Name, needs, kind, p.Meta.Name, limit, kind, quota, kind, borrow, kind, kind), false
	}
	return errorf(d.pos("spec.resources.gpus"), "workspace %q can never run: it needs %s but project %q may use at most %d (quota %d + borrowLimit %d); lower its GPUs or replicas, or raise the project's quota or borrowLimit",
		w.Meta.Name, needs, p.Meta.Name, limit, p.Spec.Quota.GPUs, p.Spec.BorrowLimit.GPUs), false
}

// checkQuotaFitCPUMem reports a workspace whose gang can never fit its
// project's CPU or memory quota plus borrow limit, where the quota names
// them and the limit is not unlimited. CPU counts resources.cpu, an
// exclusive core as 1 (1000m), as the decision counts it.
func checkQuotaFitCPUMem(w *schema.Workspace, p *schema.Project, d *doc) []Diagnostic {
	var out []Diagnostic
	r, n := w.Spec.Resources, int64(max(w.Spec.Replicas, 1))
	for _, dm := range []struct {
		name, field        string
		quota, borrow, per int64
		text               func(int64) string
	}{
		{"CPU", "cpu", p.Spec.Quota.CPUMHz, p.Spec.BorrowLimit.CPUMHz, r.CPUMHz + int64(r.ExclusiveCores)*1000, text.CPUQuantity},
		{"memory", "memory", p.Spec.Quota.MemoryBytes, p.Spec.BorrowLimit.MemoryBytes, r.MemoryBytes, text.BytesQuantity},
	} {
		if dm.quota <= 0 || dm.borrow < 0 || dm.per*n <= dm.quota+dm.borrow {
			continue
		}
		needs := dm.text(dm.per*n) + " " + dm.name
		if n > 1 {
			needs = fmt.Sprintf("%s (%d replicas × %s)", needs, n, dm.text(dm.per))
		}
		field := "spec.resources." + dm.field
		if dm.field == "cpu" && r.ExclusiveCores > 0 {
			field = "spec.resources.exclusiveCores"
		}
		out = append(out, errorf(d.pos(field), "workspace %q can never run: it needs %s but project %q may use at most %s (%s quota %s + borrowLimit %s); lower its %s or replicas, or raise the project's %s quota or borrowLimit",
			w.Meta.Name, needs, p.Meta.Name, dm.text(dm.quota+dm.borrow), dm.name, dm.text(dm.quota), dm.text(dm.borrow), dm.field, dm.name))
	}
	return out
}

// nameRE is #Name of the schema.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func isName(s string) bool { return nameRE.MatchString(s) }

// tierValue returns the value of the tier named name among tiers, or 0.
func tierValue(tiers []schema.PriorityTier, name string) int {
	for _, t := range tiers {
		if t.Meta.Name == name {
			return t.Spec.Value
		}
	}
	return 0
}
