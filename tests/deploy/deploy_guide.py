#!/usr/bin/python3
"""Runs docs/operating/deploy.md as written, in network namespaces that act as its hosts.

The blocks the guide marks `<!-- guide-test: ROLE -->` run with `bash -e`: `admin` once
in a secrets directory, `broker` on the broker host, `node` on each tracker host (with
NODE_ID), `check` on each tracker host. Each host is a namespace on one bridge with the
guide's address and a root where the package is unpacked (`dpkg -x`); the guide's
absolute paths (/etc/tracker, /var/lib/tracker, …) are rewritten to that root, and so
are the paths in the package's own /etc/tracker/tracker.toml, which is what installing
into that root would give. `/etc/netns/NS/hosts` names the broker for each host.

What the unmarked `systemctl enable --now` lines start is started as the units say:
tracker.service's ExecStart as the `tracker` user, the broker through
`scripts/activemq.sh` running activemq-tracker.service's ExecStart, and keepalived with
the configuration the guide wrote.

Checked:
1. exactly one node answers /api/health with 200 and its host holds the floating address;
2. libtorrent, aria2 and Transmission each complete a download through
   udp://10.0.0.100:6969 before `kill -9` of the master and after a restart of the broker,
   and through http://10.0.0.100:6969/announce (the HTTP tracker on the floating address)
   before the kill and after it (the failover time is measured with BEP 15 connects sent
   every 50 ms from the moment of the kill);
3. a fourth node given a CA other than the broker's, by the same guide block, refuses
   the broker, says why in /api/node, stays alive and never joins.

Needs root, the package (dist/udp-tracker-cluster_*.deb, from scripts/package.sh; TRACKER_DEB
names another), ActiveMQ, keepalived, transmission-cli, aria2 and python3-libtorrent. The
`tracker` system user is created if missing and removed again at the end."""
import contextlib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import ROOT, activemq, fail, log  # noqa: E402
from _netns import OtherClient, first_reply_after, host, ip, remove, switch  # noqa: E402

GUIDE = os.path.join(ROOT, "docs", "operating", "deploy.md")
TAG = f"g{os.getpid() % 100000}"
SWITCH, BROKER, CLIENT, TRANSMISSION, ARIA2 = f"{TAG}sw", f"{TAG}b", f"{TAG}c", f"{TAG}tr", f"{TAG}ar"
NODES = {1: f"{TAG}n1", 2: f"{TAG}n2", 3: f"{TAG}n3"}
ROGUE_ID, ROGUE = 4, f"{TAG}n4"
ADDRESSES = {BROKER: "10.0.0.2", CLIENT: "10.0.0.50", TRANSMISSION: "10.0.0.51", ARIA2: "10.0.0.52",
             **{ns: f"10.0.0.{10 + i}" for i, ns in NODES.items()}, ROGUE: "10.0.0.14"}
FLOATING, PORT, HTTP = "10.0.0.100", 6969, "127.0.0.1:8081"
# The host paths the guide names, rewritten to a host's root.
HOST_PATHS = ["/etc/tracker", "/etc/keepalived", "/etc/activemq/tracker", "/etc/systemd/system",
              "/var/lib/tracker", "/var/lib/activemq/tracker", "/usr/share/doc/udp-tracker-cluster", "/usr/bin/tracker"]
CLIENT_BOUND_S = 60


def guide_blocks(roles=("admin", "broker", "node", "check")):
    """{role: script} for the blocks the guide marks for a test."""
    text = open(GUIDE).read()
    blocks = {}
    for role, body in re.findall(r"<!-- guide-test: ([\w-]+) -->\n```sh\n(.*?)```", text, re.S):
        blocks[role] = blocks.get(role, "") + body
    for role in roles:
        if role not in blocks:
            fail(f"docs/operating/deploy.md has no block marked guide-test: {role}")
    return blocks


def find_package():
    if os.environ.get("TRACKER_DEB"):
        return os.environ["TRACKER_DEB"]
    debs = sorted(glob.glob(os.path.join(ROOT, "dist", "udp-tracker-cluster_*.deb")), key=os.path.getmtime)
    if not debs:
        fail("no package: run scripts/package.sh first (or give TRACKER_DEB)")
    return debs[-1]


@contextlib.contextmanager
def tracker_user():
    """The package's system user (its postinst makes it on a real host); made here if
    missing, and removed again, with /etc/netns if this made it, when the test ends."""
    created = subprocess.run(["getent", "passwd", "tracker"], capture_output=True).returncode != 0
    if created:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "tracker"], check=True)
    made_netns_dir = not os.path.isdir("/etc/netns")
    try:
        yield
    finally:
        if made_netns_dir:
            shutil.rmtree("/etc/netns", ignore_errors=True)
        if created:
            subprocess.run(["userdel", "tracker"], capture_output=True)


def rewrite(text, root):
    pattern = "|".join(re.escape(p) for p in sorted(HOST_PATHS, key=len, reverse=True))
    return re.sub(rf"(?<![\w./-])({pattern})(?=[/\s\"']|$)", lambda m: root + m.group(1), text, flags=re.M)


def run_block(role, script, ns, root, cwd, extra_env=None):
    env = {**os.environ, "PATH": f"{root}/usr/bin:{os.environ['PATH']}", **(extra_env or {})}
    prefix = ["ip", "netns", "exec", ns] if ns else []
    out = subprocess.run(prefix + ["bash", "-e", "-o", "pipefail", "-c", rewrite(script, root)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        fail(f"the guide's {role} block failed on {ns or 'the admin machine'}:\n{out.stdout}{out.stderr}")
    return out.stdout


def unpack(deb, root):
    """What installing the package into ROOT gives, postinst included."""
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    conf = os.path.join(root, "etc/tracker/tracker.toml")
    # The package's files name the host's paths: here, the root's.
    for path in (conf, os.path.join(root, "usr/share/doc/udp-tracker-cluster/examples/cluster.toml")):
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(rewrite(text, root))
    for path, mode in (("etc/keepalived", 0o755), ("etc/systemd/system", 0o755), ("run", 0o755)):
        os.makedirs(os.path.join(root, path), mode=mode, exist_ok=True)
    state = os.path.join(root, "var/lib/tracker")
    os.makedirs(state, mode=0o700)
    shutil.chown(state, "tracker", "tracker")
    shutil.chown(os.path.join(root, "etc/tracker"), "root", "tracker")
    shutil.chown(conf, "root", "tracker")
    os.chmod(os.path.join(root, "etc/tracker"), 0o750)
    os.chmod(conf, 0o640)
    dropins = os.path.join(root, "etc/tracker/tracker.toml.d")
    shutil.chown(dropins, "root", "tracker")
    os.chmod(dropins, 0o2770)


def broker_host(work, deb, ns, address, copies):
    """A broker host: its root (the package unpacked, for its activemq examples), the
    directory of what was copied to it ({path on the admin machine: name there}), and
    the environment that makes scripts/activemq.sh run what the guide installed."""
    root = os.path.join(work, ns)
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    for path in ("etc/systemd/system", "var/lib/activemq"):
        os.makedirs(os.path.join(root, path), exist_ok=True)
    copied = os.path.join(work, f"{ns}-copied")
    shutil.copytree(os.path.join(root, "usr/share/doc/udp-tracker-cluster/examples/activemq"), os.path.join(copied, "activemq"))
    for source, name in copies.items():
        shutil.copy(source, os.path.join(copied, name))
    env = {"ACTIVEMQ_DEPLOY_CONF": os.path.join(root, "etc/activemq/tracker"),
           "ACTIVEMQ_UNIT": os.path.join(root, "etc/systemd/system/activemq-tracker.service"),
           "ACTIVEMQ_STATE": os.path.join(root, "var/lib/activemq/tracker"),
           "ACTIVEMQ_STOMP_HOST": address}
    return root, copied, env


def exec_start(unit, root):
    """A unit's ExecStart, continuation lines joined, paths rewritten to ROOT."""
    text = open(unit).read().replace("\\\n", " ")
    line = next(row for row in text.splitlines() if row.startswith("ExecStart="))
    return rewrite(line[len("ExecStart="):], root).split()


class TrackerHost:
    def __init__(self, work, node_id, ns, deb, secrets):
        self.node_id, self.ns = node_id, ns
        self.root = os.path.join(work, ns)
        os.makedirs(self.root)
        os.chmod(self.root, 0o755)
        unpack(deb, self.root)
        # The files copied from the admin machine.
        self.copied = os.path.join(work, f"{ns}-copied")
        os.makedirs(self.copied)
        for name in ("cluster.key", "ca.pem", "broker.password", "admin.token"):
            shutil.copy(os.path.join(secrets, name), self.copied)
        self.proc = self.keepalived = None
        self.log_path = os.path.join(work, f"{ns}.log")

    def start(self):
        command = exec_start(os.path.join(self.root, "usr/lib/systemd/system/tracker.service"), self.root)
        env = {**os.environ, "STATE_DIRECTORY": os.path.join(self.root, "var/lib/tracker")}
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "setpriv", "--reuid=tracker", "--regid=tracker",
                                      "--init-groups", "--inh-caps=-all", *command],
                                     cwd="/", env=env, stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT)

    def start_keepalived(self):
        run = os.path.join(self.root, "run")
        self.keepalived = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "keepalived", "--dont-fork", "--log-console", "--vrrp",
             "-f", os.path.join(self.root, "etc/keepalived/keepalived.conf"), "-p", f"{run}/keepalived.pid",
             "-r", f"{run}/vrrp.pid", "-c", f"{run}/checkers.pid"],
            stdout=open(self.log_path + ".keepalived", "a"), stderr=subprocess.STDOUT)

    def get(self, path):
        """(HTTP status, body) of a dashboard path, asked inside the host."""
        out = subprocess.run(["ip", "netns", "exec", self.ns, "curl", "-s", "-m", "2", "-w", "\n%{http_code}",
                              f"http://{HTTP}{path}"], capture_output=True, text=True)
        body, _, code = out.stdout.rpartition("\n")
        return int(code or 0), body

    def node(self):
        code, body = self.get("/api/node")
        return json.loads(body) if code == 200 else None

    def holds_floating(self):
        return FLOATING in ip("-n", self.ns, "-br", "addr", "show", "eth0").stdout

    def stop(self):
        for p in (self.keepalived, self.proc):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def tail(self, n=25):
        out = []
        for path in (self.log_path, self.log_path + ".keepalived"):
            try:
                out.append(f"--- {os.path.basename(path)}\n" + "".join(open(path, errors="replace").readlines()[-n:]))
            except OSError:
                pass
        return "\n".join(out)


def lan(namespaces):
    """The switch and a host per namespace at its table address, each resolving the
    broker's name as the guide's hosts do."""
    remove(namespaces)
    switch(SWITCH)
    used = [ns for ns in ADDRESSES if ns in namespaces]
    for index, ns in enumerate(used):
        host(SWITCH, ns, ADDRESSES[ns], 2 + index)
        os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
        with open(f"/etc/netns/{ns}/hosts", "w") as f:
            f.write(f"127.0.0.1 localhost\n{ADDRESSES[BROKER]} broker.example.net\n")


def admin_and_broker(deb, blocks, work):
    """The admin machine's block (keys, the CA, certificates, passwords), then the broker
    host's, then its broker started. Returns the secrets directory and the broker's
    environment for `activemq`."""
    tools = os.path.join(work, "admin-tools")
    subprocess.run(["dpkg-deb", "-x", deb, tools], check=True)
    secrets = os.path.join(work, "secrets")
    os.makedirs(secrets, mode=0o700)
    run_block("admin", blocks["admin"], None, tools, secrets)
    log(f"admin block: {', '.join(sorted(os.listdir(secrets)))}")
    broot, bcopied, broker_env = broker_host(work, deb, BROKER, ADDRESSES[BROKER], {
        os.path.join(secrets, name): name for name in ("broker.p12", "keystore.password", "broker.password")})
    run_block("broker", blocks["broker"], BROKER, broot, bcopied)
    log(activemq("start", env=broker_env, netns=BROKER))
    return secrets, broker_env


def tear_down_hosts(hosts, ok, brokers, namespaces, work):
    """Stops every node (printing its log's tail on failure) and each (env, namespace)
    broker, removes the namespaces and, on success, the work directory."""
    for h in hosts:
        if not ok:
            print(h.tail())
        h.stop()
    for env, ns in brokers:
        activemq("stop", env=env, netns=ns)
    remove(namespaces)
    for ns in namespaces:
        shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
    if ok:
        shutil.rmtree(work, ignore_errors=True)


def serving_master(hosts, timeout):
    """The one host whose node answers /api/health with 200 and holds the address."""
    deadline = time.time() + timeout
    seen = None
    while time.time() < deadline:
        healthy = [h for h in hosts if h.proc.poll() is None and h.get("/api/health")[0] == 200]
        holders = [h for h in hosts if h.holds_floating()]
        seen = ([h.node_id for h in healthy], [h.node_id for h in holders])
        if len(healthy) == 1 and holders == healthy:
            return healthy[0]
        time.sleep(0.2)
    for h in hosts:
        print(h.tail())
    fail(f"no single serving master holding {FLOATING} within {timeout} s (healthy, holders): {seen}")


def kill_master(master, hosts):
    """`kill -9` of the master's node: seconds until a client's connect through the
    floating address is answered, and the host that serves then."""
    killed = time.time()
    master.proc.kill()
    master.proc.wait()
    failover = first_reply_after(CLIENT, FLOATING, PORT, killed)
    if failover is None:
        fail("no reply through the floating address within 30 s of the master's kill")
    return failover, serving_master([h for h in hosts if h is not master], 20)


class Downloads:
    """A libtorrent seeder in the client host, of a torrent announcing to `url`, and a
    round of three leechers."""

    def __init__(self, url, base_port):
        self.url = url
        self.peer = subprocess.Popen(["ip", "netns", "exec", CLIENT, "/usr/bin/python3",
                                      os.path.join(ROOT, "tests", "cluster", "_lt_vip_peer.py"),
                                      ADDRESSES[CLIENT], url, str(base_port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.peer.stdout.readline().split()
        if not ready or ready[0] != "READY":
            fail(f"libtorrent helper did not start: {ready}")
        self.torrent, self.sha1 = ready[2], ready[3]

    def round(self, label, hosts):
        """libtorrent, Transmission and aria2 started together; each must finish."""
        self.peer.stdin.write("leech\n")
        self.peer.stdin.flush()
        others = [OtherClient("transmission", TRANSMISSION, self.torrent, self.sha1),
                  OtherClient("aria2", ARIA2, self.torrent, self.sha1)]
        try:
            answer = self.peer.stdout.readline().strip()
            if not answer.startswith("DONE"):
                for h in hosts:
                    print(h.tail())
                fail(f"{label}: libtorrent: {answer or 'helper died'}")
            times = {"libtorrent": float(answer.split()[1])}
            deadline = others[0].started + CLIENT_BOUND_S
            while time.time() < deadline and not all([c.poll() for c in others]):
                time.sleep(0.2)
            for c in others:
                if not c.poll():
                    for h in hosts:
                        print(h.tail())
                    fail(f"{label}: {c.name} did not complete within {CLIENT_BOUND_S} s; its log:\n{c.tail()}")
                times[c.name] = c.done_after
        finally:
            for c in others:
                c.stop()
                shutil.rmtree(c.work, ignore_errors=True)
        log(f"{label} through {self.url}: " + ", ".join(f"{name} {t:.1f} s" for name, t in times.items()))
        return times

    def stop(self):
        self.peer.kill()
        self.peer.wait()


def run_unicast(deb, blocks, work):
    """The guide's variant for networks that drop multicast: the bridge drops every
    multicast frame, each node runs the node block then the node-unicast block, and
    keepalived speaks VRRP over unicast. One node serves and holds the address; a client
    is answered through it before and after `kill -9` of the master; no node hears a
    keepalive on the peer network (none could cross)."""
    namespaces = [CLIENT, BROKER, *NODES.values(), SWITCH]
    broker_env = None
    hosts = []
    ok = False
    try:
        lan(namespaces)
        # Every multicast frame dropped at the switch: VRRP's 224.0.0.18 and the group.
        for command in (["add", "table", "bridge", "nomcast"],
                        ["add", "chain", "bridge", "nomcast", "forward", "{ type filter hook forward priority 0 ; }"],
                        ["add", "rule", "bridge", "nomcast", "forward", "meta", "pkttype", "multicast", "counter", "drop"]):
            subprocess.run(["ip", "netns", "exec", SWITCH, "nft", *command], check=True)
        secrets, broker_env = admin_and_broker(deb, blocks, work)
        for node_id, ns in NODES.items():
            h = TrackerHost(work, node_id, ns, deb, secrets)
            run_block("node", blocks["node"], ns, h.root, h.copied, {"NODE_ID": str(node_id)})
            peers = " ".join(ADDRESSES[other] for other in NODES.values() if other != ns)
            run_block("node-unicast", blocks["node-unicast"], ns, h.root, h.copied, {"SELF": ADDRESSES[ns], "PEERS": peers})
            h.start()
            h.start_keepalived()
            hosts.append(h)
        master = serving_master(hosts, 60)
        conf = open(os.path.join(master.root, "etc/keepalived/keepalived.conf")).read()
        if "unicast_peer" not in conf:
            fail(f"the node-unicast block did not give keepalived its peers:\n{conf}")
        for h in hosts:
            node = h.node() or {}
            if node.get("beacons"):
                fail(f"node {h.node_id} heard {node['beacons']} keepalives on the peer network, which drops multicast")
        first = first_reply_after(CLIENT, FLOATING, PORT, time.time())
        if first is None:
            fail(f"no reply through {FLOATING} with multicast dropped")
        failover, new_master = kill_master(master, hosts)
        log(f"multicast dropped: VRRP over unicast; master {master.node_id} held {FLOATING}; no keepalive crossed "
            f"the peer network; kill -9: first reply after {failover:.1f} s, from the host of node {new_master.node_id}")
        ok = True
    finally:
        tear_down_hosts(hosts, ok, [(broker_env, BROKER)] if broker_env else [], namespaces, work)


def main(unicast=False):
    if os.geteuid() != 0:
        fail("this test creates network namespaces and users and must run as root")
    deb = find_package()
    blocks = guide_blocks(("admin", "broker", "node", "check") + (("node-unicast",) if unicast else ()))
    work = tempfile.mkdtemp(prefix="deploy-guide-")
    os.chmod(work, 0o755)
    with tracker_user():
        (run_unicast if unicast else run)(deb, blocks, work)
    print(f"deploy guide{' (networks without multicast)' if unicast else ''}: all checks passed")


def run(deb, blocks, work):
    namespaces = [CLIENT, TRANSMISSION, ARIA2, BROKER, *NODES.values(), ROGUE, SWITCH]
    broker_env = None
    hosts, rogue, downloads, http_downloads = [], None, None, None
    ok = False
    try:
        lan(namespaces)
        secrets, broker_env = admin_and_broker(deb, blocks, work)

        # The tracker hosts: the node block, then the node and keepalived.
        for node_id, ns in NODES.items():
            h = TrackerHost(work, node_id, ns, deb, secrets)
            out = run_block("node", blocks["node"], ns, h.root, h.copied, {"NODE_ID": str(node_id)})
            if "all valid" not in out:
                fail(f"tracker config check said nothing on node {node_id}: {out}")
            h.start()
            h.start_keepalived()
            hosts.append(h)
        checked = next(row for row in out.splitlines() if "all valid" in row)
        log(f"3 tracker hosts configured by the guide; `tracker config check`: {checked}")
        master = serving_master(hosts, 60)
        for h in hosts:
            node = h.node()
            if not node or not node["broker"]["connected"] or not node["broker"]["connectedTo"].startswith("stomp+ssl://"):
                fail(f"node {h.node_id} is not on the broker over TLS: {node and node['broker']}")
            if node["beacons"] == 0:
                fail(f"node {h.node_id} heard no keepalive on the peer network (the group)")
        checks = [run_block("check", blocks["check"], h.ns, h.root, h.copied).strip() for h in hosts]
        log(f"master {master.node_id} serves and holds {FLOATING}; the guide's check on each host: {checks}")

        downloads = Downloads(f"udp://{FLOATING}:{PORT}/announce", 41000)
        downloads.round("before kill -9 of the master", hosts)
        # The same three clients over the HTTP tracker on the floating address's TCP port.
        http_downloads = Downloads(f"http://{FLOATING}:{PORT}/announce", 42000)
        http_downloads.round("before kill -9 of the master", hosts)

        failover, new_master = kill_master(master, hosts)
        survivors = [h for h in hosts if h is not master]
        log(f"kill -9 of master {master.node_id}: first reply through {FLOATING} after {failover:.1f} s, "
            f"from the host of node {new_master.node_id}")
        http_downloads.round("after kill -9 of the master", hosts)

        log(activemq("restart", env=broker_env, netns=BROKER))
        deadline = time.time() + 30
        while time.time() < deadline and not all((h.node() or {}).get("broker", {}).get("connected") for h in survivors):
            time.sleep(0.3)
        after = serving_master(survivors, 20)
        log(f"broker restarted; all nodes back on it; master {after.node_id} serves")
        downloads.round("after a restart of the broker", hosts)

        # A node whose guide block was given another CA's certificate.
        other = os.path.join(work, "other-ca")
        os.makedirs(other)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "2", "-subj", "/CN=another CA", "-keyout", os.path.join(other, "ca.key"),
                        "-out", os.path.join(other, "ca.pem")], check=True, capture_output=True)
        rogue = TrackerHost(work, ROGUE_ID, ROGUE, deb, secrets)
        shutil.copy(os.path.join(other, "ca.pem"), rogue.copied)
        run_block("node", blocks["node"], ROGUE, rogue.root, rogue.copied, {"NODE_ID": str(ROGUE_ID)})
        rogue.start()
        time.sleep(5)
        node = rogue.node()
        if rogue.proc.poll() is not None or not node:
            fail(f"the node with another CA must stay up:\n{rogue.tail()}")
        problem = node["broker"].get("problem") or ""
        if node["broker"]["connected"] or "does not verify" not in problem:
            fail(f"the node with another CA must refuse the broker and say why: {node['broker']}")
        # It holds the cluster key, so its keepalives on the peer network are heard; but
        # joining, votes and state travel on the broker, where it never arrives.
        seen = next((m for m in (after.node() or {}).get("members", []) if m["id"] == ROGUE_ID), None)
        if seen and seen.get("lastBrokerMsAgo") is not None:
            fail(f"the node with another CA was heard on the broker: {seen}")
        if node["inSync"] or node["lastCommitted"] != 0 or rogue.get("/api/health")[0] == 200:
            fail(f"the node with another CA took part in the cluster: in sync {node['inSync']}, "
                 f"last committed {node['lastCommitted']}, role {node['role']}")
        log(f"node {ROGUE_ID} with another CA: refused the broker ({problem[:90]}…), alive, never on the broker, "
            f"holds nothing (role {node['role']})")
        ok = True
    finally:
        for d in (downloads, http_downloads):
            if d:
                d.stop()
        tear_down_hosts(hosts + ([rogue] if rogue else []), ok, [(broker_env, BROKER)] if broker_env else [], namespaces, work)


if __name__ == "__main__":
    main()
