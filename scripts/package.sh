#!/usr/bin/env bash
# Builds dist/udp-tracker-cluster_VERSION_ARCH.deb: the release binary /usr/bin/tracker with
# the Swift runtime linked statically (the target host needs no toolchain), the systemd
# unit tracker.service, /etc/tracker/tracker.toml (a conffile: `tracker config example`,
# a standalone public tracker), the empty drop-in directory /etc/tracker/tracker.toml.d,
# tracker(1), the deployment guide, and the cluster drop-in, keepalived, ActiveMQ and
# Prometheus templates under /usr/share/doc/udp-tracker-cluster.
#
# The package is not called `tracker`: Debian's GNOME search engine is, and apt would
# take one for an upgrade of the other. Its files do not meet (tests/deploy/package_install.py).
#
# Usage: scripts/package.sh [--check]
#   --check  also runs lintian (no errors allowed) and `systemd-analyze verify` on the
#            unit as the package installs it, and prints the package's size and
#            dependencies.
# TRACKER_STATIC_BIN=PATH packages an already built static binary instead of linking one.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = --check ] && check=1

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ "$commit" != unknown ] && ! git diff --quiet HEAD -- Sources Package.swift 2>/dev/null && commit="$commit-modified"
work=$(mktemp -d)
info=Sources/tracker/BuildInfo.swift
cp "$info" "$work/BuildInfo.swift"
# However this script ends, the source is put back and the scratch space removed.
trap 'cp "$work/BuildInfo.swift" "$info"; rm -rf "$work"' EXIT

# The static binary: the release build's own objects (those the tests ran against),
# linked again with the Swift runtime and Foundation static. SwiftPM's link command is
# read from its build manifest; Foundation's static archives are named explicitly
# because objects compiled for dynamic linking do not ask for them. Only the tracker
# module is compiled again, with the commit stamped into BuildInfo for `--version`.
static_link() {
    sed -i "s/static let commit = \"unknown\"/static let commit = \"$commit\"/" "$info"
    swift build -c release --product tracker
    cp "$work/BuildInfo.swift" "$info"
    /usr/bin/python3 - "$work/tracker" > "$work/link.args" <<'PY'
import json, re, sys
manifest = open(".build/release.yaml").read()
start = re.search(r'^  "C\.tracker-[^"]*\.exe":$', manifest, re.M).end()
line = next(l for l in manifest[start:].splitlines() if l.strip().startswith("args:"))
args = json.loads(line.strip()[len("args:"):])
args[args.index("-o") + 1] = sys.argv[1]
args.insert(1, "-static-stdlib")
print("\n".join(args))
PY
    mapfile -t link < "$work/link.args"
    "${link[@]}" -Xlinker --start-group -lFoundation -lCoreFoundation -lFoundationInternationalization -l_FoundationICU \
        -lFoundationEssentials -l_FoundationCShims -l_FoundationCollections -Xlinker --end-group
}
# The manual page, from the command line's own help (swift-argument-parser's plugin),
# made before the commit is stamped so that it reuses the release build as it is.
# In release mode: the default, debug, built the whole package a second time (~40 s).
swift package --allow-writing-to-package-directory generate-manual --configuration release --date "$(date +%Y-%m-%d)" >/dev/null
manual=.build/plugins/GenerateManual/outputs/tracker/tracker.1
bin="${TRACKER_STATIC_BIN:-}"
if [ -z "$bin" ]; then
    static_link
    bin="$work/tracker"
fi
version=$("$bin" --version | awk '{print $1}')
name=udp-tracker-cluster
debversion="$version"
arch=$(dpkg --print-architecture)
root="$work/${name}_${version}_${arch}"
doc="$root/usr/share/doc/$name"

install -D -m 0755 "$bin" "$root/usr/bin/tracker"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/tracker"
install -d -m 0755 "$root/usr/share/man/man1"
gzip -9n < "$manual" > "$root/usr/share/man/man1/tracker.1.gz"
chmod 0644 "$root/usr/share/man/man1/tracker.1.gz"
install -D -m 0644 deploy/systemd/tracker.service "$root/usr/lib/systemd/system/tracker.service"
install -d -m 0755 "$root/etc/tracker" "$root/etc/tracker/tracker.toml.d"
"$bin" config example > "$root/etc/tracker/tracker.toml"
chmod 0644 "$root/etc/tracker/tracker.toml"
install -D -m 0644 docs/operating/deploy.md "$doc/deploy.md"
install -d -m 0755 "$doc/examples"
"$bin" config example --cluster > "$doc/examples/cluster.toml"
chmod 0644 "$doc/examples/cluster.toml"
install -D -m 0644 deploy/prometheus/prometheus.yml "$doc/examples/prometheus/prometheus.yml"
install -D -m 0644 deploy/prometheus/alerts.yml "$doc/examples/prometheus/alerts.yml"
install -D -m 0644 deploy/debian/copyright "$doc/copyright"
install -D -m 0644 deploy/keepalived/keepalived.conf "$doc/examples/keepalived/keepalived.conf"
for f in deploy/activemq/*; do install -D -m 0644 "$f" "$doc/examples/activemq/$(basename "$f")"; done
printf '%s (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
    "$name" "$debversion" "$commit" "$(sed -n 's/^Maintainer: //p' deploy/debian/control.in)" "$(date -R)" \
    | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Dependencies: what the binary links (libc, libstdc++, libsqlite3, …), from the
# shared-library database.
mkdir -p "$work/src/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O "$root/usr/bin/tracker" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
install -d -m 0755 "$root/DEBIAN"
sed -e "s/@VERSION@/$debversion/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    deploy/debian/control.in > "$root/DEBIAN/control"
echo /etc/tracker/tracker.toml > "$root/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "deploy/debian/$s" "$root/DEBIAN/$s"; done

mkdir -p dist
deb="dist/${name}_${version}_${arch}.deb"
# xz at its default level; PACKAGE_FAST_COMPRESSION=1 (the test run's) takes level 1: the
# same files in a package ~15 % larger, built in 3 s instead of 18.
dpkg-deb --root-owner-group -Zxz -z"$([ "${PACKAGE_FAST_COMPRESSION:-0}" = 1 ] && echo 1 || echo 6)" --build "$root" "$deb" >/dev/null
echo "package.sh: $deb ($(du -h "$deb" | cut -f1), installed $((size / 1024)) MiB), commit $commit"
echo "package.sh: Depends: $depends, adduser, procps"

if [ "$check" = 1 ]; then
    # lintian: errors fail; warnings and notes are printed for the reader.
    lintian --tag-display-limit 0 "$deb" | tee "$work/lintian.txt" || true
    if grep -q '^E:' "$work/lintian.txt"; then echo "package.sh: lintian reports errors" >&2; exit 1; fi
    # The unit as installed, in a root holding the package and the host's own units (for
    # the targets it names).
    verify="$work/verify"
    dpkg-deb -x "$deb" "$verify"
    mkdir -p "$verify/usr/lib/systemd/system" "$verify/bin"
    cp -an /usr/lib/systemd/system/. "$verify/usr/lib/systemd/system/"
    # ExecReload's kill (procps, a dependency) as the host has it.
    cp -a /bin/kill "$verify/bin/kill"
    if ! out=$(systemd-analyze verify --root="$verify" tracker.service 2>&1) || [ -n "$out" ]; then
        echo "package.sh: systemd-analyze verify tracker.service:" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "package.sh: systemd-analyze verify tracker.service: clean"
    # The broker host's unit (Debian's java and activemq on this host).
    if ! out=$(systemd-analyze verify deploy/activemq/activemq-tracker.service 2>&1) || [ -n "$out" ]; then
        echo "package.sh: systemd-analyze verify activemq-tracker.service:" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "package.sh: systemd-analyze verify activemq-tracker.service: clean"
    # The binary needs no Swift toolchain: only system libraries.
    if ldd "$verify/usr/bin/tracker" | grep -Ei 'swift|not found'; then
        echo "package.sh: the binary links a Swift library or misses one" >&2
        exit 1
    fi
    echo "package.sh: ldd: $(ldd "$verify/usr/bin/tracker" | awk '{print $1}' | tr '\n' ' ')"
    "$verify/usr/bin/tracker" --version
fi
