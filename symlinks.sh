#!/bin/sh
# Create or refresh the applet links for cnibox in DIR (default /opt/cni/bin).
#   symlinks.sh [--force] [--backup BACKUPDIR] [--hardlink] [DIR]
#   symlinks.sh --restore BACKUPDIR [DIR]
#   symlinks.sh --remove [DIR]
#   symlinks.sh --list [DIR]
# A thin caller of `cnibox install` (its rules: `cnibox install -h`, README "Install"): the
# binary is $CNIBOX, or DIR/cnibox; it copies itself to DIR/cnibox when it is not that file.
# Idempotent; upgrades links made by an earlier run (symbolic or hard). A file with an applet's
# name that is not cnibox (e.g. the reference Go plugin) makes the run change nothing and fail,
# unless --force is given: then such files are kept in BACKUPDIR (default DIR.pre-cnibox) and
# replaced. --restore moves the files in BACKUPDIR back over the links; --remove deletes
# cnibox's links in DIR, nothing else; --hardlink makes hard links (they survive bind-mounting
# the directory alone into another container, where symlinks to an outside path would dangle).
# A binary of another architecture (an ARM build installed into a staging DESTDIR) runs under
# qemu-user (qemu-aarch64[-static], qemu-arm[-static]) when that is installed.
set -eu
me=symlinks.sh
# DIR is the argument that is neither an option nor an option's value.
dir=; value=0
for a in "$@"; do
    if [ "$value" -eq 1 ]; then value=0; continue; fi
    case "$a" in
        --backup|--restore) value=1 ;;
        -h|--help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
        -*) ;;
        *) dir=$a ;;
    esac
done
bin=${CNIBOX:-${dir:-/opt/cni/bin}/cnibox}
[ -x "$bin" ] || { echo "$me: $bin is not an executable cnibox (set CNIBOX=)" >&2; exit 1; }
# qemu-user for the binary's ELF machine, if it is not this host's and qemu-user is installed.
qemu_for() {
    case $(od -An -tu2 -j18 -N2 "$1" 2>/dev/null | tr -d ' ') in
        183) q=aarch64 ;;
        40) q=arm ;;
        62) q=x86_64 ;;
        *) return 1 ;;
    esac
    for c in "qemu-$q-static" "qemu-$q"; do
        command -v "$c" >/dev/null 2>&1 && { echo "$c"; return 0; }
    done
    return 1
}
if "$bin" --version >/dev/null 2>&1; then
    exec "$bin" install "$@"
elif q=$(qemu_for "$bin"); then
    exec "$q" "$bin" install "$@"
fi
echo "$me: $bin does not run here; if it is built for another architecture, install" \
    "qemu-user (apt-get install qemu-user-static)" >&2
exit 1
