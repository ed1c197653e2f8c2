package nomad

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/drivers"
	"github.com/berth-dev/berth/schema"
	"github.com/hashicorp/nomad/api"
)

// Namespace returns the Nomad namespace of a project: spec.namespace, or
// the project's name.
func Namespace(p *schema.Project) string {
	if p.Spec.Namespace != "" {
		return p.Spec.Namespace
	}
	return p.Meta.Name
}

// JobID returns the job of workspace ref in namespace ns: the workspace's
// name when the namespace is the project's own, project--name when
// projects share a namespace.
func JobID(ref schema.Ref, ns string) string {
	if ns == ref.Project {
		return ref.Name
	}
	return ref.Project + "--" + ref.Name
}

const mib = 1 << 20

// placed is one placement with the node's Nomad ID resolved.
type placed struct {
	drivers.Placement
	NodeID string
}

// renderJob builds the Nomad job for a Start or Update: one task group
// per replica, each pinned to its node (${node.unique.id}) and to its
// exact GPUs (device "nvidia/gpu", count and ${device.ids}
// set_contains_any), with berth's marker meta. It is pure.
//
// Job meta carries MetaSpecHash, the workspace's drivers.Fingerprint (what
// its task sees), and MetaJobHash, the hash of the task-visible parts of
// the job as rendered (jobHash), so a job changed outside berth is seen
// as drift. Every job is a batch job: a task that exits 0 completes; one
// that fails is restarted in place (same node, same GPUs) by Nomad's
// restart block only when the spec asks for restarts (restart.attempts),
// that many times with its delay, and then fails. Nomad never moves it.
func renderJob(a drivers.Action, ns string, pl []placed, datacenters []string, restartDelay time.Duration) (*api.Job, error) {
	ref := a.Workspace
	if a.Spec == nil || a.Project == nil || a.Tier == nil {
		return nil, errorf(drivers.ClassInvalid, ref, "render job", "a %s action needs the workspace, project and tier specs", a.Kind)
	}
	spec := a.Spec.Spec
	if spec.Task.Driver == "" {
		return nil, errorf(drivers.ClassInvalid, ref, "render job", "workspace has no task driver")
	}
	id := JobID(ref, ns)
	typ := "batch"
	prio := a.Tier.Spec.Value
	var all []string
	for _, p := range pl {
		all = append(all, p.GPUs...)
	}
	if dcs := spec.Placement.Datacenters; len(dcs) > 0 {
		datacenters = dcs
	}
	job := &api.Job{
		ID: &id, Name: &id, Namespace: &ns, Type: &typ, Priority: &prio,
		Datacenters: datacenters,
		Meta: map[string]string{
			MetaProject:   ref.Project,
			MetaWorkspace: ref.Name,
			MetaRevision:  a.Revision,
			MetaGPUs:      strings.Join(all, ","),
		},
	}
	if spec.Placement.NodePool != "" {
		job.NodePool = strPtr(spec.Placement.NodePool)
	}
	for _, p := range pl {
		res, diskMB := renderResources(spec.Resources)
		task := &api.Task{
			Name:      TaskName,
			Driver:    spec.Task.Driver,
			Config:    taskConfig(spec.Task),
			Env:       spec.Task.Env,
			Resources: res,
			Templates: secretTemplates(spec.Task.Secrets),
		}
		if spec.Checkpoint.Signal != "" {
			task.KillSignal = spec.Checkpoint.Signal
		}
		if spec.Checkpoint.GracePeriod > 0 {
			g := spec.Checkpoint.GracePeriod
			task.KillTimeout = &g
		}
		if n := len(p.GPUs); n > 0 {
			count := uint64(n)
			task.Resources.Devices = []*api.RequestedDevice{{
				Name:  "nvidia/gpu",
				Count: &count,
				Constraints: []*api.Constraint{{
					LTarget: "${device.ids}", Operand: "set_contains_any", RTarget: strings.Join(p.GPUs, ","),
				}},
			}}
		}
		group := "replica-" + strconv.Itoa(p.Replica)
		tg := &api.TaskGroup{
			Name:  &group,
			Count: intPtr(1),
			Constraints: append([]*api.Constraint{{
				LTarget: "${node.unique.id}", Operand: "=", RTarget: p.NodeID,
			}}, placementConstraints(spec.Placement)...),
			Tasks:         []*api.Task{task},
			EphemeralDisk: &api.EphemeralDisk{SizeMB: intPtr(diskMB)},
			Meta: map[string]string{
				MetaReplica: strconv.Itoa(p.Replica),
				MetaNode:    p.Node,
				MetaGPUs:    strings.Join(p.GPUs, ","),
			},
			// berth places and resumes: Nomad must not move a workspace.
			ReschedulePolicy: &api.ReschedulePolicy{Attempts: intPtr(0), Unlimited: boolPtr(false)},
		}
		tg.RestartPolicy = &api.RestartPolicy{Attempts: intPtr(0), Mode: strPtr("fail")}
		if r := spec.Restart; r.Attempts > 0 {
			d, iv := r.Delay, RestartInterval
			if restartDelay > 0 {
				d = restartDelay
			}
			iv = max(iv, time.Duration(r.Attempts+1)*d*2)
			tg.RestartPolicy = &api.RestartPolicy{Attempts: intPtr(r.Attempts), Delay: &d, Interval: &iv, Mode: strPtr("fail")}
		}
		for _, v := range spec.Volumes {
			if tg.Volumes == nil {
				tg.Volumes = map[string]*api.VolumeRequest{}
			}
			tg.Volumes[v.Name] = &api.VolumeRequest{Name: v.Name, Type: "host", Source: cmp.Or(v.Source, v.Name), ReadOnly: v.ReadOnly}
			task.VolumeMounts = append(task.VolumeMounts, &api.VolumeMount{
				Volume: strPtr(v.Name), Destination: strPtr(v.MountPath), ReadOnly: boolPtr(v.ReadOnly),
			})
		}
		renderNetwork(tg, task, spec)
		job.TaskGroups = append(job.TaskGroups, tg)
	}
	job.Meta[MetaSpecHash] = drivers.Fingerprint(&a.Spec.Spec)
	job.Meta[MetaJobHash] = jobHash(job)
	return job, nil
}

// secretTemplates renders a task's secrets as Nomad templates, one per
// secret in the spec's order, each reading its value with nomadVar, which
// the Nomad client evaluates through the job's workload identity in the
// job's namespace: the value is never in the job, and berth never reads
// it.
//
// A file secret is written, as it is, to secrets/FILE. An environment
// variable is rendered as NAME="value" (the value JSON-quoted, which
// Nomad's env file parser reads back with every character, newlines and
// quotes included) to secrets/.berth/env/NAME, a template with env = true.
// Each reads its key with index (a key need not be a Go identifier, and
// .Keys or .Parent would name a method of the items, not the key); a key
// the Variable lacks fails the template, with a message naming the path
// and key, rather than giving the task an empty value. The path and key
// are Go-quoted into the template, so no character of theirs is read as
// template syntax. change_mode is always written: Nomad's own default is
// restart.
func secretTemplates(ss []schema.Secret) []*api.Template {
	if len(ss) == 0 {
		return nil
	}
	out := make([]*api.Template, 0, len(ss))
	for _, s := range ss {
		key := strconv.Quote(s.Key)
		value := "(index . " + key + ").Value"
		dest, body, env := "secrets/"+s.File, "{{ "+value+" }}", false
		if s.Env != "" {
			dest, body, env = "secrets/"+schema.SecretsOwnDir+"/env/"+s.Env, s.Env+"={{ "+value+" | toJSON }}\n", true
		}
		missing := strconv.Quote(fmt.Sprintf("berth: Nomad Variable %s has no key %s", s.Variable, key))
		tmpl := "{{ with nomadVar " + strconv.Quote(s.Variable) + " }}{{ if sprig_hasKey .ItemsMap " + key + " }}" +
			body + "{{ else }}{{ sprig_fail " + missing + " }}{{ end }}{{ end }}"
		t := &api.Template{
			DestPath: strPtr(dest), EmbeddedTmpl: strPtr(tmpl), Envvars: boolPtr(env),
			ChangeMode: strPtr(cmp.Or(s.ChangeMode, schema.SecretNoop)),
		}
		if s.ChangeMode == schema.SecretSignal {
			t.ChangeSignal = strPtr(s.ChangeSignal)
		}
		out = append(out, t)
	}
	return out
}

// renderNetwork gives a group the workspace's ports (static ones as
// reserved ports, the others dynamic, in host network mode) and its
// service registration (provider nomad, the group's replica as a tag)
// with its health check; a container task maps its ports by label.
func renderNetwork(tg *api.TaskGroup, task *api.Task, spec schema.WorkspaceSpec) {
	if len(spec.Ports) == 0 {
		return
	}
	net := &api.NetworkResource{}
	var labels []string
	for _, p := range spec.Ports {
		port := api.Port{Label: p.Label, Value: p.Static, To: p.To}
		if p.Static > 0 {
			net.ReservedPorts = append(net.ReservedPorts, port)
		} else {
			net.DynamicPorts = append(net.DynamicPorts, port)
		}
		labels = append(labels, p.Label)
	}
	tg.Networks = []*api.NetworkResource{net}
	if d := spec.Task.Driver; d == "docker" || d == "podman" {
		task.Config["ports"] = labels
	}
	s := spec.Service
	if s == nil {
		return
	}
	svc := &api.Service{Name: s.Name, PortLabel: s.Port, Provider: "nomad",
		Tags: append(slices.Clone(s.Tags), "replica-"+tg.Meta[MetaReplica])}
	if c := s.Check; c != nil {
		svc.Checks = []api.ServiceCheck{{Name: s.Name + "-" + c.Type, Type: c.Type, Path: c.Path, Interval: c.Interval, Timeout: c.Timeout}}
	}
	tg.Services = []*api.Service{svc}
}

// placementConstraints are the group constraints of a placement's node
// class and node metadata (sorted by key), which Nomad checks as berth's
// decision did; its datacenters and node pool are job fields.
func placementConstraints(p schema.Placement) []*api.Constraint {
	var out []*api.Constraint
	if p.NodeClass != "" {
		out = append(out, &api.Constraint{LTarget: "${node.class}", Operand: "=", RTarget: p.NodeClass})
	}
	keys := make([]string, 0, len(p.NodeMeta))
	for k := range p.NodeMeta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, &api.Constraint{LTarget: "${meta." + k + "}", Operand: "=", RTarget: p.NodeMeta[k]})
	}
	return out
}

// renderResources is what one replica asks Nomad to reserve, exactly
// what the decision counted (schema.WorkResources): a CPU share in MHz
// (resources.cpu) or whole exclusive cores (resources.cores), memory in
// MiB, and the group's ephemeral disk in MiB. A zero the loader would
// have filled (a spec built by hand) becomes Nomad's own default,
// written out, so Nomad never fills in a value of its own.
func renderResources(r schema.WorkResources) (*api.Resources, int) {
	mb := func(b, def int64) int {
		if b <= 0 {
			b = def
		}
		return int((b + mib - 1) / mib)
	}
	out := &api.Resources{MemoryMB: intPtr(mb(r.MemoryBytes, schema.DefaultMemoryBytes))}
	if r.ExclusiveCores > 0 {
		out.Cores = intPtr(r.ExclusiveCores)
	} else {
		out.CPU = intPtr(int(cmp.Or(r.CPUMHz, schema.DefaultCPUMHz)))
	}
	return out, mb(r.DiskBytes, schema.DefaultDiskBytes)
}

// RestartInterval is the window of a workspace's restart block: at most
// restart.attempts restarts within it (or within the attempts' delays
// twice over, when that is longer), restart.delay apart (Nomad adds
// jitter; the driver's Config.RestartDelay overrides it), then the task
// fails for good.
const RestartInterval = 30 * time.Minute

// taskConfig maps the spec's task onto the driver's config block: image
// for container drivers, command and args for all.
func taskConfig(t schema.Task) map[string]any {
	cfg := map[string]any{}
	if t.Image != "" {
		cfg["image"] = t.Image
	}
	if t.Command != "" {
		cfg["command"] = t.Command
	}
	if len(t.Args) > 0 {
		cfg["args"] = t.Args
	}
	return cfg
}

// jobHash hashes what a job's tasks see, as Nomad returns it: per group
// (by name) its constraints, meta, volumes and restart attempts and mode,
// and per task its driver, config, env, kill signal, devices, volume
// mounts and templates (the secrets' references). It leaves out job meta,
// priority and the fields Nomad fills in with defaults, so the hash of a rendered job equals the hash of the
// same job read back from Nomad, and changes when someone edits the task
// or the pinned node or GPUs outside berth.
func jobHash(j *api.Job) string {
	type template struct {
		Dest, Data, ChangeMode, ChangeSignal string
		Env                                  bool
	}
	type task struct {
		Name, Driver, KillSignal string
		Config                   map[string]any
		Env                      map[string]string
		Devices                  []*api.RequestedDevice
		Mounts                   []*api.VolumeMount
		// Left out when there are none: a job without secrets hashes
		// as it did before them.
		Templates []template `json:",omitempty"`
	}
	type group struct {
		Name        string
		Constraints []*api.Constraint
		Meta        map[string]string
		Volumes     map[string]*api.VolumeRequest
		Attempts    int
		Mode        string
		Tasks       []task
	}
	var gs []group
	for _, tg := range j.TaskGroups {
		g := group{Name: deref(tg.Name), Meta: tg.Meta}
		for _, c := range tg.Constraints {
			// Nomad adds ${attr.os.signals} for a task's kill signal.
			if c.LTarget != "${attr.os.signals}" {
				g.Constraints = append(g.Constraints, c)
			}
		}
		for k, v := range tg.Volumes {
			if g.Volumes == nil {
				g.Volumes = map[string]*api.VolumeRequest{}
			}
			g.Volumes[k] = &api.VolumeRequest{Name: v.Name, Type: v.Type, Source: v.Source, ReadOnly: v.ReadOnly}
		}
		if rp := tg.RestartPolicy; rp != nil {
			g.Attempts, g.Mode = derefInt(rp.Attempts), deref(rp.Mode)
		}
		for _, t := range tg.Tasks {
			x := task{Name: t.Name, Driver: t.Driver, KillSignal: t.KillSignal, Config: t.Config}
			if len(t.Env) > 0 {
				x.Env = t.Env
			}
			if t.Resources != nil {
				for _, d := range t.Resources.Devices {
					x.Devices = append(x.Devices, &api.RequestedDevice{Name: d.Name, Count: d.Count, Constraints: d.Constraints})
				}
			}
			for _, m := range t.VolumeMounts {
				x.Mounts = append(x.Mounts, &api.VolumeMount{Volume: m.Volume, Destination: m.Destination, ReadOnly: m.ReadOnly})
			}
			for _, tm := range t.Templates {
				x.Templates = append(x.Templates, template{Dest: deref(tm.DestPath), Data: deref(tm.EmbeddedTmpl),
					ChangeMode: deref(tm.ChangeMode), ChangeSignal: deref(tm.ChangeSignal), Env: tm.Envvars != nil && *tm.Envvars})
			}
			g.Tasks = append(g.Tasks, x)
		}
		sort.Slice(g.Tasks, func(a, b int) bool { return g.Tasks[a].Name < g.Tasks[b].Name })
		gs = append(gs, g)
	}
	sort.Slice(gs, func(a, b int) bool { return gs[a].Name < gs[b].Name })
	b, _ := json.Marshal(gs) // maps marshal sorted: deterministic
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(v *int) int {
	if v == nil {
		return 0
	}
	return *v
}

// isBerths reports whether job meta carries berth's marker for ref.
func isBerths(meta map[string]string) bool {
	return meta[MetaProject] != "" && meta[MetaWorkspace] != ""
}

func refOf(meta map[string]string) schema.Ref {
	return schema.Ref{Project: meta[MetaProject], Name: meta[MetaWorkspace]}
}

func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.Split(s, ",")
	sort.Strings(out)
	return out
}

func sameSet(a, b []string) bool {
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func intPtr(v int) *int       { return &v }
func boolPtr(v bool) *bool    { return &v }
func strPtr(v string) *string { return &v }
