#!/usr/bin/env bash
# Whole-process comparison of cnibox against the reference Go plugins (upstream v1.9.1: REF_DIR,
# default /var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni, made by
# `.ci/fetch-unstable containernetworking-plugins`; Debian 12's v1.1.1 in /usr/lib/cni is an
# extra column of the scenario rows, ratios and targets are against v1.9.1) and
# against the kernel floor (benches/floor.rs: the same system calls replayed from one running
# process), on the same inputs in one run, interleaving the sides sample by sample so machine
# drift cancels out. Prints medians and ratios and writes BENCHMARKS.md (tables, targets
# computed from this run, then benches/NOTES.md) plus an SVG of host-local latency against
# existing reservations. Needs root (network namespaces); the floor also needs strace, python3
# and cargo (FLOOR=path to a built replayer skips cargo), and is left out without them.
#   benches/compare.sh CNIBOX_BINARY [--out BENCHMARKS.md] [--quick]
# Plugins run in a throwaway node namespace via `nsenter --net` (a bare setns; `ip netns exec`
# would add a mount namespace and a /sys remount to every sample). It reports; it never fails
# on numbers. COLD=1 adds a cold-cache host-local variant (drop_caches: slows the whole machine).
# V6_ONLY=1 runs only the IPv4/IPv6/dual-stack rows (section 3b; V6_APPLETS picks among ptp
# bridge macvlan tap host-device flannel chain podman), prints them and writes nothing.
# PEERS_ONLY=1 runs only podman's default network against netavark (section 3a) and prints it.
# netavark (the peer podman users pick instead of CNI): Debian 12's /usr/lib/podman/netavark
# (1.4, iptables only) and, from a Debian unstable root in NETAVARK_ROOT (default
# /var/cache/cnibox-bench/unstable, made once by `benches/peers-root.sh`), netavark 1.17 with its
# nftables and iptables drivers; a side that is missing is left out with a note.
# The clients' view (issue 28 item 2: `podman run --rm` on CNI and on netavark, pods through
# containerd's CRI) comes from benches/podman.sh and benches/cri.sh (the clients hook below;
# CLIENTS=0 skips them).
set -euo pipefail
bin=${1:?usage: compare.sh CNIBOX_BINARY [--out FILE] [--quick]}; shift
out=BENCHMARKS.md; reps=15; quick=0
while [ $# -gt 0 ]; do
    case $1 in --out) out=$2; shift ;; --quick) reps=5; quick=1 ;; esac; shift
done
ref=${REF_DIR:-/var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni}
ref11=/usr/lib/cni   # Debian 12's v1.1.1: an extra column, left out when missing
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$ref/bridge" ] || { echo "compare.sh: reference plugins v1.9.1 not found in $ref (.ci/fetch-unstable containernetworking-plugins)" >&2; exit 1; }
[ -x "$ref11/bridge" ] || { echo "compare.sh: no reference v1.1.1 in $ref11 (Debian 12's containernetworking-plugins): no v1.1.1 column" >&2; ref11=""; }
work=$(mktemp -d /tmp/cnibox-compare.XXXXXX)
nss=()
cleanup() {
    [ -n "${FLOOR_PID:-}" ] && kill "$FLOOR_PID" 2>/dev/null
    for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done; rm -rf "$work"
    if [ -n "${nvdata:-}" ]; then rm -rf "$nvdata"; fi
}
trap cleanup EXIT
mkdir -p "$work/ours"; cp "$bin" "$work/ours/cnibox"
for a in $("$work/ours/cnibox" --list); do ln -s cnibox "$work/ours/$a"; done
# Sets NS to a new namespace (not in a subshell, so cleanup knows every one).
newns() { NS="cnibox-bench-$$-${#nss[@]}"; ip netns add "$NS"; nss+=("$NS"); }
# Timestamps come from $EPOCHREALTIME (no fork per sample), in nanoseconds.
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
med() { printf '%s\n' $1 | median; }
ms() { [ -z "$1" ] && return; awk -v n="$1" 'BEGIN {printf "%.2f", n/1e6}'; }
ratio() { [ -z "$1" ] || [ -z "$2" ] && return; awk -v r="$1" -v o="$2" 'BEGIN {if (o>0) printf "%.1f×", r/o; else print "n/a"}'; }
ratio2() { [ -z "$1" ] || [ -z "$2" ] && return; awk -v r="$1" -v o="$2" 'BEGIN {if (o>0) printf "%.2f", r/o; else print "n/a"}'; }
rows=(); targets=()
# tgt TARGET MEASURED met|missed; ge A B K: "met" when A/B ≥ K.
tgt() { targets+=("| $1 | $2 | $3 |"); }
ge() { awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN {print (b > 0 && a / b >= k) ? "met" : "missed"}'; }
# row NAME REF OURS [FLOOR [NETAVARK_1.4 NETAVARK_1.17 [REF_1.1.1 [REF_FLOOR]]]]: times in ns
# (shown in ms) or, with RAW=1, plain numbers. REF is v1.9.1 (the ratios), REF_1.1.1 an extra
# column, REF_FLOOR v1.9.1's own system calls replayed (the floor of the Go plugin's choices).
# A DEL row with a reference counts towards "every DEL ≥ 1.2× v1.9.1" (issue 37).
del_ratios=()
row() {
    local r=$2 o=$3 f=${4:-} n4=${5:-} n17=${6:-} r11=${7:-} gf=${8:-} rs os fs n4s n17s r11s gfs
    if [ "${RAW:-0}" = 1 ]; then rs=$r os=$o fs=$f; else rs=$(ms "$r") os=$(ms "$o") fs=$(ms "$f"); fi
    n4s=$(ms "$n4"); n17s=$(ms "$n17"); r11s=$(ms "$r11"); gfs=$(ms "$gf")
    rows+=("| $1 | $rs | $r11s | $n4s | $n17s | $os | $fs | $(ratio2 "$o" "$f") | $(ratio "$r" "$o") | $(ratio "$n17" "$o") | $gfs | $(ratio2 "$gf" "$f") |")
    printf '%-58s ref %10s  cnibox %10s  floor %9s  cnibox/floor %5s  ref/cnibox %6s' "$1" "$rs" "$os" "$fs" "$(ratio2 "$o" "$f")" "$(ratio "$r" "$o")"
    [ -n "$n4$n17" ] && printf '  netavark 1.4 %9s  1.17 %9s  1.17/cnibox %6s' "$n4s" "$n17s" "$(ratio "$n17" "$o")"
    [ -n "$r11" ] && printf '  ref 1.1.1 %9s' "$r11s"
    [ -n "$gf" ] && printf '  ref floor %9s  ref floor/floor %5s' "$gfs" "$(ratio2 "$gf" "$f")"
    echo
    if [[ $1 == *" DEL"* && -n $r && -n $o && $o != 0 ]]; then
        del_ratios+=("$(awk -v r="$r" -v o="$o" 'BEGIN {printf "%.2f", r/o}') $1")
    fi
}
# The DEL target (issue 37 item 1): every DEL row against v1.9.1, from this run.
del_tgt() {
    [ ${#del_ratios[@]} = 0 ] && return
    local low n under
    low=$(printf '%s\n' "${del_ratios[@]}" | sort -n | head -1)
    n=${#del_ratios[@]}
    under=$(printf '%s\n' "${del_ratios[@]}" | awk '$1 < 1.2 {r = $1; $1 = ""; sub(/^ /, ""); sub(/ \(ms.*$/, ""); printf "%s%s %s×", (n++ ? "; " : ""), $0, r}')
    tgt "every DEL row ≥ 1.2× v1.9.1 (issue 37)" "lowest ${low%% *}× ($((n - $(printf '%s\n' "${del_ratios[@]}" | awk '$1 < 1.2' | wc -l))) of $n rows ≥ 1.2×)${under:+; under: $under}" "$( [ -z "$under" ] && echo met || echo missed)"
}
# floor_tgt NAME K REF OURS FLOOR: "ref/cnibox ≥ K"; when even the floor is not K× faster than
# the reference, the target is physically out of reach and becomes "cnibox within 1.2× of the floor".
floor_tgt() {
    local name=$1 k=$2 r=$3 o=$4 f=$5
    if [ "$(ge "$r" "$o" "$k")" = met ] || [ -z "$f" ] || [ "$(ge "$r" "$f" "$k")" = met ]; then
        tgt "$name" "$(ratio "$r" "$o")$( [ -n "$f" ] && echo " (floor: $(ratio "$r" "$f"))")" "$(ge "$r" "$o" "$k")"
    else
        tgt "$name — out of reach: the floor is $(ratio "$r" "$f"), so: within 1.2× of the floor" "cnibox/floor $(ratio2 "$o" "$f")" "$(ge "$f" "$o" 0.8333)"
    fi
}

# The floor replayer (benches/floor.rs), one process for the whole run.
floor_bin=${FLOOR:-}; FLOOR_PID=""; floor_why=""
if [ -z "$floor_bin" ] && command -v cargo >/dev/null; then
    floor_bin=$(cd "$here/.." && cargo bench --bench floor --no-run --message-format=json 2>/dev/null |
        python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "floor" and m.get("executable"): print(m["executable"])' | tail -1) || true
fi
for t in strace python3; do command -v $t >/dev/null || floor_why="no $t"; done
[ -x "${floor_bin:-/nonexistent}" ] || floor_why=${floor_why:-"the replayer did not build"}
if [ -z "$floor_why" ]; then
    coproc FLOORP { exec "$floor_bin"; }
    FLOOR_PID=$FLOORP_PID; exec {FL_IN}>&"${FLOORP[1]}" {FL_OUT}<&"${FLOORP[0]}"
else
    echo "compare.sh: no floor columns: $floor_why" >&2
fi
floor_cmd() { echo "$*" >&"$FL_IN"; read -r FL <&"$FL_OUT"; }
spawner=""; [ -z "$floor_why" ] && spawner=$floor_bin
floor_div=0; gofloor_div=0

# 1. exec cost: VERSION, 100 execs per sample, A B A B … Spawned by the floor process as a
# runtime spawns a plugin (posix_spawn, stdin /dev/null); its floor is the same spawn of a
# static C program that only returns (musl-gcc): exec, the first page faults and exit, the
# least any plugin process costs. Without the floor process, a bash loop (its fork is counted
# on both sides).
o=(); r=(); f=(); noop=""
if [ -z "$floor_why" ] && command -v musl-gcc >/dev/null; then
    printf 'int main(void) { return 0; }\n' > "$work/noop.c"
    musl-gcc -static -O2 -o "$work/noop" "$work/noop.c" 2>/dev/null && noop=$work/noop
fi
only=0; [ "${V6_ONLY:-0}" = 1 ] || [ "${PEERS_ONLY:-0}" = 1 ] && only=1
[ $only = 1 ] || for _ in $(seq "$reps"); do
    if [ -z "$floor_why" ]; then
        floor_cmd spawn 100 "$work/ours/bridge"; o+=("$FL")
        floor_cmd spawn 100 "$ref/bridge"; r+=("$FL")
        [ -n "$noop" ] && { floor_cmd spawn 100 "$noop"; f+=("$FL"); }
    else
        t=${EPOCHREALTIME/./}000; for _ in $(seq 100); do CNI_COMMAND=VERSION "$work/ours/bridge" >/dev/null </dev/null; done; o+=($(( (${EPOCHREALTIME/./}000-t)/100 )))
        t=${EPOCHREALTIME/./}000; for _ in $(seq 100); do CNI_COMMAND=VERSION "$ref/bridge" >/dev/null </dev/null; done; r+=($(( (${EPOCHREALTIME/./}000-t)/100 )))
    fi
done
if [ $only != 1 ]; then
mo=$(printf '%s\n' "${o[@]}" | median); mr=$(printf '%s\n' "${r[@]}" | median)
mf=""; [ ${#f[@]} -gt 0 ] && mf=$(printf '%s\n' "${f[@]}" | median)
row "VERSION exec (ms; floor: a static no-op program)" "$mr" "$mo" "$mf"
tgt "VERSION exec ≥ 5× faster" "$(ratio "$mr" "$mo")" "$(ge "$mr" "$mo" 5)"
# Issue 28: the features added since must not make every plugin process dearer.
[ -n "$mf" ] && tgt "VERSION exec within 1.5× of the static no-op program (issue 28)" "$(ratio2 "$mo" "$mf")×" "$(ge "$mf" "$mo" 0.6667)"
fi

# 2. Plugin chains run by benches/chain.sh inside a node namespace: one `nsenter` per sample,
# the timing is taken in there around each plugin exec (conf from a file, result to a file, as
# a runtime does), so the harness's own nsenter/env costs are not counted; with the floor
# binary at hand each plugin is spawned and timed by it (posix_spawn, as Go runtimes spawn
# plugins), so bash's fork of itself (~0.2 ms a call, both sides) is not counted either. A chain ADDs
# its plugins in order, then DELs them in reverse with the ADD result as prevResult, as libcni
# runs a conflist; the sample is the sum of the timed plugin execs.
sample() { # node dir backend cid plugins… → sets A and D (ns) and E (1 on any plugin error)
    local nd=$1 dir=$2 bk=$3 cid=$4 ns out; shift 4
    newns; ns=$NS
    out=$(nsenter --net="/run/netns/$nd" env SPAWNER="$spawner" bash "$here/chain.sh" "$dir" "$bk" "$cid" "/run/netns/$ns" "$work/data-$nd-${dir##*/}" "$@") || true
    read -r A D E <<<"$out"; E=${E:-1}; A=${A:-0}; D=${D:-0}
    ip netns del "$ns"
}
# What a scenario's node namespace needs: macvlan a master, host-device a device to move,
# flannel its subnet file (in the sample's data dir).
prep() { # kind node dir
    mkdir -p "$work/data-$2-${3##*/}"
    case $1 in
    # The master's peer is up too: a NIC with a carrier (without one, IPv6 detection cannot
    # run and both sides wait out their deadline).
    macvlan) ip -n "$2" link add mvm0 type veth peer name mvm0p; ip -n "$2" link set mvm0 up; ip -n "$2" link set mvm0p up ;;
    # With an address to give (the family rows), the peer is up: IPv6 settling needs a carrier.
    host-device) ip -n "$2" link add hd0 type veth peer name hd0p
        if [ -n "${FAMILY:-}" ]; then ip -n "$2" link set hd0p up; fi ;;
    flannel) local v4='FLANNEL_NETWORK=10.234.0.0/16\nFLANNEL_SUBNET=10.234.1.1/24\n' v6='FLANNEL_IPV6_NETWORK=fd00:234::/56\nFLANNEL_IPV6_SUBNET=fd00:234:0:1::1/64\n' f
        case ${FAMILY:-v4} in v6) f=$v6 ;; dual) f=$v4$v6 ;; *) f=$v4 ;; esac
        printf "${f}FLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n" > "$work/data-$2-${3##*/}/subnet.env" ;;
    esac
}
# The floor of a scenario: in the floor's own node namespace, one untimed sample of DIR's
# plugins (the steady state: bridge, tables exist), then one under strace, turned into a replay
# script; GO=--go for the reference's (Go) plugins (floor-record.py's doc).
record() { # key node backend dir go plugins…
    local key=$1 nd=$2 bk=$3 dir=$4 go=$5 c; shift 5
    sample "$nd" "$dir" "$bk" fw "$@"
    newns; c=$NS; rm -rf "$work/trace"; mkdir "$work/trace"
    nsenter --net="/run/netns/$nd" strace -ff -ttt -qq -xx -e write=all -e read=all -o "$work/trace/t" \
        bash "$here/chain.sh" "$dir" "$bk" fl "/run/netns/$c" "$work/data-$nd-${dir##*/}" "$@" >/dev/null
    ip netns del "$c"
    # shellcheck disable=SC2086
    if python3 "$here/floor-record.py" $go "$work/trace" "$dir" "/run/netns/$c" "$@" > "$work/$key.replay"; then
        floor_cmd load "$key" "$work/$key.replay"; [ "$FL" = ok ] || { echo "floor: $FL" >&2; return 1; }
    else
        return 1
    fi
}
# A netavark sample (benches/netavark.sh, podman's default network): NAME nv4 is the host's
# netavark, nv17 the one in $nvroot, run in a mount namespace of its own where the root gets
# /proc, a sysfs of the node namespace and /run/netns (netavark.sh mounts them). The chroot
# program's own cost, measured on a no-op program (nv_chroot_ns), is taken off each call.
nvsample() { # node name driver cid → A D E
    local nd=$1 name=$2 drv=$3 cid=$4 ns out root=/ nv=$nv4_bin data=$work/nv-$1 cut=0
    [ "$name" = nv17 ] && { root=$nvroot; nv=/usr/lib/podman/netavark; data=${nvdata#"$nvroot"}/$nd; cut=$nv_chroot_ns; }
    newns; ns=$NS
    out=$(nsenter --net="/run/netns/$nd" unshare --mount --propagation slave env SPAWNER="$spawner" \
        bash "$here/netavark.sh" "$root" "$nv" "$drv" "$cid" "/run/netns/$ns" "$data") || true
    read -r A D E <<<"$out"; E=${E:-1}; A=${A:-0}; D=${D:-0}
    [ "$E" = 0 ] && { A=$((A - cut)); D=$((D - cut)); }
    ip netns del "$ns"
}
# scenario KEY LABEL SIDES PLUGINS…: SIDES is a list of NAME:BACKEND (NAME ours, ref (v1.9.1),
# r11 (v1.1.1), floor, gofloor, nv4 or nv17; floor replays ours, gofloor the reference (v1.9.1),
# nv4/nv17 run netavark with BACKEND as its firewall driver and
# are left out when not available). Every side gets its own node namespace and one untimed warm-up sample;
# then REPS rounds of one sample per side. Sets SA_<side> and SD_<side> (medians, ns).
scenario() {
    local key=$1 label=$2 sides=$3 i s name bk dir; shift 3
    unset "${!SA_@}" "${!SD_@}"
    declare -gA node=() adds=() dels=() errs=()
    for s in $sides; do
        name=${s%%:*}; bk=${s#*:}; dir=$work/ours; [ "$name" = ref ] && dir=$ref; [ "$name" = r11 ] && dir=$ref11
        case $name in floor|gofloor) [ -n "$floor_why" ] && continue ;; esac
        case $name in nv4) [ -z "$nv4_bin" ] && continue ;; nv17) [ -z "$nvroot" ] && continue ;; r11) { [ -z "$ref11" ] || [ ! -x "$ref11/${1#=}" ]; } && continue ;; esac
        newns; node[$s]=$NS; prep "$key" "$NS" "$dir"; adds[$s]=""; dels[$s]=""; errs[$s]=0
        case $name in
        floor) record "$key" "$NS" "$bk" "$work/ours" "" "$@" || unset "node[$s]" ;;
        gofloor) record "go-$key" "$NS" "$bk" "$ref" --go "$@" || unset "node[$s]" ;;
        nv4|nv17) nvsample "$NS" "$name" "$bk" w ;;
        *) sample "$NS" "$dir" "$bk" w "$@" ;;
        esac
    done
    for i in $(seq "$reps"); do
        for s in $sides; do
            [ -z "${node[$s]:-}" ] && continue
            name=${s%%:*}; bk=${s#*:}; dir=$work/ours; [ "$name" = ref ] && dir=$ref; [ "$name" = r11 ] && dir=$ref11
            if [ "$name" = floor ] || [ "$name" = gofloor ]; then
                newns; floor_cmd run "$([ "$name" = gofloor ] && echo go-)$key" "/run/netns/${node[$s]}" "/run/netns/$NS"; ip netns del "$NS"
                read -r A D E <<<"$FL"
                if [ "$name" = floor ]; then floor_div=$((floor_div + ${E:-1})); else gofloor_div=$((gofloor_div + ${E:-1})); fi
            elif [ "$name" = nv4 ] || [ "$name" = nv17 ]; then
                nvsample "${node[$s]}" "$name" "$bk" "$name$i"
            else
                sample "${node[$s]}" "$dir" "$bk" "$name$i" "$@"
            fi
            adds[$s]+="${A:-0} "; dels[$s]+="${D:-0} "; errs[$s]=$(( ${errs[$s]} + ${E:-1} ))
        done
    done
    for s in $sides; do
        [ -z "${node[$s]:-}" ] && continue
        [ "${errs[$s]}" = 0 ] || echo "$label, $s: ${errs[$s]} samples with errors (floor: divergences)" >&2
        printf -v "SA_${s%%:*}_${s#*:}" '%s' "$(med "${adds[$s]}")"
        printf -v "SD_${s%%:*}_${s#*:}" '%s' "$(med "${dels[$s]}")"
    done
}
v() { local n="$1"; echo "${!n:-}"; }

# 3a. The peers (issue 28): podman's default network, which podman runs either through CNI
# (its 87-podman-bridge.conflist: bridge with ipMasq and hairpinMode + host-local, portmap with
# one hostPort, firewall, tuning; benches/chain.sh PODMAN=1) or through netavark
# (benches/netavark.sh, the same subnet, bridge name and port). Sides: cnibox on both netfilter
# backends, the reference (iptables), netavark 1.4 (Debian 12, iptables only) and 1.17 (Debian
# unstable, from a debootstrapped root, nftables and iptables), the floor of cnibox's nftables chain.
nv4_bin=""; nvroot=""; nvdata=""; nv_chroot_ns=0; nv_notes=()
if [ -x /usr/lib/podman/netavark ]; then
    nv4_bin=/usr/lib/podman/netavark; nv4_ver=$("$nv4_bin" --version 2>/dev/null | awk '{print $2}')
else
    nv_notes+=("no netavark 1.4 (Debian 12's netavark package: /usr/lib/podman/netavark)")
fi
r=${NETAVARK_ROOT:-/var/cache/cnibox-bench/unstable}
if [ -x "$r/usr/lib/podman/netavark" ] && nv17_ver=$(chroot "$r" /usr/lib/podman/netavark --version 2>/dev/null | awk '{print $2}'); then
    nvroot=$r; nvdata=$(mktemp -d "$nvroot/tmp/cnibox-compare.XXXXXX")
    # What `chroot ROOT` adds to a call (exec of the chroot program, the chroot): the same
    # no-op program spawned directly and through chroot, interleaved; the difference of the
    # medians is taken off every netavark 1.17 call. Every other side is spawned directly by
    # the floor binary (posix_spawn), as a runtime spawns a plugin or podman netavark: there
    # the harness adds nothing to subtract.
    if [ -n "$noop" ] && [ -n "$spawner" ]; then
        cp "$noop" "$nvdata/noop"; d=(); c=()
        for _ in $(seq $((reps * 4))); do
            "$spawner" --time-exec "$work/t" "$noop"; d+=("$(<"$work/t")")
            "$spawner" --time-exec "$work/t" chroot "$nvroot" "${nvdata#"$nvroot"}/noop"; c+=("$(<"$work/t")")
        done
        nv_chroot_ns=$(awk -v c="$(med "${c[*]}")" -v d="$(med "${d[*]}")" 'BEGIN {printf "%d", c - d}')
        echo "chroot adds $(ms "$nv_chroot_ns") ms to a call (no-op program: $(ms "$(med "${d[*]}")") ms direct); taken off netavark 1.17's calls"
    else
        nv_notes+=("the chroot program's cost (~1 ms a call) is not taken off netavark 1.17's calls (no floor binary or no musl-gcc)")
    fi
else
    nv_notes+=("no netavark 1.17 (a Debian unstable root in $r: benches/peers-root.sh makes it)")
fi
for n in "${nv_notes[@]}"; do echo "compare.sh: $n" >&2; done
nv_label() { echo "$( [ -n "$nv4_bin" ] && echo "netavark 1.4 = $nv4_ver")$( [ -n "$nvroot" ] && echo "${nv4_bin:+, }netavark 1.17 = $nv17_ver")"; }
peers_rows() {
    local ok bk
    PODMAN=1 scenario podman "podman default network" "ours:nftables ours:iptables ref:iptables r11:iptables nv4:iptables nv17:nftables nv17:iptables floor:nftables" bridge portmap firewall tuning
    row "podman default network ADD, nftables (ms; reference, netavark 1.4: iptables)" "$SA_ref_iptables" "$SA_ours_nftables" "$(v SA_floor_nftables)" "$(v SA_nv4_iptables)" "$(v SA_nv17_nftables)" "$(v "SA_r11_iptables")"
    row "podman default network DEL, nftables (ms; reference, netavark 1.4: iptables)" "$SD_ref_iptables" "$SD_ours_nftables" "$(v SD_floor_nftables)" "$(v SD_nv4_iptables)" "$(v SD_nv17_nftables)" "$(v "SD_r11_iptables")"
    row "podman default network ADD, iptables (ms)" "$SA_ref_iptables" "$SA_ours_iptables" "" "$(v SA_nv4_iptables)" "$(v SA_nv17_iptables)" "$(v "SA_r11_iptables")"
    row "podman default network DEL, iptables (ms)" "$SD_ref_iptables" "$SD_ours_iptables" "" "$(v SD_nv4_iptables)" "$(v SD_nv17_iptables)" "$(v "SD_r11_iptables")"
    for bk in nftables iptables; do
        if [ -n "$nvroot" ]; then
            tgt "podman default network ADD ≥ 5× faster than netavark 1.17, both on $bk" "$(ratio "$(v "SA_nv17_$bk")" "$(v "SA_ours_$bk")")" "$(ge "$(v "SA_nv17_$bk")" "$(v "SA_ours_$bk")" 5)"
            tgt "podman default network DEL ≥ 3× faster than netavark 1.17, both on $bk" "$(ratio "$(v "SD_nv17_$bk")" "$(v "SD_ours_$bk")")" "$(ge "$(v "SD_nv17_$bk")" "$(v "SD_ours_$bk")" 3)"
        else
            tgt "podman default network ADD ≥ 5× / DEL ≥ 3× faster than netavark 1.17, both on $bk" "not measured: no netavark 1.17" "missed"
        fi
    done
}
if [ "${PEERS_ONLY:-0}" = 1 ]; then peers_rows; printf '%s\n' "${targets[@]}"; exit 0; fi

# 3b. IPv4, IPv6 and dual-stack (issues 23 and 28): every applet that takes addresses, with
# host-local ranges of each family (benches/chain.sh FAMILY; flannel: its subnet file), the
# chain and podman's default network (netavark beside it: 1.4 on iptables, 1.17 on nftables),
# ours and the peers in the same rounds. The reference (v1.9.1) waits for duplicate address
# detection (1-2 s) in ptp and macvlan, not in bridge; Debian's v1.1.1 beside it waits in ptp
# only (its macvlan returns the address still tentative). cnibox: no detection where no duplicate can exist (ptp; bridge without
# enabledad), fast detection waited for elsewhere (macvlan). host-device gets an ipam section
# in these rows only. No reference for flannel (neither release ships it), no v1.1.1 for tap.
family_rows() {
    local a fam v4 sides plugs ob rb what podman
    for a in ${V6_APPLETS:-ptp bridge macvlan tap host-device flannel chain podman}; do
        sides="ours: floor: ref: r11: gofloor:"; plugs=$a; ob=""; rb=""; what="$a+host-local"; podman=0
        case $a in
        tap) what=$a ;;
        flannel) sides="ours: floor:"; what=$a ;;
        host-device) what="host-device+host-local" ;;
        chain) sides="ours:nftables floor:nftables ref:iptables r11:iptables"; plugs="bridge portmap firewall bandwidth"; ob=nftables; rb=iptables; what="chain (nftables; reference: iptables)" ;;
        podman) sides="ours:nftables floor:nftables ref:iptables r11:iptables nv4:iptables nv17:nftables"; plugs="bridge portmap firewall tuning"; ob=nftables; rb=iptables; podman=1
            what="podman default network (nftables; reference, netavark 1.4: iptables)" ;;
        esac
        for fam in v4 v6 dual; do
            export FAMILY=$fam
            # shellcheck disable=SC2086
            PODMAN=$podman scenario "$a" "$a $fam" "$sides" $plugs
            row "$what ADD, $fam (ms)" "$(v "SA_ref_$rb")" "$(v "SA_ours_$ob")" "$(v "SA_floor_$ob")" "$(v SA_nv4_iptables)" "$(v SA_nv17_nftables)" "$(v "SA_r11_$rb")" "$(v "SA_gofloor_$rb")"
            [ $fam = v6 ] || row "$what DEL, $fam (ms)" "$(v "SD_ref_$rb")" "$(v "SD_ours_$ob")" "$(v "SD_floor_$ob")" "$(v SD_nv4_iptables)" "$(v SD_nv17_nftables)" "$(v "SD_r11_$rb")" "$(v "SD_gofloor_$rb")"
            printf -v "FA_${a//-/_}_${fam}" '%s' "$(v "SA_ours_$ob")"
        done
        unset FAMILY
        v4=$(v "FA_${a//-/_}_v4")
        for fam in v6 dual; do
            echo "$a: $fam ADD / IPv4 ADD (cnibox): $(ratio2 "$(v "FA_${a//-/_}_${fam}")" "$v4")"
            case $a in ptp|bridge) ;; *) continue ;; esac
            tgt "$a $fam ADD within 1.2× of its IPv4 ADD" "$(ratio2 "$(v "FA_${a//-/_}_${fam}")" "$v4")×" "$(ge "$v4" "$(v "FA_${a//-/_}_${fam}")" 0.8333)"
        done
    done
}
if [ "${V6_ONLY:-0}" = 1 ]; then family_rows; exit 0; fi

# bridge + host-local ADD and DEL into a fresh container namespace.
scenario bridge "bridge+host-local" "ours: ref: r11: floor: gofloor:" bridge
row "bridge+host-local ADD (ms)" "$SA_ref_" "$SA_ours_" "$(v SA_floor_)" "" "" "$(v "SA_r11_")" "$(v SA_gofloor_)"
row "bridge+host-local DEL (ms)" "$SD_ref_" "$SD_ours_" "$(v SD_floor_)" "" "" "$(v "SD_r11_")" "$(v SD_gofloor_)"
floor_tgt "bridge+host-local ADD ≥ 5× faster" 5 "$SA_ref_" "$SA_ours_" "$(v SA_floor_)"
floor_tgt "bridge+host-local DEL ≥ 1.5× faster" 1.5 "$SD_ref_" "$SD_ours_" "$(v SD_floor_)"
[ -n "$(v SD_floor_)" ] && tgt "bridge+host-local DEL within 1.2× of its floor" "cnibox/floor $(ratio2 "$SD_ours_" "$SD_floor_")" "$(ge "$SD_floor_" "$SD_ours_" 0.8333)"

# the chain bridge(+ipMasq) → portmap → firewall → bandwidth. cnibox on both netfilter backends;
# the reference (v1.1.1) has only iptables; the floor replays cnibox's nftables chain.
scenario chain "chain" "ours:nftables ours:iptables ref:iptables r11:iptables floor:nftables" bridge portmap firewall bandwidth
row "chain ADD, nftables (ms; reference: iptables)" "$SA_ref_iptables" "$SA_ours_nftables" "$(v SA_floor_nftables)" "" "" "$(v "SA_r11_iptables")"
row "chain DEL, nftables (ms; reference: iptables)" "$SD_ref_iptables" "$SD_ours_nftables" "$(v SD_floor_nftables)" "" "" "$(v "SD_r11_iptables")"
row "chain ADD, iptables (ms)" "$SA_ref_iptables" "$SA_ours_iptables" "" "" "" "$(v "SA_r11_iptables")"
row "chain DEL, iptables (ms)" "$SD_ref_iptables" "$SD_ours_iptables" "" "" "" "$(v "SD_r11_iptables")"
floor_tgt "chain ADD with nftables ≥ 10× faster" 10 "$SA_ref_iptables" "$SA_ours_nftables" "$(v SA_floor_nftables)"
floor_tgt "chain DEL with nftables ≥ 3× faster" 3 "$SD_ref_iptables" "$SD_ours_nftables" "$(v SD_floor_nftables)"
peers_rows

# The newer applets on their own (tuning: on the interface of an untimed ptp). No reference for
# flannel (neither release ships it), no v1.1.1 column for tap (Debian's v1.1.1 has none). This kernel has no ipvlan, dummy,
# vrf or vlan link kinds: those are measured nowhere here (their tests run in the qemu VM).
for a in ptp macvlan tuning tap host-device flannel; do
    sides="ours: ref: r11: floor: gofloor:"; case $a in flannel) sides="ours: floor:" ;; esac
    plug=$a; [ $a = tuning ] && plug="=ptp tuning"
    # shellcheck disable=SC2086
    scenario "$a" "$a" "$sides" $plug
    row "$a ADD (ms)" "$(v SA_ref_)" "$SA_ours_" "$(v SA_floor_)" "" "" "$(v "SA_r11_")" "$(v SA_gofloor_)"
    row "$a DEL (ms)" "$(v SD_ref_)" "$SD_ours_" "$(v SD_floor_)" "" "" "$(v "SD_r11_")" "$(v SD_gofloor_)"
done
family_rows
[ -z "$floor_why" ] && [ "$floor_div" != 0 ] && echo "floor: $floor_div replay divergences (FLOOR_VERBOSE=1 shows them)" >&2
[ -z "$floor_why" ] && [ "$gofloor_div" != 0 ] && echo "floor of v1.9.1: $gofloor_div replay divergences (FLOOR_VERBOSE=1 shows them)" >&2
del_tgt

# 4. host-local ADD+DEL with N existing reservations (files in upstream format). The page
# cache is controlled: before every sample each side's whole state directory is read (as
# vmtouch would), so no sample reads from disk although this VM reclaims page cache between
# samples (DAMON); COLD=1 adds a variant that drops all caches before each sample instead.
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
warm() { find "$1" -type f -exec cat {} + >/dev/null; }
hl_conf() { printf '{"cniVersion":"1.0.0","name":"bench","type":"host-local","ipam":{"type":"host-local","subnet":"10.210.0.0/16","dataDir":"%s"}}' "$1"; }
hl_pair() { # impl i → D: ns per call of one ADD+DEL
    local dir=$work/ours c t; [ "$1" = ref ] && dir=$ref
    c=$(hl_conf "$work/hl-$1")
    t=${EPOCHREALTIME/./}000
    CNI_COMMAND=ADD CNI_CONTAINERID=b$2 CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
    CNI_COMMAND=DEL CNI_CONTAINERID=b$2 CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
    D=$(( (${EPOCHREALTIME/./}000-t)/2 ))
}
cold_rows=()
for n in 10 1000 5000; do
    [ $quick = 1 ] && [ $n = 1000 ] && continue
    for impl in ours ref; do rm -rf "$work/hl-$impl"; fill "$work/hl-$impl" $n; done
    # Let writeback of the fresh files finish, and take each side's first ADD out of the
    # samples: on a directory the Go plugin wrote, our first ADD builds its index once (~80 ms
    # at 5,000 files), every later call is O(1).
    sync
    for impl in ours ref; do
        dir=$work/ours; [ $impl = ref ] && dir=$ref
        c=$(hl_conf "$work/hl-$impl")
        t=${EPOCHREALTIME/./}000
        CNI_COMMAND=ADD CNI_CONTAINERID=warm CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
        [ $impl = ours ] && [ $n = 5000 ] && first5000=$(( ${EPOCHREALTIME/./}000-t ))
        CNI_COMMAND=DEL CNI_CONTAINERID=warm CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=$dir "$dir/host-local" <<<"$c" >/dev/null
    done
    o=(); r=()
    for i in $(seq "$reps"); do
        for impl in ours ref; do
            warm "$work/hl-$impl"; hl_pair $impl $i
            if [ $impl = ours ]; then o+=($D); else r+=($D); fi
        done
    done
    m1=$(printf '%s\n' "${o[@]}" | median); m2=$(printf '%s\n' "${r[@]}" | median)
    row "host-local ADD/DEL, $n reserved, warm cache (ms per call)" "$m2" "$m1"
    if [ $n = 10 ]; then hl10=$m1; fi
    if [ $n = 5000 ]; then tgt "host-local at 5,000 reservations ≤ 1.5× its cost at 10 (warm cache: state read before each sample)" "$(ratio "$m1" "$hl10")" "$(ge "$hl10" "$m1" 0.6667)"; fi
    svg_points+=("$n $m1 $m2")
    if [ "${COLD:-0}" = 1 ] && [ $n != 1000 ]; then
        o=(); r=()
        for i in $(seq 5); do
            for impl in ours ref; do
                sync; echo 3 > /proc/sys/vm/drop_caches; hl_pair $impl c$i
                if [ $impl = ours ]; then o+=($D); else r+=($D); fi
            done
        done
        m1=$(printf '%s\n' "${o[@]}" | median); m2=$(printf '%s\n' "${r[@]}" | median)
        cold_rows+=("host-local ADD/DEL, $n reserved, cold cache (ms per call)|$m2|$m1")
        [ $n = 10 ] && hl10c=$m1
        [ $n = 5000 ] && tgt "host-local at 5,000 reservations ≤ 1.5× its cost at 10, cold cache (drop_caches before each sample)" "$(ratio "$m1" "$hl10c")" "$(ge "$hl10c" "$m1" 0.6667)"
    fi
done
for c in "${cold_rows[@]}"; do IFS='|' read -r a b d <<<"$c"; row "$a" "$b" "$d"; done
row "host-local first ADD on 5,000 Go-written files (ms, once: index build)" "" "$first5000"

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
rows+=("| 64 concurrent host-local ADDs, wall (ms) [errors] | $(ms "$rw") [$re] |  |  |  | $(ms "$cw") [$ce] |  |  | $(ratio "$rw" "$cw") |  |")
echo "64 concurrent host-local ADDs: ref $(ms "$rw") [$re] cnibox $(ms "$cw") [$ce]"

# 6. peak RSS of a bridge ADD (the first on a fresh node: it creates the bridge), median of
# 7 samples per side, interleaved, each in new namespaces. RSS counts the binary's pages the
# process mapped, which depends on how the kernel faults them in: single samples vary ±20 %.
conf() { printf '{"cniVersion":"1.0.0","name":"bench","type":"bridge","bridge":"%s","isGateway":true,"ipam":{"type":"host-local","subnet":"10.200.0.0/16","dataDir":"%s"}}' "$1" "$2"; }
rss() { # dir sample
    local c node ctr; c=$(conf cbrss "$work/rss-$(basename "$1")-$2")
    newns; node=$NS; newns; ctr=$NS
    nsenter --net="/run/netns/$node" env CNI_COMMAND=ADD CNI_CONTAINERID=rss CNI_NETNS=/run/netns/$ctr CNI_IFNAME=eth0 CNI_PATH="$1" \
        /usr/bin/time -f %M "$1/bridge" <<<"$c" 2>&1 >/dev/null | tail -1
    ip netns del "$node"; ip netns del "$ctr"
}
if [ -x /usr/bin/time ]; then
    rso=(); rsr=()
    for i in 1 2 3 4 5 6 7; do rso+=("$(rss "$work/ours" "$i")"); rsr+=("$(rss "$ref" "$i")"); done
    ro=$(med "${rso[*]}"); rr=$(med "${rsr[*]}")
    RAW=1 row "peak RSS of bridge ADD (KiB, bridge process, median of 7)" "$rr" "$ro"
    tgt "peak RSS ≤ 1/5 of the reference" "$(ratio "$rr" "$ro")" "$(ge "$rr" "$ro" 5)"
fi
# Size: the whole binary against every reference plugin it replaces (each applet of ours that
# Debian's package ships as a separate binary).
size_o=$(stat -c %s "$work/ours/cnibox")
have=0; names=()
for a in $("$work/ours/cnibox" --list); do [ -f "$ref/$a" ] && { have=$((have + $(stat -c %s "$ref/$a"))); names+=("$a"); }; done
RAW=1 row "size on disk (bytes): cnibox vs the ${#names[@]} reference plugins it replaces" "$have" "$size_o"
tgt "binary < 1.5 MB and ≤ 1/30 of the ${#names[@]} reference plugins it replaces" "$(ratio "$have" "$size_o"), $(awk -v b="$size_o" 'BEGIN {printf "%.2f MB", b/1e6}')" "$( [ "$(ge "$have" "$size_o" 30)" = met ] && [ "$size_o" -lt 1500000 ] && echo met || echo missed)"

# >>> growth hook (issue 16, growth lane): benches/growth.sh, when present, is run as
#   benches/growth.sh CNIBOX_BINARY [N]   (--quick: 60 containers, one round)
# Its stdout is a markdown section placed after the targets table; lines of it that start with
# "target: " are rows of the targets table instead ("target: | TARGET | MEASURED | met |").
growth_md=""
if [ -f "$here/growth.sh" ]; then
    gargs=("$work/ours/cnibox"); genv=()
    [ $quick = 1 ] && { gargs+=(60); genv=(GROWTH_ROUNDS=1); }
    gout=$(env "${genv[@]}" bash "$here/growth.sh" "${gargs[@]}") || echo "compare.sh: growth.sh failed" >&2
    while IFS= read -r l; do
        case $l in "target: "*) targets+=("${l#target: }") ;; *) growth_md+="$l"$'\n' ;; esac
    done <<<"${gout:-}"
fi
# <<< growth hook

# >>> cold hook (issue 37 item 2, edge lane): benches/cold.sh CNIBOX_BINARY [--quick] (cold
# starts on an SD-card-class loop device, page cache at rest; ~1.5 min full, root, losetup and
# the cgroup v1 blkio throttle) prints a markdown section placed after the growth section; its
# "target: " lines are rows of the targets table. A machine that cannot do it leaves a note
# with the reason instead. COLD_START=0 skips it.
cold_md=""
if [ "${COLD_START:-1}" != 0 ] && [ -f "$here/cold.sh" ]; then
    cqa=(); [ $quick = 1 ] && cqa=(--quick)
    cout=$(bash "$here/cold.sh" "$work/ours/cnibox" "${cqa[@]}" 2>"$work/cold.err") || echo "compare.sh: cold.sh failed" >&2
    cat "$work/cold.err" >&2
    while IFS= read -r l; do
        case $l in "target: "*) targets+=("${l#target: }") ;; *) cold_md+="$l"$'\n' ;; esac
    done <<<"${cout:-}"
    if [ -z "${cout:-}" ]; then
        why=$(grep -h "^cold.sh: " "$work/cold.err" | tail -1 || true)
        cold_md="## Cold starts on SD-card-class storage (issue 37)"$'\n\n'"benches/cold.sh: not measured in this run (${why#cold.sh: })."$'\n'
    fi
fi
# <<< cold hook

# >>> clients hook (issue 28 item 2, clients lane): `podman run --rm` (benches/podman.sh: podman
# 4.3 on CNI with cnibox on iptables and nftables and with the reference, on netavark 1.4, podman 5
# on netavark 1.17) and pods through containerd's CRI (benches/cri.sh: cnibox, the reference),
# each run as  benches/X.sh CNIBOX_BINARY [--quick]  (full: ~1 + ~3 min, --quick: ~0.5 + ~1 min
# on the 2-core VM). Each prints a markdown paragraph and table, placed under "Pods and
# containers as clients see them" after the growth section; a script that prints nothing (a
# missing tool, its reason on stderr) or fails leaves a note there instead. CLIENTS=0 skips both.
clients_md=""
if [ "${CLIENTS:-1}" != 0 ]; then
    qa=(); [ $quick = 1 ] && qa=(--quick)
    t0=$SECONDS
    for c in podman cri; do
        cout=""
        [ -f "$here/$c.sh" ] && { cout=$(bash "$here/$c.sh" "$work/ours/cnibox" "${qa[@]}" 2>"$work/$c.err") || echo "compare.sh: $c.sh failed" >&2; }
        cat "$work/$c.err" >&2 2>/dev/null || true
        if [ -n "$cout" ]; then
            # "target: " lines (cri.sh's pods/s targets, issue 37) go to the targets table.
            while IFS= read -r l; do
                case $l in "target: "*) targets+=("${l#target: }") ;; *) clients_md+="$l"$'\n' ;; esac
            done <<<"$cout"
            clients_md+=$'\n'
        else
            why=$(grep -h "^$c.sh: " "$work/$c.err" 2>/dev/null | tail -1 || true); why=${why#"$c.sh: "}
            clients_md+="benches/$c.sh: not measured in this run (${why:-it failed or is missing; see its stderr})."$'\n\n'
        fi
    done
    echo "compare.sh: podman.sh and cri.sh took $((SECONDS - t0)) s" >&2
fi
# <<< clients hook

# Report.
{
    echo "# cnibox vs reference plugins vs the kernel floor"
    echo
    echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores (a machine shared with other jobs: absolute times drift, the interleaved ratios hold), $("$work/ours/cnibox" --version | head -1), kernel $(uname -r), reference: upstream containernetworking-plugins v1.9.1 ($ref)$( [ -n "$ref11" ] && echo ", Debian 12's $(dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null || echo v1.1.1) beside it (column reference v1.1.1; ratios and targets are against v1.9.1)")."
    echo "Medians of $reps interleaved samples (reference, cnibox, floor, in turn; each side in its own node namespace after one untimed warm-up sample)."
    echo "floor = the same system calls cnibox made, replayed from one running process (benches/floor.rs; what it includes: benches/NOTES.md, \"The floor\")$( [ -n "$floor_why" ] && echo " — not measured in this run: $floor_why")$( [ -z "$floor_why" ] && [ "$floor_div" != 0 ] && echo " — $floor_div replay divergences in this run")."
    echo "netavark: podman's own network stack, in the podman default network rows only ($(nv_label)$( [ ${#nv_notes[@]} -gt 0 ] && printf '; %s' "${nv_notes[@]}")); benches/NOTES.md, \"The peers\"."
    [ -z "$floor_why" ] && echo "floor of v1.9.1 = the same for the reference's own system calls (benches/floor-record.py --go: every thread and process of a Go plugin run in one stream, following each thread's namespace)$( [ "$gofloor_div" != 0 ] && echo " — $gofloor_div replay divergences in this run"); floor of v1.9.1/floor: > 1 means the reference asks the kernel for more work than cnibox does. Not for the chain and podman rows: their reference runs iptables programs, whose nf_tables batches the replayer does not map."
    echo "cnibox/floor: > 1 is what cnibox adds to the kernel's work; reference/cnibox and netavark 1.17/cnibox: > 1 means cnibox is faster or smaller."
    echo
    # A netavark that was not measured has no column (the note above says why).
    { echo "| measurement | reference v1.9.1 | reference v1.1.1 | netavark 1.4 | netavark 1.17 | cnibox | floor | cnibox/floor | reference/cnibox | netavark 1.17/cnibox | floor of v1.9.1 | floor of v1.9.1/floor |"
      echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
      printf '%s\n' "${rows[@]}"; } |
        awk -F'|' -v OFS='|' -v r11="$ref11" -v n4="$nv4_bin" -v n17="$nvroot" -v nf="$floor_why" '{
            line = ""
            for (i = 1; i <= NF; i++) {
                if ((i == 4 && r11 == "") || (i == 5 && n4 == "") || ((i == 6 || i == 11) && n17 == "") || ((i == 12 || i == 13) && nf != "")) continue
                line = line (line == "" && i == 1 ? "" : "|") $i
            }
            print line }'
    echo
    echo "Not measured on this kernel (no such link kind): ipvlan, dummy, vrf, vlan; they are tested in the qemu VM (tests/vm/)."
    echo
    echo "![host-local latency against existing reservations](benches/host-local-scaling.svg)"
    echo
    echo "## Targets (issues 6, 16, 23, 28 and 37), from this run"
    echo
    echo "| target | measured | |"
    echo "|---|---|---|"
    printf '%s\n' "${targets[@]}"
    echo
    [ -n "$growth_md" ] && printf '%s\n' "$growth_md"
    [ -n "$cold_md" ] && printf '%s\n' "$cold_md"   # cold hook (issue 37)
    if [ -n "$clients_md" ]; then
        echo "## Pods and containers as clients see them (issue 28), from this run"
        echo
        printf '%s' "$clients_md"
    fi
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
