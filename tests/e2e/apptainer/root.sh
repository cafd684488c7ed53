#!/usr/bin/env bash
# Makes the Debian unstable root that tests/e2e_apptainer.rs runs apptainer 1.4 from (unstable's
# apptainer needs glibc 2.38, Debian 12 has 2.36):
#   tests/e2e/apptainer/root.sh [DIR]   (default /var/cache/cnibox-unstable/apptainer-root; root)
# once, outside the repository (never commit it: ~350 MB); does nothing when DIR already holds
# apptainer. debootstrap's minbase plus apptainer and the netfilter tools the plugins call
# (iptables for portmap's and firewall's iptables backend). The mirror is the one apt is
# configured with. The test mounts what apptainer needs (/proc, /sys, /dev, its temp dir with the
# plugin dir, apptainer.conf, /tmp and /var/lib/cni) into the root per run, in a mount namespace
# of its own (tests/e2e/apptainer/run.sh).
set -euo pipefail
dir=${1:-${CNIBOX_APPTAINER_ROOT:-/var/cache/cnibox-unstable/apptainer-root}}
if [ -x "$dir/usr/bin/apptainer" ] && [ -f "$dir/.cnibox-root-stamp" ]; then
    echo "$dir: apptainer $(chroot "$dir" dpkg-query -W -f '${Version}' apptainer)"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "root.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
mirror=$(grep -hoE '(URIs:|deb) +https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
    awk '{print $2}' | head -1 || true)
rm -rf "$dir.new"
mkdir -p "$(dirname "$dir")"
log=$dir.log
debootstrap --variant=minbase --include=apptainer,iptables,nftables,iproute2 unstable "$dir.new" \
    "${mirror:-http://deb.debian.org/debian}" >"$log" 2>&1 ||
    { echo "root.sh: debootstrap failed, see $log" >&2; exit 1; }
rm -f "$log"
chroot "$dir.new" apt-get clean
mkdir -p "$dir.new/var/lib/cni"   # a mount point: the test mounts its private dir there
touch "$dir.new/.cnibox-root-stamp"
rm -rf "$dir" && mv "$dir.new" "$dir"
echo "$dir: apptainer $(chroot "$dir" dpkg-query -W -f '${Version}' apptainer)"
