#!/usr/bin/python3
"""Every node of a 3-node cluster stopped cleanly and started again keeps the operator's
data (ActiveMQ, a multicast group on lo, `tracker admin` only).

1. A torrent registered, two hashes allowed, one denied, mode allow; two peers complete
   the torrent (BEP 15 event "completed").
2. Node 1 stops (SIGTERM) first. While it is down, one allowed hash's rule is removed
   and a second torrent registered: node 1 kept the older version of both entries.
3. Nodes 2 and 3 stop (SIGTERM): every repository is emptied, as the spec says.
4. Node 1 starts first and serves alone with what it kept; then nodes 2 and 3 start.
   Every node then holds both torrents, the denied hash, one allowed hash and mode allow:
   the removal made after node 1 stopped wins over node 1's older copy of that rule.
5. Peers: the registered and listed hashes are tracked, the removed and unknown ones
   refused, through whichever node serves; a scrape of the first torrent still counts
   its two completions, though every swarm was emptied.

Client rules travel the same way: `-XX` and `-YY` denied in step 1, `-YY`'s rule
removed while node 1 is down; afterwards every node holds `-XX deny` alone, a `-XX`
peer id gets the BEP 15 error naming its client and a `-YY` one is tracked.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, fail, free_udp_port, log, make_torrent, three_nodes  # noqa: E402
from access_policy import outcome, policy  # noqa: E402
from admin_cli import admin  # noqa: E402


def torrents(node):
    """The registered info hashes, or None while the node's dashboard is not up yet."""
    status, rows = node.get("/api/torrents")
    return sorted(r["infoHash"] for r in rows) if status == 200 else None


def holds(node, hashes, expected_policy, expected_clients):
    status, body = node.get("/api/access?limit=10000")
    if status != 200:
        return False
    return (torrents(node) == sorted(hashes) and (body["mode"], {r["infoHash"]: r["rule"] for r in body["rules"]}) == expected_policy
            and {c["prefix"]: c["rule"] for c in body["clients"]} == expected_clients)


def run(node, token, *args):
    code, out, err = admin(node.http, *args, token_file=token)
    if code != 0:
        fail(f"admin {' '.join(args[:2])} through node {node.node_id}: {code} {out!r} {err!r}")
    return out


def main():
    cluster = Cluster(f"restart{os.getpid()}", free_udp_port())
    work = tempfile.mkdtemp(prefix="full-restart-")
    try:
        nodes, master = three_nodes(cluster)
        token = cluster.admin_token_file
        paths, hashes = [], []
        for name in ("kept-first.bin", "kept-second.bin"):
            data, info_hash = make_torrent(name)
            path = os.path.join(work, name + ".torrent")
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
            hashes.append(info_hash)
        allowed, removed, denied = os.urandom(20).hex(), os.urandom(20).hex(), os.urandom(20).hex()
        run(master, token, "register", paths[0])
        run(master, token, "allow", allowed, removed)
        run(master, token, "deny", denied)
        run(master, token, "mode", "allow")
        run(master, token, "clients", "deny", "-XX", "-YY")
        client = GroupClient(cluster.group)
        client.connect() or fail("no reply to connect")
        for i in range(2):
            replies = client.announce(bytes.fromhex(hashes[0]), os.urandom(20), 7300 + i, left=0, event=1)
            if len(replies) != 1:
                fail(f"a completed announce got {len(replies)} replies")
        if (client.scrape(bytes.fromhex(hashes[0])) or {}).get("completed") != 2:
            fail(f"scrape before the stop: {client.scrape(bytes.fromhex(hashes[0]))}")

        first = nodes[0]
        if first.terminate() != 0:
            fail(f"node 1 did not stop cleanly: exit {first.proc.returncode}")
        master = cluster.wait_converged(20)
        run(master, token, "remove", removed)
        run(master, token, "clients", "remove", "-YY")
        run(master, token, "register", paths[1])
        log("node 1 stopped holding the older data; a rule removed and a torrent registered after it")
        for n in nodes[1:]:
            if n.terminate() != 0:
                fail(f"node {n.node_id} did not stop cleanly: exit {n.proc.returncode}")
        log("every node stopped cleanly")

        first.start()
        older = ("allow", {allowed: "allow", removed: "allow", denied: "deny"})
        deadline = time.time() + 20
        while time.time() < deadline and not holds(first, hashes[:1], older, {"-XX": "deny", "-YY": "deny"}):
            time.sleep(0.2)
        if not holds(first, hashes[:1], older, {"-XX": "deny", "-YY": "deny"}):
            fail(f"node 1 alone after the restart: torrents {torrents(first)}, policy {policy(first)}")
        log("node 1 alone serves again with what it kept")
        for n in nodes[1:]:
            n.start()
        master = cluster.wait_converged(30)
        expected = ("allow", {allowed: "allow", denied: "deny"})
        deadline = time.time() + 20
        while time.time() < deadline and not all(holds(n, hashes, expected, {"-XX": "deny"}) for n in nodes):
            time.sleep(0.2)
        for n in nodes:
            if not holds(n, hashes, expected, {"-XX": "deny"}):
                fail(f"node {n.node_id} after the full restart: torrents {torrents(n)}, policy {policy(n)}, "
                     f"clients {n.get('/api/access?limit=1')[1].get('clients')}; expected {sorted(hashes)}, {expected}, -XX deny")
        log("every node holds both torrents, the newest version of each rule and mode allow")

        client.connect() or fail("no reply to connect")
        got = [outcome(client, h, 7200 + i) for i, h in enumerate([hashes[0], hashes[1], allowed, removed, denied])]
        refused = "torrent not registered with this tracker"
        if got != ["tracked", "tracked", "tracked", refused, refused]:
            fail(f"master {master.node_id}: registered, registered, allowed, removed, denied gave {got}")
        log(f"master {master.node_id} tracks the kept torrents and allowed hash, refuses the removed and denied ones")
        for prefix, want in (("-XX", "client -XX is denied by this tracker"), ("-YY", "tracked")):
            replies = client.announce(bytes.fromhex(hashes[0]), prefix.encode() + os.urandom(17), 7250)
            got = "tracked" if len(replies) == 1 and replies[0][:4] == b"\0\0\0\1" else \
                replies[0][8:].decode(errors="replace") if len(replies) == 1 else f"{len(replies)} replies"
            if got != want:
                fail(f"a {prefix} peer after the full restart: {got!r}, want {want!r}")
        log("client rules: -XX refused by name, -YY (removed while node 1 was down) tracked")

        scraped = client.scrape(bytes.fromhex(hashes[0]))
        if (scraped or {}).get("completed") != 2:
            fail(f"the first torrent's completions after the full restart: {scraped}")
        log("a scrape still counts the first torrent's 2 completions")
    except SystemExit:
        cluster.dump()
        raise
    finally:
        cluster.stop()
    print("full restart: all checks passed")


if __name__ == "__main__":
    main()
