#!/usr/bin/env bash
# The nemesis for the real runtime (tests/nemesis/nemesis.py, docs/nemesis.md): real
# nodes and brokers in network namespaces, faults applied by the kernel on a seeded
# schedule, a client that sends each request once, set-full over every node's file.
#
#   scripts/nemesis.sh MINUTES [SEED] [--nodes 3|5] [--quorum live|strict] [--brokers 1|2]
#                      [--commit] [--no-record]
#
# SEED defaults to a random one (--commit: one derived from the commit, as CI does, and
# with it the shape unless given). The
# run appends a line to docs/nemesis.md (date, commit, seed, shape, faults, what the client
# was told, the longest silences, the verdict) unless --no-record. A failing run keeps
# its evidence and prints the command that replays its schedule. Needs root; installs
# what it needs (nftables, iptables, libnetfilter-queue-dev, gcc, ActiveMQ) when missing,
# and builds the tracker when TRACKER_BIN is not given.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="" seed="" record=1 args=() from_commit=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes|--quorum|--brokers) args+=("$1" "$2"); shift 2 ;;
    --commit) seed=$(( 0x$(git rev-parse HEAD | cut -c1-8) )); from_commit=1; shift ;;
    --no-record) record=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *)
      [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "nemesis.sh: unknown argument $1" >&2; exit 2; }
      if [ -z "$minutes" ]; then minutes="$1"; elif [ -z "$seed" ]; then seed="$1"; else echo "nemesis.sh: too many numbers" >&2; exit 2; fi
      shift ;;
  esac
done
[ -n "$minutes" ] || { sed -n '2,14p' "$0"; exit 2; }
[ -n "$seed" ] || seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
if [ "$from_commit" = 1 ] && [ "${#args[@]}" = 0 ]; then
  # The shape from the seed too: commits take turns at 3 or 5 nodes, one broker or a
  # pair, live or strict.
  nodes=$(( seed % 2 ? 5 : 3 )); brokers=$(( (seed >> 1) % 2 + 1 )); quorum=$( (( (seed >> 2) % 2 )) && echo strict || echo live)
  args=(--nodes "$nodes" --brokers "$brokers" --quorum "$quorum")
fi
[ "$(id -u)" = 0 ] || { echo "nemesis.sh: needs root (network namespaces, nftables)" >&2; exit 2; }
missing=()
command -v nft >/dev/null || missing+=(nftables)
command -v iptables >/dev/null || missing+=(iptables)
command -v gcc >/dev/null || missing+=(gcc)
[ -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ] || missing+=(libnetfilter-queue-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ -z "${TRACKER_BIN:-}" ]; then
  swift build -c release --product tracker >/dev/null
  export TRACKER_BIN="$PWD/.build/release/tracker"
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
set +e
/usr/bin/python3 tests/nemesis/nemesis.py --minutes "$minutes" --seed "$seed" "${args[@]}" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
if [ "$record" = 1 ]; then
  result=$(grep -m 1 '^RESULT ' "$out" | cut -c8- || true)
  verdict=passed; [ "$status" = 0 ] || verdict=failed
  /usr/bin/python3 - "$result" "$verdict" "$(git rev-parse --short HEAD)" "$seed" "$minutes" "${args[*]}" >> docs/nemesis.md <<'PY'
import json, sys, time
result, verdict, commit, seed, minutes, shape = sys.argv[1:]
r = json.loads(result) if result else {}
def fmt(d):
    return ", ".join(f"{k} {v}" for k, v in d.items()) if d else "none"
print(f"| {time.strftime('%Y-%m-%d')} | {commit} | {seed} | {minutes} | "
      f"{r.get('nodes', '?')} nodes, {r.get('brokers', '?')} broker(s), {r.get('quorum', '?')} | "
      f"{r.get('faults', '?')} ({r.get('at_master', '?')} at the master): {fmt(r.get('kinds', {}))} | "
      f"{r.get('announces', '?')} sent, {r.get('acknowledged', '?')} acknowledged; twice in windows: "
      f"{fmt(r.get('double_replies_in_windows', {}))} | {r.get('converged_after_s', '?')} s | "
      f"{fmt(r.get('longest_silence_s', {}))} | {verdict} |")
PY
fi
exit "$status"
