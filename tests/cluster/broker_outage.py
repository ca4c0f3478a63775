#!/usr/bin/python3
"""kill -9 of ActiveMQ in group mode (issue 10): the nodes still hear each other's
keepalives on the peer network (the multicast group on lo), so nobody elects.

While the broker is dead (12 s): every request gets at most one reply (counted per
transaction id), exactly one node serves at every look and no epoch moves; in `live` mode
the master goes on answering announces alone. Then the broker restarts: the slaves
catch up and the three SQLite files are equal again; no node crashed.
Before peer-network keepalives each node was alone: three masters answered every request.
"""
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, log  # noqa: E402

OUTAGE_S = 12


class Requests(threading.Thread):
    """Connect once, then announce new peers without pause, counting every reply per
    transaction id (a reply may come late: replies are collected all along)."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self.client = GroupClient(target)
        self.stop_flag = False
        self.replies = {}  # tid -> [action, ...]
        self.sent = {}  # tid -> (time, kind)
        self.torrent = os.urandom(20)

    def run(self):
        c = self.client
        while not self.stop_flag:
            if c.connection_id is None or len(self.sent) % 50 == 0:
                tid = c.tid()
                self.sent[tid] = (time.time(), "connect")
                c.sock.sendto(struct.pack(">QII", 0x41727101980, 0, tid), c.target)
            elif c.connection_id is not None:
                tid = c.tid()
                self.sent[tid] = (time.time(), "announce")
                c.sock.sendto(c.announce_packet(tid, self.torrent, os.urandom(20), 20000 + len(self.sent) % 1000), c.target)
            for data, _ in c.collect(0.05):
                if len(data) < 8:
                    continue
                action, tid = struct.unpack(">II", data[:8])
                self.replies.setdefault(tid, []).append(action)
                if action == 0 and len(data) == 16 and self.sent.get(tid, (0, ""))[1] == "connect":
                    c.connection_id = struct.unpack(">Q", data[8:])[0]
        for data, _ in c.collect(1.0):
            if len(data) >= 8:
                action, tid = struct.unpack(">II", data[:8])
                self.replies.setdefault(tid, []).append(action)


def main():
    print(activemq("start"))
    cluster = Cluster(f"outage{os.getpid()}", free_udp_port())
    broker_killed = False
    try:
        for i in (1, 2, 3):
            cluster.add(i)
        master = cluster.wait_converged()
        deadline = time.time() + 10
        while master.node_id != 3 and time.time() < deadline:
            time.sleep(0.2)
            master = cluster.wait_converged()
        epochs = {n.node_id: n.api()["epoch"] for n in cluster.live()}
        log(f"3 nodes in group mode; master {master.node_id}; epochs {epochs}")
        flow = Requests(cluster.group)
        flow.start()
        time.sleep(2)
        killed_at = time.time()
        print(activemq("kill"))
        broker_killed = True
        looks = 0
        while time.time() < killed_at + OUTAGE_S:
            states = {n.node_id: n.api() for n in cluster.live()}
            serving = sorted(i for i, s in states.items() if s and s["serving"])
            if serving != [master.node_id]:
                cluster.dump()
                fail(f"{time.time() - killed_at:.1f} s after the broker died, serving nodes are {serving} "
                     f"(want only {master.node_id}); roles {[(i, s and (s['role'], s['epoch'])) for i, s in states.items()]}")
            moved = {i: s["epoch"] for i, s in states.items() if s and s["epoch"] != epochs[i]}
            if moved:
                cluster.dump()
                fail(f"epochs moved while the broker was down: {moved} (were {epochs})")
            looks += 1
            time.sleep(0.25)
        during = [t for t, (at, kind) in flow.sent.items() if killed_at + 1 < at < killed_at + OUTAGE_S - 1]
        answered = [t for t in during if flow.replies.get(t)]
        beacons = {n.node_id: n.api()["beacons"] for n in cluster.live()}
        print(activemq("start"))
        broker_killed = False
        restarted = time.time()
        time.sleep(3)
        flow.stop_flag = True
        flow.join()
        multiple = {t: r for t, r in flow.replies.items() if len(r) > 1}
        if multiple:
            fail(f"{len(multiple)} requests got more than one reply, e.g. {list(multiple.items())[:5]}")
        if len(answered) < len(during) * 0.9:
            fail(f"the master answered {len(answered)} of {len(during)} requests sent while the broker was down")
        crashed = [n.node_id for n in cluster.nodes if not n.alive()]
        if crashed:
            fail(f"nodes {crashed} died")
        new_master = cluster.wait_converged(20)
        rows = cluster.wait_equal_rows(cluster.live(), timeout=20)
        log(f"broker dead {OUTAGE_S} s: {looks} looks, always one serving node ({master.node_id}), epochs unchanged; "
            f"{len(answered)} of {len(during)} requests answered meanwhile, none twice; keepalives heard on the peer network "
            f"{beacons}; broker back: master {new_master.node_id}, SQLite files equal after "
            f"{time.time() - restarted:.1f} s ({len(rows['peers'])} peers, last txid {rows['last_txid']})")
        print(f"RESULT broker_outage_answered={len(answered)}/{len(during)} max_replies_per_request=1")
    finally:
        if broker_killed:
            activemq("start")
        cluster.stop()


if __name__ == "__main__":
    main()
