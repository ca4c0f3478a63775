#!/usr/bin/python3
"""`tracker admin` against 3 real cluster nodes (ActiveMQ, a multicast group on lo).

1. `register FILE` through a slave: every node's catalogue holds it when the command
   returns; `torrents` through another node lists it; `status` names the node's role.
2. `unregister HASH` through the master: gone from every node.
3. Refusals are errors with a non-zero exit that say why: a wrong token (401), no token,
   a hash that is not 40 hex digits (nothing sent), a file that is not a .torrent (400),
   a node nobody listens on.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, fail, free_tcp_port, free_udp_port, log, make_torrent  # noqa: E402
from common import tracker_binary  # noqa: E402


def admin(node_http, *args, token_file=None, env=None):
    # `clients` and `user` are groups: their options follow the subcommand (`clients deny --node …`).
    words = 2 if args[:1] in (("clients",), ("user",)) else 1
    command = [tracker_binary(), "admin", *args[:words], "--node", f"127.0.0.1:{node_http}", *args[words:]]
    if token_file:
        command += ["--token-file", token_file]
    environment = {k: v for k, v in os.environ.items() if k != "TRACKER_ADMIN_TOKEN"}
    environment.update(env or {})
    out = subprocess.run(command, capture_output=True, text=True, timeout=30, env=environment)
    return out.returncode, out.stdout.strip(), out.stderr.strip()


def catalogue(node):
    status, rows = node.get("/api/torrents")
    if status != 200:
        fail(f"/api/torrents on node {node.node_id}: {status}")
    return [r["infoHash"] for r in rows]


def main():
    cluster = Cluster("admin", free_udp_port())
    work = tempfile.mkdtemp(prefix="admin-cli-")
    try:
        for node_id in (1, 2, 3):
            cluster.add(node_id)
        master = cluster.wait_converged(30)
        slaves = [n for n in cluster.nodes if n is not master]
        token = cluster.admin_token_file

        code, out, err = admin(slaves[0].http, "status")
        if code != 0 or "role slave" not in out or f"master {master.node_id}" not in out:
            fail(f"admin status on a slave: {code} {out!r} {err!r}")

        data, info_hash = make_torrent("admin-cli.bin")
        path = os.path.join(work, "admin-cli.torrent")
        with open(path, "wb") as f:
            f.write(data)
        code, out, err = admin(slaves[0].http, "register", path, token_file=token)
        if code != 0 or info_hash not in out:
            fail(f"admin register through a slave: {code} {out!r} {err!r}")
        # The command returns once the node's replica holds it; the others follow the commit.
        deadline = time.time() + 5
        while not all(info_hash in catalogue(n) for n in cluster.nodes):
            if time.time() > deadline:
                fail(f"the registration did not reach every node: {[catalogue(n) for n in cluster.nodes]}")
            time.sleep(0.1)
        code, out, err = admin(slaves[1].http, "torrents")
        if code != 0 or info_hash not in out or "admin-cli.bin" not in out:
            fail(f"admin torrents through the other slave: {code} {out!r} {err!r}")
        log("register through a slave: on every node; torrents through another lists it; status names the role")

        code, out, err = admin(master.http, "unregister", info_hash, token_file=token)
        if code != 0:
            fail(f"admin unregister through the master: {code} {out!r} {err!r}")
        deadline = time.time() + 5
        while any(info_hash in catalogue(n) for n in cluster.nodes):
            if time.time() > deadline:
                fail("the removal did not reach every node")
            time.sleep(0.1)
        log("unregister through the master: gone from every node")

        wrong = os.path.join(work, "wrong.token")
        with open(os.open(wrong, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write("not-the-admin-token-" + os.urandom(4).hex() + "\n")
        refusals = [
            (admin(master.http, "register", path, token_file=wrong), "401"),
            (admin(master.http, "register", path), "401"),
            (admin(master.http, "unregister", "abc", token_file=token), "40 hex digits"),
            (admin(master.http, "register", token, token_file=token), "not a valid .torrent"),
            (admin(free_tcp_port(), "status"), "cannot reach"),
        ]
        for (code, out, err), says in refusals:
            if code == 0 or says not in err:
                fail(f"a refusal did not fail saying {says!r}: {code} {out!r} {err!r}")
        if any(info_hash in catalogue(n) for n in cluster.nodes):
            fail("a refused registration changed the catalogue")
        log("wrong or missing token, bad hash, bad file, unreachable node: each an error that says why; nothing changed")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
    print("PASS admin_cli")
