#!/usr/bin/python3
"""The dashboard's JSON API against 3 real nodes, ActiveMQ and a multicast group on lo.

1. A slave's /api/trackers lists the 3 nodes with exactly one master.
2. After announces, a slave's /api/swarms equals the master's, page by page; a swarm's
   peer rows carry ip:port, downloaded and left as announced.
3. Bad query parameters are a 400 naming the parameter; GETs need no token, every
   control request without the right token is a 401 and changes nothing.
4. The event stream sends a status event within 2 s.
5. Provoke failure on the master: another node is master within 5 s; Recover: the node
   is back in every node's trackers list and the cluster converges again.
6. Stop on a slave: the others stop listing it; Start: it joins again.
7. Torrents: a malformed .torrent is refused with a clear error and changes nothing; one
   uploaded on a slave is registered on every node (name in the swarms tab, file back
   byte for byte), survives a kill -9 of the master and reaches a node that joins later.
8. /metrics parses as Prometheus text on every node.
(The access policy has its own test: access_policy.py.)
"""
import json
import os
import struct
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, log, make_torrent  # noqa: E402


def ok(node, path):
    status, body = node.get(path)
    if status != 200:
        fail(f"GET {path} on node {node.node_id}: {status} {body}")
    return body


def wait_until(what, predicate, timeout, on_failure=None):
    """The predicate's first truthy value within `timeout` s; else `on_failure()`, then fail."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    if on_failure:
        on_failure()
    fail(f"{what} not within {timeout}s (last: {last})")


def all_swarms(node):
    rows, page = [], 1
    while True:
        p = ok(node, f"/api/swarms?size=500&sort=-peers&page={page}")
        rows += p["rows"]
        if page >= p["pages"]:
            return rows
        page += 1


def trackers_tab(cluster, master, slave):
    rows = ok(slave, "/api/trackers")
    ids = sorted(r["id"] for r in rows)
    masters = [r["id"] for r in rows if r["role"] == "master"]
    if ids != [1, 2, 3] or masters != [master.node_id]:
        fail(f"a slave's trackers tab must list nodes 1-3 with one master ({master.node_id}): {rows}")
    for r in rows:
        for field in ("epoch", "address", "lastCommitted", "inSync", "silent"):
            if field not in r:
                fail(f"tracker row without {field}: {r}")
    others = [r for r in rows if not r["isSelf"]]
    if any(r["lastKeepaliveMsAgo"] is None or r["lastKeepaliveMsAgo"] > 2500 for r in others):
        fail(f"the other nodes' last keepalive must be recent: {others}")
    log(f"node {slave.node_id}'s trackers tab: {[(r['id'], r['role']) for r in rows]}")


def swarms_tab(cluster, master, slave):
    client = GroupClient(cluster.group)
    client.connect() or fail("no reply to connect")
    hashes = [os.urandom(20) for _ in range(30)]
    announced, tids = {}, {}
    for i in range(120):
        h, peer = hashes[i % len(hashes)], os.urandom(20)
        port, downloaded, left = 20000 + i, 1000 * i, 0 if i % 4 == 0 else 5000 + i
        tid = client.tid()
        client.sock.sendto(client.announce_packet(tid, h, peer, port, left=left, downloaded=downloaded, event=2), client.target)
        tids[tid] = 0
        announced[(h.hex(), f"127.0.0.1:{port}")] = (downloaded, left)
        time.sleep(0.005)
    for data, _ in client.collect(2.0):
        tid = struct.unpack(">I", data[4:8])[0]
        if tid in tids:
            tids[tid] += 1
    if sorted(set(tids.values())) != [1]:
        fail(f"every announce must get exactly one reply: {sorted(set(tids.values()))}")
    master_rows = wait_until("the master lists 30 swarms", lambda: (r := all_swarms(master)) and len(r) == 30 and r, 5)
    wait_until("a slave's swarms tab equals the master's", lambda: all_swarms(slave) == all_swarms(master), 10)
    if sum(r["peers"] for r in master_rows) != 120 or sum(r["seeders"] for r in master_rows) != 30:
        fail(f"swarm rows do not add up to 120 peers / 30 seeders: {master_rows[:3]}")
    # Search by a hash prefix, sorting and paging.
    target = hashes[0].hex()
    found = ok(slave, f"/api/swarms?query={target[:12].upper()}")
    if [r["infoHash"] for r in found["rows"]] != [target]:
        fail(f"search by hash prefix: {found}")
    page2 = ok(slave, "/api/swarms?size=7&page=2&sort=name")
    if page2["total"] != 30 or page2["pages"] != 5 or len(page2["rows"]) != 7:
        fail(f"paging: {page2}")
    # One swarm's peers as the slave sees them.
    detail = ok(slave, f"/api/swarms/{target}?size=100")
    if detail["swarm"]["peers"] != 4 or detail["peers"]["total"] != 4:
        fail(f"swarm detail: {detail}")
    for p in detail["peers"]["rows"]:
        want = announced.get((target, p["address"]))
        if want is None or (p["downloaded"], p["left"]) != want or "peerID" not in p or "lastAnnounceMsAgo" not in p:
            fail(f"peer row {p} does not match the announce {want}")
    status, body = slave.get("/api/swarms/" + "ab" * 20)
    if status != 404:
        fail(f"an unknown swarm must be 404: {status} {body}")
    log(f"120 announces in 30 swarms: node {slave.node_id}'s swarms tab equals the master's; peer rows carry ip:port, "
        "downloaded and left")


def refusals(cluster, master, slave):
    for path, want in (("/api/swarms?sort=bogus", "sort"), ("/api/swarms?page=0", "page"), ("/api/swarms?size=100000", "size"),
                       ("/api/swarms/xyz", "info hash")):
        status, body = slave.get(path)
        if status != 400 or want not in body.get("error", ""):
            fail(f"GET {path}: want 400 naming {want}, got {status} {body}")
    before = ok(master, "/api/node")
    for path in ("/api/service/stop", "/api/failure/provoke", "/api/service/start", "/api/failure/recover"):
        status, body = master.post(path, token=False)
        if status != 401:
            fail(f"POST {path} without a token: {status} {body}")
        request = urllib.request.Request(master.url(path), data=b"", method="POST",
                                         headers={"Authorization": "Bearer " + cluster.admin_token[:-1] + "x"})
        try:
            urllib.request.urlopen(request, timeout=2)
            fail(f"POST {path} with a wrong token succeeded")
        except urllib.error.HTTPError as e:
            if e.code != 401:
                fail(f"POST {path} with a wrong token: {e.code}")
    after = ok(master, "/api/node")
    if (after["service"], after["role"], after["epoch"]) != ("running", "master", before["epoch"]):
        fail(f"refused control requests changed the node: {before['role']} → {after}")
    log("bad parameters are 400s naming the parameter; control without the right token is 401 and changes nothing")


def event_stream(node):
    started = time.time()
    with urllib.request.urlopen(node.url("/api/events"), timeout=5) as r:
        if "text/event-stream" not in r.headers.get("Content-Type", ""):
            fail(f"/api/events content type {r.headers.get('Content-Type')}")
        event, data = None, None
        while time.time() - started < 3:
            line = r.readline().decode().rstrip("\n")
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data = json.loads(line.split(":", 1)[1])
            elif line == "" and data is not None:
                break
    if event != "status" or data is None or data["node"]["id"] != node.node_id or len(data["trackers"]) != 3:
        fail(f"the event stream must send a status event with the node and its trackers: {event} {data}")
    log(f"event stream: first status event after {time.time() - started:.2f}s")


def failover(cluster, master, others):
    status, body = master.post("/api/failure/provoke")
    if status != 200:
        fail(f"provoke failure: {status} {body}")
    provoked = time.time()

    def new_master():
        seen = [n.get("/api/node")[1] for n in others]
        if not all(isinstance(s, dict) for s in seen):
            return False
        masters = [s["id"] for s in seen if s["role"] == "master" and s["serving"]]
        return len(masters) == 1 and all(s["master"] == masters[0] for s in seen) and seen
    seen = wait_until("another node becomes master", new_master, 5)
    log(f"provoked failure on master {master.node_id}: node {seen[0]['master']} is master after "
        f"{time.time() - provoked:.1f}s")
    failed = ok(master, "/api/node")
    if failed["service"] != "failed":
        fail(f"the provoked node must say so: {failed['service']}")
    # Nothing leaves a silenced node: its peers get no reply from it.
    status, body = master.post("/api/failure/provoke")
    if status != 409:
        fail(f"provoking twice must be refused: {status} {body}")
    status, body = master.post("/api/failure/recover")
    if status != 200:
        fail(f"recover: {status} {body}")
    wait_until("every node lists the recovered node again",
               lambda: all(master.node_id in [r["id"] for r in ok(n, "/api/trackers") if not r["silent"]] for n in others), 5)
    cluster.wait_converged(timeout=15)
    log(f"recovered node {master.node_id}: back in every trackers tab, one master again")


def stop_start(cluster, slave, others):
    status, body = slave.post("/api/service/stop")
    if status != 200:
        fail(f"stop: {status} {body}")
    stopped = ok(slave, "/api/node")
    if stopped["service"] != "stopped" or stopped["role"] != "stopped":
        fail(f"a stopped node must say so: {stopped['service']} {stopped['role']}")
    wait_until(f"node {slave.node_id} leaves the others' trackers tab",
               lambda: all(slave.node_id not in [r["id"] for r in ok(n, "/api/trackers")] for n in others), 6)
    status, body = slave.post("/api/service/stop")
    if status != 409:
        fail(f"stopping a stopped service must be refused: {status} {body}")
    status, body = slave.post("/api/service/start")
    if status != 200:
        fail(f"start: {status} {body}")
    wait_until(f"node {slave.node_id} is back in the others' trackers tab",
               lambda: all(slave.node_id in [r["id"] for r in ok(n, "/api/trackers")] for n in others), 8)
    cluster.wait_converged(timeout=15)
    log(f"stop/start of node {slave.node_id}: it left the others' trackers tab, then joined again")


def torrents(cluster, nodes, master, slave):
    before = [ok(n, "/api/torrents") for n in nodes]
    for body, want in ((b"d4:infod4:name1:xee", "info.piece length"), (b"not bencode", "not bencoded"),
                       (b"d4:infoi1ee", "no info dictionary"), (b"", "empty input")):
        status, reply = slave.post("/api/torrents", body=body)
        if status != 400 or want not in reply.get("error", ""):
            fail(f"a malformed .torrent must be a 400 naming the problem ({want}): {status} {reply}")
    status, reply = slave.post("/api/torrents", body=b"x" * (1 << 20 + 1))
    if status != 413:
        fail(f"an oversized upload must be a 413: {status} {reply}")
    status, reply = slave.post("/api/torrents", body=make_torrent("x")[0], token=False)
    if status != 401:
        fail(f"an upload without the token must be a 401: {status} {reply}")
    time.sleep(0.5)
    if [ok(n, "/api/torrents") for n in nodes] != before:
        fail("refused uploads changed a catalogue")
    log("malformed, oversized and unauthenticated uploads are refused with a clear error; no catalogue changed")

    file, info_hash = make_torrent("Debian 13 netinst.iso", size=700 * 1024 * 1024, piece=1 << 20)
    status, reply = slave.post("/api/torrents", body=file, content_type="application/x-bittorrent")
    if status != 201 or reply["torrent"]["infoHash"] != info_hash or reply["torrent"]["size"] != 700 * 1024 * 1024:
        fail(f"registering on a slave: {status} {reply}")
    status, reply = slave.post("/api/torrents", body=file)
    if status != 409 or "already registered" not in reply.get("error", ""):
        fail(f"registering twice must be a 409: {status} {reply}")
    for n in nodes:
        listed = wait_until(f"node {n.node_id} lists the torrent", lambda: [t for t in ok(n, "/api/torrents") if t["infoHash"] == info_hash], 5)
        if listed[0]["name"] != "Debian 13 netinst.iso" or listed[0]["files"] != 1:
            fail(f"node {n.node_id}'s torrent row: {listed}")
        swarm = ok(n, f"/api/swarms?query=netinst")["rows"]
        if [r["infoHash"] for r in swarm] != [info_hash] or swarm[0]["name"] != "Debian 13 netinst.iso":
            fail(f"node {n.node_id}'s swarms tab must name the registered swarm: {swarm}")
        status, back = n.get(f"/api/torrents/{info_hash}/file")
        if status != 200 or back != file:
            fail(f"node {n.node_id} must serve the file back byte for byte ({status}, {len(back)} bytes)")
    log(f"a torrent uploaded on slave {slave.node_id} is on every node: name in the swarms tab, file back byte for byte")
    return file, info_hash


def torrent_survives(cluster, nodes, master, info_hash):
    master.kill9()
    survivors = [n for n in nodes if n is not master]
    new_master = cluster.wait_converged(timeout=15)
    joiner = cluster.add(master.node_id + 10)
    cluster.wait_converged(timeout=20)
    for n in survivors + [joiner]:
        wait_until(f"node {n.node_id} holds the torrent", lambda: info_hash in [t["infoHash"] for t in ok(n, "/api/torrents")], 10)
    log(f"after kill -9 of master {master.node_id}, node {new_master.node_id} leads and still lists the torrent; "
        f"node {joiner.node_id}, joining later, received it in its state transfer")
    # The joiner, the highest id, takes the lead once it is in sync: the others may have
    # converged on the survivor first, and its election can still be under way. A 409 that
    # says so asks the caller to try again, as an operator's client would.
    deadline = time.time() + 10
    while True:
        status, reply = joiner.delete(f"/api/torrents/{info_hash}")
        electing = status == 409 and "try again" in str(reply.get("error", "") if isinstance(reply, dict) else reply)
        if not electing or time.time() > deadline:
            break
        time.sleep(0.2)
    if status != 200:
        fail(f"unregistering on node {joiner.node_id}: {status} {reply}")
    for n in survivors + [joiner]:
        wait_until(f"node {n.node_id} drops the torrent", lambda: info_hash not in [t["infoHash"] for t in ok(n, "/api/torrents")], 5)
    log("unregistered on the joiner: gone from every node")
    return joiner


def metrics(nodes):
    for n in nodes:
        status, text = n.get("/metrics")
        if status != 200:
            fail(f"/metrics on node {n.node_id}: {status}")
        text = text.decode() if isinstance(text, bytes) else text
        samples = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                if line.startswith("# TYPE") and len(line.split()) != 4:
                    fail(f"bad TYPE line: {line}")
                continue
            name_labels, _, value = line.rpartition(" ")
            try:
                float(value)
            except ValueError:
                fail(f"/metrics line is not `name value`: {line!r}")
            samples[name_labels.split("{")[0]] = samples.get(name_labels.split("{")[0], 0) + 1
        for want in ("tracker_announces_total", "tracker_swarms", "tracker_peers", "tracker_role",
                     "tracker_cluster_rejected_messages_total", "tracker_commit_latency_seconds_bucket"):
            if want not in samples:
                fail(f"node {n.node_id}'s /metrics lacks {want}: {sorted(samples)[:30]}")
    log(f"/metrics parses as Prometheus text on {len(nodes)} nodes")


def main():
    print(activemq("start"))
    cluster = Cluster(f"dash{os.getpid()}", free_udp_port())
    try:
        nodes = [cluster.add(i) for i in (1, 2, 3)]
        master = cluster.wait_converged()
        slave = next(n for n in nodes if n is not master)
        trackers_tab(cluster, master, slave)
        swarms_tab(cluster, master, slave)
        refusals(cluster, master, slave)
        event_stream(slave)
        failover(cluster, master, [n for n in nodes if n is not master])
        current = cluster.wait_converged()
        slave = next(n for n in nodes if n is not current)
        stop_start(cluster, slave, [n for n in nodes if n is not slave])
        dead = [n.node_id for n in nodes if not n.alive()]
        if dead:
            fail(f"nodes exited: {dead}")
        current = cluster.wait_converged()
        slave = next(n for n in nodes if n is not current)
        metrics(nodes)
        _, info_hash = torrents(cluster, nodes, current, slave)
        torrent_survives(cluster, nodes, current, info_hash)
    except SystemExit:
        cluster.dump()
        raise
    finally:
        cluster.stop()
    print("dashboard API: all checks passed")


if __name__ == "__main__":
    main()
