"""Hosts as network namespaces on one bridge, and the real clients (transmission-cli,
aria2c) that download through a tracker from one of them. Shared by vip_netns.py and
tests/deploy/deploy_guide.py."""
import hashlib
import json
import os
import subprocess
import tempfile
import time

from _harness import activemq, fail


def ip(*args, check=True):
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        fail(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out


def switch(name):
    """A namespace holding a bridge that forwards multicast to every port (no snooping)."""
    ip("netns", "add", name)
    ip("-n", name, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    ip("-n", name, "link", "set", "br0", "up")


def host(switch_ns, ns, address, index, address6=None):
    """A namespace with eth0 at ADDRESS/24 (and ADDRESS6/64, usable at once: no duplicate
    address detection) on the switch's bridge (port vINDEX)."""
    ip("netns", "add", ns)
    ip("-n", switch_ns, "link", "add", f"v{index}", "type", "veth", "peer", "name", "eth0", "netns", ns)
    ip("-n", switch_ns, "link", "set", f"v{index}", "master", "br0", "up")
    ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
    if address6:
        ip("-n", ns, "-6", "addr", "add", f"{address6}/64", "dev", "eth0", "nodad")
    ip("-n", ns, "link", "set", "eth0", "up")
    ip("-n", ns, "link", "set", "lo", "up")


def remove(namespaces):
    for ns in namespaces:
        ip("netns", "del", ns, check=False)


def tear_down(helper, cluster, ok, broker_env, broker_ns, namespaces):
    """Ends a namespace test: the client helper, the cluster (its logs dumped unless the
    test passed), the broker, the namespaces."""
    if helper:
        helper.kill()
    if cluster:
        if not ok:
            cluster.dump()
        cluster.stop()
    activemq("stop", env=broker_env, netns=broker_ns)
    remove(namespaces)


def first_reply_after(ns, address, port, start, timeout=30, source=False):
    """Seconds from START (a time.time()) until a BEP 15 connect sent to ADDRESS:PORT (IPv4
    or IPv6) from namespace NS every 50 ms is answered, from whatever source (a group's
    replies come from the master's own address); None if none is within TIMEOUT. With
    SOURCE, (seconds, the reply's source address)."""
    family = "AF_INET6" if ":" in address else "AF_INET"
    probe = ("import socket,struct,sys,time\n"
             f"s=socket.socket(socket.{family},socket.SOCK_DGRAM);s.settimeout(0.05)\n"
             f"end=time.time()+{timeout}\n"
             "while time.time()<end:\n"
             f"  s.sendto(struct.pack('>QII',0x41727101980,0,7),('{address}',{port}))\n"
             "  try:\n"
             "    d,a=s.recvfrom(64)\n"
             "    if len(d)==16 and struct.unpack('>II',d[:8])==(0,7): print(time.time(),a[0]); sys.exit(0)\n"
             "  except socket.timeout: pass\n"
             "sys.exit(1)\n")
    out = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", probe], capture_output=True, text=True)
    if out.returncode != 0:
        return (None, None) if source else None
    at, sender = out.stdout.split()
    return (float(at) - start, sender) if source else float(at) - start


class OtherClient:
    """transmission-cli or aria2c downloading a torrent in its own namespace.

    Transmission runs with uTP off and plaintext preferred, no DHT and no local peer
    discovery (the seeder must come from the tracker); see vip_netns.py for why."""

    def __init__(self, name, ns, torrent, sha1):
        self.name, self.ns, self.sha1 = name, ns, sha1
        self.work = tempfile.mkdtemp(prefix=f"{name}-")
        self.log = open(os.path.join(self.work, "client.log"), "w")
        if name == "transmission":
            config = os.path.join(self.work, "config")
            os.makedirs(config)
            with open(os.path.join(config, "settings.json"), "w") as f:
                json.dump({"utp-enabled": False, "encryption": 0, "dht-enabled": False, "lpd-enabled": False}, f)
            cmd = ["transmission-cli", "-g", config, "-w", self.work, "-p", "51413", "-M", torrent]
        else:
            # aria2 talks to UDP trackers only with its DHT on (facts measured here).
            cmd = ["aria2c", "--enable-dht=true", "--dht-listen-port=6882", "--listen-port=6881", "--seed-time=0",
                   "--bt-enable-lpd=false", "--enable-peer-exchange=false", "--dir", self.work, torrent]
        self.started = time.time()
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.done_after = None

    def poll(self):
        if self.done_after is None:
            path = os.path.join(self.work, "payload.bin")
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                return False
            if hashlib.sha1(data).hexdigest() == self.sha1:
                self.done_after = time.time() - self.started
        return self.done_after is not None

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def tail(self):
        with open(os.path.join(self.work, "client.log"), errors="replace") as f:
            return "\n".join(f.read().replace("\r", "\n").splitlines()[-15:])
