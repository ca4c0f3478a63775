#!/usr/bin/python3
"""The HTTP tracker of a standalone node (`--http-tracker`), over real sockets:

1. announces and scrapes over HTTP share the swarms of UDP announces (one core): a UDP
   peer is handed to an HTTP client, compact (BEP 23) and as dictionaries (compact=0);
2. keep-alive and pipelining: three requests written at once get three answers, in order,
   on one connection;
3. hostile input: an unknown path gets a 404, a bad query a `failure reason`, a POST a
   405 and a close, a head longer than the bound a 431 before it ends; a head sent a byte
   at a time is closed after the idle timeout; connections beyond the cap are closed as
   they arrive; a client that pipelines requests and reads no answer has no more of them
   read, and is closed after the idle timeout (over HTTPS too); none of it stops the node;
4. behind a reverse proxy: X-Forwarded-For names the peer only from --trusted-proxies;
5. HTTPS: a client with the CA announces, one without it is refused; SIGHUP reads a new
   certificate, which the next connection gets;
6. python3-libtorrent downloads 1 MiB through http://127.0.0.1:PORT/announce;
7. /api/node and /metrics count the HTTP requests by outcome."""
import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (fail, free_tcp_port, free_udp_port, lt_session, seeded_torrent, start_tracker, stop,  # noqa: E402
                    wait_for_udp_tracker)

INFO_HASH = bytes(range(1, 21))


def query(peer_id, port, left=100, event="started", extra=""):
    return ("info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH) + "&peer_id=" + urllib.parse.quote_from_bytes(peer_id)
            + f"&port={port}&uploaded=0&downloaded=0&left={left}&event={event}{extra}")


def request(path, headers=(), version="1.1"):
    lines = [f"GET {path} HTTP/{version}", "Host: tracker"] + list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Reader:
    """Reads whole responses from a socket, keeping what arrived past each one."""

    def __init__(self, sock):
        self.sock, self.buffer = sock, b""

    def more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {self.buffer[:200]!r}")
        self.buffer += chunk

    def response(self):
        """(status, headers dict, body) of the next response."""
        while b"\r\n\r\n" not in self.buffer:
            self.more()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self.more()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), headers, body

    def closed(self):
        """Whether the peer closed the connection (after any bytes still buffered)."""
        try:
            return not self.buffer and self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def read_response(sock):
    return Reader(sock).response()


def bdecode(data):
    def parse(i):
        c = data[i:i + 1]
        if c == b"i":
            end = data.index(b"e", i)
            return int(data[i + 1:end]), end + 1
        if c == b"l":
            out, i = [], i + 1
            while data[i:i + 1] != b"e":
                v, i = parse(i)
                out.append(v)
            return out, i + 1
        if c == b"d":
            out, i = {}, i + 1
            while data[i:i + 1] != b"e":
                k, i = parse(i)
                v, i = parse(i)
                out[k] = v
            return out, i + 1
        colon = data.index(b":", i)
        n = int(data[i:colon])
        return data[colon + 1:colon + 1 + n], colon + 1 + n
    value, end = parse(0)
    if end != len(data):
        raise ValueError("trailing bytes")
    return value


def get(port, path, source="127.0.0.1", headers=(), tls=None):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    if tls:
        sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
    try:
        sock.sendall(request(path, headers))
        return read_response(sock)
    finally:
        sock.close()


def announce(port, peer_id, peer_port, **kw):
    tls = kw.pop("tls", None)
    source, headers = kw.pop("source", "127.0.0.1"), kw.pop("headers", ())
    status, _, body = get(port, "/announce?" + query(peer_id, peer_port, **kw), source=source, headers=headers, tls=tls)
    if status != 200:
        fail(f"announce got HTTP {status}: {body!r}")
    return bdecode(body)


def compact_peers(blob):
    return [(socket.inet_ntoa(blob[i:i + 4]), int.from_bytes(blob[i + 4:i + 6], "big")) for i in range(0, len(blob), 6)]


def udp_announce(udp, peer_id, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(bytes.fromhex("0000041727101980" "00000000" "00000001"), ("127.0.0.1", udp))
    cid = s.recvfrom(64)[0][8:16]
    packet = (cid + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + INFO_HASH + peer_id + bytes(8) + (0).to_bytes(8, "big")
              + bytes(8) + (2).to_bytes(4, "big") + bytes(4) + bytes(4) + (50).to_bytes(4, "big", signed=True) + port.to_bytes(2, "big"))
    s.sendto(packet, ("127.0.0.1", udp))
    reply = s.recvfrom(2048)[0]
    s.close()
    if int.from_bytes(reply[:4], "big") != 1:
        fail(f"UDP announce refused: {reply[8:]!r}")


def core_and_wire(udp, http):
    udp_announce(udp, b"-UD0001-000000000001", 7001)
    reply = announce(http, b"-HT0001-000000000001", 7002)
    peers = compact_peers(reply[b"peers"])
    if reply[b"complete"] != 1 or reply[b"incomplete"] != 1 or peers != [("127.0.0.1", 7001)]:
        fail(f"an HTTP announce must see the UDP seeder: {reply}")
    if not (reply[b"min interval"] <= reply[b"interval"]):
        fail(f"min interval above interval: {reply}")
    listed = announce(http, b"-HT0001-000000000002", 7003, left=0, extra="&compact=0")
    ports = sorted(p[b"port"] for p in listed[b"peers"])
    if ports != [7001, 7002] or any(p[b"ip"] != b"127.0.0.1" for p in listed[b"peers"]):
        fail(f"compact=0 must list the other peers as dictionaries: {listed}")
    status, _, body = get(http, "/scrape?info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH))
    files = bdecode(body)[b"files"]
    if status != 200 or files.get(INFO_HASH) != {b"complete": 2, b"downloaded": 0, b"incomplete": 1}:
        fail(f"scrape: {status} {body!r}")
    print("one core: the UDP seeder is handed to HTTP clients, compact and as dictionaries; scrape counts both", flush=True)


def keep_alive_and_pipelining(http):
    sock = socket.create_connection(("127.0.0.1", http), timeout=5)
    reader = Reader(sock)
    paths = ["/announce?" + query(b"-PL0001-00000000000%d" % i, 7100 + i) for i in range(3)]
    sock.sendall(b"".join(request(p) for p in paths))
    leechers = []
    for _ in paths:
        status, headers, body = reader.response()
        if status != 200 or headers.get("connection") != "keep-alive":
            fail(f"pipelined request: {status} {headers}")
        leechers.append(bdecode(body)[b"incomplete"])
    if leechers != sorted(leechers) or len(set(leechers)) != 3:
        fail(f"three pipelined announces must be answered in order, each seeing the one before: {leechers}")
    sock.sendall(request("/scrape?info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH), ["Connection: close"]))
    status, headers, _ = reader.response()
    if headers.get("connection") != "close" or not reader.closed():
        fail("Connection: close must be answered and the connection closed")
    sock.close()
    print(f"keep-alive: three pipelined announces answered in order on one connection (leechers {leechers})", flush=True)


def hostile(http, idle_timeout, cap):
    status, _, body = get(http, "/nothing-here")
    if status != 404 or b"failure reason" not in body:
        fail(f"unknown path: {status} {body!r}")
    status, _, body = get(http, "/announce?info_hash=short&peer_id=x")
    if status != 200 or b"info_hash must be 20 bytes" not in body:
        fail(f"a bad query must get a failure reason naming the parameter: {body!r}")
    for raw, code in [(b"POST /announce HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405),
                      (b"GET /announce?" + b"a" * 20000, 431)]:
        sock = socket.create_connection(("127.0.0.1", http), timeout=5)
        sock.sendall(raw)
        reader = Reader(sock)
        status, _, _ = reader.response()
        if status != code or not reader.closed():
            fail(f"{raw[:20]!r}…: expected {code} and a close, got {status}")
        sock.close()
    # Slowloris: a head a byte at a time is closed after the idle timeout.
    sock = socket.create_connection(("127.0.0.1", http), timeout=idle_timeout + 5)
    started = time.time()
    closed = None
    for byte in b"GET /announce?info_hash=" + b"a" * 200:
        try:
            sock.send(bytes([byte]))
            time.sleep(0.1)
            sock.setblocking(False)
            try:
                if sock.recv(1) == b"":
                    closed = time.time() - started
                    break
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
        except (BrokenPipeError, ConnectionResetError):
            closed = time.time() - started
            break
    sock.close()
    if closed is None or not (idle_timeout - 0.5 <= closed <= idle_timeout + 3):
        fail(f"a trickled head must be closed after the idle timeout of {idle_timeout} s (closed after {closed})")
    # The connection cap: the ones beyond it are closed as they arrive.
    held = [socket.create_connection(("127.0.0.1", http), timeout=5) for _ in range(cap)]
    time.sleep(0.3)
    extra = socket.create_connection(("127.0.0.1", http), timeout=5)
    try:
        extra.sendall(request("/scrape?info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH)))
        refused = extra.recv(1) == b""
    except ConnectionResetError:
        refused = True
    for s in held + [extra]:
        s.close()
    if not refused:
        fail(f"a connection beyond the cap of {cap} was served")
    time.sleep(0.3)
    status, _, _ = get(http, "/scrape?info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH))
    if status != 200:
        fail("the tracker must serve again once connections closed")
    unread = unread_answers(http, idle_timeout)
    print(f"hostile: 404, failure reason, 405 and 431 with a close; a trickled head closed after {closed:.1f} s; "
          f"connection {cap + 1} closed at once; pipelined requests whose answers go unread are read no more and closed "
          f"({unread} bytes of answers left for the client); still serving", flush=True)


def unread_answers(port, idle_timeout, tls=None):
    """A client that pipelines announces and reads no answer: once its answers fill the
    sockets, the listener reads no more of its requests (a send still blocks a second
    later), and it has closed the connection by the idle timeout after that (what the
    client then reads ends). Returns how many bytes of answers the client could read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if tls:
        sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
    sock.setblocking(False)
    batch = request("/announce?" + query(b"-UR0001-000000000001", 7401)) * 64
    offset, started, blocked_since = 0, time.time(), None
    kind = "HTTPS" if tls else "HTTP"

    def send_some():
        nonlocal offset
        try:
            offset = (offset + sock.send(batch[offset:])) % len(batch)
            return True
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return False
        except (OSError, ssl.SSLError) as error:
            fail(f"{kind}: a client pipelining requests was closed before it stopped reading answers ({error!r})")
    while time.time() - started < 20:
        if send_some():
            blocked_since = None
            continue
        blocked_since = blocked_since or time.time()
        if time.time() - blocked_since > 1:
            break
        time.sleep(0.02)
    if blocked_since is None or send_some():
        fail(f"{kind}: a client reading no answers still has its requests read")
    time.sleep(idle_timeout + 1)
    sock.settimeout(5)
    answers = 0
    try:
        while chunk := sock.recv(65536):
            answers += len(chunk)
    except socket.timeout:
        fail(f"{kind}: a client reading no answers must be closed after the idle timeout (still open after "
             f"{time.time() - blocked_since:.1f} s)")
    except (ConnectionResetError, ssl.SSLError):
        pass
    sock.close()
    return answers


def proxies(http):
    forwarded = ["X-Forwarded-For: 6.6.6.6, 198.51.100.7"]  # a client-written entry on the left
    announce(http, b"-PX0001-000000000001", 7201, source="127.0.0.2", headers=forwarded)
    announce(http, b"-PX0001-000000000002", 7202, source="127.0.0.1", headers=["X-Forwarded-For: 203.0.113.9"])
    listed = announce(http, b"-PX0001-000000000003", 7203, left=0, extra="&compact=0&numwant=50")
    by_port = {p[b"port"]: p[b"ip"].decode() for p in listed[b"peers"]}
    if by_port.get(7201) != "198.51.100.7" or by_port.get(7202) != "127.0.0.1":
        fail(f"X-Forwarded-For must count from 127.0.0.2 (trusted) only: {by_port}")
    print("proxies: X-Forwarded-For names the peer behind 127.0.0.2 (trusted), and is ignored from 127.0.0.1", flush=True)


def make_certificates(work):
    ca_key, ca = os.path.join(work, "ca.key"), os.path.join(work, "ca.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                    "-subj", "/CN=test CA", "-keyout", ca_key, "-out", ca], check=True, capture_output=True)

    def leaf(name):
        key, csr, cert = (os.path.join(work, f"{name}.{ext}") for ext in ("key", "csr", "pem"))
        ext = os.path.join(work, f"{name}.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                        "-keyout", key, "-out", csr], check=True, capture_output=True)
        subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
                        "-extfile", ext, "-out", cert], check=True, capture_output=True)
        return cert, key
    return ca, leaf


def https(work):
    ca, leaf = make_certificates(work)
    first_cert, first_key = leaf("first")
    cert, key = os.path.join(work, "server.pem"), os.path.join(work, "server.key")
    shutil.copy(first_cert, cert)
    shutil.copy(first_key, key)
    udp, port = free_udp_port(), free_tcp_port()
    proc = start_tracker(["--udp", f"127.0.0.1:{udp}", "--http-tracker", f"127.0.0.1:{port}",
                          "--http-tracker-cert-file", cert, "--http-tracker-key-file", key, "--http-tracker-idle-timeout", "2"],
                         os.path.join(work, "https.log"))
    try:
        wait_for_udp_tracker(udp)
        trusting = ssl.create_default_context(cafile=ca)
        reply = announce(port, b"-TL0001-000000000001", 7301, tls=trusting)
        if b"interval" not in reply:
            fail(f"HTTPS announce: {reply}")
        try:
            get(port, "/announce?" + query(b"-TL0001-000000000002", 7302), tls=ssl.create_default_context())
            fail("a client without the CA must refuse the tracker's certificate")
        except ssl.SSLCertVerificationError:
            pass

        def served_cert():
            sock = trusting.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5), server_hostname="127.0.0.1")
            der = sock.getpeercert(binary_form=True)
            sock.close()
            return hashlib.sha256(der).hexdigest()
        before = served_cert()
        second_cert, second_key = leaf("second")
        shutil.copy(second_cert, cert)
        shutil.copy(second_key, key)
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and served_cert() == before:
            time.sleep(0.2)
        if served_cert() == before:
            fail("SIGHUP did not load the rotated certificate")
        announce(port, b"-TL0001-000000000003", 7303, tls=trusting)
        unread = unread_answers(port, 2, tls=trusting)
        announce(port, b"-TL0001-000000000004", 7304, tls=trusting)
        print("HTTPS: announced with the CA, refused without it; SIGHUP served the rotated certificate; pipelined requests "
              f"whose answers go unread are read no more and closed ({unread} bytes of answers left)", flush=True)
    finally:
        code = stop(proc)
        if code not in (0, None):
            print(open(os.path.join(work, "https.log")).read()[-3000:])
            fail(f"HTTPS tracker exited with {code}")


def libtorrent_download(http, work):
    try:
        import libtorrent as lt
    except ImportError as error:
        fail(f"python3-libtorrent is not importable by {sys.executable} ({error}); run scripts/setup.sh")
    seed_dir, leech_dir = os.path.join(work, "seed"), os.path.join(work, "leech")
    os.makedirs(leech_dir)
    info, payload = seeded_torrent(lt, seed_dir, f"http://127.0.0.1:{http}/announce")
    seeder, leecher = lt_session(lt, "127.0.0.1", free_tcp_port()), lt_session(lt, "127.0.0.1", free_tcp_port())
    seeder.add_torrent({"ti": info, "save_path": seed_dir, "flags": lt.torrent_flags.seed_mode})
    time.sleep(1)
    handle = leecher.add_torrent({"ti": lt.torrent_info(info), "save_path": leech_dir})
    started = time.time()
    while time.time() < started + 60 and not handle.status().is_seeding:
        time.sleep(0.2)
    st = handle.status()
    if not st.is_seeding:
        fail(f"libtorrent over HTTP did not complete: progress {st.progress:.2f}, tracker '{st.current_tracker}', peers {st.num_peers}")
    with open(os.path.join(leech_dir, "payload.bin"), "rb") as f:
        if hashlib.sha1(f.read()).digest() != hashlib.sha1(payload).digest():
            fail("libtorrent over HTTP: downloaded bytes differ")
    print(f"libtorrent downloaded 1 MiB through http://127.0.0.1:{http}/announce in {time.time() - started:.1f} s", flush=True)


def counted(dashboard):
    import json
    import urllib.request
    node = json.load(urllib.request.urlopen(f"http://127.0.0.1:{dashboard}/api/node", timeout=5))
    counts = node.get("httpTracker", {})
    if counts.get("announce", 0) < 10 or counts.get("not-found", 0) < 1 or counts.get("idle-closed", 0) < 1:
        fail(f"/api/node must count HTTP requests by outcome: {counts}")
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{dashboard}/metrics", timeout=5).read().decode()
    exported = re.search(r'^tracker_http_requests_total\{outcome="announce"\} ([\d.]+)$', metrics, re.M)
    if not exported or float(exported.group(1)) < counts["announce"]:
        lines = [line for line in metrics.splitlines() if "http_requests" in line]
        fail(f"/metrics must export the HTTP counts: {lines}")
    print(f"counted: {counts}", flush=True)


def main():
    work = tempfile.mkdtemp(prefix="http-tracker-")
    udp, http, dashboard = free_udp_port(), free_tcp_port(), free_tcp_port()
    idle, cap = 2, 24
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}", "--http-tracker", f"127.0.0.1:{http}", "--interval", "5",
                             "--http", f"127.0.0.1:{dashboard}",
                             "--http-tracker-idle-timeout", str(idle), "--http-tracker-max-connections", str(cap),
                             "--trusted-proxies", "127.0.0.2"], os.path.join(work, "tracker.log"))
    ok = False
    try:
        wait_for_udp_tracker(udp)
        core_and_wire(udp, http)
        keep_alive_and_pipelining(http)
        hostile(http, idle, cap)
        proxies(http)
        libtorrent_download(http, work)
        counted(dashboard)
        https(work)
        if tracker.poll() is not None:
            fail("the tracker died")
        ok = True
    finally:
        code = stop(tracker)
        if not ok or code not in (0, None):
            print(open(os.path.join(work, "tracker.log")).read()[-4000:])
        if code not in (0, None):
            fail(f"tracker exited with {code} on SIGTERM")
        shutil.rmtree(work, ignore_errors=True)
    print("PASS http_tracker", flush=True)


if __name__ == "__main__":
    main()
