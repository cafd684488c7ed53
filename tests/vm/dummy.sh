#!/bin/sh
# The dummy applet end to end inside the test VM (the build machine's kernel has no dummy links):
#     tests/vm/run.sh --bin target/x86_64-unknown-linux-musl/release/cnibox --script tests/vm/dummy.sh
#
# A dummy eth0 in container namespace a with a host-local address (dataDir /tmp/ipam-dm), while
# the root namespace has a dummy called eth0 too: the address is on it and answers ping from
# inside a, CHECK passes, then fails for a link set down and for a removed address, DEL removes
# the link and the reservation (repeated, without netns, and leaving a non-dummy eth0 alone),
# every spec version, and failed ADDs (missing IPAM plugin, taken name, no ipam) leave nothing.
# There is no reference: Debian's plugins (v1.1.1) predate dummy (v1.2.0).
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
DATA=/tmp/ipam-dm

# dconf VERSION [IPAM_TYPE]: a dummy config with host-local (or IPAM_TYPE).
dconf() {
    printf '{"cniVersion":"%s","name":"dmnet","type":"dummy",' "$1"
    printf '"ipam":{"type":"%s","dataDir":"%s","ranges":[[{"subnet":"10.120.0.0/24"}]]}}' \
        "${2:-host-local}" "$DATA"
}
reservations() { ls "$DATA/dmnet" 2>/dev/null | grep -c '^10\.'; }
gone() { ! netns_exec "$1" ip link show eth0 >/dev/null 2>&1; }

echo "kernel $(uname -r)"
check "dummy loaded" grep -q '^dummy ' /proc/modules
check "a host dummy called eth0" ip link add eth0 type dummy
check "netns a" netns_add a
NSA=$(netns_path a)
CONF=$(dconf 1.0.0)

run ADD dummy ctr-a "$NSA" eth0 "$CONF"; must_ok "ADD a"
RES=$OUT
IPA=$(ip4_of "$RES")
check "a got an address" [ -n "$IPA" ]
check "a's eth0 has $IPA" sh -c "nsenter --net=$NSA ip addr show eth0 | grep -q 'inet $IPA/24'"
check "result names eth0 with its MAC and sandbox" sh -c "echo '$RES' | grep -q '\"name\": \"eth0\"' \
    && echo '$RES' | grep -q '\"sandbox\": \"$NSA\"' && echo '$RES' | grep -q '\"mac\": \"[0-9a-f:]*\"'"
check "ping $IPA from inside a" netns_exec a ping -q -c 1 -W 5 "$IPA"
check "1 reservation" [ "$(reservations)" = 1 ]
check "the host's eth0 is still there" ip link show eth0

run CHECK dummy ctr-a "$NSA" eth0 "$(with_prev "$CONF" "$RES")"; must_ok "CHECK a"
netns_exec a ip link set eth0 down
run CHECK dummy ctr-a "$NSA" eth0 "$(with_prev "$CONF" "$RES")"; must_fail "CHECK of a link set down" 999 "down"
netns_exec a ip link set eth0 up
netns_exec a ip addr del "$IPA/24" dev eth0
run CHECK dummy ctr-a "$NSA" eth0 "$(with_prev "$CONF" "$RES")"; must_fail "CHECK without the address" 999 "$IPA"
run CHECK dummy ctr-a "$NSA" eth0 "$CONF"; must_fail "CHECK without prevResult" 7 "prevResult"

run DEL dummy ctr-a "$NSA" eth0 "$CONF"; must_ok "DEL a"
check "a's link gone" gone a
check "no reservations left" [ "$(reservations)" = 0 ]
run DEL dummy ctr-a "$NSA" eth0 "$CONF"; must_ok "DEL a again"
run DEL dummy ctr-a "" eth0 "$CONF"; must_ok "DEL without netns"
run DEL dummy ctr-a /run/netns/nosuch eth0 "$CONF"; must_ok "DEL with a vanished netns"

for v in 0.1.0 0.2.0 0.3.1 0.4.0 1.0.0 1.1.0; do
    run ADD dummy "ctr-$v" "$NSA" eth0 "$(dconf $v)"; must_ok "ADD $v"
    check "$v result has the address" sh -c "echo '$OUT' | grep -q '10\.120\.0\.[0-9]*/24'"
    run DEL dummy "ctr-$v" "$NSA" eth0 "$(dconf $v)"; must_ok "DEL $v"
    check "$v link gone" gone a
done

# failures leave nothing
run ADD dummy ctr-f "$NSA" eth0 "$(dconf 1.0.0 no-such-ipam)"
check "ADD with a missing IPAM plugin fails" [ "$RC" -ne 0 ]
check "and removes its link" gone a
run ADD dummy ctr-f "$NSA" eth0 '{"cniVersion":"1.0.0","name":"dmnet","type":"dummy"}'
must_fail "no ipam" 7 "IPAM"
check "nothing made without ipam" gone a
netns_exec a ip link add eth0 type dummy
run ADD dummy ctr-f "$NSA" eth0 "$CONF"; must_fail "CNI_IFNAME taken" 999 "exists"
check "the existing eth0 stays" netns_exec a ip link show eth0
netns_exec a ip link del eth0
veth_add vx0 vy0 && link_to_netns vx0 a && netns_exec a ip link set vx0 name eth0
check "a veth called eth0 in a" netns_exec a ip link show eth0
run DEL dummy ctr-f "$NSA" eth0 "$CONF"; must_ok "DEL with a veth called eth0"
check "a veth called eth0 is left alone" netns_exec a ip link show eth0
check "no reservations after failures" [ "$(reservations)" = 0 ]
echo "dummy: all checks passed"
