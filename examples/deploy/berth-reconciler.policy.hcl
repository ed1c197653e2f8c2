# What berth reconcile needs: its jobs in every project namespace, node
# and allocation reads, the namespaces it creates, its memory in
# Variables under berth/, and (for berth doctor) the scheduler
# configuration. Namespace create/update/delete needs a management token
# in Nomad CE; without one, create the project namespaces yourself and
# berth uses them as they are.
namespace "*" {
  policy       = "write"
  capabilities = ["submit-job", "read-job", "list-jobs", "read-job-scaling"]

  variables {
    path "berth/*" {
      capabilities = ["read", "write", "list", "destroy"]
    }
  }
}

node {
  policy = "read" # the nodes, and their GPUs' utilization (/v1/client/stats)
}

operator {
  policy = "read" # "write" only for berth doctor --fix
}
