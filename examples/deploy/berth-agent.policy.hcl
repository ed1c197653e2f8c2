# berth agent writes dynamic node metadata (POST /v1/client/metadata).
# Nomad 1.7+: bind it to the agent's job, whose workload identity then
# holds it through the Task API socket:
#
#   nomad acl policy apply -namespace default -job berth-agent berth-agent examples/deploy/berth-agent.policy.hcl
#
# Nomad 1.6: give it to the token in the Variable nomad/jobs/berth-agent.
node {
  policy = "write"
}
