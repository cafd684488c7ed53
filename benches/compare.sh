#!/usr/bin/env bash
# Whole-process comparison of cnibox against the reference Go plugins (/usr/lib/cni), on the
# same inputs in one run, interleaving the two so machine drift cancels out. Prints medians and
# ratios (reference / cnibox: > 1 means cnibox is faster) and writes BENCHMARKS.md plus an SVG
# of host-local latency against existing reservations. Needs root (network namespaces).
#   benches/compare.sh CNIBOX_BINARY [--out BENCHMARKS.md] [--quick]
# Plugins run in a throwaway node namespace via `nsenter --net` (a bare setns; `ip netns exec`
# would add a mount namespace and a /sys remount to every sample). It reports; it never fails
# on numbers.
set -euo pipefail
bin=${1:?usage: compare.sh CNIBOX_BINARY [--out FILE] [--quick]}; shift
out=BENCHMARKS.md; reps=15; quick=0
while [ $# -gt 0 ]; do
    case $1 in --out) out=$2; shift ;; --quick) reps=5; quick=1 ;; esac; shift
done
ref=/usr/lib/cni
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$ref/bridge" ] || { echo "compare.sh: reference plugins not found in $ref (containernetworking-plugins)" >&2; exit 1; }
work=$(mktemp -d /tmp/cnibox-compare.XXXXXX)
nss=()
cleanup() { for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/ours"; cp "$bin" "$work/ours/cnibox"
for a in $("$work/ours/cnibox" --list); do ln -s cnibox "$work/ours/$a"; done
# Sets NS to a new namespace (not in a subshell, so cleanup knows every one).
newns() { NS="cnibox-bench-$$-${#nss[@]}"; ip netns add "$NS"; nss+=("$NS"); }
# Timestamps come from $EPOCHREALTIME (no fork per sample), in nanoseconds.
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.2f", n/1e6}'; }
ratio() { awk -v r="$1" -v o="$2" 'BEGIN {if (o>0) printf "%.1f×", r/o; else print "n/a"}'; }
rows=(); targets=()
# tgt TARGET MEASURED met|missed; ge A B K: "met" when A/B ≥ K.
tgt() { targets+=("| $1 | $2 | $3 |"); }
ge() { awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN {print (b > 0 && a / b >= k) ? "met" : "missed"}'; }
row() { rows+=("| $1 | $2 | $3 | $4 |"); printf '%-48s ours %10s  ref %10s  %s\n' "$1" "$2" "$3" "$4"; }

# 1. exec cost: VERSION, 100 execs per sample, A B A B …
o=(); r=()
for _ in $(seq "$reps"); do
    t=${EPOCHREALTIME/./}000; for _ in $(seq 100); do CNI_COMMAND=VERSION "$work/ours/bridge" >/dev/null; done; o+=($(( (${EPOCHREALTIME/./}000-t)/100 )))
    t=${EPOCHREALTIME/./}000; for _ in $(seq 100); do CNI_COMMAND=VERSION "$ref/bridge" >/dev/null; done; r+=($(( (${EPOCHREALTIME/./}000-t)/100 )))
done
mo=$(printf '%s\n' "${o[@]}" | median); mr=$(printf '%s\n' "${r[@]}" | median)
row "VERSION exec (ms)" "$(ms "$mo")" "$(ms "$mr")" "$(ratio "$mr" "$mo")"
tgt "VERSION exec ≥ 5× faster" "$(ratio "$mr" "$mo")" "$(ge "$mr" "$mo" 5)"

# 2./3. Plugin chains run by benches/chain.sh inside a node namespace: one `nsenter` per sample,
# the timing is taken in there around each plugin exec (conf from a file, result to a file, as
# a runtime does), so the harness's own nsenter/env/fork costs are not counted.
newns; node=$NS
sample() { # node dir backend cid plugins… → sets A and D (ns) and E (1 on any plugin error)
    local nd=$1 dir=$2 bk=$3 cid=$4 ns out; shift 4
    newns; ns=$NS
    out=$(nsenter --net="/run/netns/$nd" bash "$here/chain.sh" "$dir" "$bk" "$cid" "/run/netns/$ns" "$work/data-$nd-${dir##*/}" "$@") || true
    read -r A D E <<<"$out"; E=${E:-1}; A=${A:-0}; D=${D:-0}
    ip netns del "$ns"
}
# 2. bridge + host-local ADD and DEL into a fresh namespace.
ao=(); ar=(); do_=(); dr=(); be=0
for i in $(seq "$reps"); do
    sample "$node" "$work/ours" "" "c$i" bridge; ao+=($A); do_+=($D); be=$((be+E))
    sample "$node" "$ref" "" "r$i" bridge; ar+=($A); dr+=($D); be=$((be+E))
done
[ $be = 0 ] || echo "bridge samples with errors: $be" >&2
m1=$(printf '%s\n' "${ao[@]}" | median); m2=$(printf '%s\n' "${ar[@]}" | median)
row "bridge+host-local ADD (ms)" "$(ms "$m1")" "$(ms "$m2")" "$(ratio "$m2" "$m1")"
tgt "bridge+host-local ADD ≥ 5× faster" "$(ratio "$m2" "$m1")" "$(ge "$m2" "$m1" 5)"
m1=$(printf '%s\n' "${do_[@]}" | median); m2=$(printf '%s\n' "${dr[@]}" | median)
row "bridge+host-local DEL (ms)" "$(ms "$m1")" "$(ms "$m2")" "$(ratio "$m2" "$m1")"

# 3. the chain bridge(+host-local, ipMasq) → portmap → firewall → bandwidth: ADD in order, DEL
# in reverse with the ADD result as prevResult, as libcni runs a conflist; the sample is the
# sum of the plugin execs. cnibox once per netfilter backend; the reference (v1.1.1) has only
# iptables. Each variant gets its own node namespace.
variants=("ours iptables" "ours nftables" "ref iptables")
declare -A cnode cadd cdel cerr
for v in "${variants[@]}"; do newns; cnode[$v]=$NS; cadd[$v]=""; cdel[$v]=""; cerr[$v]=0; done
for i in $(seq "$reps"); do
    for v in "${variants[@]}"; do
        set -- $v; dir=$work/ours; [ "$1" = ref ] && dir=$ref
        sample "${cnode[$v]}" "$dir" "$2" "ch$i" bridge portmap firewall bandwidth
        cadd[$v]+="$A "; cdel[$v]+="$D "; cerr[$v]=$(( ${cerr[$v]} + E ))
    done
done
med() { printf '%s\n' $1 | median; }
rA=$(med "${cadd[ref iptables]}"); rD=$(med "${cdel[ref iptables]}")
for bk in iptables nftables; do
    oA=$(med "${cadd[ours $bk]}"); oD=$(med "${cdel[ours $bk]}")
    e=""; [ "${cerr[ours $bk]}${cerr[ref iptables]}" != 00 ] && e=" [samples with errors: ours ${cerr[ours $bk]}, ref ${cerr[ref iptables]}]"
    row "chain ADD, cnibox $bk vs ref iptables (ms)$e" "$(ms "$oA")" "$(ms "$rA")" "$(ratio "$rA" "$oA")"
    if [ $bk = nftables ]; then tgt "chain ADD with nftables ≥ 10× faster" "$(ratio "$rA" "$oA")" "$(ge "$rA" "$oA" 10)"; fi
    row "chain DEL, cnibox $bk vs ref iptables (ms)$e" "$(ms "$oD")" "$(ms "$rD")" "$(ratio "$rD" "$oD")"
done

# 4. host-local ADD+DEL with N existing reservations (files in upstream format).
svg_points=()
fill() { # dir n
    mkdir -p "$1/bench"; : > "$1/bench/lock"
    python3 - "$1/bench" "$2" <<'PY'
import sys, ipaddress
d, n = sys.argv[1], int(sys.argv[2])
for i, ip in enumerate(ipaddress.ip_network("10.210.0.0/16").hosts()):
    if i == 0: continue
    if i > n: break
    open(f"{d}/{ip}", "w").write(f"pre{i}\r\neth0")
PY
}
for n in 10 1000 5000; do
    [ $quick = 1 ] && [ $n = 1000 ] && continue
    for impl in ours ref; do rm -rf "$work/hl-$impl"; fill "$work/hl-$impl" $n; done
    # Let writeback of the fresh files finish, and take each side's first ADD out of the
    # samples: on a directory the Go plugin wrote, our first ADD builds its index once (~80 ms
    # at 5,000 files), every later call is O(1).
    sync
    for impl in ours ref; do
        dir=$work/ours; [ $impl = ref ] && dir=$ref
        c=$(printf '{"cniVersion":"1.0.0","name":"bench","type":"host-local","ipam":{"type":"host-local","subnet":"10.210.0.0/16","dataDir":"%s"}}' "$work/hl-$impl")
        t=${EPOCHREALTIME/./}000
        CNI_COMMAND=ADD CNI_CONTAINERID=warm CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
        [ $impl = ours ] && [ $n = 5000 ] && first5000=$(( ${EPOCHREALTIME/./}000-t ))
        CNI_COMMAND=DEL CNI_CONTAINERID=warm CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
    done
    o=(); r=()
    for i in $(seq "$reps"); do
        for impl in ours ref; do
            dir=$work/ours; [ $impl = ref ] && dir=$ref
            c=$(printf '{"cniVersion":"1.0.0","name":"bench","type":"host-local","ipam":{"type":"host-local","subnet":"10.210.0.0/16","dataDir":"%s"}}' "$work/hl-$impl")
            t=${EPOCHREALTIME/./}000
            CNI_COMMAND=ADD CNI_CONTAINERID=b$i CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
            CNI_COMMAND=DEL CNI_CONTAINERID=b$i CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
            d=$(( (${EPOCHREALTIME/./}000-t)/2 ))
            if [ $impl = ours ]; then o+=($d); else r+=($d); fi
        done
    done
    m1=$(printf '%s\n' "${o[@]}" | median); m2=$(printf '%s\n' "${r[@]}" | median)
    row "host-local ADD/DEL, $n reserved (ms per call)" "$(ms "$m1")" "$(ms "$m2")" "$(ratio "$m2" "$m1")"
    if [ $n = 10 ]; then hl10=$m1; fi
    if [ $n = 5000 ]; then tgt "host-local at 5,000 reservations ≤ 1.5× its cost at 10" "$(ratio "$m1" "$hl10")" "$(ge "$hl10" "$m1" 0.6667)"; fi
    svg_points+=("$n $m1 $m2")
done
row "host-local first ADD on 5,000 Go-written files (ms, once: index build)" "$(ms "$first5000")" "" ""

# 5. 64 concurrent host-local ADDs on one network.
for impl in ours ref; do
    dir=$work/ours; [ $impl = ref ] && dir=$ref
    c=$(printf '{"cniVersion":"1.0.0","name":"conc","type":"host-local","ipam":{"type":"host-local","subnet":"10.220.0.0/16","dataDir":"%s"}}' "$work/conc-$impl")
    t=${EPOCHREALTIME/./}000; errs=0; pids=()
    for i in $(seq 64); do
        (CNI_COMMAND=ADD CNI_CONTAINERID=k$i CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null) & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || errs=$((errs+1)); done
    w=$(( ${EPOCHREALTIME/./}000-t ))
    if [ $impl = ours ]; then cw=$w; ce=$errs; else rw=$w; re=$errs; fi
done
row "64 concurrent host-local ADDs, wall (ms) [errors]" "$(ms "$cw") [$ce]" "$(ms "$rw") [$re]" "$(ratio "$rw" "$cw")"

# 6. peak RSS of one bridge ADD, and size on disk.
conf() { printf '{"cniVersion":"1.0.0","name":"bench","type":"bridge","bridge":"%s","isGateway":true,"ipam":{"type":"host-local","subnet":"10.200.0.0/16","dataDir":"%s"}}' "$1" "$2"; }
rss() { # dir netns
    local c; c=$(conf cbrss "$work/rss-$(basename "$1")")
    nsenter --net="/run/netns/$node" env CNI_COMMAND=ADD CNI_CONTAINERID=rss CNI_NETNS=/run/netns/$2 CNI_IFNAME=eth0 CNI_PATH="$1" \
        /usr/bin/time -f %M "$1/bridge" <<<"$c" 2>&1 >/dev/null | tail -1
}
if [ -x /usr/bin/time ]; then
    newns; n1=$NS; newns; n2=$NS
    ro=$(rss "$work/ours" "$n1"); rr=$(rss "$ref" "$n2")
    row "peak RSS of bridge ADD (KiB, bridge process)" "$ro" "$rr" "$(ratio "$rr" "$ro")"
    tgt "peak RSS ≤ 1/5 of the reference" "$(ratio "$rr" "$ro")" "$(ge "$rr" "$ro" 5)"
fi
size_o=$(stat -c %s "$work/ours/cnibox")
have=0; for a in $("$work/ours/cnibox" --list); do [ -f "$ref/$a" ] && have=$((have + $(stat -c %s "$ref/$a"))); done
all=0; for a in bridge host-local portmap bandwidth firewall static vlan loopback; do all=$((all + $(stat -c %s "$ref/$a"))); done
row "size on disk (bytes): cnibox vs reference applets it has" "$size_o" "$have" "$(ratio "$have" "$size_o")"
row "size on disk (bytes): cnibox vs all 8 reference applets" "$size_o" "$all" "$(ratio "$all" "$size_o")"
tgt "all applets ≤ 1/15 of the reference and < 1.5 MB" "$(ratio "$all" "$size_o"), $(awk -v b="$size_o" 'BEGIN {printf "%.2f MB", b/1e6}')" "$( [ "$(ge "$all" "$size_o" 15)" = met ] && [ "$size_o" -lt 1500000 ] && echo met || echo missed)"

# Report.
{
    echo "# cnibox vs reference plugins"
    echo
    echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $("$work/ours/cnibox" --version | head -1), reference: $(dpkg-query -W -f '${Package} ${Version}' containernetworking-plugins 2>/dev/null || echo "$ref")."
    echo "Medians of $reps interleaved samples; ratio = reference / cnibox (> 1: cnibox faster or smaller)."
    echo
    echo "| measurement | cnibox | reference | ratio |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "![host-local latency against existing reservations](benches/host-local-scaling.svg)"
    echo
    echo "## Targets (issue 6), from this run"
    echo
    echo "| target | measured | |"
    echo "|---|---|---|"
    printf '%s\n' "${targets[@]}"
    echo
    cat "$here/NOTES.md"
} > "$out"
svg=$(dirname "$out")/benches/host-local-scaling.svg
mkdir -p "$(dirname "$svg")"
printf '%s\n' "${svg_points[@]}" | awk '
    { n[NR]=$1; o[NR]=$2/1e6; r[NR]=$3/1e6; if (r[NR]>max) max=r[NR]; if (o[NR]>max) max=o[NR] }
    END {
        W=480; H=300; L=60; B=40; max*=1.1
        printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
        printf "<text x=\"%d\" y=\"16\">host-local ADD/DEL latency (ms per call) vs existing reservations</text>\n", L
        printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H-B, W-10, H-B
        printf "<line x1=\"%d\" y1=\"30\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, L, H-B
        printf "<text x=\"5\" y=\"40\">%.1f ms</text><text x=\"5\" y=\"%d\">0</text>\n", max, H-B
        for (s=0; s<2; s++) {
            pts=""
            for (i=1; i<=NR; i++) {
                x=L+(n[i]/5000)*(W-L-20); v=(s==0?o[i]:r[i]); y=(H-B)-(v/max)*(H-B-30)
                pts=pts sprintf("%.1f,%.1f ", x, y)
                if (s==0) printf "<text x=\"%.1f\" y=\"%d\">%d</text>\n", x-10, H-B+15, n[i]
            }
            printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", (s==0?"#1a7f37":"#cf222e"), pts
        }
        printf "<text x=\"%d\" y=\"%d\" fill=\"#1a7f37\">cnibox</text><text x=\"%d\" y=\"%d\" fill=\"#cf222e\">reference</text>\n", W-150, 40, W-80, 40
        print "</svg>"
    }' > "$svg"
echo "wrote $out and $svg"
