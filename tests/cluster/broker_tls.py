#!/usr/bin/python3
"""Nodes reach the broker over TLS (`stomp+ssl://`), and refuse a broker they cannot
verify. A TLS front (Python's ssl module, a certificate made here with openssl) relays
to the test ActiveMQ. Two nodes given the front's CA join through it and serve peers;
/api/node names the broker as stomp+ssl://. A node given another CA, and a node dialling
a front whose certificate does not name the address dialled, stay out: each says why in
its log and in /api/node's broker.problem, keeps retrying and keeps running. A TLS file
that is missing or not PEM stops `tracker run` before it starts, naming the file."""
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_tcp_port, free_udp_port, log, relay, tracker_binary  # noqa: E402


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(work, name):
    key, cert = os.path.join(work, f"{name}.key"), os.path.join(work, f"{name}.pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
            "-out", cert, "-days", "2", "-subj", f"/CN={name}")
    return key, cert


def make_server_cert(work, name, ca, san):
    key, csr, cert = (os.path.join(work, f"{name}.{x}") for x in ("key", "csr", "pem"))
    ext = os.path.join(work, f"{name}.ext")
    with open(ext, "w") as f:
        f.write(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
            "-subj", f"/CN={name}")
    openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial", "-out", cert, "-days", "2",
            "-extfile", ext)
    return key, cert


class TLSFront(threading.Thread):
    """Accepts TLS on a loopback port and relays each connection to the plain broker."""

    def __init__(self, cert, key, broker_port=61613):
        super().__init__(daemon=True)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.port = free_tcp_port()
        self.broker_port = broker_port
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.handshakes_failed = 0

    def run(self):
        while True:
            raw, _ = self.listener.accept()
            try:
                conn = self.context.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                self.handshakes_failed += 1
                raw.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.broker_port))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=relay, args=(a, b), daemon=True).start()


def main():
    print(activemq("start"))
    work = tempfile.mkdtemp(prefix="broker-tls-")
    ca = make_ca(work, "tracker-test-ca")
    other_ca = make_ca(work, "another-ca")
    by_address = make_server_cert(work, "broker-ip", ca, "IP:127.0.0.1")
    by_name_only = make_server_cert(work, "broker-name", ca, "DNS:broker.invalid")
    front = TLSFront(by_address[1], by_address[0])
    front.start()
    misnamed = TLSFront(by_name_only[1], by_name_only[0])
    misnamed.start()
    log(f"TLS fronts on 127.0.0.1:{front.port} (certificate for 127.0.0.1) and :{misnamed.port} "
        f"(certificate for broker.invalid only)")

    # Bad TLS files are configuration errors, before anything binds.
    for flags, named in ((["--broker-ca-file", os.path.join(work, "missing.pem")], "missing.pem"),
                         (["--broker-ca-file", os.path.join(work, "broker-ip.ext")], "broker-ip.ext"),
                         (["--broker-cert-file", by_address[1]], "--broker-key-file")):
        out = subprocess.run([tracker_binary(), "run", "--id", "9", "--group", "239.255.42.99:6999", "--interface", "lo",
                              "--broker", f"stomp+ssl://127.0.0.1:{front.port}", "--db", os.path.join(work, "x.sqlite"),
                              "--insecure-cluster", *flags], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 or named not in out.stderr + out.stdout:
            fail(f"tracker run {' '.join(flags)} should stop naming {named}: exit {out.returncode}, {out.stderr.strip()}")
    log("missing, non-PEM and half-given TLS files stop `tracker run` and name what is wrong")

    url = f"stomp+ssl://127.0.0.1:{front.port}"
    cluster = Cluster(f"tls{os.getpid()}", free_udp_port(), broker=url)
    try:
        trusted = cluster.peer_args + ["--broker-ca-file", ca[1]]
        cluster.add(1, peer_args=trusted)
        cluster.add(2, peer_args=trusted)
        master = cluster.wait_converged(timeout=30)
        for n in cluster.nodes:
            broker = n.api()["broker"]
            if not broker["connected"] or broker.get("connectedTo") != url or broker.get("problem"):
                fail(f"node {n.node_id} over TLS: {broker}")
        client = GroupClient(cluster.group)
        if client.connect(timeout=3.0) is None:
            fail("no connect answered by the TLS-connected cluster")
        reply, _ = client.announce_first(os.urandom(20), os.urandom(20), 6881, timeout=3.0)
        if reply is None or len(reply) < 20:
            fail("no announce answered through the TLS-connected cluster")
        log(f"2 nodes joined through {url}, master {master.node_id}, an announce answered")

        strangers = [
            (3, url, other_ca[1], "does not verify against --broker-ca-file"),
            (4, f"stomp+ssl://127.0.0.1:{misnamed.port}", ca[1], "does not name 127.0.0.1"),
        ]
        for node_id, broker_url, ca_file, why in strangers:
            cluster.add(node_id, broker=broker_url, peer_args=cluster.peer_args + ["--broker-ca-file", ca_file])
        time.sleep(6)
        for node in cluster.nodes[2:]:
            if not node.alive():
                fail(f"node {node.node_id} died on a broker it could not verify:\n{node.tail()}")
            broker = node.api()["broker"]
            why = dict((s[0], s[3]) for s in strangers)[node.node_id]
            if broker["connected"] or "TLS" not in (broker.get("problem") or "") or why not in broker["problem"]:
                fail(f"node {node.node_id} should be refused ({why}), /api/node broker: {broker}")
            if why not in node.tail(200):
                fail(f"node {node.node_id} does not log why it is refused:\n{node.tail()}")
            log(f"node {node.node_id} refused: {broker['problem'][:140]}")
        # Heard on the peer network (its keepalive beacons), never on the broker.
        on_broker = {m["id"] for m in master.api()["members"] if m.get("lastBrokerMsAgo") is not None}
        if on_broker & {3, 4}:
            fail(f"a node that could not verify the broker was heard on it: {on_broker}")
        attempts = front.handshakes_failed + misnamed.handshakes_failed
        if attempts < 4:
            fail(f"the refused nodes should keep retrying; {attempts} failed handshakes in 6 s")
        log(f"both refused nodes alive, outside the cluster, retrying ({attempts} failed handshakes in 6 s)")
        print("RESULT broker_tls=ok")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
