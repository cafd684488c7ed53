#!/usr/bin/env bash
# Pods per second as a kubelet sees them (issue 28 item 2): a private containerd per side
# (cnibox, the reference plugins: upstream v1.9.1 in REF_DIR, default
# /var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni, .ci/fetch-unstable), each in a node namespace of its own, driven
# over CRI by benches/cri-bench.py (the end-to-end test's client): COUNT pod sandboxes with a
# hostPort and the bandwidth annotations, created, stopped and removed one at a time and 10 at
# a time, the sides taking turns round by round. Prints pods/s, RunPodSandbox's median and the
# part of RunPodSandbox spent in CNI ADDs: every plugin in bin_dir is a timing shim
# (benches/cni-shim.c, a static C program that spawns the real plugin and logs its time; a
# plugin a plugin runs, the reference's host-local, is in its caller's time only), on both
# sides, so both pay the shim's exec (~0.1-0.2 ms a plugin call) in pods/s. The output is a
# markdown paragraph and table (compare.sh places it in BENCHMARKS.md), notes on stderr.
#   benches/cri.sh CNIBOX_BINARY [--quick]      (root; containerd, ctr, runc, gcc, python3 grpcio)
# CRI_PODS (50) and CRI_ROUNDS (3, --quick 1) override the pods per round and the rounds.
# The network is the one the e2e test gives containerd (bridge with ipMasq and hairpinMode +
# host-local, portmap, bandwidth, firewall). It reports; it never fails on numbers.
set -euo pipefail
bin=${1:?usage: cri.sh CNIBOX_BINARY [--quick]}; shift
rounds=3; count=${CRI_PODS:-50}
[ "${1:-}" = --quick ] && rounds=1
rounds=${CRI_ROUNDS:-$rounds}
here=$(cd "$(dirname "$0")" && pwd)
e2e=$here/../tests/e2e/cri
for t in containerd ctr runc gcc python3 nsenter; do
    command -v $t >/dev/null || { echo "cri.sh: $t missing: no CRI rows" >&2; exit 0; }
done
python3 -c 'import grpc, grpc_tools' 2>/dev/null || { echo "cri.sh: python3 grpcio/grpcio-tools missing: no CRI rows" >&2; exit 0; }
work=$(mktemp -d /tmp/cnibox-cri-bench.XXXXXX)
image=cnibox.bench/pause:1
declare -A pid=() node=()
cleanup() {
    local s p
    for s in "${!pid[@]}"; do
        # Pods first (their DELs go through the plugins), then containerd, by its pid.
        for p in $(CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$work/$s/containerd.sock" list 2>/dev/null |
            python3 -c 'import sys, json; print(" ".join(i["id"] for i in json.load(sys.stdin)["items"]))' 2>/dev/null); do
            CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$work/$s/containerd.sock" stop "$p" >/dev/null 2>&1 || true
            CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$work/$s/containerd.sock" remove "$p" >/dev/null 2>&1 || true
        done
        kill "${pid[$s]}" 2>/dev/null || true; wait "${pid[$s]}" 2>/dev/null || true
    done
    # Shims this run started (their command line names its sockets) that outlived containerd.
    for p in /proc/[0-9]*; do
        grep -qF "$work" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null || true
    done
    awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
    for s in "${!node[@]}"; do ip netns del "${node[$s]}" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/py"
gcc -static -Os -o "$work/pause" "$e2e/pause.c"
gcc -static -O2 -o "$work/shim" "$here/cni-shim.c"
CRI_PY_OUT=$work/py python3 "$e2e/cri.py" build-image "$work/pause" "$image" "$work/pause.tar" >/dev/null

start() { # side plugin-dir n
    local s=$1 src=$2 n=$3 t=$work/$1 a
    mkdir -p "$t"/{bin,real,net.d,root,state,opt,ipam}
    [ "$s" = ours ] && cp "$bin" "$t/cnibox"
    for a in bridge host-local portmap bandwidth firewall loopback; do
        if [ "$s" = ours ]; then ln -s ../cnibox "$t/real/$a"; else ln -s "$src/$a" "$t/real/$a"; fi
        cp "$work/shim" "$t/bin/$a"
    done
    # The e2e test's containerd config, the one copy (its @DIR@ and @IMAGE@ filled in here).
    sed -e "s|@DIR@|$t|g" -e "s|@IMAGE@|$image|g" "$here/../tests/e2e/cri/containerd.toml" > "$t/config.toml"
    cat > "$t/net.d/10-k8s.conflist" <<JSON
{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[
 {"type":"bridge","bridge":"cni-bench","isGateway":true,"ipMasq":true,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.$n.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$t/ipam"}},
 {"type":"portmap","capabilities":{"portMappings":true}},
 {"type":"bandwidth","capabilities":{"bandwidth":true}},
 {"type":"firewall"}]}
JSON
    node[$s]=cnibox-cri-bench-$$-$s; ip netns add "${node[$s]}"; ip -n "${node[$s]}" link set lo up
    nsenter --net="/run/netns/${node[$s]}" containerd --config "$t/config.toml" > "$t/containerd.log" 2>&1 &
    pid[$s]=$!
    for _ in $(seq 600); do [ -S "$t/containerd.sock" ] && break; sleep 0.1; done
    CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$t/containerd.sock" version >/dev/null
    ctr -a "$t/containerd.sock" -n k8s.io images import --snapshotter native "$work/pause.tar" >/dev/null
}
start ours "" 236
refdir=${REF_DIR:-/var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni}
[ -x "$refdir/bridge" ] || { echo "cri.sh: no reference v1.9.1 in $refdir (.ci/fetch-unstable containernetworking-plugins)" >&2; exit 0; }
start ref "$refdir" 237

# stat FILE LOG → "wall_ns run_median_ns errors cni_add_share"
stat() { python3 -c 'import sys, json, statistics
d = json.load(open(sys.argv[1]))
for e in d["errors"][:3]: print("cri-bench:", e, file=sys.stderr)
add = sum(int(l.split()[2]) for l in open(sys.argv[2]) if l.startswith("ADD "))
print(d["wall_ns"], int(statistics.median(d["run_ns"] or [0])), len(d["errors"]), add / max(1, sum(d["run_ns"])))' "$1" "$2"; }
declare -A walls=() runs=() errs=() cnis=()
for r in $(seq "$rounds"); do
    for par in 1 10; do
        for s in ours ref; do
            : > "$work/$s/cni-times.log"
            CRI_PY_OUT=$work/py python3 "$here/cri-bench.py" "$work/$s/containerd.sock" "b$r-$par" "$count" "$par" 30000 > "$work/out"
            read -r w m e c < <(stat "$work/out" "$work/$s/cni-times.log")
            walls[$s$par]+="$w "; runs[$s$par]+="$m "; errs[$s$par]=$(( ${errs[$s$par]:-0} + e )); cnis[$s$par]+="$c "
        done
    done
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "Pod sandboxes through containerd's CRI, as a kubelet drives them (containerd $(containerd --version | awk '{print $3}'), benches/cri.sh): $count pods with a hostPort and the bandwidth annotations, each created, stopped and removed, one at a time and 10 at a time, on bridge (ipMasq, hairpinMode) + host-local, portmap, bandwidth, firewall; median of $rounds round(s), the sides in turn, each with its own containerd and node namespace; load $(cut -d' ' -f1-3 /proc/loadavg)."
echo "part in CNI = time in the plugins' ADDs (timing shim, benches/cni-shim.c) / time in RunPodSandbox; reference/cnibox > 1: cnibox is faster."
echo
echo "| CRI | reference v1.9.1 | cnibox | reference/cnibox |"
echo "|---|---|---|---|"
for par in 1 10; do
    wo=$(med "${walls[ours$par]}"); wr=$(med "${walls[ref$par]}")
    ro=$(med "${runs[ours$par]}"); rr=$(med "${runs[ref$par]}")
    co=$(med "${cnis[ours$par]}"); cr=$(med "${cnis[ref$par]}")
    awk -v c="$count" -v p="$par" -v wo="$wo" -v wr="$wr" -v ro="$ro" -v rr="$rr" -v eo="${errs[ours$par]}" -v er="${errs[ref$par]}" -v co="$co" -v cr="$cr" 'BEGIN {
        at = (p == 1 ? "one" : p) " at a time"
        printf "| pods/s, %s [errors] | %.1f [%d] | %.1f [%d] | %.2f× |\n", at, c / (wr / 1e9), er, c / (wo / 1e9), eo, wr / wo
        printf "| RunPodSandbox median, %s (ms) | %.1f | %.1f | %.2f× |\n", at, rr / 1e6, ro / 1e6, rr / ro
        printf "| RunPodSandbox: part in CNI ADDs, %s | %.0f %% | %.0f %% | |\n", at, cr * 100, co * 100 }'
done
