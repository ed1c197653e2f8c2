#!/usr/bin/env bash
# make e2e: berth against a real Nomad (v1.6.5; NOMAD_DEV_VERSION=2.0.5 for
#   the kit's other version) with fake GPUs.
#   Starts ../shared/nomad-dev/up (2 client nodes, 4 fake GPUs each) under
#   .nomad-dev/, runs every TestReal… test of the module against it (one
#   package at a time: they share the agent), and stops it, also on failure:
#   the driver's conformance suite (TestRealConformance, drivers/nomad) and
#   every other, in internal/e2e's *_real_test.go files (the driver alone,
#   berth's loop over it, the binary).
#   E2E_RUN narrows the tests (a go test -run pattern), E2E_PKGS the
#   packages (default ./...); E2E_PORT moves the agent (default 4646),
#   E2E_DIR its directory (default .nomad-dev; absolute or under the
#   repository): make e2e-v2 runs the
#   conformance suite and the walk-through on Nomad v2.0.5 with these.
#   E2E_ACL=1 starts the agent with ACLs on (up -A; NOMAD_TOKEN is its
#   management token), for the tests that need them (they skip without).
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${NOMAD_DEV:-../shared/nomad-dev}
if [ ! -x "$kit/up" ]; then
	echo "make e2e needs $kit (a real Nomad with fake GPUs); it is not here" >&2
	exit 1
fi
# An absolute E2E_DIR keeps the kit out of the tree, and short: a task's
# Task API socket lives under it and holds 107 bytes at most
# (TestRealPackWorkloadIdentity: E2E_DIR=/tmp/bwi).
case ${E2E_DIR:-.nomad-dev} in
/*) dir=$E2E_DIR ;;
*) dir=$(pwd)/${E2E_DIR:-.nomad-dev} ;;
esac
port=${E2E_PORT:-4646}
[ -e "$dir/pids" ] && "$kit/down" "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
started=$(date +%s)
eval "$("$kit/up" -n 2 -g 4 -p "$port" ${E2E_ACL:+-A} "$dir")"
trap '"$kit/down" "$dir" >/dev/null 2>&1 || true' EXIT
echo "e2e: Nomad v${NOMAD_DEV_VERSION:-1.6.5} at $NOMAD_ADDR (2 nodes, 4 fake GPUs each${E2E_ACL:+, ACLs on})"
export NOMAD_ADDR
# E2E_ACL=1: ACLs on (up -A), the management token in NOMAD_TOKEN.
[ -n "${E2E_ACL:-}" ] && export NOMAD_TOKEN && echo "e2e: ACLs on"
# The bad-day tests fail GPUs and nodes of this cluster (its directory;
# TestRealFollowedSnapshotEqualsFullRead stops a client in it),
# and report what they measure to a file printed at the end.
export NOMAD_DEV_DIR=$dir E2E_REPORT=$dir/report.txt
# go-nvml's header marks calls berth never makes as deprecated: keep cgo
# quiet (make exports the same when e2e runs through it).
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
rc=0
go test -count=1 -p 1 -timeout 30m -run "${E2E_RUN:-^TestReal}" ${E2E_PKGS:-./...} 2>&1 | grep -v 'no test files' | grep -v '^ok .*\[no tests to run\]' || rc=$?
if [ -s "$E2E_REPORT" ]; then echo "e2e: measured"; sed 's/^/  /' "$E2E_REPORT"; fi
echo "e2e: $(( $(date +%s) - started )) s wall"
exit $rc
