#!/usr/bin/python3
"""State transfer benchmark (issue 11): how long a node that joins empty takes to receive
the master's repository of PEERS peers, and whether the cluster commits with it after.

Node 2 starts on a repository written beforehand (PEERS peers in SWARMS swarms, every
peer announced just now, as SQLite holds them after a crash), becomes master and serves
them. Node 1 then starts empty (a lower id, so that it stays a slave: a higher one
would take over once in sync, as the bully algorithm wants); the clock runs from its
start until its /api/node says it follows node 2 in sync with node 2's last transaction
and its peer count. Then one
announce through the group must be answered, and reach node 2's repository.

Prints one TRANSFER line: the load time of node 1, the transfer time, the master's
resident memory and both processes' CPU seconds.

Usage: transfer.py [--peers 1000000] [--swarms 100000] [--timeout 120]
"""
import argparse
import os
import sqlite3
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("TRACKER_BIN", os.path.join(HERE, "..", "..", ".build", "release", "tracker"))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, GroupClient, broker_running, fail, free_udp_port, log  # noqa: E402
from suite import cpu_seconds, peak_rss_kib  # noqa: E402


def write_repository(path, peers, swarms):
    """A repository as node 2 would have left it: peers, their swarms, one epoch run.
    The tables are SQLiteRepository.createSchema's; a change there must be made here."""
    db = sqlite3.connect(path)
    db.executescript("""
        PRAGMA journal_mode = WAL;
        CREATE TABLE swarms(info_hash TEXT PRIMARY KEY NOT NULL, name TEXT, size INTEGER,
            completed INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE peer_base(info_hash BLOB NOT NULL, peer_id BLOB NOT NULL, ip TEXT NOT NULL,
            port INTEGER NOT NULL, uploaded INTEGER NOT NULL, downloaded INTEGER NOT NULL,
            "left" INTEGER NOT NULL, last_announce INTEGER NOT NULL,
            PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
        CREATE TABLE peer_log(seq INTEGER PRIMARY KEY, rows INTEGER NOT NULL, record BLOB NOT NULL);
        CREATE TABLE completions(info_hash TEXT NOT NULL, peer_id TEXT NOT NULL, ip TEXT NOT NULL,
            PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
        CREATE TABLE cluster_meta(key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
        CREATE TABLE torrents(info_hash TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, file BLOB NOT NULL,
            registered_at INTEGER NOT NULL);
        CREATE TABLE epoch_runs(term INTEGER NOT NULL, master INTEGER NOT NULL, first_txid INTEGER NOT NULL,
            PRIMARY KEY(term, master));
    """)
    now = int(time.time() * 1000)
    per_swarm = peers // swarms

    def rows():
        for s in range(swarms):
            info_hash = s.to_bytes(20, "big")
            for p in range(per_swarm):
                n = s * per_swarm + p
                yield (info_hash, n.to_bytes(20, "big"), f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}",
                       6881 + p, 0, 0, 1000, now)

    db.executemany('INSERT INTO peer_base VALUES (?, ?, ?, ?, ?, ?, ?, ?)', rows())
    db.executemany("INSERT INTO swarms(info_hash, completed) VALUES (?, 0)",
                   ((s.to_bytes(20, "big").hex(),) for s in range(swarms)))
    epoch = (1 << 32) | 2
    db.executemany("INSERT INTO cluster_meta VALUES (?, ?)",
                   [("epoch", epoch), ("last_epoch", epoch), ("last_txid", 1)])
    db.execute("INSERT INTO epoch_runs VALUES (1, 2, 1)")
    db.commit()
    db.close()
    return per_swarm * swarms


def wait(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    fail(f"{what} not within {timeout} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peers", type=int, default=1_000_000)
    parser.add_argument("--swarms", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=120)
    a = parser.parse_args()
    with broker_running():
        cluster = Cluster(f"transfer{os.getpid()}", free_udp_port(), extra_args=["--peer-timeout", "3600"])
        try:
            db2 = os.path.join(cluster.work, "master.sqlite")
            t = time.time()
            peers = write_repository(db2, a.peers, a.swarms)
            log(f"wrote {peers} peers in {a.swarms} swarms in {time.time() - t:.1f} s")

            t = time.time()
            master = cluster.add(2, db=db2)
            status = wait(lambda: (s := master.api(timeout=2)) and s["role"] == "master" and s["serving"] and s, a.timeout,
                          "node 2 serving")
            load = time.time() - t
            if status["peers"] != peers:
                fail(f"node 2 serves {status['peers']} peers, not {peers}")
            log(f"node 2 serves {peers} peers {load:.2f} s after its start")

            master_cpu = cpu_seconds(master.proc.pid)
            t = time.time()
            joiner = cluster.add(1)

            def joined():
                m, s = master.api(timeout=2), joiner.api(timeout=2)
                return (m and s and m["role"] == "master" and s["master"] == 2 and s["inSync"]
                        and s["lastCommitted"] == m["lastCommitted"] and s["peers"] == m["peers"])
            wait(joined, a.timeout, "node 1 in sync with node 2")
            transfer = time.time() - t
            master_cpu = cpu_seconds(master.proc.pid) - master_cpu
            joiner_cpu = cpu_seconds(joiner.proc.pid)
            log(f"node 1 in sync {transfer:.2f} s after its start")

            # The cluster commits with the new member: an announce of a new peer is answered,
            # and node 1 then holds it.
            client = GroupClient(cluster.group)
            if client.connect(timeout=5) is None:
                fail("no connect reply after the transfer")
            t = time.time()
            if not client.announce_first(b"\xee" * 20, b"\xdd" * 20, 7000, timeout=5)[0]:
                fail("no announce reply after the transfer")
            wait(lambda: (s := joiner.api(timeout=2)) and s["peers"] == peers + 1, 10, "the new peer on node 1")
            print(f"TRANSFER peers={peers} swarms={a.swarms} master_load={load:.2f}s transfer={transfer:.2f}s "
                  f"next_commit={time.time() - t:.2f}s master_rss_mib={peak_rss_kib(master.proc.pid) // 1024} "
                  f"joiner_rss_mib={peak_rss_kib(joiner.proc.pid) // 1024} master_cpu={master_cpu:.2f}s "
                  f"joiner_cpu={joiner_cpu:.2f}s", flush=True)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
