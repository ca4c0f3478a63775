#!/usr/bin/env bash
# `tracker bench` against a standalone node and against a local 3-node cluster (ActiveMQ,
# multicast group on lo), same load, same machine, one after the other.
# Usage: scripts/bench-cluster.sh [seconds] [concurrency] [torrents]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_=${1:-10}; CONC=${2:-256}; TORRENTS=${3:-10000}
scripts/setup.sh
swift build -c release --product tracker >/dev/null
BIN=$PWD/.build/release/tracker
WORK=$(mktemp -d /tmp/bench-cluster.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "${started_broker:-0}" = 1 ] && scripts/activemq.sh stop >/dev/null || true
}
trap cleanup EXIT

"$BIN" run --udp 127.0.0.1:6979 --log-level warning --connect-limit off --announce-limit off & pids+=($!)
sleep 1
echo "== standalone node (udp 127.0.0.1:6979)"
standalone=$("$BIN" bench --target 127.0.0.1:6979 --duration "$SECONDS_" --concurrency "$CONC" --torrents "$TORRENTS" | tail -1)
echo "$standalone"
kill -TERM "${pids[0]}"; wait "${pids[0]}" || true; pids=()

scripts/activemq.sh status >/dev/null 2>&1 || { scripts/activemq.sh start; started_broker=1; }
"$BIN" keygen --output "$WORK/cluster.key"
for i in 1 2 3; do
  "$BIN" run --id "$i" --group 239.255.42.99:6979 --interface lo --broker stomp://127.0.0.1:61613 \
    --db "$WORK/n$i.sqlite" --http "127.0.0.1:$((8190 + i))" --cluster "bench$$" --log-level warning \
    --cluster-key-file "$WORK/cluster.key" --connect-limit off --announce-limit off & pids+=($!)
done
for _ in $(seq 1 100); do
  curl -s -m 1 http://127.0.0.1:8193/api/node | grep -q '"serving":true' && break; sleep 0.1
done
echo "== 3-node cluster (group 239.255.42.99:6979 on lo, ActiveMQ, SQLite)"
cluster=$("$BIN" bench --target 239.255.42.99:6979 --duration "$SECONDS_" --concurrency "$CONC" --torrents "$TORRENTS" | tail -1)
echo "$cluster"
sleep 1
for i in 1 2 3; do echo "node $i: $(sqlite3 "$WORK/n$i.sqlite" 'select count(*) from peers' 2>/dev/null || echo '?') peer rows"; done
/usr/bin/python3 - "$standalone" "$cluster" <<'PY'
import json, sys
s, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"standalone {s['responses_per_second']} resp/s (p50 {s['p50_us']/1000:.1f} ms), "
      f"3-node cluster {c['responses_per_second']} resp/s (p50 {c['p50_us']/1000:.1f} ms), "
      f"ratio {c['responses_per_second']/max(s['responses_per_second'],1):.3f}")
PY
