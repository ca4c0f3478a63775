#!/usr/bin/python3
"""A firewall rule that rejects the master's sends on the peer channel for 5 s (issue 60).

nftables drops what leaves the master's reply socket (its keepalives on the group and its
replies share it), so the kernel refuses each send with EPERM. Before, NIO closed that
socket on the first refused keepalive: the master went on saying it served, the others
still heard it on the broker, and no peer got an answer again until a restart.

Now the socket stays open, the refusals are counted (/api/node, /metrics) and logged at
most every 10 s, /api/health says 503 while they last, and the master leaves the office
to a node whose sends work (PeerSends.swift): another node serves within the bound while
the rule holds. Once the rule is gone the master, the highest id, takes the office back
and answers again with the same socket.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, GroupClient, activemq, fail, free_udp_port, http_request, log, three_nodes  # noqa: E402

REJECT_S = 5
# Its first refused send within a keepalive interval (1 s), its step-down at its next
# tick, the election, and the new master's recovery and first serving step.
HANDOVER_BOUND_S = 4.5


def nft(*args):
    out = subprocess.run(["nft", *args], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"nft {' '.join(args)}: {out.stderr.strip()}")


def main():
    print(activemq("start"))
    cluster = Cluster(f"sends{os.getpid()}", free_udp_port())
    table = f"trackersend{os.getpid()}"
    try:
        _, master = three_nodes(cluster)
        client = GroupClient(cluster.group)
        if client.connect() is None:
            fail("no connect answered before the rule")
        reply_from = master.api()["replyFrom"]
        port = int(reply_from.rsplit(":", 1)[1])
        log(f"master {master.node_id} replies from {reply_from}; rejecting what leaves it for {REJECT_S} s")
        nft("add", "table", "inet", table)
        nft("add", "chain", "inet", table, "out", "{ type filter hook output priority 0 ; }")
        nft("add", "rule", "inet", table, "out", "udp", "sport", str(port), "drop")
        rule_at = time.time()
        try:
            time.sleep(1.5)
            client.connect(timeout=0.5)
            status, health = http_request(master.url("/api/health"))
            if status != 503 or "cannot send on the peer channel" not in str(health):
                fail(f"/api/health of master {master.node_id} while its sends are refused: {status} {health}")
            errors = master.api()["peerSendErrors"]
            if errors < 1:
                fail(f"master {master.node_id} counted no refused send: {master.api()}")
            handed_over = None
            while time.time() < rule_at + REJECT_S - 0.3:
                serving = [n for n in cluster.nodes if n is not master and (n.api() or {}).get("serving")]
                if serving and not (master.api() or {}).get("serving"):
                    handed_over = (time.time() - rule_at, serving[0])
                    break
                time.sleep(0.1)
            if handed_over is None or handed_over[0] > HANDOVER_BOUND_S:
                cluster.dump()
                fail(f"master {master.node_id} kept the office while its sends were refused: "
                     f"{[(n.node_id, (n.api() or {}).get('serving')) for n in cluster.nodes]}")
            log(f"node {handed_over[1].node_id} serves {handed_over[0]:.2f} s after the rule (bound {HANDOVER_BOUND_S} s)")
            if client.connect(timeout=1.0) is None:
                fail(f"no connect answered by node {handed_over[1].node_id} while the master's sends were refused")
            time.sleep(max(0.0, rule_at + REJECT_S - time.time()))
        finally:
            subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True)
        log(f"/api/health said 503 ({health.get('reason') if isinstance(health, dict) else health}); "
            f"{errors} refused sends counted; rule removed")
        answered_after = None
        removed_at = time.time()
        while time.time() < removed_at + 10:
            if client.connect(timeout=0.3) is not None:
                answered_after = time.time() - removed_at
                break
        if answered_after is None:
            cluster.dump()
            fail("no connect answered within 10 s of the rule's removal: the reply socket was closed")
        if not master.alive():
            fail(f"master {master.node_id} exited")
        back_by = time.time() + 15
        while time.time() < back_by and not (master.api() or {}).get("serving"):
            time.sleep(0.1)
        if cluster.wait_converged(15) is not master:
            fail(f"master {master.node_id}, the highest id, did not take the office back after the rule went")
        log(f"master {master.node_id} serves again {time.time() - removed_at:.2f} s after the rule went")
        sockets = subprocess.run(["ss", "-uanH", "sport", f"= :{port}"], capture_output=True, text=True).stdout
        if str(port) not in sockets:
            fail(f"the reply socket {reply_from} is gone: {sockets!r}")
        if "a send on the peer channel failed" not in open(master.log_path).read():
            fail(f"master {master.node_id} logged nothing of the refused sends")
        metrics = http_request(master.url("/metrics"))[1]
        if "tracker_peer_send_errors_total" not in str(metrics):
            fail("no tracker_peer_send_errors_total in /metrics")
        log(f"answered again {answered_after:.2f} s after the rule went, from the same socket; the refusals logged")
        print(f"RESULT peer_send_errors_handover_s={handed_over[0]:.2f}")
        print(f"RESULT peer_send_errors_answered_after_s={answered_after:.2f}")
    finally:
        subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True)
        cluster.stop()


if __name__ == "__main__":
    main()
