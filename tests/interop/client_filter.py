#!/usr/bin/python3
"""The client filter against a real client: python3-libtorrent announces to a standalone
`tracker run --db` whose peer-id prefix (`peer_fingerprint`, `-LT2080-` for 2.0.8) the
operator names through `tracker admin clients`.

1. Allowed (an allow list holding only libtorrent's prefix): libtorrent's announce is
   answered, and `tracker client announce` (`-TR0001-`) is refused as not allowed.
2. Denied: libtorrent reports a tracker failure, and the same peer-id prefix sent by
   `tracker client announce` reads the BEP 15 error naming the client. (libtorrent 2.0.8
   hands its alert the error datagram from its first byte, the action's 0x00, so the
   text it shows is always empty: `udp_tracker_connection::on_receive` passes `buf`, not
   the span past the header.)
3. A longer allow rule carves libtorrent back out of a deny on `-LT`: served again.
4. The rules survive kill -9 and a restart (kept operator data), and an export carries
   them.
5. Rules removed: every client is served."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (fail, free_tcp_port, lt_session, seeded_torrent, standalone_with_db, starter,  # noqa: E402
                    stop, tracker_binary)

try:
    import libtorrent as lt
except ImportError as error:
    fail(f"python3-libtorrent is not importable by {sys.executable} ({error}); run scripts/setup.sh")


def admin(http, token, *args):
    out = subprocess.run([tracker_binary(), "admin", *args, "--node", f"127.0.0.1:{http}", "--token-file", token],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail(f"tracker admin {' '.join(args)}: {out.returncode} {out.stdout.strip()!r} {out.stderr.strip()!r}")
    return out.stdout


def cli_announce(udp, info_hash, peer_id=None):
    """`tracker client announce`, with its own peer id (-TR0001-…) unless given: (exit
    status, output)."""
    out = subprocess.run([tracker_binary(), "client", "announce", f"udp://127.0.0.1:{udp}", "--info-hash", info_hash]
                         + ([f"--peer-id={peer_id}"] if peer_id else []), capture_output=True, text=True, timeout=30)
    return out.returncode, (out.stdout + out.stderr).strip()


def lt_announce(ses, handle, timeout=20):
    """Forces one announce and returns ("reply", peers) or ("error", message)."""
    ses.pop_alerts()
    handle.force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)
    deadline = time.time() + timeout
    while time.time() < deadline:
        ses.wait_for_alert(500)
        for a in ses.pop_alerts():
            if isinstance(a, lt.tracker_reply_alert):
                return "reply", a.num_peers
            if isinstance(a, lt.tracker_error_alert):
                return "error", a.failure_reason() or a.error_message() or a.message()
    fail("libtorrent saw neither a tracker reply nor a tracker error")


def main():
    work = tempfile.mkdtemp(prefix="client-filter-")
    procs = []
    try:
        udp, http, token, args = standalone_with_db(work)
        args += ["--interval", "5"]
        start = starter(args, work, udp, procs)

        proc = start("first.log")
        ses = lt_session(lt, "127.0.0.1", free_tcp_port())
        # A restarted tracker issues connection ids under a new key: libtorrent must not
        # keep the old one for its default minute.
        ses.apply_settings({"udp_tracker_token_expiry": 1})
        fingerprint = ses.get_settings()["peer_fingerprint"]
        if not (fingerprint.startswith("-LT") and len(fingerprint) == 8):
            fail(f"libtorrent's peer fingerprint is {fingerprint!r}, not -LTxxxx-")
        seed_dir = os.path.join(work, "seed")
        info, _ = seeded_torrent(lt, seed_dir, f"udp://127.0.0.1:{udp}/announce", size=64 << 10, v1_only=True)
        info_hash = str(info.info_hash())
        handle = ses.add_torrent({"ti": info, "save_path": seed_dir, "flags": lt.torrent_flags.seed_mode})

        # 1. An allow list of libtorrent alone.
        admin(http, token, "clients", "allow", fingerprint)
        kind, what = lt_announce(ses, handle)
        if kind != "reply":
            fail(f"allowed libtorrent was refused: {what!r}")
        code, out = cli_announce(udp, info_hash)
        if code == 0 or "client -TR0001- is not allowed by this tracker" not in out:
            fail(f"a client the allow list does not name was served: {code} {out!r}")
        print(f"allowed {fingerprint}: libtorrent served, -TR0001- refused ({out.splitlines()[-1]})", flush=True)

        # 2. Denied: the same prefix's rule replaced.
        admin(http, token, "clients", "deny", fingerprint)
        kind, what = lt_announce(ses, handle)
        if kind != "error":
            fail(f"denied libtorrent was served: {kind} {what!r}")
        code, out = cli_announce(udp, info_hash, fingerprint + "cli-check000")
        if code == 0 or f"client {fingerprint} is denied by this tracker" not in out:
            fail(f"libtorrent's prefix from the CLI: {code} {out!r}")
        code, out = cli_announce(udp, info_hash)
        if code != 0:
            fail(f"with no allow rule left, -TR0001- must be served: {out!r}")
        print(f"denied {fingerprint}: libtorrent reports a tracker failure; its prefix reads "
              f"'client {fingerprint} is denied by this tracker'; -TR0001- served", flush=True)

        # 3. A deny on the whole family, and libtorrent's own version allowed: longest wins.
        admin(http, token, "clients", "remove", fingerprint)
        admin(http, token, "clients", "deny", "-LT")
        kind, what = lt_announce(ses, handle)
        code, out = cli_announce(udp, info_hash, fingerprint + "cli-check000")
        if kind != "error" or "client -LT is denied by this tracker" not in out:
            fail(f"libtorrent under a deny of -LT: {kind} {what!r}, from the CLI {out!r}")
        admin(http, token, "clients", "allow", fingerprint)
        listing = admin(http, token, "clients", "list")
        if f"{fingerprint} allow" not in listing or "-LT deny" not in listing:
            fail(f"tracker admin clients list: {listing!r}")

        # 4. Kept through kill -9 and a restart, and exported.
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = start("second.log")
        time.sleep(1.5)
        if admin(http, token, "clients") != listing:
            fail(f"the client rules after kill -9: {admin(http, token, 'clients')!r}, were {listing!r}")
        kind, what = lt_announce(ses, handle)
        if kind != "reply":
            fail(f"libtorrent's own version is allowed past the deny of -LT, after a restart too: {what!r}")
        export = os.path.join(work, "export.json")
        admin(http, token, "export", export)
        with open(export) as f:
            clients = json.load(f)["access"]["clients"]
        if sorted((c["prefix"], c["rule"]) for c in clients) != sorted([(fingerprint, "allow"), ("-LT", "deny")]):
            fail(f"the export's client rules: {clients}")
        print(f"longest prefix: -LT denied, {fingerprint} allowed, libtorrent served; kept through kill -9; exported", flush=True)

        # Bad input: a clear error, nothing committed.
        out = subprocess.run([tracker_binary(), "admin", "clients", "deny", "has space", "--node", f"127.0.0.1:{http}",
                              "--token-file", token], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 or "printable ASCII" not in out.stderr:
            fail(f"a prefix with a space: {out.returncode} {out.stderr!r}")

        # 5. Rules removed: everyone is served.
        admin(http, token, "clients", "remove", fingerprint, "-LT")
        if "every client is served" not in admin(http, token, "clients"):
            fail("rules left after removing them all")
        kind, what = lt_announce(ses, handle)
        code, out = cli_announce(udp, info_hash)
        if kind != "reply" or code != 0:
            fail(f"with no rules, libtorrent {kind} {what!r}, -TR0001- {code} {out!r}")
        del ses
        if stop(proc) != 0:
            fail(f"SIGTERM: exit {proc.returncode}")
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)
    print("PASS client_filter", flush=True)


main()
