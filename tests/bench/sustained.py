#!/usr/bin/python3
"""Each cluster node's CPU per response, and its store writer's, window after window of
sustained load: a 3-node cluster with floating addresses (the load goes to the master's)
under `tracker bench`, read from /proc around each window.

Why: the suite measures a cluster for a few seconds at a time, and work a node does now
and then (a peer image every four times its peers in logged rows, a fold, an expiry)
lands in its windows or not by chance; that alone moved the suite's cluster figure by a
quarter from run to run. Over consecutive windows the mean carries that work at its
rate, as a long-running cluster pays it.

Usage: sustained.py [--windows 8] [--seconds 8] [--concurrency 1024]

Not a test: a tool for the performance work (issue 30), run by hand on a quiet machine.
The broker is not measured here (the suite does).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, broker_running, fail, free_udp_port, log, tracker_binary  # noqa: E402
from suite import TORRENTS, cpu_seconds, thread_ids  # noqa: E402


def writer_thread(pid):
    """The thread a node's store writer names `store-writer`."""
    found = thread_ids(pid, "store-writer")
    if not found:
        fail(f"node pid {pid} has no store-writer thread")
    return found[0]


def measure(cluster, master, address, a):
    roles = {n.node_id: "master" if n is master else "follower" for n in cluster.nodes}
    per_node = {n.node_id: ([], []) for n in cluster.nodes}
    rates = []
    for window in range(a.windows):
        writers = {n.node_id: writer_thread(n.proc.pid) for n in cluster.nodes}
        before = {n.node_id: (cpu_seconds(n.proc.pid), cpu_seconds(n.proc.pid, writers[n.node_id])) for n in cluster.nodes}
        out = subprocess.run([tracker_binary(), "bench", "--target", address, "--duration", str(a.seconds),
                              "--concurrency", str(a.concurrency), "--torrents", str(TORRENTS)],
                             capture_output=True, text=True, timeout=a.seconds + 120)
        after = {n.node_id: (cpu_seconds(n.proc.pid), cpu_seconds(n.proc.pid, writers[n.node_id])) for n in cluster.nodes}
        try:
            result = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            fail(f"tracker bench printed no result: {out.stderr.strip()}")
        responses = result["responses"]
        if responses <= 0:
            fail("no responses in a window")
        rates.append(result["responses_per_second"])
        line = f"window {window}: {result['responses_per_second']} resp/s"
        for n in cluster.nodes:
            (c0, w0), (c1, w1) = before[n.node_id], after[n.node_id]
            node_us, writer_us = (c1 - c0) * 1e6 / responses, (w1 - w0) * 1e6 / responses
            per_node[n.node_id][0].append(node_us)
            per_node[n.node_id][1].append(writer_us)
            line += f" | n{n.node_id} {roles[n.node_id]} {node_us:.2f} (writer {writer_us:.2f})"
        log(line)
    print(f"mean over {a.windows} windows of {a.seconds} s at c={a.concurrency}: {statistics.mean(rates):.0f} responses/s")
    total = 0.0
    for n in cluster.nodes:
        node, writer = per_node[n.node_id]
        total += statistics.mean(node)
        print(f"n{n.node_id} {roles[n.node_id]:8s} {statistics.mean(node):6.2f} µs CPU per response "
              f"(writer {statistics.mean(writer):.2f}; windows {min(node):.2f}–{max(node):.2f})")
    print(f"the three nodes together: {total:.2f} µs CPU per response")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--concurrency", type=int, default=1024)
    a = parser.parse_args()
    # The broker an operator runs: the deploy unit's JVM flags, as the suite starts it.
    with broker_running(env={"ACTIVEMQ_JVM": "deploy"}):
        port = free_udp_port()
        cluster = Cluster(f"sustained{os.getpid()}", port)
        try:
            for node_id in (1, 2, 3):
                cluster.add(node_id, peer_args=["--floating", f"127.0.0.{10 + node_id}:{port}"])
            master = cluster.wait_converged(30)
            measure(cluster, master, f"127.0.0.{10 + master.node_id}:{port}", a)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
