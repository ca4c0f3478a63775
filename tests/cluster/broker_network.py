#!/usr/bin/python3
"""Two ActiveMQ brokers joined as a network of brokers (issue 10): nodes spread across
them (`--broker` failover lists in different orders), then each broker in turn is killed
with -9 and restarted.

Checks: the nodes start on different brokers and the cluster still converges (topics are
forwarded between the brokers); while either broker is dead exactly one node serves, no
epoch moves and announces keep being committed (the nodes on the dead broker move to the
other one); every announce acknowledged at any time is in every SQLite file at the end.
"""
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, log  # noqa: E402

A = "stomp://127.0.0.1:61623"
B = "stomp://127.0.0.1:61633"


class Acks(threading.Thread):
    """Announces new peers one after another; keeps those acknowledged, with the time."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self.client = GroupClient(target)
        self.torrent = os.urandom(20)
        self.acked = []  # (time, peer_id)
        self.stop_flag = False

    def run(self):
        port = 10000
        while not self.stop_flag:
            if self.client.connection_id is None and not self.client.connect(0.5):
                continue
            peer = os.urandom(20)
            port = port + 1 if port < 60000 else 10000
            reply, _ = self.client.announce_first(self.torrent, peer, port, timeout=0.5)
            if reply and struct.unpack(">I", reply[:4])[0] == 1:
                self.acked.append((time.time(), peer))
            time.sleep(0.02)


def broker_of(node):
    s = node.api()
    return s and s["broker"].get("connectedTo")


def outage(cluster, master, epochs, flow, pair):
    killed = time.time()
    print(activemq("kill", env={"ACTIVEMQ_PAIR": pair}))
    looks = 0
    while time.time() < killed + 10:
        states = {n.node_id: n.api() for n in cluster.live()}
        serving = sorted(i for i, s in states.items() if s and s["serving"])
        if serving != [master.node_id]:
            cluster.dump()
            fail(f"broker {pair} dead {time.time() - killed:.1f} s: serving nodes {serving}, want [{master.node_id}]")
        moved = {i: s["epoch"] for i, s in states.items() if s and s["epoch"] != epochs[i]}
        if moved:
            cluster.dump()
            fail(f"broker {pair} dead: epochs moved {moved} (were {epochs})")
        looks += 1
        time.sleep(0.25)
    late = [t for t, _ in flow.acked if t > killed + 5]
    if len(late) < 10:
        cluster.dump()
        fail(f"broker {pair} dead: only {len(late)} announces committed 5-10 s after the kill")
    on = {n.node_id: broker_of(n) for n in cluster.live()}
    dead = A if pair == "a" else B
    if any(b == dead for b in on.values()):
        fail(f"a node is still on the dead broker {pair}: {on}")
    times = [t for t, _ in flow.acked if killed - 1 < t < killed + 10]
    gap = max((b - a for a, b in zip(times, times[1:])), default=0)
    print(activemq("start", env={"ACTIVEMQ_PAIR": pair}))
    log(f"broker {pair} killed: {looks} looks, one serving node ({master.node_id}), epochs unchanged, "
        f"longest pause between acknowledged announces {gap:.2f} s, {len(late)} committed 5-10 s after the kill; "
        f"nodes moved to {on}; broker {pair} restarted")
    return gap


def replayed(node):
    """Cluster frames the node dropped as replays so far."""
    return ((node.api() or {}).get("broker") or {}).get("rejectedClusterMessages", {}).get("replayed", 0)


def main():
    print(activemq("pair-start"))
    cluster = Cluster(f"pair{os.getpid()}", free_udp_port(), broker=f"{A},{B}")
    flow = None
    try:
        cluster.add(1)
        cluster.add(2, broker=f"{B},{A}")
        cluster.add(3)
        master = cluster.wait_converged(30)
        deadline = time.time() + 10
        while master.node_id != 3 and time.time() < deadline:
            time.sleep(0.2)
            master = cluster.wait_converged()
        on = {n.node_id: broker_of(n) for n in cluster.live()}
        if on != {1: A, 2: B, 3: A}:
            fail(f"nodes should start spread across the two brokers: {on}")
        epochs = {n.node_id: n.api()["epoch"] for n in cluster.live()}
        log(f"3 nodes on two networked brokers {on}; master {master.node_id}")
        flow = Acks(cluster.group)
        flow.start()
        # Every frame crosses the brokers' link once: none reaches a node twice (without
        # conduit subscriptions each frame of node 2 reached nodes 1 and 3 twice).
        before = {n.node_id: replayed(n) for n in cluster.live()}
        time.sleep(3)
        twice = {n.node_id: replayed(n) - before[n.node_id] for n in cluster.live()}
        if any(twice.values()):
            fail(f"frames reached nodes twice through the broker pair (dropped as replays in 3 s): {twice}")
        log("no frame reached a node twice through the broker pair in 3 s of announces")
        gap_b = outage(cluster, master, epochs, flow, "b")
        time.sleep(3)
        gap_a = outage(cluster, master, epochs, flow, "a")
        time.sleep(3)
        flow.stop_flag = True
        flow.join()
        rows = cluster.wait_equal_rows(cluster.live(), timeout=20)
        stored = {bytes.fromhex(r[1]) for r in rows["peers"]}
        lost = [(t, p) for t, p in flow.acked if p not in stored]
        if lost:
            when = ", ".join(f"{t - flow.acked[-1][0]:+.2f} s" for t, _ in lost[:10])
            fail(f"{len(lost)} of {len(flow.acked)} acknowledged announces are missing from the SQLite files "
                 f"(acknowledged at {when} from the last acknowledgement)")
        log(f"{len(flow.acked)} announces acknowledged across both kills; every one in all 3 SQLite files "
            f"(equal, {len(rows['peers'])} peers)")
        print(f"RESULT broker_network_acked={len(flow.acked)} lost=0 pause_kill_b={gap_b:.2f}s pause_kill_a={gap_a:.2f}s")
    finally:
        if flow:
            flow.stop_flag = True
        cluster.stop()
        activemq("pair-stop")


if __name__ == "__main__":
    main()
