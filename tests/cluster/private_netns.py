#!/usr/bin/python3
"""A private torrent (`private=1`) through a standalone node in `mode private`, with the
real clients that cannot be tested on loopback (Transmission drops 127.x peers), each in
a network namespace of its own on one bridge:

    tracker   10.79.0.1   `tracker run --http-tracker 10.79.0.1:6969 --db …`
    seeder    10.79.0.10  python3-libtorrent seeding with alice's key
    clients   10.79.0.11  transmission-cli with tina's key
              10.79.0.12  aria2c with ari's key
              10.79.0.13  aria2c with a key no user holds

Each client's .torrent is the same private torrent with its own user's announce URL
(`http://10.79.0.1:6969/announce/KEY`), as a private tracker hands them out. Transmission
and aria2 download it; the client with an unknown key gets no peers, and its log shows
the tracker's refusal ("unknown key"). `tracker admin user list` counts the clients'
users' announces. Once tina is disabled, Transmission's next announce (it goes on
seeding) gets "user disabled", and her count stops; once ari is disabled, aria2's next
announce (a new download with her key) gets "user disabled" too."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
from _harness import bencode, fail, log  # noqa: E402
from _netns import OtherClient, host, remove, switch  # noqa: E402
from common import admin as shared_admin, printed_key, tracker_binary, user_totals  # noqa: E402
from http_tracker import bdecode  # noqa: E402

TAG = f"pv{os.getpid() % 100000}"
SWITCH, TRACKER, SEEDER = f"{TAG}-sw", f"{TAG}-trk", f"{TAG}-seed"
TRANSMISSION, ARIA2, WRONG = f"{TAG}-tr", f"{TAG}-ar", f"{TAG}-wr"
NAMESPACES = [TRACKER, SEEDER, TRANSMISSION, ARIA2, WRONG, SWITCH]
ANNOUNCE = "http://10.79.0.1:6969/announce/"
BOUND_S = 60

SEEDER_SCRIPT = """
import hashlib, os, sys, time
import libtorrent as lt
work, url, interop = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, interop)
from common import seeded_torrent
made, payload = seeded_torrent(lt, work, url, v1_only=True, private=True)
encoded = lt.bencode(lt.create_torrent(made).generate())
with open(os.path.join(work, "private.torrent"), "wb") as f:
    f.write(encoded)
s = lt.session({"listen_interfaces": "10.79.0.10:41000", "enable_dht": False, "enable_lsd": False,
                "enable_upnp": False, "enable_natpmp": False, "user_agent": "private-seeder"})
s.add_torrent({"ti": lt.torrent_info(encoded), "save_path": work, "flags": lt.torrent_flags.seed_mode})
print("READY", hashlib.sha1(payload).hexdigest(), flush=True)
while True:
    time.sleep(1)
"""


def admin(token, *args):
    return shared_admin(8081, token, *args, netns=TRACKER)


def totals(token):
    return user_totals(8081, token, netns=TRACKER)


def with_announce(torrent, url):
    """The same torrent (its info dict untouched: the same info hash) announcing to `url`."""
    meta = bdecode(torrent)
    meta[b"announce"] = url.encode()
    meta.pop(b"announce-list", None)
    return bencode(meta)


def main():
    if os.geteuid() != 0:
        fail("this test creates network namespaces and must run as root")
    remove(NAMESPACES)
    switch(SWITCH)
    for index, (ns, address) in enumerate([(TRACKER, "10.79.0.1"), (SEEDER, "10.79.0.10"), (TRANSMISSION, "10.79.0.11"),
                                           (ARIA2, "10.79.0.12"), (WRONG, "10.79.0.13")], start=1):
        host(SWITCH, ns, address, index)
    work = tempfile.mkdtemp(prefix="private-netns-")
    os.chmod(work, 0o755)
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write("private-netns-token-0123456789abcdef\n")
    os.chmod(token, 0o600)
    tracker_log = open(os.path.join(work, "tracker.log"), "w")
    tracker = subprocess.Popen(["ip", "netns", "exec", TRACKER, tracker_binary(), "run", "--udp", "10.79.0.1:6969",
                                "--http-tracker", "10.79.0.1:6969", "--http", "127.0.0.1:8081", "--admin-token-file", token,
                                "--db", os.path.join(work, "tracker.sqlite"), "--interval", "5"],
                               stdout=tracker_log, stderr=subprocess.STDOUT)
    seeder, clients, ok = None, [], False
    try:
        deadline = time.time() + 20
        while subprocess.run(["ip", "netns", "exec", TRACKER, "curl", "-sf", "http://127.0.0.1:8081/api/health"],
                             capture_output=True).returncode != 0:
            if time.time() > deadline or tracker.poll() is not None:
                fail("the tracker did not start")
            time.sleep(0.2)
        keys = {name: printed_key(admin(token, "user", "add", name)) for name in ("alice", "tina", "ari")}
        seed_dir = os.path.join(work, "seed")
        os.makedirs(seed_dir)
        os.chmod(seed_dir, 0o755)
        seeder = subprocess.Popen(["ip", "netns", "exec", SEEDER, "/usr/bin/python3", "-c", SEEDER_SCRIPT, seed_dir,
                                   ANNOUNCE + keys["alice"], os.path.join(HERE, "..", "interop")], stdout=subprocess.PIPE, text=True)
        ready = seeder.stdout.readline().split()
        if not ready or ready[0] != "READY":
            fail(f"the libtorrent seeder did not start: {ready}")
        sha1 = ready[1]
        with open(os.path.join(seed_dir, "private.torrent"), "rb") as f:
            torrent = f.read()
        if bdecode(torrent)[b"info"].get(b"private") != 1:
            fail("the torrent is not private")
        admin(token, "register", os.path.join(seed_dir, "private.torrent"))
        admin(token, "mode", "private")
        files = {}
        for name, key in (("tina", keys["tina"]), ("ari", keys["ari"]), ("wrong", "Q" * 32)):
            files[name] = os.path.join(work, f"{name}.torrent")
            with open(files[name], "wb") as f:
                f.write(with_announce(torrent, ANNOUNCE + key))
            os.chmod(files[name], 0o644)
        log("a private torrent registered, mode private; users alice (the libtorrent seeder), tina, ari")
        clients = [OtherClient("transmission", TRANSMISSION, files["tina"], sha1), OtherClient("aria2", ARIA2, files["ari"], sha1)]
        wrong = OtherClient("aria2", WRONG, files["wrong"], sha1)
        deadline = time.time() + BOUND_S
        while time.time() < deadline and not all([c.poll() for c in clients]):
            time.sleep(0.2)
        for c, user in zip(clients, ("tina", "ari")):
            if not c.poll():
                fail(f"{c.name} with {user}'s key: no complete download within {BOUND_S} s; its log:\n{c.tail()}")
            log(f"{c.name} downloaded the private torrent with {user}'s key in {c.done_after:.1f} s")
        if wrong.poll():
            fail("aria2 with a key no user holds downloaded the private torrent")
        wrong_log = wrong.tail()
        if "unknown key" not in wrong_log:
            fail(f"aria2 with a key no user holds must show the tracker's refusal; its log:\n{wrong_log}")
        log("aria2 with a key no user holds got no peers; its log shows 'unknown key'")
        clients.append(wrong)
        # tina disabled: Transmission, still seeding, announces again (every 5 s here) and
        # is refused; her count stops.
        admin(token, "user", "disable", "tina")
        counted = totals(token)["tina"]["announces"]
        deadline = time.time() + 20
        transmission_log = os.path.join(clients[0].work, "client.log")
        while time.time() < deadline and "user disabled" not in open(transmission_log, errors="replace").read():
            time.sleep(0.5)
        if "user disabled" not in open(transmission_log, errors="replace").read():
            fail(f"Transmission must show its next announce refused once tina is disabled; its log:\n{clients[0].tail()}")
        after = totals(token)["tina"]["announces"]
        if after != counted:
            fail(f"tina's announces went on counting after she was disabled: {counted} then {after}")
        log("tina disabled: Transmission's next announce got 'user disabled', and her count stopped")
        # ari disabled: aria2 left once its download was done (--seed-time=0), so its next
        # announce is that of a new download with ari's key, refused from the first.
        try:
            clients[1].proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            clients[1].proc.kill()
            clients[1].proc.wait()
        admin(token, "user", "disable", "ari")
        counted = totals(token)["ari"]["announces"]
        again = OtherClient("aria2", ARIA2, files["ari"], sha1)
        clients.append(again)
        deadline = time.time() + 20
        while time.time() < deadline and "user disabled" not in again.tail():
            time.sleep(0.5)
        if "user disabled" not in again.tail() or again.poll():
            fail(f"aria2 with a disabled user's key must be refused ('user disabled') and get no peers; its log:\n{again.tail()}")
        if totals(token)["ari"]["announces"] != counted:
            fail("ari's announces counted after she was disabled")
        log("ari disabled: aria2's next announce with her key got 'user disabled', and no peers")
        listed = totals(token)
        # (alice's seeder first announced before the mode was private, when keys count nothing)
        if any(listed[name]["announces"] < 1 for name in ("tina", "ari")):
            fail(f"every client's user must count its announces: {listed}")
        log(f"announces counted per user: {json.dumps({n: listed[n]['announces'] for n in listed})}")
        ok = True
    finally:
        for c in clients:
            c.stop()
            shutil.rmtree(c.work, ignore_errors=True)
        if seeder:
            seeder.kill()
            seeder.wait()
        tracker.terminate()
        try:
            tracker.wait(10)
        except subprocess.TimeoutExpired:
            tracker.kill()
        tracker_log.close()
        if not ok:
            print(open(os.path.join(work, "tracker.log")).read()[-3000:])
        remove(NAMESPACES)
        shutil.rmtree(work, ignore_errors=True)
    print("PASS private_netns", flush=True)


if __name__ == "__main__":
    main()
