#!/usr/bin/env bash
# Fails when a golden file (testdata/**, *.txtar expectations) is stale:
# it rewrites them from the code (BERTH_UPDATE=1) and compares with what
# was there before. A stale golden is left rewritten for you to review.
# A test that fails while rewriting fails it too, with that test's output;
# on success it says one line. PKGS narrows it (default ./...).
set -euo pipefail
cd "$(dirname "$0")/.."
# rapid's failure files (testdata/rapid/, ignored by git) are no goldens.
snapshot() { find . -path ./.git -prune -o -path '*/testdata/rapid' -prune -o -path '*/testdata/*' -type f -print0 | sort -z | xargs -0 sha256sum 2>/dev/null; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
before=$(snapshot)
rc=0
BERTH_UPDATE=1 ${GO:-go} test -count=1 ${PKGS:-./...} >"$out" 2>&1 || rc=$?
after=$(snapshot)
if [ "$rc" -ne 0 ]; then
  echo "tests failed while rewriting the golden files:"
  grep -v -e '^ok ' -e '^?  .*\[no test files\]' "$out" || true
fi
if [ "$before" != "$after" ]; then
  echo "stale golden files (rewritten now; review with git diff):"
  diff <(echo "$before") <(echo "$after") | grep '^>' | awk '{print "  " $3}'
  exit 1
fi
[ "$rc" -eq 0 ] || exit 1
echo "golden files are current"
