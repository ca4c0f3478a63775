#!/usr/bin/env bash
# Sweeps simulator seeds nobody has run before: the seeds in `swift test` and CI's fixed
# sweep have been run and fixed many times and no longer find bugs; fresh ones still do.
#
#   scripts/sweep.sh [COUNT] [--start N | --commit] [--no-record]
#
# COUNT seeds (default 100,000) from a random start (or N, or a start derived from the
# commit hash, as CI does), run by `tracker simulate --seeds` with one job per core. It
# prints the range first, progress on a terminal, the rate and each failure's replay
# command, and appends a line (date, commit, range, count, failures, rate) to
# docs/sweeps.md unless --no-record. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
count=100000 start="" record=1
while [ $# -gt 0 ]; do
  case "$1" in
    --start) start="$2"; shift 2 ;;
    --commit) start=$(( 1000000000 + 0x$(git rev-parse HEAD | cut -c1-8) * 1000 )); shift ;;
    --no-record) record=0; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] || { echo "sweep.sh: unknown argument $1" >&2; exit 2; }; count="$1"; shift ;;
  esac
done
[ "$count" -ge 1 ] || { echo "sweep.sh: COUNT must be at least 1" >&2; exit 2; }
if [ -z "$start" ]; then
  # Far above the fixed seeds (1..10,000 in swift test, 1..2,000 in CI) and the 10⁹..
  # 4.3·10¹² band of commit-derived starts: 10¹³ up to 2⁶².
  start=$(( 10000000000000 + $(od -An -N7 -tu8 /dev/urandom | tr -d ' ') % 4000000000000000000 ))
fi
end=$(( start + count - 1 ))
bin="${TRACKER_BIN:-.build/release/tracker}"
if [ -z "${TRACKER_BIN:-}" ]; then swift build -c release --product tracker >/dev/null; fi
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- Sources Package.swift || commit="$commit+changes"
echo "sweep: seeds $start..$end ($count) at $commit, $(nproc) jobs"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
"$bin" simulate --seeds "$start..$end" --jobs "$(nproc)" | tee "$out" || status=$?
failed=$(grep -c '^FAIL seed' "$out" || true)
rate=$(sed -n 's/^rate: \([0-9]*\) scenarios a minute.*/\1/p' "$out")
# A run stopped before its summary ran only part of the range: nothing is recorded.
if [ "$record" = 1 ] && ! grep -qE '^[0-9]+ passed, [0-9]+ failed' "$out"; then
  echo "sweep: the run ended before its summary (status $status); nothing recorded" >&2
  record=0
  [ "$status" = 0 ] && status=1
fi
if [ "$record" = 1 ]; then
  [ -f docs/sweeps.md ] || printf '# Fresh-seed sweeps\n\n%s\n\n| date | commit | seeds | count | failures | scenarios/min |\n|---|---|---|---|---|---|\n' \
    'Appended by scripts/sweep.sh: ranges nobody had run before. A failing seed is named with its replay command in the closing note of the issue it was fixed under.' > docs/sweeps.md
  seeds=$(grep -o '^FAIL seed [0-9]*' "$out" | awk '{print $3}' | paste -sd, - || true)
  echo "| $(date -u +%Y-%m-%d) | $commit | $start..$end | $count | $failed${seeds:+ ($seeds)} | ${rate:-?} |" >> docs/sweeps.md
  echo "recorded in docs/sweeps.md"
fi
exit "$status"
