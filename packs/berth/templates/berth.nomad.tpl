# berth reconcile as a Nomad service (the berth pack): keeps the cluster
# matching the specs of a git repository through the Nomad driver. Its
# memory lives in Nomad Variables under berth/state/, so it restarts
# stateless anywhere; the replicas elect a leader through the lease in
# berth/state/leader, only the leader writes, the others serve the status
# read-only and take over within --lease-ttl.
[[- $driver := var "driver" . ]]
[[- if and (ne $driver "docker") (ne $driver "raw_exec") ]][[ fail "driver: docker or raw_exec" ]][[ end ]]
[[- $gitsync := eq (var "specs_from" .) "git-sync" ]]

job "[[ template "job_name" . ]]" {
  type     = "service"
  priority = 95

  group "reconciler" {
    count = [[ var "replicas" . ]] # one leader writes; the others follow and take over

    constraint {
      operator = "distinct_hosts" # one per host: the static port, and a host failure takes one
      value    = "true"
    }

    network {
      port "http" { static = [[ var "port" . ]] }
    }
[[- if $gitsync ]]
[[- range $task := list "specs-init" "specs" ]]

    task [[ $task | quote ]] {
[[- if eq $driver "docker" ]]
      driver = "docker"
[[- else ]]
      driver = "raw_exec"
[[- end ]]
      lifecycle {
[[- if eq $task "specs-init" ]]
        hook = "prestart"
[[- else ]]
        hook    = "poststart"
        sidecar = true
[[- end ]]
      }
      config {
[[- if eq $driver "docker" ]]
        image = [[ var "git_sync_image" $ | quote ]]
[[- else ]]
        command = [[ var "git_sync_command" $ | quote ]]
[[- end ]]
        args = [
          "--repo=[[ required "specs_repo: the spec repository's git URL" (var "specs_repo" $) ]]", "--ref=[[ var "specs_ref" $ ]]",
          "--root=${NOMAD_ALLOC_DIR}/specs", "--link=current",
[[- if eq $task "specs-init" ]]
          "--one-time",
[[- else ]]
          "--period=[[ var "specs_period" $ ]]",
[[- end ]]
        ]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }
[[- end ]]
[[- end ]]

    task "berth" {
      driver = [[ $driver | quote ]]
      config {
[[- if eq $driver "docker" ]]
        image = [[ required "image: berth's container image" (var "image" .) | quote ]]
[[- else ]]
        command = [[ required "berth_command: the path of berth on the nodes" (var "berth_command" .) | quote ]]
[[- end ]]
        args = [
          "reconcile",
          [[ template "source_args" . ]]
          "--cluster", "nomad",
          "--listen", "0.0.0.0:${NOMAD_PORT_http}",
          "--ui-token-file", "${NOMAD_SECRETS_DIR}/ui-token",
          "--log-format", "json",
[[- if var "interval" . ]]
          "--interval", [[ var "interval" . | quote ]],
[[- end ]]
        ]
[[- if eq $driver "docker" ]]
        ports = ["http"]
[[- end ]]
      }
[[- if var "workload_identity" . ]]
      # Nomad 1.7+: NOMAD_TOKEN is the task's workload identity, and the
      # Task API socket takes it; the job's ACL policy is the one bound to
      # it (nomad acl policy apply -namespace default -job JOB).
      identity {
        env = true
      }
      env {
        NOMAD_ADDR = "unix://${NOMAD_SECRETS_DIR}/api.sock"
      }
[[- else ]]
      env {
        NOMAD_ADDR = [[ var "nomad_addr" . | quote ]]
      }
      # Nomad 1.6: the static token from the Nomad Variable nomad/jobs/JOB,
      # which only this job (and operators) can read. A changed token
      # restarts berth.
      template {
        destination = "secrets/env"
        env         = true
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/[[ template "job_name" . ]]" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }
[[- end ]]
      # The bearer token berth's API, dashboard and /metrics require
      # beyond loopback (/healthz stays open for the check).
      template {
        destination = "secrets/ui-token"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/[[ template "job_name" . ]]" }}{{ .ui_token }}{{ end }}
        EOT
      }
      service {
        name     = "[[ template "job_name" . ]]"
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
