#!/usr/bin/python3
"""A master stopped (SIGSTOP) for 3 s under load, twice: 3 real nodes + ActiveMQ behind a
group on lo, `tracker bench` at concurrency 32 and a checker announcing one new peer at
a time (the soak's, tests/soak/soak.py).

While it is stopped the others elect a master, which answers; thousands of requests
queue in the stopped node's socket. On waking it steps down, and, being the highest id,
leads again within tens of milliseconds — before it has read that backlog. The soak
caught it answering those requests a second time. Checked: no request answered twice,
nothing acknowledged lost, and the woken node dropped its backlog (its `/api/node`
counts the datagrams).
"""
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "soak"))
from _harness import Cluster, activemq, fail, free_udp_port, log  # noqa: E402
from soak import Checker, bench  # noqa: E402

FREEZES = 2


def main():
    print(activemq("start"))
    cluster = Cluster(f"paused{os.getpid()}", free_udp_port())
    try:
        nodes = [cluster.add(i) for i in (1, 2, 3)]
        cluster.wait_converged(30)
        load = threading.Thread(target=lambda: bench(cluster.group, 13 * FREEZES + 12, 32), daemon=True)
        load.start()
        checker = Checker(cluster.group)
        checker.start()
        for _ in range(FREEZES):
            time.sleep(8)
            master = cluster.wait_converged(30)
            master.proc.send_signal(signal.SIGSTOP)
            time.sleep(3)
            master.proc.send_signal(signal.SIGCONT)
            log(f"master {master.node_id} stopped for 3 s under load, then woken")
        time.sleep(5)
        checker.stop_flag = True
        checker.join()
        cluster.wait_converged(30)
        rows = cluster.wait_equal_rows(cluster.live(), timeout=30)
        stored = {bytes.fromhex(r[1]) for r in rows["peers"] if bytes.fromhex(r[0]) == checker.torrent}
        acked = checker.acked()
        lost = [p for p in acked if p not in stored]
        senders = {(n.api() or {}).get("replyFrom"): n.node_id for n in nodes}
        doubles = {t: [(round(at - checker.sent[t][0], 2), senders.get(src, src)) for at, _, src in r]
                   for t, r in checker.replies.items() if len(r) > 1}
        dropped = {n.node_id: (n.api() or {}).get("backlogDiscarded", 0) for n in nodes}
        # Replies decided just before a freeze and dropped after it (ReplyOutbox): rare,
        # since the freeze must fall between a step and its sending.
        stale = {n.node_id: (n.api() or {}).get("staleRepliesDropped", 0) for n in nodes}
        log(f"{len(checker.sent)} requests, {len(acked)} announces acknowledged, {len(doubles)} answered twice; "
            f"backlog datagrams dropped per node {dropped}; stale replies dropped per node {stale}")
        if doubles:
            cluster.dump()
            fail(f"{len(doubles)} requests were answered twice, e.g. (reply after s, node) {list(doubles.values())[:3]}")
        if lost:
            fail(f"{len(lost)} acknowledged announces are missing from the replicas")
        if sum(dropped.values()) == 0:
            fail("no woken node dropped a backlog: the freeze did not test what it is for")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
