berth is deployed: job [[ template "job_name" . ]] (the reconciler, [[ var "replicas" . ]] replicas on port [[ var "port" . ]])[[ if var "agent_enabled" . ]] and job [[ template "job_name" . ]]-agent (berth agent on the GPU nodes)[[ end ]].

Its /healthz answers once a cycle has succeeded:
  nomad job status [[ template "job_name" . ]]
Its API and dashboard need the UI token of the Nomad Variable nomad/jobs/[[ template "job_name" . ]]:
  nomad var get -item ui_token nomad/jobs/[[ template "job_name" . ]] > berth.token
  berth status --server http://NODE:[[ var "port" . ]] --token-file berth.token
