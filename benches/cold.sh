#!/usr/bin/env bash
# Cold starts on SD-card-class storage (issue 37 item 2): the plugins read from a slow block
# device, not from the page cache, as on an edge node after boot or under memory pressure.
#   benches/cold.sh CNIBOX_BINARY [--quick]      (root; losetup, mkfs.ext4, fincore, blkio)
# The device: a loop device (direct I/O over a file in $TMPDIR, so the host's cache of the
# backing file plays no part) with an ext4 file system holding cnibox with its links and
# v1.9.1's bridge, host-local and portmap (REF_DIR, as compare.sh), mounted read-only. The
# throttle: the cgroup v1 blkio controller (this kernel mounts cgroups hybrid: the v2 hierarchy
# has no io controller, so no io.max; device-mapper is not built in, so no dm-delay):
# blkio.throttle.read_bps_device 20 MiB/s and read_iops_device 1,500 (an SD card of speed class
# 10 / application class A1) on the loop device, for the processes of a sample only.
# Cold: before every sample the file system is unmounted, the loop device's buffers flushed
# (blockdev --flushbufs) and mounted again: every page of the plugins and their inodes comes
# from the device (checked with fincore: 0 bytes resident), and nothing else on the machine
# loses its cache (no drop_caches).
# Samples, the sides in turn: a bridge VERSION exec, and benches/chain.sh's bridge(+ipMasq,
# host-local) → portmap chain ADD then DEL, iptables on both sides (each side its node namespace,
# one untimed warm-up, a new container namespace per sample; only the plugin execs are timed).
# Page cache at rest: on a freshly mounted device, COLD_CALLS (1,000) mixed calls (bridge ADD,
# portmap ADD, bridge CHECK, portmap CHECK, portmap DEL, bridge DEL, a new container each round),
# then fincore: what stays resident of cnibox against v1.9.1's bridge, host-local and portmap.
# Prints a markdown section; lines starting "target: " are rows of compare.sh's targets table.
# A machine that cannot do it (no tool, no blkio throttle, no loop device) gets the reason on
# stderr and no output. It reports; it never fails on numbers.
set -euo pipefail
bin=${1:?usage: cold.sh CNIBOX_BINARY [--quick]}; shift
reps=9; [ "${1:-}" = --quick ] && reps=3
reps=${COLD_REPS:-$reps}; calls=${COLD_CALLS:-1000}
bps=${COLD_BPS:-20971520}; iops=${COLD_IOPS:-1500}
here=$(cd "$(dirname "$0")" && pwd)
ref=${REF_DIR:-/var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni}
blkio=/sys/fs/cgroup/blkio
for t in losetup mkfs.ext4 blockdev fincore nsenter; do
    command -v $t >/dev/null || { echo "cold.sh: $t missing: no cold-start rows" >&2; exit 0; }
done
[ -w "$blkio/blkio.throttle.read_bps_device" ] || { echo "cold.sh: no cgroup v1 blkio throttle at $blkio: no cold-start rows" >&2; exit 0; }
[ -x "$ref/bridge" ] || { echo "cold.sh: no reference v1.9.1 in $ref (.ci/fetch-unstable containernetworking-plugins): no cold-start rows" >&2; exit 0; }
work=$(mktemp -d "${TMPDIR:-/var/tmp}/cnibox-cold.XXXXXX")
mnt=$work/mnt loop="" cg=$blkio/cnibox-cold-$$ nss=()
# unmount: the mount goes once nothing holds it. A DEL's detached child (the link deletion
# waiting out the kernel's RCU barrier, a fork of cnibox, whose binary is on this mount) may
# still run for a few tens of ms after its plugin returned: wait for it (polled, bounded).
unmount() {
    mountpoint -q "$mnt" || return 0
    local _
    for _ in $(seq 200); do umount "$mnt" 2>/dev/null && return 0; sleep 0.05; done
    umount "$mnt"
}
cleanup() {
    local n p
    # A sample cut short (a signal, an error) may still run in the throttled group: its
    # processes are this script's, ended by pid before the mount can go.
    if [ -d "$cg" ]; then
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            p=$(cat "$cg/cgroup.procs"); [ -z "$p" ] && break
            kill -9 $p 2>/dev/null || true; sleep 0.1
        done
    fi
    for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    unmount || true
    [ -n "$loop" ] && losetup -d "$loop"
    [ -d "$cg" ] && rmdir "$cg"
    rm -rf "$work"
}
trap cleanup EXIT
newns() { NS="cnibox-cold-$$-${#nss[@]}"; ip netns add "$NS"; nss+=("$NS"); }
delns() { ip netns del "$1"; }

# The device: 64 MiB, ext4, the plugins on it.
truncate -s 64M "$work/disk"
mkfs.ext4 -q -F "$work/disk"
loop=$(losetup -f --show --direct-io=on "$work/disk") || { loop=""; echo "cold.sh: no loop device: no cold-start rows" >&2; exit 0; }
mkdir "$mnt"; mount "$loop" "$mnt"
mkdir "$mnt/ours" "$mnt/ref"
cp "$bin" "$mnt/ours/cnibox"
for a in bridge host-local portmap; do ln -s cnibox "$mnt/ours/$a"; cp "$ref/$a" "$mnt/ref/$a"; done
umount "$mnt"
majmin=$(lsblk -ndo MAJ:MIN "$loop" | tr -d ' ')
mkdir "$cg"
echo "$majmin $bps" > "$cg/blkio.throttle.read_bps_device"
echo "$majmin $iops" > "$cg/blkio.throttle.read_iops_device"
# cold: the device's file system mounted afresh (nothing of it in the page cache).
cold() { unmount; blockdev --flushbufs "$loop"; mount -o ro,noatime "$loop" "$mnt"; }
resident() { fincore -b -n -o RES "$@" | awk '{s += $1} END {print s + 0}'; }
files() { if [ "$1" = ours ]; then echo "$mnt/ours/cnibox"; else echo "$mnt/ref/bridge $mnt/ref/host-local $mnt/ref/portmap"; fi; }
# throttled CMD…: runs CMD in the throttled cgroup (the subshell joins it, then execs).
throttled() { ( echo "$BASHPID" > "$cg/cgroup.procs"; exec "$@" ); }

# Check once that a remount leaves nothing resident and that the throttle holds: reading the
# 3.99 MB bridge of v1.9.1 takes ≥ size/bps.
cold
[ "$(resident $(files ours) $(files ref))" = 0 ] || { echo "cold.sh: pages still resident after the remount: no cold-start rows" >&2; exit 0; }
t=${EPOCHREALTIME/./}; throttled cat "$mnt/ref/bridge" > /dev/null; dt=$(( ${EPOCHREALTIME/./} - t ))
read_mbs=$(awk -v b="$(stat -c %s "$mnt/ref/bridge")" -v t="$dt" 'BEGIN {printf "%.1f", b / t}')

declare -A node=() vers=() adds=() dels=() errs=()
for s in ref ours; do
    newns; node[$s]=$NS; mkdir -p "$work/data-$s"; errs[$s]=0
    newns; nsenter --net="/run/netns/${node[$s]}" bash "$here/chain.sh" "$mnt/$s" iptables w "/run/netns/$NS" "$work/data-$s" bridge portmap > /dev/null || true
    delns "$NS"
done
for i in $(seq "$reps"); do
    for s in ref ours; do
        cold
        t=${EPOCHREALTIME/./}
        throttled env CNI_COMMAND=VERSION "$mnt/$s/bridge" < /dev/null > /dev/null || errs[$s]=$(( ${errs[$s]} + 1 ))
        vers[$s]+="$(( (${EPOCHREALTIME/./} - t) * 1000 )) "
        cold
        newns
        out=$(throttled nsenter --net="/run/netns/${node[$s]}" bash "$here/chain.sh" "$mnt/$s" iptables "c$i" "/run/netns/$NS" "$work/data-$s" bridge portmap) || true
        delns "$NS"
        read -r A D E <<<"$out"
        adds[$s]+="${A:-0} "; dels[$s]+="${D:-0} "; errs[$s]=$(( ${errs[$s]} + ${E:-1} ))
    done
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1e6}'; }
ratio() { awk -v r="$1" -v o="$2" 'BEGIN {if (o>0) printf "%.1f×", r/o; else print "n/a"}'; }
ge() { awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN {print (b > 0 && a / b >= k) ? "met" : "missed"}'; }

# Page cache at rest: a day's calls on a freshly mounted device (unthrottled: what stays
# resident does not depend on how fast it came), then the resident bytes of the files.
cat > "$work/day.sh" <<'EOF'
# day.sh DIR DATADIR CALLS NSPREFIX: ADD, CHECK, DEL of bridge → portmap, a new container a round.
dir=$1 data=$2 calls=$3 pre=$4 n=0 err=0 i=0
export CNI_IFNAME=eth0 CNI_PATH=$dir
br='{"cniVersion":"1.0.0","name":"day","type":"bridge","bridge":"cday","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.238.0.0/16"}]],"dataDir":"'$data'"}'
pm='{"cniVersion":"1.0.0","name":"day","type":"portmap","capabilities":{"portMappings":true},"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}'
c() { # VERB PLUGIN CONF: one call, its result in r
    r=$(CNI_COMMAND=$1 "$dir/$2" <<<"$3") || { err=$((err + 1)); echo "day $1 $2: $r" >&2; }
    n=$((n + 1))
}
while [ $n -lt "$calls" ]; do
    i=$((i + 1)); ns=$pre-$i; ip netns add "$ns"
    export CNI_CONTAINERID=day$i CNI_NETNS=/run/netns/$ns
    c ADD bridge "$br}"; r1=$r
    c ADD portmap "$pm,\"prevResult\":$r1}"; r2=$r
    c CHECK bridge "$br,\"prevResult\":$r2}"
    c CHECK portmap "$pm,\"prevResult\":$r2}"
    c DEL portmap "$pm,\"prevResult\":$r2}"
    c DEL bridge "$br,\"prevResult\":$r2}"
    ip netns del "$ns"
done
echo "$n $err"
EOF
declare -A res=() dayerr=() daycalls=()
for s in ref ours; do
    cold
    newns; dn=$NS; mkdir -p "$work/day-$s"
    read -r daycalls[$s] dayerr[$s] < <(nsenter --net="/run/netns/$dn" bash "$work/day.sh" "$mnt/$s" "$work/day-$s" "$calls" "cnibox-cold-$$-day-$s")
    res[$s]=$(resident $(files "$s"))
done

vr=$(med "${vers[ref]}"); vo=$(med "${vers[ours]}")
ar=$(med "${adds[ref]}"); ao=$(med "${adds[ours]}")
dr=$(med "${dels[ref]}"); do_=$(med "${dels[ours]}")
sr=0; for f in $(files ref); do sr=$((sr + $(stat -c %s "$f"))); done; so=$(stat -c %s "$mnt/ours/cnibox")
echo "## Cold starts on SD-card-class storage (issue 37), from this run"
echo
echo "benches/cold.sh: the plugins on a loop device (ext4, direct I/O) throttled to SD-card class by cgroup v1 blkio, read_bps_device $bps B/s ($(awk -v b="$bps" 'BEGIN {printf "%.0f", b/1048576}') MiB/s) and read_iops_device $iops, for the sample's processes only (reading v1.9.1's bridge through it: $read_mbs MB/s); the file system unmounted and mounted again before every sample (nothing of the plugins resident, checked with fincore), no drop_caches. Chain: bridge (ipMasq, host-local) → portmap, ADD then DEL (benches/chain.sh, iptables on both sides, as libcni runs a conflist); medians of $reps samples, the sides in turn; load $(cut -d' ' -f1-3 /proc/loadavg)."
echo "Page cache at rest: resident bytes of the plugin files (fincore) after ${daycalls[ours]} calls for cnibox and ${daycalls[ref]} for v1.9.1 (rounds of bridge ADD, portmap ADD, bridge CHECK, portmap CHECK, portmap DEL, bridge DEL; the device mounted afresh, unthrottled)."
echo
echo "| cold start | reference v1.9.1 | cnibox | reference/cnibox |"
echo "|---|---|---|---|"
echo "| cold bridge VERSION exec (ms) | $(ms "$vr") | $(ms "$vo") | $(ratio "$vr" "$vo") |"
echo "| cold chain ADD, bridge+host-local → portmap (ms) [errors] | $(ms "$ar") [${errs[ref]}] | $(ms "$ao") [${errs[ours]}] | $(ratio "$ar" "$ao") |"
echo "| chain DEL right after the cold ADD (same sample, no remount between) (ms) | $(ms "$dr") | $(ms "$do_") | $(ratio "$dr" "$do_") |"
echo "| bytes read from the device at most (the files: v1.9.1 bridge, host-local, portmap; cnibox) | $sr | $so | $(ratio "$sr" "$so") |"
echo "| page cache at rest after a day's calls (KiB resident) [errors] | $((res[ref] / 1024)) [${dayerr[ref]}] | $((res[ours] / 1024)) [${dayerr[ours]}] | $(ratio "${res[ref]}" "${res[ours]}") |"
echo
echo "target: | cold chain ADD (bridge+host-local → portmap) ≥ 5× faster than v1.9.1 cold, SD-card class ($(awk -v b="$bps" 'BEGIN {printf "%.0f", b/1048576}') MiB/s, $iops IOPS) | $(ratio "$ar" "$ao") | $(ge "$ar" "$ao" 5) |"
[ "${errs[ref]}${errs[ours]}${dayerr[ref]}${dayerr[ours]}" = 0000 ] || echo "cold.sh: errors: ref ${errs[ref]}, cnibox ${errs[ours]}, day ref ${dayerr[ref]}, day cnibox ${dayerr[ours]}" >&2
