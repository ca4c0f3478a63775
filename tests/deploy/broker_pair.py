#!/usr/bin/python3
"""The two-broker variant of docs/deploy.md, run as written in network namespaces.

The guide's `admin` and `admin-pair` blocks make the keys and both brokers'
certificates; each broker host runs `broker` then `pair` (THIS, PEER); each tracker host
runs `node` then `node-pair`, and node 3 lists the brokers in the other order, as the
guide advises. Checked:
1. the brokers are linked over TLS and forward each other's clients: the master hears
   every node on the broker (nodes 1 and 2 on broker.example.net, node 3 on
   broker-b.example.net), and every node is in sync with it;
2. after `kill -9` of broker.example.net, its nodes move to broker-b within seconds, one
   master keeps serving with the same epoch, and every node is heard on the broker and
   in sync again.
Hosts, roots and path rewriting are deploy_guide.py's."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from _harness import activemq, fail, log  # noqa: E402
from _netns import host, remove, switch  # noqa: E402
from deploy_guide import TrackerHost, broker_host, find_package, guide_blocks, run_block, tracker_user  # noqa: E402

TAG = f"p{os.getpid() % 100000}"
SWITCH = f"{TAG}sw"
BROKERS = {"broker.example.net": (f"{TAG}a", "10.0.0.2"), "broker-b.example.net": (f"{TAG}b", "10.0.0.3")}
NODES = {1: f"{TAG}n1", 2: f"{TAG}n2", 3: f"{TAG}n3"}


def cluster_state(hosts):
    """(master id, epoch, {id: broker url}, master's view of who it hears on the broker, in-sync ids)."""
    nodes = {h.node_id: h.node() for h in hosts}
    masters = [n for n in nodes.values() if n and n["role"] == "master" and n["serving"]]
    if len(masters) != 1:
        return None
    m = masters[0]
    on_broker = sorted(x["id"] for x in m["members"] if x.get("lastBrokerMsAgo") is not None and x["lastBrokerMsAgo"] < 2500)
    in_sync = sorted(i for i, n in nodes.items() if n and n["inSync"] and n["lastCommitted"] == m["lastCommitted"])
    return m["id"], m["epoch"], {i: n and n["broker"]["connectedTo"] for i, n in nodes.items()}, on_broker, in_sync


def wait_whole(hosts, timeout, label):
    deadline = time.time() + timeout
    state = None
    while time.time() < deadline:
        state = cluster_state(hosts)
        if state and len(state[3]) == len(hosts) - 1 and len(state[4]) == len(hosts):
            return state
        time.sleep(0.3)
    for h in hosts:
        print(h.tail())
    fail(f"{label}: the cluster did not become whole within {timeout} s: {state}")


def main():
    if os.geteuid() != 0:
        fail("this test creates network namespaces and users and must run as root")
    deb = find_package()
    blocks = guide_blocks(["admin", "admin-pair", "broker", "pair", "node", "node-pair"])
    work = tempfile.mkdtemp(prefix="broker-pair-")
    os.chmod(work, 0o755)
    namespaces = [ns for ns, _ in BROKERS.values()] + list(NODES.values()) + [SWITCH]
    hosts, broker_envs, ok = [], {}, False
    with tracker_user():
        try:
            remove(namespaces)
            switch(SWITCH)
            addresses = {**{ns: a for ns, a in BROKERS.values()}, **{ns: f"10.0.0.{10 + i}" for i, ns in NODES.items()}}
            hosts_file = "127.0.0.1 localhost\n" + "".join(f"{a} {name}\n" for name, (_, a) in BROKERS.items())
            for index, (ns, address) in enumerate(addresses.items()):
                host(SWITCH, ns, address, 2 + index)
                os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
                with open(f"/etc/netns/{ns}/hosts", "w") as f:
                    f.write(hosts_file)
            tools = os.path.join(work, "admin-tools")
            subprocess.run(["dpkg-deb", "-x", deb, tools], check=True)
            secrets = os.path.join(work, "secrets")
            os.makedirs(secrets, mode=0o700)
            run_block("admin", blocks["admin"], None, tools, secrets)
            run_block("admin-pair", blocks["admin-pair"], None, tools, secrets)

            for name, (ns, address) in BROKERS.items():
                p12 = "broker.p12" if name == "broker.example.net" else "broker-b.p12"
                copies = {os.path.join(secrets, p12): "broker.p12",
                          **{os.path.join(secrets, f): f for f in ("keystore.password", "broker.password", "ca.pem", "bridge.password")}}
                root, copied, broker_envs[name] = broker_host(work, deb, ns, address, copies)
                peer = next(n for n in BROKERS if n != name)
                run_block("broker", blocks["broker"], ns, root, copied)
                run_block("pair", blocks["pair"], ns, root, copied, {"THIS": name, "PEER": peer})
                log(activemq("start", env=broker_envs[name], netns=ns))

            for node_id, ns in NODES.items():
                h = TrackerHost(work, node_id, ns, deb, secrets)
                run_block("node", blocks["node"], ns, h.root, h.copied, {"NODE_ID": str(node_id)})
                run_block("node-pair", blocks["node-pair"], ns, h.root, h.copied)
                if node_id == 3:
                    conf = os.path.join(h.root, "etc/tracker/tracker.toml")
                    text = open(conf).read().replace(
                        '"stomp+ssl://broker.example.net:61614,stomp+ssl://broker-b.example.net:61614"',
                        '"stomp+ssl://broker-b.example.net:61614,stomp+ssl://broker.example.net:61614"')
                    with open(conf, "w") as f:
                        f.write(text)
                h.start()
                hosts.append(h)
            master, epoch, brokers, on_broker, in_sync = wait_whole(hosts, 40, "two brokers")
            spread = {i: url.split("//")[1].split(":")[0] for i, url in brokers.items()}
            if spread != {1: "broker.example.net", 2: "broker.example.net", 3: "broker-b.example.net"}:
                fail(f"the nodes must follow their lists' order: {spread}")
            log(f"two brokers linked over TLS: master {master} ({epoch}) hears {on_broker} on the broker "
                f"across both; nodes on {spread}; in sync {in_sync}")

            activemq("kill", env=broker_envs["broker.example.net"], netns=BROKERS["broker.example.net"][0])
            killed = time.time()
            deadline, moved = killed + 10, {}
            while time.time() < deadline:
                moved = {h.node_id: ((h.node() or {}).get("broker") or {}) for h in hosts}
                if all(b.get("connected") and "broker-b" in (b.get("connectedTo") or "") for b in moved.values()):
                    break
                time.sleep(0.1)
            else:
                fail(f"every node must move to broker-b after broker.example.net died: {moved}")
            moved_after = time.time() - killed
            # Past the 2.5 s the check allows, so every sighting counted is from broker-b.
            time.sleep(3)
            state = wait_whole(hosts, 30, "after kill -9 of broker.example.net")
            if (state[0], state[1]) != (master, epoch):
                fail(f"the master must keep serving through a broker's death: {master} {epoch} -> {state[0]} {state[1]}")
            log(f"kill -9 of broker.example.net: every node on broker-b within {moved_after:.1f} s, heard there and "
                f"in sync {state[4]}; master {master} kept epoch {epoch}")
            ok = True
        finally:
            for h in hosts:
                if not ok:
                    print(h.tail())
                h.stop()
            for name, env in broker_envs.items():
                activemq("stop", env=env, netns=BROKERS[name][0])
            remove(namespaces)
            for ns in namespaces:
                shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
            if ok:
                shutil.rmtree(work, ignore_errors=True)
    print("broker pair: all checks passed")


if __name__ == "__main__":
    main()
