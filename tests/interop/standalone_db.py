#!/usr/bin/python3
"""A standalone node with --db keeps its operator data across restarts.

1. Through `tracker admin`: a .torrent registered, two hashes allowed and one denied,
   mode allow. An announce for an unlisted hash is refused; a listed one is answered.
   Two peers complete the torrent.
2. The dashboard's Stop then Start: the service forgets its swarms, not that data.
3. SIGTERM, then the same command again: the torrent, the rules and the mode are back,
   the unlisted hash is still refused, and a scrape still counts the 2 completions.
4. A rule removed, then kill -9 right after the command returned: the removal was on disk.
5. A node started without --db on another port keeps nothing (the default is unchanged).
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (fail, free_tcp_port, free_udp_port, standalone_with_db, starter, stop, tracker_binary,  # noqa: E402
                    wait_for_udp_tracker)


def bencode(value):
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, str):
        return bencode(value.encode())
    if isinstance(value, dict):
        return b"d" + b"".join(bencode(k) + bencode(v) for k, v in sorted(value.items())) + b"e"
    raise TypeError(value)


def make_torrent(name, size=100000, piece=65536):
    info = {"name": name, "piece length": piece, "length": size, "pieces": os.urandom(20 * ((size + piece - 1) // piece))}
    return bencode({"announce": "udp://127.0.0.1:6969", "info": info}), hashlib.sha1(bencode(info)).hexdigest()


def admin(http, token, *args):
    command = [tracker_binary(), "admin", args[0], "--node", f"127.0.0.1:{http}", "--token-file", token, *args[1:]]
    out = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail(f"tracker admin {' '.join(args)}: {out.returncode} {out.stdout.strip()!r} {out.stderr.strip()!r}")
    return out.stdout


def announce(udp, info_hash):
    """The decoded reply: the client prints an error reply and exits non-zero on it."""
    out = subprocess.run([tracker_binary(), "client", "announce", f"udp://127.0.0.1:{udp}", "--info-hash", info_hash],
                         capture_output=True, text=True, timeout=30)
    return out.returncode, (out.stdout + out.stderr).strip()


def completions(udp, info_hash):
    out = subprocess.run([tracker_binary(), "client", "scrape", f"udp://127.0.0.1:{udp}", info_hash],
                         capture_output=True, text=True, timeout=30)
    for word in out.stdout.replace(",", " ").split():
        if word.startswith("completed="):
            return int(word.split("=", 1)[1])
    fail(f"scrape of {info_hash}: {out.stdout!r} {out.stderr!r}")


def policy(http, token):
    """(mode, {hash: rule}) as `tracker admin access` prints them."""
    lines = admin(http, token, "access").split("\n")
    mode = lines[0].split()[1]
    rules = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 2:
            rules[parts[0]] = parts[1]
    return mode, rules


def torrents(http, token):
    return [line.split()[0] for line in admin(http, token, "torrents").split("\n") if line.strip()]


def expect_kept(http, token, udp, info_hash, listed, denied, unlisted, when):
    mode, rules = policy(http, token)
    if mode != "allow" or rules != {**{h: "allow" for h in listed}, denied: "deny"}:
        fail(f"{when}: policy {mode} {rules}")
    if torrents(http, token) != [info_hash]:
        fail(f"{when}: torrents {torrents(http, token)}")
    code, out = announce(udp, unlisted)
    if code == 0 or "not registered" not in out:
        fail(f"{when}: an unlisted hash was not refused: {code} {out!r}")
    for h in [info_hash, listed[0]]:
        code, out = announce(udp, h)
        if code != 0:
            fail(f"{when}: a listed hash was refused: {out!r}")


def main():
    work = tempfile.mkdtemp(prefix="standalone-db-")
    procs = []
    try:
        udp, http, token, args = standalone_with_db(work)
        start = starter(args, work, udp, procs)

        proc = start("first.log")
        data, info_hash = make_torrent("standalone-db.bin")
        path = os.path.join(work, "standalone-db.torrent")
        with open(path, "wb") as f:
            f.write(data)
        listed = ["11" * 20, "22" * 20]
        denied, unlisted = "33" * 20, "44" * 20
        admin(http, token, "register", path)
        admin(http, token, "allow", *listed)
        admin(http, token, "deny", denied)
        admin(http, token, "mode", "allow")
        expect_kept(http, token, udp, info_hash, listed, denied, unlisted, "as set")
        for peer in ("completer-one", "completer-two"):
            subprocess.run([tracker_binary(), "client", "announce", f"udp://127.0.0.1:{udp}", "--info-hash", info_hash,
                            "--peer-id", peer, "--event", "completed", "--left", "0"], capture_output=True, timeout=30, check=True)
        if completions(udp, info_hash) != 2:
            fail(f"two completions before the stop, scrape says {completions(udp, info_hash)}")

        for control in ("stop", "start"):
            out = subprocess.run(["curl", "-sf", "-X", "POST", "-H", f"Authorization: Bearer {open(token).read().strip()}",
                                  f"http://127.0.0.1:{http}/api/service/{control}"], capture_output=True, text=True, timeout=30)
            if out.returncode != 0:
                fail(f"dashboard {control}: {out.returncode} {out.stdout!r} {out.stderr!r}")
        wait_for_udp_tracker(udp)
        expect_kept(http, token, udp, info_hash, listed, denied, unlisted, "after the dashboard's Stop and Start")

        if stop(proc) != 0:
            fail(f"SIGTERM: exit {proc.returncode}")
        proc = start("second.log")
        expect_kept(http, token, udp, info_hash, listed, denied, unlisted, "after SIGTERM and a restart")
        if completions(udp, info_hash) < 2:
            fail(f"the completions after the restart: scrape says {completions(udp, info_hash)}")
        with open(os.path.join(work, "second.log")) as f:
            if "operator data restored" not in f.read():
                fail("the restart did not log the restored operator data")

        admin(http, token, "remove", listed[1])
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = start("third.log")
        expect_kept(http, token, udp, info_hash, listed[:1], denied, unlisted, "after a removal and kill -9")
        stop(proc)

        # Without --db nothing is kept: the default stays as documented.
        plain_udp, plain_http = free_udp_port(), free_tcp_port()
        plain = ["--udp", f"127.0.0.1:{plain_udp}", "--http", f"127.0.0.1:{plain_http}", "--admin-token-file", token]
        start_plain = starter(plain, work, plain_udp, procs)
        for name in ("plain1.log", "plain2.log"):
            p = start_plain(name)
            if name == "plain1.log":
                admin(plain_http, token, "mode", "allow")
            elif policy(plain_http, token)[0] != "open":
                fail("a node without --db kept its access mode")
            stop(p)
        print(f"standalone --db: the torrent {info_hash[:8]}…, 3 rules and mode allow survive the dashboard's Stop and "
              "Start, SIGTERM and kill -9; its 2 completions survive SIGTERM")
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
