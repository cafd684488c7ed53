#!/bin/sh
# IPv6 and dual-stack for the applets this build machine's kernel lacks (ipvlan, vlan, dummy),
# inside the test VM:
#     tests/vm/run.sh --bin target/x86_64-unknown-linux-musl/release/cnibox --script tests/vm/v6.sh
#
# A veth pair wa <-> wb in the root namespace: wa is the master of the ipvlan (l2) and vlan (id
# 10) links put into container namespace a; dummy needs no master. For each applet and for an
# IPv6-only and a dual-stack host-local config: the result lists the addresses, each is usable
# the moment ADD returns (bound by ping -I, no retry, and not tentative: the shared settling step,
# src/applets/shared/settle.rs), CHECK passes, DEL leaves no link and no reservation. Then the
# duplicate case where a neighbour can hold the address (ipvlan and vlan: the same address
# nodad on wb / wb.10): the ADD fails naming address and interface and leaves nothing.
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
DATA=/tmp/ipam-v6

# ranges FAM: host-local ranges of fam v6 or dual.
ranges() {
    case $1 in
    v6) printf '[[{"subnet":"fd00:140::/64"}]]' ;;
    dual) printf '[[{"subnet":"10.140.0.0/24"}],[{"subnet":"fd00:140::/64"}]]' ;;
    esac
}
# vconf APPLET FAM: the applet's config with host-local ranges of FAM.
vconf() {
    case $1 in
    ipvlan) printf '{"cniVersion":"1.0.0","name":"v6%s","type":"ipvlan","master":"wa","mode":"l2",' "$2" ;;
    vlan) printf '{"cniVersion":"1.0.0","name":"v6%s","type":"vlan","master":"wa","vlanId":10,' "$2" ;;
    dummy) printf '{"cniVersion":"1.0.0","name":"v6%s","type":"dummy",' "$2" ;;
    esac
    printf '"ipam":{"type":"host-local","dataDir":"%s","ranges":%s}}' "$DATA" "$(ranges "$2")"
}
reservations() { ls "$DATA/v6$1" 2>/dev/null | grep -c '^[0-9a-f]*[.:]'; }
gone() { ! netns_exec a ip link show eth0 >/dev/null 2>&1; }
# usable ADDR: bound inside a right now (ping -I binds its socket to ADDR: EADDRNOTAVAIL while
# the address is tentative), and not flagged tentative.
usable() {
    netns_exec a ping -q -c 1 -W 2 -I "$1" "$1" >/dev/null 2>&1 &&
        ! netns_exec a ip -6 addr show dev eth0 | grep "$1" | grep -q tentative
}

echo "kernel $(uname -r)"
check "veth pair wa <-> wb" veth_add wa wb
ip link set wa up && ip link set wb up
check "netns a" netns_add a
NSA=$(netns_path a)

for app in ipvlan vlan dummy; do
    for fam in v6 dual; do
        C=$(vconf $app $fam)
        run ADD $app c1 "$NSA" eth0 "$C"; must_ok "$app $fam: ADD"
        RES=$OUT
        IP6=$(ip6_of "$RES")
        check "$app $fam: an IPv6 address in the result" [ -n "$IP6" ]
        check "$app $fam: $IP6 usable at once" usable "$IP6"
        if [ $fam = dual ]; then
            IP4=$(ip4_of "$RES")
            check "$app $fam: an IPv4 address in the result" [ -n "$IP4" ]
            check "$app $fam: $IP4 on eth0" sh -c "nsenter --net=$NSA ip addr show eth0 | grep -q 'inet $IP4/24'"
            check "$app $fam: 2 reservations" [ "$(reservations $fam)" = 2 ]
        else
            check "$app $fam: 1 reservation" [ "$(reservations $fam)" = 1 ]
        fi
        check "$app $fam: gateways in the result" sh -c "echo '$RES' | grep -q '\"gateway\": \"fd00:140::1\"'"
        run CHECK $app c1 "$NSA" eth0 "$(with_prev "$C" "$RES")"; must_ok "$app $fam: CHECK"
        netns_exec a ip addr del "$IP6/64" dev eth0
        run CHECK $app c1 "$NSA" eth0 "$(with_prev "$C" "$RES")"
        must_fail "$app $fam: CHECK without $IP6" 999 "address $IP6/64 not found"
        run DEL $app c1 "$NSA" eth0 "$C"; must_ok "$app $fam: DEL"
        check "$app $fam: link gone" gone
        check "$app $fam: no reservation left" [ "$(reservations $fam)" = 0 ]
    done
done

# A neighbour already holds the address host-local hands out first in a new dataDir
# (fd00:140::2).
# (busybox ip has no `nodad`: the neighbour's own detection is turned off instead.)
check "vlan on wb for the neighbour" vlan_add wb 10 wb.10
for l in wb wb.10; do
    echo 0 > /proc/sys/net/ipv6/conf/$l/accept_dad
    ip link set $l up
    check "the neighbour's $l holds fd00:140::2" ip addr add fd00:140::2/64 dev $l
done
check "the neighbour's address is valid" sh -c "! ip -6 addr show dev wb | grep fd00:140::2 | grep -q tentative"
for app in ipvlan vlan; do
    for fam in v6 dual; do
        # A fresh dataDir: host-local hands out the address after its last one.
        DATA=/tmp/ipam-dup-$app-$fam
        run ADD $app c2 "$NSA" eth0 "$(vconf $app $fam)"
        must_fail "$app $fam: a duplicate address fails the ADD" 999 \
            'fd00:140::2/64 on \\"eth0\\" is already in use on the link (duplicate address detection failed)'
        check "$app $fam: nothing left in a" gone
        check "$app $fam: no reservation left" [ "$(reservations $fam)" = 0 ]
    done
done
echo "v6 done"
