#!/usr/bin/env bash
# Makes the Debian unstable root that compare.sh runs netavark 1.17 from and podman.sh runs
# unstable's podman 5.8 from (they need unstable's glibc):
#   benches/peers-root.sh [DIR]    (default /var/cache/cnibox-bench/unstable; root, debootstrap)
# once, outside the repository (never commit it: ~250 MB, ~370 MB with podman); does nothing when
# DIR already holds netavark and podman, installs podman (and its runtime, conmon) into a root
# that has netavark only. The mirror is the one apt is configured with. compare.sh and podman.sh
# mount what netavark and podman need (/proc, a sysfs, /run/netns, …) into it per run, in a mount
# namespace of their own; the apt-get below does the same for the /proc dpkg's scripts read.
set -euo pipefail
dir=${1:-${NETAVARK_ROOT:-/var/cache/cnibox-bench/unstable}}
pkgs=(podman runc conmon)   # runc: crun refuses a hybrid cgroup hierarchy whose cgroup2 has a controller
if [ ! -x "$dir/usr/lib/podman/netavark" ]; then
    command -v debootstrap >/dev/null || { echo "peers-root.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    # `|| true`: grep fails (and pipefail with it) on a missing /etc/apt/sources.list, the case
    # of a machine configured by /etc/apt/sources.list.d/*.sources only.
    mirror=$({ grep -hoE '(URIs:|deb) +https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null || true; } |
        awk '{print $2}' | head -1)
    mkdir -p "$(dirname "$dir")"
    debootstrap --variant=minbase --include=netavark,nftables,iptables unstable "$dir" "${mirror:-http://deb.debian.org/debian}"
fi
if [ "$(chroot "$dir" dpkg-query -W -f '${db:Status-Abbrev}\n' "${pkgs[@]}" 2>/dev/null | grep -c '^ii')" != ${#pkgs[@]} ]; then
    # Into the root that exists: its own apt, unstable's packages, no recommends (buildah, criu,
    # passt, … are not needed for a rootful container from a --rootfs). Check-Valid-Until=false:
    # a mirror that is a snapshot serves an unstable Release whose Valid-Until has passed
    # (debootstrap does not look at it, apt refuses it).
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
    unshare --mount --propagation private sh -ec '
        mount -t proc proc "$1/proc"; d=$1; shift
        chroot "$d" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false update -q
        chroot "$d" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
        chroot "$d" apt-get clean' sh "$dir" "${pkgs[@]}" ||
        { echo "peers-root.sh: could not install ${pkgs[*]} into $dir (podman.sh leaves its podman 5 side out)" >&2; exit 1; }
fi
# netavark 1.4, the peer an older node (Debian 12, podman 4.3) runs: the host's own package
# (/usr/lib/podman/netavark). Installed without its recommends; podman 4.3 keeps using CNI where a
# containers.conf names it (the tests' and podman.sh's do).
if [ ! -x /usr/lib/podman/netavark ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends netavark >/dev/null ||
        echo "peers-root.sh: could not install Debian's netavark (no netavark 1.4 column)" >&2
fi
echo "$dir: $(chroot "$dir" /usr/lib/podman/netavark --version), podman $(chroot "$dir" dpkg-query -W -f '${Version}' podman)"
