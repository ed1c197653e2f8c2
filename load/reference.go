package load

import (
	"bytes"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueformat "cuelang.org/go/cue/format"
)

// RefField is one field of the schema as the reference page shows it.
type RefField struct {
	Kind     string // PriorityTier, Project, ...
	Path     string // "spec.resources.gpus"; list elements as "spec.volumes[].name"
	Type     string // the CUE constraint, shortened
	Required bool
	Doc      string // the field's comment, one paragraph
}

// ReferenceFields lists every field of every kind, in schema order.
func ReferenceFields() []RefField {
	ctx := cuecontext.New()
	root := ctx.CompileBytes(Source, cue.Filename("schema.cue"))
	var out []RefField
	for _, kind := range Kinds {
		var walk func(prefix string, v cue.Value)
		walk = func(prefix string, v cue.Value) {
			it, err := v.Fields(cue.Optional(true))
			if err != nil {
				return
			}
			for it.Next() {
				f, sel := it.Value(), it.Selector()
				path := prefix + sel.Unquoted()
				out = append(out, RefField{
					Kind:     kind,
					Path:     path,
					Type:     typeOf(f),
					Required: sel.ConstraintType() == cue.RequiredConstraint,
					Doc:      docOf(f),
				})
				switch f.IncompleteKind() {
				case cue.StructKind:
					walk(path+".", f)
				case cue.ListKind:
					if el := f.LookupPath(cue.MakePath(cue.AnyIndex)); el.Exists() && el.IncompleteKind() == cue.StructKind {
						walk(path+"[].", el)
					}
				}
			}
		}
		walk("", root.LookupPath(cue.MakePath(cue.Def(kind))))
	}
	return out
}

func docOf(v cue.Value) string {
	var parts []string
	for _, c := range v.Doc() {
		parts = append(parts, strings.TrimSpace(c.Text()))
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

// typeOf writes the field's constraint as the schema spells it, without
// its comments and attributes; structs and lists of structs are named.
func typeOf(v cue.Value) string {
	switch v.IncompleteKind() {
	case cue.StructKind:
		return "mapping"
	case cue.ListKind:
		if el := v.LookupPath(cue.MakePath(cue.AnyIndex)); el.Exists() && el.IncompleteKind() == cue.StructKind {
			return "list of mappings"
		}
	}
	f, ok := v.Source().(*ast.Field)
	if !ok {
		return v.IncompleteKind().String()
	}
	b, err := cueformat.Node(f.Value)
	if err != nil {
		return v.IncompleteKind().String()
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// Reference renders docs/reference.md from the schema.
func Reference() []byte {
	var b bytes.Buffer
	b.WriteString(referenceIntro)
	kind := ""
	for _, f := range ReferenceFields() {
		if f.Kind != kind {
			kind = f.Kind
			fmt.Fprintf(&b, "\n## %s\n\n| field | type | required | description |\n|---|---|---|---|\n", kind)
		}
		req := ""
		if f.Required {
			req = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", f.Path, strings.ReplaceAll(f.Type, "|", `\|`), req, strings.ReplaceAll(f.Doc, "|", `\|`))
	}
	b.WriteString("\n## Types\n\n| name | definition | description |\n|---|---|---|\n")
	ctx := cuecontext.New()
	root := ctx.CompileBytes(Source, cue.Filename("schema.cue"))
	it, err := root.Fields(cue.Definitions(true))
	for err == nil && it.Next() {
		name := it.Selector().String()
		if isKind(strings.TrimPrefix(name, "#")) {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", name, strings.ReplaceAll(typeOf(it.Value()), "|", `\|`), strings.ReplaceAll(docOf(it.Value()), "|", `\|`))
	}
	b.WriteString(referenceOutro)
	return b.Bytes()
}

const referenceIntro = `# berth spec reference

<!-- Generated from load/schema.cue by ` + "`BERTH_UPDATE=1 go test ./load`" + `; do not edit.
     A test fails when this page is stale or a field has no comment. -->

A spec repo is a tree of YAML files (` + "`*.yaml`, `*.yml`" + `; several documents per file,
separated by ` + "`---`" + `). berth reads every file under the paths it is given,
recursively, skipping hidden files and directories and the paths a
` + "`.berthignore`" + ` file names (one pattern per line; ` + "`dir/`" + ` matches directories only;
a pattern with a ` + "`/`" + ` is relative to the ` + "`.berthignore`" + `, any other matches base
names at any depth). Documents of ` + "`kind: Cluster`" + ` are simulated clusters for
` + "`drivers/sim`" + `; the spec loader skips them but uses their nodes to check that
every workspace could fit.

Every document has ` + "`apiVersion: berth.dev/v1`" + `, a ` + "`kind`" + `, ` + "`metadata.name`" + ` and a
` + "`spec`" + `. Fields not listed here are errors. Names are DNS-label-like: lowercase
letters, digits and ` + "`-`" + `, starting and ending with a letter or digit, at most 63
characters.

Quantities: CPU is cores (` + "`4`, `0.5`" + `) or millicores (` + "`\"500m\"`" + `); memory and
sizes are bytes or a number with a binary (` + "`Ki Mi Gi Ti Pi`" + `) or decimal
(` + "`k M G T P`" + `) suffix (` + "`16Gi`" + `); durations are Go durations (` + "`30s`, `10m`, `1h30m`" + `).
A quantity must be a whole number of millicores or bytes.
`

const referenceOutro = `
## Rules across documents

- Every reference resolves: a project's ` + "`tier`" + `, a workspace's ` + "`metadata.project`" + `, a
  volume's ` + "`projects`" + `, a workspace's ` + "`volumes[].name`" + ` (and the volume must list the
  workspace's project), a workspace's ` + "`owner`" + ` (one of the project's ` + "`members`" + ` when
  the project lists members), a workspace's ` + "`resources.gpuKind`" + `, and the kinds a
  project's ` + "`quota.kinds`" + ` and ` + "`borrowLimit.kinds`" + ` name (GPUKinds).
- Names are unique per kind, and per project for workspaces; two projects may
  not share a Nomad namespace; a repo has at most one SchedulingPolicy.
- No two GPUKinds' ` + "`match`" + ` patterns may match one name (the later one is the
  error); a workspace gives ` + "`gpuModel`" + ` or ` + "`gpuKind`" + `, not both; a kind in
  ` + "`borrowLimit.kinds`" + ` must be one ` + "`quota.kinds`" + ` names.
- Tier values are unique. Two tiers less than 10 apart get a warning when the
  higher may preempt the lower: Nomad's own preemption needs a gap of 10.
- A workspace whose gang (` + "`replicas × resources.gpus`" + `) exceeds its project's
  ` + "`quota.gpus + borrowLimit.gpus`" + ` (for a ` + "`gpuKind`" + ` the quota names, that kind's
  ` + "`quota.kinds`" + ` plus ` + "`borrowLimit.kinds`" + `) can never run: an error. So is one whose
  ` + "`replicas × resources.cpu`" + ` (an exclusive core counting as ` + "`cpu: 1`" + `) or
  ` + "`replicas × resources.memory`" + ` exceeds a CPU or memory quota plus its borrow
  limit, where the quota names it and the limit is set. When the tree holds a
  Cluster file, a workspace whose replicas no set of its nodes can hold at once
  (counting ` + "`gpuModel`" + `, ` + "`gpuKind`" + ` and required NVLink/NUMA topology) is an
  error too, and CPU or memory quotas adding up to more than the file's nodes
  have (every node stating it) get a warning.

## Quotas: GPUs, CPU and memory

A project's ` + "`quota`" + ` always counts GPUs; it counts CPU and memory only where it
names them (` + "`cpu`" + `, ` + "`memory`" + ` above 0). Each dimension is counted the same way:
a workspace is inside its project's quota only if it fits what the quota has
left in every dimension the quota names; otherwise it borrows. A project never
holds more than ` + "`quota + borrowLimit`" + ` in any named dimension (a workspace that
may not be preempted, ` + "`preemptible: false`" + ` or its tier's, runs only inside the
quota); a dimension left out of ` + "`borrowLimit`" + ` may borrow without limit, as for
GPUs, and a CPU or memory borrow limit means nothing without a quota for it.
Work inside its quota reclaims borrowed work of other projects: a workspace
admitted beyond its quota, whose removal leaves its project at or above its
quota in GPUs or in a named dimension it uses. CPU counts what
` + "`resources.cpu`" + ` reserves per replica (an exclusive core counts as ` + "`cpu: 1`" + `, whatever
a node's MHz per core); memory counts ` + "`resources.memory`" + ` per replica (default
300Mi). A workspace without GPUs counts against the CPU and memory quota too.
A quota's CPU and memory add up with the other projects': when they are more
than the cluster's nodes have, tiers rank in-quota work across projects, as
for GPU quotas that overcommit the cluster.

## GPU kinds

A GPUKind declares a kind of GPU by the name of the Nomad device group it
matches: ` + "`spec.match`" + ` is that name (the model as the NVIDIA device plugin reports
it) or a pattern in which ` + "`*`" + ` stands for any run of characters, compared without
regard to case. ` + "`spec.weight`" + ` is what one device of the kind counts in
GPU-equivalents for reporting (default 1 for a whole GPU, slices/7 for a MIG
instance); ` + "`spec.description`" + ` says what it is. Kinds never overlap: a device
group is of one kind at most. A fleet of two models:

` + "```yaml" + `
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: h100}
spec: {match: "NVIDIA H100*", description: training}
---
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: l40s}
spec: {match: "NVIDIA L40S", description: inference}
---
apiVersion: berth.dev/v1
kind: Project
metadata: {name: ml}
spec:
  tier: medium
  quota: {gpus: 0, kinds: {h100: 8, l40s: 4}}
  borrowLimit: {kinds: {h100: 2}}
` + "```" + `

A project's ` + "`quota.kinds: {h100: 8}`" + ` gives it a quota per kind. A workspace
asking for a kind the quota names (` + "`resources.gpuKind: h100`" + `) counts against that
kind; every other workspace counts against ` + "`quota.gpus`" + `: ` + "`gpus`" + ` counts the GPUs of
kinds the quota does not name. On a fleet with no declared kinds, ` + "`gpus`" + ` is every
GPU, as before. ` + "`borrowLimit.kinds: {h100: 2}`" + ` caps borrowing per kind the quota
names; a kind the quota names and the borrow limit leaves out may borrow
without limit. A workspace's ` + "`resources.gpuKind`" + ` restricts it to GPUs of that kind
and, with a kind its project's quota names, charges it there. A quota that
names kinds names no cpu or memory: a kind's quota counts GPUs alone.

A kind's quota is a promise against borrowed work: reclaim and preemption
free GPUs of the kind asked for, and only those. Work that another project
runs inside its own ` + "`gpus`" + ` quota on GPUs of that kind is in quota too, and is not
taken: a kind's promise is whole when every project that uses the kind
names it in its quota. ` + "`berth plan`" + ` and ` + "`berth doctor --specs`" + ` warn of a quota
in a kind the cluster has none of.

A workspace may instead list kinds in order of preference, as Kueue's flavor
fungibility does: ` + "`resources.gpuKinds: [h100, a100]`" + ` starts under the first kind in
whose quota it fits and where it starts on free GPUs now, else the first
where it may borrow and starts now; else the first in whose quota it fits
(or its first) decides, where it preempts or waits as for one kind. Once it
runs, it counts against the kind it runs on.

A MIG instance is a device group of its own ("NVIDIA A100-SXM4-80GB MIG
1g.10gb"), so a kind may be a MIG profile. A kind whose match names a MIG
profile (" MIG " in it) is a kind of MIG instances and matches only those;
any other kind matches only whole GPUs: "NVIDIA H100*" is the whole H100s,
never their MIG instances, though those groups' names start alike. A
whole-GPU ask never lands on a MIG instance, nor a MIG ask on a whole GPU.

` + "```yaml" + `
apiVersion: berth.dev/v1
kind: GPUKind
metadata: {name: a100-1g}
spec: {match: "NVIDIA A100* MIG 1g.10gb"}   # weight: 1/7, its slices of seven
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: notebook, project: ml}
spec:
  task: {image: jupyter/base-notebook}
  resources: {gpus: 1, gpuKind: a100-1g}
` + "```" + `

` + "`NVIDIA A100* MIG 1g.10gb`" + ` matches the A100's 1g.10gb instances alone;
` + "`* MIG 1g.10gb`" + ` would match every model's.

berth schedules whole GPUs and MIG instances, the devices Nomad knows.
Fractions of a GPU (time-slicing, MPS) are not in Nomad: a device goes to one
task at a time. Sharing one among jobs is an open request (nomad#6708), and a
pull request that lets tasks share a device (nomad#27656) is in review.
Fractions would need a device plugin that reports the shares as devices, in a
group of their own; a GPUKind could then match that group like any other.

What berth shows follows the quota accounts. In the status (and ` + "`berth status`" + `,
the dashboard), a project whose quota names kinds lists each under ` + "`kinds`" + ` (its
quota, borrow limit, GPUs used and borrowed), and its own GPU figures are then
its ` + "`gpus`" + ` account's; ` + "`clusterGPUs`" + ` counts the cluster's GPUs per kind (devices, those
free, and GPU-equivalents by weight), a model no kind matches standing for its
own; a workspace's ` + "`gpuKind`" + ` is the kind it asks for, and ` + "`berth explain`" + ` says it. The
metrics ` + "`berth_project_{quota,used,borrowed}_gpus`" + ` have a series per account, labelled
` + "`kind`" + ` (none for ` + "`gpus`" + `). Specs without kinds show none of this.

## Time limits and idle GPUs

` + "`maxRuntime`" + ` is how long a workspace may run, over all its runs of one spec:
preemptions, moves and berth's restarts do not restart its clock; a run of a
changed spec (what its task sees: ` + "`drivers.Fingerprint`" + `) does. At the limit berth
stops it with its checkpoint signal and grace, as a stop in the specs would,
and it is Stopped with the reason and the end ` + "`time-limit`" + `: it does not start
again until its spec changes, or its limit is raised (it runs for what is
left). A workspace sets its own; a project's and then a tier's are the default
of the workspaces that set none; ` + "`0s`" + ` means no limit, at any level. ` + "`berth plan`" + `
says when running work stops under a limit the change sets ("stops at its time
limit in 2h").

` + "`idle`" + ` stops (or reports) a workspace whose GPUs sit idle: when every GPU of
it reads under ` + "`below`" + ` percent utilization (default 1: no kernel ran) for
` + "`after`" + `, its ` + "`action`" + ` is taken: ` + "`stop`" + ` (the default: stopped with its checkpoint
grace, Stopped with the end ` + "`idle`" + `, and not started again until its spec changes
or it is set Stopped, then Running), ` + "`report`" + ` (its status and notifications say
so; it runs on) or ` + "`off`" + `. Each field is taken from the most specific level that
sets it: the workspace, its project, its tier, the SchedulingPolicy; with no
` + "`after`" + ` anywhere the rule is off. Utilization is the NVIDIA device plugin's "GPU
utilization", read from Nomad; a workspace some of whose GPUs report none (MIG
instances) is never found idle.

` + "```yaml" + `
apiVersion: berth.dev/v1
kind: PriorityTier
metadata: {name: batch}
spec: {value: 30, maxRuntime: 72h}          # batch work runs 3 days at most
---
apiVersion: berth.dev/v1
kind: SchedulingPolicy
metadata: {name: default}
spec:
  idle: {after: 4h, below: 5}               # 4 h under 5%: stopped
---
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: notebook, project: ml}
spec:
  task: {image: jupyter/pytorch-notebook}
  resources: {gpus: 1}
  maxRuntime: 0s                            # no time limit for this one
  idle: {after: 2h, action: report}         # told after 2 h idle, never stopped
` + "```" + `

## Notifications

A Notification routes events to one receiver. Its ` + "`url`" + ` and ` + "`secret`" + ` are
never written in the spec: each names where berth's process reads it, an
environment variable (` + "`{env: NAME}`" + `) or a file (` + "`{file: /abs/path}`" + `, read at each
delivery). A URL or key written in their place is an error that does not
repeat the value. ` + "`format: webhook`" + ` needs ` + "`secret`" + ` (the body is signed:
` + "`X-Berth-Signature: t=UNIX,v1=HEX`" + `, HMAC-SHA256 of ` + "`UNIX.BODY`" + `); ` + "`format: slack`" + `
takes none (a Slack webhook's URL is its credential).

` + "```yaml" + `
apiVersion: berth.dev/v1
kind: Notification
metadata: {name: ml-oncall}
spec:
  format: webhook
  url: {env: BERTH_ML_HOOK_URL}
  secret: {file: /run/secrets/ml-hook-key}
  projects: [ml]                 # workspace events of these projects (default: all)
  owners: [alice, bob]           # of workspaces these users own (default: any)
  events: [preempted, moved, failed, overdue, revision-refused]   # default: all
  summarizeAbove: 10             # more events in one cycle: one summary
` + "```" + `

A route gets a workspace's event when it asks for the event and names its
project and owner (or none); a revision's event when it asks for it,
whatever its projects and owners. The routes in force are those of the
revision in force: a refused revision's routes are not used.
## Secrets

A token a task needs (Hugging Face, W&B, a cloud key) stays out of git: put
it in a Nomad Variable and give it to the task by reference in
` + "`spec.task.secrets`" + `. Each secret names a Variable path and key, in the job's
namespace (the project's ` + "`namespace`" + `, or its name), and where the value goes:
` + "`env`" + ` (an environment variable) or ` + "`file`" + ` (a file under the task's secrets
directory, ` + "`$NOMAD_SECRETS_DIR`" + `), exactly one of the two.

` + "```yaml" + `
apiVersion: berth.dev/v1
kind: Workspace
metadata: {name: train, project: ml}
spec:
  task:
    image: pytorch/pytorch:2.3.0
    secrets:
    - {variable: ml/hf, key: token, env: HF_TOKEN}
    - variable: nomad/jobs/train        # the job's own path: no policy needed
      key: sa.json
      file: gcloud/key.json             # $NOMAD_SECRETS_DIR/gcloud/key.json
      changeMode: restart               # noop (default) | restart | signal (+ changeSignal)
  resources: {gpus: 1}
` + "```" + `

` + "```" + `
$ nomad var put -namespace ml ml/hf token=hf_…
$ nomad var put -namespace ml nomad/jobs/train sa.json=@key.json
` + "```" + `

The Nomad driver renders each secret as a template of the job's task that
reads the Variable with ` + "`nomadVar`" + `; the Nomad client reads it through the job's
workload identity. berth never reads a value: no spec, plan, status, log,
history or dashboard of berth's holds one, only the reference
(` + "`ml/hf:token as $HF_TOKEN`" + `). A file gets the value as it is (mode 0644, no
newline added); an environment variable gets it whole (it must be text:
give a binary key as a file). A key the Variable does not have fails the
task's start with Nomad's message naming the path and key (` + "`berth: Nomad\nVariable ml/hf has no key \"tokn\"`" + `), which berth counts as a failed start.
Under ` + "`nomad/`" + ` only ` + "`nomad/jobs`" + ` and below, and ` + "`nomad/job-templates/NAME`" + `, are
Variables (Nomad's rule); ` + "`.berth/`" + ` in the secrets directory is berth's own.

Changing a reference (its path, key, ` + "`env`" + `, ` + "`file`" + `, ` + "`changeMode`" + `) changes what the
task sees: the task restarts, as for any change of its task, and ` + "`berth plan`" + `
says so with the references. Changing a Variable's value changes no spec and
restarts nothing unless ` + "`changeMode`" + ` asks: ` + "`noop`" + ` (default) leaves the task as it
is, with the value it started with; ` + "`restart`" + ` restarts it in place (same node
and GPUs); ` + "`signal`" + ` sends it ` + "`changeSignal`" + `.

**Which paths a job may read.** The job of workspace NAME of project P is
` + "`NAME`" + ` in P's namespace (` + "`P--NAME`" + ` where projects share a namespace). With ACLs
on, Nomad lets a job's tasks read exactly ` + "`nomad/jobs`" + `, ` + "`nomad/jobs/JOB`" + `,
` + "`nomad/jobs/JOB/GROUP`" + ` and ` + "`nomad/jobs/JOB/GROUP/TASK`" + ` without a policy, nothing
below them; berth runs each replica as its own group (` + "`replica-N`" + `), so the
path every replica reads is ` + "`nomad/jobs/JOB`" + `. Any other path (a team's ` + "`ml/hf`" + `,
or ` + "`nomad/jobs/JOB/x`" + `) needs a policy bound to the job, such as
` + "`examples/deploy/workspace-secrets.policy.hcl`" + ` (every Variable under ` + "`ml/`" + `):

` + "```" + `
$ nomad acl policy apply -namespace ml -job train train-secrets examples/deploy/workspace-secrets.policy.hcl
` + "```" + `

Nomad 1.6 and 1.7+ behave alike here (both tested, 1.6.5 and 2.0.5): a
template reads Variables through the job's workload identity, which every
job has without an ` + "`identity`" + ` block, and a policy bound with ` + "`-namespace -job`" + `
(since Nomad 1.4; ` + "`-group`" + ` and ` + "`-task`" + ` narrow it, but berth's groups are its
replicas) adds to what it may read. What 1.7 added, the ` + "`identity`" + ` block
that gives a task its token to call Nomad's API itself, berth does not
render and secrets do not need. With ACLs off every path is readable.

**A Variable the job cannot get.** Nomad reports a Variable that does not
exist and one the job may not read alike (the task event ` + "`Template:\nMissing: nomad.var.block(ml/hf@ml.global)`" + `) and holds the task. The workspace
is then Starting (placed, holding its GPUs) with reason kind ` + "`waiting`" + ` and a
reason that names the path and what to do; berth logs it once:

` + "```" + `
its task waits for its secrets: Nomad Variable ml/hf (namespace ml) does not
exist, or job train may not read it: write it (nomad var put -namespace ml
ml/hf KEY=VALUE), or bind the job a policy that reads it (nomad acl policy
apply -namespace ml -job train train-secrets FILE, FILE granting namespace
"ml" { variables { path "ml/hf" { capabilities = ["read"] } } }, as
examples/deploy/workspace-secrets.policy.hcl does)
` + "```" + `

For the job's own path it says only that the Variable does not exist. The
task starts once the Variable is there and readable, without berth doing
anything (seen within a few seconds of ` + "`nomad var put`" + ` or of the policy; Nomad
retries with backoff, so allow it up to a couple of minutes).

## The repo's own rules (` + "`*.cue`" + `)

Every ` + "`*.cue`" + ` file in the tree is a set of rules, compiled on its own (the CUE
standard library may be imported; a package clause is allowed) and unified with
the documents as written, arranged as:

` + "```cue" + `
tiers:      [name]: document
projects:   [name]: document
workspaces: [project]: [name]: document
volumes:    [name]: document
gpuKinds:   [name]: document
notifications: [name]: document
policy:     document
` + "```" + `

A failure is reported at the document's field with the rule's position, and
with the rule's ` + "`@msg(\"...\")`" + ` attribute as the message when it has one:

` + "```cue" + `
projects: [Name=string]: spec: {
	if Name != "serving" {
		tier: !="highest" @msg("only project serving may use tier highest")
	}
}
` + "```" + `

## Cluster files

` + "```yaml" + `
apiVersion: berth.dev/v1
kind: Cluster
metadata: {name: walkthrough}
spec:
  nodes:
  - name: gpu-node            # with count > 1 the nodes are gpu-node-1..N
    count: 1
    preset: dgx-h100          # optional: 8 GPUs, 2 NVLink domains of 4, 2 NUMA nodes
    cpu: 32
    memory: 256Gi
    gpus:                     # explicit GPUs when no preset
    - {model: H100, memory: 80Gi, domain: 0, numa: 0}
` + "```" + `

A node's GPUs may be of several models, MIG instances among them, each entry a
device of the model it names: MIG instances as the NVIDIA device plugin names
their device groups. ` + "`spec.kinds`" + ` declares the GPU kinds a ` + "`berth simulate`" + ` trace's
jobs name (its CSV's ` + "`gpu_kind`" + ` column), each a name, a ` + "`match`" + ` and an optional
` + "`weight`" + ` as a GPUKind's spec has them (see GPU kinds), never two that overlap;
without it, each model is a kind named by the model. They are the replay's
alone: ` + "`validate`" + ` fits workspaces to a cluster file by the GPUKind documents' kinds.

` + "```yaml" + `
spec:
  nodes:
  - name: mixed
    gpus:
    - {model: NVIDIA H100 80GB HBM3, count: 2}
    - {model: NVIDIA A100-SXM4-80GB, count: 2}
    - {model: NVIDIA A100-SXM4-80GB MIG 1g.10gb, count: 14}   # two A100s, seven slices each
  kinds:
  - {name: h100, match: "NVIDIA H100*"}
  - {name: a100, match: "NVIDIA A100-SXM4-80GB"}
  - {name: a100-1g, match: "NVIDIA A100* MIG 1g.10gb"}
` + "```" + `

## Size limits

One ` + "`*.yaml`" + `, ` + "`*.yml`" + ` or ` + "`*.cue`" + ` file may hold at most 16 MiB and a tree 512 MiB of
them (` + "`--max-file-size`" + `, ` + "`--max-tree-size`" + ` on ` + "`validate`" + `, ` + "`plan`" + `, ` + "`apply`" + ` and
` + "`reconcile`" + `, the same defaults in each). A file over the first, and the files
met after the second is reached, are never read: each is an error that names
it and the limit, so the specs are invalid (` + "`reconcile`" + ` keeps the last good
revision in force). A git source checks each blob's size before reading it.

## The status API

` + "`GET /api/v1/status`" + ` (` + "`berth status -o json`" + `) is a ` + "`berth.dev/v2`" + ` document.
Its ` + "`summary`" + ` always counts every workspace: ` + "`workspaces`" + `, ` + "`states`" + ` (per state)
and ` + "`projects`" + ` (per project: ` + "`name`" + `, ` + "`workspaces`" + `, ` + "`states`" + `). Its ` + "`workspaces`" + `
list is paged: a loop that knows at most 1,000 workspaces lists them all, as
before paging; one that knows more lists the first 1,000 and sets ` + "`next`" + `, the
cursor of the next page (` + "`PROJECT/NAME`" + ` of the last one listed). Parameters:
` + "`limit`" + ` (1 to 10,000 workspaces per page; default 1,000) and ` + "`after`" + ` (a
` + "`next`" + `); the pages list each workspace once, sorted by project, then name.
A bad parameter is 400 with ` + "`{\"error\": …}`" + `. ` + "`berth status`" + ` shows the first page,
the counts and how many more there are; ` + "`--all`" + ` follows every page.
`
