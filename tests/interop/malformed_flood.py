#!/usr/bin/python3
"""`tracker run` keeps answering after a flood of malformed datagrams."""
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_udp_port, scrape, start_tracker, stop, tracker_binary, wait_for_udp_tracker  # noqa: E402


def main():
    work = tempfile.mkdtemp(prefix="flood-")
    udp = free_udp_port()
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}"], os.path.join(work, "tracker.log"))
    try:
        wait_for_udp_tracker(udp)
        rng = random.Random(15)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        kinds = 0
        for i in range(50_000):
            kind = i % 6
            if kind == 0:
                data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 16)))
            elif kind == 1:
                data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(16, 1500)))
            elif kind == 2:  # announce header, truncated body
                data = struct.pack(">QII", rng.getrandbits(64), 1, i) + os.urandom(rng.randrange(0, 82))
            elif kind == 3:  # scrape with too many hashes
                data = struct.pack(">QII", rng.getrandbits(64), 2, i) + os.urandom(20 * 80)
            elif kind == 4:  # connect with a bad magic
                data = struct.pack(">QII", 0x41727101981, 0, i)
            else:  # well-formed announce with a forged connection id
                data = struct.pack(">QII", rng.getrandbits(64), 1, i) + os.urandom(82)
            try:
                s.sendto(data, ("127.0.0.1", udp))
            except BlockingIOError:
                pass
            kinds += 1
        s.close()
        if tracker.poll() is not None:
            fail(f"tracker died during the flood (exit {tracker.returncode})")
        wait_for_udp_tracker(udp)
        info_hash = "aa" * 20
        out = subprocess.run([tracker_binary(), "client", "announce", f"udp://127.0.0.1:{udp}", "--info-hash", info_hash,
                              "--port", "7777", "--left", "0"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            fail(f"announce after the flood failed: {out.stderr}")
        counts = scrape(udp, info_hash)
        if counts["seeders"] != 1:
            fail(f"scrape after the flood: {counts}")
        print(f"sent {kinds} malformed datagrams; tracker still answers: {counts}", flush=True)
    finally:
        stop(tracker)
    print("PASS malformed_flood", flush=True)


main()
