#!/usr/bin/python3
"""A real BitTorrent client against `tracker run`: python3-libtorrent runs a seeder
and a leecher on 127.0.0.1 with DHT, LSD, UPnP and NAT-PMP off, so the leecher can
only learn the seeder from our tracker. The leecher must finish a 1 MiB download with
identical bytes, and a scrape must then count the completion."""
import hashlib
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (fail, free_tcp_port, free_udp_port, lt_session, scrape, seeded_torrent,  # noqa: E402
                    start_tracker, stop, wait_for_udp_tracker)

try:
    import libtorrent as lt
except ImportError as error:
    fail(f"python3-libtorrent is not importable by {sys.executable} ({error}); run scripts/setup.sh")


def session(port):
    return lt_session(lt, "127.0.0.1", port)


def main():
    work = tempfile.mkdtemp(prefix="lt-interop-")
    udp = free_udp_port()
    tracker = start_tracker(["--udp", f"127.0.0.1:{udp}", "--interval", "5", "--log-level", "debug"],
                            os.path.join(work, "tracker.log"))
    try:
        wait_for_udp_tracker(udp)
        seed_dir, leech_dir = os.path.join(work, "seed"), os.path.join(work, "leech")
        os.makedirs(leech_dir)
        info, payload = seeded_torrent(lt, seed_dir, f"udp://127.0.0.1:{udp}/announce")
        info_hash = str(info.info_hash())

        seeder, leecher = session(free_tcp_port()), session(free_tcp_port())
        s = seeder.add_torrent({"ti": info, "save_path": seed_dir, "flags": lt.torrent_flags.seed_mode})
        time.sleep(1)
        l = leecher.add_torrent({"ti": lt.torrent_info(info), "save_path": leech_dir})

        deadline = time.time() + 90
        while time.time() < deadline:
            st = l.status()
            if st.is_seeding:
                break
            for session_ in (seeder, leecher):
                for a in session_.pop_alerts():
                    if a.category() & lt.alert.category_t.error_notification:
                        print("libtorrent:", a.message(), flush=True)
            time.sleep(0.2)
        else:
            st, ss = l.status(), s.status()
            fail(f"leecher did not complete: progress {st.progress:.2f}, peers {st.num_peers}, "
                 f"leecher tracker '{st.current_tracker}', seeder peers {ss.num_peers}")

        with open(os.path.join(leech_dir, "payload.bin"), "rb") as f:
            got = f.read()
        if hashlib.sha1(got).digest() != hashlib.sha1(payload).digest():
            fail("downloaded bytes differ from the seeder's")
        print(f"leecher completed 1 MiB with identical bytes (info hash {info_hash})", flush=True)

        # libtorrent announces `completed` when it finishes; wait for the tracker to count it.
        deadline = time.time() + 30
        counts = {}
        while time.time() < deadline:
            l.force_reannounce()
            counts = scrape(udp, info_hash)
            if counts["completed"] >= 1 and counts["seeders"] >= 2:
                break
            time.sleep(1)
        else:
            fail(f"scrape did not report the completion: {counts}")
        print(f"scrape: {counts}", flush=True)
        if counts["completed"] != 1:
            fail(f"expected exactly one completion, scrape says {counts}")
        del seeder, leecher
    finally:
        code = stop(tracker)
        if code not in (0, None):
            print(open(os.path.join(work, "tracker.log")).read()[-4000:])
            fail(f"tracker exited with {code} on SIGTERM")
        shutil.rmtree(work, ignore_errors=True)
    print("PASS libtorrent_swarm", flush=True)


main()
