#!/usr/bin/env bash
# One benchmark sample, run by compare.sh inside the node namespace:
#   chain.sh DIR BACKEND CID NETNS DATADIR PLUGIN…
# ADDs the plugins in order (each gets the previous result as prevResult), then DELs them in
# reverse order with the final result, and prints "ADD_NS DEL_NS ERRORS". Only the plugin execs
# are timed: configs are written to a file before, results read after (bash builtins, no fork).
# CHAIN_VERBOSE=1 prints each plugin's time to stderr. A plugin written `=NAME` runs (ADD before
# the next ones, DEL after them) but is not timed: it builds what the timed one works on (tuning
# needs an interface in the container). CHAIN_SETUP, when set, is run (eval) before the first ADD.
# SPAWNER=<floor binary> times each call from spawn to exit as a runtime's posix_spawn would.
# FAMILY=v6|dual gives every applet that takes addresses (bridge, ptp, macvlan, tap,
# host-device) host-local ranges of that family (IPv6: the same number under fd00:N::/64; dual:
# both, IPv4 first) instead of its IPv4 subnet; host-device gets an ipam section only then (its
# IPv4 row has none), flannel's family comes from its subnet file (compare.sh writes it).
# PODMAN=1 is podman's default network (its 87-podman-bridge.conflist): bridge with ipMasq and
# hairpinMode, portmap with one TCP hostPort, firewall, tuning without options.
dir=$1 bk=$2 cid=$3 netns=$4 data=$5; shift 5
plugins=("$@")
# Defaults of the one-applet scenarios (compare.sh sets them per node namespace).
: "${MACVLAN_MASTER:=mvm0}" "${HOST_DEVICE:=hd0}"
# ipam N: the host-local section of subnet 10.N.0.0/16 (or its FAMILY variant).
ipam() {
    local v4="[{\"subnet\":\"10.$1.0.0/16\"}]" v6="[{\"subnet\":\"fd00:$1::/64\"}]" r
    case ${FAMILY:-v4} in v6) r="[$v6]" ;; dual) r="[$v4,$v6]" ;; *) r="[$v4]" ;; esac
    printf '"ipam":{"type":"host-local","ranges":%s,"dataDir":"%s"}' "$r" "$data"
}
conf() { # plugin → the plugin's config without its closing brace
    local bk=""; [ -n "$2" ] && bk=",\"backend\":\"$2\""
    case $1 in
    bridge) local mb=""; [ -n "$2" ] && mb=",\"ipMasqBackend\":\"$2\""
        local masq=""; [ ${#plugins[@]} -gt 1 ] && masq=",\"ipMasq\":true$mb"
        [ "${PODMAN:-0}" = 1 ] && masq+=",\"hairpinMode\":true"
        printf '{"cniVersion":"1.0.0","name":"chain","type":"bridge","bridge":"cbc","isGateway":true%s,%s' "$masq" "$(ipam 230)" ;;
    portmap) [ "${PODMAN:-0}" = 1 ] && { printf '{"cniVersion":"1.0.0","name":"chain","type":"portmap","capabilities":{"portMappings":true}%s,"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}' "$bk"; return; }
        printf '{"cniVersion":"1.0.0","name":"chain","type":"portmap","capabilities":{"portMappings":true}%s,"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"},{"hostPort":8053,"containerPort":53,"protocol":"udp"}]}' "$bk" ;;
    firewall) printf '{"cniVersion":"1.0.0","name":"chain","type":"firewall","backend":"%s"' "${2:-iptables}" ;;
    bandwidth) printf '{"cniVersion":"1.0.0","name":"chain","type":"bandwidth","ingressRate":100000000,"ingressBurst":1000000,"egressRate":100000000,"egressBurst":1000000' ;;
    ptp) printf '{"cniVersion":"1.0.0","name":"chain","type":"ptp",%s' "$(ipam 231)" ;;
    macvlan) printf '{"cniVersion":"1.0.0","name":"chain","type":"macvlan","master":"%s","mode":"bridge",%s' "$MACVLAN_MASTER" "$(ipam 232)" ;;
    tuning) [ "${PODMAN:-0}" = 1 ] && { printf '{"cniVersion":"1.0.0","name":"chain","type":"tuning"'; return; }
        printf '{"cniVersion":"1.0.0","name":"chain","type":"tuning","mtu":1400,"promisc":true,"txQLen":500,"sysctl":{"net.ipv4.conf.eth0.rp_filter":"2"},"dataDir":"%s/tuning"' "$data" ;;
    tap) printf '{"cniVersion":"1.1.0","name":"chain","type":"tap","mtu":1400,%s' "$(ipam 233)" ;;
    host-device) local hi=""; [ -n "${FAMILY:-}" ] && hi=",$(ipam 234)"
        printf '{"cniVersion":"1.0.0","name":"chain","type":"host-device","device":"%s"%s' "$HOST_DEVICE" "$hi" ;;
    flannel) printf '{"cniVersion":"1.1.0","name":"chain","type":"flannel","subnetFile":"%s/subnet.env","dataDir":"%s/flannel","delegate":{"bridge":"cfl"},"ipam":{"dataDir":"%s"}' "$data" "$data" "$data" ;;
    esac
}
export CNI_CONTAINERID=$cid CNI_NETNS=$netns CNI_IFNAME=eth0 CNI_PATH=$dir
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
add=0 del=0 err=0 res=""
# call VERB PLUGIN: one plugin call, $tmp/in → $tmp/out, its time in dt (µs). With SPAWNER (the
# floor binary) the call is spawned and timed as a runtime spawns it (posix_spawn); without,
# bash's fork of itself (~0.2 ms) is inside the timing.
call() {
    local rc t
    if [ -n "${SPAWNER:-}" ]; then
        CNI_COMMAND=$1 "$SPAWNER" --time-exec "$tmp/t" "$dir/$2" < "$tmp/in" > "$tmp/out"; rc=$?
        dt=$(( $(<"$tmp/t") / 1000 ))
    else
        t=${EPOCHREALTIME/./}
        CNI_COMMAND=$1 "$dir/$2" < "$tmp/in" > "$tmp/out"; rc=$?
        dt=$(( ${EPOCHREALTIME/./} - t ))
    fi
    return $rc
}
[ -n "${CHAIN_SETUP:-}" ] && eval "$CHAIN_SETUP"
for q in "${plugins[@]}"; do
    p=${q#=}
    c=$(conf "$p" "$bk")
    if [ -n "$res" ]; then printf '%s,"prevResult":%s}' "$c" "$res" > "$tmp/in"; else printf '%s}' "$c" > "$tmp/in"; fi
    call ADD "$p" || { err=1; echo "ADD $p: $(<"$tmp/out")" >&2; }
    [ "$q" = "$p" ] && add=$(( add + dt )); [ -n "${CHAIN_VERBOSE:-}" ] && echo "ADD $p ${dt}us" >&2
    res=$(<"$tmp/out")
done
for (( i=${#plugins[@]}-1; i>=0; i-- )); do
    q=${plugins[$i]}; p=${q#=}
    printf '%s,"prevResult":%s}' "$(conf "$p" "$bk")" "$res" > "$tmp/in"
    call DEL "$p" || { err=1; echo "DEL $p: $(<"$tmp/out")" >&2; }
    [ "$q" = "$p" ] && del=$(( del + dt )); [ -n "${CHAIN_VERBOSE:-}" ] && echo "DEL $p ${dt}us" >&2
done
echo "$((add * 1000)) $((del * 1000)) $err"
