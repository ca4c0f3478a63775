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
6. listings beyond the node-wide budget get a 429.
"""
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_tcp_port, free_udp_port, stop, tracker_binary, wait_for_udp_tracker  # noqa: E402


def get(port, path, host=None, timeout=3):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.putrequest("GET", path, skip_host=True)
    c.putheader("Host", host or f"127.0.0.1:{port}")
    c.endheaders()
    r = c.getresponse()
    body = r.read() if r.getheader("Content-Type") != "text/event-stream" else b""
    return r.status, body, c


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
    proc = subprocess.Popen(["prlimit", "--nofile=1024:8192", tracker_binary(), "run", "--udp", f"127.0.0.1:{udp}",
                             "--http", f"127.0.0.1:{http_port}"],
                            stdout=open(os.path.join(work, "stdout"), "w"), stderr=open(os.path.join(work, "log"), "w"))
    held = []
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
        if statuses.count(429) == 0 or statuses.count(200) == 0:
            fail(f"60 listings at once: {statuses.count(200)} answered, {statuses.count(429)} refused")
        print(f"  60 listings at once: {statuses.count(200)} answered, {statuses.count(429)} got 429", flush=True)
    finally:
        for s in held:
            s.close()
        stop(proc)
    print("PASS dashboard_limits", flush=True)


main()
