#!/usr/bin/python3
"""HTTP tracker benchmark (issue 63): Debian's opentracker's HTTP listener and `tracker run
--http-tracker` standalone, under the same load from two generators: `tracker bench --http`
(keep-alive connections, one announce in flight on each, one scrape of 5 hashes per 100
requests) and wrk (Debian's HTTP load generator, a Lua script drawing the same torrents and
peers), wrk also with a connection per request (`Connection: close`): opentracker's
listener closes every connection after its answer, so under keep-alive load its figures
include a TCP handshake per response that ours do not. Rounds alternate the targets; each figure is the median over the rounds. For each
target, generator and concurrency it prints responses/s, p50/p99 latency (tracker bench's;
wrk's own) and CPU microseconds per response (utime + stime of the serving process from
/proc), then the ratios the issue asks for: responses/s against opentracker, and CPU per
response against opentracker's.

Usage: http_bench.py [--seconds S] [--rounds N] [--concurrency 64,256] [--threads 1,2] [--smoke] [--json FILE]
"""
# test.sh: quiet machine (it judges throughput, so background builds are frozen while it runs)
import argparse
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, broker_running, fail, free_tcp_port, free_udp_port, tracker_binary  # noqa: E402
from suite import TORRENTS, broker_pid, cpu_seconds  # noqa: E402

PEERS_PER_TORRENT = 20


class Target:
    """A tracker under load: its HTTP port (and UDP address, for the cluster comparison)
    and the processes whose CPU it costs."""

    def __init__(self, name, port, pids, stop, udp=None):
        self.name, self.port, self.pids, self.stop, self.udp = name, port, pids, stop, udp

    def cpu(self):
        return sum(cpu_seconds(p) for p in self.pids)


def info_hashes():
    out = subprocess.run([tracker_binary(), "bench", "--torrents", str(TORRENTS), "--print-info-hashes"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def wait_http(port, timeout=15, host="127.0.0.1"):
    import socket
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    fail(f"nothing listens on 127.0.0.1:{port}")


def start_opentracker(work, hashes):
    if not shutil.which("opentracker"):
        fail("opentracker is not installed (scripts/setup.sh installs it)")
    root = os.path.join(work, "opentracker")
    os.makedirs(root)
    os.chmod(root, 0o755)
    with open(os.path.join(root, "whitelist.txt"), "w") as f:
        f.write("\n".join(hashes) + "\n")
    port = free_tcp_port()
    conf = os.path.join(root, "opentracker.conf")
    with open(conf, "w") as f:
        f.write(f"listen.tcp 127.0.0.1:{port}\nlisten.udp 127.0.0.1:{free_udp_port()}\n"
                f"access.whitelist /whitelist.txt\ntracker.rootdir {root}\n")
    proc = subprocess.Popen(["opentracker", "-f", conf], stdout=open(os.path.join(root, "log"), "w"), stderr=subprocess.STDOUT)
    wait_http(port)
    return Target("opentracker (http)", port, [proc.pid], lambda: (proc.terminate(), proc.wait()))


def start_standalone(work, threads):
    port, udp = free_tcp_port(), free_udp_port()
    args = [tracker_binary(), "run", "--udp", f"127.0.0.1:{udp}", "--http-tracker", f"127.0.0.1:{port}",
            "--log-level", "warning", "--connect-limit", "off", "--announce-limit", "off", "--threads", str(threads),
            "--http-tracker-max-connections", "100000"]
    proc = subprocess.Popen(args, stdout=open(os.path.join(work, f"standalone-{threads}.log"), "w"), stderr=subprocess.STDOUT)
    wait_http(port)
    return Target(f"tracker standalone ({threads} thread{'s' if threads > 1 else ''}, http)", port, [proc.pid],
                  lambda: (proc.terminate(), proc.wait()), udp=f"127.0.0.1:{udp}")


def start_cluster(brokers):
    """Three nodes with floating addresses of their own on loopback (only the master
    receives the load, as where keepalived moves one address), each with its HTTP tracker
    on its floating address's host; the broker an operator runs. CPU: the nodes and the
    broker."""
    brokers.enter_context(broker_running(env={"ACTIVEMQ_JVM": "deploy"}))
    port = free_udp_port()
    cluster = Cluster(f"httpbench{os.getpid()}", port)
    for node_id in (1, 2, 3):
        cluster.add(node_id, peer_args=["--floating", f"127.0.0.{10 + node_id}:{port}"],
                    extra_args=["--http-tracker", f"127.0.0.{10 + node_id}:{port}", "--http-tracker-max-connections", "100000"])
    master = cluster.wait_converged(30)
    wait_http(port, host=f"127.0.0.{10 + master.node_id}")
    target = Target("3-node cluster, floating address (http)", port, [n.proc.pid for n in cluster.nodes] + [broker_pid()],
                    cluster.stop, udp=f"127.0.0.{10 + master.node_id}:{port}")
    target.host = f"127.0.0.{10 + master.node_id}"
    return target


def escaped(hex_hash):
    return "".join(f"%{hex_hash[i:i + 2].upper()}" for i in range(0, 40, 2))


def wrk_script(work, hashes):
    """A Lua script for wrk: each request an announce of a random peer of a random torrent
    (one in 100 a scrape of five), as `tracker bench --http` draws them."""
    path = os.path.join(work, "announce.lua")
    with open(path, "w") as f:
        f.write("local hashes = {\n" + ",\n".join(f'"{escaped(h)}"' for h in hashes) + "\n}\n")
        f.write(f"""
local n = 0
math.randomseed(1)
request = function()
  n = n + 1
  if n % 100 == 0 then
    local parts = {{}}
    for i = 1, 5 do parts[i] = "info_hash=" .. hashes[math.random(#hashes)] end
    return wrk.format("GET", "/scrape?" .. table.concat(parts, "&"))
  end
  local t = math.random(#hashes)
  local p = math.random({PEERS_PER_TORRENT}) - 1
  local id = string.format("-WK0001-%06d%06d", t, p)
  local left = (p % 4 == 0) and 0 or 1048576
  return wrk.format("GET", "/announce?info_hash=" .. hashes[t] .. "&peer_id=" .. id .. "&port=" .. (10000 + p)
    .. "&uploaded=0&downloaded=0&left=" .. left .. "&numwant=50&compact=1")
end
""")
    return path


def measure(target, generator, seconds, concurrency, script):
    before = target.cpu()
    host = getattr(target, "host", "127.0.0.1")
    if generator in ("tracker bench", "tracker bench (udp)"):
        http = generator == "tracker bench"
        address = f"{host}:{target.port}" if http else target.udp
        out = subprocess.run([tracker_binary(), "bench", *(["--http"] if http else []), "--target", address, "--duration", str(seconds),
                              "--concurrency", str(concurrency), "--torrents", str(TORRENTS), "--scrape-every", "100"],
                             capture_output=True, text=True, timeout=seconds + 60)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            fail(f"tracker bench --http against {target.name}: {out.stdout[-400:]} {out.stderr[-400:]}")
        r = json.loads(lines[-1])
        result = {"responses": r["responses"], "rps": r["responses_per_second"], "p50_us": r["p50_us"], "p99_us": r["p99_us"],
                  "failures": r["error_replies"] + r["invalid_replies"] + r["timeouts"]}
    else:
        close = ["-H", "Connection: close"] if generator == "wrk, close" else []
        out = subprocess.run(["wrk", "-t", "1", "-c", str(concurrency), "-d", f"{max(1, round(seconds))}s", "--latency", "-s", script, *close,
                              f"http://{host}:{target.port}"], capture_output=True, text=True, timeout=seconds + 60)
        m = re.search(r"(\d+) requests in ([\d.]+)s", out.stdout)
        if out.returncode != 0 or not m:
            fail(f"wrk against {target.name}: {out.stdout[-400:]} {out.stderr[-400:]}")
        responses, took = int(m.group(1)), float(m.group(2))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out.stdout)

        def latency(p):
            lm = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)", out.stdout, re.M)
            if not lm:
                return 0
            return int(float(lm.group(1)) * {"us": 1, "ms": 1000, "s": 1e6}[lm.group(2)])
        result = {"responses": responses, "rps": int(responses / took), "p50_us": latency(50), "p99_us": latency(99),
                  "failures": int(errors.group(1)) if errors else 0}
    result["cpu_us_per_response"] = (target.cpu() - before) * 1e6 / max(result["responses"], 1)
    return result


def cluster_ratio(standalone, a, script, targets):
    """CPU per announce of a 3-node cluster (nodes and broker) against a standalone node's,
    over UDP and over HTTP, at the highest concurrency: the issue's goal is that HTTP's
    ratio is no worse than UDP's."""
    cluster = start_cluster(brokers)
    targets.append(cluster)
    c = 256
    for t in (standalone, cluster):
        measure(t, "tracker bench (udp)", min(5, a.seconds), c, script)
        measure(t, "tracker bench", min(5, a.seconds), c, script)
    runs = {}
    for _ in range(a.rounds):
        for generator in ("tracker bench (udp)", "tracker bench"):
            for t in (standalone, cluster):
                runs.setdefault((t.name, generator), []).append(measure(t, generator, a.seconds, c, script))
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    out = {}
    print(f"\ncluster against standalone, {c} in flight ({a.seconds:g} s × {a.rounds} rounds, medians; cluster CPU: nodes and broker)")
    for generator, label in (("tracker bench (udp)", "UDP"), ("tracker bench", "HTTP")):
        s, k = med[(standalone.name, generator)], med[(cluster.name, generator)]
        ratio = k["cpu_us_per_response"] / max(s["cpu_us_per_response"], 1e-9)
        out[f"cluster / standalone CPU per response, {label}"] = ratio
        print(f"  {label:4}: standalone {int(s['rps'])}/s at {s['cpu_us_per_response']:.1f} µs, cluster {int(k['rps'])}/s at "
              f"{k['cpu_us_per_response']:.1f} µs per response: {ratio:.2f}×")
    udp, http = out["cluster / standalone CPU per response, UDP"], out["cluster / standalone CPU per response, HTTP"]
    print(f"  HTTP's ratio / UDP's: {http / udp:.2f} (goal ≤ 1.0)")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--smoke", action="store_true", help="a second per measure, one round, 64 connections, keep-alive: it must run")
    parser.add_argument("--cluster", action="store_true",
                        help="also a 3-node cluster: its CPU per announce over HTTP and over UDP, each against standalone's")
    parser.add_argument("--json")
    a = parser.parse_args()
    if a.smoke:
        a.seconds, a.rounds, a.concurrency, a.threads = 1, 1, "64", "1"
    levels = [int(c) for c in a.concurrency.split(",")]
    # "wrk, close": a connection per request, as opentracker's listener (no keep-alive)
    # serves every request anyway: both then pay a TCP handshake per response.
    generators = ["tracker bench"] + (["wrk", "wrk, close"] if shutil.which("wrk") else [])
    if a.smoke:
        generators = generators[:2]
    if not shutil.which("wrk"):
        print("wrk is not installed (scripts/setup.sh installs it): tracker bench --http only", flush=True)
    work = tempfile.mkdtemp(prefix="http-bench-")
    hashes = info_hashes()
    script = wrk_script(work, hashes)
    targets = []
    brokers = contextlib.ExitStack()
    globals()["brokers"] = brokers
    try:
        targets.append(start_opentracker(work, hashes))
        targets += [start_standalone(work, int(t)) for t in a.threads.split(",")]
        # Warm-up: each target's swarms filled once, not counted.
        for t in targets:
            measure(t, "tracker bench", min(3, a.seconds), max(levels), script)
        results = {}
        for _ in range(a.rounds):
            for generator in generators:
                for c in levels:
                    for t in targets:
                        results.setdefault((t.name, generator, c), []).append(measure(t, generator, a.seconds, c, script))
        print(f"\nHTTP tracker benchmark: {TORRENTS} torrents × {PEERS_PER_TORRENT} peers, num_want 50, a scrape per 100 "
              f"requests; {a.seconds:g} s × {a.rounds} rounds (medians)", flush=True)
        print(f"{'target':45} {'generator':16} {'conns':>5} {'responses/s':>12} {'p50 µs':>8} {'p99 µs':>8} {'CPU µs/resp':>12} {'failures':>8}")
        summary = {}
        for (name, generator, c), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            summary[f"{name} / {generator} / {c}"] = med
            print(f"{name:45} {generator:16} {c:>5} {int(med['rps']):>12} {int(med['p50_us']):>8} {int(med['p99_us']):>8} "
                  f"{med['cpu_us_per_response']:>12.1f} {int(med['failures']):>8}")
        for generator in generators:
            for c in levels:
                ot = summary.get(f"opentracker (http) / {generator} / {c}")
                for t in targets[1:]:
                    st = summary.get(f"{t.name} / {generator} / {c}")
                    if ot and st and ot["rps"] and st["cpu_us_per_response"]:
                        print(f"{t.name} / opentracker, {generator}, {c} connections: responses/s {st['rps'] / ot['rps']:.2f}× "
                              f"(goal ≥ 1.0×), CPU per response {st['cpu_us_per_response'] / ot['cpu_us_per_response']:.2f}× (goal ≤ 1.0×)")
        for key, med in summary.items():
            if med["failures"] > med["responses"] * 0.01:
                fail(f"{key}: {int(med['failures'])} failures of {int(med['responses'])} responses")
        if a.cluster:
            summary.update(cluster_ratio(targets[1], a, script, targets))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f, indent=1)
    finally:
        for t in targets:
            t.stop()
        brokers.close()
        shutil.rmtree(work, ignore_errors=True)
    print("PASS http bench", flush=True)


if __name__ == "__main__":
    random.seed(1)
    main()
