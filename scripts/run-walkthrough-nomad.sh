#!/usr/bin/env bash
# make run-nomad: the preemption walk-through on a real Nomad.
#
# Starts a real Nomad v1.6.5 (NOMAD_DEV_VERSION=2.0.5: v2.0.5) from
# ../shared/nomad-dev (one node, one fake GPU; tasks run with raw_exec,
# so no docker and no real GPU are needed),
# copies examples/walkthrough-nomad into a scratch directory, runs
# `berth reconcile --cluster nomad` on it and plays the walk-through as
# edits a few seconds apart: start medium; start high (it preempts medium,
# which checkpoints on SIGTERM within its grace); stop high (medium resumes
# by itself from its checkpoint). After each step it shows Nomad's own
# allocations and the workspaces' log. Ctrl-C (or the end, with
# KEEP=0) stops berth and the Nomad agent.
#
#   NOMAD_PORT  the agent's HTTP port (default 4646; RPC +1, Serf +2)
#   PAUSE       seconds between steps (default 20)
#   LISTEN      berth's status and dashboard address (default 127.0.0.1:4680)
#   KEEP        1 (default): keep running after the story; 0: stop at its end
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/berth}
kit=${NOMAD_DEV:-../shared/nomad-dev}
port=${NOMAD_PORT:-4646}
pause=${PAUSE:-20}
listen=${LISTEN:-127.0.0.1:4680}
keep=${KEEP:-1}
example=examples/walkthrough-nomad
scratch=$(pwd)/.scratch/walkthrough-nomad
nd=$(pwd)/.scratch/nomad-dev
ckdir=$scratch-checkpoints

if [ ! -x "$kit/up" ]; then
	echo "make run-nomad needs $kit (a real Nomad with fake GPUs); it is not here" >&2
	exit 1
fi
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

[ -e "$nd/pids" ] && "$kit/down" "$nd" >/dev/null 2>&1 || true
rm -rf "$scratch" "$nd" "$ckdir"
mkdir -p "$scratch" "$ckdir"
cp "$example"/tiers.yaml "$example"/projects.yaml "$scratch"/
# One file per workspace so each step is one edit; the checkpoints go to
# a directory of this run.
awk -v dir="$scratch" '
  /^---$/ { n++; next }
  { print > (dir "/ws-" n+0 ".yaml") }
' "$example/workspaces.yaml"
for f in "$scratch"/ws-*.yaml; do
	sed -i.bak "s|^    driver: raw_exec\$|    driver: raw_exec\n    env: {CHECKPOINT_DIR: \"$ckdir\"}|" "$f" && rm -f "$f.bak"
done
mv "$scratch/ws-0.yaml" "$scratch/workspace-medium.yaml"
mv "$scratch/ws-1.yaml" "$scratch/workspace-high.yaml.next"

say "starting a real Nomad v${NOMAD_DEV_VERSION:-1.6.5} on 127.0.0.1:$port (one node, one fake GPU; raw_exec tasks)"
eval "$("$kit/up" -n 1 -g 1 -p "$port" "$nd")"
export NOMAD_ADDR
nomad_() { "$nd/bin/nomad" "$@"; }
berth=""
stop() {
	trap - INT TERM EXIT
	say "stopping berth and the Nomad agent"
	if [ -n "$berth" ]; then
		kill -INT "$berth" 2>/dev/null || true
		wait "$berth" 2>/dev/null || true
	fi
	"$kit/down" "$nd" >/dev/null 2>&1 || true
	exit 0
}
trap stop INT TERM EXIT

show() {
	for ws in medium-priority-project/medium-training high-priority-project/high-training; do
		ns=${ws%/*} job=${ws#*/}
		if out=$(nomad_ job allocs -namespace "$ns" "$job" 2>/dev/null); then
			echo "  nomad job allocs -namespace $ns $job"
			echo "$out" | sed 's/^/    /'
		fi
	done
	echo "  the workspaces' own log ($ckdir/*.log):"
	cat "$ckdir"/*.log 2>/dev/null | sort | tail -n 8 | sed 's/^/    /' || true
}

say "berth reconcile on $scratch against Nomad at $NOMAD_ADDR"
"$bin" reconcile --source "$scratch" --cluster nomad --listen "$listen" --interval 2s &
berth=$!
sleep 2
if ! kill -0 "$berth" 2>/dev/null; then
	echo "berth did not start (is another one listening on $listen? try LISTEN=127.0.0.1:4681 make run-nomad)" >&2
	exit 1
fi
say "dashboard: http://$listen/  (the walk-through plays there live)"

sleep $((pause - 2))
say "medium-training runs on the GPU:"
show
say "edit: start high-training in high-priority-project (tier high 80 > medium 50): it preempts medium-training, which checkpoints on SIGTERM within its 10 s grace"
mv "$scratch/workspace-high.yaml.next" "$scratch/workspace-high.yaml"

sleep "$pause"
say "high-training holds the GPU; medium-training waits, Preempted:"
show
"$bin" status --server "http://$listen" 2>/dev/null | sed 's/^/  /' || true
say "edit: stop high-training (state: Stopped): medium-training resumes by itself from its checkpoint"
sed -i.bak 's/^  state: Running$/  state: Stopped/' "$scratch/workspace-high.yaml" && rm -f "$scratch/workspace-high.yaml.bak"

sleep "$pause"
say "medium-training runs again, from its checkpoint:"
show
"$bin" status --server "http://$listen" 2>/dev/null | sed 's/^/  /' || true
if [ "$keep" = 0 ]; then
	stop
fi
say "the walk-through is done; berth and Nomad keep running"
cat <<MSG
  Edit the specs in $scratch and watch berth react in this log.
  Nomad:     export NOMAD_ADDR=$NOMAD_ADDR; $nd/bin/nomad job status -namespace '*'
  Dashboard: http://$listen/
  Status:    $bin status --server http://$listen
  Ctrl-C stops berth and the Nomad agent.
MSG
wait "$berth"
