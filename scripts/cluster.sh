#!/usr/bin/env bash
# A local N-node cluster on loopback, for demos: ActiveMQ plus N `tracker run` nodes
# behind the multicast group 239.255.42.99:6969 on lo.
#   scripts/cluster.sh up 3        start the broker and nodes 1..3 (HTTP API on 127.0.0.1:8081..)
#   scripts/cluster.sh status      one line per node, from GET /api/node
#   scripts/cluster.sh kill-master kill -9 the current master (the others elect a new one)
#   scripts/cluster.sh down        stop the nodes cleanly (each empties its database) and the broker
set -euo pipefail
cd "$(dirname "$0")/.."
STATE="${CLUSTER_STATE:-/tmp/tracker-cluster}"
GROUP="${CLUSTER_GROUP:-239.255.42.99:6969}"
HTTP_BASE=8080
BIN="${TRACKER_BIN:-$PWD/.build/release/tracker}"

node_status() {  # $1 = node index
    curl -s -m 1 "http://127.0.0.1:$((HTTP_BASE + $1))/api/node" || true
}

field() {  # $1 = json, $2 = key
    /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ""))' "$1" "$2" 2>/dev/null || true
}

up() {
    local n="${1:-3}"
    [[ "$n" =~ ^[1-9][0-9]?$ ]] || { echo "cluster.sh: up needs a node count (1-99)" >&2; exit 2; }
    if [ ! -x "$BIN" ]; then
        scripts/setup.sh --cluster
        swift build -c release --product tracker
    fi
    # Keys, tokens, repositories and logs (peer addresses) are this user's only.
    umask 077
    mkdir -p "$STATE"
    # The broker: `down` stops it only if `up` started it.
    if ! scripts/activemq.sh status >/dev/null 2>&1; then
        scripts/activemq.sh start
        touch "$STATE/started-activemq"
    fi
    # One key for the whole demo cluster (made once, kept with its state).
    [ -f "$STATE/cluster.key" ] || "$BIN" keygen --output "$STATE/cluster.key"
    # And one dashboard admin token, for this user only (never in the nodes' logs).
    [ -f "$STATE/admin.token" ] || { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; echo; } > "$STATE/admin.token"
    for i in $(seq 1 "$n"); do
        if [ -f "$STATE/node$i.pid" ] && kill -0 "$(cat "$STATE/node$i.pid")" 2>/dev/null; then
            echo "node $i already running"; continue
        fi
        setsid "$BIN" run --id "$i" --group "$GROUP" --interface lo --broker stomp://127.0.0.1:61613 \
            --db "$STATE/node$i.sqlite" --http "127.0.0.1:$((HTTP_BASE + i))" --cluster demo \
            --cluster-key-file "$STATE/cluster.key" --admin-token-file "$STATE/admin.token" \
            >> "$STATE/node$i.log" 2>&1 < /dev/null &
        echo $! > "$STATE/node$i.pid"
    done
    # Wait (bounded) for one serving master.
    for _ in $(seq 1 100); do
        for i in $(seq 1 "$n"); do
            s=$(node_status "$i")
            if [ "$(field "$s" role)" = master ] && [ "$(field "$s" serving)" = True ]; then
                status; echo "peers: udp://$GROUP (send from 127.0.0.1; e.g. tracker client scrape udp://$GROUP INFOHASH)"
                echo "dashboard admin token: in $STATE/admin.token"
                return 0
            fi
        done
        sleep 0.1
    done
    echo "cluster.sh: no serving master after 10 s; logs in $STATE" >&2
    status
    exit 1
}

status() {
    local any=0
    for pidfile in "$STATE"/node*.pid; do
        [ -e "$pidfile" ] || continue
        any=1
        local i; i=$(basename "$pidfile" .pid); i=${i#node}
        local pid; pid=$(cat "$pidfile")
        if ! kill -0 "$pid" 2>/dev/null; then echo "node $i: not running (pid $pid)"; continue; fi
        local s; s=$(node_status "$i")
        printf 'node %s: pid %s, id %s, %s, master %s, epoch %s, last committed %s, http://127.0.0.1:%s/api/node\n' \
            "$i" "$pid" "$(field "$s" id)" "$(field "$s" role)" "$(field "$s" master)" "$(field "$s" epoch)" \
            "$(field "$s" lastCommitted)" "$((HTTP_BASE + i))"
    done
    [ $any = 1 ] || echo "no nodes (start some with: scripts/cluster.sh up 3)"
}

kill_master() {
    for pidfile in "$STATE"/node*.pid; do
        [ -e "$pidfile" ] || continue
        local i; i=$(basename "$pidfile" .pid); i=${i#node}
        local s; s=$(node_status "$i")
        if [ "$(field "$s" role)" = master ]; then
            local pid; pid=$(cat "$pidfile")
            local killed; killed=$(date +%s%N)
            kill -9 "$pid"
            echo "killed -9 node $i (id $(field "$s" id), the master)"
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            rm -f "$pidfile"
            # Wait (bounded) for the next serving master, and say when it came.
            for _ in $(seq 1 100); do
                for other in "$STATE"/node*.pid; do
                    [ -e "$other" ] || continue
                    local j; j=$(basename "$other" .pid); j=${j#node}
                    local t; t=$(node_status "$j")
                    if [ "$(field "$t" role)" = master ] && [ "$(field "$t" serving)" = True ]; then
                        echo "node $j serves, $(( ($(date +%s%N) - killed) / 1000000 )) ms after the kill"
                        return 0
                    fi
                done
                sleep 0.1
            done
            echo "cluster.sh: no serving master 10 s after the kill" >&2
            exit 1
        fi
    done
    echo "cluster.sh: no master found" >&2
    exit 1
}

down() {
    for pidfile in "$STATE"/node*.pid; do
        [ -e "$pidfile" ] || continue
        local pid; pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pidfile in "$STATE"/node*.pid; do
        [ -e "$pidfile" ] || continue
        local pid; pid=$(cat "$pidfile")
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
    if [ -e "$STATE/started-activemq" ]; then
        scripts/activemq.sh stop
        rm -f "$STATE/started-activemq"
    fi
}

case "${1:-}" in
    up) up "${2:-3}" ;;
    status) status ;;
    kill-master) kill_master ;;
    down) down ;;
    *) echo "usage: $0 up N | status | kill-master | down" >&2; exit 2 ;;
esac
