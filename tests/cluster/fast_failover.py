#!/usr/bin/python3
"""`--keepalive 100ms` end to end: 3 real nodes + ActiveMQ behind a group on lo.

1. 10 s of steady announce traffic: no node misses a keepalive — the epoch does not move
   (a false failure detection would start an election).
2. kill -9 of the master while announces flow: the first answer after the kill comes
   within 0.4 s; everything answered before the kill is on the new master; requests sent
   once right after the kill get exactly one reply (see cluster_loopback.failover).
"""
# test.sh: quiet machine (it judges latency under load, so background builds are frozen while it runs)
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, activemq, fail, free_udp_port, log  # noqa: E402
from cluster_loopback import AnnounceFlow, failover  # noqa: E402

BOUND_S = 0.4
STEADY_S = 10


def steady(cluster):
    before = {n.node_id: n.api()["epoch"] for n in cluster.live()}
    flow = AnnounceFlow(cluster.group)
    flow.start()
    time.sleep(STEADY_S)
    flow.stop_flag = True
    flow.join()
    after = {n.node_id: n.api()["epoch"] for n in cluster.live()}
    if before != after:
        cluster.dump()
        fail(f"the epoch moved under steady load with 100 ms keepalives: {before} -> {after}")
    log(f"{STEADY_S} s of steady load ({len(flow.answered)} announces answered): no election, epoch {after}")


def main():
    print(activemq("start"))
    cluster = Cluster(f"fast{os.getpid()}", free_udp_port(), keepalive="100ms")
    try:
        for i in (1, 2, 3):
            cluster.add(i)
        master = cluster.wait_converged()
        deadline = time.time() + 10
        while master.node_id != 3 and time.time() < deadline:
            time.sleep(0.2)
            master = cluster.wait_converged()
        log(f"3 nodes with 100 ms keepalives; master {master.node_id}")
        steady(cluster)
        failover_s = failover(cluster, master, bound_s=BOUND_S)
        print(f"RESULT failover_seconds_100ms={failover_s:.2f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
