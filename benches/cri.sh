#!/usr/bin/env bash
# Pods per second as a kubelet sees them (issue 28 item 2, issue 37 item 3): a private containerd
# per side (cnibox; the reference plugins: upstream v1.9.1 in REF_DIR, default
# /var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni, .ci/fetch-unstable, and
# Debian 12's v1.1.1 in /usr/lib/cni, left out when missing), each in a node namespace of its
# own, for each containerd: Debian 12's 1.6 (/usr/bin, config version 2:
# tests/e2e/cri/containerd.toml) and 2.1 (Debian unstable's, unpacked by `.ci/fetch-unstable
# containerd` in CNIBOX_UNSTABLE, default /var/cache/cnibox-unstable; config version 3:
# tests/e2e/cri/containerd-v3.toml; left out with a note when missing), one containerd version
# after the other. Driven over CRI by benches/cri-bench.py (the end-to-end test's client):
# COUNT pod sandboxes with a hostPort and the bandwidth annotations, created, stopped and
# removed one at a time and 10 at a time, the sides taking turns round by round. Prints pods/s,
# RunPodSandbox's median, the part of it spent in CNI ADDs and the rest (containerd's own work:
# sandbox container, shim, mounts): every plugin in bin_dir is a timing shim
# (benches/cni-shim.c, a static C program that spawns the real plugin and logs its time; a
# plugin a plugin runs, the reference's host-local, is in its caller's time only), on all
# sides, so all pay the shim's exec (~0.1-0.2 ms a plugin call) in pods/s. The output is a
# markdown paragraph and table (compare.sh places it in BENCHMARKS.md; its lines starting
# "target: " are rows of the targets table), notes on stderr. With cgroups (v2, or v1's cpuacct)
# one more round of each kind follows the timed ones, for the CPU a pod alone: the whole
# machine's busy time (/proc/stat) and the plugins' with all they start, also what outlives them
# (the shims move themselves into the side's plugin cgroup for that round only: the move costs
# an RCU grace period on cgroup v1), and from them what pods/s 10 at a time could be on these
# cores were cnibox's plugins free of CPU.
#   benches/cri.sh CNIBOX_BINARY [--quick]      (root; containerd, ctr, runc, gcc, python3 grpcio)
# CRI_PODS (50) and CRI_ROUNDS (3, --quick 1) override the pods per round and the rounds;
# CRI_CONTAINERDS ("1.6 2.1") picks the containerds.
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
# CPU accounting: a cgroup per side for its containerd (and all it starts) and one for its
# plugins (the timing shim moves itself there: the plugins with everything they start, also
# what outlives them). cgroup v2's cpu.stat, else v1's cpuacct; none: no CPU rows.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cgbase=/sys/fs/cgroup/cnibox-cri-$$
elif [ -d /sys/fs/cgroup/cpuacct ]; then cgbase=/sys/fs/cgroup/cpuacct/cnibox-cri-$$
else cgbase=; echo "cri.sh: no cgroup CPU accounting: no CPU rows" >&2; fi
[ -n "$cgbase" ] && { mkdir -p "$cgbase" || cgbase=; }
# cg_ns DIR → CPU time of cgroup DIR so far, in ns
cg_ns() { if [ -f "$1/cpu.stat" ]; then awk '$1 == "usage_usec" {print $2 * 1000}' "$1/cpu.stat"; else cat "$1/cpuacct.usage"; fi; }
image=cnibox.bench/pause:1
declare -A pid=() node=()
# stop SIDE: its pods first (their DELs go through the plugins), then its containerd, by its
# pid, then the shims it started (their command line names its directory) that outlived it.
stop() {
    local s=$1 p d=$work/$1
    for p in $(CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$d/containerd.sock" list 2>/dev/null |
        python3 -c 'import sys, json; print(" ".join(i["id"] for i in json.load(sys.stdin)["items"]))' 2>/dev/null); do
        CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$d/containerd.sock" stop "$p" >/dev/null 2>&1 || true
        CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$d/containerd.sock" remove "$p" >/dev/null 2>&1 || true
    done
    kill "${pid[$s]}" 2>/dev/null || true; wait "${pid[$s]}" 2>/dev/null || true
    unset "pid[$s]"
    for p in /proc/[0-9]*; do
        grep -qF "$d/" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null || true
    done
    awk -v w="$d/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
    ip netns del "${node[$s]}" 2>/dev/null || true; unset "node[$s]"
}
cleanup() {
    local s p
    for s in "${!pid[@]}"; do stop "$s"; done
    for p in /proc/[0-9]*; do
        grep -qF "$work" "$p/cmdline" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null || true
    done
    awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" || true; done
    for s in "${!node[@]}"; do ip netns del "${node[$s]}" 2>/dev/null || true; done
    [ -n "$cgbase" ] && { rmdir "$cgbase"/* "$cgbase" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/py"
gcc -static -Os -o "$work/pause" "$e2e/pause.c"
gcc -static -O2 -o "$work/shim" "$here/cni-shim.c"
CRI_PY_OUT=$work/py python3 "$e2e/cri.py" build-image "$work/pause" "$image" "$work/pause.tar" >/dev/null

refdir=${REF_DIR:-/var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni}
[ -x "$refdir/bridge" ] || { echo "cri.sh: no reference v1.9.1 in $refdir (.ci/fetch-unstable containernetworking-plugins)" >&2; exit 0; }
ref11=/usr/lib/cni
sides="ours ref"
[ -x "$ref11/bridge" ] && sides+=" r11" || echo "cri.sh: no v1.1.1 in $ref11: no v1.1.1 column" >&2
cds=()
for cv in ${CRI_CONTAINERDS:-1.6 2.1}; do
    case $cv in
    1.6) cds+=("1.6:/usr/bin") ;;
    2.1) d=${CNIBOX_UNSTABLE:-/var/cache/cnibox-unstable}/containerd/usr/bin
        if [ -x "$d/containerd" ]; then cds+=("2.1:$d"); else echo "cri.sh: no containerd 2.1 in $d (.ci/fetch-unstable containerd): no containerd 2.1 rows" >&2; fi ;;
    esac
done

start() { # side plugin-dir n containerd-bin-dir config-template
    local s=$1 src=$2 n=$3 cbin=$4 tpl=$5 t=$work/$1 a
    mkdir -p "$t"/{bin,real,net.d,root,state,opt,ipam}
    [ "$src" = ours ] && cp "$bin" "$t/cnibox"
    for a in bridge host-local portmap bandwidth firewall loopback; do
        if [ "$src" = ours ]; then ln -s ../cnibox "$t/real/$a"; else ln -s "$src/$a" "$t/real/$a"; fi
        cp "$work/shim" "$t/bin/$a"
    done
    [ -n "$cgbase" ] && mkdir -p "$cgbase/$s" "$cgbase/$s-plugins"
    # The e2e test's containerd config, the one copy (its @DIR@ and @IMAGE@ filled in here).
    sed -e "s|@DIR@|$t|g" -e "s|@IMAGE@|$image|g" "$tpl" > "$t/config.toml"
    cat > "$t/net.d/10-k8s.conflist" <<JSON
{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[
 {"type":"bridge","bridge":"cni-bench","isGateway":true,"ipMasq":true,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.$n.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$t/ipam"}},
 {"type":"portmap","capabilities":{"portMappings":true}},
 {"type":"bandwidth","capabilities":{"bandwidth":true}},
 {"type":"firewall"}]}
JSON
    node[$s]=cnibox-cri-bench-$$-${s//./}; ip netns add "${node[$s]}"; ip -n "${node[$s]}" link set lo up
    # Its package's directory first in PATH: containerd starts its own shim.
    PATH=$cbin:$PATH nsenter --net="/run/netns/${node[$s]}" "$cbin/containerd" --config "$t/config.toml" > "$t/containerd.log" 2>&1 &
    pid[$s]=$!
    [ -n "$cgbase" ] && echo "${pid[$s]}" > "$cgbase/$s/cgroup.procs"
    for _ in $(seq 600); do [ -S "$t/containerd.sock" ] && break; sleep 0.1; done
    CRI_PY_OUT=$work/py python3 "$e2e/cri.py" "$t/containerd.sock" version >/dev/null
    "$cbin/ctr" -a "$t/containerd.sock" -n k8s.io images import --snapshotter native "$work/pause.tar" >/dev/null
}

# stat FILE LOG LABEL → "wall_ns run_median_ns errors cni_add_share cni_all_ns" (cni_all_ns: every
# plugin call of the round, ADD, DEL and the rest); the plugin time a pod by command on stderr
stat() { python3 -c 'import sys, json, statistics
d = json.load(open(sys.argv[1]))
for e in d["errors"][:3]: print("cri-bench:", e, file=sys.stderr)
lines = [l.split() for l in open(sys.argv[2])]
add = sum(int(l[2]) for l in lines if l[0] == "ADD")
print(d["wall_ns"], int(statistics.median(d["run_ns"] or [0])), len(d["errors"]), add / max(1, sum(d["run_ns"])),
      sum(int(l[2]) for l in lines))
n = max(1, len(d["run_ns"]))
by = {}
for l in lines: by[l[0]] = by.get(l[0], 0) + int(l[2])
print("cri.sh: %s: plugin time a pod, by command: %s" % (sys.argv[3], ", ".join(
    "%s %.1f ms (%d calls)" % (c, t / n / 1e6, sum(1 for l in lines if l[0] == c)) for c, t in sorted(by.items()))), file=sys.stderr)
by = {}
for l in lines[:]:
    if len(l) > 3: by[(l[0], l[3])] = by.get((l[0], l[3]), 0) + int(l[2])
print("cri.sh: %s: by plugin (ms a pod): %s" % (sys.argv[3], ", ".join(
    "%s %s %.1f" % (c, p, t / n / 1e6) for (c, p), t in sorted(by.items()))), file=sys.stderr)
cpu = {}
for l in lines:
    if len(l) > 4: cpu[(l[0], l[3])] = cpu.get((l[0], l[3]), 0) + int(l[4])
if len(sys.argv) > 4:
    mach, side, plug = (float(x) / n for x in sys.argv[4:7])
    print("cri.sh: %s: CPU a pod: whole machine %.1f ms, containerd and what it starts but the plugins %.1f ms, the plugins and what they start %.1f ms; the plugins waited for %.1f ms (%s)" % (
        sys.argv[3], mach, side, plug, sum(cpu.values()) / n / 1e6,
        ", ".join("%s %s %.1f" % (c, p, t / n / 1e6) for (c, p), t in sorted(cpu.items()))), file=sys.stderr)
    print(mach, plug)' "$@"; }
# cpu_ms S → the ms of busy CPU time so far of the whole machine (/proc/stat: all but idle and
# iowait), of side S's cgroup and of its plugins' cgroup
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" {printf "%s ", ($2 + $3 + $4 + $7 + $8 + $9) * 1000 / hz; exit}' /proc/stat
    echo "$(( $(cg_ns "$cgbase/$1") / 1000000 )) $(( $(cg_ns "$cgbase/$1-plugins") / 1000000 ))"; }

declare -A walls=() runs=() errs=() cnis=() cdver=() nocni=() cpum=() cpup=()
for c in "${cds[@]}"; do
    cv=${c%%:*} cbin=${c#*:}
    tpl=$e2e/containerd.toml; [ "$cv" != 1.6 ] && tpl=$e2e/containerd-v3.toml
    n=236
    for s in $sides; do
        case $s in ours) src=ours ;; ref) src=$refdir ;; r11) src=$ref11 ;; esac
        start "$cv-$s" "$src" "$n" "$cbin" "$tpl"; n=$((n + 1))
    done
    cdver[$cv]=$("$cbin/containerd" --version | awk '{print $3}')
    # The timed rounds, then one more for the CPU figures alone (with cgroups: the shims move
    # the plugins into their side's plugin cgroup then, which the timed rounds must not pay).
    for r in $(seq "$rounds") ${cgbase:+cpu}; do
        for par in 1 10; do
            for s in $sides; do
                k=$cv-$s
                : > "$work/$k/cni-times.log"
                if [ "$r" = cpu ]; then
                    echo "$cgbase/$k-plugins" > "$work/$k/cgroup"
                    read -r m0 s0 p0 < <(cpu_ms "$k")
                    CRI_PY_OUT=$work/py python3 "$here/cri-bench.py" "$work/$k/containerd.sock" "b$r-$par" "$count" "$par" 30000 > "$work/out"
                    read -r m1 s1 p1 < <(cpu_ms "$k")
                    rm -f "$work/$k/cgroup"
                    { read -r _; read -r cpum[$k$par] cpup[$k$par]; } < <(stat "$work/out" "$work/$k/cni-times.log" "$k par $par round $r" \
                        "$(awk -v a="$m0" -v b="$m1" 'BEGIN {print b - a}')" $((s1 - s0)) $((p1 - p0)))
                    continue
                fi
                CRI_PY_OUT=$work/py python3 "$here/cri-bench.py" "$work/$k/containerd.sock" "b$r-$par" "$count" "$par" 30000 > "$work/out"
                read -r w m e sh all < <(stat "$work/out" "$work/$k/cni-times.log" "$k par $par round $r")
                [ $par = 1 ] && nocni[$k]+="$((w - all)) "
                walls[$k$par]+="$w "; runs[$k$par]+="$m "; errs[$k$par]=$(( ${errs[$k$par]:-0} + e )); cnis[$k$par]+="$sh "
            done
        done
    done
    for s in $sides; do stop "$cv-$s"; done
done
[ ${#cds[@]} -gt 0 ] || { echo "cri.sh: no containerd to run" >&2; exit 0; }
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
has11=0; [[ $sides == *r11* ]] && has11=1
echo "Pod sandboxes through containerd's CRI, as a kubelet drives them (containerd $(for c in "${cds[@]}"; do printf '%s ' "${cdver[${c%%:*}]}"; done| sed 's/ $//; s/ / and /'), benches/cri.sh): $count pods with a hostPort and the bandwidth annotations, each created, stopped and removed, one at a time and 10 at a time, on bridge (ipMasq, hairpinMode) + host-local, portmap, bandwidth, firewall; median of $rounds round(s), the sides in turn, each with its own containerd and node namespace; load $(cut -d' ' -f1-3 /proc/loadavg)."
echo "part in CNI = time in the plugins' ADDs (timing shim, benches/cni-shim.c) / time in RunPodSandbox; outside CNI = RunPodSandbox's median × (1 − part in CNI): containerd's own work (sandbox container, shim, mounts); reference/cnibox > 1: cnibox is faster.${cgbase:+ CPU a pod: busy CPU time of the whole machine (/proc/stat) and of the plugins with all they start, also what outlives them (a cgroup the timing shim moves them into), divided by the pods, from one more round of each kind run for it alone after the timed ones.}"
echo
if [ $has11 = 1 ]; then
    echo "| CRI | containerd | reference v1.9.1 | reference v1.1.1 | cnibox | v1.9.1/cnibox |"
    echo "|---|---|---|---|---|---|"
else
    echo "| CRI | containerd | reference v1.9.1 | cnibox | v1.9.1/cnibox |"
    echo "|---|---|---|---|---|"
fi
tl=()
for c in "${cds[@]}"; do
    cv=${c%%:*}
    for par in 1 10; do
        o=$cv-ours$par r=$cv-ref$par q=$cv-r11$par
        line=$(awk -v c="$count" -v p="$par" -v cv="${cdver[$cv]}" -v h="$has11" \
            -v wo="$(med "${walls[$o]}")" -v wr="$(med "${walls[$r]}")" -v wq="$(med "${walls[$q]:-0}")" \
            -v ro="$(med "${runs[$o]}")" -v rr="$(med "${runs[$r]}")" -v rq="$(med "${runs[$q]:-0}")" \
            -v co="$(med "${cnis[$o]}")" -v cr="$(med "${cnis[$r]}")" -v cq="$(med "${cnis[$q]:-0}")" \
            -v no="$(med "${nocni[$cv-ours]}")" -v nr="$(med "${nocni[$cv-ref]}")" -v nq="$(med "${nocni[$cv-r11]:-0}")" \
            -v eo="${errs[$o]}" -v er="${errs[$r]}" -v eq="${errs[$q]:-0}" \
            -v mo="$(med "${cpum[$o]}")" -v mr="$(med "${cpum[$r]}")" -v mq="$(med "${cpum[$q]:-0}")" \
            -v po="$(med "${cpup[$o]}")" -v pr="$(med "${cpup[$r]}")" -v pq="$(med "${cpup[$q]:-0}")" -v cg="${cgbase:+1}" -v ncpu="$(nproc)" 'BEGIN {
            at = (p == 1 ? "one" : p) " at a time"
            q = (h == 1)
            printf "| pods/s, %s [errors] | %s | %.1f [%d] |", at, cv, c / (wr / 1e9), er
            if (q) printf " %.1f [%d] |", c / (wq / 1e9), eq
            printf " %.1f [%d] | %.2f× |\n", c / (wo / 1e9), eo, wr / wo
            printf "| RunPodSandbox median, %s (ms) | %s | %.1f |", at, cv, rr / 1e6
            if (q) printf " %.1f |", rq / 1e6
            printf " %.1f | %.2f× |\n", ro / 1e6, rr / ro
            printf "| RunPodSandbox: part in CNI ADDs, %s | %s | %.0f %% |", at, cv, cr * 100
            if (q) printf " %.0f %% |", cq * 100
            printf " %.0f %% | |\n", co * 100
            printf "| RunPodSandbox outside CNI, %s (ms) | %s | %.1f |", at, cv, rr * (1 - cr) / 1e6
            if (q) printf " %.1f |", rq * (1 - cq) / 1e6
            printf " %.1f | %.2f× |\n", ro * (1 - co) / 1e6, (ro * (1 - co) > 0 ? rr * (1 - cr) / (ro * (1 - co)) : 0)
            if (p == 1) {
                printf "| pods/s, one at a time, were the plugins free (the round'\''s wall less every plugin call'\''s time) | %s | %.1f |", cv, c / (nr / 1e9)
                if (q) printf " %.1f |", c / (nq / 1e9)
                printf " %.1f | %.2f× (v1.9.1 as measured / this) |\n", c / (no / 1e9), wr / no
            }
            if (cg == 1) {
                printf "| CPU a pod, whole machine, %s (ms) | %s | %.1f |", at, cv, mr
                if (q) printf " %.1f |", mq
                printf " %.1f | %.2f× |\n", mo, (mo > 0 ? mr / mo : 0)
                printf "| CPU a pod in the plugins and all they start, %s (ms) | %s | %.1f |", at, cv, pr
                if (q) printf " %.1f |", pq
                printf " %.1f | %.2f× |\n", po, (po > 0 ? pr / po : 0)
            }
            if (cg == 1 && p == 10) {
                printf "| pods/s 10 at a time, were cnibox'\''s plugins free of CPU (%d cores / its CPU a pod less its plugins'\'') | %s | %.1f |", ncpu, cv, c / (wr / 1e9)
                if (q) printf " %.1f |", c / (wq / 1e9)
                free = (mo - po > 0 ? ncpu * 1000 / (mo - po) : 0)
                printf " %.1f | %.2f× (v1.9.1 as measured / this) |\n", free, free / (c / (wr / 1e9))
            }
            if (p == 10) printf "target: | pods/s 10 at a time through containerd %s ≥ 2.5× v1.9.1 | %.2f× | %s |\n", cv, wr / wo, (wo > 0 && wr / wo >= 2.5) ? "met" : "missed" }')
        while IFS= read -r l; do case $l in "target: "*) tl+=("$l") ;; *) echo "$l" ;; esac; done <<<"$line"
    done
done
echo
printf '%s\n' "${tl[@]}"
