package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// DeviceGroup is one Nomad device group the cluster reports: its model
// (the group's name), how many devices of it there are and on how many
// nodes, and the declared kind it is of (nil: none).
type DeviceGroup struct {
	Model   string
	Devices int
	Nodes   int
	Kind    *schema.GPUKind
}

// DeviceGroups lists the device groups of snap's nodes by model, with
// the kind of set each is of.
func DeviceGroups(set *schema.Set, snap *drivers.Snapshot) []DeviceGroup {
	byModel := map[string]*DeviceGroup{}
	for _, n := range snap.Nodes {
		seen := map[string]bool{}
		for _, g := range n.GPUs {
			dg := byModel[g.Model]
			if dg == nil {
				dg = &DeviceGroup{Model: g.Model, Kind: set.KindOf(g.Model)}
				byModel[g.Model] = dg
			}
			dg.Devices++
			if !seen[g.Model] {
				seen[g.Model] = true
				dg.Nodes++
			}
		}
	}
	out := make([]DeviceGroup, 0, len(byModel))
	for _, m := range sortedKeys(byModel) {
		out = append(out, *byModel[m])
	}
	return out
}

// KindWarnings says where the declared GPU kinds and the cluster
// disagree: a kind no device group matches, a device group no kind
// matches (only work asking for no kind, or its gpuModel, runs on it),
// and a quota in a kind the cluster has none of. Nothing when the specs
// declare no kinds.
func KindWarnings(set *schema.Set, snap *drivers.Snapshot) []string {
	if len(set.Kinds) == 0 {
		return nil
	}
	groups := DeviceGroups(set, snap)
	have := map[string]int{} // devices per kind
	var unmatched []string
	for _, g := range groups {
		if g.Kind == nil {
			unmatched = append(unmatched, fmt.Sprintf("%q (%s on %s)", g.Model, text.Plural(g.Devices, "device"), text.Plural(g.Nodes, "node")))
			continue
		}
		have[g.Kind.Meta.Name] += g.Devices
	}
	var out []string
	for _, k := range set.Kinds {
		if have[k.Meta.Name] == 0 {
			out = append(out, fmt.Sprintf("GPU kind %s (match %q, %s) matches no device group on the cluster%s: its workspaces wait", k.Meta.Name, k.Spec.Match, k.Meta.Source, modelsText(groups)))
		}
	}
	if len(unmatched) > 0 {
		out = append(out, fmt.Sprintf("no GPU kind matches device group %s: only workspaces that ask for no kind run there (or name the model in gpuModel); declare a GPUKind to give quotas in it", strings.Join(unmatched, ", ")))
	}
	for _, p := range set.Projects {
		names := make([]string, 0, len(p.Spec.Quota.Kinds))
		for k, n := range p.Spec.Quota.Kinds {
			if n > 0 && have[k] == 0 {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, fmt.Sprintf("project %s's quota names %s, but the cluster has no GPU of kind %s: the quota promises what cannot run", p.Meta.Name, text.Plural(p.Spec.Quota.Kinds[k], k+" GPU"), k))
		}
	}
	return out
}

// modelsText writes the models the cluster has: ` (the cluster has
// "NVIDIA H100 80GB HBM3", "NVIDIA L40S")`, or "" when it has none.
func modelsText(groups []DeviceGroup) string {
	if len(groups) == 0 {
		return " (the cluster reports no GPU)"
	}
	var names []string
	for _, g := range groups {
		names = append(names, fmt.Sprintf("%q", g.Model))
	}
	return " (the cluster has " + strings.Join(names, ", ") + ")"
}
