#!/usr/bin/python3
"""Runs inside the client network namespace of vip_netns.py: a python3-libtorrent
seeder and leechers that know the tracker only as udp://VIP:PORT (or the tracker URL
given instead, such as http://VIP:PORT/announce; a third argument moves the seeder's
and leechers' ports from 41000 up to start there). Talks to the
orchestrator over stdin/stdout: prints `READY <info hash> <.torrent path> <sha1 of the
payload>` (the file is for the other clients), then for each `leech` line it reads,
starts a fresh leecher and prints `DONE <seconds>` or `FAILED <why>` (`leech SECONDS`:
gives up after SECONDS instead of 90)."""
import hashlib
import os
import sys
import tempfile
import time

import libtorrent as lt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from common import lt_session, seeded_torrent  # noqa: E402

CLIENT_IP, TRACKER = sys.argv[1], sys.argv[2]
URL = TRACKER if "://" in TRACKER else f"udp://{TRACKER}/announce"
BASE_PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 41000


def session(port):
    return lt_session(lt, CLIENT_IP, port)


def main():
    work = tempfile.mkdtemp(prefix="lt-vip-")
    seed_dir = os.path.join(work, "seed")
    info, payload = seeded_torrent(lt, seed_dir, URL, v1_only=True)
    seeder = session(BASE_PORT)
    seeder.add_torrent({"ti": info, "save_path": seed_dir, "flags": lt.torrent_flags.seed_mode})
    torrent_path = os.path.join(work, "payload.torrent")
    with open(torrent_path, "wb") as f:
        f.write(lt.bencode(lt.create_torrent(info).generate()))
    os.chmod(work, 0o755)
    print("READY", str(info.info_hash()), torrent_path, hashlib.sha1(payload).hexdigest(), flush=True)
    n = 0
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "leech":
            continue
        limit = float(words[1]) if len(words) > 1 else 90
        n += 1
        leech_dir = os.path.join(work, f"leech{n}")
        os.makedirs(leech_dir)
        started = time.time()
        leecher = session(BASE_PORT + n)
        handle = leecher.add_torrent({"ti": lt.torrent_info(info), "save_path": leech_dir})
        deadline = started + limit
        while time.time() < deadline and not handle.status().is_seeding:
            # The seeder re-announces often, so the tracker keeps its entry fresh.
            time.sleep(0.2)
        st = handle.status()
        if not st.is_seeding:
            print(f"FAILED leecher {n}: progress {st.progress:.2f}, tracker '{st.current_tracker}', "
                  f"peers {st.num_peers}, state {st.state}", flush=True)
            continue
        data = open(os.path.join(leech_dir, "payload.bin"), "rb").read()
        if hashlib.sha1(data).digest() != hashlib.sha1(payload).digest():
            print(f"FAILED leecher {n}: downloaded bytes differ", flush=True)
            continue
        print(f"DONE {time.time() - started:.1f}", flush=True)
        leecher.remove_torrent(handle)


if __name__ == "__main__":
    main()
