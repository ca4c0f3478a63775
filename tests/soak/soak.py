#!/usr/bin/python3
"""Soak (issue 10): 3 nodes + two ActiveMQ brokers in a network of brokers, `tracker
bench` at about half of the cluster's capacity, and every 20-40 s a random fault:
  node-kill   kill -9 of a random node, restarted 2-5 s later from its SQLite file
  broker-kill kill -9 of a random broker of the pair, restarted 3-5 s later
  freeze      SIGSTOP of a random node for 3 s, then SIGCONT
  disk-full   node 1's store (on a tmpfs) filled for 5 s, then freed
A checker announces new peers one at a time and records every reply per transaction id.
At the end, once the faults have settled (every node back, one master serving that all
follow in one epoch for HOLD_S, within SETTLE_S): no acknowledged announce missing from
any replica, all replicas equal, no process crashed, no request answered twice. Prints
one SOAK line with the counts.

A failing soak keeps its evidence in a folder it names (SOAK_EVIDENCE_DIR, default /tmp):
each node's repository (a consistent copy, taken before node 1's small disk goes), its
/api/node and its log, and the first rows in which the repositories differ.

Usage: soak.py MINUTES [SEED]
"""
import json
import os
import random
import shutil
import sqlite3
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, log, tracker_binary  # noqa: E402

A = "stomp://127.0.0.1:61623"
B = "stomp://127.0.0.1:61633"
LATE_S = 1.0  # a reply later than this after its request counts as late
# The end check waits for the faults to settle: a node restarted from a file of ~50k peers
# restores it within seconds once the load stops, and an election takes 2-3 keepalives.
SETTLE_S = 90.0
HOLD_S = 3.0  # the same master in the same epoch, followed by every node, this long


class SoakFailure(Exception):
    pass


def wait_settled(nodes):
    """Seconds until every node runs and follows one serving master in one epoch, the same
    for HOLD_S; SoakFailure after SETTLE_S."""
    start = time.time()
    office, since, last = None, None, None
    while time.time() < start + SETTLE_S:
        states = [n.api() for n in nodes]
        last = [(n.node_id, s and (s["role"], s["master"], s["epoch"], s["serving"], s["lastCommitted"])) for n, s in zip(nodes, states)]
        masters = [s for s in states if s and s["role"] == "master" and s["serving"]]
        now = time.time()
        if (all(n.alive() for n in nodes) and len(masters) == 1
                and all(s and s["master"] == masters[0]["id"] and s["epoch"] == masters[0]["epoch"] for s in states)):
            key = (masters[0]["id"], masters[0]["epoch"])
            if key != office:
                office, since = key, now
            elif now - since >= HOLD_S:
                return now - start
        else:
            office = None
        time.sleep(0.2)
    raise SoakFailure(f"the cluster did not settle within {SETTLE_S:g} s: {last}")


def table_differences(rows, limit=3):
    """Per table, what each node lacks of the rows any node holds: {table: {node: text}}."""
    out = {}
    for table in ("swarms", "peers", "completions", "last_txid"):
        sets = {node: set(r[table]) if isinstance(r[table], list) else {r[table]} for node, r in rows.items()}
        union = set().union(*sets.values()) if sets else set()
        lacking = {node: f"lacks {len(union - held)} rows, e.g. {sorted(union - held, key=repr)[:limit]}"
                   for node, held in sets.items() if union - held}
        if lacking:
            out[table] = lacking
    return out


def keep_evidence(nodes, seed, reason):
    """Copies what explains a failure off the soak's disks; returns the folder."""
    out = tempfile.mkdtemp(prefix=f"tracker-soak-evidence-{seed}-", dir=os.environ.get("SOAK_EVIDENCE_DIR", "/tmp"))
    rows = {}
    for n in nodes:
        name = f"node{n.node_id}"
        try:
            # SQLite's backup: one consistent state, whatever the node writes meanwhile.
            src = sqlite3.connect(f"file:{n.db}?mode=ro", uri=True, timeout=5)
            dst = sqlite3.connect(os.path.join(out, f"{name}.sqlite"))
            src.backup(dst)
            src.close()
            dst.close()
            rows[name] = n.rows()
        except (sqlite3.Error, OSError) as e:
            rows.pop(name, None)
            print(f"  evidence: {name}'s repository could not be copied: {e}", flush=True)
        with open(os.path.join(out, f"{name}.api.json"), "w") as f:
            json.dump(n.api(timeout=2), f, indent=1)
        try:
            shutil.copy2(n.log_path, os.path.join(out, f"{name}.log"))
        except OSError:
            pass
    differences = table_differences(rows)
    with open(os.path.join(out, "differences.json"), "w") as f:
        json.dump({"reason": reason, "differences": differences}, f, indent=1, default=repr)
    print(f"  evidence kept in {out}", flush=True)
    for table, per_node in differences.items():
        for node, what in per_node.items():
            print(f"  {table}: {node} {what}"[:600], flush=True)
    return out


class Checker(threading.Thread):
    """One announce of a new peer at a time; every reply recorded by transaction id."""

    def __init__(self, target):
        super().__init__(daemon=True)
        self.client = GroupClient(target)
        self.torrent = os.urandom(20)
        self.sent = {}  # tid -> (time, peer or None for a connect)
        self.replies = {}  # tid -> [(time, action, "ip:port" it came from)]
        self.stop_flag = False

    def record(self, window):
        for data, source in self.client.collect(window):
            if len(data) < 8:
                continue
            action, tid = struct.unpack(">II", data[:8])
            self.replies.setdefault(tid, []).append((time.time(), action, f"{source[0]}:{source[1]}"))
            if action == 0 and len(data) == 16 and tid in self.sent and self.sent[tid][1] is None:
                self.client.connection_id = struct.unpack(">Q", data[8:])[0]
            if action == 3 and b"connection" in data[8:]:
                self.client.connection_id = None

    def run(self):
        c = self.client
        port = 10000
        while not self.stop_flag:
            tid = c.tid()
            if c.connection_id is None:
                self.sent[tid] = (time.time(), None)
                c.sock.sendto(struct.pack(">QII", 0x41727101980, 0, tid), c.target)
            else:
                port = port + 1 if port < 60000 else 10000
                peer = os.urandom(20)
                self.sent[tid] = (time.time(), peer)
                c.sock.sendto(c.announce_packet(tid, self.torrent, peer, port), c.target)
            deadline = time.time() + LATE_S
            while time.time() < deadline and tid not in self.replies:
                self.record(0.02)
        self.record(3.0)

    def acked(self):
        return [self.sent[t][1] for t, r in self.replies.items()
                if t in self.sent and self.sent[t][1] is not None and any(a == 1 for _, a, _ in r)]


def bench(target, seconds, concurrency):
    out = subprocess.run([tracker_binary(), "bench", "--target", f"{target[0]}:{target[1]}", "--duration", str(seconds),
                          "--concurrency", str(concurrency), "--torrents", "1000", "--peers-per-torrent", "20"],
                         capture_output=True, text=True, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("responses/s"):
            try:
                return float(line.split()[1]), out.stdout
            except ValueError:
                pass
    return 0.0, out.stdout


def main():
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 2
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    if os.geteuid() != 0:
        fail("the soak mounts a tmpfs for the disk-full fault and must run as root")
    log(f"soak: {minutes:g} minutes, seed {seed}")
    print(activemq("pair-start"))
    mount = tempfile.mkdtemp(prefix="tracker-soak-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mount], check=True)
    cluster = Cluster(f"soak{os.getpid()}", free_udp_port(), broker=f"{A},{B}")
    checker = None
    load = None
    counts = {"node-kill": 0, "broker-kill": 0, "freeze": 0, "disk-full": 0}
    nodes = []
    try:
        nodes = [cluster.add(1, db=os.path.join(mount, "node1.sqlite")), cluster.add(2, broker=f"{B},{A}"), cluster.add(3)]
        cluster.wait_converged(30)
        # Half of capacity: the closed-loop bench at a concurrency whose rate is about half
        # of what a high concurrency gets.
        capacity, _ = bench(cluster.group, 3, 128)
        concurrency, rate = 64, capacity
        while concurrency > 1 and rate > 0.6 * capacity:
            concurrency //= 2
            rate, _ = bench(cluster.group, 2, concurrency)
        log(f"capacity {capacity:.0f} responses/s (concurrency 128); load: concurrency {concurrency} "
            f"≈ {rate:.0f} responses/s ({100 * rate / max(capacity, 1):.0f} %)")
        duration = minutes * 60
        load_result = {}

        def run_load():
            load_result["rate"], load_result["out"] = bench(cluster.group, int(duration) + 10, concurrency)

        load = threading.Thread(target=run_load, daemon=True)
        load.start()
        checker = Checker(cluster.group)
        checker.start()
        start = time.time()
        next_fault = start + rng.uniform(20, 40)
        while time.time() < start + duration:
            if time.time() < next_fault:
                time.sleep(0.2)
                continue
            for n in nodes:
                if not n.alive():
                    raise SoakFailure(f"node {n.node_id} died on its own (exit {n.proc.returncode})")
            kind = rng.choice(sorted(counts))
            counts[kind] += 1
            at = time.time() - start
            if kind == "node-kill":
                n = rng.choice(nodes)
                n.kill9()
                time.sleep(rng.uniform(2, 5))
                n.start()
                log(f"{at:6.1f} s node-kill: node {n.node_id} killed -9 and restarted")
            elif kind == "broker-kill":
                pair = rng.choice("ab")
                activemq("kill", env={"ACTIVEMQ_PAIR": pair})
                time.sleep(rng.uniform(3, 5))
                activemq("start", env={"ACTIVEMQ_PAIR": pair})
                log(f"{at:6.1f} s broker-kill: broker {pair} killed -9 and restarted")
            elif kind == "freeze":
                n = rng.choice(nodes)
                n.proc.send_signal(signal.SIGSTOP)
                time.sleep(3)
                n.proc.send_signal(signal.SIGCONT)
                log(f"{at:6.1f} s freeze: node {n.node_id} stopped for 3 s")
            else:
                filler = os.path.join(mount, "filler")
                st = os.statvfs(mount)
                subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k", f"count={st.f_bavail * st.f_frsize // 65536 + 1}"],
                               capture_output=True)
                time.sleep(5)
                os.remove(filler)
                log(f"{at:6.1f} s disk-full: node 1's store full for 5 s")
            next_fault = time.time() + rng.uniform(20, 40)
        checker.stop_flag = True
        checker.join()
        load.join(timeout=60)
        crashed = [n.node_id for n in nodes if not n.alive()]
        if crashed:
            raise SoakFailure(f"nodes {crashed} are not running at the end")
        settled = wait_settled(nodes)
        log(f"settled {settled:.1f} s after the load ended (bound {SETTLE_S:g} s)")
        try:
            rows = cluster.wait_equal_rows(nodes, timeout=30)
        except SystemExit:
            raise SoakFailure("SQLite repositories differ after 30 s") from None
        stored = {bytes.fromhex(r[1]) for r in rows["peers"] if bytes.fromhex(r[0]) == checker.torrent}
        acked = checker.acked()
        lost = [p for p in acked if p not in stored]
        doubles = {t: r for t, r in checker.replies.items() if len(r) > 1}
        answered = [t for t in checker.sent if checker.replies.get(t)]
        late = [t for t in answered if checker.replies[t][0][0] - checker.sent[t][0] > LATE_S]
        faults = sum(counts.values())
        summary = (f"SOAK minutes={minutes:g} seed={seed} faults={faults} "
                   f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}) requests={len(checker.sent)} "
                   f"answers={len(answered)} late={len(late)} acknowledged={len(acked)} lost={len(lost)} "
                   f"double={len(doubles)} load={load_result.get('rate', 0):.0f}/s replicas=equal crashed=0")
        print(summary, flush=True)
        if lost:
            raise SoakFailure(f"{len(lost)} acknowledged announces are missing from the replicas")
        if doubles:
            # Which node answered: each replies from its own address (group mode).
            senders = {(n.api() or {}).get("replyFrom"): n.node_id for n in nodes}
            raise SoakFailure(f"{len(doubles)} requests were answered more than once, e.g. (transaction, sent at s, "
                 f"[(reply after s, action, node)]) "
                 f"{[(t, round(checker.sent[t][0] - start, 2), [(round(at - checker.sent[t][0], 2), a, senders.get(src, src)) for at, a, src in r]) for t, r in list(doubles.items())[:3]]}")
    except SoakFailure as failure:
        cluster.dump()
        keep_evidence(nodes, seed, str(failure))
        fail(str(failure))
    finally:
        if checker:
            checker.stop_flag = True
        cluster.stop()
        activemq("pair-stop")
        subprocess.run(["umount", "-l", mount], capture_output=True)
        os.rmdir(mount)


if __name__ == "__main__":
    main()
