#!/usr/bin/python3
"""The HTTP tracker of a 3-node cluster on loopback (each node's `--http-tracker` on its
own port; across hosts the floating address moves between them, docs/operating/deploy.md):

1. a follower answers an HTTP announce with a `failure reason` saying it does not serve,
   and never from its own replica;
2. the master answers 30 HTTP announces only after their commits: every node's SQLite
   repository holds all 30 peers once the master has answered them;
3. `kill -9` of the master: the next master serves HTTP within seconds, and its scrape
   counts every peer the dead master acknowledged over HTTP (nothing acknowledged is
   lost), beside a UDP peer announced through the group."""
import os
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from _harness import Cluster, GroupClient, activemq, fail, free_tcp_port, free_udp_port, log  # noqa: E402
from http_tracker import bdecode, get  # noqa: E402

INFO_HASH = bytes(range(101, 121))
PEERS = 30


def announce(port, n):
    path = ("/announce?info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH) + "&peer_id="
            + urllib.parse.quote_from_bytes(b"-HC0001-%012d" % n) + f"&port={20000 + n}&uploaded=0&downloaded=0&left=100&event=started")
    status, _, body = get(port, path)
    if status != 200:
        fail(f"HTTP {status} from port {port}: {body!r}")
    return bdecode(body)


def scrape(port):
    """The swarm's counts, or None while the node does not serve (a `failure reason`)."""
    status, _, body = get(port, "/scrape?info_hash=" + urllib.parse.quote_from_bytes(INFO_HASH))
    reply = bdecode(body)
    if status == 200 and b"failure reason" in reply:
        return None
    if status != 200 or b"files" not in reply:
        fail(f"scrape through port {port}: {status} {reply}")
    return reply[b"files"].get(INFO_HASH, {})


def main():
    print(activemq("start"))
    ports = {i: free_tcp_port() for i in (1, 2, 3)}
    cluster = Cluster(f"httpc{os.getpid()}", free_udp_port())
    try:
        for i in (1, 2, 3):
            cluster.add(i, extra_args=["--http-tracker", f"127.0.0.1:{ports[i]}"])
        master = cluster.wait_converged(30)
        deadline = time.time() + 20
        while master.node_id != 3 and time.time() < deadline:
            time.sleep(0.3)
            master = cluster.wait_converged(30)
        follower = next(n for n in cluster.live() if n is not master)
        refused = announce(ports[follower.node_id], 0)
        reason = refused.get(b"failure reason", b"").decode()
        if "not serving" not in reason:
            fail(f"a follower must refuse an HTTP announce, saying it does not serve: {refused}")
        log(f"master {master.node_id}; follower {follower.node_id} refused: '{reason}'")

        udp = GroupClient(cluster.group)
        if udp.connect() is None or udp.announce_first(INFO_HASH, b"-UD0001-000000000001", 21000)[0] is None:
            fail("the UDP announce through the group was not answered")
        for n in range(1, PEERS + 1):
            reply = announce(ports[master.node_id], n)
            if b"interval" not in reply or reply[b"incomplete"] < n:
                fail(f"HTTP announce {n} through the master: {reply}")
        rows = cluster.wait_equal_rows(cluster.live())
        log(f"{PEERS} HTTP announces answered by the master; the three repositories are equal ({len(rows.get('peers', []))} peer rows)")

        killed = time.time()
        master.kill9()
        survivors = [n for n in cluster.live()]
        first = None
        while time.time() < killed + 30 and first is None:
            for n in survivors:
                try:
                    files = scrape(ports[n.node_id])
                except (OSError, ValueError):
                    continue
                if files:
                    first = (time.time() - killed, n, files)
                    break
            time.sleep(0.05)
        if first is None:
            cluster.dump()
            fail("no node served an HTTP scrape within 30 s of the master's kill")
        after, new_master, files = first
        if files.get(b"incomplete") != PEERS + 1:
            cluster.dump()
            fail(f"node {new_master.node_id} counts {files} after the kill: the dead master acknowledged {PEERS} HTTP announces and a UDP one")
        reply = announce(ports[new_master.node_id], PEERS + 1)
        if reply.get(b"incomplete") != PEERS + 2:
            fail(f"an announce through the new master: {reply}")
        log(f"kill -9 of master {master.node_id}: node {new_master.node_id} served HTTP {after:.1f} s later, counting all "
            f"{PEERS} HTTP peers and the UDP one")
    finally:
        cluster.stop()
    print("PASS http_cluster", flush=True)


if __name__ == "__main__":
    main()
