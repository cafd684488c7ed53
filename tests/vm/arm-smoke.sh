#!/bin/sh
# The edge smoke test: what a small node runs, end to end, on any architecture (written for the
# ARM builds, tests/vm_arm.rs boots it under qemu-system-aarch64/-arm; it passes on x86_64 too):
#     tests/vm/run.sh --bin target/aarch64-unknown-linux-musl/release/cnibox \
#         --script tests/vm/arm-smoke.sh --modules "$(cat tests/vm/arm-smoke.modules)"
#
# The VM's root namespace is the node. Two containers (c1, c2) join the bridge `edge0` through
# bridge + host-local (ipMasq on nftables); c1 also gets portmap (hostPort 8080 -> 80, nftables)
# and bandwidth (ingress TBF on its host veth, egress through an ifb). Traffic: c1 <-> c2 over
# the bridge; a web server in c1 reached through the hostPort from the node itself (OUTPUT DNAT)
# and from an outside namespace `ext` routed through the node (PREROUTING DNAT). CHECK passes for
# every plugin. When nft is in the VM (fetch-arch.sh puts it in the sysroot), the ruleset is read
# back: the DNAT rule must say `tcp dport 8080` and `dnat to C1:80` (a byte-order slip in the
# nf_tables encoder shows here, and as a dead hostPort). DEL in reverse order leaves no link,
# qdisc, ifb, reservation or rule of the containers; a repeated DEL succeeds.
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
DATA=/tmp/ipam
NET=edgenet
BR=edge0
PORT=8080

echo "arch $(uname -m), kernel $(uname -r), $(nproc) cpu(s)"
echo "cnibox: $(cnibox --version | head -n 1)"

conf_bridge() {
    printf '{"cniVersion":"1.0.0","name":"%s","type":"bridge","bridge":"%s","isGateway":true,' "$NET" "$BR"
    printf '"ipMasq":true,"ipMasqBackend":"nftables",'
    printf '"ipam":{"type":"host-local","dataDir":"%s","subnet":"10.88.0.0/24","routes":[{"dst":"0.0.0.0/0"}]}}' "$DATA"
}
conf_portmap() { # PREV
    with_prev "$(printf '{"cniVersion":"1.0.0","name":"%s","type":"portmap","backend":"nftables","runtimeConfig":{"portMappings":[{"hostPort":%s,"containerPort":80,"protocol":"tcp"}]}}' "$NET" "$PORT")" "$1"
}
conf_bandwidth() { # PREV
    with_prev "$(printf '{"cniVersion":"1.0.0","name":"%s","type":"bandwidth","ingressRate":8000000,"ingressBurst":80000,"egressRate":4000000,"egressBurst":40000}' "$NET")" "$1"
}
# host_veth RESULT: the interface without a sandbox that is not the bridge.
host_veth() {
    echo "$1" | tr -d ' \n' | sed 's/},{/}\n{/g' | grep -v '"sandbox"' \
        | sed -n 's/.*"name":"\(veth[^"]*\)".*/\1/p' | head -n 1
}
exists() { ip link show "$1" >/dev/null 2>&1; }
gone() { ! exists "$1"; }
not() { ! "$@"; }
reservations() { ls "$DATA/$NET" 2>/dev/null | grep -c '^10\.' ; }
has_nft() { command -v nft >/dev/null 2>&1; }
ruleset() { nft list ruleset 2>&1; }
# fetch NS URL: the page, at most 5 s per try.
fetch() { netns_exec_or_root "$1" timeout 5 wget -q -O - "$2" 2>/dev/null; }
netns_exec_or_root() { _n=$1; shift; if [ "$_n" = - ]; then "$@"; else netns_exec "$_n" "$@"; fi; }
# serves NS URL TEXT: the page at URL, fetched from NS, is TEXT (retried until the server is
# up: readiness, not a fixed sleep).
serves() {
    _i=0
    while [ $_i -lt 30 ]; do
        [ "$(fetch "$1" "$2")" = "$3" ] && return 0
        _i=$((_i + 1))
        usleep 200000
    done
    return 1
}

# ------------------------------------------------------------------ two containers
check "netns c1" netns_add c1
check "netns c2" netns_add c2
for c in c1 c2; do
    run ADD bridge "edge-$c" "$(netns_path $c)" eth0 "$(conf_bridge)"
    must_ok "bridge ADD $c"
    eval "RES_$c=\$OUT"
done
IP1=$(ip4_of "$RES_c1")
IP2=$(ip4_of "$RES_c2")
HV1=$(host_veth "$RES_c1")
echo "c1 = $IP1 (host veth $HV1), c2 = $IP2"
check "c1 has an address" [ -n "$IP1" ]
check "c2 has an address" [ -n "$IP2" ]
check "c1's host veth found in the result" exists "$HV1"
check "host veth is a port of $BR" [ -e "/sys/class/net/$BR/brif/$HV1" ]
check "two reservations" [ "$(reservations)" -eq 2 ]

run ADD portmap edge-c1 "$(netns_path c1)" eth0 "$(conf_portmap "$RES_c1")"
must_ok "portmap ADD c1 (hostPort $PORT -> 80)"
PM_c1=$OUT
run ADD bandwidth edge-c1 "$(netns_path c1)" eth0 "$(conf_bandwidth "$PM_c1")"
must_ok "bandwidth ADD c1"
BW_c1=$OUT

# ------------------------------------------------------------------ traffic
check "c1 pings c2 over the bridge" netns_exec c1 ping -c 1 -W 5 "$IP2" >/dev/null
check "c2 pings c1 over the bridge" netns_exec c2 ping -c 1 -W 5 "$IP1" >/dev/null
mkdir -p /tmp/www
echo "hello from c1" > /tmp/www/index.html
netns_exec c1 httpd -f -p 80 -h /tmp/www &
HTTPD=$!
check "c2 reaches c1's web server directly" serves c2 "http://$IP1/" "hello from c1"
# an outside client routed through the node: ext (192.168.77.2) <-> node (192.168.77.1)
check "netns ext" netns_add ext
check "veth node <-> ext" veth_add xnode xext
check "xext into ext" link_to_netns xext ext
ip addr add 192.168.77.1/24 dev xnode && ip link set xnode up
netns_exec ext ip addr add 192.168.77.2/24 dev xext
netns_exec ext ip link set xext up
netns_exec ext ip route add default via 192.168.77.1
# hostport NS: the hostPort answers from NS; else show portmap's rules (when nft is here).
hostport() {
    serves "$1" "http://192.168.77.1:$PORT/" "hello from c1" && return 0
    has_nft && nft list table ip cni_hostport | grep -E 'dport|dnat' | sed 's/^/    nft: /'
    return 1
}
check "hostPort $PORT from outside (ext -> node 192.168.77.1:$PORT -> c1:80)" hostport ext
check "hostPort $PORT from the node itself (192.168.77.1:$PORT)" hostport -

# ------------------------------------------------------------------ what is on the node
check "TBF root qdisc on $HV1 (ingress shaping)" sh -c "tc qdisc show dev $HV1 | grep -q tbf"
check "ingress qdisc on $HV1 (egress shaping)" sh -c "tc qdisc show dev $HV1 | grep -q ingress"
IFB=$(echo "$BW_c1" | tr -d ' \n' | sed -n 's/.*"name":"\(bwp[0-9a-f]*\)".*/\1/p')
check "ifb $IFB in the result and on the node" exists "$IFB"
check "TBF on $IFB" sh -c "tc qdisc show dev $IFB | grep -q tbf"
if has_nft; then
    echo "--- nft list ruleset (portmap's table)"
    nft list table ip cni_hostport 2>&1 | grep -E 'dport|dnat|chain' | head -n 20
    check "nft shows the DNAT match as tcp dport $PORT" sh -c "nft list table ip cni_hostport | grep -q 'tcp dport $PORT '"
    check "nft shows dnat to $IP1:80" sh -c "nft list table ip cni_hostport | grep -q 'dnat to $IP1:80'"
    check "ipMasq rules for c1 ($IP1)" sh -c "nft list ruleset | grep -q '$IP1'"
else
    echo "(no nft in this VM: the ruleset is not read back)"
fi

for p in bridge portmap bandwidth; do
    case $p in
        bridge) conf=$(with_prev "$(conf_bridge)" "$RES_c1") ;;
        portmap) conf=$(conf_portmap "$PM_c1") ;;
        bandwidth) conf=$(conf_bandwidth "$BW_c1") ;;
    esac
    run CHECK $p edge-c1 "$(netns_path c1)" eth0 "$conf"
    must_ok "$p CHECK c1"
done

# ------------------------------------------------------------------ DEL leaves nothing
kill "$HTTPD" 2>/dev/null
wait "$HTTPD" 2>/dev/null
run DEL bandwidth edge-c1 "$(netns_path c1)" eth0 "$(conf_bandwidth "$BW_c1")"
must_ok "bandwidth DEL c1"
run DEL portmap edge-c1 "$(netns_path c1)" eth0 "$(conf_portmap "$PM_c1")"
must_ok "portmap DEL c1"
for c in c1 c2; do
    eval "prev=\$RES_$c"
    run DEL bridge "edge-$c" "$(netns_path $c)" eth0 "$(with_prev "$(conf_bridge)" "$prev")"
    must_ok "bridge DEL $c"
done
check "c1's host veth gone" gone "$HV1"
check "ifb gone" gone "$IFB"
check "no ports left on $BR" [ -z "$(ls /sys/class/net/$BR/brif)" ]
check "no reservations left" [ "$(reservations)" -eq 0 ]
check "no eth0 left in c1" not netns_exec c1 ip link show eth0 2>/dev/null
if has_nft; then
    check "no rule mentions c1 ($IP1) or c2 ($IP2)" sh -c "! nft list ruleset | grep -qE '$IP1|$IP2'"
    check "no rule mentions hostPort $PORT" sh -c "! nft list ruleset | grep -q 'dport $PORT'"
fi
check "hostPort $PORT no longer answers" not fetch ext "http://192.168.77.1:$PORT/"
for p in bandwidth portmap bridge; do
    case $p in
        bridge) conf=$(conf_bridge) ;;
        portmap) conf=$(conf_portmap "$PM_c1") ;;
        bandwidth) conf=$(conf_bandwidth "$BW_c1") ;;
    esac
    run DEL $p edge-c1 "$(netns_path c1)" eth0 "$conf"
    must_ok "repeated $p DEL c1"
done

for n in c1 c2 ext; do netns_del $n; done
echo "arm-smoke: all good ($(uname -m))"
