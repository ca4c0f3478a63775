#!/usr/bin/env bash
# Runs every test: setup, an optimized build (the simulator runs thousands of
# scenarios), the real-process tests (real BitTorrent clients, malformed floods), then
# `swift test` (protocol suites and the cluster simulation suites).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# One optimized build of everything, tests included, with the flags `swift test` uses.
swift build -c release --build-tests
export TRACKER_BIN="$PWD/.build/release/tracker"
passed=0; failed=0; failures=()
for t in tests/interop/*.py; do
  [ "$(basename "$t")" = common.py ] && continue
  echo "=== $t"
  if /usr/bin/python3 "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$t"); fi
done
echo "real-process tests: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
  exit 1
fi
swift test -c release --skip-build
