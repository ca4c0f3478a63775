#!/usr/bin/env bash
# One command to set up and run a tracker: installs dependencies, builds a release
# binary, and runs `tracker run` with the given options (default: a standalone node
# on udp://127.0.0.1:6969).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build -c release --product tracker
exec .build/release/tracker run "$@"
