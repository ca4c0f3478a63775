#!/usr/bin/env bash
# One command to set up and run a tracker: installs what a standalone node needs (SQLite;
# not the test dependencies), builds a release binary, and runs `tracker run` with the
# given options (default: a standalone node on udp://127.0.0.1:6969).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --standalone
swift build -c release --product tracker
exec .build/release/tracker run "$@"
