# Every default is a one-line literal (string, number, bool or list):
# internal/pack, the renderer berth's tests use, reads them so.

variable "job_name" {
  description = "the reconciler's job; the agent's is this name with -agent"
  type        = string
  default     = "berth"
}

variable "image" {
  description = "berth's container image (make image, or make dist's image tarball pushed), for driver = docker"
  type        = string
  default     = ""
}

variable "driver" {
  description = "how the reconciler's tasks run: docker (image, git_sync_image), or raw_exec (berth_command, git_sync_command) on hosts without docker, as the nomad-dev kit"
  type        = string
  default     = "docker"
}

variable "berth_command" {
  description = "path of berth on the nodes (make static builds it), for driver = raw_exec"
  type        = string
  default     = ""
}

variable "replicas" {
  description = "reconciler replicas, on distinct hosts: one leader writes, the others follow and take over (a lease in berth's Store)"
  type        = number
  default     = 2
}

variable "specs_repo" {
  description = "git URL of the spec repository"
  type        = string
  default     = ""
}

variable "specs_ref" {
  description = "what to follow in specs_repo: any ref with git-sync, a branch with specs_from = berth (HEAD: the remote's default branch)"
  type        = string
  default     = "HEAD"
}

variable "specs_from" {
  description = "who fetches specs_repo: git-sync (a prestart task and a sidecar publish each commit as a link) or berth (its own git source, --source URL)"
  type        = string
  default     = "git-sync"
}

variable "specs_period" {
  description = "how often git-sync fetches specs_repo (specs_from = git-sync)"
  type        = string
  default     = "15s"
}

variable "interval" {
  description = "berth's --interval, the longest time between its cycles and between its own git fetches (specs_from = berth); empty: berth's default, 1m"
  type        = string
  default     = ""
}

variable "git_sync_image" {
  description = "git-sync's image (driver = docker)"
  type        = string
  default     = "registry.k8s.io/git-sync/git-sync:v4.2.1"
}

variable "git_sync_command" {
  description = "path of git-sync on the nodes (driver = raw_exec)"
  type        = string
  default     = "git-sync"
}

variable "port" {
  description = "the static host port of berth's API, dashboard, /metrics and /healthz"
  type        = number
  default     = 4680
}

variable "workload_identity" {
  description = "true (Nomad 1.7+): berth and its agent reach Nomad through the Task API socket with their workload identity, under the policy bound to each job (nomad acl policy apply -job); false (Nomad 1.6): with the static token in the Nomad Variable nomad/jobs/JOB (and JOB-agent; item token), through nomad_addr"
  type        = bool
  default     = true
}

variable "nomad_addr" {
  description = "Nomad's HTTP API as the tasks reach it without workload identity (default: the agent on the task's node)"
  type        = string
  default     = "http://$${attr.unique.network.ip-address}:4646"
}

variable "agent_enabled" {
  description = "also run berth agent, a system job, on the GPU nodes (meta.gpu = true)"
  type        = bool
  default     = true
}

variable "agent_artifact" {
  description = "URL of the tar.gz make dist builds (berth built with cgo), as the GPU nodes download it"
  type        = string
  default     = ""
}

variable "agent_command" {
  description = "path of berth (built with cgo) on the GPU nodes, where it is installed there: the agent runs it instead of downloading agent_artifact"
  type        = string
  default     = ""
}

variable "agent_env" {
  description = "more environment for the agent's task, e.g. LD_LIBRARY_PATH where the driver's libnvidia-ml.so.1 is outside the loader's path"
  type        = map(string)
  default     = {}
}
