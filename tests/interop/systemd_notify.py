#!/usr/bin/python3
"""systemd's Type=notify and the journal, without systemd as PID 1: this test is the
service manager. It binds the AF_UNIX datagram socket `NOTIFY_SOCKET` names, sets
`WATCHDOG_USEC`, and gives the node a log file named in `JOURNAL_STREAM`.

1. A standalone node sends READY=1 with a STATUS once it serves (an announce is answered
   by then), WATCHDOG=1 every half of WATCHDOG_USEC, and STOPPING=1 on SIGTERM.
2. The pings come from the node's own event loop: while the process is SIGSTOPped none
   come, and they resume after SIGCONT.
3. A cluster node (one node on the shared broker) sends READY=1 only once it has joined:
   its STATUS names its role, master and epoch.
4. With JOURNAL_STREAM naming its standard error, every text line starts with its syslog
   priority (`<6>` info, `<5>` notice, `<4>` warning); without it, none does.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fail, free_tcp_port, free_udp_port, tracker_binary, wait_for_udp_tracker  # noqa: E402

WATCHDOG_USEC = 400_000  # pings every 200 ms


class Manager:
    """The notify socket, with every datagram kept and when it came."""

    def __init__(self, work):
        self.path = os.path.join(work, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.messages = []  # (time, {key: value})

    def drain(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            self.messages.append((time.time(), fields))

    def first(self, key, timeout):
        end = time.time() + timeout
        while time.time() < end:
            for t, m in self.messages:
                if key in m:
                    return t, m
            self.drain(0.1)
        return None

    def pings(self, since, until):
        return [t for t, m in self.messages if "WATCHDOG" in m and since <= t <= until]


def environment(manager, log_path):
    st = os.stat(log_path)
    return dict(os.environ, NOTIFY_SOCKET=manager.path, WATCHDOG_USEC=str(WATCHDOG_USEC),
                JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")


def standalone(work):
    manager = Manager(work)
    log_path = os.path.join(work, "standalone.log")
    log = open(log_path, "w")
    udp, http = free_udp_port(), free_tcp_port()
    token = os.path.join(work, "token")
    with open(token, "w") as f:
        f.write("notify-test-admin-token-1\n")
    os.chmod(token, 0o644)  # readable by others: the node warns, a line at priority 4
    proc = subprocess.Popen([tracker_binary(), "run", "--udp", f"127.0.0.1:{udp}", "--http", str(http),
                             "--admin-token-file", token], stdout=subprocess.DEVNULL, stderr=log,
                            env=environment(manager, log_path))
    try:
        ready = manager.first("READY", 15)
        if not ready or "serving udp" not in ready[1].get("STATUS", ""):
            fail(f"no READY=1 with a STATUS from the standalone node: {manager.messages}")
        wait_for_udp_tracker(udp, timeout=2)  # READY=1 came: it answers at once
        start = time.time()
        manager.drain(2.0)
        pings = manager.pings(start, time.time())
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        if len(pings) < 7 or max(gaps) > 0.45:
            fail(f"WATCHDOG=1 must come every {WATCHDOG_USEC / 2e6:.1f} s: {len(pings)} in 2 s, gaps {gaps}")
        os.kill(proc.pid, signal.SIGSTOP)
        stopped = time.time()
        manager.drain(1.5)
        os.kill(proc.pid, signal.SIGCONT)
        resumed = time.time()
        during = manager.pings(stopped + 0.05, resumed)
        if during:
            fail(f"a stopped process sent {len(during)} watchdog pings: they must come from its own loop")
        manager.drain(1.0)
        after = manager.pings(resumed, time.time())
        if len(after) < 3:
            fail(f"watchdog pings must resume after SIGCONT: {len(after)} in 1 s")
        print(f"  standalone: READY=1 ({ready[1]['STATUS']}), {len(pings)} pings in 2 s "
              f"(longest gap {max(gaps):.2f} s), none while SIGSTOPped for 1.5 s, {len(after)} in the second after SIGCONT")
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        manager.drain(0.3)
        if not any("STOPPING" in m for _, m in manager.messages):
            fail("no STOPPING=1 on SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.close()
    lines = [l for l in open(log_path).read().splitlines() if l]
    unprefixed = [l for l in lines if not re.match(r"<[0-7]>", l)]
    if unprefixed:
        fail(f"under JOURNAL_STREAM every line needs its priority: {unprefixed[:3]}")
    want = {"<4>": " warning ", "<5>": " notice ", "<6>": " info "}
    for prefix, level in want.items():
        if not any(l.startswith(prefix) and level in l for l in lines):
            fail(f"no {level.strip()} line with priority {prefix}: {lines[:8]}")
    if any(l.startswith("<6>") and " warning " in l.split(":")[0] for l in lines):
        fail("a warning line carries the info priority")
    # Without JOURNAL_STREAM (or with one naming another file) no line has a prefix.
    plain = subprocess.run([tracker_binary(), "run", "--udp", "127.0.0.1:1", "--interval", "bad"],
                           capture_output=True, text=True, env=dict(os.environ, JOURNAL_STREAM="1:2"), timeout=10)
    if plain.returncode != 78 or plain.stderr.startswith("<"):
        fail(f"a config error exits 78, with no priority prefix when stderr is not the journal: {plain.returncode} {plain.stderr!r}")
    print(f"  journal: {len(lines)} lines, each with its priority (warning <4>, notice <5>, info <6>)")


def cluster(work):
    """One cluster node on the shared broker: READY=1 once it leads (it is alone)."""
    manager = Manager(os.path.join(work, "c"))
    log_path = os.path.join(work, "c", "node.log")
    log = open(log_path, "w")
    db = os.path.join(work, "c", "n.sqlite")
    group = f"239.255.{os.getpid() % 200 + 20}.{os.getpid() % 250 + 1}:{free_udp_port()}"
    proc = subprocess.Popen([tracker_binary(), "run", "--id", "1", "--group", group, "--interface", "lo", "--insecure-cluster",
                             "--cluster", f"notify{os.getpid()}", "--broker", "stomp://127.0.0.1:61613", "--db", db],
                            stdout=subprocess.DEVNULL, stderr=log, env=environment(manager, log_path))
    try:
        ready = manager.first("READY", 30)
        if not ready:
            fail(f"no READY=1 from a cluster node within 30 s: {manager.messages} {open(log_path).read()[-2000:]}")
        status = ready[1].get("STATUS", "")
        if not re.search(r"master \(serving\), master 1, epoch e\d+\.1", status):
            fail(f"READY=1 must come once the node has joined, its STATUS naming role, master and epoch: {status!r}")
        before = [m["STATUS"] for _, m in manager.messages if "STATUS" in m and "READY" not in m]
        print(f"  cluster: READY=1 once joined ({status}); before it: {before}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    work = tempfile.mkdtemp(prefix="notify-")
    os.makedirs(os.path.join(work, "c"))
    standalone(work)
    cluster(work)
    print("systemd notify: all checks passed")


if __name__ == "__main__":
    main()
