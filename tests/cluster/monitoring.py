#!/usr/bin/python3
"""What an operator watches a cluster with, against 3 real nodes, ActiveMQ and a
multicast group on lo: the shipped alert rules and dashboard, /metrics on a listener of
its own, JSON logs, and peer data kept from tokenless readers.

1. promtool: deploy/prometheus/alerts.yml passes `check rules`, and `test rules` fires
   each alert on its synthetic series (deploy/prometheus/alerts_test.yml).
2. Each node runs with `--log-format json --metrics 127.0.0.1:PORT`; node 3's dashboard
   listens on 0.0.0.0 (beyond loopback) with `--viewer-token-file`.
3. After announces, a scrape and a junk datagram: every node's metrics listener serves
   /metrics (`promtool check metrics` finds nothing to say) and nothing else (404 for the
   dashboard's pages and peer data); every node counts the announces as
   tracker_requests_total{type="announce",family="ipv4"}, the master counts its replies
   by type, the junk is `invalid`; tracker_build_info names the version; every node hears
   exactly one master. Every metric the alert rules and the Grafana dashboard name is one
   a real node exports.
4. Node 3 (beyond loopback) refuses swarm listings and peer lists without a token (401),
   gives them to the viewer and the admin token, and serves /api/node to anyone; the
   viewer token steers nothing. Node 1 (loopback) needs no token to read.
5. kill -9 of the master: a survivor becomes master, and every survivor hears one master
   again.
6. Every line each node logged is a JSON object with time, level, node, role, label and
   message; each node's lines name its id, and the new master's lines say `master`.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import ROOT, Cluster, GroupClient, fail, free_tcp_port, free_udp_port, http_request, log  # noqa: E402

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def promtool(*args, stdin=None):
    out = subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=60)
    return out.returncode, (out.stdout + out.stderr).strip()


def check_rules():
    rules = os.path.join(ROOT, "deploy", "prometheus", "alerts.yml")
    code, text = promtool("check", "rules", rules)
    if code != 0:
        fail(f"promtool check rules: {text}")
    code, text = promtool("test", "rules", os.path.join(ROOT, "deploy", "prometheus", "alerts_test.yml"))
    if code != 0:
        fail(f"promtool test rules: {text}")
    # The shipped scrape configuration, with its rule file where the guide installs it.
    with tempfile.TemporaryDirectory() as work:
        config = os.path.join(work, "prometheus.yml")
        with open(os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")) as f:
            shipped = f.read()
        if "/etc/prometheus/tracker-alerts.yml" not in shipped:
            fail("prometheus.yml must load the alert rules from /etc/prometheus/tracker-alerts.yml")
        with open(config, "w") as f:
            f.write(shipped.replace("/etc/prometheus/tracker-alerts.yml", rules))
        code, checked = promtool("check", "config", config)
        if code != 0:
            fail(f"promtool check config deploy/prometheus/prometheus.yml: {checked}")
    log(f"promtool: alerts.yml checks and every alert fires on its series ({text.splitlines()[-1] if text else 'ok'}); "
        "prometheus.yml checks with its rules")


def samples(text):
    """{(name, frozenset(labels)): value} of Prometheus text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        if not m:
            fail(f"/metrics line is not `name{{labels}} value`: {line!r}")
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, name, **labels):
    want = set(labels.items())
    found = [v for (n, ls), v in s.items() if n == name and want <= set(ls)]
    return sum(found) if found else None


def scrape(port):
    status, body = http_request(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        fail(f"/metrics on the metrics listener :{port}: {status} {body!r}")
    return body.decode() if isinstance(body, bytes) else body


def main():
    if not os.path.exists(PROMTOOL):
        fail("promtool is missing (Debian's prometheus package; scripts/setup.sh installs it)")
    check_rules()

    cluster = Cluster("monitoring", free_udp_port(), extra_args=["--log-format", "json"])
    viewer_token = "test-viewer-token-" + os.urandom(8).hex()
    viewer_file = os.path.join(cluster.work, "viewer.token")
    with open(os.open(viewer_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(viewer_token + "\n")
    metrics_ports = {}
    try:
        for node_id in (1, 2, 3):
            metrics_ports[node_id] = free_tcp_port()
            extra = ["--metrics", f"127.0.0.1:{metrics_ports[node_id]}"]
            if node_id == 3:
                cluster.add(node_id, http_host="0.0.0.0", extra_args=extra + ["--viewer-token-file", viewer_file])
            else:
                cluster.add(node_id, extra_args=extra)
        master = cluster.wait_converged(30)
        nodes = {n.node_id: n for n in cluster.nodes}

        client = GroupClient(cluster.group)
        if client.connect() is None:
            fail("no connect reply from the cluster")
        info_hash = os.urandom(20)
        announces = 5
        for i in range(announces):
            if len(client.announce(info_hash, b"-MO0001-" + os.urandom(6).hex()[:12].encode(), 6881 + i)) != 1:
                fail(f"announce {i} did not get exactly one reply")
        if client.scrape(info_hash) is None:
            fail("no scrape reply")
        client.sock.sendto(b"\x00" * 3, cluster.group)  # junk: too short for any request
        time.sleep(0.5)

        # 3. The metrics listener: /metrics, and nothing else.
        exported = None
        for node_id, port in metrics_ports.items():
            text = scrape(port)
            code, lint = promtool("check", "metrics", stdin=text)
            if code != 0 or lint:
                fail(f"promtool check metrics on node {node_id}: {lint}")
            for path in ("/", "/api/swarms", "/api/node", f"/api/swarms/{info_hash.hex()}/peers"):
                status, _ = http_request(f"http://127.0.0.1:{port}{path}")
                if status != 404:
                    fail(f"the metrics listener of node {node_id} answers {path} with {status}, not 404")
            s = samples(text)
            # Every node receives every request, but only the serving master reads them
            # all: a lower slave's kernel drops them (only the heir holds), and the heir
            # reads none within `--receive-skew` of each decision. The others count no more
            # than was sent.
            got = value(s, "tracker_requests_total", type="announce", family="ipv4")
            counted = sorted(((n, sorted(dict(l).items())) for n, l in s if n == 'tracker_requests_total'), key=str)
            if node_id == master.node_id:
                if got is None or got < announces:
                    fail(f"master {node_id} counts {got} announces from IPv4, not {announces}: {counted}")
                if (value(s, "tracker_requests_total", type="invalid", family="ipv4") or 0) < 1:
                    fail(f"master {node_id} did not count the junk datagram as invalid")
                if value(s, "tracker_requests_total", type="scrape", family="ipv4") != 1:
                    fail(f"master {node_id} counts {value(s, 'tracker_requests_total', type='scrape', family='ipv4')} scrapes, not 1")
            elif (got or 0) > announces or (value(s, "tracker_requests_total", type="scrape", family="ipv4") or 0) > 1:
                fail(f"node {node_id} counts more requests than were sent: {counted}")
            if value(s, "tracker_build_info") != 1 or not any(n == "tracker_build_info" and dict(l).get("version") for n, l in s):
                fail(f"node {node_id} has no tracker_build_info with a version")
            if value(s, "tracker_masters_heard") != 1:
                fail(f"node {node_id} hears {value(s, 'tracker_masters_heard')} masters in a healthy cluster")
            if node_id == master.node_id:
                replies = value(s, "tracker_replies_total", type="announce", family="ipv4")
                if replies is None or replies < announces:
                    fail(f"the master counts {replies} announce replies, not {announces}")
                if value(s, "tracker_replies_total", type="scrape", family="ipv4") != 1:
                    fail("the master does not count its scrape reply")
            exported = set(n for n, _ in s) if exported is None else exported | set(n for n, _ in s)
        log(f"metrics listeners: /metrics only, promtool finds nothing to say; {announces} announces counted by type and family on "
            "the master (no more on the others), the junk as invalid; build info; one master heard everywhere")

        # Every metric the shipped rules and dashboard name exists.
        named = set()
        for path in ("deploy/prometheus/alerts.yml", "deploy/grafana/tracker.json"):
            named |= set(re.findall(r"\btracker_[a-z_]+", open(os.path.join(ROOT, path)).read()))
        missing = sorted(named - exported)
        if missing:
            fail(f"the alerts or the dashboard name metrics no node exports: {missing}")
        json.load(open(os.path.join(ROOT, "deploy", "grafana", "tracker.json")))
        log(f"alerts.yml and tracker.json name {len(named)} metrics, each exported by a real node")

        # 4. Peer data beyond loopback needs a token.
        outside, inside = nodes[3], nodes[1]
        peer_paths = ["/api/swarms", f"/api/swarms/{info_hash.hex()}", f"/api/swarms/{info_hash.hex()}/peers"]
        for path in peer_paths:
            url = f"http://127.0.0.1:{outside.http}{path}"
            status, body = http_request(url)
            if status != 401:
                fail(f"{path} without a token on a dashboard beyond loopback: {status}, not 401")
            for token in (viewer_token, cluster.admin_token):
                status, body = http_request(url, headers={"Authorization": f"Bearer {token}"})
                if status != 200:
                    fail(f"{path} with a token: {status} {body}")
            status, _ = http_request(url, headers={"Authorization": "Bearer not-the-token-at-all"})
            if status != 401:
                fail(f"{path} with a wrong token: {status}, not 401")
        status, body = http_request(f"http://127.0.0.1:{outside.http}{peer_paths[2]}",
                                    headers={"Authorization": f"Bearer {viewer_token}"})
        addresses = [row.get("address", "") for row in (body.get("rows") or [])] if isinstance(body, dict) else []
        if len(addresses) != announces or not all(a.startswith("127.0.0.1:") for a in addresses):
            fail(f"the viewer token did not get the swarm's {announces} peers: {body}")
        status, _ = http_request(f"http://127.0.0.1:{outside.http}/api/node")
        if status != 200:
            fail(f"/api/node without a token: {status}")
        status, _ = http_request(f"http://127.0.0.1:{outside.http}/api/failure/provoke", method="POST", body=b"",
                                 headers={"Authorization": f"Bearer {viewer_token}"})
        if status != 401:
            fail(f"the viewer token steered the node: {status}")
        status, _ = http_request(f"http://127.0.0.1:{inside.http}/api/swarms")
        if status != 200:
            fail(f"/api/swarms on a loopback dashboard without a token: {status}")
        log("beyond loopback: peer data 401 without a token, 200 with the viewer's or the admin's; the viewer steers nothing; "
            "loopback reads freely")

        # 5. Failover: one master heard again.
        old = master
        old.kill9()
        new = cluster.wait_converged(30)
        deadline = time.time() + 10
        while True:
            heard = {n.node_id: value(samples(scrape(metrics_ports[n.node_id])), "tracker_masters_heard") for n in cluster.live()}
            if all(v == 1 for v in heard.values()):
                break
            if time.time() > deadline:
                fail(f"after the failover the survivors hear {heard} masters")
            time.sleep(0.3)
        log(f"kill -9 of master {old.node_id}: node {new.node_id} is master and every survivor hears one master")

        # 6. Every log line is JSON.
        time.sleep(0.5)
        for n in cluster.nodes:
            lines = open(n.log_path).read().splitlines()
            if len(lines) < 3:
                fail(f"node {n.node_id} logged {len(lines)} lines")
            roles = set()
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    fail(f"node {n.node_id} logged a line that is not JSON: {line!r}")
                if not isinstance(entry, dict) or list(entry)[:6] != ["time", "level", "node", "role", "label", "message"]:
                    fail(f"node {n.node_id}: a log line without the keys in order: {line!r}")
                if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"]):
                    fail(f"node {n.node_id}: time {entry['time']!r} is not RFC 3339 UTC with milliseconds")
                if entry["node"] not in (None, n.node_id):
                    fail(f"node {n.node_id}'s line names node {entry['node']}: {line!r}")
                roles.add(entry["role"])
            if n is new and "master" not in roles:
                fail(f"the new master's lines never say master: roles {roles}")
            log(f"node {n.node_id}: {len(lines)} log lines, every one a JSON object; roles {sorted(roles)}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    print("PASS monitoring")
