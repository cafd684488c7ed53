#!/usr/bin/env bash
# `podman run --rm` as a podman user sees it (issue 28 item 2): one container on podman's
# default network with a hostPort, start to exit and removal, on the CNI backend with cnibox,
# on the CNI backend with the reference plugins (/usr/lib/cni) and on netavark (Debian 12's
# podman 4.3 runs /usr/lib/podman/netavark, 1.4), the sides taking turns sample by sample, each
# with its own private store, configuration and node namespace. Prints medians (ms).
#   benches/podman.sh CNIBOX_BINARY [--quick]    (root; podman, busybox-static)
# The container is busybox `true` from a --rootfs (no image pull), so the sample is podman's
# own work plus the network's ADD and DEL. It reports; it never fails on numbers.
set -euo pipefail
bin=${1:?usage: podman.sh CNIBOX_BINARY [--quick]}; shift
reps=15; [ "${1:-}" = --quick ] && reps=5
command -v podman >/dev/null || { echo "podman.sh: podman missing: no podman rows" >&2; exit 0; }
[ -x /bin/busybox ] || { echo "podman.sh: /bin/busybox (busybox-static) missing: no podman rows" >&2; exit 0; }
sides="cnibox ref"; [ -x /usr/lib/podman/netavark ] && sides+=" netavark"
work=$(mktemp -d /tmp/cnibox-podman-bench.XXXXXX)
declare -A node=()
pm() { # side podman-args…
    local s=$1 t=$work/$1; shift
    CONTAINERS_CONF=$t/containers.conf CONTAINERS_STORAGE_CONF=$t/storage.conf CNIBOX_STATE_DIR=$t/state HOME=$t \
        nsenter --net="/run/netns/${node[$s]}" podman --root "$t/root" --runroot "$t/runroot" "$@"
}
cleanup() {
    local s
    for s in "${!node[@]}"; do
        pm "$s" rm -af >/dev/null 2>&1 || true
        ip netns del "${node[$s]}" 2>/dev/null || true
    done
    awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/rootfs/bin"; cp /bin/busybox "$work/rootfs/bin/"; ln -s busybox "$work/rootfs/bin/true"
for s in $sides; do
    t=$work/$s; mkdir -p "$t"/{cni-bin,net.d,state}
    backend=cni; dirs="[\"$t/cni-bin\"]"
    case $s in
    cnibox) cp "$bin" "$t/cnibox"; for a in bridge host-local portmap firewall tuning loopback; do ln -s ../cnibox "$t/cni-bin/$a"; done ;;
    ref) dirs='["/usr/lib/cni"]' ;;
    netavark) backend=netavark ;;
    esac
    cat > "$t/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[network]
network_backend = "$backend"
cni_plugin_dirs = $dirs
network_config_dir = "$t/net.d"
[engine]
conmon_env_vars = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CNIBOX_STATE_DIR=$t/state"]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$t/events.log"
runtime = "runc"
lock_type = "file"
tmp_dir = "$t/libpod-tmp"
CONF
    printf '[storage]\ndriver = "vfs"\nrunroot = "%s/runroot"\ngraphroot = "%s/root"\n' "$t" "$t" > "$t/storage.conf"
    node[$s]=cnibox-podman-bench-$$-$s; ip netns add "${node[$s]}"; ip -n "${node[$s]}" link set lo up
    pm "$s" run --rm --network podman -p 8080:80 --rootfs "$work/rootfs" true >/dev/null   # warm-up (creates the bridge, tables)
done
declare -A ts=() errs=()
for _ in $(seq "$reps"); do
    for s in $sides; do
        t0=${EPOCHREALTIME/./}
        pm "$s" run --rm --network podman -p 8080:80 --rootfs "$work/rootfs" true >/dev/null 2>"$work/err" || { errs[$s]=$(( ${errs[$s]:-0} + 1 )); head -2 "$work/err" >&2; }
        ts[$s]+="$(( ${EPOCHREALTIME/./} - t0 )) "
    done
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)] / 1000}'; }
echo "podman $(podman --version | awk '{print $3}'), \`podman run --rm -p 8080:80\` on the default network, median of $reps (ms) [errors]; load $(cut -d' ' -f1-3 /proc/loadavg)"
for s in $sides; do echo "| podman run --rm, $s | $(med "${ts[$s]}") [${errs[$s]:-0}] |"; done
