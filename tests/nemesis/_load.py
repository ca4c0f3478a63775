"""The nemesis's client, run in the client namespace: PEERS peers announcing through the
group, each request sent once with a transaction id of its own and a `downloaded` value
no other request has (its sequence number), so a record in a node's file names the
request it came from. A peer has one request in flight at most; after REPLY_WAIT_S
without an answer it moves on (the request is never sent again).

Every datagram that answers one of our transaction ids is logged, duplicates included,
one JSON object a line in OUT:
  {"k": "s", "tid", "p", "seq", "ev", "t"}    an announce sent (ev: 2 started, 0 none, 3 stopped)
  {"k": "c", "tid", "t"}                      a connect sent
  {"k": "r", "tid", "a", "t", "src", "h"}     a datagram answering TID (a: BEP 15 action; h:
                                              a CRC-32 of its bytes, so a copy the network
                                              made can be told from a second answer)
SIGTERM ends it (the log is flushed)."""
import json
import os
import random
import signal
import socket
import struct
import sys
import time
import zlib

MAGIC = 0x41727101980
REPLY_WAIT_S = 1.5


def main():
    group, port, peers, out_path, seed, info_hash = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                                      int(sys.argv[5]), bytes.fromhex(sys.argv[6]))
    rng = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", 0))
    sock.settimeout(0.05)
    out = open(out_path, "w", buffering=1 << 16)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    next_tid = rng.getrandbits(31)
    kinds = {}          # tid -> "c" or peer number
    waiting = {}        # peer -> deadline
    started = [False] * peers
    connection = None
    connect_tid, connect_until = None, 0.0
    sequence = 0

    def write(record):
        out.write(json.dumps(record, separators=(",", ":")) + "\n")

    def tid():
        nonlocal next_tid
        next_tid = (next_tid + 1) & 0xFFFFFFFF
        return next_tid

    flushed = time.time()
    while not stopping:
        now = time.time()
        if connection is None and now >= connect_until:
            connect_tid, connect_until = tid(), now + REPLY_WAIT_S
            kinds[connect_tid] = "c"
            sock.sendto(struct.pack(">QII", MAGIC, 0, connect_tid), (group, port))
            write({"k": "c", "tid": connect_tid, "t": now})
        if connection is not None:
            for p in range(peers):
                if p in waiting and waiting[p] > now:
                    continue
                waiting.pop(p, None)
                if rng.random() >= 0.3:
                    continue
                event = 2 if not started[p] else (3 if rng.random() < 0.3 else 0)
                sequence += 1
                t = tid()
                kinds[t] = p
                peer_id = b"-NEM001-" + p.to_bytes(12, "big")
                packet = struct.pack(">QII20s20sQQQIIIiH", connection, 1, t, info_hash, peer_id, sequence, 100, 0, event, 0, p + 1,
                                     50, 7000 + p)
                sock.sendto(packet, (group, port))
                write({"k": "s", "tid": t, "p": p, "seq": sequence, "ev": event, "t": now})
                waiting[p] = now + REPLY_WAIT_S
                # A peer counts as started once it sent a start: whether it was answered
                # is the judge's business, not the load's.
                started[p] = event != 3
        deadline = time.time() + 0.05
        while (remaining := deadline - time.time()) > 0:
            sock.settimeout(remaining)
            try:
                data, source = sock.recvfrom(4096)
            except socket.timeout:
                break
            if len(data) < 8:
                continue
            action, answered = struct.unpack(">II", data[:8])
            if answered not in kinds:
                continue
            write({"k": "r", "tid": answered, "a": action, "t": time.time(), "src": source[0], "h": zlib.crc32(data)})
            kind = kinds[answered]
            if kind == "c":
                if action == 0 and len(data) >= 16 and answered == connect_tid:
                    connection = struct.unpack(">Q", data[8:16])[0]
            else:
                waiting.pop(kind, None)
                if action == 3 and b"connection" in data[8:]:
                    connection = None
        if time.time() - flushed > 0.5:
            out.flush()
            flushed = time.time()
    out.flush()
    out.close()


if __name__ == "__main__":
    main()
