#!/usr/bin/python3
"""The nemesis for the real runtime (issue 60): real nodes and brokers in network
namespaces this run creates, faults applied by the kernel on a schedule drawn from a
seed, a client that sends each request once and logs every reply, and checks of what the
client was told against every node's SQLite file.

    nemesis.py --minutes M --seed S [--nodes 3|5] [--quorum live|strict] [--brokers 1|2]
               [--evidence DIR]

The wiring (the faults come from it; docs/nemesis.md):

    peer switch  10.77.0.0/24   bridge, multicast snooping off: node i's eth0 at .(10+i)
                                on port p(10+i), the client at .50; the group
                                239.255.77.1:6969 (the peer network)
    broker switch 10.76.0.0/24  broker a at .2 (port q2), b at .3 (q3) with --brokers 2;
                                node i's eth1 at .(10+i) on port q(10+i)

Each node lists the brokers it may use, its own first (odd ids a, even ids b).

Faults (one to three at a time, each for 2-12 s; a third aimed at the serving master):
  broker-link  node i's broker link, both ways or one way (nft in its namespace, on eth1)
  peer-link    node i's port on the peer switch, both ways or one way (nft, bridge family)
  pair-cut     the peer network between two nodes, both ways (bridge family)
  bridge       1 hears 0 and 2, 0 and 2 do not hear each other on the peer network; with
               two brokers, 0 and 2 are on different brokers and the brokers' link is cut
  ring         five nodes, each hears its two neighbours only (peer network; with two
               brokers, their link cut too)
  send-reject  node i's own firewall drops what it sends on the peer network (EPERM)
  isolate      node i cut from everything
  impair       node i's packets lost, delayed, duplicated and reordered (iptables NFQUEUE
               and nfq_impair: this kernel has no sch_netem)
  pause        SIGSTOP of node i, SIGCONT at the end
  kill         SIGKILL of node i, restarted on the same file at the end
  broker-kill  SIGKILL of a broker, restarted at the end
  disk-full    node i's disk (a 64 MB tmpfs of its own) filled, freed at the end
  broker-pair  the link between the two brokers (--brokers 2)

Checks at the end, after everything is healed:
  - one serving master that every node follows, and equal SQLite files, within
    CONVERGE_BOUND_S;
  - set-full over every node's file: a peer's record carries its last acknowledged
    request or a later one it sent; a peer whose last acknowledged request was a stop
    has no record (or one of a later request); nothing acknowledged is missing;
  - at most one reply per request, outside the windows docs/architecture.md documents ("Requests
    answered twice"), each double reply named by its window;
  - no node process died but those the nemesis killed, and no log holds a crash;
  - the longest silence (no announce answered) per fault kind is reported.

A failing run keeps its evidence (node logs and files, the client's log, the schedule)
under --evidence and prints the command that replays its schedule."""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import Cluster, activemq, fail, log, records_by_peer, repository_rows, set_full  # noqa: E402
from _netns import ip, remove  # noqa: E402

GROUP, PORT = "239.255.77.1", 6969
INFO_HASH = bytes.fromhex("6e656d6573697300000000000000000000000001")
PEERS = 60
CONVERGE_BOUND_S = 30
# A double reply counts against a documented window when the fault that opens it was
# active at the second reply or ended at most this long before it.
WINDOW_S = 3.0
LOST_SLACK_S = 0.5
BROKER_PORT = 61613


def run(*args, check=True):
    out = subprocess.run(list(args), capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def nft(ns, script):
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=script, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"nft in {ns}: {out.stderr.strip()}\n{script}")


class Wiring:
    """The namespaces, bridges and ports; every fault is a rule on one of them."""

    def __init__(self, tag, nodes, brokers):
        self.tag, self.nodes, self.brokers = tag, nodes, brokers
        self.peer_switch, self.broker_switch, self.client = f"{tag}p", f"{tag}q", f"{tag}c"
        self.node_ns = {i: f"{tag}n{i}" for i in range(1, nodes + 1)}
        self.broker_ns = {b: f"{tag}b{b}" for b in "ab"[:brokers]}
        self.broker_ip = {"a": "10.76.0.2", "b": "10.76.0.3"}

    def namespaces(self):
        return [self.client, *self.node_ns.values(), *self.broker_ns.values(), self.peer_switch, self.broker_switch]

    @staticmethod
    def attach(switch_ns, port, ns, dev, address):
        ip("-n", switch_ns, "link", "add", port, "type", "veth", "peer", "name", dev, "netns", ns)
        ip("-n", switch_ns, "link", "set", port, "master", "br0", "up")
        ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
        ip("-n", ns, "link", "set", dev, "up")

    def build(self):
        remove(self.namespaces())
        for sw in (self.peer_switch, self.broker_switch):
            ip("netns", "add", sw)
            ip("-n", sw, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
            ip("-n", sw, "link", "set", "br0", "up")
        for ns in [self.client, *self.node_ns.values(), *self.broker_ns.values()]:
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        self.attach(self.peer_switch, "p50", self.client, "eth0", "10.77.0.50")
        ip("-n", self.client, "route", "add", "224.0.0.0/4", "dev", "eth0")
        for b, ns in self.broker_ns.items():
            self.attach(self.broker_switch, f"q{2 if b == 'a' else 3}", ns, "eth0", self.broker_ip[b])
        for i, ns in self.node_ns.items():
            self.attach(self.peer_switch, f"p{10 + i}", ns, "eth0", f"10.77.0.{10 + i}")
            self.attach(self.broker_switch, f"q{10 + i}", ns, "eth1", f"10.76.0.{10 + i}")
            ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", "eth0")
        # The rules' homes, empty until a fault adds to them.
        for sw in (self.peer_switch, self.broker_switch):
            nft(sw, "table bridge nemesis {\n chain forward {\n type filter hook forward priority 0;\n }\n}\n")
        for ns in self.node_ns.values():
            nft(ns, "table inet nemesis {\n chain input {\n type filter hook input priority 0;\n }\n"
                    " chain output {\n type filter hook output priority 0;\n }\n}\n")

    def broker_of(self, i):
        return "a" if self.brokers == 1 or i % 2 == 1 else "b"

    def broker_url(self, i):
        own = self.broker_of(i)
        order = [own] + [b for b in self.broker_ns if b != own]
        return ",".join(f"stomp://{self.broker_ip[b]}:{BROKER_PORT}" for b in order)


class Fault:
    """One fault: what it does and how it is undone, as rules added under a handle of its
    own (a comment) so that healing removes exactly its rules."""

    def __init__(self, kind, detail, targets, at, duration):
        self.kind, self.detail, self.targets, self.at, self.duration = kind, detail, targets, at, duration
        self.started = self.ended = None
        self.undo = []

    def describe(self):
        return f"{self.kind} {self.detail}".strip()


class Nemesis:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.tag = f"z{os.getpid() % 100000}"
        self.wiring = Wiring(self.tag, args.nodes, args.brokers)
        self.work = tempfile.mkdtemp(prefix=f"nemesis-{args.seed}-")
        self.cluster = None
        self.faults = []          # every fault applied, in order
        self.active = []
        self.killed = set()       # node ids the nemesis killed and has not restarted
        self.broker_down = set()
        self.impair_procs = {}
        self.masters_seen = []    # (time, [serving master ids])
        self.load = None
        self.nfq = os.path.join(self.work, "nfq_impair")
        self.rule_seq = 0
        self.disks = {}

    # --- the cluster ---------------------------------------------------------------

    def broker_env(self, b):
        env = {"ACTIVEMQ_STATE": os.path.join(self.work, f"activemq-{b}"), "ACTIVEMQ_STOMP_HOST": self.wiring.broker_ip[b],
               "ACTIVEMQ_STOMP_PORT": str(BROKER_PORT)}
        if self.args.brokers == 2:
            # a joins b with a duplex network connector on b's OpenWire port.
            if b == "a":
                env["ACTIVEMQ_NETWORK_TO"] = f"{self.wiring.broker_ip['b']}:61634"
            else:
                env["ACTIVEMQ_NETWORK_LISTEN"] = f"{self.wiring.broker_ip['b']}:61634"
        return env

    def start_broker(self, b):
        activemq("start", env=self.broker_env(b), netns=self.wiring.broker_ns[b])

    def start(self):
        run("gcc", "-O2", "-Wall", "-o", self.nfq, os.path.join(HERE, "nfq_impair.c"), "-lnetfilter_queue")
        self.wiring.build()
        for b in ("b", "a")[2 - self.args.brokers:]:
            self.start_broker(b)
        self.cluster = Cluster(f"nemesis{self.args.seed % 100000}", PORT, broker="unused",
                               extra_args=["--quorum", self.args.quorum, "--cluster-size", str(self.args.nodes)])
        for i, ns in self.wiring.node_ns.items():
            # Each node's file on a small disk of its own, which the disk-full fault fills.
            disk = os.path.join(self.work, f"disk{i}")
            os.makedirs(disk)
            run("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", disk)
            self.disks[i] = disk
            self.cluster.add(i, netns=ns, broker=self.wiring.broker_url(i), db=os.path.join(disk, "node.sqlite"),
                             peer_args=["--group", f"{GROUP}:{PORT}", "--interface", "eth0"], http_host=f"10.77.0.{10 + i}")
        self.cluster.wait_converged(60)

    def node(self, i):
        return self.cluster.nodes[i - 1]

    def serving_masters(self):
        out = []
        for n in self.cluster.nodes:
            if n.alive() and n.node_id not in self.paused_ids():
                s = n.api(timeout=0.5)
                if s and s.get("role") == "master" and s.get("serving"):
                    out.append(n.node_id)
        return out

    def paused_ids(self):
        return {f.targets[0] for f in self.active if f.kind == "pause"}

    # --- faults ----------------------------------------------------------------------

    def handle(self):
        self.rule_seq += 1
        return f"f{self.rule_seq}"

    def add_rules(self, fault, ns, family, table, rules):
        """Adds RULES (chain, text) to TABLE in NS, each tagged with the fault's handle."""
        h = self.handle()
        for chain, text in rules:
            nft(ns, f"add rule {family} {table} {chain} {text} comment \"{h}\"")
        fault.undo.append(("rules", ns, family, table, h))

    def remove_rules(self, ns, family, table, h):
        listing = run("ip", "netns", "exec", ns, "nft", "-a", "list", "table", family, table, check=False).stdout
        chain = None
        for line in listing.splitlines():
            line = line.strip()
            if line.startswith("chain "):
                chain = line.split()[1]
            elif f'comment "{h}"' in line and "# handle" in line:
                run("ip", "netns", "exec", ns, "nft", "delete", "rule", family, table, chain, "handle", line.split()[-1], check=False)

    def port_cut(self, fault, i, direction, switch, port):
        rules = []
        if direction in ("both", "in"):
            rules.append(("forward", f"oifname \"{port}\" drop"))
        if direction in ("both", "out"):
            rules.append(("forward", f"iifname \"{port}\" drop"))
        self.add_rules(fault, switch, "bridge", "nemesis", rules)

    def pair_cut(self, fault, a, b):
        self.add_rules(fault, self.wiring.peer_switch, "bridge", "nemesis",
                       [("forward", f"iifname \"p{10 + a}\" oifname \"p{10 + b}\" drop"),
                        ("forward", f"iifname \"p{10 + b}\" oifname \"p{10 + a}\" drop")])

    def brokers_cut(self, fault):
        self.add_rules(fault, self.wiring.broker_switch, "bridge", "nemesis",
                       [("forward", "iifname \"q2\" oifname \"q3\" drop"), ("forward", "iifname \"q3\" oifname \"q2\" drop")])

    def apply(self, fault):
        w, kind, t = self.wiring, fault.kind, fault.targets
        if kind == "broker-link":
            self.port_cut(fault, t[0], fault.detail.split()[-1], w.broker_switch, f"q{10 + t[0]}")
        elif kind == "peer-link":
            self.port_cut(fault, t[0], fault.detail.split()[-1], w.peer_switch, f"p{10 + t[0]}")
        elif kind == "pair-cut":
            self.pair_cut(fault, t[0], t[1])
        elif kind == "bridge":
            self.pair_cut(fault, t[0], t[2])
            if self.args.brokers == 2:
                self.brokers_cut(fault)
        elif kind == "ring":
            n = len(t)
            for x in range(n):
                for y in range(x + 1, n):
                    if (y - x) % n not in (1, n - 1):
                        self.pair_cut(fault, t[x], t[y])
            if self.args.brokers == 2:
                self.brokers_cut(fault)
        elif kind == "send-reject":
            self.add_rules(fault, w.node_ns[t[0]], "inet", "nemesis", [("output", "oifname \"eth0\" meta l4proto udp drop")])
        elif kind == "isolate":
            self.add_rules(fault, w.node_ns[t[0]], "inet", "nemesis",
                           [("input", "iifname != \"lo\" drop"), ("output", "oifname != \"lo\" drop")])
        elif kind == "impair":
            loss, dup, low, high = fault.impairment
            ns, queue = w.node_ns[t[0]], 10 + t[0]
            proc = subprocess.Popen(["ip", "netns", "exec", ns, self.nfq, str(queue), str(loss), str(dup), str(low), str(high),
                                     str(self.rng.getrandbits(32))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            proc.stdout.readline()  # READY
            for rule in (["-A", "OUTPUT", "-m", "mark", "--mark", "0x4e4d", "-j", "ACCEPT"],
                         ["-A", "OUTPUT", "!", "-o", "lo", "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"],
                         ["-A", "INPUT", "!", "-i", "lo", "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]):
                run("ip", "netns", "exec", ns, "iptables", *rule)
            fault.undo.append(("impair", ns, proc))
        elif kind == "pause":
            self.node(t[0]).proc.send_signal(signal.SIGSTOP)
            fault.undo.append(("cont", t[0]))
        elif kind == "kill":
            self.node(t[0]).kill9()
            self.killed.add(t[0])
            fault.undo.append(("restart", t[0]))
        elif kind == "broker-kill":
            b = fault.detail
            activemq("kill", env=self.broker_env(b), netns=w.broker_ns[b])
            self.broker_down.add(b)
            fault.undo.append(("broker", b))
        elif kind == "broker-pair":
            self.brokers_cut(fault)
        elif kind == "disk-full":
            filler = os.path.join(self.disks[t[0]], "filler")
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
            fault.undo.append(("unfill", filler))

    def heal(self, fault):
        for undo in reversed(fault.undo):
            what = undo[0]
            if what == "rules":
                self.remove_rules(*undo[1:])
            elif what == "impair":
                _, ns, proc = undo
                run("ip", "netns", "exec", ns, "iptables", "-F", check=False)
                proc.send_signal(signal.SIGTERM)
                try:
                    fault.impair_report = proc.communicate(timeout=5)[0].strip().splitlines()[-1:]
                except subprocess.TimeoutExpired:
                    proc.kill()
            elif what == "cont":
                self.node(undo[1]).proc.send_signal(signal.SIGCONT)
            elif what == "restart":
                self.node(undo[1]).start()
                self.killed.discard(undo[1])
            elif what == "unfill":
                os.remove(undo[1])
            elif what == "broker":
                self.start_broker(undo[1])
                self.broker_down.discard(undo[1])
        fault.undo = []
        fault.ended = time.time()

    # --- the schedule ------------------------------------------------------------------

    def draw(self, at):
        """The next fault: a kind the wiring allows, its targets (a third of them the
        serving master, resolved when it is applied), its duration."""
        n, rng = self.args.nodes, self.rng
        kinds = ["broker-link", "peer-link", "pair-cut", "bridge", "send-reject", "isolate", "impair", "pause", "kill",
                 "broker-kill", "disk-full"]
        if n == 5:
            kinds.append("ring")
        if self.args.brokers == 2:
            kinds.append("broker-pair")
        kind = rng.choice(kinds)
        duration = rng.uniform(2, 12)
        at_master = rng.random() < 1 / 3
        pick = rng.randrange(1, n + 1)
        detail, targets = "", [pick]
        if kind in ("broker-link", "peer-link"):
            detail = rng.choice(["both", "in", "out"])
        elif kind in ("pair-cut",):
            targets = rng.sample(range(1, n + 1), 2)
        elif kind == "bridge":
            targets = rng.sample(range(1, n + 1), 3)
            if self.args.brokers == 2:
                # The two ends on different brokers, so the cut brokers' link separates them.
                odd = [x for x in range(1, n + 1) if x % 2 == 1]
                even = [x for x in range(1, n + 1) if x % 2 == 0]
                a, c = rng.choice(odd), rng.choice(even)
                middle = rng.choice([x for x in range(1, n + 1) if x not in (a, c)])
                targets = [a, middle, c]
        elif kind == "ring":
            targets = list(range(1, n + 1))
            rng.shuffle(targets)
        elif kind == "broker-kill":
            detail = rng.choice(list(self.wiring.broker_ns))
            at_master = False
        elif kind == "broker-pair":
            at_master = False
        fault = Fault(kind, detail, targets, at, duration)
        fault.at_master = at_master and kind not in ("pair-cut", "bridge", "ring")
        if kind == "impair":
            fault.impairment = (rng.randrange(0, 25), rng.randrange(0, 20), rng.randrange(0, 40), rng.randrange(40, 400))
            fault.detail = "loss {}% dup {}% delay {}-{} ms".format(*fault.impairment)
        return fault

    PROCESS_FAULTS = ("pause", "kill", "isolate", "impair", "send-reject", "disk-full")
    SHAPE_FAULTS = ("broker-kill", "broker-pair", "bridge", "ring")

    def conflicts(self, fault):
        """At most three faults at once; one fault on a node's process or namespace at a
        time; one broker or shape fault at a time; never more than a minority of the nodes
        killed, paused or isolated."""
        if len(self.active) >= 3:
            return True
        if fault.kind in self.PROCESS_FAULTS and any(fault.targets[0] in f.targets for f in self.active):
            return True
        if fault.kind in self.SHAPE_FAULTS and any(f.kind in self.SHAPE_FAULTS for f in self.active):
            return True
        down = {f.targets[0] for f in self.active if f.kind in ("pause", "kill", "isolate")}
        return fault.kind in ("pause", "kill", "isolate") and len(down) + 1 > (self.args.nodes - 1) // 2

    def monitor(self):
        self.masters_seen.append((time.time(), self.serving_masters()))

    def run_schedule(self):
        end = time.time() + self.args.minutes * 60
        next_at = time.time() + self.rng.uniform(2, 6)
        last_monitor = 0
        while time.time() < end:
            now = time.time()
            for f in list(self.active):
                if now >= f.started + f.duration:
                    self.heal(f)
                    self.active.remove(f)
                    log(f"healed {f.describe()} on {f.targets} after {f.ended - f.started:.1f} s")
            for n in self.cluster.nodes:
                if not n.alive() and n.node_id not in self.killed:
                    self.crashed.append((n.node_id, now, n.proc.returncode))
                    log(f"node {n.node_id} died on its own (exit {n.proc.returncode}); restarting it")
                    n.start()
            if now >= next_at:
                fault = self.draw(now)
                next_at = now + self.rng.uniform(3, 10)
                if fault.at_master:
                    masters = self.serving_masters()
                    if masters:
                        fault.targets = [masters[0]]
                    else:
                        fault.at_master = False
                if not self.conflicts(fault):
                    fault.started = time.time()
                    self.apply(fault)
                    self.active.append(fault)
                    self.faults.append(fault)
                    log(f"fault {fault.describe()} on {fault.targets} for {fault.duration:.1f} s"
                            + (" (the serving master)" if fault.at_master else ""))
            if now - last_monitor >= 1.0:
                self.monitor()
                last_monitor = now
            time.sleep(0.1)
        for f in list(self.active):
            self.heal(f)
            self.active.remove(f)
        return time.time()

    # --- the checks ---------------------------------------------------------------------

    def converge(self, healed_at):
        """One serving master followed by all, and equal files; seconds it took."""
        deadline = healed_at + CONVERGE_BOUND_S
        while time.time() < deadline:
            masters = self.serving_masters()
            states = [n.api(timeout=0.5) for n in self.cluster.nodes]
            if len(masters) == 1 and all(s and s.get("master") == masters[0] and s.get("role") in ("master", "slave")
                                         for s in states):
                try:
                    self.cluster.wait_equal_rows(self.cluster.nodes, timeout=max(1.0, deadline - time.time()))
                    return time.time() - healed_at
                except SystemExit:
                    break
            time.sleep(0.2)
        return None

    def read_client_log(self):
        sends, replies = {}, {}
        with open(self.client_log) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a line cut short by the client's end
                if r["k"] in ("s", "c"):
                    sends[r["tid"]] = r
                else:
                    replies.setdefault(r["tid"], []).append(r)
        return sends, replies

    def judge_file(self, rows, sends, replies):
        """Set-full over one file: (acknowledged peers, undone stops, stale, lost)."""
        histories = {}
        for tid, s in sorted(sends.items(), key=lambda kv: kv[1]["t"]):
            if s["k"] == "s":
                ok = any(a["a"] == 1 for a in replies.get(tid, []))
                histories.setdefault(s["p"], []).append((s["seq"], s["ev"], ok))
        records = records_by_peer(rows, INFO_HASH, lambda pid: int.from_bytes(pid[8:], "big") if pid[:8] == b"-NEM001-" else None)
        return set_full(histories, records)

    def active_at(self, t, slack=WINDOW_S):
        return [f for f in self.faults if f.started <= t and (f.ended is None or f.ended + slack >= t)]

    def double_reply_window(self, first, second):
        """The window of docs/architecture.md a request answered twice falls in (or the network's own
        copy of one answer), or None."""
        if first["src"] == second["src"]:
            node = int(first["src"].rsplit(".", 1)[1]) - 10
            copying = [f for f in self.active_at(second["t"], slack=0.5)
                       if f.kind == "impair" and f.targets[0] == node and f.impairment[1] > 0]
            return "a reply the impaired network duplicated" if copying and first.get("h") == second.get("h") else None
        faults = self.active_at(second["t"])
        # Bridges and rings cut the brokers' link only when there are two brokers.
        broker_kinds = ("broker-kill", "broker-link", "isolate") + (("broker-pair", "bridge", "ring") if self.args.brokers == 2 else ())
        broker = [f for f in faults if f.kind in broker_kinds]
        peer = [f for f in faults if f.kind in ("peer-link", "pair-cut", "bridge", "ring", "isolate", "send-reject", "impair")]
        first_node = int(first["src"].rsplit(".", 1)[1]) - 10
        second_node = int(second["src"].rsplit(".", 1)[1]) - 10
        if broker and peer:
            return "two masters that have not heard each other yet"
        # A higher node takes the office over by bully once the broker carries its claim
        # again; the master it replaces serves until it hears that claim (a keepalive on
        # the peer network, or the COORDINATOR once its own link is back).
        if broker and second_node > first_node:
            return "two masters that have not heard each other yet"
        # The first answerer lost from shortly before its answer reached the client (the
        # reply may still be on the wire when the fault begins) to a few seconds after.
        lost = [f for f in self.faults if f.kind in ("kill", "pause", "isolate") and first_node in f.targets
                and -LOST_SLACK_S <= f.started - first["t"] <= WINDOW_S]
        # Killed, its decision may never have left the host: the kernel resets the broker
        # connection of a dead process that had unread data, and drops what it had not
        # sent yet. Otherwise the next master may have been deaf to the broker when the
        # first answered: a fault on the broker link (an impaired node's included) from
        # shortly before the first answer on.
        killed = [f for f in lost if f.kind == "kill"]
        deaf = [f for f in self.faults if f.kind in broker_kinds + ("impair",) and f.started <= second["t"]
                and (f.ended is None or f.ended + WINDOW_S >= first["t"])]
        if lost and (deaf or killed):
            return "a master lost right after answering, its decision unheard on the broker"
        # A lone master in a broker outage: what it decided then (a refusal goes at once
        # in an outage) never reached the broker, and when the broker came back its own
        # link was still cut, so the office went to a node that reached it.
        outage = [f for f in self.faults if f.kind == "broker-kill" and f.started <= first["t"]
                  and (f.ended is None or f.ended + WINDOW_S >= first["t"])]
        cut_off = [f for f in self.faults if f.kind in ("broker-link", "isolate") and first_node in f.targets
                   and f.started <= first["t"] + WINDOW_S and (f.ended is None or f.ended >= first["t"])]
        if outage and cut_off:
            return "a master lost right after answering, its decision unheard on the broker"
        return None

    def silences(self, replies):
        """The longest time without an announce answered OK, per fault kind that was
        active through it."""
        times = sorted(r["t"] for rs in replies.values() for r in rs if r["a"] == 1)
        longest = {}
        for a, b in zip(times, times[1:]):
            gap = b - a
            if gap < 1.0:
                continue
            for f in self.faults:
                if f.started <= b and (f.ended or b) >= a:
                    longest[f.kind] = max(longest.get(f.kind, 0), gap)
        return longest

    def check(self, healed_at):
        problems = []
        # The load stops with the faults: files written to while they are compared never
        # agree at one instant. A request still in flight is answered or given up.
        self.load.send_signal(signal.SIGTERM)
        self.load.wait(10)
        took = self.converge(healed_at)
        if took is None:
            problems.append(f"no single master with equal files within {CONVERGE_BOUND_S} s of the heal")
        sends, replies = self.read_client_log()
        judged = []
        for n in self.cluster.nodes:
            rows = repository_rows(n.db)
            acknowledged, undone, stale, lost = self.judge_file(rows, sends, replies)
            judged.append(acknowledged)
            if undone or stale or lost:
                problems.append(f"node {n.node_id}'s file: {len(undone)} acknowledged stops undone {undone[:3]}, "
                                f"{len(stale)} stale {stale[:3]}, {len(lost)} lost {lost[:3]}")
        doubles, windows = [], {}
        for tid, rs in replies.items():
            if len(rs) > 1:
                window = self.double_reply_window(rs[0], rs[1])
                if window is None:
                    doubles.append((tid, rs[:2]))
                else:
                    windows[window] = windows.get(window, 0) + 1
        if doubles:
            problems.append(f"{len(doubles)} requests answered twice outside the documented windows: {doubles[:3]}")
        for n in self.cluster.nodes:
            crash = [line for line in open(n.log_path, errors="replace") if "Fatal error" in line or "fatalError" in line]
            if crash:
                problems.append(f"node {n.node_id} crashed: {crash[0].strip()}")
        if self.crashed:
            problems.append(f"nodes died on their own: {self.crashed}")
        announces = sum(1 for s in sends.values() if s["k"] == "s")
        answered = sum(1 for t, s in sends.items() if s["k"] == "s" and replies.get(t))
        ok = sum(1 for t, s in sends.items() if s["k"] == "s" and replies.get(t) and replies[t][0]["a"] == 1)
        kinds = {}
        for f in self.faults:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        two_masters = sum(1 for _, m in self.masters_seen if len(m) > 1)
        summary = {
            "seed": self.args.seed, "minutes": self.args.minutes, "nodes": self.args.nodes, "quorum": self.args.quorum,
            "brokers": self.args.brokers, "faults": len(self.faults), "at_master": sum(1 for f in self.faults if f.at_master),
            "kinds": kinds, "announces": announces, "answered": answered, "acknowledged": ok,
            "peers_judged": min(judged) if judged else 0, "double_replies_in_windows": windows,
            "converged_after_s": None if took is None else round(took, 1),
            "longest_silence_s": {k: round(v, 1) for k, v in sorted(self.silences(replies).items())},
            "two_masters_polled": two_masters,
        }
        return problems, summary

    # --- the run ---------------------------------------------------------------------------

    def keep_evidence(self, problems, summary):
        target = os.path.join(self.args.evidence, f"nemesis-{self.args.seed}-{time.strftime('%Y%m%dT%H%M%S')}")
        os.makedirs(self.args.evidence, exist_ok=True)
        shutil.copytree(self.cluster.work, os.path.join(target, "cluster"), dirs_exist_ok=True)
        for i, disk in self.disks.items():
            for name in os.listdir(disk):
                if name.startswith("node.sqlite"):
                    shutil.copy(os.path.join(disk, name), os.path.join(target, "cluster", f"node{i}-{name}"))
        shutil.copy(self.client_log, target)
        for b in self.wiring.broker_ns:
            state = os.path.join(self.work, f"activemq-{b}")
            if os.path.exists(os.path.join(state, "activemq.log")):
                shutil.copy(os.path.join(state, "activemq.log"), os.path.join(target, f"activemq-{b}.log"))
        with open(os.path.join(target, "schedule.json"), "w") as f:
            json.dump([{"kind": x.kind, "detail": x.detail, "targets": x.targets, "at_master": x.at_master,
                        "started": x.started, "ended": x.ended} for x in self.faults], f, indent=1)
        with open(os.path.join(target, "result.json"), "w") as f:
            json.dump({"problems": problems, "summary": summary}, f, indent=1)
        return target

    def main(self):
        if os.geteuid() != 0:
            fail("the nemesis creates network namespaces and must run as root")
        self.crashed = []
        ok = False
        try:
            self.start()
            self.client_log = os.path.join(self.work, "client.jsonl")
            self.load = subprocess.Popen(["ip", "netns", "exec", self.wiring.client, "/usr/bin/python3",
                                          os.path.join(HERE, "_load.py"), GROUP, str(PORT), str(PEERS), self.client_log,
                                          str(self.args.seed), INFO_HASH.hex()])
            log(f"nemesis seed {self.args.seed}: {self.args.nodes} nodes, {self.args.brokers} broker(s), "
                f"quorum {self.args.quorum}, {self.args.minutes} min")
            healed_at = self.run_schedule()
            log("every fault healed; checking")
            problems, summary = self.check(healed_at)
            print("RESULT " + json.dumps(summary, separators=(",", ":")), flush=True)
            if problems:
                target = self.keep_evidence(problems, summary)
                replay = (f"scripts/nemesis.sh {self.args.minutes} {self.args.seed} --nodes {self.args.nodes} "
                          f"--quorum {self.args.quorum} --brokers {self.args.brokers}")
                fail("nemesis found:\n  " + "\n  ".join(problems) + f"\nevidence: {target}\nreplay: {replay}")
            ok = True
        finally:
            for f in list(self.active):
                try:
                    self.heal(f)
                except Exception as e:  # noqa: BLE001 - tearing down whatever is left
                    print(f"heal of {f.describe()} failed: {e}", file=sys.stderr)
            if self.load and self.load.poll() is None:
                self.load.kill()
            if self.cluster:
                if not ok:
                    self.cluster.dump()
                self.cluster.stop()
            for b in self.wiring.broker_ns:
                activemq("stop", env=self.broker_env(b), netns=self.wiring.broker_ns[b])
            remove(self.wiring.namespaces())
            for disk in self.disks.values():
                run("umount", disk, check=False)
            if ok:
                shutil.rmtree(self.work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--nodes", type=int, choices=(3, 5), default=3)
    parser.add_argument("--quorum", choices=("live", "strict"), default="live")
    parser.add_argument("--brokers", type=int, choices=(1, 2), default=1)
    parser.add_argument("--evidence", default=os.path.join(tempfile.gettempdir(), "nemesis-evidence"))
    Nemesis(parser.parse_args()).main()


if __name__ == "__main__":
    main()
