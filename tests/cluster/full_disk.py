#!/usr/bin/python3
"""A real full disk under one node of a 3-node cluster: its SQLite file lives on a small
tmpfs the test mounts and fills. Its writes fail; it must log why, vote ERROR, keep
running, and the cluster must keep answering (the other two are a majority). Once space
is freed its probe succeeds, it rewrites its repository, and the rows equal the master's."""
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, log  # noqa: E402


def main():
    if os.geteuid() != 0:
        fail("this test mounts a tmpfs and must run as root")
    print(activemq("start"))
    mount = tempfile.mkdtemp(prefix="tracker-full-disk-")
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mount], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"cannot mount a tmpfs: {out.stderr.strip()}")
    cluster = Cluster(f"disk{os.getpid()}", free_udp_port(), keepalive="500ms")
    ok = False
    try:
        small = cluster.add(1, db=os.path.join(mount, "node1.sqlite"))
        cluster.add(2)
        cluster.add(3)
        cluster.wait_converged()
        client = GroupClient(cluster.group)
        client.connect() or fail("no connect reply")
        # Leave a little room, then announce until the small node's disk is full.
        filler = os.path.join(mount, "filler")
        st = os.statvfs(mount)
        room = st.f_bavail * st.f_frsize - 96 * 1024
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k", f"count={max(room // 4096, 0)}"], capture_output=True)
        free = os.statvfs(mount)
        log(f"node 1's disk: {free.f_bavail * free.f_frsize // 1024} KiB free")
        torrents = [os.urandom(20) for _ in range(50)]
        replies = []
        short = []  # (batch, announces answered) for each batch of 100 not fully answered in time
        for i in range(4000):
            tid = client.tid()
            client.sock.sendto(client.announce_packet(tid, torrents[i % 50], os.urandom(20), 7000 + i % 1000), client.target)
            if i % 100 == 99:
                got = client.collect(0.3)
                replies += got
                ok = sum(1 for d, _ in got if struct.unpack(">I", d[:4])[0] == 1)
                if ok < 100:
                    short.append((i // 100, ok))
        replies += client.collect(1.0)
        answered = sum(1 for d, _ in replies if struct.unpack(">I", d[:4])[0] == 1)
        errors = sorted({d[8:].decode(errors="replace") for d, _ in replies if struct.unpack(">I", d[:4])[0] == 3})
        detail = f" (batches answered short within 0.3 s: {short}; error replies: {errors})" if short or errors else ""
        text = open(small.log_path).read()
        if "repository write failed" not in text:
            fail("node 1 never reported a failed write; the disk did not fill (test would prove nothing)")
        if not small.alive():
            fail(f"node 1 died on a full disk:\n{small.tail()}")
        status = small.api()
        if status is None or status["storeHealthy"]:
            fail(f"node 1 should report an unhealthy store while its disk is full: {status}")
        # Every one: the other slave and the master are a majority. (Before the master
        # counted the OK of a slave one vote behind, a batch of 100 was sometimes refused.)
        if answered < 4000:
            fail(f"only {answered} of 4000 announces answered while one node's disk was full{detail}")
        log(f"node 1's disk filled: writes failed and were logged, node still running; "
            f"{answered}/4000 announces answered by the cluster{detail}")
        os.remove(filler)
        master = cluster.wait_converged()
        deadline = time.time() + 20
        while time.time() < deadline:
            status = small.api()
            if status and status["storeHealthy"]:
                break
            time.sleep(0.2)
        else:
            fail(f"node 1's store did not recover after space was freed: {status}")
        rows = cluster.wait_equal_rows([master, small], timeout=20)
        log(f"space freed: node 1's probe succeeded and its repository was rewritten "
            f"({len(rows['peers'])} peers, equal to the master's)")
        ok = True
    finally:
        if not ok:
            cluster.dump()
        cluster.stop()
        subprocess.run(["umount", "-l", mount], capture_output=True)
        os.rmdir(mount)


if __name__ == "__main__":
    main()
