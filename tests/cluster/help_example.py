#!/usr/bin/python3
"""The cluster example of `tracker run --help` starts a node as written: its lines are
read from the help text and run (only /tmp paths moved into a directory of the test's
own), and the node becomes the serving master of a one-node cluster on the broker."""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import activemq, fail, log, tracker_binary  # noqa: E402


def main():
    help_text = subprocess.run([tracker_binary(), "run", "--help"], capture_output=True, text=True, check=True).stdout
    block = help_text.split("On one machine:\n", 1)[1].split("\nAcross hosts", 1)[0]
    commands = [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    if len(commands) != 2 or not commands[0].startswith("tracker keygen") or not commands[1].startswith("tracker run"):
        fail(f"the help's example is not `tracker keygen` then `tracker run`: {commands}")
    work = tempfile.mkdtemp(prefix="help-example-")
    argv = [[tracker_binary() if word == "tracker" else re.sub(r"^/tmp/", work + "/", word) for word in shlex.split(c)]
            for c in commands]
    subprocess.run(argv[0], check=True, capture_output=True)
    http = argv[1][argv[1].index("--http") + 1]
    print(activemq("start"))
    node = subprocess.Popen(argv[1], stdout=open(os.path.join(work, "log"), "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 15
        status = None
        while time.time() < deadline and node.poll() is None:
            try:
                with urllib.request.urlopen(f"http://{http}/api/health", timeout=1) as r:
                    status = json.loads(r.read())
                    break
            except OSError:
                time.sleep(0.3)
        if not status or not status.get("serving"):
            fail(f"the help's example did not start a serving node: {status}\n{open(os.path.join(work, 'log')).read()[-1500:]}")
        log(f"`tracker run --help`'s example, run as written: {status['reason']}")
    finally:
        node.terminate()
        node.wait(10)


if __name__ == "__main__":
    main()
