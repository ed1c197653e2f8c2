# berth reconcile as a Nomad service: keeps the cluster matching the specs
# in a git repository, checked out by git-sync, through the Nomad driver
# (--cluster nomad reads NOMAD_ADDR and NOMAD_TOKEN). Its memory (fair-share
# usage, queue places, preemption records, transitions, prune delays) lives
# in Nomad Variables under berth/state/history, so it can be rescheduled
# anywhere and restart stateless. Two replicas run on different hosts: they
# elect a leader through the lease in berth/state/leader; only the leader
# writes, the other serves the status read-only (naming the leader) and
# takes over within --lease-ttl (15 s) if the leader dies.
# examples/deploy/README.md walks through it; in short:
#
#   nomad acl policy apply berth-reconciler examples/deploy/berth-reconciler.policy.hcl
#   nomad var put nomad/jobs/berth token=<secret of a token with that policy> \
#       ui_token=$(head -c 24 /dev/urandom | base64)
#   nomad job run -var image=REGISTRY/berth:TAG \
#       -var specs_repo=https://git.example.com/ml/cluster-specs \
#       examples/deploy/berth-reconciler.nomad.hcl
#   berth doctor --cluster nomad          # native preemption must be off (--fix)
#
# The test TestRealDeployReconcilerJob (internal/e2e) registers this file on a
# real Nomad with raw_exec standing in for docker.

variable "image" {
  type        = string
  description = "berth's container image: make image IMAGE=REGISTRY/berth:TAG, then push it"
}

variable "specs_repo" {
  type        = string
  description = "git URL of the spec repository git-sync checks out"
}

variable "specs_ref" {
  type        = string
  default     = "HEAD"
  description = "branch, tag or commit of specs_repo to follow"
}

variable "specs_period" {
  type        = string
  default     = "15s"
  description = "how often git-sync fetches specs_repo"
}

variable "git_sync_image" {
  type    = string
  default = "registry.k8s.io/git-sync/git-sync:v4.2.1"
}

variable "nomad_addr" {
  type        = string
  default     = "http://$${attr.unique.network.ip-address}:4646"
  description = "Nomad's HTTP API as the task reaches it (default: the agent on the task's node)"
}

variable "port" {
  type        = number
  default     = 4680
  description = "the host port berth's API, dashboard and /healthz listen on"
}

job "berth" {
  type     = "service"
  priority = 95

  group "reconciler" {
    count = 2 # one leader writes; the other follows and takes over

    constraint {
      operator = "distinct_hosts" # one per host: the static port, and a host failure takes one
      value    = "true"
    }

    network {
      port "http" { static = var.port }
    }

    # The first checkout, before berth starts: git-sync publishes each
    # revision as a link, ${NOMAD_ALLOC_DIR}/specs/current (--root + --link;
    # without --link it would be named after the repository), to a worktree
    # under specs/.worktrees, swapped atomically.
    task "specs-init" {
      driver = "docker"
      lifecycle {
        hook = "prestart"
      }
      config {
        image = var.git_sync_image
        args = [
          "--repo=${var.specs_repo}", "--ref=${var.specs_ref}",
          "--root=${NOMAD_ALLOC_DIR}/specs", "--link=current",
          "--one-time",
        ]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }

    # Then every specs_period: berth watches the link and applies a swap
    # at once.
    task "specs" {
      driver = "docker"
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }
      config {
        image = var.git_sync_image
        args = [
          "--repo=${var.specs_repo}", "--ref=${var.specs_ref}",
          "--root=${NOMAD_ALLOC_DIR}/specs", "--link=current",
          "--period=${var.specs_period}",
        ]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }

    task "berth" {
      driver = "docker"
      config {
        image = var.image
        args = [
          "reconcile",
          "--source", "${NOMAD_ALLOC_DIR}/specs/current",
          "--cluster", "nomad",
          # Beyond loopback berth requires a bearer token for its API,
          # dashboard feed and /metrics; /healthz stays open for the check.
          "--listen", "0.0.0.0:${NOMAD_PORT_http}",
          "--ui-token-file", "${NOMAD_SECRETS_DIR}/ui-token",
          "--log-format", "json",
        ]
        ports = ["http"]
      }
      env {
        NOMAD_ADDR = var.nomad_addr
      }
      # Both tokens come from the Nomad Variable nomad/jobs/berth, which
      # only this job (and operators) can read; neither is in the job file.
      # A changed token restarts berth.
      template {
        destination = "secrets/env"
        env         = true
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/berth" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }
      template {
        destination = "secrets/ui-token"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/berth" }}{{ .ui_token }}{{ end }}
        EOT
      }
      service {
        name     = "berth"
        port     = "http"
        provider = "nomad"
        check {
          # 503 once no cycle has succeeded for --health-max-age (10m):
          # a berth that is stuck or cannot reach Nomad is restarted.
          type     = "http"
          path     = "/healthz"
          interval = "10s"
          timeout  = "2s"
          check_restart {
            limit = 3
            grace = "30s"
          }
        }
      }
      resources {
        cpu    = 200
        memory = 256
      }
    }
  }
}
