#!/usr/bin/env bash
# Measures `tracker run` (release build) and Debian's opentracker under the same
# `tracker bench` load, in one run on this machine, and prints the ratio.
# Usage: scripts/bench-vs-opentracker.sh [duration-seconds] [concurrency] [torrents]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONCURRENCY=${2:-256}
TORRENTS=${3:-10000}

if ! command -v opentracker >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq opentracker >/dev/null
fi
swift build -c release --product tracker >/dev/null
BIN=.build/release/tracker
WORK=$(mktemp -d)
chmod 755 "$WORK"  # opentracker drops root after chroot and must still read the whitelist
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

# Debian builds opentracker whitelist-only: list the workload's info hashes.
$BIN bench --torrents "$TORRENTS" --print-info-hashes > "$WORK/whitelist.txt"
cat > "$WORK/opentracker.conf" <<CONF
listen.udp 127.0.0.1:16970
listen.tcp 127.0.0.1:16971
# opentracker chroots into tracker.rootdir: the path is inside it.
access.whitelist /whitelist.txt
tracker.rootdir $WORK
CONF
opentracker -f "$WORK/opentracker.conf" > "$WORK/opentracker.log" 2>&1 &
pids+=($!)
$BIN run --udp 127.0.0.1:16969 --log-level warning --connect-limit off --announce-limit off > "$WORK/tracker.log" 2>&1 &
pids+=($!)
sleep 2

run() { $BIN bench --target "$1" --duration "$DURATION" --concurrency "$CONCURRENCY" --torrents "$TORRENTS" | tail -1; }
ours=$(run 127.0.0.1:16969)
theirs=$(run 127.0.0.1:16970)
echo "tracker:     $ours"
echo "opentracker: $theirs"
rps() { sed -E 's/.*"responses_per_second":([0-9]+).*/\1/' <<<"$1"; }
a=$(rps "$ours"); b=$(rps "$theirs")
awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "ratio tracker/opentracker: %.2f\n", a / b; else print "opentracker gave no responses" }'
