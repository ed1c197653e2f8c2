# berth reconcile as a Nomad service: keeps the cluster matching the
# specs in a directory (a git checkout kept current by the git-sync
# sidecar), through the Nomad driver (--cluster nomad reads NOMAD_ADDR and
# NOMAD_TOKEN). Its memory (fair-share usage, queue places, preemption
# records) lives in Nomad Variables under berth/state/history, so it can be
# rescheduled anywhere and restart stateless.
#
#   nomad acl policy apply berth-reconciler examples/deploy/berth-reconciler.policy.hcl
#   nomad var put nomad/jobs/berth token=<secret of a token with that policy>
#   nomad job run examples/deploy/berth-reconciler.nomad.hcl
#   berth doctor --cluster nomad          # native preemption must be off (--fix)
job "berth" {
  type     = "service"
  priority = 95

  group "reconciler" {
    count = 1 # one writer; EnforceIndex and check-and-set guard against a second

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
