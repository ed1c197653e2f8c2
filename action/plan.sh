#!/usr/bin/env bash
# The action's plan step: what the change in BERTH_SPECS (default .) would
# do to the cluster BERTH_CLUSTER, against the specs at BERTH_BASE (a git
# ref), as Markdown in BERTH_PLAN_FILE (default plan.md) and in the job's
# summary. BERTH_CLUSTER is snapshot:FILE, an http(s) URL of a snapshot
# (`berth snapshot` writes one; fetched into RUNNER_TEMP), or nomad (the
# job's NOMAD_ADDR and NOMAD_TOKEN). It writes exitcode=0 (no change), 2
# (changes) or 1 (error) to GITHUB_OUTPUT and fails only on 1. BERTH names
# the binary (default: berth on PATH).
set -euo pipefail
berth=${BERTH:-berth}
cluster=${BERTH_CLUSTER:?BERTH_CLUSTER: snapshot:FILE, an http(s) URL of a snapshot, or nomad}
case "$cluster" in
http://* | https://*)
	snap="${RUNNER_TEMP:-$(mktemp -d)}/berth-snapshot.json"
	curl -fsSL --retry 3 "$cluster" -o "$snap"
	cluster=snapshot:$snap
	;;
esac
out=${BERTH_PLAN_FILE:-plan.md}
set +e
"$berth" plan "${BERTH_SPECS:-.}" --cluster "$cluster" --base "${BERTH_BASE:?BERTH_BASE: the git ref to compare against}" \
	--output markdown --detailed-exitcode >"$out"
code=$?
set -e
echo "exitcode=$code" >>"${GITHUB_OUTPUT:-/dev/null}"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ "$code" != 1 ]; then cat "$out" >>"$GITHUB_STEP_SUMMARY"; fi
if [ "$code" = 1 ]; then exit 1; fi
exit 0
