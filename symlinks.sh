#!/bin/sh
# Create or refresh the applet links for cnibox in DIR (default /opt/cni/bin).
#   symlinks.sh [--force] [--hardlink] [DIR]
# The binary is $CNIBOX, or DIR/cnibox. Idempotent. An existing regular file with an applet's
# name (e.g. the reference Go plugin) is left alone unless --force is given.
# --hardlink makes hard links instead: they survive bind-mounting the directory alone into
# another container, where symlinks to an outside path would dangle.
set -eu
force=0; hard=0; dir=
for a in "$@"; do
    case "$a" in
        --force) force=1 ;;
        --hardlink) hard=1 ;;
        -h|--help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
        -*) echo "symlinks.sh: unknown option $a" >&2; exit 2 ;;
        *) dir=$a ;;
    esac
done
dir=${dir:-/opt/cni/bin}
bin=${CNIBOX:-$dir/cnibox}
[ -x "$bin" ] || { echo "symlinks.sh: $bin is not an executable cnibox (set CNIBOX=)" >&2; exit 1; }
mkdir -p "$dir"
# Link by name when the binary sits in DIR (relative link), else by absolute path.
case "$bin" in
    "$dir/cnibox") target=cnibox ;;
    /*) target=$bin ;;
    *) target=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin") ;;
esac
status=0
for name in $("$bin" --list); do
    path=$dir/$name
    if [ -e "$path" ] && [ ! -L "$path" ] && [ "$force" -eq 0 ]; then
        if [ "$hard" -eq 1 ] && [ "$path" -ef "$bin" ]; then continue; fi
        echo "symlinks.sh: $path exists and is not a link; left alone (use --force)" >&2
        status=1
        continue
    fi
    if [ "$hard" -eq 1 ]; then
        ln -f "$bin" "$path.cnibox-new" && mv -f "$path.cnibox-new" "$path"
    else
        ln -sfn "$target" "$path.cnibox-new" && mv -f "$path.cnibox-new" "$path"
    fi
done
exit $status
