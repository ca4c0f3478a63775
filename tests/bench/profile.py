#!/usr/bin/python3
"""Where a replicated announce's CPU goes: a 3-node cluster over ActiveMQ under `tracker
bench` load, each node sampled by `perf record` meanwhile, then each one's hottest
symbols (self time, children not counted) and its store writer thread's share.

Usage: profile.py [--seconds 10] [--concurrency 256] [--top 25] [--keep DIR] [--floating]

With `--floating` each node binds a floating address of its own and the load goes to the
master's, so the followers' profiles show replication alone, without held datagrams.

Not a test: a tool for the performance work (issue 30), run by hand on a quiet machine.
It needs Debian's `linux-perf` (`perf`) and a release build with symbols (the default).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, broker_running, fail, free_udp_port, log, tracker_binary  # noqa: E402

TORRENTS = 10000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", help="keep the perf data files in this directory")
    parser.add_argument("--floating", action="store_true", help="load the master's floating address, not the group")
    a = parser.parse_args()
    if not shutil.which("perf"):
        fail("perf is not installed (apt-get install linux-perf)")
    work = a.keep or tempfile.mkdtemp(prefix="profile-")
    os.makedirs(work, exist_ok=True)
    with broker_running():
        port = free_udp_port()
        cluster = Cluster(f"profile{os.getpid()}", port)
        try:
            for node_id in (1, 2, 3):
                if a.floating:
                    cluster.add(node_id, peer_args=["--floating", f"127.0.0.{10 + node_id}:{port}"])
                else:
                    cluster.add(node_id)
            master = cluster.wait_converged(30)
            address = f"127.0.0.{10 + master.node_id}:{port}" if a.floating else f"{cluster.group[0]}:{cluster.group[1]}"
            # Warm the swarms first, so the profile is of steady state, not of growth.
            subprocess.run([tracker_binary(), "bench", "--target", address, "--duration", "3", "--concurrency",
                            str(a.concurrency), "--torrents", str(TORRENTS)], capture_output=True, timeout=120)
            records = []
            for n in cluster.nodes:
                role = "master" if n is master else "follower"
                data = os.path.join(work, f"n{n.node_id}-{role}.perf")
                records.append((n, role, data, subprocess.Popen(
                    ["perf", "record", "-F", "1999", "-g", "-p", str(n.proc.pid), "-o", data, "--", "sleep", str(a.seconds)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
            time.sleep(0.3)
            out = subprocess.run([tracker_binary(), "bench", "--target", address, "--duration", str(a.seconds), "--concurrency",
                                  str(a.concurrency), "--torrents", str(TORRENTS)], capture_output=True, text=True,
                                 timeout=a.seconds + 60)
            for *_, proc in records:
                proc.wait(timeout=a.seconds + 60)
            print(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-400:])
            for n, role, data, _ in records:
                print(f"\n=== n{n.node_id} ({role}): hottest symbols, self time")
                report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "symbol",
                                         "--percent-limit", "0.5", "-g", "none"], capture_output=True, text=True, timeout=300)
                lines = [l for l in report.stdout.splitlines() if l.strip() and not l.startswith("#")]
                print("\n".join(lines[:a.top]))
                threads = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "comm",
                                          "-g", "none"], capture_output=True, text=True, timeout=300)
                print("by thread: " + "; ".join(" ".join(l.split()) for l in threads.stdout.splitlines()
                                                if l.strip() and not l.startswith("#")))
            if a.keep:
                log(f"perf data kept in {work}")
        finally:
            cluster.stop()
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
