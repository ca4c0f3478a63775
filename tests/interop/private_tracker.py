#!/usr/bin/python3
"""A private tracker on a standalone node (`mode private`, `--http-tracker`, `--db`),
managed with `tracker admin user`, over real sockets and with python3-libtorrent:

1. a private torrent (`private=1`) registered; alice and bob added, each given a key;
2. raw requests: HTTP announces with no key, an unknown key and a malformed key are
   refused with a `failure reason` that says why; alice's key is served over HTTP
   (`/announce/<key>`) and over UDP (BEP 41 URL data); a UDP scrape is refused, an HTTP
   scrape with a key served;
3. libtorrent seeds and downloads the private torrent through
   `http://127.0.0.1:PORT/announce/<key>` (the seeder with alice's key, the leecher with
   bob's); a leecher with a wrong key gets the tracker's refusal as its tracker error;
4. `user disable bob`: bob's next announce (libtorrent's, forced) is refused
   "user disabled", alice's still served;
5. per-user totals: alice's reported upload and bob's download (1 MiB each) in `user
   list` and on /metrics (`--metrics-users 5`);
6. the users outlive a restart (`--db`), bob still disabled, keys and totals kept.
"""
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (admin, fail, free_tcp_port, lt_session, printed_key, seeded_torrent, standalone_with_db, start_tracker, stop,  # noqa: E402
                    user_totals as totals, wait_for_udp_tracker)
from http_tracker import bdecode, get  # noqa: E402


def http_announce(http, path, info_hash, peer_id, port):
    query = ("info_hash=" + urllib.parse.quote_from_bytes(info_hash) + "&peer_id=" + urllib.parse.quote_from_bytes(peer_id)
             + f"&port={port}&uploaded=0&downloaded=0&left=100&event=started")
    status, _, body = get(http, f"{path}?{query}")
    if status != 200:
        fail(f"{path}: HTTP {status} {body!r}")
    return bdecode(body)


def udp_request(udp, packet_after_cid):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(bytes.fromhex("0000041727101980" "00000000" "00000001"), ("127.0.0.1", udp))
        cid = s.recvfrom(64)[0][8:16]
        s.sendto(cid + packet_after_cid, ("127.0.0.1", udp))
        return s.recvfrom(2048)[0]
    finally:
        s.close()


def udp_announce(udp, info_hash, url_path=b""):
    packet = ((1).to_bytes(4, "big") + (7).to_bytes(4, "big") + info_hash + os.urandom(20) + bytes(8) + (5).to_bytes(8, "big")
              + bytes(8) + (2).to_bytes(4, "big") + bytes(8) + (50).to_bytes(4, "big", signed=True) + (7101).to_bytes(2, "big"))
    if url_path:
        packet += bytes([2, len(url_path)]) + url_path + b"\0"
    reply = udp_request(udp, packet)
    return "tracked" if reply[:4] == (1).to_bytes(4, "big") else reply[8:].decode(errors="replace")


def raw_requests(udp, http, info_hash, alice):
    refusals = {
        "/announce": "this is a private tracker: announce with your key in the URL",
        "/announce/" + "Z" * 32: "unknown key",
        "/announce/short": "the key in the path is not a tracker key",
    }
    for path, says in refusals.items():
        reply = http_announce(http, path, info_hash, b"-RQ0001-000000000001", 7001)
        if says.encode() not in reply.get(b"failure reason", b""):
            fail(f"{path} must be refused saying {says!r}: {reply}")
    reply = http_announce(http, f"/announce/{alice}", info_hash, b"-RQ0001-000000000002", 7002)
    if b"failure reason" in reply or reply.get(b"incomplete") != 1:
        fail(f"alice's key over HTTP: {reply}")
    if (got := udp_announce(udp, info_hash, f"/announce/{alice}".encode())) != "tracked":
        fail(f"alice's key over UDP (BEP 41): {got}")
    if (got := udp_announce(udp, info_hash)) != "this is a private tracker: announce with your key in the URL":
        fail(f"a UDP announce without a key: {got}")
    scrape = udp_request(udp, (2).to_bytes(4, "big") + (8).to_bytes(4, "big") + info_hash)
    if b"scrape over HTTP with your key" not in scrape:
        fail(f"a UDP scrape in private mode: {scrape!r}")
    status, _, body = get(http, f"/scrape/{alice}?info_hash=" + urllib.parse.quote_from_bytes(info_hash))
    files = bdecode(body).get(b"files", {})
    if status != 200 or files.get(info_hash, {}).get(b"incomplete") != 2:
        fail(f"an HTTP scrape with alice's key: {status} {body!r}")
    print("raw: no key, an unknown key, a malformed key refused saying why; alice's key served over HTTP and BEP 41; "
          "a UDP scrape refused, an HTTP scrape with a key served", flush=True)


def tracker_answer(lt, session, handle, timeout=15):
    """("reply" or "error", the alert's message) for the first answer of the tracker to
    `handle` within `timeout`, else (None, None)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        session.wait_for_alert(500)
        for a in session.pop_alerts():
            if isinstance(a, lt.tracker_error_alert) and a.handle == handle:
                return "error", a.message()
            if isinstance(a, lt.tracker_reply_alert) and a.handle == handle:
                return "reply", a.message()
    return None, None


def clients(http, work, dashboard, token, alice, bob):
    import libtorrent as lt
    seed_dir, leech_dir, wrong_dir = (os.path.join(work, d) for d in ("seed", "leech", "wrong"))
    for d in (seed_dir, leech_dir, wrong_dir):
        os.makedirs(d, exist_ok=True)
    made, payload = seeded_torrent(lt, seed_dir, None, v1_only=True, private=True)
    encoded = lt.bencode(lt.create_torrent(made).generate())
    torrent = os.path.join(work, "private.torrent")
    with open(torrent, "wb") as f:
        f.write(encoded)
    admin(dashboard, token, "register", torrent)
    info = lt.torrent_info(encoded)
    if not info.priv():
        fail("the torrent is not private")
    with_key = lambda key: {"ti": lt.torrent_info(encoded), "trackers": [f"http://127.0.0.1:{http}/announce/{key}"]}  # noqa: E731

    seeder, leecher, wrong = (lt_session(lt, "127.0.0.1", free_tcp_port()) for _ in range(3))
    seed = seeder.add_torrent({**with_key(alice), "save_path": seed_dir, "flags": lt.torrent_flags.seed_mode})
    time.sleep(1)
    leech = leecher.add_torrent({**with_key(bob), "save_path": leech_dir})
    bad = wrong.add_torrent({**with_key("W" * 32), "save_path": wrong_dir})
    started = time.time()
    while time.time() < started + 60 and not leech.status().is_seeding:
        time.sleep(0.2)
    st = leech.status()
    if not st.is_seeding:
        fail(f"libtorrent with bob's key did not complete: progress {st.progress:.2f}, peers {st.num_peers}")
    with open(os.path.join(leech_dir, "payload.bin"), "rb") as f:
        if f.read() != payload:
            fail("the downloaded bytes differ")
    print(f"libtorrent downloaded the private torrent through /announce/<key> in {time.time() - started:.1f} s", flush=True)
    kind, said = tracker_answer(lt, wrong, bad)
    if kind != "error" or "unknown key" not in said:
        fail(f"a leecher with a wrong key must see the tracker's refusal: {said!r}")
    if bad.status().num_peers or bad.status().progress > 0:
        fail("a leecher with a wrong key got peers")
    print(f"a wrong key: the tracker error is {said!r}", flush=True)

    admin(dashboard, token, "user", "disable", "bob")
    leecher.pop_alerts()
    leech.force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)
    kind, said = tracker_answer(lt, leecher, leech)
    if kind != "error" or "user disabled" not in said:
        fail(f"bob's next announce after `user disable bob` must be refused: {kind} {said!r}")
    seeder.pop_alerts()
    seed.force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)
    if (alice_said := tracker_answer(lt, seeder, seed))[0] != "reply":
        fail(f"alice is still enabled, yet her announce got {alice_said}")
    print(f"bob disabled: his next announce got {said!r}; alice's is still answered", flush=True)


def metered(dashboard, token):
    import re
    import urllib.request
    deadline = time.time() + 10
    while True:
        t = totals(dashboard, token)
        if t["alice"]["uploaded"] >= 1 << 20 and t["bob"]["downloaded"] >= 1 << 20:
            break
        if time.time() > deadline:
            fail(f"the users' totals must count alice's upload and bob's download: {t}")
        time.sleep(0.5)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{dashboard}/metrics", timeout=5).read().decode()
    found = re.search(r'^tracker_user_uploaded_bytes_total\{user="alice"\} ([\d.e+]+)$', metrics, re.M)
    if not found or float(found.group(1)) < 1 << 20:
        fail(f"/metrics must export alice's upload: {[line for line in metrics.splitlines() if 'tracker_user' in line]}")
    print(f"totals: alice {t['alice']}, bob {t['bob']}; exported on /metrics", flush=True)
    return t


def main():
    work = tempfile.mkdtemp(prefix="private-tracker-")
    udp, dashboard, token, args = standalone_with_db(work)
    http = free_tcp_port()
    args += ["--http-tracker", f"127.0.0.1:{http}", "--metrics-users", "5"]
    tracker = start_tracker(args, os.path.join(work, "tracker.log"))
    ok = False
    try:
        wait_for_udp_tracker(udp)
        alice = printed_key(admin(dashboard, token, "user", "add", "alice"))
        bob = printed_key(admin(dashboard, token, "user", "add", "bob"))
        admin(dashboard, token, "mode", "private")
        info_hash = os.urandom(20)
        admin(dashboard, token, "allow", info_hash.hex())
        raw_requests(udp, http, info_hash, alice)
        clients(http, work, dashboard, token, alice, bob)
        before = metered(dashboard, token)

        stop(tracker)
        tracker = start_tracker(args, os.path.join(work, "tracker2.log"))
        wait_for_udp_tracker(udp)
        listed = admin(dashboard, token, "user", "list")
        if f"alice peer enabled {alice}" not in listed or f"bob peer disabled {bob}" not in listed:
            fail(f"the users after a restart: {listed!r}")
        after = totals(dashboard, token)
        if after["bob"] != before["bob"] or after["alice"]["uploaded"] < before["alice"]["uploaded"]:
            fail(f"the totals after a restart: {after}, before {before}")
        reply = http_announce(http, f"/announce/{alice}", info_hash, b"-RQ0001-000000000009", 7009)
        if b"failure reason" in reply:
            fail(f"alice's key after a restart: {reply}")
        print("a restart keeps the users (--db): bob still disabled, keys and totals kept", flush=True)
        ok = True
    finally:
        code = stop(tracker)
        if not ok:
            for name in ("tracker.log", "tracker2.log"):
                path = os.path.join(work, name)
                if os.path.exists(path):
                    print(open(path).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
        if code not in (0, None):
            fail(f"tracker exited with {code} on SIGTERM")
    print("PASS private_tracker", flush=True)


if __name__ == "__main__":
    main()
