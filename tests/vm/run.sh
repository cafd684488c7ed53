#!/usr/bin/env bash
# Boot a throw-away VM (Debian kernel + busybox initramfs) and run one test
# script in it with the static cnibox binary installed at /opt/cni/bin.
# See tests/vm/README.md.  Installs nothing; builds everything in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG=${0##*/}

# Exit codes of the runner itself (the test script's own status is passed through).
EX_USAGE=2        # bad arguments
EX_MISSING=3      # host tool / package missing
EX_BUILD=4        # initramfs could not be built
EX_TIMEOUT=124    # VM did not finish in time
EX_NORESULT=125   # VM ended without a result marker (crash, panic, init failure)

DEFAULT_MODULES="8021q veth bridge dummy ipvlan macvlan vrf"
# module parameters (dummy: no automatic dummy0, tests create what they need)
declare -A MODPARAMS=([dummy]="numdummies=0")
FALLBACK_APPLETS="bridge host-local static vlan loopback portmap bandwidth firewall"

usage() {
    cat <<EOF
usage: $PROG --bin STATIC_CNIBOX --script TEST_SCRIPT [options]

  --bin PATH         static cnibox binary (installed as /opt/cni/bin/cnibox + applet links)
  --script PATH      test script, run as '/bin/sh /test.sh' (busybox ash) in the VM;
                     its exit status becomes the runner's exit status
  --timeout SECONDS  hard limit for the whole VM run (default: 300)
  --keep             keep the temp dir (initramfs, console log) and print its path
  --accel auto|kvm|tcg   accelerator (default: auto = kvm if /dev/kvm is usable)
  --kernel PATH      kernel image (default: newest /boot/vmlinuz-* with /lib/modules/<ver>)
  --arch auto|x86_64|aarch64|armv7
                     guest architecture (default auto: that of --bin). A foreign one boots
                     under TCG from a sysroot made by tests/vm/fetch-arch.sh (see --sysroot)
  --sysroot DIR      for a foreign --arch: where its kernel, modules, static busybox and nft
                     are (default /var/cache/cnibox-vm/ARCH, as fetch-arch.sh fills it)
  --modules "M ..."  extra kernel modules to load (default set: $DEFAULT_MODULES)
  --add SRC[:DEST]   copy an extra file into the initramfs (DEST default /SRC-basename);
                     repeatable
  --env NAME=VALUE   export a variable to the test script; repeatable
  --log PATH         also copy the full console log to PATH
  -v, --verbose      stream the whole console (kernel + init), not just the test output
  -h, --help         this text

Environment: CNIBOX_VM_ACCEL, CNIBOX_VM_KERNEL, CNIBOX_VM_TIMEOUT, CNIBOX_VM_ARCH,
CNIBOX_VM_SYSROOT,
CNIBOX_VM_MEM (MiB, default 512), CNIBOX_VM_SMP (default 2),
CNIBOX_VM_KVM_BOOT_TIMEOUT (s, default 45: in auto mode, fall back to TCG if
the KVM guest has not started the test by then), CNIBOX_VM_MODULES_DIR
(module tree to use instead of /lib/modules/<kernel version>).

Exit status: the test script's status, or $EX_USAGE usage, $EX_MISSING missing
host dependency, $EX_BUILD initramfs build failure, $EX_TIMEOUT timeout,
$EX_NORESULT VM ended without result (crash/panic).
EOF
}

die() { local code=$1; shift; echo "$PROG: error: $*" >&2; exit "$code"; }
info() { echo "$PROG: $*" >&2; }

# ---------------------------------------------------------------- arguments
BIN= SCRIPT= KEEP=0 VERBOSE=0 LOGCOPY=
TIMEOUT=${CNIBOX_VM_TIMEOUT:-300}
ACCEL=${CNIBOX_VM_ACCEL:-auto}
KERNEL=${CNIBOX_VM_KERNEL:-}
ARCH=${CNIBOX_VM_ARCH:-auto}
SYSROOT=${CNIBOX_VM_SYSROOT:-}
MEM=${CNIBOX_VM_MEM:-512}
SMP=${CNIBOX_VM_SMP:-2}
EXTRA_MODULES=
ADDS=()
ENVS=()

need_arg() { [[ $# -ge 2 && -n $2 ]] || die $EX_USAGE "$1 needs an argument (see --help)"; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --bin) need_arg "$@"; BIN=$2; shift 2 ;;
        --bin=*) BIN=${1#*=}; shift ;;
        --script) need_arg "$@"; SCRIPT=$2; shift 2 ;;
        --script=*) SCRIPT=${1#*=}; shift ;;
        --timeout) need_arg "$@"; TIMEOUT=$2; shift 2 ;;
        --timeout=*) TIMEOUT=${1#*=}; shift ;;
        --keep) KEEP=1; shift ;;
        --accel) need_arg "$@"; ACCEL=$2; shift 2 ;;
        --accel=*) ACCEL=${1#*=}; shift ;;
        --kernel) need_arg "$@"; KERNEL=$2; shift 2 ;;
        --kernel=*) KERNEL=${1#*=}; shift ;;
        --arch) need_arg "$@"; ARCH=$2; shift 2 ;;
        --arch=*) ARCH=${1#*=}; shift ;;
        --sysroot) need_arg "$@"; SYSROOT=$2; shift 2 ;;
        --sysroot=*) SYSROOT=${1#*=}; shift ;;
        --modules) need_arg "$@"; EXTRA_MODULES+=" $2"; shift 2 ;;
        --modules=*) EXTRA_MODULES+=" ${1#*=}"; shift ;;
        --add) need_arg "$@"; ADDS+=("$2"); shift 2 ;;
        --add=*) ADDS+=("${1#*=}"); shift ;;
        --env) need_arg "$@"; ENVS+=("$2"); shift 2 ;;
        --env=*) ENVS+=("${1#*=}"); shift ;;
        --log) need_arg "$@"; LOGCOPY=$2; shift 2 ;;
        --log=*) LOGCOPY=${1#*=}; shift ;;
        -v|--verbose) VERBOSE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die $EX_USAGE "unknown argument: $1" ;;
    esac
done

[[ -n $BIN ]] || { usage >&2; die $EX_USAGE "--bin is required"; }
[[ -n $SCRIPT ]] || { usage >&2; die $EX_USAGE "--script is required"; }
[[ -f $BIN && -r $BIN ]] || die $EX_USAGE "--bin $BIN: no such readable file"
[[ -f $SCRIPT && -r $SCRIPT ]] || die $EX_USAGE "--script $SCRIPT: no such readable file"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die $EX_USAGE "--timeout must be a positive integer (seconds)"
[[ $MEM =~ ^[1-9][0-9]*$ && $SMP =~ ^[1-9][0-9]*$ ]] || die $EX_USAGE "CNIBOX_VM_MEM/CNIBOX_VM_SMP must be positive integers"
case $ACCEL in auto|kvm|tcg) ;; *) die $EX_USAGE "--accel must be auto, kvm or tcg" ;; esac
# ELF machine of a file: x86_64, aarch64, armv7 (32-bit ARM) or empty.
elf_arch() {
    [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]] || return 0
    case $(od -An -tu2 -j18 -N2 "$1" | tr -d ' ') in
        62) echo x86_64 ;;
        183) echo aarch64 ;;
        40) echo armv7 ;;
    esac
}
[[ $ARCH != auto ]] || ARCH=$(elf_arch "$BIN")
# Per architecture: qemu, its machine and CPU under TCG, the serial console, the sysroot.
case $ARCH in
    x86_64|'') ARCH=x86_64 QEMU=qemu-system-x86_64 QPKG=qemu-system-x86 CONSOLE=ttyS0
        MACHINE=() TCG_CPU=max ;;
    aarch64) QEMU=qemu-system-aarch64 QPKG=qemu-system-arm CONSOLE=ttyAMA0
        MACHINE=(-M virt) TCG_CPU=cortex-a57 ;;
    armv7) QEMU=qemu-system-arm QPKG=qemu-system-arm CONSOLE=ttyAMA0
        MACHINE=(-M virt,highmem=off) TCG_CPU=cortex-a15 ;;
    *) die $EX_USAGE "--arch must be auto, x86_64, aarch64 or armv7" ;;
esac
HOST_ARCH=$(uname -m)
[[ $HOST_ARCH != armv7* && $HOST_ARCH != armv8l ]] || HOST_ARCH=armv7
FOREIGN=0
[[ $ARCH == "$HOST_ARCH" ]] || FOREIGN=1
if [[ $FOREIGN -eq 1 ]]; then
    SYSROOT=${SYSROOT:-/var/cache/cnibox-vm/$ARCH}
    [[ $ACCEL != kvm ]] || die $EX_USAGE "--accel kvm: no KVM for a foreign architecture ($ARCH)"
    ACCEL=tcg
    bin_arch=$(elf_arch "$BIN")
    [[ -z $bin_arch || $bin_arch == "$ARCH" ]] || die $EX_USAGE "--bin $BIN is for $bin_arch, not $ARCH"
fi
for e in ${ENVS[@]+"${ENVS[@]}"}; do
    [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die $EX_USAGE "--env $e: expected NAME=VALUE"
done

# ------------------------------------------------------ host dependencies
missing=()
need_cmd() { # need_cmd CMD PACKAGE
    command -v "$1" >/dev/null 2>&1 || missing+=("$1 (apt-get install $2)")
}
need_cmd "$QEMU" "$QPKG"
need_cmd cpio cpio
need_cmd gzip gzip
need_cmd timeout coreutils
BUSYBOX=/bin/busybox
FETCH="tests/vm/fetch-arch.sh $ARCH"
if [[ $FOREIGN -eq 1 ]]; then
    BUSYBOX=$SYSROOT/bin/busybox
    [[ -f $BUSYBOX ]] || missing+=("$BUSYBOX (run $FETCH as root)")
else
    [[ -x $BUSYBOX ]] || missing+=("$BUSYBOX (apt-get install busybox-static)")
fi

# A binary is usable in the initramfs only if it is ELF without an interpreter.
is_static() {
    [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]] || return 1
    if command -v readelf >/dev/null 2>&1; then
        ! readelf -lW "$1" 2>/dev/null | grep -q 'Requesting program interpreter'
    elif command -v file >/dev/null 2>&1; then
        file -L "$1" | grep -Eq 'statically linked|static-pie'
    else
        # the interpreter path sits right after the program headers
        ! head -c 4096 "$1" | grep -aq '/ld-linux\|/ld-musl\|/ld64'
    fi
}
if [[ -f $BUSYBOX ]] && ! is_static "$BUSYBOX"; then
    missing+=("$BUSYBOX is dynamically linked; install the static one (apt-get install busybox-static)")
fi

# kernel + matching modules (of the sysroot for a foreign architecture)
KROOT= KHINT="apt-get install linux-image-amd64"
[[ $FOREIGN -eq 0 ]] || KROOT=$SYSROOT KHINT="run $FETCH as root"
if [[ -n $KERNEL ]]; then
    [[ -f $KERNEL ]] || die $EX_USAGE "--kernel $KERNEL: no such file"
    KVER=${KERNEL##*/vmlinuz-}
    [[ $KVER != "$KERNEL" ]] || KVER=
else
    KERNEL= KVER=
    for k in $(ls -1 "$KROOT"/boot/vmlinuz-* 2>/dev/null | sort -rV); do
        v=${k#"$KROOT"/boot/vmlinuz-}
        if [[ -f $KROOT/lib/modules/$v/modules.dep ]]; then KERNEL=$k KVER=$v; break; fi
    done
fi
if [[ -z $KERNEL ]]; then
    missing+=("a kernel $KROOT/boot/vmlinuz-<ver> with $KROOT/lib/modules/<ver>/modules.dep ($KHINT)")
elif [[ -z $KVER || ! -f $KROOT/lib/modules/$KVER/modules.dep ]]; then
    missing+=("$KROOT/lib/modules/${KVER:-<version of $KERNEL>}/modules.dep for $KERNEL ($KHINT)")
elif [[ ! -r $KERNEL ]]; then
    missing+=("read permission on $KERNEL (it is mode $(stat -c %a "$KERNEL"); run as root or chmod a+r it)")
fi

if [[ ${#missing[@]} -gt 0 ]]; then
    echo "$PROG: missing host dependencies:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    if [[ $FOREIGN -eq 1 ]]; then
        echo "$PROG: e.g. apt-get install -y $QPKG cpio kmod && $FETCH" >&2
    else
        echo "$PROG: e.g. DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-system-x86 linux-image-amd64 busybox-static cpio kmod" >&2
    fi
    exit $EX_MISSING
fi
# CNIBOX_VM_MODULES_DIR: alternative module tree for that kernel (custom builds)
MODDIR=${CNIBOX_VM_MODULES_DIR:-$KROOT/lib/modules/$KVER}
[[ -f $MODDIR/modules.dep ]] || die $EX_MISSING "$MODDIR/modules.dep not found"

is_static "$BIN" || die $EX_USAGE "--bin $BIN is not statically linked; the initramfs has no libc/loader"

# accelerator
ACCEL_REQUESTED=$ACCEL
kvm_usable() { [[ -c /dev/kvm ]] && ( exec 3<>/dev/kvm ) 2>/dev/null; }
if [[ $ACCEL == auto ]]; then
    if kvm_usable; then ACCEL=kvm; else ACCEL=tcg; fi
elif [[ $ACCEL == kvm ]] && ! kvm_usable; then
    die $EX_MISSING "--accel kvm but /dev/kvm is missing or not accessible (group kvm?)"
fi

# ---------------------------------------------------------------- temp dir
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cnibox-vm.XXXXXX")
QPID= SPID=
kill_bg() { # stop the VM (timeout forwards the signal to qemu) and the streamer
    [[ -n $QPID ]] && kill "$QPID" 2>/dev/null
    [[ -n $SPID ]] && kill "$SPID" 2>/dev/null
    QPID= SPID=
    return 0
}
cleanup() {
    local rc=$?
    kill_bg
    [[ -e /dev/fd/3 ]] && exec 2>&3   # stderr may be parked while waiting for qemu
    if [[ $KEEP -eq 1 ]]; then
        info "kept $WORK (initramfs.cpio.gz, console.log, root/)"
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ROOT=$WORK/root
LOG=$WORK/console.log

# ------------------------------------------------------------ initramfs tree
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,run,tmp,root,etc/cnibox-vm,lib,opt/cni/bin,etc/cni/net.d,var/lib}
ln -s ../run "$ROOT/var/run"
chmod 1777 "$ROOT/tmp"

# Run a guest binary on the host (at most 10 s): directly, or with qemu-user for a foreign
# architecture (qemu-aarch64-static / qemu-arm-static, package qemu-user-static) if installed.
host_run() {
    if [[ $FOREIGN -eq 0 ]]; then timeout 10 "$@"; return; fi
    local q
    for q in "qemu-${ARCH%v7}-static" "qemu-${ARCH%v7}"; do
        if command -v "$q" >/dev/null 2>&1; then timeout 10 "$q" "$@"; return; fi
    done
    return 127
}

# busybox and its applets (a foreign busybox that cannot run here links them at boot: init)
cp "$BUSYBOX" "$ROOT/bin/busybox"
chmod 0755 "$ROOT/bin/busybox"
{ host_run "$BUSYBOX" --list-full 2>/dev/null || true; } | while read -r p; do
    [[ $p == bin/busybox || -e $ROOT/$p || -L $ROOT/$p ]] && continue
    mkdir -p "$ROOT/${p%/*}"
    ln -s /bin/busybox "$ROOT/$p"
done
[[ -e $ROOT/bin/sh ]] || ln -s busybox "$ROOT/bin/sh"

# A foreign architecture: nft with its libraries from the sysroot (fetch-arch.sh puts them
# there), so that a test can read the ruleset back.
if [[ $FOREIGN -eq 1 && -f $SYSROOT/usr/sbin/nft ]]; then
    cp "$SYSROOT/usr/sbin/nft" "$ROOT/usr/sbin/nft"
    for d in lib usr/lib; do
        for t in "$SYSROOT/$d"/*-linux-gnu*; do
            [[ -d $t ]] || continue
            mkdir -p "$ROOT/$d/${t##*/}"
            cp -a "$t"/*.so* "$ROOT/$d/${t##*/}/" 2>/dev/null || true
        done
    done
    cp -a "$SYSROOT"/lib/ld-linux-* "$ROOT/lib/" 2>/dev/null || true
fi

# cnibox + one link per applet
cp "$BIN" "$ROOT/opt/cni/bin/cnibox"
chmod 0755 "$ROOT/opt/cni/bin/cnibox"
applets=
if list=$(host_run "$BIN" --list </dev/null 2>/dev/null) && [[ -n $list ]] \
    && ! grep -qvE '^[A-Za-z0-9][A-Za-z0-9._+-]*$' <<<"$list"; then
    applets=$list
else
    info "'$BIN --list' did not give an applet list; using the fixed list"
    applets=$FALLBACK_APPLETS
fi
napplets=0
for a in $applets; do
    [[ $a == cnibox ]] && continue
    ln -sf cnibox "$ROOT/opt/cni/bin/$a"
    napplets=$((napplets + 1))
done

# test script, helper library, extra files
cp "$SCRIPT" "$ROOT/test.sh"
chmod 0755 "$ROOT/test.sh"
cp "$HERE/init" "$ROOT/init"
chmod 0755 "$ROOT/init"
cp "$HERE/lib.sh" "$ROOT/lib/cnibox-vm.sh"
for spec in ${ADDS[@]+"${ADDS[@]}"}; do
    src=${spec%%:*}
    dst=/${src##*/}
    [[ $spec == *:* ]] && dst=${spec#*:}
    [[ -f $src ]] || die $EX_USAGE "--add $spec: no such file $src"
    [[ $dst == /* ]] || dst=/$dst
    mkdir -p "$ROOT${dst%/*}"
    cp "$src" "$ROOT$dst"
done
: > "$ROOT/etc/cnibox-vm/env"
for e in ${ENVS[@]+"${ENVS[@]}"}; do
    name=${e%%=*} val=${e#*=}
    printf 'export %s=%q\n' "$name" "$val" >> "$ROOT/etc/cnibox-vm/env"
done
# %q may emit bash-only $'..' quoting; fall back to single quotes for ash
if grep -q "\\\$'" "$ROOT/etc/cnibox-vm/env"; then
    : > "$ROOT/etc/cnibox-vm/env"
    for e in ${ENVS[@]+"${ENVS[@]}"}; do
        name=${e%%=*} val=${e#*=}
        printf "export %s='%s'\n" "$name" "${val//\'/\'\\\'\'}" >> "$ROOT/etc/cnibox-vm/env"
    done
fi
printf '%s\n' "$KVER" > "$ROOT/etc/cnibox-vm/kernel-version"
printf 'nameserver 127.0.0.1\n' > "$ROOT/etc/resolv.conf"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\n' > "$ROOT/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$ROOT/etc/hosts"

# /dev/console so init has stdio from the first instruction (needs root for
# mknod; without it init reopens /dev/console after mounting devtmpfs).
mknod -m 600 "$ROOT/dev/console" c 5 1 2>/dev/null || true
mknod -m 666 "$ROOT/dev/null" c 1 3 2>/dev/null || true

# ------------------------------------------------------------- kernel modules
declare -A MODPATH=() MODDEPS=() LOADED=()
while IFS= read -r line; do
    path=${line%%:*}
    deps=${line#*:}
    name=${path##*/}
    name=${name%%.ko*}
    name=${name//-/_}
    MODPATH[$name]=$path
    MODDEPS[$name]=$deps
done < "$MODDIR/modules.dep"
builtin_mod() { # is module $1 built into the kernel?
    [[ -f $MODDIR/modules.builtin ]] || return 1
    grep -Eq "/${1//_/[-_]}\.ko\$" "$MODDIR/modules.builtin"
}
ORDER=()
add_module_path() { # add_module_path REL_PATH: deps first, then itself
    local rel=$1 name deps d
    name=${rel##*/}; name=${name%%.ko*}; name=${name//-/_}
    [[ -n ${LOADED[$name]:-} ]] && return 0
    LOADED[$name]=1
    deps=${MODDEPS[$name]:-}
    # modules.dep lists the full closure; resolve recursively so the order is
    # topological no matter how the list is sorted.
    for d in $deps; do add_module_path "$d"; done
    ORDER+=("$rel")
}
modfail=()
for m in $DEFAULT_MODULES $EXTRA_MODULES; do
    key=${m//-/_}
    if [[ -n ${MODPATH[$key]:-} ]]; then
        add_module_path "${MODPATH[$key]}"
    elif builtin_mod "$key"; then
        : # built in, nothing to load
    else
        modfail+=("$m")
    fi
done
[[ ${#modfail[@]} -eq 0 ]] || die $EX_BUILD "module(s) not found in $MODDIR/modules.dep nor modules.builtin: ${modfail[*]}"

decompress_to() { # decompress_to SRC DEST
    case $1 in
        *.ko) cp "$1" "$2" ;;
        *.ko.xz) command -v xz >/dev/null || die $EX_MISSING "xz needed for $1 (apt-get install xz-utils)"
                 xz -dc "$1" > "$2" ;;
        *.ko.zst) command -v zstd >/dev/null || die $EX_MISSING "zstd needed for $1 (apt-get install zstd)"
                  zstd -qdc "$1" > "$2" ;;
        *.ko.gz) gzip -dc "$1" > "$2" ;;
        *) die $EX_BUILD "unknown module format: $1" ;;
    esac
}
: > "$ROOT/etc/cnibox-vm/modules.order"
mkdir -p "$ROOT/lib/modules/$KVER"
: > "$ROOT/lib/modules/$KVER/modules.dep"
for rel in ${ORDER[@]+"${ORDER[@]}"}; do
    plain=${rel%.ko*}.ko
    mkdir -p "$ROOT/lib/modules/$KVER/${plain%/*}"
    decompress_to "$MODDIR/$rel" "$ROOT/lib/modules/$KVER/$plain"
    name=${rel##*/}; name=${name%%.ko*}; name=${name//-/_}
    echo "$plain ${MODPARAMS[$name]:-}" >> "$ROOT/etc/cnibox-vm/modules.order"
    deps=
    for d in ${MODDEPS[$name]:-}; do deps+=" ${d%.ko*}.ko"; done
    echo "$plain:$deps" >> "$ROOT/lib/modules/$KVER/modules.dep"
done
for f in modules.builtin modules.builtin.modinfo modules.order; do
    [[ -f $MODDIR/$f ]] && cp "$MODDIR/$f" "$ROOT/lib/modules/$KVER/"
done

# ------------------------------------------------------------------ cpio
INITRD=$WORK/initramfs.cpio.gz
if ! (cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort \
        | cpio -o -H newc --quiet --owner=0:0 | gzip -1 > "$INITRD"); then
    die $EX_BUILD "cpio/gzip of the initramfs failed"
fi

info "$ARCH kernel $KERNEL ($KVER), accel $ACCEL (requested $ACCEL_REQUESTED), ${SMP} cpu, ${MEM} MiB, timeout ${TIMEOUT}s"
info "initramfs $(du -k "$INITRD" | cut -f1) KiB: busybox, cnibox + $napplets applet links, ${#ORDER[@]} modules (${ORDER[*]##*/})"

# ------------------------------------------------------------------- boot
APPEND="console=$CONSOLE quiet loglevel=4 panic=-1 oops=panic rdinit=/init"
RAW=$WORK/console.raw

# run_vm ACCEL LIMIT BOOT_LIMIT: boot the VM, stream the console, leave the
# raw console in $RAW and qemu's (timeout's) exit status in $QRC.
# BOOT_LIMIT > 0: give up (QRC=200) if the test has not started by then.
run_vm() {
    local accel=$1 limit=$2 boot_limit=$3 t0 now
    local -a accel_args
    case $accel in
        kvm) accel_args=(-accel kvm -cpu host) ;;
        tcg) accel_args=(-accel tcg -cpu "$TCG_CPU") ;;
    esac
    : > "$RAW"
    # stdin from /dev/null: no TTY needed, qemu never reads the runner's stdin.
    local -a display=(-vga none)
    [[ $ARCH == x86_64 ]] || display=()
    timeout --kill-after=10 "$limit" "$QEMU" ${MACHINE[@]+"${MACHINE[@]}"} "${accel_args[@]}" \
        -m "$MEM" -smp "$SMP" -nographic -no-reboot -monitor none -nic none ${display[@]+"${display[@]}"} \
        -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" \
        </dev/null >"$RAW" 2>&1 &
    QPID=$!
    # Stream the console; unless --verbose only what lies between the
    # BEGIN/END markers (the test script's output).
    tail -s 0.2 -n +1 -f --pid="$QPID" "$RAW" 2>/dev/null | awk -v verbose="$VERBOSE" '
        { gsub(/\r/, ""); gsub(/\033\[[0-9;?]*[A-Za-z]/, ""); gsub(/\033c/, "") }
        /CNIBOX-VM-BEGIN$/  { inside = 1; blank = 0; if (!verbose) next }
        /CNIBOX-VM-END$/    { inside = 0; if (!verbose) next }
        !verbose && inside && $0 == "" { blank++; next }  # held back: init adds one before END
        verbose || inside   { for (; blank > 0; blank--) print ""; print; fflush() }' &
    SPID=$!
    QRC=
    t0=$SECONDS
    # bash reports a background job killed by a signal (qemu aborts on some
    # nested-KVM hosts) as "Aborted ..." on stderr; keep that out of the
    # output while waiting, the console log has qemu's own message.
    exec 3>&2 2>/dev/null
    if [[ $boot_limit -gt 0 ]]; then
        while kill -0 "$QPID" 2>/dev/null; do
            if grep -aq 'CNIBOX-VM-BEGIN' "$RAW"; then break; fi
            if (( SECONDS - t0 >= boot_limit )); then
                kill "$QPID" 2>/dev/null
                QRC=200
                break
            fi
            sleep 0.5
        done
    fi
    local rc=0
    wait "$QPID" || rc=$?
    [[ -n $QRC ]] || QRC=$rc
    wait "$SPID" || true
    exec 2>&3 3>&-
    QPID= SPID=
}

start=$SECONDS
KVM_BOOT_LIMIT=${CNIBOX_VM_KVM_BOOT_TIMEOUT:-45}
if [[ $ACCEL == kvm && $ACCEL_REQUESTED == auto ]]; then
    # Nested/odd KVM setups (e.g. inside Firecracker) can abort or hang the
    # guest early; in auto mode fall back to TCG if the test did not start.
    run_vm kvm "$TIMEOUT" "$KVM_BOOT_LIMIT"
    if ! grep -aq 'CNIBOX-VM-BEGIN' "$RAW"; then
        reason="qemu exited with $QRC"
        [[ $QRC -eq 200 ]] && reason="no test start within ${KVM_BOOT_LIMIT}s"
        info "KVM boot failed ($reason: $(grep -a 'qemu-system' "$RAW" | head -n 1 | tr -d '\r'))"
        info "falling back to TCG software emulation"
        cp "$RAW" "$WORK/console-kvm-attempt.raw"
        ACCEL=tcg
        remaining=$(( TIMEOUT - (SECONDS - start) ))
        (( remaining > 0 )) || remaining=1
        run_vm tcg "$remaining" 0
    fi
else
    run_vm "$ACCEL" "$TIMEOUT" 0
fi
elapsed=$(( SECONDS - start ))
# console log without CRs and terminal escapes (SeaBIOS clears the screen)
sed -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' "$RAW" > "$LOG"
[[ -n $LOGCOPY ]] && cp "$LOG" "$LOGCOPY"

# the last marker wins (init prints it after the test's own output)
result=$(sed -n 's/^.*CNIBOX-VM-RESULT: \([0-9][0-9]*\)$/\1/p' "$LOG" | tail -n 1)

show_tail() {
    [[ $VERBOSE -eq 1 ]] && return
    echo "$PROG: --- last 40 console lines ---" >&2
    tail -n 40 "$LOG" >&2
    echo "$PROG: ---" >&2
}

if [[ -n $result ]]; then
    if [[ $result -ne 0 ]]; then
        # init prints dmesg after a failure; show it
        [[ $VERBOSE -eq 1 ]] || sed -n '/CNIBOX-VM-END$/,/CNIBOX-VM-RESULT: [0-9]*$/p' "$LOG" | sed -e '1d;$d' -e '/^$/d' >&2
        info "test script FAILED with status $result (${elapsed}s, accel $ACCEL)"
    else
        info "test script passed (${elapsed}s, accel $ACCEL)"
    fi
    exit "$result"
fi

if [[ $QRC -eq 124 || $QRC -eq 137 ]]; then
    show_tail
    info "TIMEOUT: VM did not finish within ${TIMEOUT}s (accel $ACCEL); console log above"
    exit $EX_TIMEOUT
fi
show_tail
if grep -q 'Kernel panic' "$LOG"; then
    info "VM crashed: kernel panic (qemu exit $QRC, ${elapsed}s, accel $ACCEL)"
elif ! grep -q 'CNIBOX-VM-BEGIN$' "$LOG"; then
    info "VM ended before the test started (qemu exit $QRC, ${elapsed}s, accel $ACCEL): boot/init failure"
else
    info "VM ended without a CNIBOX-VM-RESULT line (qemu exit $QRC, ${elapsed}s, accel $ACCEL): crash?"
fi
exit $EX_NORESULT
