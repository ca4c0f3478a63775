#!/usr/bin/python3
"""The dashboard's HTTP surface cannot be used to exhaust a node, on a standalone node
started with a soft descriptor limit of 1,024 (systemd's default) and a higher hard one:

1. the node raises its soft descriptor limit to the hard one at start;
2. a request naming a foreign Host (DNS rebinding) gets a 421; IP literals and
   localhost are answered;
3. connections that never complete a request head are closed after the idle timeout
   (2,000 half-sent heads used to stay open for a minute);
4. connections beyond the cap are closed as they arrive, and the node keeps answering
   peers meanwhile (1,100 idle connections used to hold every descriptor);
5. event streams beyond the cap get a 503 (10,000 were accepted);
8. after 4,000 event streams have come and gone, the node's resident set is within 6 MB
   of what it was before them, and a second flood adds under 2 MB (glibc kept 8-9 MB of
   their buffers until the node trimmed its heap when the last stream closed);
7. a request body sent a byte a second, with the admin token, gets a 408 once the body
   timeout (10 s) has passed, and the connection closes (one was still accepted after
   20 s);
6. listings beyond a client's budget get a 429 (4 at once from one address), while
   another address and a token holder are still answered: one client cannot take every
   listing of the node.
"""
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_tcp_port, free_udp_port, stop, tracker_binary, wait_for_udp_tracker  # noqa: E402


def get(port, path, host=None, timeout=3, source="127.0.0.1", token=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    c.putrequest("GET", path, skip_host=True)
    c.putheader("Host", host or f"127.0.0.1:{port}")
    if token:
        c.putheader("Authorization", f"Bearer {token}")
    c.endheaders()
    r = c.getresponse()
    body = r.read() if r.getheader("Content-Type") != "text/event-stream" else b""
    return r.status, body, c


class SlowBody(threading.Thread):
    """PUT /api/access/mode with the admin token, its 100-byte body sent a byte a second
    for up to 25 s; keeps when the node answered and what."""

    def __init__(self, port, token):
        super().__init__(daemon=True)
        self.port, self.token = port, token
        self.answer, self.after = None, None

    def run(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.sendall((f"PUT /api/access/mode HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                      f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
                      "Content-Length: 100\r\n\r\n").encode())
        started = time.time()
        sock.setblocking(False)
        while time.time() < started + 25:
            try:
                sock.send(b" ")
            except OSError:
                pass
            time.sleep(1)
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            self.after = time.time() - started
            self.answer = data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"
            break
        sock.close()


def closed_by_server(sock):
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main():
    work = tempfile.mkdtemp(prefix="dashboard-limits-")
    udp, http_port = free_udp_port(), free_tcp_port()
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write("dashboard-limits-token-1\n")
    os.chmod(token_file, 0o600)
    proc = subprocess.Popen(["prlimit", "--nofile=1024:8192", tracker_binary(), "run", "--udp", f"127.0.0.1:{udp}",
                             "--http", f"127.0.0.1:{http_port}", "--admin-token-file", token_file],
                            stdout=open(os.path.join(work, "stdout"), "w"), stderr=open(os.path.join(work, "log"), "w"))
    held = []
    slow = None
    try:
        wait_for_udp_tracker(udp)
        deadline = time.time() + 10
        while True:
            try:
                get(http_port, "/api/node")
                break
            except OSError:
                if time.time() > deadline:
                    fail("the dashboard never answered")
                time.sleep(0.1)

        # 7. A slow body, started first: it runs beside the other checks.
        slow = SlowBody(http_port, "dashboard-limits-token-1")
        slow.start()

        # 1. Descriptors.
        limits = open(f"/proc/{proc.pid}/limits").read()
        line = next(l for l in limits.splitlines() if l.startswith("Max open files"))
        soft = int(line.split()[3])
        if soft != 8192:
            fail(f"the soft descriptor limit stayed {soft} (hard 8192): {line}")
        print(f"  descriptors: soft limit raised from 1024 to {soft}", flush=True)

        # 2. Host.
        for host, want in ((f"127.0.0.1:{http_port}", 200), (f"localhost:{http_port}", 200), ("[::1]", 200),
                           (f"rebind.example:{http_port}", 421), ("127.0.0.1.evil.example", 421)):
            status, body, _ = get(http_port, "/api/node", host=host)
            if status != want:
                fail(f"Host {host}: {status}, want {want} ({body[:120]!r})")
        print("  Host: IP literals and localhost answered, other names get 421", flush=True)

        # 3. Half-sent heads.
        half = []
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", http_port))
            s.sendall(b"GET /api/node HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            s.setblocking(False)
            half.append(s)
        time.sleep(13)
        still = sum(1 for s in half if not closed_by_server(s))
        for s in half:
            s.close()
        if still:
            fail(f"{still} of 200 connections with a half-sent request head are still open after 13 s")
        print("  200 half-sent request heads: all closed by the node within the idle timeout", flush=True)

        # 4. Connection cap, while a peer is served.
        for _ in range(600):
            s = socket.create_connection(("127.0.0.1", http_port))
            s.setblocking(False)
            held.append(s)
        time.sleep(1)
        open_now = sum(1 for s in held if not closed_by_server(s))
        if open_now > 300:
            fail(f"{open_now} of 600 idle dashboard connections are open: no connection cap")
        wait_for_udp_tracker(udp, timeout=3)
        if proc.poll() is not None:
            fail(f"the node exited ({proc.returncode})")
        print(f"  600 idle connections: {open_now} kept (the cap), the rest closed; peers still answered", flush=True)
        for s in held:
            s.close()
        held = []
        time.sleep(0.5)

        # 5. Event streams.
        streams, refused = [], 0
        for _ in range(40):
            status, _, conn = get(http_port, "/api/events")
            if status == 200:
                streams.append(conn)
            elif status == 503:
                refused += 1
                conn.close()
            else:
                fail(f"/api/events: {status}")
        for conn in streams:
            conn.close()
        if len(streams) > 32 or refused == 0:
            fail(f"{len(streams)} event streams accepted, {refused} refused")
        print(f"  40 event streams: {len(streams)} accepted, {refused} refused with 503", flush=True)

        # 6. Listings.
        statuses = [get(http_port, "/api/swarms")[0] for _ in range(60)]
        if statuses.count(429) == 0 or not 1 <= statuses.count(200) <= 12:
            fail(f"60 listings at once from one address: {statuses.count(200)} answered, {statuses.count(429)} refused")
        other = get(http_port, "/api/swarms", source="127.0.0.2")[0]
        holder = get(http_port, "/api/swarms", token="dashboard-limits-token-1")[0]
        if other != 200 or holder != 200:
            fail(f"after one address spent its listings, another got {other} and a token holder {holder}: want 200")
        print(f"  60 listings at once from one address: {statuses.count(200)} answered, {statuses.count(429)} got 429; "
              "another address and a token holder still answered", flush=True)

        # 8. A flood of event streams, twice: what it leaves behind.
        def rss():
            return int(next(l for l in open(f"/proc/{proc.pid}/status") if l.startswith("VmRSS")).split()[1])

        def stream_flood():
            def one():
                for _ in range(25):
                    socks = []
                    for _ in range(40):
                        s = socket.create_connection(("127.0.0.1", http_port), timeout=5)
                        s.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{http_port}\r\n\r\n".encode())
                        socks.append(s)
                    time.sleep(0.3)
                    for s in socks:
                        try:
                            s.recv(65536)
                        except OSError:
                            pass
                        s.close()
            threads = [threading.Thread(target=one) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(3)
            return rss()

        before = rss()
        first = stream_flood()
        second = stream_flood()
        if first - before > 6 * 1024 or second - first > 2 * 1024:
            fail(f"event streams leave memory behind: {before} KiB before, {first} after 4,000, {second} after 4,000 more")
        print(f"  4,000 event streams, twice: resident {before} -> {first} -> {second} KiB", flush=True)

        # 7. The slow body's answer.
        slow.join(30)
        if slow.answer is None or "408" not in slow.answer or not 9 <= slow.after <= 16:
            fail(f"a body sent a byte a second must get a 408 after about 10 s: {slow.answer!r} after {slow.after}")
        print(f"  a body sent a byte a second: {slow.answer} after {slow.after:.1f} s", flush=True)
    finally:
        for s in held:
            s.close()
        stop(proc)
    print("PASS dashboard_limits", flush=True)


main()
