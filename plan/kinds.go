package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/schema"
)

// KindWarnings says where the declared GPU kinds and the cluster
// disagree: a kind no device group matches, a device group no kind
// matches (only work asking for no kind, or its gpuModel, runs on it),
// and a quota in a kind the cluster has none of. Nothing when the specs
// declare no kinds.
func KindWarnings(set *schema.Set, snap *drivers.Snapshot) []string {
	if len(set.Kinds) == 0 {
		return nil
	}
	have := map[string]int{} // devices per kind
	var unmatched []string
	for _, c := range drivers.GPUsByKind(set, snap) { // the kinds, then the models of no kind
		if c.Kind == "" {
			unmatched = append(unmatched, fmt.Sprintf("%q (%s)", c.Model, text.Plural(c.GPUs, "device")))
			continue
		}
		have[c.Kind] = c.GPUs
	}
	var models []string // the cluster's, for a kind that matches none
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if !slices.Contains(models, g.Model) {
				models = append(models, g.Model)
			}
		}
	}
	slices.Sort(models)
	var out []string
	for _, k := range set.Kinds {
		if have[k.Meta.Name] == 0 {
			out = append(out, fmt.Sprintf("GPU kind %s (match %q, %s) matches no device group on the cluster%s: its workspaces wait", k.Meta.Name, k.Spec.Match, k.Meta.Source, modelsText(models)))
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
// "NVIDIA H100 80GB HBM3", "NVIDIA L40S")`.
func modelsText(models []string) string {
	if len(models) == 0 {
		return " (the cluster reports no GPU)"
	}
	quoted := make([]string, len(models))
	for i, m := range models {
		quoted[i] = fmt.Sprintf("%q", m)
	}
	return " (the cluster has " + strings.Join(quoted, ", ") + ")"
}
