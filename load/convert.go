package load

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/schema"
)

// Conversions from the documents as written to the spec types, filling
// every default. Each returns the diagnostics of quantities that the
// schema's patterns accepted but that do not parse (too large, fractions
// of a byte).

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func meta(d *doc, r rawMeta) schema.Meta {
	m := d.meta()
	m.Labels, m.Annotations = nilIfEmpty(r.Labels), nilIfEmpty(r.Annotations)
	return m
}

func convertTier(d *doc) (schema.PriorityTier, []Diagnostic) {
	r := d.raw.(*rawTier)
	fe := &fieldErrs{d: d}
	t := schema.PriorityTier{
		Meta: meta(d, r.Metadata),
		Spec: schema.TierSpec{
			Value:       r.Spec.Value,
			Description: r.Spec.Description,
			Preemptible: boolOr(r.Spec.Preemptible, true),
			CanPreempt:  boolOr(r.Spec.CanPreempt, true),
			// Decoded fresh per document: not shared with another.
			BorrowWithinCohort: r.Spec.BorrowWithinCohort,
			MaxRuntime:         fe.maxRuntime(r.Spec.MaxRuntime),
			Idle:               fe.idle("spec.idle", r.Spec.Idle),
			Ordering:           r.Spec.Ordering,
		},
	}
	return t, fe.diag
}

// maxRuntime reads a spec.maxRuntime: nil when it is not written.
func (f *fieldErrs) maxRuntime(q *quantity) *time.Duration {
	if q == nil || !q.set {
		return nil
	}
	d := f.duration("spec.maxRuntime", q, 0)
	return &d
}

// idle reads an idle-GPU rule written at field.
func (f *fieldErrs) idle(field string, r *rawIdle) schema.IdleRule {
	if r == nil {
		return schema.IdleRule{}
	}
	out := schema.IdleRule{After: f.duration(field+".after", r.After, 0), Below: r.Below, Action: r.Action}
	if q := r.After; q != nil && q.set && out.After <= 0 && len(f.diag) == 0 {
		f.diag = append(f.diag, errorf(f.d.pos(field+".after"),
			"%s.after is %s; a GPU is idle only for some time: write a positive duration such as 4h, or action: off to turn the rule off", field, q.text))
	}
	return out
}

func convertProject(d *doc) (schema.Project, []Diagnostic) {
	r := d.raw.(*rawProject)
	fe := &fieldErrs{d: d}
	p := schema.Project{
		Meta: meta(d, r.Metadata),
		Spec: schema.ProjectSpec{
			Tier:        r.Spec.Tier,
			MaxTier:     r.Spec.MaxTier,
			Description: r.Spec.Description,
			Members:     r.Spec.Members,
			BorrowLimit: schema.BorrowLimit{GPUs: schema.Unlimited, CPUMHz: schema.Unlimited, MemoryBytes: schema.Unlimited},
			Namespace:   r.Spec.Namespace,
			Placement:   placement(r.Spec.Placement),
			MaxRuntime:  fe.maxRuntime(r.Spec.MaxRuntime),
			Idle:        fe.idle("spec.idle", r.Spec.Idle),
		},
	}
	if q := r.Spec.Quota; q != nil {
		p.Spec.Quota = schema.Resources{
			GPUs:        q.GPUs,
			CPUMHz:      fe.cpu("spec.quota.cpu", q.CPU),
			MemoryBytes: fe.bytes("spec.quota.memory", q.Memory),
			Kinds:       kindCounts(q.Kinds),
		}
	}
	if b := r.Spec.BorrowLimit; b != nil {
		if b.GPUs != nil {
			p.Spec.BorrowLimit.GPUs = *b.GPUs
		}
		if b.CPU.set {
			p.Spec.BorrowLimit.CPUMHz = fe.cpu("spec.borrowLimit.cpu", b.CPU)
		}
		if b.Memory.set {
			p.Spec.BorrowLimit.MemoryBytes = fe.bytes("spec.borrowLimit.memory", b.Memory)
		}
		p.Spec.BorrowLimit.Kinds = kindCounts(b.Kinds)
	}
	if f := r.Spec.FairShare; f != nil && f.Weight != nil {
		p.Spec.FairShare.Weight = *f.Weight
	}
	return p, fe.diag
}

// kindCounts copies a count per GPU kind as written; nil when it names
// no kind.
func kindCounts(m map[string]int) map[string]int {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func convertKind(d *doc) schema.GPUKind {
	r := d.raw.(*rawKind)
	return schema.GPUKind{
		Meta: meta(d, r.Metadata),
		Spec: schema.GPUKindSpec{
			Match:       r.Spec.Match,
			Weight:      r.Spec.Weight,
			Description: r.Spec.Description,
		},
	}
}

func convertVolume(d *doc) (schema.Volume, []Diagnostic) {
	r := d.raw.(*rawVolume)
	fe := &fieldErrs{d: d}
	v := schema.Volume{
		Meta: meta(d, r.Metadata),
		Spec: schema.VolumeSpec{
			SizeBytes:  fe.bytes("spec.size", r.Spec.Size),
			Type:       r.Spec.Type,
			Source:     r.Spec.Source,
			AccessMode: r.Spec.AccessMode,
			Projects:   r.Spec.Projects,
		},
	}
	if v.Spec.Type == "" {
		v.Spec.Type = "host"
	}
	if v.Spec.Source == "" {
		v.Spec.Source = v.Meta.Name
	}
	return v, fe.diag
}

func topology(r *rawTopology, def schema.Topology) schema.Topology {
	if r == nil {
		return def
	}
	t := def
	if r.NVLink != nil {
		t.NVLink = *r.NVLink
	}
	if r.NUMA != nil {
		t.NUMA = *r.NUMA
	}
	return t
}

func checkpoint(fe *fieldErrs, prefix string, r *rawCheckpoint, def schema.Checkpoint) schema.Checkpoint {
	if r == nil {
		return def
	}
	c := def
	if r.Signal != nil {
		c.Signal = *r.Signal
	}
	c.GracePeriod = fe.duration(prefix+".gracePeriod", r.GracePeriod, def.GracePeriod)
	c.Interval = fe.duration(prefix+".interval", r.Interval, def.Interval)
	return c
}

// restart reads spec.restart, or its shorthand restartOnFailure: true
// (LegacyRestart); writing both is an error.
func restart(fe *fieldErrs, d *doc, legacy bool, r *rawRestart) schema.Restart {
	if r == nil {
		if legacy {
			return schema.LegacyRestart
		}
		return schema.Restart{}
	}
	if legacy {
		fe.diag = append(fe.diag, errorf(d.pos("spec.restartOnFailure"),
			"spec.restartOnFailure and spec.restart are both set: restartOnFailure: true is the shorthand for restart: {attempts: 3, delay: 15s}; keep restart alone"))
	}
	out := schema.Restart{Attempts: intOr(r.Attempts, 0)}
	out.Delay = fe.duration("spec.restart.delay", r.Delay, schema.DefaultRestartDelay)
	if q := r.Delay; q != nil && q.set && out.Delay < schema.MinRestartDelay && len(fe.diag) == 0 {
		fe.diag = append(fe.diag, errorf(d.pos("spec.restart.delay"),
			"spec.restart.delay is %s; a task that fails is restarted no faster than once a second: write 1s or more, such as 15s", q.text))
	}
	if out.Attempts == 0 {
		out.Delay = 0
	}
	return out
}

func convertWorkspace(d0 *doc, policy schema.SchedulingPolicy) (schema.Workspace, []Diagnostic) {
	d := d0
	r := d.raw.(*rawWorkspace)
	fe := &fieldErrs{d: d}
	s := r.Spec
	w := schema.Workspace{
		Meta: meta(d, r.Metadata),
		Spec: schema.WorkspaceSpec{
			Owner:        s.Owner,
			Tier:         s.Tier,
			State:        s.State,
			Task:         s.Task,
			Resources:    workResources(fe, d0, s.Resources),
			Topology:     topology(s.Topology, policy.Spec.Defaults.Topology),
			Placement:    placement(s.Placement),
			Ports:        s.Ports,
			Replicas:     intOr(s.Replicas, 1),
			Volumes:      s.Volumes,
			Checkpoint:   checkpoint(fe, "spec.checkpoint", s.Checkpoint, policy.Spec.Defaults.Checkpoint),
			Preemptible:  boolOr(s.Preemptible, true),
			UnhealthyGPU: s.UnhealthyGPU,
		},
	}
	w.Spec.Restart = restart(fe, d0, s.RestartOnFailure, s.Restart)
	w.Spec.ExpectedDuration = fe.duration("spec.expectedDuration", s.ExpectedDuration, 0)
	if q := s.ExpectedDuration; q != nil && q.set && w.Spec.ExpectedDuration <= 0 && len(fe.diag) == 0 {
		fe.diag = append(fe.diag, errorf(d0.pos("spec.expectedDuration"),
			"spec.expectedDuration is %s; a run takes some time: write a positive duration such as 6h or 90m, or leave it out when unknown", q.text))
	}
	w.Spec.MaxRuntime = fe.maxRuntime(s.MaxRuntime)
	w.Spec.Idle = fe.idle("spec.idle", s.Idle)
	w.Spec.Service = service(fe, w, s.Service)
	w.Spec.Task.Env = nilIfEmpty(w.Spec.Task.Env)
	for name, value := range w.Spec.Task.Env {
		if what, ok := credentialLike(name, value); ok {
			fe.diag = append(fe.diag, warnf(d0.pos("spec.task.env."+name),
				"spec.task.env.%s looks like %s: an env value is plain text in git, in its history and in the Nomad job, for anyone who can read them; take it out of the spec, rotate it, and give the new one by reference: put it in a Nomad Variable (nomad var put PATH KEY=…) and list it in spec.task.secrets ({variable: PATH, key: KEY, env: %s}) (berth validate --strict makes this an error)", name, what, name))
		}
	}
	w.Spec.Task.Secrets = secrets(fe, w.Spec.Task)
	if w.Spec.State == "" {
		w.Spec.State = schema.DesiredRunning
	}
	if w.Spec.Task.Driver == "" {
		w.Spec.Task.Driver = "docker"
	}
	if d := w.Spec.Task.Driver; (d == "docker" || d == "podman") && w.Spec.Task.Image == "" {
		fe.diag = append(fe.diag, errorf(d0.pos("spec.task"), "spec.task.image is missing: the %s driver runs a container image; set image, or use driver exec or raw_exec", d))
	}
	return w, fe.diag
}

// workResources reads a workspace's resources and fills in what the
// replica will really reserve on Nomad (see WorkResources): the default
// CPU, memory and disk where none is written, memory and disk rounded up
// to whole MiB.
func workResources(fe *fieldErrs, d *doc, r rawResources) schema.WorkResources {
	out := schema.WorkResources{
		GPUs:           r.GPUs,
		GPUModel:       r.GPUModel,
		GPUKind:        r.GPUKind,
		GPUKinds:       r.GPUKinds,
		CPUMHz:         fe.cpu("spec.resources.cpu", r.CPU),
		ExclusiveCores: r.ExclusiveCores,
		MemoryBytes:    fe.bytes("spec.resources.memory", r.Memory),
		DiskBytes:      fe.bytes("spec.resources.disk", r.Disk),
	}
	switch {
	case r.CPU.set && out.ExclusiveCores > 0:
		fe.diag = append(fe.diag, errorf(d.pos("spec.resources.exclusiveCores"),
			"spec.resources: cpu and exclusiveCores are both set; Nomad reserves either a CPU share (cpu) or whole cores (exclusiveCores): keep one"))
	case r.CPU.set && out.CPUMHz == 0 && len(fe.diag) == 0:
		fe.diag = append(fe.diag, errorf(d.pos("spec.resources.cpu"),
			"spec.resources.cpu is 0; Nomad reserves at least 1 MHz: write at least 1m, or leave cpu out for the default %dm", schema.DefaultCPUMHz))
	case !r.CPU.set && out.ExclusiveCores == 0:
		out.CPUMHz = schema.DefaultCPUMHz
	}
	const minMem = 10 << 20 // Nomad's smallest memory reservation (10 MB)
	switch {
	case !r.Memory.set:
		out.MemoryBytes = schema.DefaultMemoryBytes
	case out.MemoryBytes < minMem && len(fe.diag) == 0:
		fe.diag = append(fe.diag, errorf(d.pos("spec.resources.memory"),
			"spec.resources.memory is below 10Mi, the least Nomad reserves for a task: write at least 10Mi, or leave it out for the default 300Mi"))
	}
	// Nomad keeps a task's logs on its ephemeral disk (10 files of 10 MB)
	// and refuses a disk that is not larger.
	const minDisk = 101 << 20
	switch {
	case !r.Disk.set:
		out.DiskBytes = schema.DefaultDiskBytes
	case out.DiskBytes < minDisk && len(fe.diag) == 0:
		fe.diag = append(fe.diag, errorf(d.pos("spec.resources.disk"),
			"spec.resources.disk is 100Mi or less; Nomad keeps the task's logs (100 MB) on it and needs more: write at least 101Mi, or leave it out for the default 300Mi"))
	}
	out.MemoryBytes = roundMiB(out.MemoryBytes)
	out.DiskBytes = roundMiB(out.DiskBytes)
	switch {
	case r.GPUModel != "" && r.GPUKind != "":
		fe.diag = append(fe.diag, errorf(d.pos("spec.resources.gpuKind"),
			"spec.resources: gpuModel and gpuKind are both set; give one: gpuKind %q for any GPU of that kind, or gpuModel %q for that model alone", r.GPUKind, r.GPUModel))
	case len(r.GPUKinds) > 0 && (r.GPUModel != "" || r.GPUKind != ""):
		fe.diag = append(fe.diag, errorf(d.pos("spec.resources.gpuKinds"),
			"spec.resources: gpuKinds is set beside gpuModel or gpuKind; give one: gpuKinds lists every kind the workspace may run on, in order of preference"))
	}
	seen := map[string]int{}
	for i, k := range r.GPUKinds {
		if j, dup := seen[k]; dup {
			fe.diag = append(fe.diag, errorf(d.pos(fmt.Sprintf("spec.resources.gpuKinds.%d", i)),
				"spec.resources.gpuKinds lists %q twice (%d and %d); list each kind once, in order of preference", k, j, i))
		}
		seen[k] = i
	}
	return out
}

// roundMiB rounds b up to a whole MiB (Nomad counts memory and disk in
// MiB, which it calls MB).
func roundMiB(b int64) int64 {
	const mib = 1 << 20
	return (b + mib - 1) / mib * mib
}

func convertPolicy(d *doc) (schema.SchedulingPolicy, []Diagnostic) {
	r := d.raw.(*rawPolicy)
	fe := &fieldErrs{d: d}
	p := schema.DefaultPolicy()
	p.Meta = meta(d, r.Metadata)
	s := r.Spec
	if f := s.FairShare; f != nil {
		p.Spec.FairShare.HalfLife = fe.duration("spec.fairShare.halfLife", f.HalfLife, p.Spec.FairShare.HalfLife)
	}
	if a := s.Aging; a != nil {
		p.Spec.Aging.Interval = fe.duration("spec.aging.interval", a.Interval, p.Spec.Aging.Interval)
		p.Spec.Aging.Step = intOr(a.Step, p.Spec.Aging.Step)
		p.Spec.Aging.MaxBoost = intOr(a.MaxBoost, p.Spec.Aging.MaxBoost)
		p.Spec.Aging.MaxWait = fe.duration("spec.aging.maxWait", a.MaxWait, p.Spec.Aging.MaxWait)
	}
	if pr := s.Preemption; pr != nil {
		p.Spec.Preemption.Enabled = boolOr(pr.Enabled, p.Spec.Preemption.Enabled)
		p.Spec.Preemption.MinRuntime = fe.duration("spec.preemption.minRuntime", pr.MinRuntime, p.Spec.Preemption.MinRuntime)
		p.Spec.Preemption.MaxVictims = intOr(pr.MaxVictims, p.Spec.Preemption.MaxVictims)
	}
	if df := s.Defaults; df != nil {
		p.Spec.Defaults.Topology = topology(df.Topology, p.Spec.Defaults.Topology)
		p.Spec.Defaults.Checkpoint = checkpoint(fe, "spec.defaults.checkpoint", df.Checkpoint, p.Spec.Defaults.Checkpoint)
	}
	p.Spec.Idle = fe.idle("spec.idle", s.Idle)
	if sv := s.Service; sv != nil {
		if sv.Steps != nil {
			p.Spec.Service.Steps = *sv.Steps
			for i := 1; i < len(*sv.Steps); i++ {
				if a, b := (*sv.Steps)[i-1], (*sv.Steps)[i]; b <= a {
					fe.diag = append(fe.diag, errorf(d.pos(fmt.Sprintf("spec.service.steps.%d", i)), "spec.service.steps: %g GPU-hours comes after %g; write the steps in ascending order, such as [2, 8, 32]", b, a))
					break
				}
			}
		}
		if sv.Promote != nil {
			p.Spec.Service.Promote = *sv.Promote
		}
	}
	return p, fe.diag
}

// service reads a workspace's service registration, filling its name
// and check defaults, and checks that it points at one of the ports;
// ports' labels and static ports must be unique.
func service(fe *fieldErrs, w schema.Workspace, r *rawService) *schema.Service {
	labels := map[string]int{}
	static := map[int]int{}
	for i, p := range w.Spec.Ports {
		if j, dup := labels[p.Label]; dup {
			fe.diag = append(fe.diag, errorf(fe.d.pos(fmt.Sprintf("spec.ports.%d.label", i)), "spec.ports.%d and spec.ports.%d are both labelled %q; give each port its own label", j, i, p.Label))
		}
		labels[p.Label] = i
		if p.Static == 0 {
			continue
		}
		if j, dup := static[p.Static]; dup {
			fe.diag = append(fe.diag, errorf(fe.d.pos(fmt.Sprintf("spec.ports.%d.static", i)), "spec.ports.%d and spec.ports.%d both ask for host port %d; a node has it once", j, i, p.Static))
		}
		static[p.Static] = i
	}
	if r == nil {
		return nil
	}
	s := &schema.Service{Name: r.Name, Port: r.Port, Tags: r.Tags}
	if s.Name == "" {
		s.Name = w.Meta.Project + "-" + w.Meta.Name
		if len(s.Name) > 63 {
			fe.diag = append(fe.diag, errorf(fe.d.pos("spec.service"), "the default service name %q is longer than 63 characters; set spec.service.name", s.Name))
		}
	}
	if _, ok := labels[s.Port]; !ok {
		known := make([]string, 0, len(w.Spec.Ports))
		for _, p := range w.Spec.Ports {
			known = append(known, p.Label)
		}
		have := "the workspace has no ports: add one to spec.ports"
		if len(known) > 0 {
			have = "its ports are " + strings.Join(known, ", ")
		}
		fe.diag = append(fe.diag, errorf(fe.d.pos("spec.service.port"), "spec.service.port %q is not a port of the workspace; %s", s.Port, have))
	}
	if c := r.Check; c != nil {
		s.Check = &schema.ServiceCheck{Type: c.Type, Path: c.Path}
		if c.Type == "http" && s.Check.Path == "" {
			s.Check.Path = "/"
		}
		if c.Type != "http" && c.Path != "" {
			fe.diag = append(fe.diag, errorf(fe.d.pos("spec.service.check.path"), "spec.service.check.path is for http checks; a %s check has no path", c.Type))
		}
		s.Check.Interval = fe.duration("spec.service.check.interval", c.Interval, 10*time.Second)
		s.Check.Timeout = fe.duration("spec.service.check.timeout", c.Timeout, 2*time.Second)
	}
	return s
}

// placement copies a placement as written, its datacenters sorted and
// without duplicates; nil is the zero Placement.
func placement(r *schema.Placement) schema.Placement {
	if r == nil {
		return schema.Placement{}
	}
	p := *r
	p.Datacenters = slices.Compact(slices.Sorted(slices.Values(p.Datacenters)))
	p.NodeMeta = nilIfEmpty(p.NodeMeta)
	return p
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// convertNotification converts a Notification, with what the schema
// cannot say: each secret names one place, a webhook has its signing key
// and a Slack route none.
func convertNotification(d *doc) (schema.Notification, []Diagnostic) {
	r := d.raw.(*rawNotification)
	n := schema.Notification{
		Meta: meta(d, r.Metadata),
		Spec: schema.NotificationSpec{
			Format: r.Spec.Format, URL: r.Spec.URL, Secret: r.Spec.Secret,
			Projects: slices.Clone(r.Spec.Projects), Owners: slices.Clone(r.Spec.Owners), Events: slices.Clone(r.Spec.Events),
			SummarizeAbove: r.Spec.SummarizeAbove,
		},
	}
	if n.Spec.SummarizeAbove == 0 {
		n.Spec.SummarizeAbove = schema.DefaultSummarizeAbove
	}
	var diags []Diagnostic
	one := func(field string, ref schema.SecretRef, example string) {
		switch {
		case ref.Env != "" && ref.File != "":
			diags = append(diags, errorf(d.pos(field), "notification %q: %s names both an environment variable and a file; give one: %s: {env: %s} or %s: {file: %s}",
				n.Meta.Name, field, field, ref.Env, field, ref.File))
		case ref.IsZero():
			diags = append(diags, errorf(d.pos(field), "notification %q: %s names no secret; give where berth reads it: %s", n.Meta.Name, field, example))
		}
	}
	if _, ok := d.fields["spec.url"]; ok {
		one("spec.url", n.Spec.URL, "url: {env: BERTH_SLACK_URL} or url: {file: /run/secrets/slack-url}")
	}
	_, hasSecret := d.fields["spec.secret"]
	switch {
	case n.Spec.Format == schema.NotifyWebhook && !hasSecret:
		diags = append(diags, errorf(d.pos("spec.format"), "notification %q: a webhook is signed: give spec.secret, where berth reads the HMAC-SHA256 key (secret: {env: BERTH_HOOK_KEY} or secret: {file: PATH}); the receiver checks the X-Berth-Signature header with the same key", n.Meta.Name))
	case n.Spec.Format == schema.NotifySlack && hasSecret:
		diags = append(diags, errorf(d.pos("spec.secret"), "notification %q: a Slack incoming webhook checks no signature, so it takes no secret: its URL is its credential; remove spec.secret", n.Meta.Name))
	case hasSecret:
		one("spec.secret", n.Spec.Secret, "secret: {env: BERTH_HOOK_KEY} or secret: {file: /run/secrets/hook-key}")
	}
	return n, diags
}

// secrets checks a task's secrets (the schema checked each field's
// syntax) and fills each one's change mode: a path Nomad keeps for
// itself, a value given to both an environment variable and a file or
// to neither, a file outside the secrets directory or in berth's own
// part of it, an environment variable or file given twice or also in
// task.env, a change signal without changeMode: signal or the other way
// round. Nil when there are none.
func secrets(fe *fieldErrs, t schema.Task) []schema.Secret {
	if len(t.Secrets) == 0 {
		return nil
	}
	out := slices.Clone(t.Secrets)
	envs, files := map[string]int{}, map[string]int{}
	for i := range out {
		s := &out[i]
		at := func(field string) schema.Pos { return fe.d.pos(fmt.Sprintf("spec.task.secrets.%d%s", i, field)) }
		name := fmt.Sprintf("spec.task.secrets.%d", i)
		if err := reservedVariable(s.Variable); err != "" {
			fe.diag = append(fe.diag, errorf(at(".variable"), "%s.variable %q: %s", name, s.Variable, err))
		}
		switch {
		case s.Env != "" && s.File != "":
			fe.diag = append(fe.diag, errorf(at(".file"),
				"%s sets both env and file; give one: env: %s puts the value in an environment variable, file: %s writes it to a file under the task's secrets directory (list the secret twice for both)", name, s.Env, s.File))
		case s.Env == "" && s.File == "":
			fe.diag = append(fe.diag, errorf(at(""),
				"%s says where the value comes from but not where it goes: add env: NAME (an environment variable) or file: PATH (a file under the task's secrets directory)", name))
		case s.Env != "":
			if j, dup := envs[s.Env]; dup {
				fe.diag = append(fe.diag, errorf(at(".env"),
					"spec.task.secrets.%d and %s both set environment variable %s; the task gets one value for it: remove one, or give one to another variable", j, name, s.Env))
			}
			envs[s.Env] = i
			if _, clash := t.Env[s.Env]; clash {
				fe.diag = append(fe.diag, errorf(at(".env"),
					"%s.env %s is also in spec.task.env; the task would get two values for it: remove spec.task.env.%s, or give the secret to another variable", name, s.Env, s.Env))
			}
		default:
			if err := secretFile(s.File); err != "" {
				fe.diag = append(fe.diag, errorf(at(".file"), "%s.file %q %s", name, s.File, err))
				break
			}
			if j, dup := files[s.File]; dup {
				fe.diag = append(fe.diag, errorf(at(".file"),
					"spec.task.secrets.%d and %s both write file %s; a file holds one value: give one another path", j, name, s.File))
			}
			files[s.File] = i
		}
		switch {
		case s.ChangeMode == "":
			if s.ChangeSignal != "" {
				fe.diag = append(fe.diag, errorf(at(".changeSignal"),
					"%s.changeSignal is set but changeMode is not signal; add changeMode: signal to send %s when the value changes, or leave changeSignal out", name, s.ChangeSignal))
			}
			s.ChangeMode = schema.SecretNoop
		case s.ChangeMode == schema.SecretSignal && s.ChangeSignal == "":
			fe.diag = append(fe.diag, errorf(at(".changeMode"),
				"%s.changeMode is signal but names no signal; add changeSignal, such as SIGHUP", name))
		case s.ChangeMode != schema.SecretSignal && s.ChangeSignal != "":
			fe.diag = append(fe.diag, errorf(at(".changeSignal"),
				"%s.changeSignal is set but changeMode is %s; write changeMode: signal to send %s when the value changes, or leave changeSignal out", name, s.ChangeMode, s.ChangeSignal))
		}
	}
	// A file cannot also be a directory of another.
	for i, s := range out {
		if s.File == "" || files[s.File] != i {
			continue
		}
		for dir := path.Dir(s.File); dir != "."; dir = path.Dir(dir) {
			if j, ok := files[dir]; ok {
				fe.diag = append(fe.diag, errorf(fe.d.pos(fmt.Sprintf("spec.task.secrets.%d.file", i)),
					"spec.task.secrets.%d.file %s is under spec.task.secrets.%d.file %s, which is a file, not a directory: give one another path", i, s.File, j, dir))
			}
		}
	}
	return out
}

// reservedVariable says why Nomad refuses a Variable path under nomad/
// ("" when it does not): only nomad/jobs and below, and
// nomad/job-templates/NAME, are Variables there.
func reservedVariable(p string) string {
	parts := strings.Split(p, "/")
	if parts[0] != "nomad" {
		return ""
	}
	switch {
	case len(parts) > 1 && parts[1] == "jobs", len(parts) == 3 && parts[1] == "job-templates":
		return ""
	}
	return "Nomad keeps nomad/ for itself: a Variable there is at nomad/jobs or below (nomad/jobs/JOB is the job's own, which it reads without a policy) or at nomad/job-templates/NAME; use one of those, or a path of your own such as ml/hf"
}

// secretFile says what is wrong with a secret's file path, which the
// schema let through ("" when nothing is): a "." or ".." part, or a
// path in berth's own part of the secrets directory.
func secretFile(f string) string {
	parts := strings.Split(f, "/")
	for _, p := range parts {
		if p == "." || p == ".." {
			return "is not a plain path under the task's secrets directory: write it without . and .. parts, such as hf-token or gcloud/key.json"
		}
	}
	if parts[0] == schema.SecretsOwnDir {
		return "is in " + schema.SecretsOwnDir + "/, where berth writes the task's secret environment variables: choose another path"
	}
	return ""
}
