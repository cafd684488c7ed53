#!/bin/sh
# The ipvlan applet end to end inside the test VM (the build machine's kernel has no ipvlan):
#     tests/vm/run.sh --bin target/x86_64-unknown-linux-musl/release/cnibox --script tests/vm/ipvlan.sh
#
# A veth pair wa <-> wb in the root namespace; wa is the master of the ipvlan links the applet
# puts into container namespaces a and b (host-local, dataDir /tmp/ipam-iv). Then: ping between
# them, CHECK (good, wrong mode), l3 mode, DEL (links gone, addresses released, repeated DEL, DEL
# without netns), a failed IPAM undone, config errors, the chained form (master and addresses
# from a prevResult, linkInContainer), and, when tests/vm.rs put the Go plugin in the VM as
# /ref/ipvlan, each implementation's CHECK and DEL of the other's attachment.
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
DATA=/tmp/ipam-iv

# iconf VERSION MASTER MODE [EXTRA_KEYS]: an ipvlan config with host-local.
iconf() {
    printf '{"cniVersion":"%s","name":"ivnet","type":"ipvlan","master":"%s","mode":"%s"%s,' \
        "$1" "$2" "$3" "$4"
    printf '"ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"10.110.0.0/24"}]]}}' "$DATA"
}
reservations() { ls "$DATA/ivnet" 2>/dev/null | grep -c '^10\.'; }
gone() { ! netns_exec "$1" ip link show eth0 >/dev/null 2>&1; }

echo "kernel $(uname -r)"
check "ipvlan loaded" grep -q '^ipvlan ' /proc/modules

check "veth pair wa <-> wb" veth_add wa wb
ip link set wa up && ip link set wb up
check "netns a" netns_add a
check "netns b" netns_add b
NSA=$(netns_path a)
NSB=$(netns_path b)
CONF=$(iconf 1.0.0 wa l2)

run ADD ipvlan ctr-a "$NSA" eth0 "$CONF"; must_ok "ADD a (l2 on wa)"
RES_A=$OUT
run ADD ipvlan ctr-b "$NSB" eth0 "$CONF"; must_ok "ADD b (l2 on wa)"
RES_B=$OUT
IPA=$(ip4_of "$RES_A"); IPB=$(ip4_of "$RES_B")
check "a got an address" [ -n "$IPA" ]
check "b got another" [ -n "$IPB" ] && [ "$IPA" != "$IPB" ]
check "a's eth0 has $IPA" sh -c "nsenter --net=$NSA ip addr show eth0 | grep -q $IPA/24"
check "ping a -> b (ipvlan l2 on one master)" netns_exec a ping -q -c 1 -W 5 "$IPB"
check "2 reservations" [ "$(reservations)" = 2 ]

run CHECK ipvlan ctr-a "$NSA" eth0 "$(with_prev "$CONF" "$RES_A")"; must_ok "CHECK a"
run CHECK ipvlan ctr-a "$NSA" eth0 "$(with_prev "$(iconf 1.0.0 wa l3)" "$RES_A")"
must_fail "CHECK with the wrong mode" 999 "mode"
run CHECK ipvlan ctr-a "$NSA" eth0 "$CONF"
must_fail "CHECK without prevResult" 7 "prevResult"

run DEL ipvlan ctr-a "$NSA" eth0 "$CONF"; must_ok "DEL a"
check "a's link gone" gone a
run DEL ipvlan ctr-a "$NSA" eth0 "$CONF"; must_ok "DEL a again"
run DEL ipvlan ctr-b "" eth0 "$CONF"; must_ok "DEL b without netns (addresses released)"
run DEL ipvlan ctr-b "$NSB" eth0 "$CONF"; must_ok "DEL b"
check "b's link gone" gone b
check "no reservations left" [ "$(reservations)" = 0 ]

# l3 mode
CONF3=$(iconf 1.0.0 wa l3)
run ADD ipvlan ctr-a3 "$NSA" eth0 "$CONF3"; must_ok "ADD in l3 mode"
run CHECK ipvlan ctr-a3 "$NSA" eth0 "$(with_prev "$CONF3" "$OUT")"; must_ok "CHECK l3"
run DEL ipvlan ctr-a3 "$NSA" eth0 "$CONF3"; must_ok "DEL l3"
check "l3 link gone" gone a

# failures leave nothing
run ADD ipvlan ctr-f "$NSA" eth0 "$(iconf 1.0.0 wa l2 | sed 's/"type":"host-local"/"type":"no-such-ipam"/')"
check "ADD with a missing IPAM plugin fails" [ "$RC" -ne 0 ]
check "and removes its link" gone a
check "no temporary link left in a" sh -c "! nsenter --net=$NSA ip -o link show | grep -q ': veth'"
run ADD ipvlan ctr-f "$NSA" eth0 "$(iconf 1.0.0 wa l4)"; must_fail "unknown mode" 7 "mode"
run ADD ipvlan ctr-f "$NSA" eth0 "$(iconf 1.0.0 nosuch l2)"; must_fail "missing master" 999 "nosuch"
run ADD ipvlan ctr-f "$NSA" eth0 "$(iconf 1.0.0 wa l2 ',"mtu":9000')"; must_fail "MTU above the master's" 7 "MTU"
check "nothing left in a" gone a
check "no reservations after failures" [ "$(reservations)" = 0 ]

# chained: the master is the prevResult's one interface (inside the container, linkInContainer)
# and the addresses come from the prevResult, no IPAM.
check "netns c" netns_add c
NSC=$(netns_path c)
check "wb into c" link_to_netns wb c
netns_exec c ip link set wb up
CHAINED=$(printf '{"cniVersion":"1.0.0","name":"ivchain","type":"ipvlan","linkInContainer":true,"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"wb","sandbox":"%s"}],"ips":[{"address":"10.111.0.9/24","interface":0}]}}' "$NSC")
run ADD ipvlan ctr-c "$NSC" eth0 "$CHAINED"; must_ok "chained ADD (master and IPs from prevResult)"
check "eth0 in c has the chained address" sh -c "nsenter --net=$NSC ip addr show eth0 | grep -q 10.111.0.9/24"
check "result names eth0 only" sh -c "echo '$OUT' | grep -q '\"name\": \"eth0\"' && ! echo '$OUT' | grep -q '\"name\": \"wb\"'"
run DEL ipvlan ctr-c "$NSC" eth0 "$CHAINED"; must_ok "chained DEL"
check "chained link gone, master stays" sh -c "! nsenter --net=$NSC ip link show eth0 2>/dev/null && nsenter --net=$NSC ip link show wb >/dev/null"

# the reference plugin, if given: each one's CHECK and DEL accept the other's attachment
if [ -x /ref/ipvlan ] && /ref/ipvlan </dev/null >/dev/null 2>&1; then
    run_ref() {
        OUT=$(printf '%s' "$6" | env CNI_COMMAND="$1" CNI_CONTAINERID="$3" CNI_NETNS="$4" \
            CNI_IFNAME="$5" CNI_PATH="$BIN" "/ref/$2" 2>/tmp/stderr)
        RC=$?
    }
    run ADD ipvlan ctr-o "$NSA" eth0 "$CONF"; must_ok "ours: ADD"
    OURS=$OUT
    run_ref ADD ipvlan ctr-r "$NSB" eth0 "$CONF"; must_ok "reference: ADD"
    THEIRS=$OUT
    check "ping ours -> reference's" netns_exec a ping -q -c 1 -W 5 "$(ip4_of "$THEIRS")"
    run_ref CHECK ipvlan ctr-o "$NSA" eth0 "$(with_prev "$CONF" "$OURS")"
    must_ok "reference CHECK accepts our attachment"
    run CHECK ipvlan ctr-r "$NSB" eth0 "$(with_prev "$CONF" "$THEIRS")"
    must_ok "our CHECK accepts the reference's attachment"
    run_ref DEL ipvlan ctr-o "$NSA" eth0 "$CONF"; must_ok "reference DEL of ours"
    run DEL ipvlan ctr-r "$NSB" eth0 "$CONF"; must_ok "our DEL of the reference's"
    check "both links gone" sh -c "! nsenter --net=$NSA ip link show eth0 2>/dev/null && ! nsenter --net=$NSB ip link show eth0 2>/dev/null"
    check "no reservations left" [ "$(reservations)" = 0 ]
else
    echo "note: no runnable /ref/ipvlan in the VM, reference comparison skipped"
fi
echo "ipvlan: all checks passed"
