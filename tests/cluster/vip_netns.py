#!/usr/bin/python3
"""Shared-address mode with a real client, in network namespaces this test creates:

    switch ns: a bridge (multicast snooping off)
    broker ns 10.77.0.2   ActiveMQ (its own instance)
    node ns  10.77.0.11-13 + the service address 10.77.0.100 on lo; each node binds
             10.77.0.100:6969 and joins 239.255.42.99 on eth0
    client ns 10.77.0.50  static neighbour: 10.77.0.100 -> 01:00:5e:7f:2a:63 (the
             group's MAC), so every node receives each request; the master replies from
             10.77.0.100:6969, which libtorrent accepts.

A python3-libtorrent leecher completes a download from a seeder through the 3-node
cluster; after kill -9 of the master a fresh leecher still completes."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Cluster, activemq, fail, log  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VIP, GROUP, PORT = "10.77.0.100", "239.255.42.99", 6969
GROUP_MAC = "01:00:5e:7f:2a:63"
TAG = f"t{os.getpid() % 100000}"
SWITCH, BROKER, CLIENT = f"{TAG}sw", f"{TAG}b", f"{TAG}c"
NODES = {1: f"{TAG}n1", 2: f"{TAG}n2", 3: f"{TAG}n3"}
BROKER_STATE = f"/tmp/tracker-activemq-{TAG}"


def ip(*args, check=True):
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        fail(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out


def host(ns, address, index):
    ip("netns", "add", ns)
    ip("-n", SWITCH, "link", "add", f"v{index}", "type", "veth", "peer", "name", "eth0", "netns", ns)
    ip("-n", SWITCH, "link", "set", f"v{index}", "master", "br0", "up")
    ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
    ip("-n", ns, "link", "set", "eth0", "up")
    ip("-n", ns, "link", "set", "lo", "up")


def build_network():
    ip("netns", "add", SWITCH)
    ip("-n", SWITCH, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    ip("-n", SWITCH, "link", "set", "br0", "up")
    host(BROKER, "10.77.0.2", 2)
    host(CLIENT, "10.77.0.50", 50)
    for node_id, ns in NODES.items():
        host(ns, f"10.77.0.{10 + node_id}", 10 + node_id)
        ip("-n", ns, "addr", "add", f"{VIP}/32", "dev", "lo")
        # The service address must not be claimed by ARP: clients map it to the group's MAC.
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1",
                        "net.ipv4.conf.all.arp_announce=2"], check=True)
    ip("-n", CLIENT, "neigh", "replace", VIP, "lladdr", GROUP_MAC, "dev", "eth0", "nud", "permanent")


def teardown_network():
    for ns in [CLIENT, BROKER, *NODES.values(), SWITCH]:
        ip("netns", "del", ns, check=False)


def main():
    if os.geteuid() != 0:
        fail("this test creates network namespaces and must run as root")
    teardown_network()
    build_network()
    broker_env = {"ACTIVEMQ_STATE": BROKER_STATE, "ACTIVEMQ_STOMP_HOST": "10.77.0.2"}
    cluster = None
    peer = None
    ok = False
    try:
        print(activemq("start", env=broker_env, netns=BROKER))
        cluster = Cluster("vip", PORT, broker="stomp://10.77.0.2:61613")
        args = ["--vip", f"{VIP}:{PORT}", "--group", f"{GROUP}:{PORT}", "--interface", "eth0"]
        for node_id, ns in NODES.items():
            cluster.add(node_id, netns=ns, peer_args=args, http_host=f"10.77.0.{10 + node_id}")
        # Only the node namespaces reach their HTTP APIs; Node.api runs curl inside them.
        master = cluster.wait_converged(30)
        log(f"3 nodes in namespaces, service address {VIP}:{PORT}; master {master.node_id}")
        peer = subprocess.Popen(["ip", "netns", "exec", CLIENT, "/usr/bin/python3", os.path.join(HERE, "_lt_vip_peer.py"),
                                 "10.77.0.50", f"{VIP}:{PORT}"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = peer.stdout.readline().split()
        if not ready or ready[0] != "READY":
            fail(f"libtorrent helper did not start: {ready}")

        def leech(label):
            peer.stdin.write("leech\n")
            peer.stdin.flush()
            answer = peer.stdout.readline().strip()
            if not answer.startswith("DONE"):
                cluster.dump()
                fail(f"{label}: {answer or 'libtorrent helper died'}")
            log(f"{label} completed its download through the cluster in {answer.split()[1]} s")

        leech("leecher 1")
        served_before = master.api()["replies"]
        if served_before == 0:
            fail("the master reports no replies although libtorrent completed")
        master.kill9()
        log(f"kill -9 master {master.node_id}")
        new_master = cluster.wait_converged(20)
        log(f"new master {new_master.node_id}")
        leech("leecher 2 (after kill -9)")
        if new_master.api()["replies"] == 0:
            fail("the new master answered nothing, yet the leecher completed: the test is not testing the cluster")
        ok = True
    finally:
        if peer:
            peer.kill()
        if cluster:
            if not ok:
                cluster.dump()
            cluster.stop()
        activemq("stop", env=broker_env, netns=BROKER)
        teardown_network()


if __name__ == "__main__":
    main()
