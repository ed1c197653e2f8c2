# berth agent on every GPU node: reads the GPUs with NVML (UUID, model,
# memory, PCI bus, NUMA node, NVLink peers, MIG instances) and publishes
# them as dynamic node metadata under berth.gpu. through the local Nomad
# client.
#
#   make dist          # bin/berth_linux_amd64.tar.gz: berth built with cgo
#   (put it where the GPU nodes can download it: an internal HTTP server,
#    S3, GCS — any source Nomad's artifact block takes)
#   nomad var put nomad/jobs/berth-agent token=<secret of a token with node:write>
#   nomad job run -var berth_artifact=https://files.example.com/berth_linux_amd64.tar.gz \
#       examples/deploy/berth-agent.nomad.hcl
#
# berth publishes no release binaries: the artifact is the one you build.
# It must run on the host (raw_exec) or in a container that sees
# libnvidia-ml.so.1, with a berth built with cgo (make build, make dist;
# not make static, nor the container image). It requests no GPU: it only
# reads them, and must never hold one a workspace could use.

variable "berth_artifact" {
  type        = string
  description = "URL of the tar.gz make dist builds (bin/berth_linux_amd64.tar.gz), as the GPU nodes download it"
}

variable "nomad_addr" {
  type        = string
  default     = "http://$${attr.unique.network.ip-address}:4646"
  description = "the local Nomad client's HTTP API as the task reaches it"
}

job "berth-agent" {
  type     = "system"
  priority = 90

  # Only GPU nodes: give them `meta { gpu = "true" }` in their client
  # configuration (or put them in their own node pool).
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
        source = var.berth_artifact
      }

      config {
        command = "local/berth"
        args    = ["agent", "--interval", "30s"]
      }

      env {
        BERTH_NODE_ID = "${node.unique.id}"
        NOMAD_ADDR    = var.nomad_addr
      }

      # The ACL token (node:write) comes from a Nomad Variable; it is never
      # in the job file, and berth never prints it.
      template {
        destination = "secrets/env"
        env         = true
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/berth-agent" }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
