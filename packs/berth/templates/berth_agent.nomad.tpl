[[- if var "agent_enabled" . ]]
# berth agent on every GPU node (the berth pack): reads the GPUs with NVML
# and publishes them as dynamic node metadata under berth.gpu. through the
# local Nomad client. It needs a berth built with cgo (make dist), on the
# host, and requests no GPU.

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

      artifact {
        source = [[ required "agent_artifact: the URL of make dist's tar.gz (or agent_enabled = false)" (var "agent_artifact" .) | quote ]]
      }

      config {
        command = "local/berth"
        args    = ["agent", "--interval", "30s"]
      }

      env {
        BERTH_NODE_ID = "${node.unique.id}"
        NOMAD_ADDR    = [[ var "nomad_addr" . | quote ]]
      }

      # The ACL token (node:write) comes from the Nomad Variable
      # nomad/jobs/JOB-agent; it is never in the job file.
      template {
        destination = "secrets/env"
        env         = true
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/[[ template "job_name" . ]]-agent" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
[[- end ]]
