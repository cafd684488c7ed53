#!/bin/sh
# Packs one static cnibox build the way upstream packs its plugins (`make release` runs this for
# every target):
#   contrib/release.sh BINARY ARCH OUTDIR        ARCH as upstream names it: amd64 arm64 arm
# writes OUTDIR/cnibox-linux-ARCH-vVERSION.tgz, which `tar -xzf … -C /opt/cni/bin` unpacks into
# a plugin directory as upstream's cni-plugins-linux-ARCH-vVERSION.tgz does (./NAME entries, no
# entry for the directory itself): cnibox and every applet name as hard links to it, README.md
# and LICENSE (Apache-2.0, as upstream's archives carry theirs); beside it .sha256 and .sha512 as sha256sum and
# sha512sum print them. Reproducible: names sorted, owner 0:0, fixed modes, every mtime
# SOURCE_DATE_EPOCH (default: the time of the last commit), gzip without name or time. The
# applet names come from the binary itself (`cnibox install --hardlink`, under qemu-user for a
# foreign one: see symlinks.sh).
set -eu
[ $# -eq 3 ] || { sed -n '2,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }
bin=$1 arch=$2 out=$3
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
name=cnibox-linux-$arch-v$version.tgz
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$bin" "$stage/cnibox"
chmod 0755 "$stage/cnibox"
CNIBOX="$stage/cnibox" ./symlinks.sh --hardlink "$stage" >/dev/null
for doc in README.md LICENSE; do
    cp "$doc" "$stage/"; chmod 0644 "$stage/$doc"
done
mkdir -p "$out"
(
    cd "$stage"
    # shellcheck disable=SC2046 # the names have no spaces: applets, cnibox, the docs
    LC_ALL=C tar --format=gnu --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
        --no-recursion -cf - $(LC_ALL=C ls | sed 's|^|./|')
) | gzip -n >"$out/$name.tmp"
mv "$out/$name.tmp" "$out/$name"
cd "$out"
sha256sum "$name" >"$name.sha256"
sha512sum "$name" >"$name.sha512"
echo "$out/$name"
