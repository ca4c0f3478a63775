#!/usr/bin/python3
"""Group mode with real clients, in network namespaces this test creates: what
docs/operating/deploy.md's table of peer-channel modes says about it, measured.

    switch ns: a bridge (multicast snooping off)
    broker ns 10.78.0.2   ActiveMQ (its own instance)
    node ns  10.78.0.11-13, fd78::11-13  each node joins 239.255.42.99 and ff15::42 on
             eth0 and binds both groups: one node serves both families
    client ns 10.78.0.50-52, fd78::50  a multicast route on eth0: libtorrent (seeder and
             leecher), transmission-cli, aria2c

Each node replies from its own address, not the group's:
1. Transmission accepts that and completes a download;
2. libtorrent and aria2 drop those replies, so neither completes in ROUND_S (each completes
   in 1-2 s when it accepts the reply: vip_netns.py, deploy_guide.py).
   (`tracker client`, which accepts a reply from any source, announces the seeder.)
3. An IPv6 peer's connect to [ff15::42]:6969 is answered from the master's IPv6 address.
   Keepalives go to both groups; no node counts or logs the second copy as a replay.
4. After `kill -9` of the master, BEP 15 connects sent to each group every 50 ms from the
   moment of the kill are answered again, by the next master; the times are printed.
   Transmission, started after that, completes again."""
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, activemq, fail, log, tracker_binary  # noqa: E402
from _netns import OtherClient, first_reply_after, host, ip, remove, switch, tear_down  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GROUP, PORT = "239.255.42.99", 6969
GROUP6 = "ff15::42"
TAG = f"m{os.getpid() % 100000}"
SWITCH, BROKER, CLIENT, TRANSMISSION, ARIA2 = f"{TAG}sw", f"{TAG}b", f"{TAG}c", f"{TAG}tr", f"{TAG}ar"
NODES = {1: f"{TAG}n1", 2: f"{TAG}n2", 3: f"{TAG}n3"}
BROKER_STATE = f"/tmp/tracker-activemq-{TAG}"
ROUND_S = 16
# Transmission 3.00 says INTERESTED to a connected seeder only at its rechoke, every 10 s
# from its start (vip_netns.py): ~13 s in all when the tracker's answer and the connection
# come in the first seconds. A connection that misses a rechoke waits for the next (a slow
# machine, or a peer handshake Transmission dials again ~9 s later), so its bound allows
# two more.
TRANSMISSION_BOUND_S = 40


def build_network():
    switch(SWITCH)
    host(SWITCH, BROKER, "10.78.0.2", 2)
    for i, ns in enumerate((CLIENT, TRANSMISSION, ARIA2)):
        host(SWITCH, ns, f"10.78.0.{50 + i}", 50 + i, address6=f"fd78::{50 + i}")
        # Without a route a multicast send has nowhere to go.
        ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", "eth0")
    for node_id, ns in NODES.items():
        host(SWITCH, ns, f"10.78.0.{10 + node_id}", 10 + node_id, address6=f"fd78::{10 + node_id}")


def main():
    if os.geteuid() != 0:
        fail("this test creates network namespaces and must run as root")
    namespaces = [CLIENT, TRANSMISSION, ARIA2, BROKER, *NODES.values(), SWITCH]
    remove(namespaces)
    build_network()
    broker_env = {"ACTIVEMQ_STATE": BROKER_STATE, "ACTIVEMQ_STOMP_HOST": "10.78.0.2"}
    cluster = peer = None
    ok = False
    try:
        print(activemq("start", env=broker_env, netns=BROKER))
        cluster = Cluster("group", PORT, broker="stomp://10.78.0.2:61613")
        for node_id, ns in NODES.items():
            cluster.add(node_id, netns=ns, peer_args=["--group", f"{GROUP}:{PORT}", "--group", f"[{GROUP6}]:{PORT}",
                                                      "--interface", "eth0"],
                        http_host=f"10.78.0.{10 + node_id}")
        master = cluster.wait_converged(30)
        peer = subprocess.Popen(["ip", "netns", "exec", CLIENT, "/usr/bin/python3", os.path.join(HERE, "_lt_vip_peer.py"),
                                 "10.78.0.50", f"{GROUP}:{PORT}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = peer.stdout.readline().split()
        if not ready or ready[0] != "READY":
            fail(f"libtorrent helper did not start: {ready}")
        info_hash, torrent, sha1 = ready[1], ready[2], ready[3]

        def announce_seeder():
            out = subprocess.run(["ip", "netns", "exec", CLIENT, tracker_binary(), "client", "announce",
                                  f"udp://{GROUP}:{PORT}", "--bind", "10.78.0.50", "--info-hash", info_hash, "--port", "41000",
                                  "--left", "0"],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode != 0:
                fail(f"tracker client could not announce the seeder through the group: {out.stdout}{out.stderr}")

        def round(label, all_clients):
            """Transmission, and with ALL_CLIENTS libtorrent and aria2 too, which must not complete."""
            announce_seeder()
            if all_clients:
                peer.stdin.write(f"leech {ROUND_S}\n")
                peer.stdin.flush()
            clients = [OtherClient("transmission", TRANSMISSION, torrent, sha1)]
            if all_clients:
                clients.append(OtherClient("aria2", ARIA2, torrent, sha1))
            # The libtorrent helper answers only when its leecher is done or gives up.
            answers = []
            reader = threading.Thread(target=lambda: answers.append(peer.stdout.readline().strip()))
            if all_clients:
                reader.start()
            started = clients[0].started
            # Until Transmission completes (or its bound), and with ALL_CLIENTS at least
            # ROUND_S, polling every client each time so each one's time is its own.
            watch_until = started + (ROUND_S if all_clients else 0)
            try:
                while time.time() < started + TRANSMISSION_BOUND_S:
                    polled = [c.poll() for c in clients]
                    if polled[0] and time.time() >= watch_until:
                        break
                    time.sleep(0.2)
                done = {c.name: c.done_after for c in clients}
                if all_clients:
                    reader.join(ROUND_S + 10)
                    answer = answers[0] if answers else ""
                    done["libtorrent"] = float(answer.split()[1]) if answer.startswith("DONE") else None
            finally:
                tails = {}
                for c in clients:
                    c.stop()
                    tails[c.name] = c.tail()
                    shutil.rmtree(c.work, ignore_errors=True)
            bounds = {"transmission": TRANSMISSION_BOUND_S}
            log(f"{label}: " + ", ".join(f"{k} {'%.1f s' % v if v is not None else f'no download in {bounds.get(k, ROUND_S)} s'}"
                                         for k, v in done.items()))
            if done["transmission"] is None:
                cluster.dump()
                fail(f"{label}: Transmission accepts replies from the master's address and must complete within "
                     f"{TRANSMISSION_BOUND_S} s; its log:\n{tails['transmission']}")
            if all_clients and (done["libtorrent"] is not None or done["aria2"] is not None):
                fail(f"{label}: libtorrent and aria2 drop replies whose source is not the group; one completed: {done}")

        round("group mode, master serving", all_clients=True)
        # Keepalives go to both groups, so each node hears each one twice: the second copy
        # is expected, and no node may warn about it (a warning an operator sees every
        # 10 s on a healthy cluster, and a rejection count that means an intruder).
        for n in cluster.nodes:
            warned = [line for line in open(n.log_path) if "dropped a keepalive" in line]
            if warned:
                fail(f"node {n.node_id} dropped keepalives on a healthy dual-stack group: {warned[0].strip()}")
        _, sender = first_reply_after(CLIENT, GROUP6, PORT, time.time(), timeout=5, source=True)
        if sender != f"fd78::{10 + master.node_id}":
            fail(f"an IPv6 connect to [{GROUP6}]:{PORT} must be answered from master {master.node_id}'s IPv6 address: {sender}")
        log(f"IPv6 group [{GROUP6}]:{PORT}: answered from master {master.node_id}'s address {sender}, beside the IPv4 group")
        killed = time.time()
        master.kill9()
        results = {}
        probes = [threading.Thread(target=lambda g=g: results.__setitem__(g, first_reply_after(CLIENT, g, PORT, killed, source=True)))
                  for g in (GROUP, GROUP6)]
        for p in probes:
            p.start()
        for p in probes:
            p.join(40)
        new_master = cluster.wait_converged(20)
        for g in (GROUP, GROUP6):
            after, sender = results.get(g, (None, None))
            if after is None:
                fail(f"no reply from the group {g} within 30 s of the master's kill")
            log(f"kill -9 of master {master.node_id}: first reply through {g} after {after:.1f} s from {sender} "
                f"(new master {new_master.node_id})")
            if g == GROUP6 and sender != f"fd78::{10 + new_master.node_id}":
                fail(f"after the failover the IPv6 group must be answered by master {new_master.node_id}: {sender}")
        round("group mode, after the failover", all_clients=False)
        ok = True
    finally:
        tear_down(peer, cluster, ok, broker_env, BROKER, namespaces)


if __name__ == "__main__":
    main()
