#!/bin/sh
# The vrf applet end to end inside the test VM (the build machine's kernel has no vrf):
#     tests/vm/run.sh --bin target/x86_64-unknown-linux-musl/release/cnibox --script tests/vm/vrf.sh
#
# Container namespace a holds va0 (10.120.1.2/24, fd00:120::2/64, a route 10.120.9.0/24 via
# 10.120.1.1) and va1 (10.120.2.2/24), veths to namespace b (10.120.1.1, 10.120.2.1, 10.120.9.1
# on lo). The prevResult names the interface, as bridge/ptp would. Then: both into vrf0 (table
# chosen: 1), routes moved into the VRF's table, ping through the VRF, CHECK, errors and undo,
# DEL of one keeps the VRF, DEL of the last removes it, a fixed table, and, when tests/vm.rs put
# the Go plugin in the VM as /ref/vrf, the same VRF/table/rules from both and each one's CHECK
# and DEL of the other's attachment.
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
NSA=$(netns_path a)

# vconf IFACE VRFNAME [EXTRA_KEYS]: a chained vrf config whose prevResult names IFACE in a.
vconf() {
    printf '{"cniVersion":"1.0.0","name":"vrfnet","type":"vrf","vrfname":"%s"%s,' "$2" "$3"
    printf '"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],' "$1" "$NSA"
    printf '"ips":[{"address":"10.120.0.0/24","interface":0}]}}'
}
ina() { nsenter --net="$NSA" "$@"; }
has_link() { ina ip link show "$1" >/dev/null 2>&1; }
in_vrf() { ina ip link show "$1" | grep -q "master $2 "; }

# prep: (re)configure a's interfaces as the first plugin of the chain left them.
prep() {
    for i in 0 1; do
        ina ip addr flush dev va$i
        ina ip addr add 10.120.$((i + 1)).2/24 dev va$i
        ina ip link set va$i up
    done
    ina ip -6 addr add fd00:120::2/64 dev va0
    ina ip route add 10.120.9.0/24 via 10.120.1.1 dev va0
}

echo "kernel $(uname -r)"
check "vrf loaded" grep -q '^vrf ' /proc/modules
check "netns a" netns_add a
check "netns b" netns_add b
for i in 0 1; do
    check "veth va$i <-> vb$i" veth_add va$i vb$i
    check "va$i into a" link_to_netns va$i a
    check "vb$i into b" link_to_netns vb$i b
    netns_exec b ip addr add 10.120.$((i + 1)).1/24 dev vb$i
    netns_exec b ip link set vb$i up
done
netns_exec b ip -6 addr add fd00:120::1/64 dev vb0
netns_exec b ip addr add 10.120.9.1/32 dev lo
prep
check "route via the gateway in main" sh -c "nsenter --net=$NSA ip route | grep -q '10.120.9.0/24 via 10.120.1.1'"

C0=$(vconf va0 vrf0)
C1=$(vconf va1 vrf0)
run ADD vrf c0 "$NSA" va0 "$C0"; must_ok "ADD va0 into vrf0"
check "prevResult passed through" sh -c "echo '$OUT' | grep -q '10.120.0.0/24' && echo '$OUT' | grep -q '\"name\": \"va0\"'"
check "vrf0 exists" has_link vrf0
check "va0 in vrf0" in_vrf va0 vrf0
check "connected route in table 1" sh -c "nsenter --net=$NSA ip route show table 1 | grep -q '10.120.1.0/24 dev va0'"
check "gateway route moved into table 1" sh -c "nsenter --net=$NSA ip route show table 1 | grep -q '10.120.9.0/24 via 10.120.1.1 dev va0'"
check "nothing of va0 left in main" sh -c "! nsenter --net=$NSA ip route | grep -q va0"
check "global IPv6 address kept" sh -c "nsenter --net=$NSA ip -6 addr show dev va0 | grep -q fd00:120::2"
# Enslaving cycles the link: the kernel probes the address again; ADD returns once it is usable.
check "global IPv6 address usable right after ADD (not tentative)" sh -c "! nsenter --net=$NSA ip -6 addr show dev va0 | grep fd00:120::2 | grep -q tentative"
ina ip rule
run ADD vrf c1 "$NSA" va1 "$C1"; must_ok "ADD va1 into the same vrf0"
check "va1 in vrf0" in_vrf va1 vrf0
check "two interfaces in vrf0" [ "$(ina ip link show | grep -c 'master vrf0')" = 2 ]
check "ping through the VRF (connected)" ina ping -q -c 1 -W 5 -I vrf0 10.120.2.1
check "ping through the VRF (moved gateway route)" ina ping -q -c 1 -W 5 -I vrf0 10.120.9.1
check "no route outside the VRF" sh -c "! nsenter --net=$NSA ping -q -c 1 -W 1 10.120.9.1 >/dev/null 2>&1"

run CHECK vrf c0 "$NSA" va0 "$C0"; must_ok "CHECK va0"
run CHECK vrf c0 "$NSA" va0 "$(vconf va0 vrfx)"; must_fail "CHECK with another vrf" 999 "vrfx"
run CHECK vrf c0 "$NSA" va0 "$(vconf va0 vrf0 ',"table":5')"; must_fail "CHECK with another table" 999 "table"
run ADD vrf c0 "$NSA" va0 "$(vconf va0 vrf0 ',"table":7')"; must_fail "existing VRF, other table" 999 "different routing table"
run ADD vrf c0 "$NSA" va0 "$(vconf va0 vrf9)"; must_fail "interface already in a VRF" 999 "already a master"
check "the VRF made for the failed ADD is gone" sh -c "! nsenter --net=$NSA ip link show vrf9 >/dev/null 2>&1"
run ADD vrf c0 "$NSA" nosuch "$(vconf nosuch vrf8)"; must_fail "missing interface" 999 "nosuch"
check "and its VRF is gone" sh -c "! nsenter --net=$NSA ip link show vrf8 >/dev/null 2>&1"
run ADD vrf c0 "$NSA" va0 "$(vconf va0 "")"; must_fail "no vrfname" 7 "vrfname"
run ADD vrf c0 "$NSA" va0 '{"cniVersion":"1.0.0","name":"vrfnet","type":"vrf","vrfname":"vrf0"}'
must_fail "no prevResult" 7 "prevResult"

run DEL vrf c0 "$NSA" va0 "$C0"; must_ok "DEL va0"
check "va0 released" sh -c "! nsenter --net=$NSA ip link show va0 | grep -q master"
check "vrf0 stays for va1" has_link vrf0
run DEL vrf c1 "$NSA" va1 "$C1"; must_ok "DEL va1 (the last)"
check "vrf0 gone" sh -c "! nsenter --net=$NSA ip link show vrf0 >/dev/null 2>&1"
run DEL vrf c1 "$NSA" va1 "$C1"; must_ok "DEL again"
run DEL vrf c1 "" va1 "$C1"; must_ok "DEL without netns"
run CHECK vrf c0 "$NSA" va0 "$C0"; must_fail "CHECK after DEL" 999 "vrf0"

# a fixed table
prep 2>/dev/null
CT=$(vconf va0 vrft ',"table":42')
run ADD vrf ct "$NSA" va0 "$CT"; must_ok "ADD with table 42"
check "routes in table 42" sh -c "nsenter --net=$NSA ip route show table 42 | grep -q '10.120.9.0/24 via 10.120.1.1'"
run CHECK vrf ct "$NSA" va0 "$CT"; must_ok "CHECK table 42"
run DEL vrf ct "$NSA" va0 "$CT"; must_ok "DEL table 42"
check "vrft gone" sh -c "! nsenter --net=$NSA ip link show vrft >/dev/null 2>&1"

# keep_addr_on_down=1, as every plugin that configures container addresses sets it: enslaving
# keeps the IPv6 address, but the link's down/up makes the kernel probe it again (tentative,
# unusable for 1-2 s); ADD returns once it is usable (the shared settling step).
prep 2>/dev/null
ina sh -c 'echo 1 > /proc/sys/net/ipv6/conf/va0/keep_addr_on_down'
tentative() { ina ip -6 addr show dev va0 | grep fd00:120::2 | grep -q tentative; }
i=0
while tentative && [ $i -lt 50 ]; do i=$((i + 1)); usleep 100000; done
check "fd00:120::2 settled before the ADD" sh -c "! nsenter --net=$NSA ip -6 addr show dev va0 | grep fd00:120::2 | grep -q tentative"
CK=$(vconf va0 vrfk)
run ADD vrf ck "$NSA" va0 "$CK"; must_ok "ADD with the address kept"
check "the kept address usable right after ADD (not tentative)" sh -c "! nsenter --net=$NSA ip -6 addr show dev va0 | grep fd00:120::2 | grep -q tentative"
run DEL vrf ck "$NSA" va0 "$CK"; must_ok "DEL (address kept)"
ina sh -c 'echo 0 > /proc/sys/net/ipv6/conf/va0/keep_addr_on_down'

# the reference plugin, if given
if [ -x /ref/vrf ] && /ref/vrf </dev/null >/dev/null 2>&1; then
    run_ref() {
        OUT=$(printf '%s' "$6" | env CNI_COMMAND="$1" CNI_CONTAINERID="$3" CNI_NETNS="$4" \
            CNI_IFNAME="$5" CNI_PATH="$BIN" "/ref/$2" 2>/tmp/stderr)
        RC=$?
    }
    # what each one makes of the same start (without the gateway route, which v1.1.1 drops)
    state() {
        ina ip route show table 1
        ina ip -6 route show table 1 | grep '^fd00:120::/64'
        ina ip rule
        for i in va0 va1; do echo "$i $(ina ip link show $i | grep -o 'master [a-z0-9]*')"; done
    }
    prep 2>/dev/null
    ina ip route del 10.120.9.0/24
    run ADD vrf c0 "$NSA" va0 "$C0"; must_ok "ours: ADD va0"
    run ADD vrf c1 "$NSA" va1 "$C1"; must_ok "ours: ADD va1"
    OURS=$(state)
    run DEL vrf c0 "$NSA" va0 "$C0"; must_ok "ours: DEL va0"
    run DEL vrf c1 "$NSA" va1 "$C1"; must_ok "ours: DEL va1"
    prep 2>/dev/null
    ina ip route del 10.120.9.0/24
    run_ref ADD vrf c0 "$NSA" va0 "$C0"; must_ok "reference: ADD va0"
    run_ref ADD vrf c1 "$NSA" va1 "$C1"; must_ok "reference: ADD va1"
    THEIRS=$(state)
    echo "$OURS"
    check "same VRF, table, routes and rules as the reference" [ "$OURS" = "$THEIRS" ]
    run CHECK vrf c0 "$NSA" va0 "$C0"; must_ok "our CHECK of the reference's attachment"
    run DEL vrf c0 "$NSA" va0 "$C0"; must_ok "our DEL of the reference's va0"
    run DEL vrf c1 "$NSA" va1 "$C1"; must_ok "our DEL of the reference's va1"
    check "our DEL removed the reference's VRF" sh -c "! nsenter --net=$NSA ip link show vrf0 >/dev/null 2>&1"
    prep 2>/dev/null
    run ADD vrf c0 "$NSA" va0 "$C0"; must_ok "ours: ADD va0 again"
    run_ref ADD vrf c1 "$NSA" va1 "$C1"; must_ok "reference: ADD va1 into our VRF"
    check "both in vrf0" sh -c "nsenter --net=$NSA ip link show va0 | grep -q 'master vrf0' && nsenter --net=$NSA ip link show va1 | grep -q 'master vrf0'"
    run_ref CHECK vrf c0 "$NSA" va0 "$C0"; must_ok "reference CHECK of our attachment"
    run_ref DEL vrf c0 "$NSA" va0 "$C0"; must_ok "reference DEL of our va0"
    run_ref DEL vrf c1 "$NSA" va1 "$C1"; must_ok "reference DEL of its va1"
    check "the reference's DEL removed our VRF" sh -c "! nsenter --net=$NSA ip link show vrf0 >/dev/null 2>&1"
else
    echo "note: no runnable /ref/vrf in the VM, reference comparison skipped"
fi
echo "vrf: all checks passed"
