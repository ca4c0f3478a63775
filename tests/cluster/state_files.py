#!/usr/bin/python3
"""What a node leaves on disk is its own, and its admin token is kept out of logs:

1. The SQLite repository and its -wal and -shm files are created 0600 (they were 0644:
   every peer address the cluster holds, readable by any local user).
2. A node started without --admin-token-file whose stdout is not a terminal (a service,
   `scripts/cluster.sh`'s log) writes the token it generates to a 0600 file beside its
   repository and logs the file's name, not the token (the token used to be printed to
   stdout, which ended up in a 0644 log). The token in the file works.
3. A token file others can read is warned about, as a key file is.
"""
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, activemq, fail, free_tcp_port, free_udp_port, log  # noqa: E402
from common import tracker_binary  # noqa: E402


def status_of(url, token=None):
    request = urllib.request.Request(url, data=b"{}", method="PUT",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main():
    print(activemq("start"))
    cluster = Cluster(f"files{os.getpid()}", free_udp_port())
    generated = None
    ok = False
    try:
        # 3. The harness's token file, made readable by others for this node.
        os.chmod(cluster.admin_token_file, 0o644)
        node = cluster.add(1)
        cluster.wait_converged(timeout=30)
        os.chmod(cluster.admin_token_file, 0o600)
        time.sleep(0.5)
        if "admin token file is readable by others" not in open(node.log_path).read():
            fail("a world-readable admin token file was accepted without a warning")
        log("a world-readable --admin-token-file is warned about")

        # 1. The repository and its journal files.
        deadline = time.time() + 10
        while not all(os.path.exists(node.db + suffix) for suffix in ("", "-wal", "-shm")):
            if time.time() > deadline:
                fail(f"the repository files did not appear: {os.listdir(cluster.work)}")
            time.sleep(0.1)
        modes = {suffix or "db": oct(os.stat(node.db + suffix).st_mode & 0o777) for suffix in ("", "-wal", "-shm")}
        if any(int(m, 8) & 0o077 for m in modes.values()):
            fail(f"repository files readable by others: {modes}")
        log(f"repository files: {modes}")

        # 2. A generated token, stdout to a log file.
        http = free_tcp_port()
        db = os.path.join(cluster.work, "node2.sqlite")
        out_path = os.path.join(cluster.work, "node2.stdout")
        with open(out_path, "w") as out:
            generated = subprocess.Popen(
                [tracker_binary(), "run", "--id", "2", *cluster.peer_args, "--broker", cluster.broker, "--db", db,
                 "--http", f"127.0.0.1:{http}", "--cluster", cluster.name, "--keepalive", cluster.keepalive,
                 *cluster.security_args], stdout=out, stderr=subprocess.STDOUT)
        token_path = db + ".admin-token"
        deadline = time.time() + 15
        while not os.path.exists(token_path):
            if time.time() > deadline or generated.poll() is not None:
                fail(f"no generated token file at {token_path}: {open(out_path).read()[-2000:]}")
            time.sleep(0.1)
        token = open(token_path).read().strip()
        mode = os.stat(token_path).st_mode & 0o777
        if mode != 0o600 or len(token) < 16:
            fail(f"generated token file mode {oct(mode)}, {len(token)} characters")
        deadline = time.time() + 15
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http}/api/node", timeout=1).read()
                break
            except OSError:
                if time.time() > deadline:
                    fail("node 2's dashboard never answered")
                time.sleep(0.2)
        written = open(out_path).read()
        if token in written:
            fail("the generated admin token was written to stdout/stderr, which a log keeps")
        if token_path not in written:
            fail(f"the log does not say where the generated token is: {written[-1500:]}")
        url = f"http://127.0.0.1:{http}/api/config"
        without, wrong, right = status_of(url), status_of(url, "x" * 32), status_of(url, token)
        if without != 401 or wrong != 401 or right == 401:
            fail(f"PUT /api/config: no token {without}, a wrong one {wrong}, the generated one {right}")
        log(f"generated token: in {token_path} ({oct(mode)}), not in the log; it is accepted ({right}), others are not")
        ok = True
    finally:
        if generated and generated.poll() is None:
            generated.kill()
            generated.wait()
        if not ok:
            cluster.dump()
        cluster.stop()
    print("PASS state_files", flush=True)


main()
