#!/usr/bin/python3
"""A node's STOMP client against a hostile broker: a fake STOMP server that answers
CONNECT and SUBSCRIBE properly, then sends, one connection at a time, a MESSAGE whose
body is not a cluster message, a frame with an unknown command, a header with an
undefined escape, an ERROR frame, an oversized content-length and raw binary noise, each
after a CONNECTED whose heart-beat header is out of range (2^62, negative, not numbers);
then an ERROR frame carrying forged log lines (none may appear as a line of the log),
bodies without content-length sent slowly (decoded in CPU time linear in their size) and
one that never ends (refused at the frame cap). The node must log each, reconnect, keep
serving peers, and never crash."""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import fail, free_tcp_port, free_udp_port, log, tracker_binary  # noqa: E402

FORGED = b"2026-01-01T00:00:00+0000 critical tracker: FORGED LINE from the broker"
GARBAGE = [
    b"MESSAGE\ndestination:/topic/g\nmessage-id:1\nsubscription:sub-1\ncontent-length:5\n\nhello\0",
    b"BOGUS\nx:y\n\n\0",
    b"MESSAGE\ndestination:/topic/g\nbad:\\x\n\n\0",
    b"ERROR\nmessage:simulated broker failure\n\nsomething went wrong\0",
    b"MESSAGE\ndestination:/topic/g\ncontent-length:99999999999\n\n\0",
    os.urandom(2000).replace(b"\n", b"x") + b"\0",
    # An ERROR whose message and body carry whole forged log lines (the header's \n is a
    # STOMP escape for a newline).
    b"ERROR\nmessage:quota\\n" + FORGED + b"\n\nbody\n" + FORGED + b"\0",
    "slow bodies",
    "oversized body",
]
# The CONNECTED frame of each garbage connection: heart-beat values no arithmetic may
# trust (2^62 once made the client's interval arithmetic trap, at every reconnect).
HEARTBEATS = [b"4611686018427387904,0", b"0,4611686018427387904", b"-5,-5",
              b"99999999999999999999999,1", b"1000", b"x,y", b"1000,1000", b"0,0", b"0,0"]
assert len(HEARTBEATS) == len(GARBAGE)
# Bodies without content-length, each just under the frame cap (4 MiB), sent in 8 KiB
# writes: decoding them used to rescan the body after every read (quadratic).
SLOW_BODIES, SLOW_BODY_BYTES, SLOW_WRITE = 4, 3_900_000, 8192


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FakeBroker(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", port))
        self.connections = 0
        self.connects_seen = 0
        self.stop_flag = False
        self.node_pid = None
        self.slow_cpu = None
        self.slow_seconds = None

    def read_frame(self, conn, buf):
        while b"\0" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        frame, _, rest = buf.partition(b"\0")
        return frame.lstrip(b"\r\n"), rest

    def run(self):
        self.server.settimeout(0.5)
        while not self.stop_flag:
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            n = self.connections
            self.connections += 1
            try:
                self.serve(conn, n)
            except (ConnectionError, OSError):
                pass
            finally:
                conn.close()

    def serve(self, conn, n):
        conn.settimeout(5)
        buf = b""
        frame, buf = self.read_frame(conn, buf)
        if not frame.startswith(b"CONNECT"):
            return
        self.connects_seen += 1
        heartbeat = HEARTBEATS[n] if n < len(HEARTBEATS) else b"1000,1000"
        conn.sendall(b"CONNECTED\nversion:1.2\nheart-beat:" + heartbeat + b"\n\n\0")
        # Confirm the subscriptions, so the client is ready.
        deadline = time.time() + 2
        while time.time() < deadline:
            conn.settimeout(max(0.05, deadline - time.time()))
            try:
                frame, buf = self.read_frame(conn, buf)
            except socket.timeout:
                break
            if frame.startswith(b"SUBSCRIBE"):
                receipt = [line for line in frame.split(b"\n") if line.startswith(b"receipt:")]
                if receipt:
                    conn.sendall(b"RECEIPT\nreceipt-id:" + receipt[0][8:] + b"\n\n\0")
        if n < len(GARBAGE) and GARBAGE[n] == "slow bodies":
            # Well-formed frames, slowly: the node stays connected and decodes them all.
            header = b"MESSAGE\ndestination:/topic/g\nmessage-id:2\nsubscription:sub-1\n\n"
            body = b"A" * SLOW_BODY_BYTES
            cpu, started = cpu_seconds(self.node_pid), time.time()
            for _ in range(SLOW_BODIES):
                conn.sendall(header)
                for at in range(0, len(body), SLOW_WRITE):
                    conn.sendall(body[at:at + SLOW_WRITE])
                    time.sleep(0.0002)
                conn.sendall(b"\0")
            time.sleep(1)
            self.slow_cpu = cpu_seconds(self.node_pid) - cpu
            self.slow_seconds = time.time() - started
            return
        if n < len(GARBAGE) and GARBAGE[n] == "oversized body":
            # A body without content-length that never ends: refused at the cap, not buffered.
            conn.sendall(b"MESSAGE\ndestination:/topic/g\n\n")
            chunk = b"B" * 65536
            for _ in range(16 * 16):  # 16 MiB, four times the cap
                conn.sendall(chunk)
            time.sleep(0.3)
            return
        if n < len(GARBAGE):
            conn.sendall(GARBAGE[n])
            time.sleep(0.3)
            return
        # Well behaved from now on: heart-beats until the test ends.
        while not self.stop_flag:
            conn.sendall(b"\n")
            time.sleep(0.5)


def main():
    port = free_tcp_port()
    broker = FakeBroker(port)
    broker.start()
    udp = free_udp_port()
    http = free_tcp_port()
    work = tempfile.mkdtemp(prefix="broker-garbage-")
    log_path = os.path.join(work, "node.log")
    proc = subprocess.Popen([tracker_binary(), "run", "--id", "1", "--udp", f"127.0.0.1:{udp}",
                             "--broker", f"stomp://127.0.0.1:{port}", "--db", os.path.join(work, "n.sqlite"),
                             "--http", f"127.0.0.1:{http}", "--cluster", "g", "--keepalive", "250ms",
                             "--insecure-cluster"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    broker.node_pid = proc.pid
    try:
        deadline = time.time() + 60
        while time.time() < deadline and broker.connections <= len(GARBAGE):
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        text = open(log_path).read()
        if proc.poll() is not None:
            print(text[-3000:])
            fail(f"the node exited ({proc.returncode}) on garbage from the broker")
        if broker.connections <= len(GARBAGE):
            print(text[-3000:])
            fail(f"the node reconnected only {broker.connections} times for {len(GARBAGE)} kinds of garbage")
        for needle in ("dropped a cluster message", "unknown command", "undefined escape",
                       "broker sent ERROR", "over the limit", "malformed data from broker",
                       "broker heart-beat header out of range"):
            if needle not in text:
                print(text[-3000:])
                fail(f"the node's log does not mention '{needle}'")
        forged = [line for line in text.splitlines() if line.startswith(FORGED.decode())]
        if forged:
            fail(f"a broker's ERROR frame forged {len(forged)} log lines: {forged[0]!r}")
        if broker.slow_cpu is None:
            fail("the slow bodies were never sent")
        # Linear decoding: a few milliseconds of CPU a MiB; the rescans took seconds.
        mib = SLOW_BODIES * SLOW_BODY_BYTES / (1 << 20)
        log(f"{SLOW_BODIES} bodies of {SLOW_BODY_BYTES} bytes without content-length in {SLOW_WRITE}-byte writes: "
            f"node CPU {broker.slow_cpu:.2f} s over {broker.slow_seconds:.1f} s ({broker.slow_cpu / mib * 1000:.0f} ms/MiB)")
        if broker.slow_cpu > 0.05 * mib + 0.5:
            fail(f"decoding {mib:.0f} MiB of NUL-terminated bodies took {broker.slow_cpu:.2f} s of CPU: not linear")
        if text.count("body over the limit") < 1:
            fail("a body without content-length past the frame cap was not refused")
        time.sleep(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/node", timeout=2) as r:
            status = json.loads(r.read())
        if not status["brokerConnected"]:
            fail(f"the node is not connected to the (now well-behaved) broker: {status}")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        s.sendto(struct.pack(">QII", 0x41727101980, 0, 7), ("127.0.0.1", udp))
        data, _ = s.recvfrom(100)
        if len(data) != 16:
            fail("no connect reply from the node after the garbage")
        log(f"{len(GARBAGE)} kinds of broker garbage: each logged, {broker.connections - 1} reconnects, "
            f"node still serving (role {status['role']})")
    finally:
        broker.stop_flag = True
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("node did not stop on SIGTERM")


if __name__ == "__main__":
    main()
