"""Helpers shared by the real-process tests: run `tracker`, find free ports, report."""
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tracker_binary():
    path = os.environ.get("TRACKER_BIN", os.path.join(ROOT, ".build", "debug", "tracker"))
    if not os.path.exists(path):
        fail(f"tracker binary not found at {path}; build it first (swift build)")
    return path


def free_port(kind=socket.SOCK_DGRAM):
    """A port on 127.0.0.1 that nothing uses right now (UDP by default)."""
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def free_udp_port():
    return free_port(socket.SOCK_DGRAM)


def free_tcp_port():
    return free_port(socket.SOCK_STREAM)


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def start_tracker(args, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen([tracker_binary(), "run", *args], stdout=log, stderr=subprocess.STDOUT)
    return proc


def standalone_with_db(work):
    """Ports, an admin token file (0600) and the arguments of a standalone node with a
    dashboard and `--db` in `work`: (udp, http, token, args)."""
    udp, http = free_udp_port(), free_tcp_port()
    token = os.path.join(work, "admin.token")
    with open(token, "w") as f:
        f.write(f"{os.path.basename(work)}-token-0123456789abcdef\n")
    os.chmod(token, 0o600)
    args = ["--udp", f"127.0.0.1:{udp}", "--http", f"127.0.0.1:{http}", "--admin-token-file", token,
            "--db", os.path.join(work, "standalone.sqlite")]
    return udp, http, token, args


def starter(args, work, udp, procs):
    """A function that starts `tracker run ARGS` logging to work/NAME, records the process
    in `procs` (for the caller to stop) and returns it once it answers on `udp`."""
    def start(name):
        proc = start_tracker(args, os.path.join(work, name))
        procs.append(proc)
        wait_for_udp_tracker(udp)
        return proc
    return start


def wait_for_udp_tracker(port, timeout=15.0):
    """Poll with BEP 15 connect requests until the tracker answers."""
    deadline = time.time() + timeout
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.2)
    try:
        while time.time() < deadline:
            s.sendto(bytes.fromhex("0000041727101980" "00000000" "01020304"), ("127.0.0.1", port))
            try:
                data, _ = s.recvfrom(2048)
                if len(data) == 16 and data[:8] == bytes.fromhex("0000000001020304"):
                    return
            except socket.timeout:
                pass
        fail(f"tracker on udp 127.0.0.1:{port} did not answer a connect within {timeout}s")
    finally:
        s.close()


def admin(node, token, *args, stdin=None, netns=None):
    """The output of `tracker admin ARGS` against the dashboard on 127.0.0.1:NODE with the
    admin token file (run in NETNS when given), or a failure naming what it said. A group
    (`user`, `clients`) takes its options after its subcommand."""
    words = 2 if args[:1] in (("user",), ("clients",)) else 1
    command = [tracker_binary(), "admin", *args[:words], "--node", f"127.0.0.1:{node}", "--token-file", token, *args[words:]]
    if netns:
        command = ["ip", "netns", "exec", netns, *command]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, input=stdin)
    if out.returncode != 0:
        fail(f"tracker admin {' '.join(args)}: {out.returncode} {out.stdout!r} {out.stderr!r}")
    return out.stdout


def user_totals(node, token, netns=None):
    """{user: {announces, completed, uploaded, downloaded}} from `tracker admin user list`."""
    return {line.split()[0]: {k: int(v) for k, v in (w.split("=") for w in line.split()[4:])}
            for line in admin(node, token, "user", "list", netns=netns).splitlines()}


def printed_key(out):
    """The key `tracker admin user add|key` printed."""
    for line in out.splitlines():
        if line.startswith("key "):
            return line.split()[1]
    fail(f"no key printed: {out!r}")


def stop(proc, timeout=10):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def scrape(port, info_hash_hex):
    out = subprocess.run([tracker_binary(), "client", "scrape", f"udp://127.0.0.1:{port}", info_hash_hex],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail(f"scrape failed: {out.stderr.strip()}")
    fields = dict(kv.split("=") for kv in out.stdout.split()[1:])
    return {k: int(v) for k, v in fields.items()}


def lt_session(lt, address, port):
    """A libtorrent session that can only find peers through the tracker: no DHT, LSD,
    UPnP or NAT-PMP."""
    return lt.session({
        "listen_interfaces": f"{address}:{port}",
        "enable_dht": False, "enable_lsd": False, "enable_upnp": False, "enable_natpmp": False,
        "allow_multiple_connections_per_ip": True,
        "alert_mask": lt.alert.category_t.error_notification | lt.alert.category_t.tracker_notification
                      | lt.alert.category_t.status_notification,
        "user_agent": "interop-test",
    })


def seeded_torrent(lt, seed_dir, tracker_url, size=1 << 20, v1_only=False, private=False):
    """Writes `size` random bytes to seed_dir/payload.bin and returns (torrent_info, payload)
    for a torrent announcing to tracker_url, if any (libtorrent 2 makes v1+v2 hybrids;
    Transmission 3.00 and aria2 read only v1 files: ask for `v1_only`; `private`: BEP 27's
    private=1)."""
    os.makedirs(seed_dir, exist_ok=True)
    payload = os.urandom(size)
    with open(os.path.join(seed_dir, "payload.bin"), "wb") as f:
        f.write(payload)
    fs = lt.file_storage()
    lt.add_files(fs, os.path.join(seed_dir, "payload.bin"))
    ct = lt.create_torrent(fs, 16384, flags=lt.create_torrent.v1_only) if v1_only else lt.create_torrent(fs, 16384)
    if private:
        ct.set_priv(True)
    if tracker_url:
        ct.add_tracker(tracker_url)
    lt.set_piece_hashes(ct, seed_dir)
    return lt.torrent_info(ct.generate()), payload
