#!/usr/bin/python3
"""`tracker run --threads 2`: two event loops, each on its own SO_REUSEPORT socket on the
same address, answer from one tracker. Peers announcing from 64 source ports (the kernel
hashes each to one of the two sockets) all land in one swarm, every announce sees the
peers before it, and the dashboard counts every datagram once."""
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_tcp_port, free_udp_port, scrape, start_tracker, stop, wait_for_udp_tracker  # noqa: E402

PEERS = 64


def request(sock, port, payload):
    sock.sendto(payload, ("127.0.0.1", port))
    data, _ = sock.recvfrom(4096)
    return data


def announce(port, info_hash, peer_id, peer_port, rng):
    """connect + announce from a fresh source socket; returns (seeders, leechers, peers)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    try:
        tid = rng.getrandbits(32)
        data = request(s, port, struct.pack(">QII", 0x41727101980, 0, tid))
        action, got_tid, connection_id = struct.unpack(">IIQ", data[:16])
        if (action, got_tid) != (0, tid):
            fail(f"connect answer {data.hex()}")
        tid = rng.getrandbits(32)
        body = struct.pack(">QII20s20sQQQIIIiH", connection_id, 1, tid, info_hash, peer_id,
                           0, 1000, 0, 0, 0, 0, 50, peer_port)
        data = request(s, port, body)
        action, got_tid, _interval, leechers, seeders = struct.unpack(">IIIII", data[:20])
        if (action, got_tid) != (1, tid):
            fail(f"announce answer {data[:64].hex()}")
        return seeders, leechers, (len(data) - 20) // 6
    except socket.timeout:
        fail(f"no answer to peer {peer_port}")
    finally:
        s.close()


def sockets_on(port):
    out = subprocess.run(["ss", "-H", "-u", "-l", "-n", f"sport = :{port}"], capture_output=True, text=True)
    return len(out.stdout.strip().splitlines())


def main():
    work = tempfile.mkdtemp(prefix="threads-")
    udp, http = free_udp_port(), free_tcp_port()
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}", "--threads", "2", "--http", str(http)],
                            os.path.join(work, "tracker.log"))
    try:
        wait_for_udp_tracker(udp)
        if sockets_on(udp) != 2:
            fail(f"expected 2 sockets on udp port {udp}, ss shows {sockets_on(udp)}")
        rng = random.Random(2)
        info_hash = bytes(range(20))
        for i in range(PEERS):
            seeders, leechers, peers = announce(udp, info_hash, b"-TT0001-" + b"%012d" % i, 10000 + i, rng)
            if (seeders, leechers, peers) != (0, i + 1, min(i, 50)):
                fail(f"announce {i + 1}: {leechers} leechers, {peers} peers back (want {i + 1} and {min(i, 50)}): "
                     "the sockets do not share one swarm")
        counts = scrape(udp, info_hash.hex())
        if counts["leechers"] != PEERS:
            fail(f"scrape: {counts}")
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/node", timeout=10) as r:
            node = json.load(r)
        status = node.get("status", node)
        # wait_for_udp_tracker's connects, 2 per peer, the scrape's connect and scrape.
        if status.get("peers") != PEERS or status.get("announces") != PEERS or status.get("datagrams", 0) < 2 * PEERS + 2:
            fail(f"/api/node: {status}")
        print(f"{PEERS} peers from {PEERS} source ports over 2 sockets: one swarm; /api/node counts "
              f"{status['datagrams']} datagrams, {status['announces']} announces", flush=True)
    finally:
        stop(tracker)
    print("PASS standalone_threads", flush=True)


main()
