#!/usr/bin/env bash
# A pull request, played locally: base/ is the spec repo on main, change/
# is what the pull request edits (project research: tier low -> high), and
# snap.json a cluster snapshot written by `berth snapshot`. The script
# commits base/ as main in a scratch git repository, applies the change
# and runs what CI runs on the pull request:
#
#   berth plan specs --cluster snapshot:snap.json --base main
#
# Extra arguments go to berth plan (try --output markdown). BERTH names the
# binary (default: bin/berth, built when missing).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
berth=${BERTH:-$root/bin/berth}
if [ ! -x "$berth" ]; then
	(cd "$root" && go build -o bin/berth ./cmd/berth)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir specs && cp "$here"/base/*.yaml specs/ && cp "$here/snap.json" .
export GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z
git init -q -b main
git add specs
git -c user.name=berth -c user.email=berth@example.invalid commit -q -m base
cp "$here"/change/*.yaml specs/
"$berth" plan specs --cluster snapshot:snap.json --base main "$@"
