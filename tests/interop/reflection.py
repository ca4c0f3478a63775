#!/usr/bin/python3
"""A standalone `tracker run` is no reflector and no unbounded store:

1. error replies are rate-limited per source: 5,000 announces with forged connection ids
   from one address draw at most the error burst plus the error rate (4,712 were
   answered before the limit existed);
2. an IPv6 host's addresses share one bucket per /64: 300 addresses of one /64, in a
   network namespace this test creates, draw at most one source's connects;
3. the peers of all swarms together are capped (--max-peers): a new peer beyond it gets
   a BEP 15 error, a peer already held keeps announcing.
"""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_udp_port, start_tracker, stop, tracker_binary, wait_for_udp_tracker  # noqa: E402

PROTOCOL_ID = 0x41727101980


def drain(sock, quiet=0.5):
    """Replies until `quiet` seconds pass without one."""
    got = []
    sock.settimeout(quiet)
    while True:
        try:
            got.append(sock.recvfrom(2048)[0])
        except socket.timeout:
            return got


def forged_announce(tid):
    return struct.pack(">QII", 0x1122334455667788 + tid, 1, tid) + b"\xaa" * 20 + struct.pack(">I", tid) + b"\x00" * 16 \
        + struct.pack(">QQQIIIiH", 0, 10, 0, 2, 0, 0, -1, 6881)


def connect_id(sock, addr):
    sock.settimeout(2)
    for _ in range(10):
        sock.sendto(struct.pack(">QII", PROTOCOL_ID, 0, 77), addr)
        try:
            data = sock.recvfrom(2048)[0]
        except socket.timeout:
            continue
        if len(data) == 16 and struct.unpack(">II", data[:8]) == (0, 77):
            return struct.unpack(">Q", data[8:])[0]
    fail("no connect answer")


def announce(sock, addr, cid, peer, info_hash=b"\xbb" * 20):
    tid = 1000 + peer
    req = struct.pack(">QII", cid, 1, tid) + info_hash + struct.pack(">I", peer) + b"p" * 16 \
        + struct.pack(">QQQIIIiH", 0, 10, 0, 2, 0, 0, 50, 7000 + peer)
    sock.settimeout(2)
    for _ in range(5):
        sock.sendto(req, addr)
        try:
            data = sock.recvfrom(2048)[0]
        except socket.timeout:
            continue
        action, got_tid = struct.unpack(">II", data[:8])
        if got_tid == tid:
            return action, data[8:]
    fail(f"no answer to peer {peer}'s announce")


def errors_are_limited(work):
    udp = free_udp_port()
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}"], os.path.join(work, "errors.log"))
    try:
        wait_for_udp_tracker(udp)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        started = time.time()
        for i in range(5000):
            s.sendto(forged_announce(i), ("127.0.0.1", udp))
        replies = drain(s)
        elapsed = time.time() - started
        allowed = 20 + 10 * elapsed + 5
        print(f"5000 forged announces from one source in {elapsed:.1f}s: {len(replies)} error replies "
              f"(allowed {allowed:.0f})", flush=True)
        if len(replies) > allowed:
            fail(f"{len(replies)} error replies to one source: errors are not rate-limited")
        if not replies:
            fail("no error reply at all: the first ones must still be answered")
    finally:
        stop(tracker)


NS = f"reflect{os.getpid()}"
PREFIX = "2001:db8:42:7"


def ns(*cmd):
    subprocess.run(["ip", "netns", "exec", NS, *cmd], check=True)


def slash64_shares_a_bucket(work):
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        subprocess.run(["ip", "-n", NS, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", NS, "-6", "addr", "add", f"{PREFIX}::1/128", "dev", "lo", "nodad"], check=True)
        # Any address of the /64 (and of one other /64) can be bound: one host, many sources.
        subprocess.run(["ip", "-n", NS, "-6", "route", "add", "local", f"{PREFIX}::/64", "dev", "lo"], check=True)
        subprocess.run(["ip", "-n", NS, "-6", "route", "add", "local", "2001:db8:43::/64", "dev", "lo"], check=True)
        ns("sysctl", "-qw", "net.ipv6.ip_nonlocal_bind=1")
        udp = free_udp_port()
        log = open(os.path.join(work, "v6.log"), "w")
        tracker = subprocess.Popen(["ip", "netns", "exec", NS, tracker_binary(), "run", "--udp", f"[{PREFIX}::1]:{udp}",
                                    "--connect-limit", "10/20"], stdout=log, stderr=subprocess.STDOUT)
        try:
            probe = subprocess.run(["ip", "netns", "exec", NS, sys.executable, __file__, "--v6-client", str(udp)],
                                   capture_output=True, text=True, timeout=60)
            print(probe.stdout.strip(), flush=True)
            if probe.returncode != 0:
                fail(f"IPv6 /64 probe: {probe.stdout} {probe.stderr}")
        finally:
            tracker.terminate()
            tracker.wait(timeout=10)
    finally:
        subprocess.run(["ip", "netns", "del", NS], check=False)


def v6_client(udp):
    """Runs inside the namespace: connects from 300 addresses of one /64."""
    server = (f"{PREFIX}::1", udp)
    deadline = time.time() + 15
    while True:  # the tracker is up when an address of another /64 gets an answer
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("2001:db8:43::1", 0))
        s.settimeout(0.3)
        s.sendto(struct.pack(">QII", PROTOCOL_ID, 0, 1), server)
        try:
            s.recvfrom(64)
            break
        except (socket.timeout, ConnectionRefusedError):
            if time.time() > deadline:
                print("tracker did not answer on IPv6")
                sys.exit(1)
    socks = []
    for i in range(300):
        c = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        c.bind((f"{PREFIX}:{(i * 7919) % 65536:x}:{i:x}::{i + 2:x}", 0))
        socks.append(c)
    started = time.time()
    for c in socks:
        c.sendto(struct.pack(">QII", PROTOCOL_ID, 0, 2), server)
    answered = 0
    time.sleep(0.5)
    for c in socks:
        c.setblocking(False)
        try:
            c.recvfrom(64)
            answered += 1
        except BlockingIOError:
            pass
    allowed = 20 + 10 * (time.time() - started) + 3
    print(f"connects from 300 addresses of {PREFIX}::/64: {answered} answered (allowed {allowed:.0f})")
    other = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    other.bind(("2001:db8:43::2", 0))
    other.settimeout(2)
    other.sendto(struct.pack(">QII", PROTOCOL_ID, 0, 3), server)
    try:
        other.recvfrom(64)
    except socket.timeout:
        print("an address of another /64 got no answer: it has its own bucket")
        sys.exit(1)
    sys.exit(0 if answered <= allowed else 1)


def peers_are_capped(work):
    udp = free_udp_port()
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}", "--max-peers", "50", "--announce-limit", "off"],
                            os.path.join(work, "cap.log"))
    try:
        wait_for_udp_tracker(udp)
        addr = ("127.0.0.1", udp)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        cid = connect_id(s, addr)
        for peer in range(50):
            action, _ = announce(s, addr, cid, peer, info_hash=bytes([peer % 5]) * 20)
            if action != 1:
                fail(f"peer {peer} of 50 was refused")
        refused = 0
        for peer in range(50, 60):
            action, body = announce(s, addr, cid, peer, info_hash=bytes([peer % 7]) * 20)
            if action == 3 and b"tracker is full (50 peers)" in body:
                refused += 1
        if refused != 10:
            fail(f"{10 - refused} of 10 peers beyond --max-peers 50 were held")
        action, _ = announce(s, addr, cid, 3, info_hash=bytes([3]) * 20)
        if action != 1:
            fail("a peer already held could not announce again at the cap")
        print("50 peers held, 10 more refused with 'tracker is full (50 peers)', held peers keep announcing", flush=True)
    finally:
        stop(tracker)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--v6-client":
        v6_client(int(sys.argv[2]))
        return
    work = tempfile.mkdtemp(prefix="reflection-")
    errors_are_limited(work)
    slash64_shares_a_bucket(work)
    peers_are_capped(work)
    print("PASS reflection", flush=True)


main()
