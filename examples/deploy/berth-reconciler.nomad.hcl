# berth reconcile as a Nomad service: keeps the cluster matching the
# specs in a directory (a git checkout kept current by the git-sync
# sidecar), through the Nomad driver (--cluster nomad reads NOMAD_ADDR and
# NOMAD_TOKEN). Its memory (fair-share usage, queue places, preemption
# records, transitions, prune delays) lives in Nomad Variables under
# berth/state/history, so it can be rescheduled anywhere and restart
# stateless. Two replicas run on different hosts: they elect a leader
# through the lease in berth/state/leader; only the leader writes, the
# other serves the status read-only (naming the leader) and takes over
# within --lease-ttl (15 s) if the leader dies.
#
#   nomad acl policy apply berth-reconciler examples/deploy/berth-reconciler.policy.hcl
#   nomad var put nomad/jobs/berth token=<secret of a token with that policy>
#   nomad job run examples/deploy/berth-reconciler.nomad.hcl
#   berth doctor --cluster nomad          # native preemption must be off (--fix)
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
      port "http" { static = 4680 }
    }

    task "specs" {
      driver = "docker"
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      config {
        image = "registry.k8s.io/git-sync/git-sync:v4.2.1"
        args  = ["--repo=https://git.example.com/ml/cluster-specs", "--root=/alloc/specs", "--period=15s"]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }

    task "berth" {
      driver = "docker"
      config {
        image = "ghcr.io/berth-dev/berth:latest"
        args = [
          "reconcile",
          "--source", "/alloc/specs/current",
          "--cluster", "nomad",
          "--listen", "0.0.0.0:4680",
          "--log-format", "json",
        ]
        ports = ["http"]
      }
      env {
        NOMAD_ADDR = "http://${attr.unique.network.ip-address}:4646"
      }
      template {
        destination = "secrets/env"
        env         = true
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/berth" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }
      service {
        name     = "berth"
        port     = "http"
        provider = "nomad"
        check {
          type     = "http"
          path     = "/healthz"
          interval = "10s"
          timeout  = "2s"
        }
      }
      resources {
        cpu    = 200
        memory = 256
      }
    }
  }
}
