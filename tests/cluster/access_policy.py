#!/usr/bin/python3
"""The replicated access policy against 3 real cluster nodes (ActiveMQ, a multicast group on
lo), managed with `tracker admin` only.

1. `import-list FILE` (opentracker's format: a hash per line, # comments) through a slave
   and `mode allow` through another node: every node lists the rules and the mode when
   each command returns.
2. Each node in turn serves (the master is killed twice): it tracks the listed hashes and
   a registered torrent, and refuses any other hash with a BEP 15 error.
3. `mode deny` and `deny HASH`: the denied hash is refused ("denied"), others tracked; a
   list with a bad line is refused whole, naming the line, and changes nothing.
4. `export FILE` through one node, then the data lost (torrent unregistered, rules
   removed, mode open), then `import FILE` through another: every node holds the
   exported torrent, rules and mode again; a tampered export is refused whole.
5. Users: `user add` through a slave prints a key every node holds; in `mode private` an
   announce is tracked with that key as BEP 41 URL data and refused without one, with an
   unknown one, and once `user disable` through another node returns; an export carries
   the users with their keys, and an import puts a removed user back with the same key.
6. `--only-registered`, gone, stops a node from starting with a message that says what
   replaces it.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, fail, free_udp_port, log, make_torrent, three_nodes  # noqa: E402
from admin_cli import admin  # noqa: E402
from common import tracker_binary  # noqa: E402


def policy(node):
    status, body = node.get("/api/access?limit=10000")
    if status != 200:
        fail(f"/api/access on node {node.node_id}: {status} {body}")
    return body["mode"], {r["infoHash"]: r["rule"] for r in body["rules"]}


def outcome(client, info_hash, port, **kw):
    """'tracked', the BEP 15 error's message, or what went wrong."""
    replies = client.announce(bytes.fromhex(info_hash), os.urandom(20), port, **kw)
    if len(replies) != 1:
        return f"{len(replies)} replies"
    action = struct.unpack(">I", replies[0][:4])[0]
    return "tracked" if action == 1 else replies[0][8:].decode(errors="replace") if action == 3 else f"action {action}"



def caught_up(cluster, timeout):
    """The master once every live node follows it holding what it committed, and it still
    leads a keepalive interval later. Converged is not enough for an export from a slave:
    a node that just came back follows the master before it has caught up, and a higher
    id takes the office over once it has (CI caught an export from a restarted node that
    still held the access mode from before its kill)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        master = cluster.wait_converged(max(1.0, deadline - time.time()))
        states = [n.api() for n in cluster.live()]
        held = (master.api() or {}).get("lastCommitted")
        if held is not None and all(s and s.get("lastCommitted") == held for s in states):
            time.sleep(1.5)
            again = cluster.wait_converged(max(1.0, deadline - time.time()))
            if again.node_id == master.node_id and all((n.api() or {}).get("lastCommitted") == (again.api() or {}).get("lastCommitted")
                                                       for n in cluster.live()):
                return again
        time.sleep(0.2)
    fail(f"the cluster did not catch up within {timeout} s")

def user_key(out):
    for line in out.splitlines():
        if line.startswith("key "):
            return line.split()[1]
    fail(f"no key printed: {out!r}")


def users_round(cluster, client, registered, token, work):
    master = caught_up(cluster, 30)
    others = [n for n in cluster.live() if n is not master]
    code, out, err = admin(others[0].http, "user", "add", "alice", token_file=token)
    if code != 0 or "added user alice" not in out:
        fail(f"admin user add: {code} {out!r} {err!r}")
    key = user_key(out)
    for n in cluster.live():
        code, out, err = admin(n.http, "user", "list", token_file=token)
        if code != 0 or f"alice peer enabled {key}" not in out:
            fail(f"node {n.node_id} does not list alice with her key: {code} {out!r} {err!r}")
    code, out, err = admin(master.http, "mode", "private", token_file=token)
    if code != 0 or "access mode private" not in out:
        fail(f"admin mode private: {code} {out!r} {err!r}")
    client.connect() or fail("no reply to connect")
    with_key = ("/announce/" + key).encode()
    got = [outcome(client, registered, 7200, url_data=with_key), outcome(client, registered, 7201),
           outcome(client, registered, 7202, url_data=b"/announce/" + b"x" * 32),
           outcome(client, os.urandom(20).hex(), 7203, url_data=with_key)]
    if got != ["tracked", "this is a private tracker: announce with your key in the URL", "unknown key",
               "torrent not registered with this tracker"]:
        fail(f"private mode: with the key, without, unknown key, unregistered torrent gave {got}")
    code, out, err = admin(others[1].http, "user", "disable", "alice", token_file=token)
    if code != 0 or "user alice disabled" not in out:
        fail(f"admin user disable: {code} {out!r} {err!r}")
    if (got := outcome(client, registered, 7204, url_data=with_key)) != "user disabled":
        fail(f"a disabled user's next announce gave {got}")
    log("users: added through a slave, listed with the key on every node; private mode tracks the key (BEP 41 URL data), "
        "refuses none, an unknown one, and the user once disabled through another node")

    backup = os.path.join(work, "users.json")
    code, out, err = admin(others[0].http, "export", backup, token_file=token)
    if code != 0 or "and 1 users" not in out:
        fail(f"admin export with users: {code} {out!r} {err!r}")
    code, out, err = admin(master.http, "user", "remove", "alice", token_file=token)
    code2, out2, err2 = admin(master.http, "mode", "open", token_file=token)
    if (code, code2) != (0, 0):
        fail(f"could not remove alice before the import: {err} {err2}")
    code, out, err = admin(others[1].http, "import", backup, token_file=token)
    if code != 0 or "users: 1 added" not in out:
        fail(f"admin import with users: {code} {out!r} {err!r}")
    for n in cluster.live():
        code, out, err = admin(n.http, "user", "list", token_file=token)
        if f"alice peer disabled {key}" not in out:
            fail(f"node {n.node_id} after the import: {out!r} {err!r}")
    code, out, err = admin(master.http, "user", "enable", "alice", token_file=token)
    if code != 0 or (got := outcome(client, registered, 7205, url_data=with_key)) != "tracked":
        fail(f"alice enabled again after the import: {code} {err!r} {got}")
    log("an export carries the users; an import puts a removed one back, disabled as she was, with the same key")


def main():
    cluster = Cluster(f"access{os.getpid()}", free_udp_port())
    work = tempfile.mkdtemp(prefix="access-policy-")
    try:
        nodes, master = three_nodes(cluster)
        slaves = [n for n in nodes if n is not master]
        token = cluster.admin_token_file
        listed = [os.urandom(20).hex() for _ in range(1500)]  # two changes of at most 1,000
        path = os.path.join(work, "whitelist.txt")
        with open(path, "w") as f:
            f.write("# opentracker-style whitelist\n" + "\n".join(h.upper() if i % 2 else h for i, h in enumerate(listed))
                    + "\n\n" + listed[0] + "   # listed twice\n")
        code, out, err = admin(slaves[0].http, "import-list", path, token_file=token)
        if code != 0 or "1000 info hashes" not in out or "500 info hashes" not in out:
            fail(f"admin import-list through a slave: {code} {out!r} {err!r}")
        code, out, err = admin(slaves[1].http, "mode", "allow", token_file=token)
        if code != 0 or "access mode allow" not in out:
            fail(f"admin mode allow: {code} {out!r} {err!r}")
        for n in nodes:
            mode, rules = policy(n)
            if mode != "allow" or len(rules) != 1500 or any(rules.get(h) != "allow" for h in listed):
                fail(f"node {n.node_id} holds mode {mode} and {len(rules)} rules once the commands returned")
        log("import-list (1,500 hashes, two changes) and mode allow: every node holds them when the commands return")

        data, registered = make_torrent("access-policy.bin")
        torrent = os.path.join(work, "registered.torrent")
        with open(torrent, "wb") as f:
            f.write(data)
        code, out, err = admin(master.http, "register", torrent, token_file=token)
        if code != 0:
            fail(f"admin register: {code} {out!r} {err!r}")

        client = GroupClient(cluster.group)
        client.connect() or fail("no reply to connect")
        killed = []
        for round_ in range(3):
            got = [outcome(client, h, 7000 + 10 * round_ + i) for i, h in enumerate([listed[round_], listed[-1], registered,
                                                                                   os.urandom(20).hex()])]
            if got != ["tracked", "tracked", "tracked", "torrent not registered with this tracker"]:
                fail(f"master {master.node_id} in allow mode: listed, listed, registered, unknown gave {got}")
            log(f"allow mode: master {master.node_id} tracks listed and registered hashes, refuses an unknown one")
            if round_ < 2:
                killed.append(master)
                master.kill9()
                master = cluster.wait_converged(timeout=15)
                client.connect() or fail("no reply to connect after failover")

        code, out, err = admin(master.http, "deny", listed[5], token_file=token)
        if code != 0:
            fail(f"admin deny: {code} {out!r} {err!r}")
        code, out, err = admin(master.http, "mode", "deny", token_file=token)
        if code != 0:
            fail(f"admin mode deny: {code} {out!r} {err!r}")
        got = [outcome(client, h, 7100 + i) for i, h in enumerate([listed[5], listed[6], os.urandom(20).hex()])]
        if got != ["torrent is denied by this tracker", "tracked", "tracked"]:
            fail(f"deny mode: denied, allowed-in-the-other-mode, unknown gave {got}")
        log("deny mode: the denied hash is refused, every other one tracked")

        bad = os.path.join(work, "bad.txt")
        with open(bad, "w") as f:
            f.write(f"{listed[7]}\nnot-a-hash\n")
        code, out, err = admin(master.http, "import-list", "--deny", bad, token_file=token)
        if code == 0 or "line 2" not in err:
            fail(f"a list with a bad line must be refused naming it: {code} {out!r} {err!r}")
        if policy(master)[1].get(listed[7]) != "allow":
            fail("a refused list changed the policy")
        code, out, err = admin(master.http, "access")
        if code != 0 or not out.startswith("mode deny (allowed 1499, denied 1, registered torrents 1)") or len(out.splitlines()) != 1501:
            fail(f"admin access: {code} {out[:200]!r} {err!r}")
        log("a list with a bad line is refused whole, naming line 2; `admin access` prints the policy")

        # The killed nodes come back (and catch up) for the backup round.
        for n in killed:
            n.start()
        master = caught_up(cluster, 30)
        backup = os.path.join(work, "backup.json")
        exporter = next(n for n in cluster.live() if n is not master)
        code, out, err = admin(exporter.http, "export", backup, token_file=token)
        if code != 0 or "exported 1 torrents, access mode deny, 1500 rules, 0 client rules and 0 users" not in out:
            fail(f"admin export: {code} {out!r} {err!r}")
        if os.stat(backup).st_mode & 0o777 != 0o600:
            fail("an export holds the operator's data: it must be written 0600")
        exported = policy(master)
        code, out, err = admin(master.http, "unregister", registered, token_file=token)
        code2, out2, err2 = admin(master.http, "mode", "open", token_file=token)
        code3, out3, err3 = admin(master.http, "remove", *list(exported[1])[:1000], token_file=token)
        code4, out4, err4 = admin(master.http, "remove", *list(exported[1])[1000:], token_file=token)
        if (code, code2, code3, code4) != (0, 0, 0, 0) or policy(master) != ("open", {}):
            fail(f"could not clear the data before the import: {(code, code2, code3, code4)} {err} {err2} {err3} {err4}")
        with open(backup) as f:
            tampered = json.load(f)
        tampered["torrents"][0]["infoHash"] = "00" * 20
        bad_backup = os.path.join(work, "tampered.json")
        with open(bad_backup, "w") as f:
            json.dump(tampered, f)
        code, out, err = admin(master.http, "import", bad_backup, token_file=token)
        if code == 0 or "is not that torrent" not in err or policy(master) != ("open", {}):
            fail(f"a tampered export must be refused whole: {code} {out!r} {err!r}")
        importer = next(n for n in cluster.live() if n is not master and n is not exporter)
        code, out, err = admin(importer.http, "import", backup, token_file=token)
        if code != 0 or "torrents: 1 registered" not in out:
            fail(f"admin import: {code} {out!r} {err!r}")
        for n in cluster.live():
            if policy(n) != exported:
                fail(f"node {n.node_id} after the import: mode {policy(n)[0]}, {len(policy(n)[1])} rules; exported {exported[0]}, "
                     f"{len(exported[1])}")
            status, rows = n.get("/api/torrents")
            if status != 200 or [r["infoHash"] for r in rows] != [registered]:
                fail(f"node {n.node_id} after the import: torrents {rows}")
        log("export through one node, data lost, import through another: every node holds it again; a tampered export "
            "is refused whole")

        users_round(cluster, client, registered, token, work)

        run = subprocess.run([tracker_binary(), "run", "--only-registered"], capture_output=True, text=True, timeout=30)
        if run.returncode == 0 or "tracker admin mode allow" not in run.stderr:
            fail(f"--only-registered must be refused with what replaces it: {run.returncode} {run.stderr[-300:]!r}")
        log("--only-registered is refused, naming `tracker admin mode allow`")
    except SystemExit:
        cluster.dump()
        raise
    finally:
        cluster.stop()
    print("access policy: all checks passed")


if __name__ == "__main__":
    main()
