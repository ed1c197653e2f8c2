[[- if var "agent_enabled" . ]]
# berth agent on every GPU node (the berth pack): reads the GPUs with NVML
# and publishes them as dynamic node metadata under berth.gpu. through the
# local Nomad client. It needs a berth built with cgo (make dist), on the
# host, and requests no GPU. On a node without the NVIDIA driver it says
# so once and waits for it, running idle rather than restarting.

job "[[ template "job_name" . ]]-agent" {
  type     = "system"
  priority = 90

  # Only GPU nodes: give them `meta { gpu = "true" }` in their client
  # configuration.
  constraint {
    attribute = "${meta.gpu}"
    value     = "true"
  }

  group "agent" {
    restart {
      attempts = 10
      interval = "30m"
      delay    = "15s"
      mode     = "delay"
    }

    task "agent" {
      driver = "raw_exec"
[[- if var "agent_command" . ]]

      config {
        command = [[ var "agent_command" . | quote ]]
[[- else ]]

      artifact {
        source = [[ required "agent_artifact: the URL of make dist's tar.gz, or agent_command (or agent_enabled = false)" (var "agent_artifact" .) | quote ]]
      }

      config {
        command = "local/berth"
[[- end ]]
        args    = ["agent", "--interval", "30s"]
      }
[[- if var "workload_identity" . ]]

      # Nomad 1.7+: NOMAD_TOKEN is the task's workload identity, and the
      # Task API socket takes it; the job's ACL policy (node:write) is the
      # one bound to it (nomad acl policy apply -namespace default -job
      # JOB-agent).
      identity {
        env = true
      }

      env {
        BERTH_NODE_ID = "${node.unique.id}"
        NOMAD_ADDR    = "unix://${NOMAD_SECRETS_DIR}/api.sock"
[[- range $k, $v := var "agent_env" . ]]
        [[ $k ]] = [[ $v | quote ]]
[[- end ]]
      }
[[- else ]]

      env {
        BERTH_NODE_ID = "${node.unique.id}"
        NOMAD_ADDR    = [[ var "nomad_addr" . | quote ]]
[[- range $k, $v := var "agent_env" . ]]
        [[ $k ]] = [[ $v | quote ]]
[[- end ]]
      }

      # Nomad 1.6: the ACL token (node:write) comes from the Nomad Variable
      # nomad/jobs/JOB-agent; it is never in the job file.
      template {
        destination = "secrets/env"
        env         = true
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/[[ template "job_name" . ]]-agent" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }
[[- end ]]

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
[[- end ]]
