#!/usr/bin/env bash
# Makes the Debian 13 root that compare.sh runs netavark 1.14 from (it needs trixie's glibc):
#   benches/peers-root.sh [DIR]    (default /var/cache/cnibox-bench/trixie; root, debootstrap)
# once, outside the repository (never commit it: ~250 MB); does nothing when DIR already holds
# a netavark. The mirror is the one apt is configured with. compare.sh mounts what netavark needs
# (/proc, a sysfs, /run/netns) into it per sample, in a mount namespace of its own.
set -euo pipefail
dir=${1:-${NETAVARK_ROOT:-/var/cache/cnibox-bench/trixie}}
[ -x "$dir/usr/lib/podman/netavark" ] && { echo "$dir: $(chroot "$dir" /usr/lib/podman/netavark --version)"; exit 0; }
command -v debootstrap >/dev/null || { echo "peers-root.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
mirror=$(grep -hoE '(URIs:|deb) +https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
    awk '{print $2}' | head -1)
mkdir -p "$(dirname "$dir")"
debootstrap --variant=minbase --include=netavark,nftables,iptables trixie "$dir" "${mirror:-http://deb.debian.org/debian}"
chroot "$dir" /usr/lib/podman/netavark --version
