package replay

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/schema"
)

// TierShare is one tier of the mapping and the share of each project's
// jobs that get it when the trace gives none.
type TierShare struct {
	Name  string  `json:"name"`
	Value int     `json:"value"`
	Share float64 `json:"share"`
}

// Mapping turns trace jobs into berth specs. Every choice is here, and the
// report states it.
type Mapping struct {
	// Seed drives the tier draw.
	Seed uint64 `json:"seed"`
	// Tiers, highest first; shares add up to 1.
	Tiers []TierShare `json:"tiers"`
	// CheckpointEvery is the checkpoint interval of jobs longer than
	// CheckpointOver (jobs whose trace gives none); shorter jobs never
	// checkpoint, so a preemption loses all their work.
	CheckpointEvery time.Duration `json:"checkpointEvery"`
	CheckpointOver  time.Duration `json:"checkpointOver"`
	// Grace is how long a preempted job may run on after its signal. The
	// jobs do not checkpoint on the signal: a preemption loses the work
	// since the last periodic checkpoint.
	Grace time.Duration `json:"grace"`
	// GangSize: a job of more GPUs is a gang of ceil(gpus/GangSize)
	// replicas of GangSize GPUs each.
	GangSize int `json:"gangSize"`
	// Quotas are guaranteed GPUs per trace project; nil: proportional to
	// each project's share of the trace's GPU-time, adding up to the
	// cluster.
	Quotas map[string]int `json:"quotas,omitempty"`
	// MaxWait is the replayed policy's aging.maxWait, berth's wait bound
	// (0: off); DefaultMapping gives the default policy's.
	MaxWait time.Duration `json:"maxWait"`
	// CohortBelow, when set, names a tier: the highest tier borrows
	// within the cohort below it (schema.BorrowWithinCohort).
	CohortBelow string `json:"cohortBelow,omitempty"`
	// MaxRuntime, when set, is every tier's time limit (spec.maxRuntime):
	// a job that has run it, over all its runs, is stopped with its grace
	// and does not run again, under every policy (the limit is the
	// platform's, not a scheduler's).
	MaxRuntime time.Duration `json:"maxRuntime,omitempty"`
	// Service, when set, is berth's attained-service ordering in place
	// of the default policy's (schema.ServicePolicy; no steps: off).
	Service *schema.ServicePolicy `json:"service,omitempty"`
}

// DefaultMapping is the mapping `berth simulate` uses.
func DefaultMapping() Mapping {
	return Mapping{
		Seed:            1,
		Tiers:           []TierShare{{"high", 80, 0.1}, {"medium", 50, 0.3}, {"low", 20, 0.6}},
		CheckpointEvery: 30 * time.Minute,
		CheckpointOver:  time.Hour,
		Grace:           30 * time.Second,
		GangSize:        8,
		MaxWait:         schema.DefaultPolicy().Spec.Aging.MaxWait,
	}
}

// Workload is a trace mapped onto berth's specs for one cluster.
type Workload struct {
	// Base holds the tiers, projects and policy; workspaces come and go
	// during the replay.
	Base *schema.Set
	Jobs []MappedJob
	// Projects are the trace's projects (Philly VCs), sorted by name.
	Projects []ProjectInfo
	// Skipped counts jobs that can never fit the cluster.
	Skipped int
	// TiersGiven counts the jobs whose trace gave a tier; ProjectsGiven:
	// the trace named its projects (a CSV's project column), rather than
	// Philly's virtual clusters.
	TiersGiven    int
	ProjectsGiven bool
	Capacity      int
	// Kinds are the cluster's GPU kinds (MapCluster), by name, then its
	// GPUs of no kind (where the cluster file declares kinds that leave
	// some out); nil for a workload of Map. KindsDeclared: the cluster
	// file declares them (else they are its models); KindsGiven counts
	// the jobs that ask for a kind.
	Kinds         []KindInfo
	KindsDeclared bool
	KindsGiven    int
	// gpuKinds are the kinds as GPUKinds, in Kinds' order.
	gpuKinds []schema.GPUKind
}

// kindsReported reports whether the report tells the kinds apart: the
// cluster has GPUs of several kinds, or the trace names one.
func (wl *Workload) kindsReported() bool { return len(wl.Kinds) > 1 || wl.KindsGiven > 0 }

// MappedJob is a trace job and the workspace that runs it.
type MappedJob struct {
	Job
	// Tenant is the trace project, which is also Ref.Project: the berth
	// project (a team); the job's tier is its workspace's own.
	Tenant    string
	Ref       schema.Ref
	TierValue int
	Replicas  int
	PerGPUs   int
	// Grace is the preemption grace of the mapping.
	Grace time.Duration
}

// Workspace is the job's workspace spec, built when asked: a spec held
// for every job of a long trace was most of the replay's live heap (765
// bytes a job), and the garbage collector scanned all of it in every
// cycle, for every job already finished.
func (j *MappedJob) Workspace() schema.Workspace {
	ws := schema.Workspace{Meta: schema.Meta{Name: j.ID, Project: j.Ref.Project}}
	ws.Spec.State = schema.DesiredRunning
	ws.Spec.Tier = j.Tier
	ws.Spec.Task = schema.Task{Driver: "sim"}
	ws.Spec.Resources.GPUs = j.PerGPUs
	ws.Spec.Resources.GPUKind = j.Kind
	ws.Spec.Replicas = j.Replicas
	ws.Spec.Preemptible = true
	ws.Spec.Checkpoint = schema.Checkpoint{GracePeriod: j.Grace, Interval: j.Checkpoint}
	return ws
}

// ProjectInfo is one trace project: its quota over all its tiers and its
// share of the trace's GPU-time.
type ProjectInfo struct {
	Name      string  `json:"name"`
	Quota     int     `json:"quota"`
	GPUTime   float64 `json:"gpuHours"`
	Share     float64 `json:"share"`
	Jobs      int     `json:"jobs"`
	projIndex int
}

// Map maps jobs (sorted by submit) onto a cluster of capacity GPUs whose
// largest node has nodeGPUs, all of one kind: a job that names a kind is
// an error (MapCluster maps onto a cluster's kinds).
func Map(jobs []Job, capacity, nodeGPUs int, m Mapping) (*Workload, error) {
	return mapJobs(jobs, fleet{gpus: capacity, whole: KindInfo{GPUs: capacity, perNode: nodeGPUs}}, m)
}

// mapJobs maps jobs onto the cluster f describes.
func mapJobs(jobs []Job, f fleet, m Mapping) (*Workload, error) {
	capacity := f.gpus
	if len(m.Tiers) == 0 {
		return nil, fmt.Errorf("mapping: no tiers")
	}
	gang := m.GangSize
	if gang <= 0 {
		gang = 8
	}
	tierValue := map[string]int{}
	for _, t := range m.Tiers {
		tierValue[t.Name] = t.Value
	}
	wl := &Workload{Capacity: capacity, Jobs: make([]MappedJob, 0, len(jobs)), Kinds: f.kinds, KindsDeclared: f.declared, gpuKinds: f.specs}
	// 1. Tiers: per trace project, a seeded draw of exactly the shares.
	byTenant := map[string][]int{}
	var tenants []string
	// Each project's name, one string for all its jobs: a reader makes a
	// string per line, and comparing two names that share their bytes
	// costs a pointer comparison, on every lookup of a replay.
	name := map[string]string{}
	// Each job's ID names its workspace: two jobs of one ID would be one
	// workspace to the replay, which never ends.
	ids := make(map[string]struct{}, len(jobs))
	for i, j := range jobs {
		if _, dup := ids[j.ID]; dup {
			return nil, fmt.Errorf("job %s: the ID of an earlier job; want IDs unique in the trace", j.ID)
		}
		ids[j.ID] = struct{}{}
		if _, ok := byTenant[j.Project]; !ok {
			tenants = append(tenants, j.Project)
			name[j.Project] = j.Project
		}
		byTenant[j.Project] = append(byTenant[j.Project], i)
	}
	sort.Strings(tenants)
	tiers := make([]string, len(jobs))
	for _, tn := range tenants {
		var open []int
		for _, i := range byTenant[tn] {
			if jobs[i].Tier != "" {
				if _, ok := tierValue[jobs[i].Tier]; !ok {
					return nil, fmt.Errorf("job %s: tier %q: want one of the mapping's tiers", jobs[i].ID, jobs[i].Tier)
				}
				tiers[i] = jobs[i].Tier
				continue
			}
			open = append(open, i)
		}
		h := fnv.New64a()
		h.Write([]byte(tn))
		r := rand.New(rand.NewPCG(m.Seed, h.Sum64()))
		r.Shuffle(len(open), func(a, b int) { open[a], open[b] = open[b], open[a] })
		pos, acc := 0, 0.0
		for ti, t := range m.Tiers {
			acc += t.Share
			end := int(acc*float64(len(open)) + 0.5)
			if ti == len(m.Tiers)-1 {
				end = len(open)
			}
			for ; pos < end && pos < len(open); pos++ {
				tiers[open[pos]] = t.Name
			}
		}
	}
	// 2. Jobs → workspaces, each with its own tier; jobs that can never
	// fit are skipped.
	tenantTime := map[string]float64{}
	for i, j := range jobs {
		per, reps := j.GPUs, 1
		if j.GPUs > gang {
			per, reps = gang, (j.GPUs+gang-1)/gang
		}
		// What the job may use: its kind's GPUs, else the whole GPUs.
		room, ki := &f.whole, -1
		if j.Kind != "" {
			var err error
			if ki, err = f.kind(&jobs[i], j.Kind); err != nil {
				return nil, err
			}
			room, j.Kind = &f.kinds[ki], f.kinds[ki].Name // one string for all its jobs
		}
		if per > room.perNode || per*reps > room.GPUs {
			wl.Skipped++
			continue
		}
		if ki >= 0 {
			wl.KindsGiven++
			wl.Kinds[ki].Jobs++
		}
		cp := j.Checkpoint
		if cp < 0 {
			cp = 0
			if j.Duration > m.CheckpointOver {
				cp = m.CheckpointEvery
			}
		}
		if j.Tier != "" {
			wl.TiersGiven++
		}
		if j.Source == FormatCSV {
			wl.ProjectsGiven = true
		}
		j.Tier, j.Checkpoint, j.Project = tiers[i], cp, name[j.Project]
		wl.Jobs = append(wl.Jobs, MappedJob{Job: j, Tenant: j.Project, Ref: schema.Ref{Project: j.Project, Name: j.ID},
			TierValue: tierValue[tiers[i]], Replicas: reps, PerGPUs: per, Grace: m.Grace})
		tenantTime[j.Project] += j.Duration.Seconds() * float64(per*reps)
	}
	// 3. Projects: one per trace project (a team), its quota proportional
	// to its GPU-time (largest remainder), adding up to the cluster; the
	// lowest tier is the project's, for workspaces that name none.
	set := &schema.Set{Revision: "trace", Policy: schema.DefaultPolicy()}
	if wl.KindsGiven > 0 || f.declared {
		// Only then: a decision indexes the GPUs of each kind declared,
		// which a trace of no kinds on a cluster of models would pay for
		// and never use. A cluster file's kinds are declared whatever the
		// trace: their weights count in berth's fair share.
		set.Kinds = f.specs
	}
	set.Policy.Spec.Aging.MaxWait = m.MaxWait
	if m.Service != nil {
		set.Policy.Spec.Service = *m.Service
	}
	for _, t := range m.Tiers {
		set.Tiers = append(set.Tiers, schema.PriorityTier{Meta: schema.Meta{Name: t.Name}, Spec: schema.TierSpec{Value: t.Value, Preemptible: true, CanPreempt: true}})
		if m.MaxRuntime > 0 {
			set.Tiers[len(set.Tiers)-1].Spec.MaxRuntime = &m.MaxRuntime
		}
	}
	lowest, highest := m.Tiers[0], 0
	for i, t := range m.Tiers {
		if t.Value < lowest.Value {
			lowest = t
		}
		if t.Value > m.Tiers[highest].Value {
			highest = i
		}
	}
	if m.CohortBelow != "" {
		if !slices.ContainsFunc(m.Tiers, func(t TierShare) bool { return t.Name == m.CohortBelow }) {
			return nil, fmt.Errorf("borrow within the cohort below tier %q: the replay's tiers are %s", m.CohortBelow, tierNames(m.Tiers))
		}
		set.Tiers[highest].Spec.BorrowWithinCohort = &schema.BorrowWithinCohort{Below: m.CohortBelow}
	}
	var keys []string
	var weights []float64
	var total float64
	for _, tn := range tenants {
		if gt, ok := tenantTime[tn]; ok {
			keys = append(keys, tn)
			weights = append(weights, gt)
			total += gt
		}
	}
	quotas := make([]int, len(keys))
	if m.Quotas == nil {
		quotas = apportion(weights, capacity)
	} else {
		for i, tn := range keys {
			quotas[i] = m.Quotas[tn]
		}
	}
	infos := map[string]*ProjectInfo{}
	for i, tn := range keys {
		set.Projects = append(set.Projects, schema.Project{Meta: schema.Meta{Name: tn, Labels: map[string]string{"berth.dev/tenant": tn}}, Spec: schema.ProjectSpec{
			Tier: lowest.Name, Quota: schema.Resources{GPUs: quotas[i]}, BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited},
		}})
		infos[tn] = &ProjectInfo{Name: tn, Quota: quotas[i], GPUTime: tenantTime[tn] / 3600}
	}
	for _, mj := range wl.Jobs {
		infos[mj.Tenant].Jobs++
	}
	for _, tn := range tenants {
		if pi := infos[tn]; pi != nil {
			pi.Share = tenantTime[tn] / total
			pi.projIndex = len(wl.Projects)
			wl.Projects = append(wl.Projects, *pi)
		}
	}
	set.Sort()
	wl.Base = set
	return wl, nil
}

// apportion splits total in proportion to weights, by largest remainder
// (ties to the first).
func apportion(weights []float64, total int) []int {
	out := make([]int, len(weights))
	var sum float64
	for _, w := range weights {
		sum += w
	}
	if sum <= 0 || total <= 0 {
		return out
	}
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	left := total
	for i, w := range weights {
		exact := w / sum * float64(total)
		out[i] = int(exact)
		left -= out[i]
		rems = append(rems, rem{i, exact - float64(out[i])})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; k < left && k < len(rems); k++ {
		out[rems[k].i]++
	}
	return out
}

// tierNames lists the tiers' names, comma-separated.
func tierNames(ts []TierShare) string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}
