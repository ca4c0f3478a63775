#!/usr/bin/python3
"""SIGHUP reloads the config file, against 3 real cluster nodes (ActiveMQ, a multicast
group on lo) and a standalone node.

1. Three nodes run with `--config FILE` (interval 1800, no jitter). After announces, the
   file says interval 900 with the default jitter (±10 %), numwant-default 10, log level
   debug (given on the command line too, which wins) and held-requests 100 (a setting
   that needs a restart); every node gets SIGHUP. Announces are answered with intervals
   spread over 810-990 at once, the master and every node's
   epoch are unchanged (nobody left the cluster), /api/config shows 900, and each node's
   log says the reload applied interval and numwant-default, names held-requests as
   needing a restart, and ignores the log level.
2. A file that fails its checks (interval "soon"): SIGHUP changes nothing, the log says
   why, every node keeps running and answering with interval 900.
3. A standalone node with --config: SIGHUP changes the interval in its replies and it
   keeps its swarm (a scrape still counts the peer).
4. A node without --config survives SIGHUP and says there is nothing to reload.
"""
import os
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, fail, free_tcp_port, free_udp_port, http_request, log  # noqa: E402
from common import start_tracker, stop, tracker_binary, wait_for_udp_tracker  # noqa: E402,F401


def interval_of(reply):
    if len(reply) < 20 or struct.unpack(">I", reply[:4])[0] != 1:
        fail(f"not an announce reply: {reply[:20].hex()}")
    return struct.unpack(">I", reply[8:12])[0]


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def wait_log(node_log, needle, since, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(node_log) as f:
            f.seek(since)
            text = f.read()
        if needle in text:
            return text
        time.sleep(0.1)
    with open(node_log) as f:
        f.seek(since)
        fail(f"{node_log} does not say {needle!r} within {timeout}s after the reload:\n{f.read()[-3000:]}")


def hangup_all(cluster, config, text, says):
    """Writes the config file, sends every node SIGHUP; returns each node's log since,
    once it says `says`."""
    write(config, text)
    marks = {n.node_id: os.path.getsize(n.log_path) for n in cluster.nodes}
    for n in cluster.nodes:
        n.proc.send_signal(signal.SIGHUP)
    return {n.node_id: wait_log(n.log_path, says, marks[n.node_id]) for n in cluster.nodes}


def announce_interval(client, info_hash, n):
    replies = client.announce(info_hash, b"-RL0001-" + b"%012d" % n, 7000 + n)
    if len(replies) != 1:
        fail(f"announce {n} got {len(replies)} replies")
    return interval_of(replies[0])


def cluster_reload(work):
    config = os.path.join(work, "tracker.toml")
    write(config, 'interval = 1800\ninterval-jitter = 0\nlog-level = "info"\n')
    cluster = Cluster("reload", free_udp_port(), extra_args=["--config", config])
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
        master = cluster.wait_converged(30)
        client = GroupClient(cluster.group)
        if client.connect() is None:
            fail("no connect reply")
        info_hash = os.urandom(20)
        if announce_interval(client, info_hash, 1) != 1800:
            fail("the first announce is not answered with interval 1800")
        before = {n.node_id: n.api() for n in cluster.nodes}

        # The harness gives --log-level on the command line, which overrides the file.
        logs = hangup_all(cluster, config, 'interval = 900\nnumwant-default = 10\nlog-level = "debug"\nheld-requests = 100\n',
                          "configuration reloaded")
        for n in cluster.nodes:
            text = logs[n.node_id]
            if "applied=interval,interval-jitter,numwant-default" not in text or "restart-needed=held-requests" not in text \
                    or "log-level" in text:
                fail(f"node {n.node_id}'s reload line does not name what applied and what needs a restart:\n{text}")
            if "key=held-requests" not in text:
                fail(f"node {n.node_id} did not name held-requests as needing a restart:\n{text}")
        got = [announce_interval(client, info_hash, 2 + i) for i in range(12)]
        if not all(810 <= g <= 990 for g in got) or len(set(got)) < 4:
            fail(f"after SIGHUP the cluster answers with intervals {got}, not spread over 900 ± 10 %")
        after = {n.node_id: n.api() for n in cluster.nodes}
        for node_id, state in after.items():
            if not cluster.nodes[node_id - 1].alive():
                fail(f"node {node_id} died on SIGHUP")
            if state["epoch"] != before[node_id]["epoch"] or state["master"] != master.node_id:
                fail(f"node {node_id} changed epoch or master on SIGHUP: {before[node_id]['epoch']} -> {state['epoch']}, "
                     f"master {state['master']}")
        status, rows = http_request(master.url("/api/config"))
        if status != 200 or not any(r.get("value") in ("900", "900 s", "900s") for r in rows if "nterval" in r.get("key", "")):
            fail(f"/api/config does not show the new interval: {rows}")
        log(f"SIGHUP on 3 nodes: intervals {min(got)}-{max(got)} (900 ± 10 %) in replies at once, master {master.node_id} and epoch "
            f"{after[master.node_id]['epoch']} unchanged; held-requests named as needing a restart")

        # 2. A bad file changes nothing.
        logs = hangup_all(cluster, config, 'interval = "soon"\n', "config reload failed; nothing changed")
        for n in cluster.nodes:
            text = logs[n.node_id]
            if "interval" not in text:
                fail(f"node {n.node_id}'s refusal does not say which key is wrong:\n{text}")
        time.sleep(0.3)
        if not all(n.alive() for n in cluster.nodes):
            fail("a node died on a bad config file")
        if not 810 <= announce_interval(client, info_hash, 20) <= 990:
            fail("a bad file changed the interval")
        log("a bad file: every node says why and changes nothing")
    finally:
        cluster.stop()


def standalone_reload(work):
    config = os.path.join(work, "standalone.toml")
    port = free_udp_port()
    write(config, f'udp = "127.0.0.1:{port}"\ninterval = 1800\ninterval-jitter = 0\n')
    log_path = os.path.join(work, "standalone.log")
    proc = start_tracker(["--config", config, "--announce-limit", "off", "--connect-limit", "off"], log_path)
    try:
        wait_for_udp_tracker(port)
        client = GroupClient(("127.0.0.1", port))
        if client.connect() is None:
            fail("no connect reply from the standalone node")
        info_hash = os.urandom(20)
        if announce_interval(client, info_hash, 1) != 1800:
            fail("standalone: first interval is not 1800")
        write(config, f'udp = "127.0.0.1:{port}"\ninterval = 600\ninterval-jitter = 0\n')
        mark = os.path.getsize(log_path)
        proc.send_signal(signal.SIGHUP)
        wait_log(log_path, "configuration reloaded", mark)
        if announce_interval(client, info_hash, 2) != 600:
            fail("standalone: SIGHUP did not change the interval")
        counts = client.scrape(info_hash)
        if not counts or counts["seeders"] + counts["leechers"] < 2:
            fail(f"standalone: the swarm was not kept across SIGHUP: {counts}")
        log("standalone: SIGHUP changes the interval to 600 and keeps the swarm")
    finally:
        stop(proc)

    # 4. No --config: nothing to reload, and the process stays.
    port = free_udp_port()
    log_path = os.path.join(work, "plain.log")
    proc = start_tracker(["--udp", f"127.0.0.1:{port}"], log_path)
    try:
        wait_for_udp_tracker(port)
        proc.send_signal(signal.SIGHUP)
        wait_log(log_path, "nothing to reload", 0)
        wait_for_udp_tracker(port, timeout=3)
        log("without --config: SIGHUP is logged and the node serves on")
    finally:
        stop(proc)


def main():
    work = tempfile.mkdtemp(prefix="reload-")
    cluster_reload(work)
    standalone_reload(work)


if __name__ == "__main__":
    main()
    print("PASS reload")
