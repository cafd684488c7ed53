#!/usr/bin/env bash
# Fetch what tests/vm/run.sh needs to boot a VM of a foreign architecture: Debian's kernel and
# its modules, a static busybox and nft (with its libraries, to read the ruleset back), all
# of that architecture, unpacked into a sysroot (default /var/cache/cnibox-vm/ARCH).
#
#   tests/vm/fetch-arch.sh [--dest DIR] ARCH...      ARCH: aarch64 | armv7
#
# Uses apt-get download and dpkg-deb -x (nothing is installed; the host's dpkg only learns the
# foreign architecture: dpkg --add-architecture arm64|armhf, then apt-get update), and depmod
# for modules.dep. Idempotent: a sysroot whose stamp names the same package versions is kept.
# Run as root (dpkg --add-architecture); .ci/run does.
set -euo pipefail
PROG=${0##*/}
BASE=${CNIBOX_VM_SYSROOT_BASE:-/var/cache/cnibox-vm}
die() { echo "$PROG: $*" >&2; exit 1; }

archs=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --dest) [[ $# -ge 2 ]] || die "--dest needs a directory"; BASE=$2; shift 2 ;;
        -h|--help) sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 0 ;;
        aarch64|armv7) archs+=("$1"); shift ;;
        *) die "unknown argument $1 (architectures: aarch64 armv7)" ;;
    esac
done
[[ ${#archs[@]} -gt 0 ]] || die "name an architecture: aarch64 or armv7"
for c in apt-get apt-cache dpkg dpkg-deb depmod; do
    command -v "$c" >/dev/null || die "$c is missing (apt-get install dpkg apt kmod)"
done

# nft and the libraries it loads (bookworm's names); the VM test reads the ruleset with it.
NFT_PKGS="nftables libnftables1 libnftnl11 libmnl0 libjansson4 libgmp10 libxtables12 libedit2
libbsd0 libmd0 libtinfo6 libc6"

for arch in "${archs[@]}"; do
    case $arch in
        aarch64) deb=arm64 flavour=arm64 ;;
        armv7) deb=armhf flavour=armmp ;;
    esac
    if ! dpkg --print-foreign-architectures | grep -qx "$deb"; then
        echo "$PROG: adding the dpkg architecture $deb"
        dpkg --add-architecture "$deb"
        for _ in 1 2 3; do apt-get update -qq && break; sleep 10; done
    fi
    kpkg=$(apt-cache depends "linux-image-$flavour:$deb" 2>/dev/null \
        | sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*\).*/\1/p' | head -n 1)
    [[ -n $kpkg ]] || die "no kernel package for linux-image-$flavour:$deb (apt-get update?)"
    pkgs=("$kpkg:$deb" "busybox-static:$deb")
    for p in $NFT_PKGS; do pkgs+=("$p:$deb"); done
    versions=$(for p in "${pkgs[@]}"; do
        echo "$p $(apt-cache policy "$p" | sed -n 's/^ *Candidate: //p')"
    done)
    dest=$BASE/$arch
    if [[ -f $dest/.cnibox-vm-stamp ]] && [[ $(cat "$dest/.cnibox-vm-stamp") == "$versions" ]]; then
        echo "$PROG: $dest is up to date ($kpkg)"
        continue
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cnibox-fetch.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "$PROG: downloading ${pkgs[*]}"
    # _apt cannot write into a root-only temp dir: download as root, quietly.
    (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "${pkgs[@]}")
    mkdir -p "$tmp/root"
    for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
    kver=${kpkg#linux-image-}
    [[ -f $tmp/root/boot/vmlinuz-$kver ]] || die "$kpkg has no /boot/vmlinuz-$kver"
    depmod -b "$tmp/root" "$kver"
    # Only what the VM uses: kernel, modules, busybox, nft and its libraries.
    rm -rf "$tmp/root/usr/share" "$tmp/root/usr/lib/linux-image-$kver" \
        "$tmp/root/usr/lib/"*-linux-gnu*/gconv
    printf '%s\n' "$versions" > "$tmp/root/.cnibox-vm-stamp"
    mkdir -p "$BASE"
    rm -rf "$dest.old"
    [[ -e $dest ]] && mv "$dest" "$dest.old"
    mv "$tmp/root" "$dest"
    rm -rf "$dest.old" "$tmp"
    trap - EXIT
    echo "$PROG: $dest: kernel $kver, $(du -sh "$dest" | cut -f1)"
done
