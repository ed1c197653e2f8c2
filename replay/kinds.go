package replay

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/drivers/sim"
	"github.com/berth-dev/berth/schema"
)

// GPU kinds in a replay.
//
// A trace's job may name the kind of GPU it runs on (the CSV's gpu_kind
// column, Job.Kind). The kinds are the cluster file's (spec.kinds: a
// name and a match each, as GPUKind documents declare them), or, where it
// declares none, one per model of its GPUs, named by the model itself, so
// that a trace can name the model ("NVIDIA A100-SXM4-80GB MIG 1g.10gb").
// The replay declares them in its specs (Set.Kinds: where the file
// declares them, whose weights count in berth's fair share, or where the
// trace names one) and gives each job's workspace its kind
// (resources.gpuKind), so berth's policy places it on GPUs of that kind
// only; the baselines do the same (replay/baseline). A job that names no
// kind runs on any whole GPU, never on a MIG instance. Quotas stay in
// quota.gpus, which counts every kind: the mapping's quotas follow the
// trace's GPU-time, which says nothing of the kinds a team would buy. A
// job naming a kind the cluster has no GPU of is an error before the
// replay starts (MapCluster).

// KindInfo is one GPU kind of the replayed cluster; a KindInfo with no
// name holds the GPUs that match none of the kinds the cluster file
// declares.
type KindInfo struct {
	Name  string `json:"name"`
	Match string `json:"match,omitempty"`
	// GPUs counts its usable GPUs (MIG instances: each one);
	// Equivalents weighs each by drivers.Weight (a whole GPU 1 unless its
	// kind gives a weight, a MIG instance its slices of seven).
	GPUs        int     `json:"gpus"`
	Equivalents float64 `json:"gpuEquivalents"`
	// Jobs counts the replayed jobs that ask for it.
	Jobs int `json:"jobs"`
	// perNode is the most of its GPUs one replica can take: of one model
	// (one device group), on one node.
	perNode int
}

// label names k in a report: its name, or "(no kind)".
func (k KindInfo) label() string {
	if k.Name == "" {
		return "(no kind)"
	}
	return k.Name
}

// Kinds returns the GPU kinds of a replay on cluster, sorted by name:
// the kinds its file declares (sim.Spec.Kinds), or, where it declares
// none, one per model of its GPUs, named by the model and matching it.
// declared reports which. Two models whose names differ only in case
// would be one kind (a kind matches without regard to case): an error
// that asks for the kinds to be declared.
func Kinds(cluster sim.Spec) (kinds []schema.GPUKind, declared bool, err error) {
	if len(cluster.Kinds) > 0 {
		// A file's are sorted; a Spec built by hand may not be, and the
		// specs' must be (Set.Kind searches them).
		kinds = slices.Clone(cluster.Kinds)
		sort.SliceStable(kinds, func(i, j int) bool { return kinds[i].Meta.Name < kinds[j].Meta.Name })
		return kinds, true, nil
	}
	seen := map[string]string{} // lower-cased model → model
	for _, n := range cluster.Nodes {
		for gi := range n.GPUs {
			m := n.GPUs[gi].Model
			low := strings.ToLower(m)
			if other, ok := seen[low]; ok {
				if other != m {
					return nil, false, fmt.Errorf("cluster %q: models %q and %q differ only in case, so a kind named by either would match both: declare the kinds (spec.kinds)", cluster.Name, other, m)
				}
				continue
			}
			if strings.Contains(m, "*") {
				return nil, false, fmt.Errorf("cluster %q: model %q has a *, which a kind's match reads as a pattern: declare the kinds (spec.kinds)", cluster.Name, m)
			}
			seen[low] = m
			kinds = append(kinds, schema.GPUKind{Meta: schema.Meta{Name: m}, Spec: schema.GPUKindSpec{Match: m}})
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].Meta.Name < kinds[j].Meta.Name })
	return kinds, false, nil
}

// kindInfos counts the usable GPUs of each kind of cluster, in kinds'
// order, and those of no kind last (only where there are some); whole
// is what a job of no kind may use: the whole GPUs, never a MIG
// instance.
func kindInfos(cluster sim.Spec, kinds []schema.GPUKind) (infos []KindInfo, whole KindInfo) {
	infos = make([]KindInfo, len(kinds)+1)
	for i, k := range kinds {
		infos[i].Name, infos[i].Match = k.Meta.Name, k.Spec.Match
	}
	for _, n := range cluster.Nodes {
		byModel := map[string]int{} // the node's usable GPUs of each model
		for gi := range n.GPUs {
			if g := &n.GPUs[gi]; g.Healthy {
				byModel[g.Model]++
			}
		}
		for model, count := range byModel {
			ki := len(kinds)
			var kind *schema.GPUKind
			for i := range kinds {
				if kinds[i].Matches(model) {
					ki, kind = i, &kinds[i]
					break
				}
			}
			in := &infos[ki]
			in.GPUs += count
			in.Equivalents += float64(count) * drivers.Weight(kind, model)
			in.perNode = max(in.perNode, count)
			if _, mig := drivers.ParseMIG(model); !mig {
				whole.GPUs += count
				whole.perNode = max(whole.perNode, count)
			}
		}
	}
	if infos[len(kinds)].GPUs == 0 {
		infos = infos[:len(kinds)]
	}
	return infos, whole
}

// kindNames lists the kinds that have GPUs, for an error.
func kindNames(infos []KindInfo) string {
	var names []string
	for _, k := range infos {
		if k.Name != "" && k.GPUs > 0 {
			names = append(names, fmt.Sprintf("%q", k.Name))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// MapCluster maps jobs (sorted by submit) onto cluster as Map does, with
// the cluster's GPU kinds (Kinds): a job's kind must be one the cluster
// has GPUs of, else the error names the job, where the trace gave it,
// and the kinds the cluster has. A job that can never fit the GPUs of
// its kind (of no kind: the whole GPUs) is skipped.
func MapCluster(jobs []Job, cluster sim.Spec, m Mapping) (*Workload, error) {
	kinds, declared, err := Kinds(cluster)
	if err != nil {
		return nil, err
	}
	infos, whole := kindInfos(cluster, kinds)
	gpus, _ := Shape(cluster)
	f := fleet{gpus: gpus, whole: whole, kinds: infos, declared: declared, specs: kinds, name: cluster.Name}
	return mapJobs(jobs, f, m)
}

// fleet is what mapJobs needs of the cluster: its GPUs, what a job of no
// kind may use, and its kinds.
type fleet struct {
	gpus     int
	whole    KindInfo
	kinds    []KindInfo // by name, then the GPUs of no kind
	declared bool       // the cluster file declares the kinds
	specs    []schema.GPUKind
	name     string
}

// kind returns the index of the kind named name in f.kinds, or an error
// for job j naming a kind the cluster has no GPU of.
func (f *fleet) kind(j *Job, name string) (int, error) {
	i := sort.Search(len(f.specs), func(i int) bool { return f.specs[i].Meta.Name >= name })
	if i < len(f.specs) && f.specs[i].Meta.Name == name && f.kinds[i].GPUs > 0 {
		return i, nil
	}
	where := ""
	switch {
	case j.File != "" && j.Line > 0:
		where = fmt.Sprintf(" (%s line %d)", j.File, j.Line)
	case j.Line > 0:
		where = fmt.Sprintf(" (line %d)", j.Line)
	}
	if f.name == "" && f.specs == nil {
		return 0, fmt.Errorf("job %s%s: GPU kind %q: the cluster has no GPU kinds", j.ID, where, name)
	}
	if f.declared {
		return 0, fmt.Errorf("job %s%s: GPU kind %q: cluster %q has no GPU of that kind; the kinds its file declares (spec.kinds) with GPUs are %s", j.ID, where, name, f.name, kindNames(f.kinds))
	}
	return 0, fmt.Errorf("job %s%s: GPU kind %q: cluster %q has no GPU of that kind; its kinds are its models, %s (a cluster file may declare kinds of its own: spec.kinds)", j.ID, where, name, f.name, kindNames(f.kinds))
}
