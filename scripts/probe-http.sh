#!/usr/bin/env bash
# The figures of docs/benchmarks.md's "The HTTP surface under load": starts `berth
# reconcile` on the simulator with a git source and a webhook secret,
# loads it with scripts/httpprobe (loopback only, bounded, about a
# minute), and prints what berth held. Needs git.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/berth}
[ -x "$bin" ] || go build -o "$bin" ./cmd/berth
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/repo"
cp examples/walkthrough/tiers.yaml "$work/repo/"
git -C "$work/repo" init -q -b main
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=probe -c user.email=probe@berth.invalid commit -q -m specs
head -c 32 /dev/urandom | base64 > "$work/secret"
"$bin" reconcile --source "file://$work/repo" --cluster "sim:examples/walkthrough/cluster.yaml" \
  --webhook-secret-file "$work/secret" --listen 127.0.0.1:0 --addr-file "$work/addr" --log-level warn &
pid=$!
for _ in $(seq 100); do [ -s "$work/addr" ] && break; sleep 0.1; done
go run ./scripts/httpprobe -url "$(cat "$work/addr")" -pid "$pid"
