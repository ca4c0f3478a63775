#!/usr/bin/python3
"""One node's own broker link cut, while the peer network (the multicast group on lo)
still carries its keepalives (issue 60). Four nodes, each reaching ActiveMQ through a
TCP proxy of its own, so one link can be cut alone.

1. Node 4, the highest id, starts with its link cut: it never leads (it hears nobody on
   the broker, not even its own keepalive, while nodes 1-3 do), and the announces the
   cluster acknowledges are on nodes 1-3 alike.
2. Its link heals: it catches up and takes over (bully). Then its link alone is cut
   again while announces flow: a node that reaches the broker serves within the bound,
   and after `kill -9` of node 4 the new master holds every announce acknowledged.
Run once in `live` and once in `strict` mode. Before the rule, node 4 led e1.4 in step 1
and committed alone; in step 2, 20 of 20 announces it acknowledged after the cut were
lost.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, log  # noqa: E402
from _link_proxy import LinkProxy  # noqa: E402

# Failure detection (2 s) plus the reports that show who reaches the broker (one keepalive
# interval), an election and recovery.
HANDOVER_BOUND_S = 8.0


def serving(cluster):
    """The ids of the live nodes that serve now."""
    return sorted(n.node_id for n in cluster.live() if (s := n.api()) and s["serving"])


def announce_peers(client, info_hash, first, count, acked, pause=0.05):
    """Announces `count` new peers (ports first..), one at a time; records the acked ones."""
    for port in range(first, first + count):
        peer_id = port.to_bytes(20, "big")
        replies = client.announce(info_hash, peer_id, port, timeout=0.3)
        if any(r[:4] == b"\x00\x00\x00\x01" for r in replies):
            acked.add(port)
        time.sleep(pause)


def holds(node, info_hash, ports):
    """The acknowledged ports missing from `node`'s SQLite file."""
    have = {row[3] for row in node.rows()["peers"] if row[0] == info_hash.hex()}
    return sorted(set(ports) - have)


def run(quorum):
    cluster = Cluster(f"link{quorum}{os.getpid()}", free_udp_port(),
                      extra_args=["--quorum", quorum, "--cluster-size", "4"])
    proxies = {i: LinkProxy() for i in (1, 2, 3, 4)}
    info_hash = os.urandom(20)
    acked = set()
    try:
        proxies[4].cut()
        nodes = {i: cluster.add(i, broker=proxies[i].url) for i in (1, 2, 3, 4)}
        master = cluster.wait_converged(30)
        if master.node_id != 3:
            fail(f"{quorum}: expected node 3 to lead while node 4's broker link is cut; {master.node_id} leads")
        client = GroupClient(cluster.group)
        if client.connect() is None:
            fail(f"{quorum}: no connect answered by the cluster of nodes 1-3")
        led = []
        for _ in range(10):
            announce_peers(client, info_hash, 20000 + len(acked) + len(led) * 4, 4, acked, pause=0.02)
            if (s := nodes[4].api()) and s["role"] == "master":
                led.append(s["epoch"])
        if led:
            fail(f"{quorum}: node 4 led {led} with its broker link cut")
        if len(acked) < 30:
            fail(f"{quorum}: only {len(acked)} of 40 announces acknowledged by nodes 1-3")
        cluster.wait_equal_rows([nodes[1], nodes[2], nodes[3]])
        for i in (1, 2, 3):
            if missing := holds(nodes[i], info_hash, acked):
                fail(f"{quorum}: node {i} lacks acknowledged announces {missing[:5]}")
        log(f"{quorum}: node 4 cut off at start never led; {len(acked)} announces on nodes 1-3 alike")

        proxies[4].heal()
        deadline = time.time() + 30
        while serving(cluster) != [4] and time.time() < deadline:
            time.sleep(0.2)
        if serving(cluster) != [4]:
            cluster.dump()
            fail(f"{quorum}: node 4 did not take over once its link healed: serving {serving(cluster)}")
        client.connect()
        announce_peers(client, info_hash, 30000, 10, acked)
        log(f"{quorum}: node 4 leads once its link healed; cutting its link alone")
        cut_at = time.time()
        proxies[4].cut()
        handed_over = None
        port = 31000
        while time.time() < cut_at + HANDOVER_BOUND_S + 4:
            announce_peers(client, info_hash, port, 1, acked)
            port += 1
            now_serving = serving(cluster)
            if handed_over is None and now_serving and 4 not in now_serving:
                handed_over = time.time() - cut_at
            if handed_over is not None and time.time() > cut_at + handed_over + 2:
                break
        if handed_over is None or handed_over > HANDOVER_BOUND_S:
            cluster.dump()
            fail(f"{quorum}: no node that reaches the broker served within {HANDOVER_BOUND_S} s of the cut "
                 f"(serving {serving(cluster)})")
        announce_peers(client, info_hash, port, 20, acked)
        nodes[4].kill9()
        rest = [nodes[1], nodes[2], nodes[3]]
        master = cluster.wait_converged(20)
        cluster.wait_equal_rows(rest)
        if missing := holds(master, info_hash, acked):
            fail(f"{quorum}: after kill -9 of node 4, master {master.node_id} lacks {len(missing)} of {len(acked)} "
                 f"acknowledged announces: {missing[:10]}")
        log(f"{quorum}: handed over {handed_over:.1f} s after the cut; after kill -9 of node 4 master "
            f"{master.node_id} holds all {len(acked)} acknowledged announces")
        print(f"RESULT broker_link_handover_seconds_{quorum}={handed_over:.2f}")
    finally:
        cluster.stop()
        for p in proxies.values():
            p.close()


def main():
    print(activemq("start"))
    for quorum in ("live", "strict"):
        run(quorum)


if __name__ == "__main__":
    main()
