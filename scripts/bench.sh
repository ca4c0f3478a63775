#!/usr/bin/env bash
# The benchmark suite (tests/bench/suite.py): Debian's opentracker (1 and 2 UDP workers),
# `tracker run` standalone at each --threads setting and a 3-node cluster over ActiveMQ,
# same `tracker bench` load, alternating rounds, then opentracker and standalone again under
# a second generator (tests/bench/udpgen.c); prints responses/s, p50/p99, CPU µs per
# response, peak RSS and the ratios.
# Usage: scripts/bench.sh [--seconds S] [--rounds N] [--warmup S] [--broker-settle S] [--concurrency 64,256,1024,2048]
#                         [--threads 1,2] [--smoke] [--json FILE] [--skip-cluster]
#        scripts/bench.sh --http [--seconds S] [--rounds N] [--concurrency 64,256] [--threads 1,2] [--cluster] [--smoke]
#   --http: the HTTP tracker against opentracker's HTTP listener, under `tracker bench --http`
#   and wrk (tests/bench/http_bench.py); --cluster adds a 3-node cluster's CPU per announce
#   over HTTP and UDP, each against standalone's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh  # opentracker and ActiveMQ among what it installs
if [ -z "${TRACKER_BIN:-}" ]; then
  swift build -c release --product tracker >/dev/null
  export TRACKER_BIN="$PWD/.build/release/tracker"
fi
if [ "${1:-}" = --http ]; then
  shift
  exec /usr/bin/python3 tests/bench/http_bench.py "$@"
fi
exec /usr/bin/python3 tests/bench/suite.py "$@"
