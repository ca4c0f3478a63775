#!/usr/bin/python3
"""One standalone node serves both address families at once (`--udp [::]:PORT`, a
dual-stack socket), on loopback:

1. An IPv4 client (127.0.0.1) and IPv6 clients (::1) announce the same swarm: each is
   answered in its own format (6-byte IPv4 entries, 18-byte IPv6 ones) with peers of its
   own family only, and a scrape counts them all.
2. num_want 200 over IPv6 with 80 IPv6 peers in the swarm: the reply is capped at 67
   peers, 1,226 bytes, within the default --max-reply-bytes of 1,232.
3. `--metrics`: tracker_requests_total and tracker_replies_total count each family under
   its own label (IPv4 arriving on the IPv6 socket as mapped addresses counts as ipv4).
"""
import os
import re
import socket
import struct
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_tcp_port, free_udp_port, start_tracker, stop, wait_for_udp_tracker  # noqa: E402

PROTOCOL_ID = 0x41727101980


class Peer:
    def __init__(self, family, port):
        self.family = family
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.settimeout(2)
        self.target = ("127.0.0.1" if family == socket.AF_INET else "::1", port)
        self.tid = 0

    def request(self, payload):
        self.tid += 1
        self.sock.sendto(payload(self.tid), self.target)
        while True:
            data, _ = self.sock.recvfrom(4096)
            if len(data) >= 8 and struct.unpack(">I", data[4:8])[0] == self.tid:
                return data

    def connect(self):
        reply = self.request(lambda tid: struct.pack(">QII", PROTOCOL_ID, 0, tid))
        self.cid = struct.unpack(">Q", reply[8:16])[0]

    def announce(self, info_hash, peer_id, port, num_want=50):
        reply = self.request(lambda tid: struct.pack(">QII20s20sQQQIIIiH", self.cid, 1, tid, info_hash, peer_id, 0, 100, 0,
                                                     2, 0, 0, num_want, port))
        if struct.unpack(">I", reply[:4])[0] != 1:
            fail(f"announce answered {reply!r}")
        return reply

    def scrape(self, info_hash):
        reply = self.request(lambda tid: struct.pack(">QII20s", self.cid, 2, tid, info_hash))
        return struct.unpack(">III", reply[8:20])


def main():
    if not socket.has_ipv6:
        fail("this host has no IPv6")
    work = tempfile.mkdtemp(prefix="dual-stack-")
    port, metrics = free_udp_port(), free_tcp_port()
    proc = start_tracker(["--udp", f"[::]:{port}", "--metrics", f"127.0.0.1:{metrics}",
                          "--connect-limit", "off", "--announce-limit", "off"], os.path.join(work, "node.log"))
    try:
        wait_for_udp_tracker(port)
        info_hash = os.urandom(20)
        four = Peer(socket.AF_INET, port)
        four.connect()
        four.announce(info_hash, b"-DS0001-ipv4peer0001", 7001)
        sixes = []
        for i in range(80):
            p = Peer(socket.AF_INET6, port)
            p.connect()
            p.announce(info_hash, b"-DS0001-" + b"%012d" % i, 8000 + i)
            sixes.append(p)
        reply = four.announce(info_hash, b"-DS0001-ipv4peer0001", 7001)
        if (len(reply) - 20) % 6 or len(reply) != 20:
            fail(f"the IPv4 client got {len(reply) - 20} bytes of peers: only IPv6 peers besides it, none of its family")
        reply = sixes[0].announce(info_hash, b"-DS0001-" + b"%012d" % 0, 8000, num_want=200)
        peers = (len(reply) - 20) // 18
        if (len(reply) - 20) % 18 or peers != 67 or len(reply) > 1232:
            fail(f"num_want 200 over IPv6 gave {len(reply)} bytes ({peers} peers), not 67 peers within 1232 bytes")
        seeders, _, leechers = four.scrape(info_hash)
        if seeders + leechers != 81:
            fail(f"the scrape counts {seeders + leechers} peers, not 81 of both families")
        print(f"  IPv4 and IPv6 clients on one socket: each answered in its own format; 67 IPv6 peers in {len(reply)} bytes; "
              "the scrape counts all 81")

        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read().decode()

        def count(name, kind, family):
            m = re.search(rf'^{name}\{{(?=[^}}]*type="{kind}")(?=[^}}]*family="{family}")[^}}]*\}} (\S+)$', text, re.M)
            return float(m.group(1)) if m else None
        want = {("tracker_requests_total", "announce", "ipv4"): 2, ("tracker_requests_total", "announce", "ipv6"): 81,
                ("tracker_requests_total", "connect", "ipv6"): 80, ("tracker_replies_total", "announce", "ipv6"): 81,
                ("tracker_replies_total", "scrape", "ipv4"): 1}
        for (name, kind, family), n in want.items():
            if count(name, kind, family) != n:
                fail(f"{name}{{type={kind},family={family}}} is {count(name, kind, family)}, not {n}")
        print("  /metrics counts each family under its own label")
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
    print("PASS dual_stack")
