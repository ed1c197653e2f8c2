app {
  url = "https://github.com/berth-dev/berth"
}

pack {
  name        = "berth"
  description = "berth, a GitOps reconciler for GPU clusters: the reconciler (2 replicas electing a leader) and the agent on the GPU nodes"
  version     = "0.1.0"
}
