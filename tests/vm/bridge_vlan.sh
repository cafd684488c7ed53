#!/bin/sh
# bridge VLAN filtering inside the test VM (the build machine's kernel cannot filter VLANs on a
# bridge), for the vlanTrunk forms upstream (v1.9.1) accepts: an entry with both `id` and a
# range adds both, `{}` adds nothing, `[]` and `[{}]` still turn VLAN filtering on, and a
# trunk-only port has VLAN 1 as its native VLAN (PVID, untagged) even when the trunk lists VLAN 1;
# `vlan` with a trunk makes that VLAN the native one instead. Port VLANs are read with iproute2's
# `bridge` (added to the initramfs with its libraries by tests/vm.rs).
. /lib/cnibox-vm.sh

BIN=/opt/cni/bin
BRIDGE=/usr/sbin/bridge

# bconf BRIDGE EXTRA: an L2-only bridge config with EXTRA keys (`"vlanTrunk":...`).
bconf() {
    printf '{"cniVersion":"1.0.0","name":"vt-%s","type":"bridge","bridge":"%s",%s}' "$1" "$1" "$2"
}
# host_veth RESULT: the host end of the container's veth.
host_veth() { echo "$1" | sed -n 's/.*"name": "\(veth[0-9a-f]*\)".*/\1/p' | head -n 1; }
# port_vlans PORT: its VLANs, one per line as `bridge vlan show` prints them, joined with ';'.
port_vlans() {
    "$BRIDGE" vlan show dev "$1" | sed '1d; s/^[^ \t]*[ \t]*//; s/[ \t]*$//' | grep -v '^$' \
        | tr '\n' ';'
}
filtering() { cat "/sys/class/net/$1/bridge/vlan_filtering"; }

echo "kernel $(uname -r)"
check "bridge tool present" "$BRIDGE" -V

# case NAME EXTRA WANT_VLANS: ADD in a fresh namespace, the port's VLANs, filtering on, DEL.
case_ok() {
    netns_add "$1" || fail "netns $1"
    run ADD bridge "ctr-$1" "$(netns_path "$1")" eth0 "$(bconf "$1" "$2")"
    must_ok "ADD $1 ($2)"
    hv=$(host_veth "$OUT")
    got=$(port_vlans "$hv")
    if [ "$got" = "$3" ]; then
        echo "ok   - $1: port VLANs $got"
    else
        fail "$1 ($2): port VLANs '$got', want '$3'"
    fi
    check "$1: VLAN filtering on" [ "$(filtering "$1")" = 1 ]
    run DEL bridge "ctr-$1" "$(netns_path "$1")" eth0 "$(bconf "$1" "$2")"
    must_ok "DEL $1"
    netns_del "$1"
}

NATIVE='1 PVID Egress Untagged'
case_ok vt1 '"vlanTrunk":[{"id":10,"minID":20,"maxID":22}]' "$NATIVE;10;20;21;22;"
case_ok vt2 '"vlanTrunk":[{"id":1},{"id":5},{"minID":4,"maxID":5}]' "$NATIVE;4;5;"
case_ok vt3 '"vlanTrunk":[]' "$NATIVE;"
case_ok vt4 '"vlanTrunk":[{}]' "$NATIVE;"
case_ok vt5 '"vlan":7,"vlanTrunk":[{"id":8},{}]' "7 PVID Egress Untagged;8;"
case_ok vt6 '"vlanTrunk":[{"id":9}],"preserveDefaultVlan":true' "$NATIVE;9;"

netns_add bad || fail "netns bad"
for t in '[{"minID":5}]' '[{"maxID":5}]' '[{"minID":9,"maxID":3}]' '[{"id":10,"minID":0,"maxID":3}]' \
    '[{"id":4095}]'; do
    run ADD bridge ctr-bad "$(netns_path bad)" eth0 "$(bconf vtbad "\"vlanTrunk\":$t")"
    must_fail "vlanTrunk $t" 7 vlanTrunk
done
check "nothing made by the refused ADDs" sh -c "! ip link show vtbad >/dev/null 2>&1"
echo "all bridge VLAN checks passed"
