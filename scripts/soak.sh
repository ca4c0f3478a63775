#!/usr/bin/env bash
# Soak under random faults: scripts/soak.sh MINUTES [SEED] (see tests/soak/soak.py).
# 3 nodes + two networked ActiveMQ brokers on this host; needs root (a tmpfs for the
# disk-full fault). Builds the tracker when TRACKER_BIN is not given.
# test.sh: quiet machine (it judges latency under load, so background builds are frozen while it runs)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:?usage: scripts/soak.sh MINUTES [SEED]}"
if [ -z "${TRACKER_BIN:-}" ]; then
  swift build -c release --product tracker >/dev/null
  export TRACKER_BIN="$PWD/.build/release/tracker"
fi
exec /usr/bin/python3 tests/soak/soak.py "$minutes" ${2:+"$2"}
