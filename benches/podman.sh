#!/usr/bin/env bash
# `podman run --rm` as a podman user sees it (issue 28 item 2): one container on podman's
# default network with a hostPort, start to exit and removal, on five sides taking turns sample
# by sample, each with its own private store, containers.conf and node namespace:
#   cnibox     Debian 12's podman 4.3, CNI backend, cnibox's applets on podman's own default
#              network (which names no firewall backend: iptables)
#   cnft       the same with that network written out as a conflist whose bridge (ipMasq),
#              portmap and firewall name the nftables backend: cnibox on nftables
#   ref        Debian 12's podman 4.3, CNI backend, the reference plugins: upstream v1.9.1
#              (REF_DIR, default /var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni,
#              fetched by `.ci/fetch-unstable containernetworking-plugins`)
#   ref11      the same with Debian 12's v1.1.1 (/usr/lib/cni), an extra column
#   nv4        Debian 12's podman 4.3, netavark backend: /usr/lib/podman/netavark, 1.4 (iptables)
#   nv17       Debian unstable's podman 5.8, netavark 1.17 on its nftables driver, run from the
#              unstable root of benches/peers-root.sh (NETAVARK_ROOT, default
#              /var/cache/cnibox-bench/unstable)
#              in a mount namespace of its own per sample (nothing is mounted on the host)
# Every network call goes through the timing shim (benches/cni-shim.c): in front of each plugin
# in the CNI sides' plugin directory, in front of netavark in the netavark sides'
# helper_binaries_dir, so each sample also yields the time podman waited for its network.
#   benches/podman.sh CNIBOX_BINARY [--quick]    (root; podman, busybox-static, gcc)
# Prints a markdown paragraph and table (medians; ratios within this run) on stdout, what is
# left out and why on stderr. The container is busybox `true` from a --rootfs (no image pull),
# so a sample is podman's own work plus the network's setup and teardown. It reports; it never
# fails on numbers. PODMAN_REPS overrides the number of samples (15, --quick 5).
set -euo pipefail
bin=${1:?usage: podman.sh CNIBOX_BINARY [--quick]}; shift
reps=15; [ "${1:-}" = --quick ] && reps=5
reps=${PODMAN_REPS:-$reps}
here=$(cd "$(dirname "$0")" && pwd)
for t in podman gcc nsenter; do command -v $t >/dev/null || { echo "podman.sh: $t missing: no podman rows" >&2; exit 0; }; done
[ -x /bin/busybox ] || { echo "podman.sh: /bin/busybox (busybox-static) missing: no podman rows" >&2; exit 0; }
nvroot=${NETAVARK_ROOT:-/var/cache/cnibox-bench/unstable}
refdir=${REF_DIR:-/var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni}
sides="cnibox cnft"; notes=()
if [ -x "$refdir/bridge" ]; then sides+=" ref"; else notes+=("no reference v1.9.1 in $refdir (.ci/fetch-unstable containernetworking-plugins)"); fi
if [ -x /usr/lib/cni/bridge ]; then sides+=" ref11"; else notes+=("no reference v1.1.1 (Debian 12's containernetworking-plugins)"); fi
if [ -x /usr/lib/podman/netavark ]; then sides+=" nv4"; else notes+=("no netavark 1.4 (Debian 12's netavark package)"); fi
if [ -x "$nvroot/usr/bin/podman" ] && [ -x "$nvroot/usr/lib/podman/netavark" ]; then
    sides+=" nv17"
else
    notes+=("no podman 5.8 with netavark 1.17 (a Debian unstable root with podman in $nvroot: benches/peers-root.sh makes it)")
fi
work=$(mktemp -d /tmp/cnibox-podman-bench.XXXXXX)
declare -A node=()
# One `podman run` or other podman command of a side, in its node namespace; prints the time
# from podman's exec to its exit (µs) on fd 3. nv17 runs in a mount namespace of its own where
# unstable's root is made a mount point (runc makes / a slave mount) and gets /proc, a sysfs of the
# node namespace, the host's cgroup hierarchy, /dev, a /run of the side's own (its work
# directory's run/: podman's and netavark's state, kept from sample to sample as a host's /run),
# /run/netns (rbind: nsfs mounts and all) and the work directory at the same path (on a tmpfs
# over the root's /tmp), so nothing is mounted on the host and nothing is left in the root. The
# mounts are made before the clock starts; chroot's exec (~1 ms) is inside the time.
pm() { # side podman-args…
    local s=$1 t=$work/$1 root=""; shift
    [ "$s" = nv17 ] && root=$nvroot
    CONTAINERS_CONF=$t/containers.conf CONTAINERS_STORAGE_CONF=$t/storage.conf CNIBOX_STATE_DIR=$t/state HOME=$t \
        nsenter --net="/run/netns/${node[$s]}" unshare --mount --propagation slave bash -c '
        r=$1 w=$2 t=$3; shift 3
        if [ -n "$r" ]; then
            mkdir -p "$t/run/netns" && mount --bind "$r" "$r" && mount --bind /proc "$r/proc" &&
                mount -t sysfs sysfs "$r/sys" && mount --rbind /sys/fs/cgroup "$r/sys/fs/cgroup" && mount --rbind /dev "$r/dev" &&
                mount --bind "$t/run" "$r/run" && mount --rbind /run/netns "$r/run/netns" &&
                mount -t tmpfs tmpfs "$r/tmp" && mkdir -p "$r$w" && mount --rbind "$w" "$r$w" || exit 125
            set -- chroot "$r" podman "$@"
        else
            set -- podman "$@"
        fi
        t0=${EPOCHREALTIME/./}; rc=0
        "$@" || rc=$?
        echo $(( ${EPOCHREALTIME/./} - t0 )) >&3
        exit $rc' pm "$root" "$work" "$t" --root "$t/root" --runroot "$t/runroot" "$@"
}
cleanup() {
    local s
    for s in "${!node[@]}"; do
        pm "$s" rm -af >/dev/null 2>&1 3>/dev/null || true
        ip netns del "${node[$s]}" 2>/dev/null || true
    done
    # Processes this run started that outlived podman (conmon, a cleanup podman): their command
    # lines name the work directory.
    for p in /proc/[0-9]*; do grep -qF "$work" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null || true; done
    awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf "$work"
}
trap cleanup EXIT
for n in "${notes[@]}"; do echo "podman.sh: $n" >&2; done
mkdir -p "$work/rootfs/bin"; cp /bin/busybox "$work/rootfs/bin/"; ln -s busybox "$work/rootfs/bin/true"
gcc -static -O2 -o "$work/shim" "$here/cni-shim.c"
declare -A ver=()
for s in $sides; do
    t=$work/$s; mkdir -p "$t"/{bin,real,net.d,state}
    backend=cni; fw=""
    case $s in
    cnibox|cnft) cp "$bin" "$t/cnibox"; for a in bridge host-local portmap firewall tuning loopback; do ln -s ../cnibox "$t/real/$a"; done ;;
    ref|ref11) d=$refdir; [ "$s" = ref11 ] && d=/usr/lib/cni
        for a in bridge host-local portmap firewall tuning loopback; do ln -s "$d/$a" "$t/real/$a"; done ;;
    nv4|nv17) backend=netavark; ln -s /usr/lib/podman/netavark "$t/real/netavark" ;;
    esac
    [ "$s" = nv17 ] && fw='firewall_driver = "nftables"'
    # podman 4.3's default network as it builds it in memory (libnetwork/cni), with the
    # nftables backends named: a file of that name replaces the built-in one.
    [ "$s" = cnft ] && cat > "$t/net.d/87-podman-bridge.conflist" <<JSON
{"cniVersion":"0.4.0","name":"podman","plugins":[
 {"type":"bridge","bridge":"cni-podman0","isGateway":true,"ipMasq":true,"ipMasqBackend":"nftables","hairpinMode":true,
  "ipam":{"type":"host-local","routes":[{"dst":"0.0.0.0/0"}],"ranges":[[{"subnet":"10.88.0.0/16","gateway":"10.88.0.1"}]]}},
 {"type":"portmap","capabilities":{"portMappings":true},"backend":"nftables"},
 {"type":"firewall","backend":"nftables"},
 {"type":"tuning"}]}
JSON
    for a in "$t"/real/*; do cp "$work/shim" "$t/bin/${a##*/}"; done
    # The shims come first where podman looks for netavark (helper_binaries_dir) and are the
    # only plugin directory; conmon passes CONTAINERS_CONF on to the `podman container cleanup`
    # it runs when the container exits, so a teardown from there goes through the shim too.
    cat > "$t/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[network]
network_backend = "$backend"
cni_plugin_dirs = ["$t/bin"]
network_config_dir = "$t/net.d"
$fw
[engine]
conmon_env_vars = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CNIBOX_STATE_DIR=$t/state", "CONTAINERS_CONF=$t/containers.conf", "CONTAINERS_STORAGE_CONF=$t/storage.conf"]
helper_binaries_dir = ["$t/bin", "/usr/local/libexec/podman", "/usr/local/lib/podman", "/usr/libexec/podman", "/usr/lib/podman"]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$t/events.log"
lock_type = "file"
runtime = "runc"
tmp_dir = "$t/libpod-tmp"
CONF
    printf '[storage]\ndriver = "vfs"\nrunroot = "%s/runroot"\ngraphroot = "%s/root"\n' "$t" "$t" > "$t/storage.conf"
    node[$s]=cnibox-podman-bench-$$-$s; ip netns add "${node[$s]}"; ip -n "${node[$s]}" link set lo up
    ver[$s]=$(pm "$s" --version 3>/dev/null | awk '{print $3}')
    # Warm-up (creates the bridge and the firewall's tables); a side that cannot run is left out.
    if ! pm "$s" run --rm --network podman -p 8080:80 --rootfs "$work/rootfs" true >/dev/null 2>"$work/err" 3>/dev/null; then
        echo "podman.sh: $s left out, its warm-up failed: $(head -3 "$work/err")" >&2
        notes+=("$s left out: its warm-up failed ($(head -1 "$work/err" | cut -c1-160))"); sides=${sides/$s/}
    fi
done
# Which firewall each side's network used, from what it left in its node namespace: an
# nftables table of its own (iptables-nft's ip/ip6 filter, nat, … tables are not counted), or
# iptables chains (CNI-…, NETAVARK…).
declare -A fwl=()
for s in $sides; do
    f=()
    l=$(ip netns exec "${node[$s]}" nft list tables 2>/dev/null || true)
    grep -qvE '^$| (filter|nat|mangle|raw|security)$' <<<"$l" && f+=(nftables)
    l=$(ip netns exec "${node[$s]}" iptables-save 2>/dev/null || true)
    grep -qE '^:(CNI|NETAVARK)' <<<"$l" && f+=(iptables)
    fwl[$s]=$(IFS=+; echo "${f[*]:-none}")
done
declare -A ts=() nets=() calls=() errs=()
# podman 4.3 also runs VERSION on every plugin of a network it loads from a file (the nftables
# side's), before ADD and before DEL: in the run's time, not in the network's.
logged() { # side → "sum_ns calls" of the shim's log since it was last emptied
    awk '$1 ~ /^(ADD|DEL|setup|teardown)$/ {s += $3; n++} END {printf "%d %d\n", s, n}' "$work/$1/cni-times.log" 2>/dev/null || echo "0 0"
}
for i in $(seq "$reps"); do
    for s in $sides; do
        # The log since this side's previous sample belongs to it (a cleanup process conmon
        # started may finish the teardown after `podman run` returned).
        if [ "$i" -gt 1 ]; then read -r n c < <(logged "$s"); nets[$s]+="$n "; calls[$s]+="$c "; fi
        : > "$work/$s/cni-times.log"; : > "$work/t"
        if ! pm "$s" run --rm --network podman -p 8080:80 --rootfs "$work/rootfs" true >/dev/null 2>"$work/err" 3>"$work/t"; then
            errs[$s]=$(( ${errs[$s]:-0} + 1 )); head -2 "$work/err" >&2
        fi
        ts[$s]+="$(<"$work/t") "
    done
done
sleep 0.5   # a cleanup process of the last samples
for s in $sides; do read -r n c < <(logged "$s"); nets[$s]+="$n "; calls[$s]+="$c "; done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] + 0}'; }
declare -A label=([cnibox]="cnibox (CNI)" [cnft]="cnibox (CNI), nftables" [ref]="reference v1.9.1 (CNI)" [ref11]="reference v1.1.1 (CNI)" [nv4]="netavark 1.4" [nv17]="netavark 1.17")
echo "\`podman run --rm --network podman -p 8080:80\` of busybox \`true\` from a --rootfs, start to exit and removal: median of $reps samples, the sides in turn, each with its own store and node namespace (benches/podman.sh); load $(cut -d' ' -f1-3 /proc/loadavg)."
echo "network = the time podman waited for its network calls per run (CNI ADD + DEL of every plugin, or netavark setup + teardown), timed around each call by benches/cni-shim.c; share = network / run; side/cnibox: against cnibox on the same firewall (iptables: podman's own default network; nftables: that network with the nftables backends named), > 1: cnibox's side is faster.$( [ ${#notes[@]} -gt 0 ] && printf ' Not measured: %s.' "$(IFS=';'; echo "${notes[*]}")")"
echo
echo "| podman run --rm | podman | firewall | run (ms) | network (ms) | share | calls per run | run: side/cnibox | network: side/cnibox | errors |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for s in cnibox cnft ref ref11 nv4 nv17; do
    [[ " $sides " == *" $s "* ]] || continue
    c=cnibox; [ "$s" = nv17 ] && c=cnft
    mo=0; no=0
    [[ " $sides " == *" $c "* ]] && { mo=$(med "${ts[$c]}"); no=$(med "${nets[$c]}"); }
    awk -v l="${label[$s]}" -v v="${ver[$s]}" -v fw="${fwl[$s]}" -v r="$(med "${ts[$s]}")" -v n="$(med "${nets[$s]}")" -v c="$(med "${calls[$s]}")" \
        -v e="${errs[$s]:-0}" -v mo="$mo" -v no="$no" -v self="$( [ "$s" = cnibox ] || [ "$s" = cnft ] && echo 1 || echo 0)" 'BEGIN {
        rr = (self || mo == 0) ? "" : sprintf("%.2f×", r / mo); nr = (self || no == 0) ? "" : sprintf("%.2f×", n / no)
        printf "| %s | %s | %s | %.1f | %.1f | %.0f %% | %d | %s | %s | %d |\n", l, v, fw, r / 1000, n / 1e6, r ? n / 1000 / r * 100 : 0, c, rr, nr, e }'
done
