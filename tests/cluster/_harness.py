"""Helpers for the multi-process cluster tests: the broker, cluster nodes as real
processes, a BEP 15 client that sends to a multicast group and collects every reply,
and reading the nodes' SQLite files and HTTP API."""
import contextlib
import hashlib
import ipaddress
import json
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from common import ROOT, fail, free_tcp_port, free_udp_port, tracker_binary  # noqa: E402,F401

MAGIC = 0x41727101980


def log(message):
    print(f"  {time.strftime('%H:%M:%S')} {message}", flush=True)


def activemq(command, env=None, netns=None):
    cmd = [os.path.join(ROOT, "scripts", "activemq.sh"), command]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)
    if out.returncode != 0 and command != "stop":
        fail(f"the broker could not {command}: {out.stdout.strip()} {out.stderr.strip()}")
    return out.stdout.strip()


@contextlib.contextmanager
def broker_running(env=None):
    """ActiveMQ on 127.0.0.1 for as long as the block runs: the broker already running if
    there is one, else one started here with `env` and stopped on leaving, so a tool never
    stops a broker it did not start. Yields whether it started one."""
    running = subprocess.run([os.path.join(ROOT, "scripts", "activemq.sh"), "status"], capture_output=True).returncode == 0
    if not running:
        activemq("start", env=env)
    try:
        yield not running
    finally:
        if not running:
            activemq("stop")


class Node:
    def __init__(self, cluster, index, node_id, netns=None, peer_args=None, http_host="127.0.0.1", db=None, broker=None,
                 extra_args=None):
        self.netns = netns
        self.extra_args = extra_args or []
        self.broker = broker or cluster.broker
        self.peer_args = peer_args or cluster.peer_args
        self.http_host = http_host
        self.cluster = cluster
        self.index = index
        self.node_id = node_id
        self.http = free_tcp_port()
        self.db = db or os.path.join(cluster.work, f"node{index}.sqlite")
        self.log_path = os.path.join(cluster.work, f"node{index}.log")
        self.proc = None

    def start(self):
        args = [tracker_binary(), "run", "--id", str(self.node_id), *self.peer_args,
                "--broker", self.broker, "--db", self.db, "--http", f"{self.http_host}:{self.http}",
                "--cluster", self.cluster.name, "--keepalive", self.cluster.keepalive, "--log-level", "info",
                "--admin-token-file", self.cluster.admin_token_file, *self.cluster.security_args, *self.cluster.limit_args,
                *self.extra_args]
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self.proc = subprocess.Popen(prefix + args, stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT)

    def api(self, timeout=1.0):
        if self.netns:
            out = subprocess.run(["ip", "netns", "exec", self.netns, "curl", "-s", "-m", str(timeout),
                                  f"http://{self.http_host}:{self.http}/api/node"], capture_output=True, text=True)
            try:
                return json.loads(out.stdout) if out.returncode == 0 else None
            except ValueError:
                return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/api/node", timeout=timeout) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def url(self, path):
        return f"http://{self.http_host}:{self.http}{path}"

    def get(self, path, timeout=2.0):
        """GET a dashboard path: (status, parsed JSON or text). A 429 (listings are
        budgeted per client) is retried as it says, for up to 10 s."""
        deadline = time.time() + 10
        while True:
            status, body = http_request(self.url(path), timeout=timeout)
            if status != 429 or time.time() > deadline:
                return status, body
            time.sleep(0.3)

    def post(self, path, body=None, token=True, content_type="application/octet-stream", timeout=5.0):
        headers = {"Content-Type": content_type}
        if token:
            headers["Authorization"] = f"Bearer {self.cluster.admin_token}"
        return http_request(self.url(path), method="POST", body=body or b"", headers=headers, timeout=timeout)

    def delete(self, path, timeout=7.0):
        return http_request(self.url(path), method="DELETE",
                            headers={"Authorization": f"Bearer {self.cluster.admin_token}"}, timeout=timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout=10):
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail(f"node {self.node_id} did not stop within {timeout}s of SIGTERM")

    def tail(self, n=30):
        try:
            return "".join(open(self.log_path).readlines()[-n:])
        except OSError:
            return ""

    def rows(self):
        return repository_rows(self.db)


def bencode(v):
    if isinstance(v, int):
        return b"i%de" % v
    if isinstance(v, str):
        v = v.encode()
    if isinstance(v, bytes):
        return b"%d:" % len(v) + v
    if isinstance(v, list):
        return b"l" + b"".join(bencode(x) for x in v) + b"e"
    return b"d" + b"".join(bencode(k) + bencode(v[k]) for k in sorted(v)) + b"e"


def make_torrent(name, size=300000, piece=65536):
    """A v1 .torrent file and its info hash (hex)."""
    info = {"name": name, "piece length": piece, "length": size, "pieces": os.urandom(20 * ((size + piece - 1) // piece))}
    return bencode({"announce": "udp://127.0.0.1:6969", "info": info}), hashlib.sha1(bencode(info)).hexdigest()


def http_request(url, method="GET", body=None, headers=None, timeout=2.0):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            status, raw, kind = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, raw, kind = e.code, e.read(), e.headers.get("Content-Type", "")
    except OSError as e:
        return None, str(e)
    return status, json.loads(raw) if "json" in kind else raw


def peer_log_rows(record):
    """The rows of one `peer_log` record (PeerLogRecord's layout): (info hash, peer id, ip)
    and the peer's values, or None for a removal. Read here independently of the Swift
    decoder, so a test that compares two nodes' files checks the format as well."""
    if record[:1] != b"\x01":
        raise ValueError(f"peer log record of format {record[:1]!r}")
    rows, at = [], 1

    def take(n):
        nonlocal at
        if at + n > len(record):
            raise ValueError("truncated peer log record")
        at += n
        return record[at - n:at]

    while at < len(record):
        tag, info_hash, peer_id, family = take(1)[0], take(20).hex(), take(20).hex(), take(1)[0]
        ip = str(ipaddress.ip_address(take(4 if family == 4 else 16)))
        if tag == 1:
            port, uploaded, downloaded, left, last = struct.unpack(">Hqqqq", take(34))
            rows.append(((info_hash, peer_id, ip), (port, uploaded, downloaded, left, last)))
        else:
            rows.append(((info_hash, peer_id, ip), None))
    return rows


def repository_rows(path):
    """Every row of the repository tables, in a canonical order; the peers are the base's
    with the log's latest row for each peer laid over them."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        out = {}
        peers = {(h.hex(), p.hex(), ip): tuple(values) for h, p, ip, *values in con.execute(
            'SELECT info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce FROM peer_base')}
        for (record,) in con.execute("SELECT record FROM peer_log ORDER BY seq"):
            for key, values in peer_log_rows(record):
                if values is None:
                    peers.pop(key, None)
                else:
                    peers[key] = values
        out["peers"] = sorted(key + values for key, values in peers.items())
        for table, order in (("swarms", "info_hash"), ("completions", "info_hash, peer_id, ip")):
            out[table] = con.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'peer_stops'").fetchone():
            out["peer_stops"] = sorted((h.hex(), p.hex(), ip, at) for h, p, ip, at in con.execute(
                "SELECT info_hash, peer_id, ip, at FROM peer_stops"))
        out["last_txid"] = con.execute("SELECT value FROM cluster_meta WHERE key = 'last_txid'").fetchone()
        return out
    finally:
        con.close()


def set_full(histories, records):
    """Jepsen's set-full over the peers' records in one file: (acknowledged peers, undone
    stops, stale records, lost announces). HISTORIES maps a peer to its requests in the
    order sent, each (sequence, event, acknowledged), the sequence being the `downloaded`
    value only that request carried; RECORDS maps a peer to the sequence its record in the
    file carries. A peer whose last acknowledged request was a stop (event 3) has no record,
    or one of a request it sent later (unanswered, it may still have been committed); one
    whose last acknowledged request was an announce has that request's record or a later
    one's: an earlier one is stale, none is lost (unless it sent a stop after)."""
    undone, stale, lost, acknowledged = [], [], [], 0
    for p, history in histories.items():
        answered = [i for i, e in enumerate(history) if e[2]]
        if not answered:
            continue
        acknowledged += 1
        last = answered[-1]
        sequence, event, _ = history[last]
        later = {e[0] for e in history[last + 1:]}
        record = records.get(p)
        if event == 3:
            if record is not None and record not in later:
                undone.append((p, sequence, record))
        elif record is None:
            if not any(e[1] == 3 for e in history[last + 1:]):
                lost.append((p, sequence))
        elif record != sequence and record not in later:
            stale.append((p, sequence, record))
    return acknowledged, undone, stale, lost


def records_by_peer(rows, info_hash, peer_of):
    """The `downloaded` value of each peer's record of INFO_HASH (bytes) in a file's rows,
    keyed by PEER_OF(peer id bytes) (entries for which it gives None are skipped)."""
    out = {}
    for h, peer_id, _ip, _port, _up, downloaded, _left, _last in rows["peers"]:
        if h == info_hash.hex() and (p := peer_of(bytes.fromhex(peer_id))) is not None:
            out[p] = downloaded
    return out


class Cluster:
    """N nodes on loopback behind a multicast group, one broker topic per cluster."""

    def __init__(self, name, group_port, keepalive="1s", broker="stomp://127.0.0.1:61613", peer_args=None,
                 key=True, broker_user=None, limits=False, extra_args=None):
        self.name = name
        self.work = tempfile.mkdtemp(prefix=f"cluster-{name}-")
        # Every cluster runs authenticated unless a test asks otherwise; broker_user is
        # (login, password) for an ActiveMQ with authentication on.
        self.key_file = os.path.join(self.work, "cluster.key")
        self.admin_token = "test-admin-token-" + os.urandom(8).hex()
        self.admin_token_file = os.path.join(self.work, "admin.token")
        with open(os.open(self.admin_token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(self.admin_token + "\n")
        if key:
            subprocess.run([tracker_binary(), "keygen", "--output", self.key_file], check=True)
            self.security_args = ["--cluster-key-file", self.key_file]
        else:
            self.security_args = ["--insecure-cluster"]
        # The tests fire hundreds of requests a second from 127.0.0.1; the per-source
        # limits have a test of their own (tests/cluster/hostile_cluster.py).
        self.limit_args = ["--connect-limit", "off", "--announce-limit", "off"] if not limits else []
        self.limit_args += extra_args or []
        if broker_user:
            password_file = os.path.join(self.work, "broker.password")
            with open(os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                f.write(broker_user[1] + "\n")
            self.security_args += ["--broker-user", broker_user[0], "--broker-password-file", password_file]
        self.group = ("239.255.42.99", group_port)
        self.keepalive = keepalive
        self.broker = broker
        self.peer_args = peer_args or ["--group", f"{self.group[0]}:{group_port}", "--interface", "lo"]
        self.nodes = []

    def add(self, node_id, **kw):
        node = Node(self, len(self.nodes) + 1, node_id, **kw)
        self.nodes.append(node)
        node.start()
        return node

    def live(self):
        return [n for n in self.nodes if n.alive()]

    def wait_converged(self, timeout=20.0):
        """One serving master that every live node follows as a slave; returns it. A node
        still starting may already name the master it heard, yet a higher id among the
        starting ones takes over once its startup ends (bully): it does not count as
        following."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            states = [(n, n.api()) for n in self.live()]
            last = [(n.node_id, s and (s["role"], s["master"], s["serving"], s["lastCommitted"])) for n, s in states]
            masters = [n for n, s in states if s and s["role"] == "master" and s["serving"]]
            if len(masters) == 1 and all(s and s["role"] in ("master", "slave") and s["master"] == masters[0].api()["id"]
                                         for _, s in states):
                return masters[0]
            time.sleep(0.1)
        self.dump()
        fail(f"cluster {self.name} did not converge within {timeout}s: {last}")

    def wait_equal_rows(self, nodes, timeout=10.0):
        """The nodes' SQLite files once they are equal and each holds everything its node
        has committed in memory (`lastCommitted` of /api/node). Files being equal is not
        enough: a node writes its commits in groups (up to 50 ms later), so every file can
        briefly agree on a state one group behind what was acknowledged."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            committed = [(n.api() or {}).get("lastCommitted") for n in nodes]
            rows = [n.rows() for n in nodes]
            on_disk = [(r["last_txid"] or (0,))[0] for r in rows]
            if all(r == rows[0] for r in rows) and all(c is not None and c == d for c, d in zip(committed, on_disk)):
                return rows[0]
            time.sleep(0.2)
        summary = [(n.node_id, {k: (len(v) if isinstance(v, list) else v) for k, v in n.rows().items()}) for n in nodes]
        fail(f"SQLite repositories differ after {timeout}s: {summary}")

    def dump(self):
        for n in self.nodes:
            print(f"--- node {n.node_id} log tail ({n.log_path})\n{n.tail()}", flush=True)

    def stop(self):
        for n in self.nodes:
            if n.alive():
                n.proc.kill()
                n.proc.wait()


def three_nodes(cluster):
    """Nodes 1, 2 and 3 added to `cluster`, and the master they converge on."""
    nodes = [cluster.add(i) for i in (1, 2, 3)]
    return nodes, cluster.wait_converged(30)


class GroupClient:
    """A BEP 15 client that sends to an address (the group) and keeps every reply, so a
    test can tell one reply from two."""

    def __init__(self, target, interface_ip="127.0.0.1", bind_ip="127.0.0.1"):
        self.target = target
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface_ip))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((bind_ip, 0))
        self.next_tid = int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
        self.connection_id = None

    def tid(self):
        self.next_tid = (self.next_tid + 1) & 0xFFFFFFFF
        return self.next_tid

    def collect(self, window):
        """Every datagram arriving within `window` seconds: [(data, source)]."""
        out = []
        deadline = time.time() + window
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                return out
            self.sock.settimeout(remaining)
            try:
                out.append(self.sock.recvfrom(4096))
            except socket.timeout:
                return out

    def connect(self, timeout=1.0):
        tid = self.tid()
        self.sock.sendto(struct.pack(">QII", MAGIC, 0, tid), self.target)
        for data, _ in self.collect(timeout):
            if len(data) == 16 and struct.unpack(">II", data[:8]) == (0, tid):
                self.connection_id = struct.unpack(">Q", data[8:])[0]
                return self.connection_id
        return None

    def announce_packet(self, tid, info_hash, peer_id, port, left=100, event=0, downloaded=0, url_data=b""):
        """`url_data`: the URL's path (`/announce/KEY`) as BEP 41 options after the 98 bytes."""
        options = b"".join(bytes([2, len(url_data[i:i + 255])]) + url_data[i:i + 255] for i in range(0, len(url_data), 255))
        return struct.pack(">QII20s20sQQQIIIiH", self.connection_id, 1, tid, info_hash, peer_id, downloaded, left, 0,
                           event, 0, 0, -1, port) + (options + b"\0" if url_data else b"")

    def announce(self, info_hash, peer_id, port, timeout=1.0, **kw):
        """Returns the replies to one announce (a list: the test checks there is one)."""
        tid = self.tid()
        self.sock.sendto(self.announce_packet(tid, info_hash, peer_id, port, **kw), self.target)
        return [d for d, _ in self.collect(timeout) if len(d) >= 8 and struct.unpack(">I", d[4:8])[0] == tid]

    def announce_first(self, info_hash, peer_id, port, timeout=1.0, **kw):
        """The first reply to one announce and when it arrived, or (None, None)."""
        tid = self.tid()
        self.sock.sendto(self.announce_packet(tid, info_hash, peer_id, port, **kw), self.target)
        deadline = time.time() + timeout
        while (remaining := deadline - time.time()) > 0:
            self.sock.settimeout(remaining)
            try:
                data, _ = self.sock.recvfrom(4096)
            except socket.timeout:
                break
            if len(data) >= 8 and struct.unpack(">I", data[4:8])[0] == tid:
                return data, time.time()
        return None, None

    def scrape(self, info_hash, timeout=1.0):
        tid = self.tid()
        self.sock.sendto(struct.pack(">QII20s", self.connection_id, 2, tid, info_hash), self.target)
        for d, _ in self.collect(timeout):
            if len(d) == 20 and struct.unpack(">II", d[:8]) == (2, tid):
                seeders, completed, leechers = struct.unpack(">III", d[8:20])
                return {"seeders": seeders, "completed": completed, "leechers": leechers}
        return None


def relay(src, dst):
    """Copies one direction of a relayed TCP connection until either side closes, then
    closes both (a TLS front, a broker link a test can cut)."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.close()
        except OSError:
            pass


class StompRaw:
    """A bare STOMP connection, for putting garbage on the broker."""

    def __init__(self, host="127.0.0.1", port=61613, login=None, passcode=None, expect_connected=True):
        self.sock = socket.create_connection((host, port), timeout=5)
        credentials = f"login:{login}\npasscode:{passcode}\n".encode() if login else b""
        self.sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n" + credentials + b"\n\0")
        reply = self.sock.recv(4096)
        self.connected = reply.startswith(b"CONNECTED")
        if expect_connected and not self.connected:
            fail(f"broker did not answer CONNECT: {reply[:100]!r}")

    def send(self, destination, body, binary=True):
        headers = f"SEND\ndestination:{destination}\n"
        if binary:
            headers += f"content-length:{len(body)}\n"
        self.sock.sendall(headers.encode() + b"\n" + body + b"\0")

    def close(self):
        try:
            self.sock.sendall(b"DISCONNECT\nreceipt:x\n\n\0")
            self.sock.recv(4096)
        except OSError:
            pass
        self.sock.close()
