#!/usr/bin/env bash
# Fails when a golden file (testdata/**, *.txtar expectations) is stale:
# it rewrites them from the code (BERTH_UPDATE=1) and compares with what
# was there before. A stale golden is left rewritten for you to review.
set -euo pipefail
cd "$(dirname "$0")/.."
snapshot() { find . -path ./.git -prune -o -path '*/testdata/*' -type f -print0 | sort -z | xargs -0 sha256sum 2>/dev/null; }
before=$(snapshot)
BERTH_UPDATE=1 ${GO:-go} test -count=1 ./... >/dev/null
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "stale golden files (rewritten now; review with git diff):"
  diff <(echo "$before") <(echo "$after") | grep '^>' | awk '{print "  " $3}'
  exit 1
fi
echo "golden files are current"
