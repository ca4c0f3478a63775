#!/usr/bin/python3
"""The package on a Debian machine, as an operator installs it: this host's root under an
overlay (every write goes to a scratch layer, thrown away at the end) in a private mount
namespace, with apt and dpkg run in it for real.

1. Debian's GNOME `tracker` (a search engine, /usr/bin/tracker3) and ours
   (`udp-tracker-cluster`, /usr/bin/tracker) install side by side: no file of one is in
   the other; apt does not take ours for an upgrade of theirs, nor theirs of ours.
2. With no edit after `apt install`, the unit's ExecStart, as its User=, serves announces
   on 127.0.0.1:6969 and [::1]:6969 (a network namespace of its own), and HTTP scrapes of
   the same swarm on TCP 6969, the dashboard on loopback.
3. The package's admin token (/etc/tracker/admin.token, root:tracker 0640) works for
   `tracker admin` run by a member of the group `tracker` without sudo and without naming
   it; a user outside the group cannot read it.
4. An upgrade whose conffile changed, over an operator's settings in
   /etc/tracker/tracker.toml.d/, runs without a prompt (stdin closed) and keeps them.
5. `dpkg -r udp-tracker-cluster` leaves GNOME's tracker installed and working.

Needs root, the package (dist/udp-tracker-cluster_*.deb from scripts/package.sh, or
TRACKER_DEB) and apt's sources (it fetches GNOME's tracker and its libraries)."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
sys.path.insert(0, HERE)
from _harness import fail, log  # noqa: E402
from deploy_guide import find_package  # noqa: E402

# Run inside the overlay's root (chroot), each step's output kept for the failure message.
IN_ROOT = r'''
set -eu
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
exec </dev/null
step() { echo "== $*"; }
step apt-get update
apt-get update -qq
step GNOME tracker first
apt-get install -y -qq --no-install-recommends tracker >/dev/null
test -x /usr/bin/tracker3
step ours beside it
apt-get install -y -qq --no-install-recommends /pkg/ours.deb >/dev/null
dpkg-query -W -f='${Package} ${Version} ${Status}\n' tracker udp-tracker-cluster
dpkg-query -W -f='${Status}\n' tracker | grep -q "install ok installed"
dpkg-query -W -f='${Status}\n' udp-tracker-cluster | grep -q "install ok installed"
step no file of one in the other
if dpkg -L tracker | grep -qx /usr/bin/tracker; then echo "GNOME's package owns /usr/bin/tracker"; exit 1; fi
test "$(dpkg -S /usr/bin/tracker | cut -d: -f1)" = udp-tracker-cluster
step apt takes neither for the other
apt-get -s install tracker | grep -q "tracker is already the newest version"
if apt-get -s install tracker | grep -q udp-tracker-cluster; then echo "apt touches ours for theirs"; exit 1; fi
if apt-get -s dist-upgrade | grep -qE "^(Inst|Remv) udp-tracker-cluster"; then echo "apt upgrades or removes ours"; exit 1; fi
apt-cache policy udp-tracker-cluster | grep -q "Installed: ${OURS_VERSION}"
step the package as installed
stat -c '%U:%G %a %n' /etc/tracker /etc/tracker/tracker.toml /etc/tracker/admin.token /etc/tracker/tracker.toml.d
test "$(stat -c '%U:%G %a' /etc/tracker/admin.token)" = "root:tracker 640"
test "$(stat -c '%U:%G %a' /etc/tracker/tracker.toml.d)" = "root:tracker 2770"
grep -q '^udp = \["0.0.0.0:6969", "\[::\]:6969"\]' /etc/tracker/tracker.toml
step serves with no edit: the ExecStart of the unit as its user, in a network namespace
unit=/usr/lib/systemd/system/tracker.service
user=$(sed -n 's/^User=//p' $unit)
start=$(sed -n 's/^ExecStart=//p' $unit)
grep -qx 'Type=notify' $unit
grep -qx 'RestartPreventExitStatus=78' $unit
mount -t proc proc /proc
adduser --quiet --disabled-password --gecos "" --ingroup tracker opgroup >/dev/null
adduser --quiet --disabled-password --gecos "" outsider >/dev/null
unshare --net sh -eu -c '
  ip link set lo up
  setpriv --reuid="$1" --regid=tracker --init-groups $2 >/tmp/node.log 2>&1 &
  node=$!
  ok=0
  for i in $(seq 1 100); do
    if tracker client connect udp://127.0.0.1:6969 --timeout 0.2 >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
  done
  [ $ok = 1 ] || { echo "no answer on 127.0.0.1:6969"; cat /tmp/node.log; exit 1; }
  h=0123456789abcdef0123456789abcdef01234567
  tracker client announce udp://127.0.0.1:6969 --info-hash $h --port 6881 | grep "seeders=1"
  tracker client announce "udp://[::1]:6969" --info-hash $h --port 6882 | grep "seeders=2"
  echo "-- the HTTP tracker on TCP 6969, the same swarm"
  curl -sf "http://127.0.0.1:6969/scrape?info_hash=%01%23%45%67%89%ab%cd%ef%01%23%45%67%89%ab%cd%ef%01%23%45%67" | grep -aq "8:completei2e"
  echo "HTTP scrape on TCP 6969: complete 2"
  echo "-- the admin token, as a member of the group tracker, without naming it"
  setpriv --reuid=opgroup --regid=tracker --init-groups tracker admin mode allow
  setpriv --reuid=opgroup --regid=tracker --init-groups tracker admin access | grep -qi "allow"
  echo "-- a user outside the group"
  if setpriv --reuid=outsider --regid=outsider --init-groups tracker admin mode open 2>/tmp/outsider.err; then
    echo "a user outside the group tracker changed the mode"; exit 1
  fi
  cat /tmp/outsider.err
  kill -TERM $node
  wait $node || { echo "the node exited $?"; cat /tmp/node.log; exit 1; }
' sh "$user" "$start"
step an upgrade with a new conffile over the operator drop-in, with no prompt
printf 'interval = 900\n' > /etc/tracker/tracker.toml.d/50-local.toml
apt-get install -y -qq --no-install-recommends /pkg/newer.deb >/dev/null
dpkg-query -W -f='${Version}\n' udp-tracker-cluster | grep -qx "${NEWER_VERSION}"
grep -q '# newer conffile' /etc/tracker/tracker.toml
grep -qx 'interval = 900' /etc/tracker/tracker.toml.d/50-local.toml
tracker config check /etc/tracker/tracker.toml | grep -q 'interval = 900  (/etc/tracker/tracker.toml.d/50-local.toml)'
test -z "$(find /etc/tracker -name '*.dpkg-*')"
step dpkg -r ours leaves theirs
dpkg -r udp-tracker-cluster >/dev/null
test ! -e /usr/bin/tracker
dpkg-query -W -f='${Status}\n' tracker | grep -q "install ok installed"
tracker3 --version | head -1
umount /proc
echo "== done"
'''


def newer_package(deb, work):
    """The same package, one version later, its conffile changed: an upgrade."""
    tree = os.path.join(work, "newer")
    subprocess.run(["dpkg-deb", "-R", deb, tree], check=True)
    control = os.path.join(tree, "DEBIAN", "control")
    text = open(control).read()
    version = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Version: "))
    newer = version + "+1"
    with open(control, "w") as f:
        f.write(text.replace(f"Version: {version}\n", f"Version: {newer}\n"))
    with open(os.path.join(tree, "etc", "tracker", "tracker.toml"), "a") as f:
        f.write("# newer conffile\n")
    out = os.path.join(work, "newer.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, out], check=True, capture_output=True)
    return out, version, newer


def main():
    if os.geteuid() != 0:
        fail("needs root (overlay mounts, chroot, apt)")
    deb = find_package()
    work = tempfile.mkdtemp(prefix="pkg-install-")
    try:
        newer, version, newer_version = newer_package(deb, work)
        script = os.path.join(work, "outer.sh")
        inner = os.path.join(work, "inner.sh")
        with open(inner, "w") as f:
            f.write(IN_ROOT)
        # The overlay in a private mount namespace: nothing outlives the test, and its
        # upper layer is a tmpfs, not the root file system it covers.
        with open(script, "w") as f:
            f.write(f'''set -eu
mount --make-rprivate /
mount -t tmpfs -o size=4g tmpfs {work}/t
mkdir -p {work}/t/upper {work}/t/work {work}/t/root
mount -t overlay overlay -o lowerdir=/,upperdir={work}/t/upper,workdir={work}/t/work {work}/t/root
r={work}/t/root
mount --rbind /dev $r/dev
mount -t tmpfs tmpfs $r/tmp
mount -t tmpfs tmpfs $r/run
mkdir -p $r/pkg $r/run/systemd-none
cp {deb} $r/pkg/ours.deb
cp {newer} $r/pkg/newer.deb
cp {inner} $r/pkg/inner.sh
# No service starts in the overlay (its packages' scripts ask policy-rc.d).
printf '#!/bin/sh\\nexit 101\\n' > $r/usr/sbin/policy-rc.d
chmod 0755 $r/usr/sbin/policy-rc.d
OURS_VERSION={version} NEWER_VERSION={newer_version} chroot $r /bin/bash ${{PKG_TRACE:-}} /pkg/inner.sh
''')
        os.makedirs(os.path.join(work, "t"))
        # A PID namespace too: whatever the script leaves running (a node, if a step fails
        # before it is stopped) dies with it.
        out = subprocess.run(["unshare", "--mount", "--pid", "--fork", "bash", script], capture_output=True, text=True, timeout=900)
        if out.returncode != 0 or "== done" not in out.stdout:
            fail(f"package install (exit {out.returncode}):\n{out.stdout[-4000:]}\n{out.stderr[-3000:]}")
        steps = [line[3:] for line in out.stdout.splitlines() if line.startswith("== ")]
        log("package: " + "; ".join(steps))
        if os.environ.get("PKG_VERBOSE"):
            print(out.stdout)
        print(f"RESULT package_install=passed gnome_tracker_beside=yes version={version}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
