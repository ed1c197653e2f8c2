# What a workspace's job needs to read the Nomad Variables its secrets
# (spec.task.secrets) name beyond its own path. Nomad lets a job's tasks
# read nomad/jobs/JOB without any policy; any other path needs one, bound
# to the job (Nomad 1.4 and later, ACLs on):
#
#   nomad acl policy apply -namespace ml -job train train-secrets examples/deploy/workspace-secrets.policy.hcl
#
# JOB is the workspace's name (train), in its project's namespace (ml);
# PROJECT--NAME where projects share a namespace. This policy lets the job
# read every Variable under ml/ in namespace ml; name one path
# (path "ml/hf") to grant less. Apply one per workspace that needs it, or
# bind one policy to each job by name.
namespace "ml" {
  variables {
    path "ml/*" {
      capabilities = ["read"]
    }
  }
}
