#!/usr/bin/python3
"""A hostile user against 3 real nodes + ActiveMQ on loopback, with a plain STOMP
publisher: every attack that once crashed, hijacked or poisoned the cluster.

Open broker (anyone may publish; the nodes share a cluster key):
 1. KEEPALIVE with epoch term 0xFFFFFFFF (old format, under a made-up key, and with a
    captured key id but a forged tag).
 2. COORDINATOR from the master's own id in its own epoch.
 3. A fake master: KEEPALIVEs from id 4294967295 one term higher, for 4 s.
 4. Forged PREPARE/COMMIT committing a made-up seeder 6.6.6.6:6666.
 5. Replays of captured traffic, and random byte flips of it.
 6. A restarted node's old KEEPALIVEs, replayed as it starts.
 7. A clean restart's LEAVING, replayed to a node that has just restarted.
After each: no node exited, master and epoch unchanged, every replica's digest equals
the master's, and the rejects are counted in /api/node.

Broker with authentication (ACTIVEMQ_AUTH_FILE): an anonymous CONNECT is refused and a
logged-in intruder may neither publish nor subscribe on the cluster's topics; the
cluster (user "tracker") works.

Peer port: a connection id computed without the cluster key (the old default derived
from the cluster name) is refused; no reply to a request without a valid id is larger
than the request; a standalone node with default limits caps a connect flood.
"""
import hashlib
import hmac
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, StompRaw, activemq, fail, free_tcp_port, free_udp_port, log  # noqa: E402
from common import start_tracker, stop, tracker_binary, wait_for_udp_tracker  # noqa: E402

# Cluster codec (Sources/TrackerLogic/Cluster/ClusterCodec.swift) and frame
# (ClusterChannel.swift), written out here as an attacker would.
KEEPALIVE, ELECTION, COORDINATOR, PREPARE, COMMIT, LEAVING = 1, 2, 4, 6, 8, 20
ROLE_SLAVE, ROLE_MASTER = 1, 3


def epoch_packed(term, master):
    return (term << 32) | master


def message(tag, sender, epoch, body, incarnation=0xBAD, to=0):
    return struct.pack(">HBBIQQI", 0x544B, 1, tag, sender, incarnation, epoch, to) + body


def keepalive_body(role, master, last=(0, 0)):
    return struct.pack(">BIQQB", role, master, last[0], last[1], 1) + struct.pack(">H", 4) + b"evil"


def frame(body, key_id, key=None, seq=1, sent_ms=None):
    sent_ms = int(time.time() * 1000) if sent_ms is None else sent_ms
    signed = struct.pack(">HBIqQ", 0x5453, 1, key_id, sent_ms, seq) + body
    tag = hmac.new(key, signed, hashlib.sha256).digest() if key else os.urandom(32)
    return signed + tag


def announce_update(info_hash, peer_id, ip, port):
    record = peer_id + struct.pack(">B", 4) + socket.inet_aton(ip) + struct.pack(">Hqqqq", port, 0, 0, 0, int(time.time() * 1000))
    return struct.pack(">B", 1) + info_hash + struct.pack(">B", 2) + record


class Tap:
    """Subscribes to the cluster's topics on the open broker and keeps every frame."""

    def __init__(self, destinations, port=61613):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        self.buffer = b""
        self.frames = []
        self.lock = threading.Lock()
        for i, d in enumerate(destinations):
            self.sock.sendall(f"SUBSCRIBE\ndestination:{d}\nid:{i}\nack:auto\n\n".encode() + b"\0")
        self.running = True
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        self.sock.settimeout(0.2)
        while self.running:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            self.buffer += data
            while True:
                self.buffer = self.buffer.lstrip(b"\n\r")
                end = self.buffer.find(b"\n\n")
                if end < 0:
                    break
                headers = self.buffer[:end].decode(errors="replace").split("\n")
                length = next((int(h.split(":", 1)[1]) for h in headers if h.startswith("content-length:")), None)
                start = end + 2
                if length is None:
                    stop_at = self.buffer.find(b"\0", start)
                    if stop_at < 0:
                        break
                    body, rest = self.buffer[start:stop_at], self.buffer[stop_at + 1:]
                else:
                    if len(self.buffer) < start + length + 1:
                        break
                    body, rest = self.buffer[start:start + length], self.buffer[start + length + 1:]
                self.buffer = rest
                if headers[0] == "MESSAGE":
                    with self.lock:
                        self.frames.append(body)

    def take(self):
        with self.lock:
            frames, self.frames = self.frames, []
        return frames

    def close(self):
        self.running = False
        self.sock.close()


def sender_of(frame_bytes):
    """The sender id inside a captured frame (frame header 23 bytes, then the message)."""
    return struct.unpack(">I", frame_bytes[23 + 4:23 + 8])[0]


def tag_of(frame_bytes):
    return frame_bytes[23 + 3]


def snapshot(cluster):
    states = {n.node_id: n.api() for n in cluster.nodes}
    if any(s is None for s in states.values()):
        fail(f"a node stopped answering its API: {[k for k, s in states.items() if s is None]}")
    return states


def rejects(cluster):
    """Rejects counted so far, per node id (a restarted node counts from zero again)."""
    return {n.node_id: n.api()["broker"]["badClusterMessages"] for n in cluster.nodes}


def check_unharmed(cluster, attack, master_id, epoch, rejects_before, expect_rejects=True, restarted=()):
    time.sleep(1.5)
    dead = [n.node_id for n in cluster.nodes if not n.alive()]
    if dead:
        cluster.dump()
        fail(f"{attack}: nodes {dead} exited")
    deadline = time.time() + 10
    while True:
        states = snapshot(cluster)
        masters = {s["master"] for s in states.values()}
        epochs = {s["epoch"] for s in states.values()}
        digests = {s["digest"] for s in states.values()}
        if masters == {master_id} and epochs == {epoch} and len(digests) == 1:
            break
        if time.time() > deadline:
            fail(f"{attack}: cluster changed: masters {masters} (was {master_id}), epochs {epochs} (was {epoch}), "
                 f"digests {digests}")
        time.sleep(0.2)
    after = rejects(cluster)
    counted = sum(after[i] - (0 if i in restarted else rejects_before[i]) for i in after)
    if expect_rejects and counted <= 0:
        fail(f"{attack}: no reject was counted in /api/node")
    by_reason = {}
    for n in cluster.nodes:
        for reason, count in n.api()["broker"]["rejectedClusterMessages"].items():
            by_reason[reason] = by_reason.get(reason, 0) + count
    log(f"{attack}: no node exited, master n{master_id} and epoch {epoch} unchanged, digests equal; "
        f"{counted} rejects counted (all reasons so far: {by_reason})")


def open_broker_attacks():
    print(activemq("start"))
    cluster = Cluster(f"hostile{os.getpid()}", free_udp_port())
    ok = False
    tap = None
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
        master = cluster.wait_converged()
        client = GroupClient(cluster.group)
        client.connect() or fail("no connect reply before the attacks")
        info_hash = os.urandom(20)
        for i in range(20):
            client.announce_first(info_hash, os.urandom(20), 7000 + i)[0] or fail("announce before the attacks")
        topic = f"/topic/{cluster.name}"
        tap = Tap([topic] + [f"{topic}.n{i}" for i in (1, 2, 3)])
        time.sleep(0.5)
        # Traffic worth capturing: keepalives, and PREPARE/VOTE/COMMIT of real announces.
        for i in range(20):
            client.announce_first(info_hash, os.urandom(20), 7100 + i)
            time.sleep(0.1)
        time.sleep(1)
        captured = tap.take()
        if len(captured) < 30:
            fail(f"captured only {len(captured)} frames from the cluster's topics")
        key_id = struct.unpack(">I", captured[0][3:7])[0]
        state = master.api()
        master_id, epoch = state["id"], state["epoch"]
        term = state["term"]
        raw = StompRaw()

        def publish(body, to=None):
            raw.send(topic if to is None else f"{topic}.n{to}", body)

        # 1. The top-term KEEPALIVE, in every form an outsider can make.
        before = rejects(cluster)
        top = message(KEEPALIVE, 4242, epoch_packed(0xFFFFFFFF, 4242), keepalive_body(ROLE_MASTER, 4242))
        for body in (top, frame(top, 0x01020304), frame(top, key_id), frame(top, key_id, key=os.urandom(32))):
            for _ in range(3):
                publish(body)
        check_unharmed(cluster, "top-term KEEPALIVE", master_id, epoch, before)

        # 1b. Keepalives travel on the peer network too (the group, which anyone who can
        # reach the tracker can send to): the same forgeries there, and replays of the
        # nodes' own keepalives captured from the group.
        before = rejects(cluster)
        listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(cluster.group)
        listener.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                            socket.inet_aton(cluster.group[0]) + socket.inet_aton("127.0.0.1"))
        listener.settimeout(0.2)
        beacons = []
        end = time.time() + 2.5
        while time.time() < end:
            try:
                data, _ = listener.recvfrom(4096)
            except socket.timeout:
                continue
            if data[:3] == b"TS\x01":
                beacons.append(data)
        listener.close()
        if len(beacons) < 3:
            fail(f"captured only {len(beacons)} keepalives on the peer network in 2.5 s")
        for body in (frame(top, 0x01020304), frame(top, key_id), frame(top, key_id, key=os.urandom(32)),
                     b"TS\x01" + os.urandom(80), b"TS\x01"):
            for _ in range(3):
                client.sock.sendto(body, cluster.group)
        for body in beacons:
            client.sock.sendto(body, cluster.group)
        client.connect() or fail("no connect reply after the peer-network attack")
        check_unharmed(cluster, f"forged keepalives and {len(beacons)} replayed ones on the peer network",
                       master_id, epoch, before)

        # 2. COORDINATOR from the master's own id in its own epoch.
        before = rejects(cluster)
        coord = message(COORDINATOR, master_id, epoch_packed(term, master_id), struct.pack(">QQ", 0, 0))
        for seq in range(5):
            publish(frame(coord, key_id, seq=seq))
            publish(frame(coord, key_id, seq=seq), to=master_id)
        check_unharmed(cluster, "own-id COORDINATOR", master_id, epoch, before)

        # 3. A fake high-id master one term higher, for 4 s.
        before = rejects(cluster)
        fake = 4294967295
        end = time.time() + 4
        seq = 0
        while time.time() < end:
            seq += 1
            body = message(KEEPALIVE, fake, epoch_packed(term + 1, fake), keepalive_body(ROLE_MASTER, fake))
            publish(frame(body, key_id, seq=seq))
            client.connect(timeout=0.3) or fail("peers lost service while a fake master was shouting")
            time.sleep(0.25)
        check_unharmed(cluster, "fake high-id master", master_id, epoch, before)

        # 4. Forged PREPARE then COMMIT putting 6.6.6.6:6666 into a swarm.
        before = rejects(cluster)
        last = state["lastCommitted"]
        ref = struct.pack(">QQ", epoch_packed(term, master_id), last + 1)
        update = announce_update(info_hash, b"-EV0001-" + os.urandom(12), "6.6.6.6", 6666)
        tx = ref + struct.pack(">I", 1) + update
        previous = struct.pack(">QQ", epoch_packed(term, master_id), last)
        prepare = message(PREPARE, master_id, epoch_packed(term, master_id), tx + previous + struct.pack(">Q", 0))
        commit = message(COMMIT, master_id, epoch_packed(term, master_id), ref + struct.pack(">Q", 0))
        for seq in range(3):
            publish(frame(prepare, key_id, seq=100 + seq))
            publish(frame(commit, key_id, seq=200 + seq))
        check_unharmed(cluster, "forged PREPARE/COMMIT", master_id, epoch, before)
        for n in cluster.nodes:
            if any(row[2] == "6.6.6.6" for row in n.rows()["peers"]):
                fail(f"node {n.node_id} stored the forged seeder 6.6.6.6:6666")
        replies = client.announce(info_hash, os.urandom(20), 7999)
        if not replies:
            fail("no reply to a real announce after the forged PREPARE/COMMIT")
        if any(socket.inet_aton("6.6.6.6") + struct.pack(">H", 6666) in r for r in replies):
            fail("a real peer was handed the forged seeder")

        # 5. Replays of everything captured, and byte flips of it.
        before = rejects(cluster)
        for body in captured:
            publish(body)
            publish(body, to=sender_of(body) % 3 + 1)
        check_unharmed(cluster, f"replay of {len(captured)} captured frames", master_id, epoch, before)
        before = rejects(cluster)
        rng = random.Random(7)
        for body in captured * 3:
            flipped = bytearray(body)
            for _ in range(rng.randint(1, 4)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            if bytes(flipped) != body:
                publish(bytes(flipped))
        check_unharmed(cluster, "random byte flips of captured frames", master_id, epoch, before)

        # 6. A restarted node's old KEEPALIVEs, replayed while it starts.
        victim = next(n for n in cluster.nodes if n.node_id != master_id)
        tap.take()
        time.sleep(2.5)
        old = [f for f in tap.take() if sender_of(f) == victim.node_id and tag_of(f) == KEEPALIVE]
        if not old:
            fail(f"captured no KEEPALIVE of node {victim.node_id}")
        before = rejects(cluster)
        victim.kill9()
        victim.start()
        for _ in range(8):
            for body in old:
                publish(body)
            time.sleep(0.4)
        cluster.wait_converged(timeout=20)
        check_unharmed(cluster, f"replayed KEEPALIVEs of node {victim.node_id}'s previous run", master_id, epoch, before,
                       restarted=(victim.node_id,))
        own = victim.api()["broker"]["rejectedClusterMessages"]
        if own["ownPastRun"] + own["stale"] + own["replayed"] == 0:
            fail(f"the restarted node {victim.node_id} counted none of its previous run's KEEPALIVEs: {own}")
        # 7. A clean restart's LEAVING, replayed to a node that has just restarted too.
        # The master leaves cleanly (its LEAVING is captured) and comes back as a new run;
        # then another node restarts and hears the old LEAVING again and again while it
        # starts and follows. It must not drop the live master on that word (it used to:
        # the older run replaced the newer one in its table, and it started an election).
        leaver = next(n for n in cluster.nodes if n.node_id == master_id)
        tap.take()
        leaver.terminate()
        time.sleep(0.5)
        farewell = [f for f in tap.take() if sender_of(f) == leaver.node_id and tag_of(f) == LEAVING]
        if not farewell:
            fail(f"captured no LEAVING of node {leaver.node_id}")
        leaver.start()
        master, state = settled_master(cluster, timeout=30)
        master_id, epoch = state["id"], state["epoch"]
        listener_node = next(n for n in cluster.nodes if n.node_id != master_id)
        before = rejects(cluster)
        listener_node.kill9()
        mark = os.path.getsize(listener_node.log_path)
        listener_node.start()
        for _ in range(20):
            for body in farewell:
                publish(body)
            time.sleep(0.4)
        cluster.wait_converged(timeout=20)
        check_unharmed(cluster, f"node {leaver.node_id}'s LEAVING replayed to the restarted node {listener_node.node_id}",
                       master_id, epoch, before, expect_rejects=False, restarted=(listener_node.node_id,))
        with open(listener_node.log_path) as f:
            f.seek(mark)
            roles = re.findall(r" role=([a-z]+) .*cluster role$", f.read(), re.M)
        if "candidate" in roles[roles.index("slave") if "slave" in roles else 0:]:
            fail(f"node {listener_node.node_id} started an election on a replayed LEAVING (roles {roles})")
        log(f"node {listener_node.node_id} heard node {leaver.node_id}'s old LEAVING {20 * len(farewell)} times and "
            f"kept following it (roles {roles})")
        raw.close()
        ok = True
    finally:
        if tap:
            tap.close()
        if not ok:
            cluster.dump()
        cluster.stop()


def authenticated_broker():
    """A second ActiveMQ with authentication and authorization on its own port."""
    port = free_tcp_port()
    work = tempfile.mkdtemp(prefix="hostile-auth-")
    password = os.urandom(8).hex()
    users = os.path.join(work, "users")
    with open(users, "w") as f:
        f.write(f"tracker {password} tracker\nintruder {os.urandom(8).hex()} guests\n")
    env = {"ACTIVEMQ_STATE": os.path.join(work, "amq"), "ACTIVEMQ_STOMP_PORT": str(port), "ACTIVEMQ_AUTH_FILE": users}
    print(activemq("start", env=env))
    # The broker's passwords, copied into its configuration, are for its user only.
    for name in ("conf/activemq.xml", "conf", ""):
        mode = os.stat(os.path.join(work, "amq", name)).st_mode & 0o777
        if mode & 0o077:
            fail(f"activemq.sh left {os.path.join(work, 'amq', name)} mode {oct(mode)}: the passwords in it are readable by others")
    log("the broker's configuration (with its passwords) is 0600 in a 0700 directory")
    intruder_password = open(users).read().split("\n")[1].split()[1]
    cluster = Cluster(f"auth{os.getpid()}", free_udp_port(), broker=f"stomp://127.0.0.1:{port}",
                      broker_user=("tracker", password))
    ok = False
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
        master = cluster.wait_converged(timeout=30)
        topic = f"/topic/{cluster.name}"
        anonymous = StompRaw(port=port, expect_connected=False)
        if anonymous.connected:
            fail("the broker accepted an anonymous CONNECT with authentication on")
        anonymous.sock.close()
        intruder = StompRaw(port=port, login="intruder", passcode=intruder_password)
        state = master.api()
        term, mid = state["term"], state["id"]
        attacks = [
            message(KEEPALIVE, 4242, epoch_packed(0xFFFFFFFF, 4242), keepalive_body(ROLE_MASTER, 4242)),
            message(COORDINATOR, mid, epoch_packed(term, mid), struct.pack(">QQ", 0, 0)),
            message(KEEPALIVE, 4294967295, epoch_packed(term + 1, 4294967295), keepalive_body(ROLE_MASTER, 4294967295)),
            message(COMMIT, mid, epoch_packed(term, mid), struct.pack(">QQQ", epoch_packed(term, mid), 1, 0)),
        ]
        intruder.sock.settimeout(5)
        for i, body in enumerate(attacks):
            framed = frame(body, 0x01020304)
            for destination in (topic, f"{topic}.n{mid}"):
                intruder.sock.sendall(f"SEND\ndestination:{destination}\nreceipt:r{i}\ncontent-length:{len(framed)}\n\n".encode()
                                      + framed + b"\0")
                answer = intruder.sock.recv(4096)
                if b"not authorized" not in answer:
                    fail(f"the intruder's SEND to {destination} was not refused: {answer[:200]!r}")
        intruder.sock.close()
        client = GroupClient(cluster.group)
        client.connect() or fail("the cluster on the authenticated broker does not serve")
        rejected = sum(rejects(cluster).values())
        states = [n.api() for n in cluster.nodes]
        if {s["master"] for s in states} != {state["id"]} or any(not n.alive() for n in cluster.nodes):
            fail("the intruder changed the cluster")
        log(f"authenticated broker: anonymous CONNECT refused, the intruder's {2 * len(attacks)} SENDs refused by ActiveMQ "
            f"('not authorized'), nothing reached the nodes ({rejected} rejects), cluster serving with master n{state['id']}")
        ok = True
    finally:
        if not ok:
            cluster.dump()
        cluster.stop()
        activemq("stop", env=env)


def reflection():
    """The peer port: no amplification without a valid id; ids need the key; limits."""
    work = tempfile.mkdtemp(prefix="hostile-peer-")
    udp = free_udp_port()
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}", "--connect-limit", "20/40"], os.path.join(work, "t.log"))
    try:
        wait_for_udp_tracker(udp)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(0.3)
        target = ("127.0.0.1", udp)
        # A swarm with many peers, so an accepted announce would have a large answer.
        sock.sendto(struct.pack(">QII", 0x41727101980, 0, 1), target)
        cid = struct.unpack(">Q", sock.recv(64)[8:16])[0]
        info_hash = os.urandom(20)
        for i in range(60):
            sock.sendto(struct.pack(">QII20s20sqqqIIIiH", cid, 1, 2, info_hash, os.urandom(20), 0, 10, 0, 2, 0, 0, 200, 7000 + i), target)
            sock.recv(2048)
        # The old default key was derived from the public cluster name; any id made
        # without the key is refused.
        largest = 0
        requests = []
        for i in range(200):
            forged = random.getrandbits(64)
            requests.append(struct.pack(">QII20s20sqqqIIIiH", forged, 1, 100 + i, info_hash, os.urandom(20), 0, 10, 0, 2, 0, 0, 200, 9000))
            requests.append(struct.pack(">QII", forged, 2, 300 + i) + info_hash)
            requests.append(struct.pack(">QII", 12345, 0, 500 + i))  # a bad connect
            requests.append(os.urandom(random.randint(8, 40)))
        amplified = []
        # Each reply is judged against the request whose transaction id it carries (a
        # request shorter than 16 bytes has none and gets no reply), so a short wait per
        # request loses nothing: a late reply is matched when it comes.
        sent = {}

        def judge(reply):
            nonlocal largest
            req = sent.get(reply[4:8])
            if req is None:
                fail(f"a reply carries a transaction id no request had: {reply[:16].hex()}")
            largest = max(largest, len(reply) / len(req))
            if len(reply) > len(req):
                amplified.append((len(req), len(reply), req[:16].hex()))
            if reply[:4] == struct.pack(">I", 1):
                fail("an announce with a forged connection id was served")

        sock.settimeout(0.02)
        for req in requests:
            if len(req) >= 16:
                sent[req[12:16]] = req
            sock.sendto(req, target)
            try:
                judge(sock.recv(4096))
            except socket.timeout:
                continue
        sock.settimeout(0.3)
        while True:
            try:
                judge(sock.recv(4096))
            except socket.timeout:
                break
        if amplified:
            fail(f"replies larger than their requests without a valid id: {amplified[:5]}")
        # A connect flood from one source: the limit (20/s, burst 40) caps the replies.
        answered = 0
        for i in range(400):
            sock.sendto(struct.pack(">QII", 0x41727101980, 0, 10000 + i), target)
        deadline = time.time() + 1.5
        sock.settimeout(0.2)
        while time.time() < deadline:
            try:
                sock.recv(64)
                answered += 1
            except socket.timeout:
                pass
        if answered > 80:
            fail(f"a connect flood of 400 got {answered} replies; the limit is 20/s with a burst of 40")
        log(f"peer port: {len(requests)} requests without a valid id, largest reply/request ratio {largest:.2f} (≤ 1); "
            f"forged ids refused; connect flood of 400 answered {answered} times (limit 20/s, burst 40)")
    finally:
        stop(tracker)


def refuses_to_start_without_a_key():
    work = tempfile.mkdtemp(prefix="hostile-nokey-")
    out = subprocess.run([tracker_binary(), "run", "--id", "1", "--group", f"239.255.42.99:{free_udp_port()}",
                          "--interface", "lo", "--broker", "stomp://127.0.0.1:61613", "--db", os.path.join(work, "n.sqlite")],
                         capture_output=True, text=True, timeout=30)
    if out.returncode == 0 or "--cluster-key-file" not in out.stderr:
        fail(f"a cluster node without a key must refuse to start: exit {out.returncode}, {out.stderr[-300:]!r}")
    bad_key = os.path.join(work, "bad.key")
    with open(bad_key, "w") as f:
        f.write("not hex\n")
    out = subprocess.run([tracker_binary(), "run", "--id", "1", "--group", f"239.255.42.99:{free_udp_port()}",
                          "--interface", "lo", "--broker", "stomp://127.0.0.1:61613", "--db", os.path.join(work, "n.sqlite"),
                          "--cluster-key-file", bad_key], capture_output=True, text=True, timeout=30)
    if out.returncode == 0 or "64 hex digits" not in out.stderr:
        fail(f"a malformed key file must be a clear error: exit {out.returncode}, {out.stderr[-300:]!r}")
    log("a cluster node refuses to start without a key (and names the fix); a malformed key file is a clear error")


def settled_master(cluster, timeout):
    """The converged master and its state, once they hold for longer than a keepalive
    interval. A node that restarts may first follow the master it hears and then, as the
    higher id, take the office over at its next tick (bully): a master read in between
    names an epoch already ending (CI caught `wait_converged` returning node 2 while the
    restarted node 3 was about to claim e3.3)."""
    deadline = time.time() + timeout
    while True:
        master = cluster.wait_converged(timeout=max(1.0, deadline - time.time()))
        state = master.api()
        time.sleep(1.5)
        again = cluster.wait_converged(timeout=max(1.0, deadline - time.time()))
        latest = again.api()
        if state and latest and again.node_id == master.node_id and latest["epoch"] == state["epoch"]:
            return again, latest
        if time.time() > deadline:
            fail(f"the cluster's master did not hold for 1.5 s within {timeout} s: {state} then {latest}")


def main():
    refuses_to_start_without_a_key()
    reflection()
    open_broker_attacks()
    authenticated_broker()


if __name__ == "__main__":
    main()
