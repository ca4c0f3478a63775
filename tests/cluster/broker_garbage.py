#!/usr/bin/python3
"""A node's STOMP client against a hostile broker: a fake STOMP server that answers
CONNECT and SUBSCRIBE properly, then sends, one connection at a time, a MESSAGE whose
body is not a cluster message, a frame with an unknown command, a header with an
undefined escape, an ERROR frame, an oversized content-length and raw binary noise, each
after a CONNECTED whose heart-beat header is out of range (2^62, negative, not numbers).
The node must log each, reconnect, keep serving peers, and never crash."""
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

GARBAGE = [
    b"MESSAGE\ndestination:/topic/g\nmessage-id:1\nsubscription:sub-1\ncontent-length:5\n\nhello\0",
    b"BOGUS\nx:y\n\n\0",
    b"MESSAGE\ndestination:/topic/g\nbad:\\x\n\n\0",
    b"ERROR\nmessage:simulated broker failure\n\nsomething went wrong\0",
    b"MESSAGE\ndestination:/topic/g\ncontent-length:99999999999\n\n\0",
    os.urandom(2000).replace(b"\n", b"x") + b"\0",
]
# The CONNECTED frame of each garbage connection: heart-beat values no arithmetic may
# trust (2^62 once made the client's interval arithmetic trap, at every reconnect).
HEARTBEATS = [b"4611686018427387904,0", b"0,4611686018427387904", b"-5,-5",
              b"99999999999999999999999,1", b"1000", b"x,y"]
assert len(HEARTBEATS) == len(GARBAGE)


class FakeBroker(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", port))
        self.connections = 0
        self.connects_seen = 0
        self.stop_flag = False

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
