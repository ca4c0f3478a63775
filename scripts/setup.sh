#!/usr/bin/env bash
# Installs what building and testing need on Debian (idempotent): SQLite headers,
# python3-libtorrent for the real-client tests, ActiveMQ (the cluster broker), nftables
# (a firewall rule that refuses a node's sends; the nemesis's cuts), iptables,
# libnetfilter-queue-dev and gcc (the nemesis's NFQUEUE loss, delay and duplication), iproute2
# and curl for the network-namespace tests, transmission-cli and aria2 (real clients at a
# failover), chromium + chromium-driver + python3-selenium
# for the dashboard's browser test, opentracker for the benchmark suite, and for the
# package and the deployment guide: dpkg-dev, lintian, keepalived (it moves the floating
# address), openssl (the guide's certificates) and prometheus (promtool checks the
# shipped alert rules and a real node's /metrics). Swift itself
# comes with the machine.
#
#   scripts/setup.sh [--standalone | --cluster]
#
# --standalone: only what building and running a standalone node needs (SQLite's headers;
# scripts/start.sh). --cluster: that and a local broker (scripts/cluster.sh).
set -euo pipefail
packages=(libsqlite3-dev python3-libtorrent activemq iproute2 curl nftables iptables libnetfilter-queue-dev gcc chromium chromium-driver
          python3-selenium transmission-cli aria2 opentracker wrk dpkg-dev lintian keepalived openssl prometheus)
case "${1:-}" in
  --standalone) packages=(libsqlite3-dev) ;;
  --cluster) packages=(libsqlite3-dev activemq iproute2 curl) ;;
  "") ;;
  *) echo "setup.sh: unknown argument $1 (--standalone, --cluster)" >&2; exit 2 ;;
esac
needed=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || needed+=("$pkg")
done
if [ ${#needed[@]} -gt 0 ]; then
  echo "setup: installing ${needed[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${needed[@]}" >/dev/null
fi
if [[ " ${packages[*]} " == *" python3-libtorrent "* ]] && ! /usr/bin/python3 -c "import libtorrent" 2>/dev/null; then
  echo "setup: python3-libtorrent is installed but /usr/bin/python3 cannot import it" >&2
  exit 1
fi
command -v swift >/dev/null || { echo "setup: swift is not on PATH (expected Swift 6.3 at /opt/swift)" >&2; exit 1; }
