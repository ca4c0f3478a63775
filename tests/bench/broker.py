#!/usr/bin/python3
"""What ActiveMQ itself costs per STOMP frame and per body byte, without a tracker.

First, one publisher sends frames of a given body size to a topic that 0, 1 or 2
subscribers read, several frames a write, and the broker's CPU (utime + stime from
/proc) is divided by the frames sent. A linear fit over the sizes gives each direction's
cost per frame and per byte, and from them what a cluster's traffic must cost at the
least (the suite's frames and body bytes per response, `--frames-in` and so on).

That fit is a lower bound: a cluster sends each frame in a write of its own. So then
the cluster's own shape is replayed: a "master" publishes one PREPARE of N announces of
`--announce-bytes` each a write, `--announces-per-second` / N PREPAREs a second, two
"followers" each answer every PREPARE with a vote of `--vote-bytes`, and the master reads
the votes. The broker's CPU per announce at N = 1/2, 1, 2 and 4 times `--announces` is
what this protocol's traffic costs ActiveMQ, with nothing of the tracker's own work in
it, and a fit over N splits it into a cost per transaction and one per announce.

Usage: broker.py [--seconds 6] [--frames-in 0.027] [--frames-out 0.037]
                 [--bytes-in 62] [--bytes-out 122] [--announces-per-second 60000]
                 [--announces 111] [--announce-bytes 58] [--vote-bytes 120]

Not a test: evidence for the performance work (issue 30), run by hand on a quiet machine.
It uses a broker already running on 127.0.0.1:61613 without authentication, or starts
one with the deploy unit's JVM flags and stops it afterwards.
"""
import argparse
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import broker_running, fail  # noqa: E402

PORT = 61613
TOPIC = "/topic/broker-bench"
SIZES = (64, 1024, 8192)


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
    reply = read_until(s, b"\0", "CONNECT")
    if not reply.startswith(b"CONNECTED"):
        fail(f"the broker refused CONNECT: {reply[:200]!r}")
    return s


def read_until(s, marker, step):
    """What `s` receives until `marker` has arrived."""
    reply = b""
    while marker not in reply:
        chunk = s.recv(4096)
        if not chunk:
            fail(f"the broker closed the connection at {step}")
        reply += chunk
    return reply


def chunks(s, stop):
    """What `s` receives until `stop` is set or the broker closes it."""
    s.settimeout(0.2)
    while not stop.is_set():
        try:
            chunk = s.recv(1 << 20)
        except socket.timeout:
            continue
        if not chunk:
            return
        yield chunk


def subscriber(ready, stop):
    s = connect()
    s.sendall(f"SUBSCRIBE\nid:1\ndestination:{TOPIC}\nack:auto\nreceipt:r\n\n\0".encode())
    # The RECEIPT says the subscription is in place before the publisher starts.
    read_until(s, b"RECEIPT", "SUBSCRIBE")
    ready.release()
    for _ in chunks(s, stop):
        pass
    s.close()


def broker_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(pid, size, subscribers, seconds, bytes_per_second):
    """Broker CPU µs per frame sent, at a steady rate of `bytes_per_second` of bodies."""
    stop, ready = threading.Event(), threading.Semaphore(0)
    threads = [threading.Thread(target=subscriber, args=(ready, stop)) for _ in range(subscribers)]
    for t in threads:
        t.start()
    for _ in threads:
        ready.acquire()
    time.sleep(0.5)
    publisher = connect()
    frame = f"SEND\ndestination:{TOPIC}\ncontent-length:{size}\n\n".encode() + os.urandom(size) + b"\0"
    rate = bytes_per_second / size
    before, start, sent = broker_cpu(pid), time.monotonic(), 0
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * rate)
        if sent < due:
            publisher.sendall(frame * (due - sent))
            sent = due
        time.sleep(0.001)
    time.sleep(0.5)
    used = broker_cpu(pid) - before
    stop.set()
    for t in threads:
        t.join()
    publisher.close()
    return 1e6 * used / sent, sent


def read_frames(s, on_frame, stop):
    """Calls `on_frame` for each whole frame read from `s` (bodies by content-length)."""
    buf = b""
    for chunk in chunks(s, stop):
        buf += chunk
        while True:
            buf = buf.lstrip(b"\n")
            end = buf.find(b"\n\n")
            if end < 0:
                break
            length = 0
            for line in buf[:end].split(b"\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(buf) < end + 2 + length + 1:
                break
            buf = buf[end + 2 + length + 1:]
            on_frame()


def replay(pid, a, announces):
    """Broker CPU µs per announce for the cluster's frames with `announces` a PREPARE,
    and the PREPAREs sent."""
    stop = threading.Event()
    votes = []

    def follower(ready):
        s = connect()
        s.sendall(b"SUBSCRIBE\nid:1\ndestination:/topic/replay-prepare\nack:auto\n\n\0")
        vote = b"SEND\ndestination:/topic/replay-vote\ncontent-length:%d\n\n" % a.vote_bytes + os.urandom(a.vote_bytes) + b"\0"
        ready.release()
        read_frames(s, lambda: s.sendall(vote), stop)
        s.close()

    def master_votes(s):
        read_frames(s, lambda: votes.append(1), stop)

    ready = threading.Semaphore(0)
    threads = [threading.Thread(target=follower, args=(ready,)) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in threads:
        ready.acquire()
    master = connect()
    master.sendall(b"SUBSCRIBE\nid:1\ndestination:/topic/replay-vote\nack:auto\n\n\0")
    reader = threading.Thread(target=master_votes, args=(master,))
    reader.start()
    time.sleep(0.5)
    size = announces * a.announce_bytes
    transactions = a.announces_per_second / announces
    prepare = f"SEND\ndestination:/topic/replay-prepare\ncontent-length:{size}\n\n".encode() + os.urandom(size) + b"\0"
    before, start, sent = broker_cpu(pid), time.monotonic(), 0
    while (elapsed := time.monotonic() - start) < a.seconds:
        # One PREPARE a write, as a master sends them.
        while sent < int(elapsed * transactions):
            master.sendall(prepare)
            sent += 1
        time.sleep(0.0005)
    time.sleep(0.5)
    used = broker_cpu(pid) - before
    stop.set()
    for t in threads + [reader]:
        t.join()
    master.close()
    if len(votes) < 2 * sent * 0.99:
        fail(f"only {len(votes)} votes came back for {sent} PREPAREs")
    return 1e6 * used / (sent * announces), sent


def fit(points):
    """Least squares of y = a + b × x over (x, y) points: (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--bytes-per-second", type=float, default=6e6, help="body bytes a second the publisher sends")
    parser.add_argument("--frames-in", type=float, default=0.027, help="frames into the broker per response")
    parser.add_argument("--frames-out", type=float, default=0.037, help="frames out of the broker per response")
    parser.add_argument("--bytes-in", type=float, default=62, help="body bytes into the broker per response")
    parser.add_argument("--bytes-out", type=float, default=122, help="body bytes out of the broker per response")
    parser.add_argument("--announces-per-second", type=float, default=60000, help="announces a second in the replay")
    parser.add_argument("--announces", type=int, default=111, help="announces a PREPARE carries in the replay (times 1/2 to 4)")
    parser.add_argument("--announce-bytes", type=int, default=58, help="bytes an announce takes in a PREPARE")
    parser.add_argument("--vote-bytes", type=int, default=120, help="body bytes of a vote")
    a = parser.parse_args()
    with broker_running(env={"ACTIVEMQ_JVM": "deploy"}):
        with open("/tmp/tracker-activemq/activemq.pid") as f:
            pid = int(f.read().strip())
        # The JIT compiles the broker's paths first; this round is not counted.
        run(pid, 1024, 2, a.seconds, a.bytes_per_second)
        cost = {}
        print(f"{'body bytes':>10} {'subscribers':>11} {'frames':>8} {'µs/frame':>9}")
        for subscribers in (0, 1, 2):
            for size in SIZES:
                us, sent = run(pid, size, subscribers, a.seconds, a.bytes_per_second)
                cost[(size, subscribers)] = us
                print(f"{size:>10} {subscribers:>11} {sent:>8} {us:>9.1f}", flush=True)
        # A frame in is what it costs with no subscriber; each copy out is the rest, per subscriber.
        in_frame, in_byte = fit([(s, cost[(s, 0)]) for s in SIZES])
        out_frame, out_byte = fit([(s, (cost[(s, 2)] - cost[(s, 0)]) / 2) for s in SIZES])
        print(f"in:  {in_frame:.1f} µs a frame + {1000 * in_byte:.2f} ns a body byte")
        print(f"out: {out_frame:.1f} µs a frame + {1000 * out_byte:.2f} ns a body byte (each subscriber's copy)")
        floor = a.frames_in * in_frame + a.bytes_in * in_byte + a.frames_out * out_frame + a.bytes_out * out_byte
        print(f"a cluster's traffic ({a.frames_in} frames and {a.bytes_in} bytes in, {a.frames_out} and "
              f"{a.bytes_out} out, per response): {floor:.2f} µs of broker CPU per response")
        print(f"replayed at {a.announces_per_second:.0f} announces a second, a PREPARE to 2 followers and a vote from each:")
        points = []
        for n in (max(1, a.announces // 2), a.announces, 2 * a.announces, 4 * a.announces):
            us, sent = replay(pid, a, n)
            points.append((1 / n, us))
            print(f"  {n:>5} announces a PREPARE ({n * a.announce_bytes:>6} bytes), {sent:>5} PREPAREs: "
                  f"{us:.2f} µs of broker CPU per announce", flush=True)
        per_announce, per_tx = fit(points)
        # µs per announce = per_announce + per_tx / N: a fit in 1/N.
        print(f"  fit: {per_announce:.2f} µs an announce + {per_tx:.0f} µs a transaction")


if __name__ == "__main__":
    main()
