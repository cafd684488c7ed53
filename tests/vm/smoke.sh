#!/bin/sh
# Smoke test of the VM test environment itself (busybox ash inside the VM):
#     tests/vm/run.sh --bin target/.../cnibox --script tests/vm/smoke.sh
# Also works with a stand-in: --bin /bin/busybox.
set -e
. /lib/cnibox-vm.sh

echo "kernel $(uname -r), $(nproc) cpu(s)"

# kernel modules the host lacks: loaded by /init, modprobe must be a no-op now
check "8021q loaded" modprobe 8021q
check "8021q in lsmod" grep -q '^8021q ' /proc/modules
check "/proc/net/vlan/config readable" cat /proc/net/vlan/config
for m in veth bridge dummy; do
    check "$m module loaded" grep -q "^$m " /proc/modules
done

# named network namespaces (ip-netns layout)
check "netns_add a" netns_add a
check "netns_add b" netns_add b
check "a is a bind-mounted netns" grep -q ' /run/netns/a nsfs ' /proc/mounts
check "a and b differ" [ "$(netns_exec a readlink /proc/self/ns/net)" != "$(netns_exec b readlink /proc/self/ns/net)" ]
check "a differs from the root netns" [ "$(netns_exec a readlink /proc/self/ns/net)" != "$(readlink /proc/self/ns/net)" ]

# veth pair between the two namespaces
check "veth pair" veth_add va vb
check "va into a" link_to_netns va a
check "vb into b" link_to_netns vb b
netns_exec a ip addr add 10.99.0.1/24 dev va
netns_exec a ip link set va up
netns_exec b ip addr add 10.99.0.2/24 dev vb
netns_exec b ip link set vb up
check "ping a -> b over the veth" netns_exec a ping -c 1 -W 5 10.99.0.2 >/dev/null

# VLAN on a dummy parent inside netns a
check "dummy in a" netns_exec a ip link add d0 type dummy
check "vlan 42 on d0 in a" netns_exec a ip link add link d0 name d0.42 type vlan id 42
check "vlan listed in a's /proc/net/vlan/config" \
    netns_exec a grep -q '^d0.42 *| 42 *| d0' /proc/net/vlan/config
netns_exec a cat /proc/net/vlan/config

# bridge in the root namespace
check "bridge" ip link add br0 type bridge
check "dummy as bridge port" sh -c 'ip link add d1 type dummy && ip link set d1 master br0'
check "d1 enslaved" [ -e /sys/class/net/br0/brif/d1 ]

# the binary under test
check "/opt/cni/bin on PATH" sh -c 'command -v cnibox >/dev/null'
if out=$(cnibox --list 2>&1); then
    echo "cnibox applets: $(echo $out)"
    check "applet list has vlan" sh -c 'cnibox --list | grep -qx vlan'
elif out=$(cnibox --help 2>&1); then
    echo "cnibox --help ok (no --list)"
else
    case "$out" in
        # a busybox stand-in called as "cnibox" runs but knows no such applet
        *"applet not found"*) echo "stand-in binary runs (busybox: $out)" ;;
        *) fail "cnibox runs neither --list nor --help: $out" ;;
    esac
fi
for a in bridge host-local static vlan loopback; do
    check "applet link $a" [ -L "/opt/cni/bin/$a" ]
done

netns_del a
netns_del b
echo "smoke: all good"
