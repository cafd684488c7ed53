#!/bin/sh
# The vlan applet (and loopback) end to end inside the test VM (busybox ash, 8021q loaded):
#     tests/vm/run.sh --bin target/x86_64-unknown-linux-musl/release/cnibox --script tests/vm/vlan.sh
#
# The wire is a veth pair wa <-> wb in the root namespace; each end is the master of a VLAN 100
# link that the applet puts into its own container namespace (a, b), addressed by host-local
# (IPv4 + IPv6, dataDir /tmp/ipam). Then: ping across, CHECK (good and bad), STATUS, GC
# forwarded to host-local, DEL (links gone, addresses released, repeated DEL, DEL without
# netns), config errors as CNI error JSON, undo after an IPAM failure, `mtu`, and
# `linkInContainer` (masters inside the namespaces), loopback in a fresh namespace, and, when
# tests/vm.rs put the Go reference plugin in the VM, a side-by-side comparison with it.
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
DATA=/tmp/ipam

# vconf VERSION MASTER VID [EXTRA_KEYS]: a vlan config with host-local IPv4 + IPv6.
vconf() {
    printf '{"cniVersion":"%s","name":"vlannet","type":"vlan","master":"%s","vlanId":%s%s,' \
        "$1" "$2" "$3" "$4"
    printf '"ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"10.100.0.0/24"}],[{"subnet":"fd00:100::/64"}]]},' "$DATA"
    printf '"dns":{"nameservers":["10.100.0.53"]}}'
}

# (sysfs shows the namespace it was mounted in, so links inside a netns are read with `ip`.)
# in_ns NS CMD...: run CMD in NS, or in the root namespace when NS is -.
in_ns() {
    _n=$1
    shift
    if [ "$_n" = - ]; then "$@"; else netns_exec "$_n" "$@"; fi
}
# no_temp_links NS: no leftover veth<8hex> temporary names (the listing itself must work).
no_temp_links() {
    _links=$(in_ns "$1" ip -o link show) || return 1
    [ -n "$_links" ] || return 1
    ! printf '%s\n' "$_links" | grep -q ': veth[0-9a-f]\{8\}[@:]'
}
# mac_of NS IF, mtu_of NS IF
mac_of() { in_ns "$1" ip link show "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }
mtu_of() { in_ns "$1" ip link show "$2" | sed -n 's/.* mtu \([0-9]*\).*/\1/p'; }
reserved() { [ -f "$DATA/vlannet/$1" ]; }
# reservations: how many addresses host-local holds for vlannet.
reservations() { ls "$DATA/vlannet" | grep -c '^[0-9a-f]*[.:]'; }
not() { ! "$@"; }
contains() { case "$1" in *"$2"*) return 0 ;; esac; return 1; }
# is_up NS IF / is_down NS IF: IFF_UP of the link.
is_up() { in_ns "$1" ip link show "$2" | grep -q '[<,]UP[,>]'; }
is_down() { in_ns "$1" ip link show "$2" >/dev/null && not is_up "$@"; }
exists() { in_ns "$1" ip link show "$2" >/dev/null 2>&1; }
gone() { not exists "$@"; }
# untagged_unreachable: an untagged address on wb cannot be reached from a's VLAN link, while
# the tagged peer can (so the silence is the tagging's doing, not a broken ping or namespace):
# ping must end with status 1 (no reply), not 2 (an error).
untagged_unreachable() {
    netns_exec a ping -c 1 -W 5 "$IPB" >/dev/null || return 1
    ip addr add 10.100.0.250/24 dev wb || return 1
    netns_exec a ping -c 1 -W 1 10.100.0.250 >/dev/null 2>&1
    _rc=$?
    ip addr del 10.100.0.250/24 dev wb
    [ "$_rc" -eq 1 ]
}

# ping6 until IPv6 DAD has finished (the address is tentative for a moment).
ping6_retry() {
    _i=0
    while [ $_i -lt 20 ]; do
        netns_exec "$1" ping -6 -c 1 -W 2 "$2" >/dev/null 2>&1 && return 0
        _i=$((_i + 1))
        sleep 1
    done
    return 1
}

echo "kernel $(uname -r)"
check "8021q loaded" grep -q '^8021q ' /proc/modules

# ------------------------------------------------------------------ the wire and two containers
check "veth pair wa <-> wb" veth_add wa wb
ip link set wa up && ip link set wb up
check "netns a" netns_add a
check "netns b" netns_add b
NSA=$(netns_path a)
NSB=$(netns_path b)

CONF_A=$(vconf 1.1.0 wa 100)
CONF_B=$(vconf 0.4.0 wb 100)

run ADD vlan ctr-a "$NSA" eth0 "$CONF_A"; must_ok "ADD vlan 100 on wa into a (1.1.0)"
RES_A=$OUT
run ADD vlan ctr-b "$NSB" eth0 "$CONF_B"; must_ok "ADD vlan 100 on wb into b (0.4.0)"
RES_B=$OUT
echo "$RES_A"

IPA=$(ip4_of "$RES_A"); IPB=$(ip4_of "$RES_B")
IP6A=$(ip6_of "$RES_A"); IP6B=$(ip6_of "$RES_B")
echo "a: $IPA $IP6A  b: $IPB $IP6B"
check "a got an IPv4 address" [ -n "$IPA" ]
check "b got another one" [ -n "$IPB" -a "$IPA" != "$IPB" ]
check "both got IPv6 addresses" [ -n "$IP6A" -a -n "$IP6B" ]
MACA=$(mac_of a eth0)
check "eth0 in a has a MAC" [ -n "$MACA" ]
check "result: interface eth0 with its MAC" contains "$RES_A" "\"mac\": \"$MACA\""
check "result: sandbox is CNI_NETNS" contains "$RES_A" "\"sandbox\": \"$NSA\""
check "result: dns from the config" contains "$RES_A" '"10.100.0.53"'
check "result: ips point at interface 0" contains "$RES_A" '"interface": 0'
check "0.4.0 result has ips[].version" contains "$RES_B" '"version": "4"'
check "eth0 in a is VLAN 100 of wa" netns_exec a grep -q '^eth0 *| 100 *| wa' /proc/net/vlan/config
check "eth0 in b is VLAN 100 of wb" netns_exec b grep -q '^eth0 *| 100 *| wb' /proc/net/vlan/config
check "eth0 in a is up" is_up a eth0
check "eth0 in a has $IPA" contains "$(netns_exec a ip -4 addr show dev eth0)" "inet $IPA/24"
check "no eth0 on the host" gone - eth0
check "no temporary link left in the root ns" no_temp_links -
check "no temporary link left in a" no_temp_links a
check "$IPA reserved" reserved "$IPA"
check "$IPB reserved" reserved "$IPB"

check "ping a -> b over VLAN 100" netns_exec a ping -q -c 1 -W 5 "$IPB"
check "ping b -> a over VLAN 100" netns_exec b ping -q -c 1 -W 5 "$IPA"
check "ping6 a -> b over VLAN 100" ping6_retry a "$IP6B"
check "frames on the wire are tagged (no untagged path)" untagged_unreachable

# ------------------------------------------------------------------ CHECK, STATUS
run CHECK vlan ctr-a "$NSA" eth0 "$(with_prev "$CONF_A" "$RES_A")"; must_ok "CHECK a"
run CHECK vlan ctr-b "$NSB" eth0 "$(with_prev "$CONF_B" "$RES_B")"; must_ok "CHECK b (0.4.0)"
run CHECK vlan ctr-a "$NSA" eth0 "$(with_prev "$(vconf 1.1.0 wa 101)" "$RES_A")"
must_fail "CHECK with the wrong vlanId" 999 "VLAN ID"
run CHECK vlan ctr-a "$NSA" eth0 "$CONF_A"
must_fail "CHECK without prevResult" 7 "prevResult"
netns_exec a ip addr del "$IPA/24" dev eth0
run CHECK vlan ctr-a "$NSA" eth0 "$(with_prev "$CONF_A" "$RES_A")"
must_fail "CHECK notices a missing address" 999 "$IPA"
netns_exec a ip addr add "$IPA/24" dev eth0
run CHECK vlan ctr-a "$NSA" eth0 "$(with_prev "$CONF_A" "$RES_A")"; must_ok "CHECK a again"
run STATUS vlan "" "" "" "$CONF_A"; must_ok "STATUS (forwarded to host-local)"

# ------------------------------------------------------------------ ADD errors leave nothing behind
run ADD vlan ctr-a2 "$NSA" eth0 "$CONF_A"
must_fail "ADD when CNI_IFNAME already exists" 999 "already exists"
check "netns e" netns_add e
run ADD vlan ctr-x "$(netns_path e)" eth0 "$(vconf 1.0.0 wa 100)"
must_fail "ADD of a VLAN id already used on the master" 999 "already in use"
netns_del e
run ADD vlan ctr-x "$NSA" eth1 "$(vconf 1.0.0 nosuchdev 100)"
must_fail "ADD with a missing master" 999 "nosuchdev"
for v in 4095 -1 5000; do
    run ADD vlan ctr-x "$NSA" eth1 "$(vconf 1.0.0 wa $v)"
    must_fail "vlanId $v rejected" 7 "invalid VLAN ID"
done
run ADD vlan ctr-x "$NSA" eth1 '{"cniVersion":"1.0.0","name":"vlannet","type":"vlan","vlanId":5,"ipam":{"type":"host-local"}}'
must_fail "missing master rejected" 7 "master"
run ADD vlan ctr-x "$NSA" eth1 '{"cniVersion":"1.0.0","name":"vlannet","type":"vlan","master":"wa","vlanId":5}'
must_fail "missing ipam rejected" 7 "ipam"
run ADD vlan ctr-x "$NSA" eth1 "$(vconf 1.0.0 wa 5 ',"mtu":9000')"
must_fail "mtu above the master's rejected" 7 "invalid MTU"
check "none of that created eth1" gone a eth1
check "no temporary link left in a" no_temp_links a
check "no temporary link left in the root ns" no_temp_links -
check "still only the two containers' addresses reserved" [ "$(reservations)" = 4 ]

# IPAM failure after the link exists: the link is deleted again.
# tconf VID: a network whose /30 has a single free address.
tconf() {
    printf '{"cniVersion":"1.0.0","name":"tiny","type":"vlan","master":"wa","vlanId":%s,' "$1"
    printf '"ipam":{"type":"host-local","dataDir":"%s","subnet":"10.101.0.0/30"}}' "$DATA"
}
run ADD vlan ctr-t1 "$NSA" t1 "$(tconf 7)"; must_ok "ADD takes the only address of a /30"
run ADD vlan ctr-t2 "$NSA" t2 "$(tconf 8)"
must_fail "ADD fails when the range is full" 999 "IPAM"
check "the failed ADD removed its link" gone a t2
check "no temporary link left in a" no_temp_links a
run DEL vlan ctr-t1 "$NSA" t1 "$(tconf 7)"; must_ok "DEL t1"
check "t1 gone" gone a t1

# ------------------------------------------------------------------ mtu
run ADD vlan ctr-m "$NSA" eth2 "$(vconf 1.0.0 wa 300 ',"mtu":1400')"; must_ok "ADD with mtu 1400"
RES_M=$OUT
check "eth2 has MTU 1400" [ "$(mtu_of a eth2)" = 1400 ]
run CHECK vlan ctr-m "$NSA" eth2 "$(with_prev "$(vconf 1.0.0 wa 300 ',"mtu":1400')" "$RES_M")"
must_ok "CHECK with mtu"
netns_exec a ip link set eth2 mtu 1300
run CHECK vlan ctr-m "$NSA" eth2 "$(with_prev "$(vconf 1.0.0 wa 300 ',"mtu":1400')" "$RES_M")"
must_fail "CHECK notices a changed MTU" 999 "MTU"
run DEL vlan ctr-m "$NSA" eth2 "$(vconf 1.0.0 wa 300 ',"mtu":1400')"; must_ok "DEL eth2"

# ------------------------------------------------------------------ GC forwarded to host-local
GC_CONF="${CONF_A%\}}, \"cni.dev/valid-attachments\": [{\"containerID\":\"ctr-a\",\"ifname\":\"eth0\"}]}"
run ADD vlan ctr-gone "$NSA" eth3 "$(vconf 1.1.0 wa 101)"; must_ok "ADD a third attachment"
IPG=$(ip4_of "$OUT")
# ctr-b is still in use but is not listed: GC must release it (the runtime says it is gone).
run GC vlan "" "" "" "$GC_CONF"; must_ok "GC"
check "GC released $IPG" not reserved "$IPG"
check "GC released $IPB" not reserved "$IPB"
check "GC kept $IPA" reserved "$IPA"
run DEL vlan ctr-gone "$NSA" eth3 "$(vconf 1.1.0 wa 101)"; must_ok "DEL eth3"

# ------------------------------------------------------------------ DEL
run DEL vlan ctr-a "$NSA" eth0 "$(with_prev "$CONF_A" "$RES_A")"; must_ok "DEL a"
check "eth0 gone from a" gone a eth0
check "$IPA released" not reserved "$IPA"
check "wa (the master) is still there" exists - wa
run DEL vlan ctr-a "$NSA" eth0 "$CONF_A"; must_ok "second DEL a"
run DEL vlan ctr-a "" eth0 "$CONF_A"; must_ok "DEL a without CNI_NETNS"
netns_del b
run DEL vlan ctr-b "$NSB" eth0 "$CONF_B"; must_ok "DEL b after its netns is gone"
run DEL vlan ctr-b "$NSB" eth0 "$(vconf 0.4.0 nosuchdev 100)"; must_ok "DEL does not need the master"
check "no reservations left" [ "$(reservations)" = 0 ]
check "no VLAN left in a" not netns_exec a grep -q '| 100 ' /proc/net/vlan/config

# ------------------------------------------------------------------ linkInContainer
check "netns c" netns_add c
check "netns d" netns_add d
check "veth pair wc <-> wd" veth_add wc wd
check "wc into c" link_to_netns wc c
check "wd into d" link_to_netns wd d
netns_exec c ip link set wc up
netns_exec d ip link set wd up
NSC=$(netns_path c)
NSD=$(netns_path d)
CONF_C=$(vconf 1.0.0 wc 200 ',"linkInContainer":true')
CONF_D=$(vconf 1.0.0 wd 200 ',"linkInContainer":true')
run ADD vlan ctr-c "$NSC" net1 "$CONF_C"; must_ok "ADD linkInContainer (master wc inside c)"
RES_C=$OUT
run ADD vlan ctr-d "$NSD" net1 "$CONF_D"; must_ok "ADD linkInContainer (master wd inside d)"
IPD=$(ip4_of "$OUT")
check "net1 in c is VLAN 200 of wc" netns_exec c grep -q '^net1 *| 200 *| wc' /proc/net/vlan/config
check "ping c -> d over VLAN 200" netns_exec c ping -q -c 1 -W 5 "$IPD"
run CHECK vlan ctr-c "$NSC" net1 "$(with_prev "$CONF_C" "$RES_C")"; must_ok "CHECK linkInContainer"
run ADD vlan ctr-e "$NSC" net2 "$(vconf 1.0.0 wa 200 ',"linkInContainer":true')"
must_fail "linkInContainer looks for the master in the container" 999 "in the container"
run DEL vlan ctr-c "$NSC" net1 "$CONF_C"; must_ok "DEL linkInContainer"
check "net1 gone from c" gone c net1
check "wc (the master) is still in c" exists c wc
netns_del d
run DEL vlan ctr-d "$NSD" net1 "$CONF_D"; must_ok "DEL linkInContainer after the netns is gone"
check "no reservations left" [ "$(reservations)" = 0 ]

# ------------------------------------------------------------------ loopback (initramfs use case)
check "netns l" netns_add l
netns_exec l ip link set lo down
NSL=$(netns_path l)
LCONF='{"cniVersion":"1.0.0","name":"lo","type":"loopback"}'
run ADD loopback ctr-l "$NSL" eth0 "$LCONF"; must_ok "loopback ADD"
check "loopback result has 127.0.0.1/8" contains "$OUT" '"127.0.0.1/8"'
check "lo is up" is_up l lo
check "ping 127.0.0.1 in l" netns_exec l ping -q -c 1 -W 2 127.0.0.1
run CHECK loopback ctr-l "$NSL" eth0 "$(with_prev "$LCONF" "$OUT")"; must_ok "loopback CHECK"
run DEL loopback ctr-l "$NSL" eth0 "$LCONF"; must_ok "loopback DEL"
check "lo is down" is_down l lo
netns_del l
run DEL loopback ctr-l "$NSL" eth0 "$LCONF"; must_ok "loopback DEL after the netns is gone"

# ------------------------------------------------------------------ the reference plugin, if given
# tests/vm.rs adds the Go plugin as /ref/vlan (with its libc) when /usr/lib/cni has it. Ours and
# the reference each attach one end of a new wire; the results must be the same apart from
# MACs, sandboxes and addresses; traffic flows between them, and each one's CHECK and DEL
# accept what the other built.
if [ -x /ref/vlan ] && /ref/vlan </dev/null >/dev/null 2>&1; then
    run_ref() {
        OUT=$(printf '%s' "$6" | env CNI_COMMAND="$1" CNI_CONTAINERID="$3" CNI_NETNS="$4" \
            CNI_IFNAME="$5" CNI_PATH="$BIN" "/ref/$2" 2>/tmp/stderr)
        RC=$?
    }
    generic() {
        echo "$1" | sed -e 's/"mac": "[^"]*"/"mac": "M"/' -e 's#"sandbox": "[^"]*"#"sandbox": "S"#' \
            -e 's#10\.100\.0\.[0-9]*/#10.100.0.X/#' -e 's#fd00:100::[0-9a-f]*/#fd00:100::X/#'
    }
    check "veth pair wr1 <-> wr2" veth_add wr1 wr2
    ip link set wr1 up && ip link set wr2 up
    check "netns r1" netns_add r1
    check "netns r2" netns_add r2
    NSR1=$(netns_path r1)
    NSR2=$(netns_path r2)
    CONF_R1=$(vconf 1.0.0 wr1 400)
    CONF_R2=$(vconf 1.0.0 wr2 400)
    run ADD vlan ctr-r1 "$NSR1" eth0 "$CONF_R1"; must_ok "ours: ADD on wr1"
    OURS=$OUT
    run_ref ADD vlan ctr-r2 "$NSR2" eth0 "$CONF_R2"; must_ok "reference: ADD on wr2"
    THEIRS=$OUT
    generic "$OURS" > /tmp/ours.json
    generic "$THEIRS" > /tmp/theirs.json
    check "same result as the reference (MACs, sandboxes, addresses aside)" \
        diff -u /tmp/theirs.json /tmp/ours.json
    check "ping ours -> reference" netns_exec r1 ping -q -c 1 -W 5 "$(ip4_of "$THEIRS")"
    run_ref CHECK vlan ctr-r1 "$NSR1" eth0 "$(with_prev "$CONF_R1" "$OURS")"
    must_ok "reference CHECK accepts our attachment"
    run CHECK vlan ctr-r2 "$NSR2" eth0 "$(with_prev "$CONF_R2" "$THEIRS")"
    must_ok "our CHECK accepts the reference's attachment"
    run_ref DEL vlan ctr-r1 "$NSR1" eth0 "$CONF_R1"; must_ok "reference DEL of ours"
    run DEL vlan ctr-r2 "$NSR2" eth0 "$CONF_R2"; must_ok "our DEL of the reference's"
    check "both links gone" sh -c "! nsenter --net=$NSR1 ip link show eth0 2>/dev/null && ! nsenter --net=$NSR2 ip link show eth0 2>/dev/null"
    check "no reservations left" [ "$(reservations)" = 0 ]
    netns_del r1
    netns_del r2
else
    echo "note: no runnable /ref/vlan in the VM, reference comparison skipped"
fi

# ------------------------------------------------------------------ bridge with vlan + isGateway
# The gateway addresses live on <bridge>.<vlan>, which the result lists (after eth0).
netns_add bv
NSBV=$(netns_path bv)
BVCONF='{"cniVersion":"1.1.0","name":"brvlan","type":"bridge","bridge":"brv0","vlan":30,"isGateway":true,"ipam":{"type":"host-local","dataDir":"/tmp/ipam-bv","subnet":"10.130.0.0/24"}}'
run ADD bridge ctr-bv "$NSBV" eth0 "$BVCONF"; must_ok "bridge ADD with vlan 30 and isGateway"
NAMES=$(echo "$OUT" | sed -n 's/.*"name": "\([^"]*\)".*/\1/p' | tr '\n' ' ')
check "result lists brv0.30 after eth0 ($NAMES)" contains "$NAMES" "eth0 brv0.30 "
check "brv0.30 holds the gateway" sh -c "ip -4 addr show brv0.30 | grep -q 10.130.0.1/24"
run DEL bridge ctr-bv "$NSBV" eth0 "$BVCONF"; must_ok "bridge DEL with vlan"
netns_del bv

netns_del a
netns_del c
echo "vlan: all good"
