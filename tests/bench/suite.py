#!/usr/bin/python3
"""Benchmark suite (issue 11): Debian's opentracker, `tracker run` standalone and a 3-node
cluster over ActiveMQ under the same `tracker bench` load, in one run on this machine; the
cluster twice: behind a multicast group, and with floating addresses, where only the
master receives peer datagrams.

Load: 10,000 torrents of 20 peers, num_want 50, one scrape (5 hashes) per 100 requests, at
each concurrency level, after a warm-up of each target that is not counted (`--warmup`
seconds at the highest level: a fresh cluster first grows its repository from empty, and
its first seconds cost a fifth more than the next). With a cluster, load then goes on
until the broker's JIT compiler has gone quiet, for at most `--broker-settle` seconds
(`settle_broker`). Rounds alternate the targets (A B C, A B C, …) so that drift of
the machine (thermal, other tenants) spreads over all of them; each figure is the median
over the rounds. For each target and concurrency it prints responses/s, p50/p99 latency,
CPU microseconds per response (utime + stime of the serving processes from /proc, the
broker included for the cluster; for the cluster also by process, and the frames and body
bytes through the broker per response from the nodes' /metrics) and peak RSS (VmHWM),
then the ratios the issue asks for. Opentracker and the standalone node are then measured
again under a second load generator, tests/bench/udpgen.c (plain C, recvmmsg, 4 and 8
sockets, 128 and 512 announces in flight, the same torrents and peers), so that the
standalone ratios do not rest on one generator's own costs. Then
the repository's resident bytes per tracked peer (`tracker bench --memory`: 100,000
swarms of 10 peers, without and with 10 % completions), and the time a node that joins
empty takes to receive a master's 1,000,000 peers (tests/bench/transfer.py).

Usage: suite.py [--seconds S] [--rounds N] [--warmup S] [--broker-settle S] [--concurrency 64,256,1024,2048] [--threads 1,2]
                [--smoke] [--json FILE] [--skip-cluster] [--skip-floating] [--skip-opentracker]
                [--skip-memory] [--skip-transfer] [--skip-udpgen]
"""
# test.sh: quiet machine (it judges latency under load, so background builds are frozen while it runs)
import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, activemq, broker_running, fail, free_tcp_port, free_udp_port, log, tracker_binary  # noqa: E402

TORRENTS = 10000
SCRAPE_EVERY = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid, tid=None):
    """utime + stime of a process and its threads (or of its thread `tid`), in seconds."""
    with open(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# HotSpot's JIT compiler threads ("C1 CompilerThread0", "C2 CompilerThread1", …), which it
# starts and stops as it needs them.
JIT_THREADS = ("C1 Compiler", "C2 Compiler")
# The `tid` of a breakdown line that reads those threads.
JIT = "jit"


def jit_cpu(pid):
    """The JIT compiler threads of the JVM `pid`, by thread id: CPU seconds each."""
    found = {}
    for tid in thread_ids(pid, JIT_THREADS, prefix=True):
        try:
            found[tid] = cpu_seconds(pid, tid)
        except OSError:
            pass  # the thread ended
    return found


def part_cpu(pid, tid):
    """What one line of a breakdown reads: a process, one of its threads, or (tid JIT) the
    JVM's compiler threads by thread id (a thread that ends between two readings leaves
    its CPU out of the difference: the line is then a lower bound)."""
    return jit_cpu(pid) if tid == JIT else cpu_seconds(pid, tid)


def part_delta(before, after):
    if isinstance(after, dict):
        return sum(c - before.get(tid, 0.0) for tid, c in after.items())
    return after - before


def thread_ids(pid, name, prefix=False):
    """The threads of `pid` whose name is `name` (a store writer names its thread), or with
    `prefix`, starts with `name` (a string or a tuple of them)."""
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            if comm.startswith(name) if prefix else comm == name:
                found.append(int(tid))
        except OSError:
            pass
    return found


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Target:
    """A tracker under test: where to send, which processes serve, how to stop them."""

    def __init__(self, name, address, pids, stop, bench_args=(), parts=(), metrics=()):
        self.name, self.address, self.pids, self.stop = name, address, pids, stop
        self.bench_args = list(bench_args)
        # The cluster nodes' /metrics URLs: what crossed the broker, summed over the nodes.
        self.metrics = list(metrics)
        # (label, pid, tid or None): the CPU of each, reported apart (the cluster's
        # master, followers, broker and each node's store writer thread).
        self.parts = list(parts)


BROKER_COUNTERS = ("tracker_broker_frames_sent_total", "tracker_broker_frames_received_total",
                   "tracker_broker_bytes_sent_total", "tracker_broker_bytes_received_total")


def broker_counters(urls):
    """Each node's frames and body bytes to and from the broker, summed over `urls`."""
    totals = dict.fromkeys(BROKER_COUNTERS, 0.0)
    for url in urls:
        with urllib.request.urlopen(url, timeout=5) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name in totals:
                    totals[name] += float(value)
    return totals


def wait_udp(address, seconds=15):
    """Until a BEP 15 connect to address is answered (one `tracker client connect`)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        out = subprocess.run([tracker_binary(), "client", "connect", f"udp://{address}"], capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0:
            return
        time.sleep(0.2)
    fail(f"nothing answers BEP 15 connects on {address}")


def start_opentracker(work, workers):
    """Debian's opentracker is built whitelist-only and chroots into its rootdir."""
    if not shutil.which("opentracker"):
        fail("opentracker is not installed (scripts/bench.sh installs it)")
    root = os.path.join(work, f"opentracker-{workers}")
    os.makedirs(root)
    os.chmod(root, 0o755)  # it drops root after the chroot and must still read the whitelist
    with open(os.path.join(root, "whitelist.txt"), "w") as f:
        f.write(subprocess.run([tracker_binary(), "bench", "--torrents", str(TORRENTS), "--print-info-hashes"],
                               capture_output=True, text=True, check=True).stdout)
    port = free_udp_port()
    conf = os.path.join(root, "opentracker.conf")
    with open(conf, "w") as f:
        f.write(f"listen.udp 127.0.0.1:{port}\nlisten.tcp 127.0.0.1:{free_tcp_port()}\n"
                f"listen.udp.workers {workers}\naccess.whitelist /whitelist.txt\ntracker.rootdir {root}\n")
    proc = subprocess.Popen(["opentracker", "-f", conf], stdout=open(os.path.join(root, "log"), "w"),
                            stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    wait_udp(address)
    return Target(f"opentracker ({workers} udp worker{'s' if workers > 1 else ''})", address, [proc.pid],
                  lambda: (proc.terminate(), proc.wait()))


def start_standalone(work, threads):
    port = free_udp_port()
    args = [tracker_binary(), "run", "--udp", f"127.0.0.1:{port}", "--log-level", "warning",
            "--connect-limit", "off", "--announce-limit", "off"]
    if threads > 1:
        args += ["--threads", str(threads)]
    proc = subprocess.Popen(args, stdout=open(os.path.join(work, f"standalone-{threads}.log"), "w"),
                            stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    wait_udp(address)
    # One source socket lands on one server socket: give the load as many as the server has.
    return Target(f"tracker standalone ({threads} thread{'s' if threads > 1 else ''})", address, [proc.pid],
                  lambda: (proc.terminate(), proc.wait()), bench_args=["--sockets", str(max(threads, 1))])


def broker_pid():
    out = activemq("status")
    # "activemq running (pid N) on …"
    try:
        return int(out.split("pid", 1)[1].split(")", 1)[0])
    except (IndexError, ValueError):
        fail(f"cannot read the broker's pid from: {out}")


def deploy_jvm(pid):
    """Whether the broker runs with full tiered compilation, as the deploy unit starts it,
    rather than the tests' C1 only (a broker that was already running when the suite began:
    CI's)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"-XX:TieredStopAtLevel=1" not in f.read().split(b"\0")
    except OSError:
        return False


def start_cluster(brokers, floating=False):
    """Three nodes behind a multicast group (every node receives every request), or with
    `floating`, each bound to a floating address of its own on loopback, the load sent to
    the master's: as on hosts where keepalived moves one address to the master, only the
    master receives peer datagrams (keepalives then travel on the broker only)."""
    # The broker an operator runs (the deploy unit's heap and full tiered compilation, not
    # the tests' C1 only), unless one runs already; `brokers` stops it at the suite's end.
    brokers.enter_context(broker_running(env={"ACTIVEMQ_JVM": "deploy"}))
    port = free_udp_port()
    cluster = Cluster(f"bench{os.getpid()}{'f' if floating else ''}", port)
    for node_id in (1, 2, 3):
        if floating:
            cluster.add(node_id, peer_args=["--floating", f"127.0.0.{10 + node_id}:{port}"])
        else:
            cluster.add(node_id)
    master = cluster.wait_converged(30)
    address = f"127.0.0.{10 + master.node_id}:{port}" if floating else f"{cluster.group[0]}:{cluster.group[1]}"
    broker = broker_pid()
    pids = [n.proc.pid for n in cluster.nodes] + [broker]
    parts = []
    for n in cluster.nodes:
        role = "master" if n is master else "follower"
        parts.append((f"{role} n{n.node_id}", n.proc.pid, None))
        parts += [(f"  n{n.node_id} store writer", n.proc.pid, tid) for tid in thread_ids(n.proc.pid, "store-writer")]
    parts.append(("broker" if deploy_jvm(broker) else "broker (C1 only)", broker, None))
    parts.append(("  broker JIT compiler", broker, JIT))
    metrics = [f"http://127.0.0.1:{n.http}/metrics" for n in cluster.nodes]
    name = "3-node cluster, floating address" if floating else "3-node cluster (ActiveMQ, SQLite)"
    return Target(name, address, pids, cluster.stop, parts=parts, metrics=metrics), cluster


def measure(target, seconds, concurrency):
    before = {pid: cpu_seconds(pid) for pid in target.pids}
    parts_before = [part_cpu(pid, tid) for _, pid, tid in target.parts]
    broker_before = broker_counters(target.metrics) if target.metrics else None
    out = subprocess.run([tracker_binary(), "bench", "--target", target.address, "--duration", str(seconds),
                          "--concurrency", str(concurrency), "--torrents", str(TORRENTS),
                          "--scrape-every", str(SCRAPE_EVERY), *target.bench_args],
                         capture_output=True, text=True, timeout=seconds + 60)
    after = {pid: cpu_seconds(pid) for pid in target.pids}
    parts_after = [part_cpu(pid, tid) for _, pid, tid in target.parts]
    broker_after = broker_counters(target.metrics) if target.metrics else None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        fail(f"bench against {target.name} failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    result = json.loads(lines[-1])
    cpu = sum(after[p] - before[p] for p in target.pids)
    result["cpu_us_per_response"] = cpu * 1e6 / max(result["responses"], 1)
    result["breakdown_us_per_response"] = {label: part_delta(b, a) * 1e6 / max(result["responses"], 1)
                                           for (label, _, _), b, a in zip(target.parts, parts_before, parts_after)}
    if broker_before:
        # Frames and bytes into the broker (what the nodes sent) and out of it (what they
        # received), per response: the cost of replication the broker carries.
        result["broker_per_response"] = {k: (broker_after[k] - broker_before[k]) / max(result["responses"], 1)
                                          for k in BROKER_COUNTERS}
    return result


def settle_broker(clusters, levels, limit):
    """Load on the clusters, 5 s at a time, in turn and at each concurrency of the rounds
    (each shapes the broker's traffic its own way), until the broker's JIT compiler has
    been quiet (under 2 % of the broker's CPU) for six windows in a row, or for `limit`
    seconds. It compiles in bursts: two quiet windows were followed by a busy one. An
    operator's broker has run for days and compiled its paths long ago, but
    HotSpot's C2 goes on compiling a fresh broker's STOMP paths for a minute or two of
    load (measured: up to 4 µs per response in a window, a seventh of the whole cluster's
    CPU), which the rounds would otherwise count as the cluster's cost. Whatever it still
    compiles during the rounds is counted, and shown (`broker JIT compiler`)."""
    loads = [(target, c) for c in levels for target in clusters]
    start, quiet, turn = time.time(), 0, 0
    while quiet < 6 and time.time() - start < limit:
        target, concurrency = loads[turn % len(loads)]
        turn += 1
        result = measure(target, 5, concurrency)
        breakdown = result["breakdown_us_per_response"]
        broker = next(v for k, v in breakdown.items() if k.startswith("broker"))
        jit = breakdown["  broker JIT compiler"]
        quiet = quiet + 1 if jit < 0.02 * broker else 0
        log(f"broker settling on {target.name}, c={concurrency}: broker {broker:.2f} µs/resp, of which its JIT compiler {jit:.2f} (not counted)")
    if quiet < 6:
        log(f"the broker's JIT compiler was still busy after {limit:.0f} s; the rounds count what it compiles")


# udpgen settings: (sockets, announces in flight over all of them).
UDPGEN_LOADS = ((4, 128), (8, 512))


def build_udpgen(work):
    """Compiles tests/bench/udpgen.c with the system's C compiler (the Swift toolchain's
    clang if there is no other), and writes the workload's info hashes beside it."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        fail("no C compiler for tests/bench/udpgen.c")
    binary = os.path.join(work, "udpgen")
    out = subprocess.run([compiler, "-O2", "-o", binary, os.path.join(HERE, "udpgen.c")], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"udpgen.c does not build: {out.stderr[-800:]}")
    hashes = os.path.join(work, "udpgen-hashes.txt")
    with open(hashes, "w") as f:
        f.write(subprocess.run([tracker_binary(), "bench", "--torrents", str(TORRENTS), "--print-info-hashes"],
                               capture_output=True, text=True, check=True).stdout)
    return binary, hashes


def measure_udpgen(target, udpgen, seconds, sockets, inflight):
    """One run of udpgen against `target`: its JSON line, with the target's CPU per response."""
    binary, hashes = udpgen
    host, port = target.address.rsplit(":", 1)
    before = sum(cpu_seconds(pid) for pid in target.pids)
    out = subprocess.run([binary, host, port, str(sockets), str(max(inflight // sockets, 1)), str(seconds), hashes],
                         capture_output=True, text=True, timeout=seconds + 60)
    after = sum(cpu_seconds(pid) for pid in target.pids)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        fail(f"udpgen against {target.name} failed: {out.stdout[-300:]} {out.stderr[-300:]}")
    result = json.loads(lines[-1])
    if result["error_replies"] + result["invalid_replies"] > result["responses"] // 100:
        fail(f"udpgen against {target.name}: {result}")
    result["cpu_us_per_response"] = (after - before) * 1e6 / max(result["responses"], 1)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=10,
                        help="seconds of load on each target before the rounds, not measured")
    parser.add_argument("--broker-settle", type=float, default=240,
                        help="at most this many seconds of load on the clusters, not measured, until the broker's JIT is quiet")
    parser.add_argument("--concurrency", default="64,256,1024,2048")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run, one round, one concurrency")
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--skip-floating", action="store_true", help="no cluster in floating-address mode")
    parser.add_argument("--skip-opentracker", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-transfer", action="store_true")
    parser.add_argument("--skip-udpgen", action="store_true", help="no second load generator")
    parser.add_argument("--json", help="write every measurement to this file")
    a = parser.parse_args()
    if a.smoke:
        # A smoke run proves every target and generator runs; its figures are not judged,
        # so nothing is warmed up and the second generator runs one load shape.
        a.seconds, a.rounds, a.concurrency, a.threads, a.warmup, a.broker_settle = 1, 1, "256", "1,2", 0, 0
    levels = [int(c) for c in a.concurrency.split(",")]
    threads = [int(t) for t in a.threads.split(",")]
    work = tempfile.mkdtemp(prefix="bench-suite-")
    targets, brokers, cluster = [], contextlib.ExitStack(), None
    targets_stopped = False
    try:
        if not a.skip_opentracker:
            targets += [start_opentracker(work, 1), start_opentracker(work, 2)]
        targets += [start_standalone(work, t) for t in threads]
        clusters = []
        if not a.skip_cluster:
            target, cluster = start_cluster(brokers)
            targets.append(target)
            clusters.append(cluster)
            if not a.skip_floating:
                target, floating = start_cluster(brokers, floating=True)
                targets.append(target)
                clusters.append(floating)
        log(f"{len(targets)} targets, concurrency {levels}, {a.rounds} round(s) of {a.seconds} s each")
        # A fresh cluster's first seconds grow its repository from empty (swarms created,
        # peer images of a small and growing store): a running tracker has that behind it.
        for t in targets if a.warmup > 0 else []:
            result = measure(t, a.warmup, max(levels))
            log(f"warm-up {t.name}: {result['responses_per_second']} resp/s, {result['cpu_us_per_response']:.1f} µs CPU/resp (not counted)")
        if a.broker_settle > 0 and clusters:
            settle_broker([t for t in targets if t.parts], levels, a.broker_settle)
        runs = {}  # (name, concurrency) -> [result]
        for r in range(a.rounds):
            for c in levels:
                for t in targets:
                    result = measure(t, a.seconds, c)
                    runs.setdefault((t.name, c), []).append(result)
                    log(f"round {r + 1} c={c} {t.name}: {result['responses_per_second']} resp/s, "
                        f"p99 {result['p99_us'] / 1000:.1f} ms, {result['cpu_us_per_response']:.1f} µs CPU/resp")
        # The same single trackers under the second generator, alternating as above.
        generated = {}  # (name, sockets, inflight) -> [result]
        single = [t for t in targets if not t.parts]
        if not a.skip_udpgen and any(t.name.startswith("opentracker") for t in single):
            udpgen = build_udpgen(work)
            for r in range(a.rounds):
                for sockets, inflight in UDPGEN_LOADS[:1] if a.smoke else UDPGEN_LOADS:
                    for t in single:
                        result = measure_udpgen(t, udpgen, a.seconds, sockets, inflight)
                        generated.setdefault((t.name, sockets, inflight), []).append(result)
                        log(f"round {r + 1} udpgen {sockets}×{inflight // sockets} {t.name}: {result['responses_per_second']} resp/s, "
                            f"{result['cpu_us_per_response']:.1f} µs CPU/resp")
        rss = {t.name: sum(peak_rss_kib(p) for p in t.pids) for t in targets}
        for t in targets:
            t.stop()
        targets_stopped = True
        memory = [] if a.skip_memory else measure_memory(100000 if not a.smoke else 10000)
        transfer = None if a.skip_transfer else measure_transfer(1_000_000 if not a.smoke else 50_000)
        report(targets, levels, runs, rss, memory, transfer, a.json, generated)
    finally:
        for t in targets if not targets_stopped else []:
            t.stop()
        brokers.close()
        shutil.rmtree(work, ignore_errors=True)


def measure_memory(torrents):
    """Resident bytes per tracked peer: `tracker bench --memory` fills a repository in its
    own process with torrents × 10 peers, without and with 10 % completions."""
    results = []
    for completed in (0, 10):
        out = subprocess.run([tracker_binary(), "bench", "--memory", "--torrents", str(torrents), "--peers-per-torrent", "10",
                              "--completed-percent", str(completed)], capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            fail(f"tracker bench --memory failed: {out.stderr.strip()}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        log(out.stdout.strip().splitlines()[0])
    return results


def measure_transfer(peers):
    """A joining node receiving the master's repository of `peers` peers in peers/10
    swarms (tests/bench/transfer.py): seconds from its start to in sync, and whether the
    cluster then commits with it."""
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "transfer.py"), "--peers", str(peers), "--swarms", str(peers // 10)],
                         capture_output=True, text=True, timeout=900)
    line = next((l for l in out.stdout.splitlines() if l.startswith("TRANSFER ")), None)
    if out.returncode != 0 or line is None:
        fail(f"state transfer benchmark failed: {out.stdout[-800:]} {out.stderr[-400:]}")
    log(line)
    return dict(field.split("=", 1) for field in line.split()[1:])


def median(results, key):
    return statistics.median(r[key] for r in results)


def report(targets, levels, runs, rss, memory, transfer, json_path, generated):
    print(f"\n{'target':44} {'conc':>5} {'resp/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU µs/resp':>11} {'peak RSS MiB':>12}")
    best = {}
    for t in targets:
        for c in levels:
            rs = runs[(t.name, c)]
            rps = median(rs, "responses_per_second")
            cpu = median(rs, "cpu_us_per_response")
            if rps > best.get(t.name, (0, 0, 0))[0]:
                best[t.name] = (rps, cpu, c)
            print(f"{t.name:44} {c:>5} {rps:>8.0f} {median(rs, 'p50_us') / 1000:>7.2f} {median(rs, 'p99_us') / 1000:>7.2f} "
                  f"{cpu:>11.2f} {rss[t.name] / 1024:>12.1f}")
    ot = max((v for k, v in best.items() if k.startswith("opentracker")), default=None)
    st = max((v for k, v in best.items() if k.startswith("tracker standalone")), default=None)
    clusters = [(k, v) for k, v in best.items() if k.startswith("3-node")]
    for t in targets:
        if not t.parts:
            continue
        print(f"\nCPU µs per response, by process ({t.name}, median over the rounds):")
        print(f"{'':24}" + "".join(f"{'c=' + str(c):>10}" for c in levels))
        for label, _, _ in t.parts:
            cells = (statistics.median(r["breakdown_us_per_response"][label] for r in runs[(t.name, c)]) for c in levels)
            print(f"{label:24}" + "".join(f"{cell:>10.2f}" for cell in cells))
        if all("broker_per_response" in r for c in levels for r in runs[(t.name, c)]):
            print("through the broker, per response (every node's frames and body bytes, median over the rounds):")
            for key, label in (("tracker_broker_frames_sent_total", "frames in"), ("tracker_broker_frames_received_total", "frames out"),
                               ("tracker_broker_bytes_sent_total", "bytes in"), ("tracker_broker_bytes_received_total", "bytes out")):
                cells = (statistics.median(r["broker_per_response"][key] for r in runs[(t.name, c)]) for c in levels)
                print(f"{label:24}" + "".join(f"{cell:>10.3f}" if "frames" in key else f"{cell:>10.1f}" for cell in cells))
    if generated:
        print(f"\nunder udpgen (tests/bench/udpgen.c), median over the rounds:")
        print(f"{'target':44} {'load':>9} {'resp/s':>8} {'CPU µs/resp':>11}")
    generated_best = {}
    for (name, sockets, inflight), rs in generated.items():
        rps, cpu = median(rs, "responses_per_second"), median(rs, "cpu_us_per_response")
        if rps > generated_best.get(name, (0, 0))[0]:
            generated_best[name] = (rps, cpu)
        print(f"{name:44} {f'{sockets}×{inflight // sockets}':>9} {rps:>8.0f} {cpu:>11.2f}")
    print()
    if ot and st:
        print(f"standalone / opentracker (best of each): responses/s {st[0] / ot[0]:.2f}× (target ≥ 1.3×), "
              f"CPU per response {st[1] / ot[1]:.2f}× (target ≤ 0.8×)")
    got = max((v for k, v in generated_best.items() if k.startswith("opentracker")), default=None)
    gst = max((v for k, v in generated_best.items() if k.startswith("tracker standalone")), default=None)
    if got and gst:
        print(f"standalone / opentracker under udpgen (best of each): responses/s {gst[0] / got[0]:.2f}× (target ≥ 1.3×), "
              f"CPU per response {gst[1] / got[1]:.2f}× (target ≤ 0.8×)")
    for name, cl in clusters if st else []:
        print(f"{name} / standalone (best of each): responses/s {cl[0] / st[0]:.3f}×, "
              f"CPU per response {cl[1] / st[1]:.2f}× (target ≤ 3.0×; every process, the broker included)")
    for name, _ in clusters:
        # The latency targets: p99 at about half the cluster's best load, p50 at the lightest.
        rps = {c: median(runs[(name, c)], "responses_per_second") for c in levels}
        best_rps = max(rps.values())
        at_half = min(levels, key=lambda c: abs(rps[c] - best_rps / 2))
        lightest = min(levels)
        print(f"{name}: p99 {median(runs[(name, at_half)], 'p99_us') / 1000:.1f} ms at c={at_half} "
              f"({rps[at_half] / best_rps:.2f} of its best responses/s; target ≤ 10 ms at half), "
              f"p50 {median(runs[(name, lightest)], 'p50_us') / 1000:.1f} ms at c={lightest} (target ≤ 7 ms)")
    for m in memory:
        print(f"repository memory: {m['peers']} peers in {m['torrents']} swarms, {m['completed']} completions: "
              f"{m['bytes_per_peer']:.1f} bytes per peer")
    if transfer:
        print(f"state transfer: {transfer['peers']} peers to a joining node in {transfer['transfer']} (from its start to in "
              f"sync), next commit {transfer['next_commit']} later")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"runs": [{"target": k[0], "concurrency": k[1], "results": v} for k, v in runs.items()],
                       "udpgen": [{"target": k[0], "sockets": k[1], "inflight": k[2], "results": v} for k, v in generated.items()],
                       "peak_rss_kib": rss, "memory": memory, "transfer": transfer}, f, indent=1)


if __name__ == "__main__":
    main()
