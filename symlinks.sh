#!/bin/sh
# Create or refresh the applet links for cnibox in DIR (default /opt/cni/bin).
#   symlinks.sh [--force] [--backup BACKUPDIR] [--hardlink] [DIR]
#   symlinks.sh --restore BACKUPDIR [DIR]
#   symlinks.sh --remove [DIR]
# The binary is $CNIBOX, or DIR/cnibox. Idempotent; upgrades links made by an earlier run
# (symbolic or hard). A file with an applet's name that is not cnibox (e.g. the reference Go
# plugin) makes the run change nothing and fail, unless --force is given: then such files are
# moved into BACKUPDIR (default DIR.pre-cnibox) before the link takes their place.
# --restore moves the files in BACKUPDIR back over the links, switching back to them.
# --remove deletes the applet links (and hard-linked copies) of cnibox in DIR, nothing else.
# --hardlink makes hard links instead: they survive bind-mounting the directory alone into
# another container, where symlinks to an outside path would dangle.
# The applet names come from `cnibox --list`. A binary of another architecture (an ARM build
# installed into a staging DESTDIR) runs under qemu-user (qemu-aarch64[-static],
# qemu-arm[-static]) when that is installed; else set CNIBOX_APPLETS="bridge host-local ...".
set -eu
me=symlinks.sh
usage() { sed -n '2,16s/^# \{0,1\}//p' "$0"; }
force=0; hard=0; remove=0; dir=; backup=; restore=
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --hardlink) hard=1 ;;
        --remove) remove=1 ;;
        --backup|--restore)
            [ $# -ge 2 ] || { echo "$me: $1 needs a directory" >&2; exit 2; }
            if [ "$1" = --backup ]; then backup=$2; else restore=$2; fi
            shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "$me: unknown option $1" >&2; usage >&2; exit 2 ;;
        *)
            [ -z "$dir" ] || { echo "$me: one directory only (got $dir and $1)" >&2; exit 2; }
            dir=$1 ;;
    esac
    shift
done
dir=${dir:-/opt/cni/bin}
dir=${dir%/}
[ -n "$dir" ] || dir=/

# Is PATH a copy of cnibox (a hard link made by an earlier --hardlink run, possibly of an older
# build)? Every build carries this text; the Go plugins do not.
is_cnibox() {
    if [ -L "$1" ] && [ ! -e "$1" ]; then
        # A dangling link: ours if it pointed at a cnibox binary.
        case "$(readlink "$1")" in cnibox|*/cnibox) return 0 ;; *) return 1 ;; esac
    fi
    [ -f "$1" ] && grep -q 'cnibox --list shows the applets' "$1" 2>/dev/null
}

if [ -n "$restore" ]; then
    [ -d "$restore" ] || { echo "$me: $restore is not a directory" >&2; exit 1; }
    status=0
    for saved in "$restore"/*; do
        [ -e "$saved" ] || continue
        name=$(basename "$saved")
        path=$dir/$name
        if { [ -e "$path" ] || [ -L "$path" ]; } && ! is_cnibox "$path"; then
            echo "$me: $path is not cnibox; left alone" >&2
            status=1
            continue
        fi
        if mv -f "$saved" "$path"; then
            echo "$me: restored $path"
        else
            echo "$me: could not restore $path from $saved" >&2
            status=1
        fi
    done
    rmdir "$restore" 2>/dev/null || true
    exit $status
fi

bin=${CNIBOX:-$dir/cnibox}
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
if [ -n "${CNIBOX_APPLETS:-}" ]; then
    names=$CNIBOX_APPLETS
elif ! names=$("$bin" --list 2>/dev/null); then
    if q=$(qemu_for "$bin") && names=$("$q" "$bin" --list); then
        :
    else
        echo "$me: $bin --list failed; if it is built for another architecture, install" \
            "qemu-user (apt-get install qemu-user-static) or set CNIBOX_APPLETS to its applet" \
            "names" >&2
        exit 1
    fi
fi
if [ "$remove" -eq 1 ]; then
    status=0
    for name in $names; do
        path=$dir/$name
        if { [ -e "$path" ] || [ -L "$path" ]; } && is_cnibox "$path"; then
            rm -f "$path" || { echo "$me: could not remove $path" >&2; status=1; }
        fi
    done
    exit $status
fi
mkdir -p "$dir"
backup=${backup:-$dir.pre-cnibox}
# Link by name when the binary sits in DIR (relative link), else by absolute path.
case "$bin" in
    "$dir/cnibox") target=cnibox ;;
    /*) target=$bin ;;
    *) target=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin") ;;
esac

# First pass: find what would be replaced, so that without --force nothing changes at all.
foreign=
for name in $names; do
    path=$dir/$name
    if { [ -e "$path" ] || [ -L "$path" ]; } && ! is_cnibox "$path"; then
        foreign="$foreign $name"
    fi
done
if [ -n "$foreign" ] && [ "$force" -eq 0 ]; then
    echo "$me: these files in $dir are not cnibox:$foreign" >&2
    echo "$me: nothing was changed. To replace them, keeping them in $backup for" \
        "'symlinks.sh --restore $backup $dir', run 'symlinks.sh --force $dir'" \
        "(or 'make install FORCE=1')" >&2
    exit 1
fi

status=0
failed=
for name in $names; do
    path=$dir/$name
    case " $foreign " in
        *" $name "*)
            if ! { mkdir -p "$backup" && mv -f "$path" "$backup/$name"; }; then
                echo "$me: could not move $path aside into $backup; not linked" >&2
                failed="$failed $name"
                continue
            fi
            echo "$me: moved $path to $backup/$name" ;;
    esac
    new=$path.cnibox-new
    rm -f "$new"
    if [ "$hard" -eq 1 ]; then
        ln "$bin" "$new" 2>/dev/null || { rm -f "$new"; ln_err="hard link from $bin"; }
    else
        ln -s "$target" "$new" 2>/dev/null || { rm -f "$new"; ln_err="symbolic link to $target"; }
    fi
    if [ -e "$new" ] || [ -L "$new" ]; then
        if mv -f "$new" "$path"; then continue; fi
        rm -f "$new"
        ln_err="rename into place"
    fi
    echo "$me: $path: $ln_err failed" >&2
    failed="$failed $name"
done
if [ -n "$failed" ]; then
    echo "$me: not linked:$failed" >&2
    status=1
fi
exit $status
