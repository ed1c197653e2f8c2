#!/usr/bin/env bash
# make run: the preemption walk-through on the embedded simulated cluster.
#
# Copies examples/walkthrough into a scratch git repo (.scratch/walkthrough),
# starts `berth reconcile` on it with the simulated one-GPU cluster, and plays
# the walk-through as commits a few seconds apart: start medium; start high
# (it preempts medium); stop high (medium resumes by itself from its
# checkpoint). Then it keeps running so you can edit the specs and watch
# berth react. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/berth}
speed=${SIM_SPEED:-60}      # a real second is a simulated minute
pause=${PAUSE:-8}           # real seconds between commits
listen=${LISTEN:-127.0.0.1:4680}
scratch=.scratch/walkthrough
example=examples/walkthrough

rm -rf "$scratch"
mkdir -p "$scratch"
cp "$example"/*.yaml "$scratch"/
cluster="$scratch/cluster.yaml"

# Split workspaces.yaml into one file per workspace so each step is one edit.
awk -v dir="$scratch" '
  /^---$/ { n++; next }
  { print > (dir "/ws-" n+0 ".yaml") }
' "$example/workspaces.yaml"
rm "$scratch/workspaces.yaml"
mv "$scratch/ws-0.yaml" "$scratch/workspace-medium.yaml"
mv "$scratch/ws-1.yaml" "$scratch/workspace-high.yaml.next"

# Each step is a commit in the scratch repo (berth watches the files; with
# no git installed the steps are plain edits).
have_git=$(command -v git >/dev/null && echo yes || echo no)
git_() { git -C "$scratch" -c user.name="berth walk-through" -c user.email=walkthrough@berth.invalid "$@"; }
commit() { if [ "$have_git" = yes ]; then git_ add -A . >/dev/null; git_ commit -q -m "$1"; fi; }
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [ "$have_git" = yes ]; then git_ init -q; fi
commit "tiers, projects, volume; start medium-training"

say "berth reconcile on $scratch, simulated one-GPU cluster at ${speed}x (a real second is $((speed)) simulated seconds)"
"$bin" reconcile --source "$scratch" --cluster "sim:$cluster" --sim-speed "$speed" --listen "$listen" --interval 5s &
berth=$!
stop() {
  trap - INT TERM
  say "stopping berth"
  kill -INT "$berth" 2>/dev/null || true
  wait "$berth" 2>/dev/null || true
  exit 0
}
trap stop INT TERM
sleep 1
if ! kill -0 "$berth" 2>/dev/null; then
  echo "berth did not start (is another one listening on $listen? try LISTEN=127.0.0.1:4681 make run)" >&2
  exit 1
fi
say "dashboard: http://$listen/  (open it now: the walk-through plays there live)"

sleep $((pause - 1))
say "commit: start high-training in high-priority-project (tier high 80 > medium 50): it preempts medium-training"
mv "$scratch/workspace-high.yaml.next" "$scratch/workspace-high.yaml"
commit "start high-training"

sleep "$pause"
say "commit: stop high-training (state: Stopped): medium-training resumes by itself from its checkpoint"
sed -i.bak 's/^  state: Running$/  state: Stopped/' "$scratch/workspace-high.yaml" && rm -f "$scratch/workspace-high.yaml.bak"
commit "stop high-training"

sleep "$pause"
say "the walk-through is done; berth keeps running"
cat <<MSG
  Edit the specs in $scratch and watch berth react in this log, for example:
    sed -i 's/state: Stopped/state: Running/' $scratch/workspace-high.yaml   # preempt again
    echo 'oops: [' >> $scratch/workspace-high.yaml                             # invalid: refused, last good stays
  Dashboard: http://$listen/
  Status:   $bin status --server http://$listen     (or curl http://$listen/api/v1/status)
  Explain:  $bin explain --server http://$listen medium-priority-project/medium-training
  Metrics:  curl http://$listen/metrics
  Ctrl-C stops berth.
MSG
wait "$berth"
