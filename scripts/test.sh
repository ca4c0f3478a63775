#!/usr/bin/env bash
# Runs every test: setup, an optimized build (the simulator runs thousands of
# scenarios), the real-process tests (real BitTorrent clients, malformed floods, the
# multi-process cluster with ActiveMQ, shared-address mode in network namespaces, a
# 2-minute soak, a seconds-long run of the benchmark suite, the Debian package checked
# by lintian and systemd-analyze, and docs/deploy.md run as written in namespaces), then
# `swift test` (protocol, runtime and cluster simulation suites), 2,000 simulated
# scenarios each run under two hashing seeds, then libFuzzer on the BEP 15, cluster and
# STOMP decoders (FUZZ_SECONDS each, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# One optimized build of everything, tests included, with the flags `swift test` uses.
swift build -c release --build-tests
# The package, from the same objects (relinked with the Swift runtime static), checked
# by lintian and systemd-analyze; tests/deploy installs it in namespaces.
scripts/package.sh --check
export TRACKER_BIN="$PWD/.build/release/tracker"
# The cluster tests start brokers; stop those that were not already running, and any
# node this run left behind, however we exit. Every process the tests start inherits
# TRACKER_TEST_RUN, so a node a user runs meanwhile (scripts/cluster.sh) is left alone.
export TRACKER_TEST_RUN="$$.$(date +%s%N)"
broker_was_running=0; pair_a_was_running=0; pair_b_was_running=0
scripts/activemq.sh status >/dev/null 2>&1 && broker_was_running=1
ACTIVEMQ_PAIR=a scripts/activemq.sh status >/dev/null 2>&1 && pair_a_was_running=1
ACTIVEMQ_PAIR=b scripts/activemq.sh status >/dev/null 2>&1 && pair_b_was_running=1
cleanup() {
  [ "$broker_was_running" = 1 ] || scripts/activemq.sh stop >/dev/null 2>&1 || true
  [ "$pair_a_was_running" = 1 ] || ACTIVEMQ_PAIR=a scripts/activemq.sh stop >/dev/null 2>&1 || true
  [ "$pair_b_was_running" = 1 ] || ACTIVEMQ_PAIR=b scripts/activemq.sh stop >/dev/null 2>&1 || true
  local pid
  for pid in $(pgrep -f "tracker run" 2>/dev/null); do
    if tr '\0' '\n' 2>/dev/null < "/proc/$pid/environ" | grep -qx "TRACKER_TEST_RUN=$TRACKER_TEST_RUN"; then
      kill "$pid" 2>/dev/null || true
    fi
  done
}
trap cleanup EXIT
passed=0; failed=0; failures=()
for t in tests/interop/*.py tests/cluster/*.py tests/deploy/*.py; do
  name="$(basename "$t")"
  [ "$name" = common.py ] && continue
  [[ "$name" == _* ]] && continue
  echo "=== $t"
  if timeout 600 /usr/bin/python3 "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$t"); fi
done
# Two minutes of random faults under load (scripts/soak.sh MINUTES runs longer ones).
echo "=== scripts/soak.sh ${SOAK_MINUTES:-2}"
if timeout 900 scripts/soak.sh "${SOAK_MINUTES:-2}"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=(scripts/soak.sh); fi
# The benchmark suite, seconds long: it must run, its figures are not judged here.
echo "=== scripts/bench.sh --smoke"
if timeout 300 /usr/bin/python3 tests/bench/suite.py --smoke; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=(scripts/bench.sh); fi
echo "real-process tests: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
  exit 1
fi
swift test -c release --skip-build
# Each of 2,000 seeds under two hashing seeds (Swift seeds its Dictionary and Set order
# per process): a run that depends on that order cannot be replayed from its seed.
"$TRACKER_BIN" simulate --seeds 1..2000 --vary-hashing
# 1,000 seeds nobody ran before, from a start derived from the commit: every commit
# explores new ground, and a failure prints its replay command.
scripts/sweep.sh 1000 --commit --no-record
scripts/fuzz.sh all "${FUZZ_SECONDS:-60}"
