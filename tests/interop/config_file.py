#!/usr/bin/python3
"""`tracker run --config FILE` and the configuration tab's edits, on a standalone node.

1. `tracker config example` (the package's /etc/tracker/tracker.toml) passes `tracker
   config check` once the files it names exist, and is refused naming the first missing
   one before; an unknown key, a bad value, a broken file, a quorum or id out of range, a
   missing key, CA or database directory, a missing or absent interface are errors naming
   the key (or the line), found by `check` as `run` would find them before binding.
2. `run --config FILE` takes the file's settings; a flag on the command line overrides it.
3. PUT /api/config saves an edit to the file (validated first; a bad value changes
   nothing), the running service keeps its settings, and Stop + Start applies the file.
   The save keeps the file's mode (0600) and comments and follows no symlink planted
   next to it (one at FILE.new used to be written through).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_tcp_port, free_udp_port, tracker_binary  # noqa: E402


def check(path):
    out = subprocess.run([tracker_binary(), "config", "check", path], capture_output=True, text=True)
    return out.returncode, (out.stdout + out.stderr).strip().splitlines()[0] if (out.stdout + out.stderr).strip() else ""


def call(port, path, method="GET", body=None, token=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=3) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_dashboard(port, seconds=10):
    """Until the node's dashboard answers (it binds after the tracker's sockets)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            call(port, "/api/node")
            return
        except OSError:
            time.sleep(0.1)


def setting(port, key):
    return next(s["value"] for s in call(port, "/api/config")[1] if s["key"] == key)


def layers(work, token_file):
    """The file, its drop-ins, the environment and the command line, in that order of
    precedence; a refusal exits 78 naming the layer that set the key; the dashboard's
    edits go to a drop-in when the directory exists."""
    udp, http = free_udp_port(), free_tcp_port()
    path = os.path.join(work, "layers.toml")
    with open(path, "w") as f:
        f.write(f'udp = "127.0.0.1:{udp}"\nhttp = "{http}"\ninterval = 1000\nnumwant-max = 100\nmax-swarms = 100\nmax-peers = 100\n')
    shipped = open(path).read()
    os.makedirs(path + ".d")
    with open(os.path.join(path + ".d", "10-local.toml"), "w") as f:
        f.write("numwant-max = 150\nmax-swarms = 150\nmax-peers = 150\n")
    with open(os.path.join(path + ".d", "20-later.toml"), "w") as f:
        f.write("max-peers = 175\n")
    env = dict(os.environ, TRACKER_MAX_SWARMS="200", TRACKER_NUMWANT_DEFAULT="20")
    out = subprocess.run([tracker_binary(), "config", "check", path], capture_output=True, text=True, env=env)
    sources = {"interval = 1000": path, "numwant-max = 150": "10-local.toml", "max-peers = 175": "20-later.toml",
               "max-swarms = 200": "environment TRACKER_MAX_SWARMS"}
    for value, source in sources.items():
        if not any(value in row and source in row for row in out.stdout.splitlines()):
            fail(f"config check must show {value} from {source}: {out.stdout}{out.stderr}")
    bad = dict(env, TRACKER_INTERVAL="soon")
    out = subprocess.run([tracker_binary(), "run", "--config", path], capture_output=True, text=True, env=bad, timeout=10)
    if out.returncode != 78 or "environment TRACKER_INTERVAL" not in out.stderr or "key 'interval'" not in out.stderr:
        fail(f"a bad value from the environment must exit 78 naming the variable and the key: {out.returncode} {out.stderr}")
    with open(os.path.join(path + ".d", "30-bad.toml"), "w") as f:
        f.write("bogus = 1\n")
    out = subprocess.run([tracker_binary(), "run", "--config", path], capture_output=True, text=True, env=env, timeout=10)
    if out.returncode != 78 or "30-bad.toml" not in out.stderr or "unknown key 'bogus'" not in out.stderr:
        fail(f"an unknown key in a drop-in must exit 78 naming the drop-in: {out.returncode} {out.stderr}")
    os.unlink(os.path.join(path + ".d", "30-bad.toml"))
    proc = subprocess.Popen([tracker_binary(), "run", "--config", path, "--max-swarms", "300", "--admin-token-file", token_file],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "layers.log"), "w"), env=env)
    try:
        wait_dashboard(http)
        want = {"announce interval": "1000 s", "numwant default / max": "20 / 150", "max peers": "175", "max swarms": "300"}
        got = {k: setting(http, k) for k in want}
        if got != want:
            fail(f"precedence must be command line > environment > drop-ins in name order > file: {got}, want {want}")
        rows = {r["key"]: r for r in call(http, "/api/config")[1] if "source" in r}
        want = {"numwant-max": ("150", "10-local.toml"), "max-peers": ("175", "20-later.toml"),
                "numwant-default": ("20", "environment TRACKER_NUMWANT_DEFAULT"), "max-swarms": ("300", "command line"),
                "interval": ("1000", path)}
        for key, (value, source) in want.items():
            row = rows.get(key) or {}
            if row.get("value") != value or source not in row.get("source", ""):
                fail(f"/api/config must show {key} = {value} from {source}: {row}")
        token = "config-test-token-123456"
        status, body = call(http, "/api/config", "PUT", json.dumps({"interval": "900"}).encode(), token)
        saved = os.path.join(path + ".d", "90-dashboard.toml")
        if status != 200 or not os.path.exists(saved) or "interval = 900" not in open(saved).read():
            fail(f"with a drop-in directory the dashboard saves to 90-dashboard.toml: {status} {body}")
        if open(path).read() != shipped:
            fail("the dashboard must leave the package's file alone when it has a drop-in directory")
        status, body = call(http, "/api/config", "PUT", json.dumps({"held-window": "15s\"\nbogus = 1"}).encode(), token)
        if status != 400 or "interval = 900" not in open(saved).read() or "bogus" in open(saved).read():
            fail(f"an edit `config check` refuses must be refused and change nothing: {status} {body}")
    finally:
        proc.terminate()
        proc.wait(10)
    print("  layers: command line > TRACKER_<KEY> > drop-ins in name order > file, each value's source in `config check` and /api/config; "
          "a bad key or value exits 78 naming its layer; dashboard edits go to tracker.toml.d/90-dashboard.toml")


def main():
    work = tempfile.mkdtemp(prefix="config-")
    example = os.path.join(work, "example.toml")
    standalone = subprocess.run([tracker_binary(), "config", "example"], capture_output=True, text=True, check=True).stdout
    text = subprocess.run([tracker_binary(), "config", "example", "--cluster"], capture_output=True, text=True, check=True).stdout
    with open(example, "w") as f:
        f.write(standalone)
    # The example names the package's paths; until they exist it must say which is missing.
    code, line = check(example)
    if code != 78 or "cannot read /etc/tracker/admin.token" not in line:
        fail(f"the example without its token file must be refused (exit 78) naming the file: {code} {line}")
    # Made as docs/operating/deploy.md makes them, under the work directory instead of /etc/tracker.
    etc = os.path.join(work, "etc")
    os.makedirs(etc)
    subprocess.run([tracker_binary(), "keygen", "--output", os.path.join(etc, "cluster.key")], check=True, capture_output=True)
    with open(os.path.join(etc, "broker.password"), "w") as f:
        f.write("secret-broker-password\n")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                    "-subj", "/CN=config test CA", "-keyout", os.path.join(etc, "ca.key"), "-out", os.path.join(etc, "broker-ca.pem")],
                   check=True, capture_output=True)
    with open(os.path.join(etc, "admin.token"), "w") as f:
        f.write("config-example-admin-token\n")

    def local(t):
        return t.replace("/etc/tracker/", etc + "/").replace("/var/lib/tracker/", work + "/").replace('"eth0"', '"lo"')
    text = local(text)
    with open(example, "w") as f:
        f.write(local(standalone))
    code, line = check(example)
    if code != 0 or "standalone node on udp 0.0.0.0:6969, [::]:6969" not in line:
        fail(f"the package's file must pass its own check as a standalone node on both families: {line}")
    # The cluster drop-in the guide installs beside it makes it a cluster node.
    os.makedirs(example + ".d")
    with open(os.path.join(example + ".d", "cluster.toml"), "w") as f:
        f.write(text)
    code, line = check(example)
    if code != 0 or "cluster node 1" not in line:
        fail(f"the example with its cluster drop-in must pass its own check once its files exist: {line}")
    def refused(body, want):
        path = os.path.join(work, "bad.toml")
        with open(path, "w") as f:
            f.write(body)
        code, line = check(path)
        if code == 0 or want not in line:
            fail(f"{body!r} must be refused naming {want!r}: {line}")

    for body, want in (("bogus = 1\n", "unknown key 'bogus'"), ("max-swarms = \"many\"\n", "key 'max-swarms'"),
                       ("connect-limit = \"fast\"\n", "key 'connect-limit'"), ("interval = [\n", "line 1"),
                       ("[section]\nx = 1\n", "key 'section'")):
        refused(body, want)
    # What only starting a node used to find: every check `run` makes before it binds.
    def cluster_node(**changes):
        lines = []
        for row in text.splitlines():
            key = row.split("=")[0].strip()
            if key in changes:
                if changes[key] is not None:
                    lines.append(f"{key} = {changes[key]}")
            else:
                lines.append(row)
        lines += [f"{k} = {v}" for k, v in changes.items() if v is not None and not any(r.startswith(k + " ") for r in text.splitlines())]
        return "\n".join(lines) + "\n"
    missing = os.path.join(work, "missing.key")
    for body, want in ((cluster_node(quorum='"majority"'), "--quorum must be live or strict"),
                       (cluster_node(id='"0"'), "--id must be a number"),
                       (cluster_node(**{"cluster-key-file": f'["{missing}"]'}), f"cannot read {missing}"),
                       (cluster_node(**{"broker-ca-file": f'"{missing}"'}), missing),
                       (cluster_node(db=f'"{work}/no/such/dir/n.sqlite"'), "does not exist"),
                       (cluster_node(interface=None), "needs --interface"),
                       (cluster_node(floating=None, interface='"nosuch0"'), "no interface named 'nosuch0'"),
                       (cluster_node(floating='"10.0.0.300:6969"'), "floating")):
        refused(body, want)
    if os.geteuid() == 0:
        # A fresh network namespace has its loopback down: a down interface is named too.
        ns = f"cfg{os.getpid() % 100000}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            with open(example, "w") as f:
                f.write(text)
            out = subprocess.run(["ip", "netns", "exec", ns, tracker_binary(), "config", "check", example],
                                 capture_output=True, text=True)
            if out.returncode == 0 or "interface 'lo' is down" not in out.stderr:
                fail(f"a down interface must be refused naming it: {out.stdout}{out.stderr}")
        finally:
            subprocess.run(["ip", "netns", "del", ns])
    print("  config check: the example passes once its files exist; unknown keys, bad values, broken files and every check of run are named")

    udp, http = free_udp_port(), free_tcp_port()
    path = os.path.join(work, "node.toml")
    with open(path, "w") as f:
        f.write(f'# node of the config test\nudp = "127.0.0.1:{udp}"\nhttp = "{http}"\n'
                f'interval = 1200   # seconds, the operator\'s note\nmax-swarms = 5000\n')
    os.chmod(path, 0o600)
    # A symlink planted where the old save wrote its temporary file, pointing at a victim.
    victim = os.path.join(work, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, path + ".new")
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write("config-test-token-123456\n")
    proc = subprocess.Popen([tracker_binary(), "run", "--config", path, "--max-swarms", "7000", "--admin-token-file", token_file],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "log"), "w"))
    try:
        wait_dashboard(http)
        if setting(http, "announce interval") != "1200 s" or setting(http, "max swarms") != "7000":
            fail(f"the file's interval and the command line's max-swarms must hold: {call(http, '/api/config')[1]}")
        status, editable = call(http, "/api/config/editable")
        if "max-swarms" in editable["keys"] or "interval" not in editable["keys"]:
            fail(f"a key set on the command line is not editable, the others are: {editable}")
        token = "config-test-token-123456"
        before = open(path).read()
        status, body = call(http, "/api/config", "PUT", json.dumps({"interval": "soon"}).encode(), token)
        if status != 400 or "interval" not in body["error"] or open(path).read() != before:
            fail(f"a bad value must be refused and leave the file alone: {status} {body}")
        status, body = call(http, "/api/config", "PUT", json.dumps({"interval": "900"}).encode())
        if status != 401:
            fail(f"an edit without the token must be a 401: {status}")
        status, body = call(http, "/api/config", "PUT", json.dumps({"interval": "900", "max-peers": "5000"}).encode(), token)
        if status != 200 or "interval = 900" not in open(path).read():
            fail(f"the edit must be saved to the file: {status} {body} {open(path).read()}")
        saved = open(path).read()
        if "# node of the config test" not in saved or "# seconds, the operator's note" not in saved:
            fail(f"a save must keep the file's comments: {saved!r}")
        if os.path.islink(path) or os.stat(path).st_mode & 0o777 != 0o600:
            fail(f"a save must keep the file a regular 0600 file: link {os.path.islink(path)}, "
                 f"mode {oct(os.stat(path).st_mode & 0o777)}")
        if open(victim).read() != "precious\n":
            fail("a save followed the symlink planted at FILE.new and overwrote its target")
        leftovers = [n for n in os.listdir(work) if n.startswith(".node.toml")]
        if leftovers:
            fail(f"a save left temporary files behind: {leftovers}")
        if setting(http, "announce interval") != "1200 s":
            fail("the running service keeps its settings until the next Start")
        for action in ("stop", "start"):
            status, body = call(http, f"/api/service/{action}", "POST", b"", token)
            if status != 200:
                fail(f"{action}: {status} {body}")
        if setting(http, "announce interval") != "900 s" or setting(http, "max peers") != "5000":
            fail(f"Start must apply the saved file: {call(http, '/api/config')[1]}")
        print("  run --config: file settings hold, the command line overrides; a dashboard edit is saved (mode, "
              "comments kept, no symlink followed), checked, and applied on the next Start")
    finally:
        proc.terminate()
        proc.wait(10)
    layers(work, token_file)
    print("config file: all checks passed")


if __name__ == "__main__":
    main()
