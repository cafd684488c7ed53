#!/usr/bin/env bash
# One netavark sample, run by compare.sh inside the node namespace, the peer of chain.sh with
# PODMAN=1 (podman's default network: bridge + host-local + portmap with one hostPort +
# firewall + tuning):
#   netavark.sh ROOT NETAVARK DRIVER CID NETNS DATADIR
# runs `netavark --config DIR setup NETNS` and then `teardown` with the network and container
# options on stdin, as podman does, and prints "ADD_NS DEL_NS ERRORS". ROOT is "/" for the
# host's netavark or a Debian root to `chroot` into (NETAVARK and DATADIR are then paths inside
# it): compare.sh runs this script in a mount namespace of its own (unshare --mount
# --propagation slave), where it mounts /proc, a sysfs of the node namespace and /run/netns
# into the root, so that nothing is mounted on the host and nothing is left to unmount. DRIVER is netavark's firewall driver (NETAVARK_FW). The network is the one
# chain.sh gives the bridge (10.230.0.0/16, FAMILY=v6|dual: fd00:230::/64 too, bridge cbc,
# hostPort 8080 → 80/tcp). podman allocates the address itself (in its own process, from its
# own database) and hands it to netavark as a static IP: that allocation is not part of a
# netavark sample, where host-local's files are part of a chain.sh one.
# SPAWNER=<floor binary> times each call from spawn to exit (posix_spawn), as chain.sh does;
# under a ROOT the time includes the `chroot` program's exec, which compare.sh measures on a
# no-op program and subtracts.
root=$1 nv=$2 drv=$3 cid=$4 netns=$5 data=$6
sub4='{"subnet":"10.230.0.0/16","gateway":"10.230.0.1"}' ip4='"10.230.0.2"'
sub6='{"subnet":"fd00:230::/64","gateway":"fd00:230::1"}' ip6='"fd00:230::2"'
case ${FAMILY:-v4} in
v6) subs="[$sub6]" ips="[$ip6]" v6=true ;;
dual) subs="[$sub4,$sub6]" ips="[$ip4,$ip6]" v6=true ;;
*) subs="[$sub4]" ips="[$ip4]" v6=false ;;
esac
if [ "$root" != / ]; then
    mount --bind /proc "$root/proc" && mount -t sysfs sysfs "$root/sys" && mkdir -p "$root/run/netns" &&
        mount --rbind /run/netns "$root/run/netns" || { echo "0 0 1"; exit 0; }
fi
mkdir -p "$root/$data/conf"
# The container ID is podman's (64 hex digits); the sample's own ID is in the name.
id=$(printf '%064x' 0)
printf '{"container_id":"%s","container_name":"%s","port_mappings":[{"host_ip":"","container_port":80,"host_port":8080,"range":1,"protocol":"tcp"}],"networks":{"podman":{"static_ips":%s,"aliases":["%s"],"interface_name":"eth0"}},"network_info":{"podman":{"name":"podman","id":"%s","driver":"bridge","network_interface":"cbc","subnets":%s,"ipv6_enabled":%s,"internal":false,"dns_enabled":false,"ipam_options":{"driver":"host-local"}}}}' \
    "$id" "$cid" "$ips" "$cid" "$id" "$subs" "$v6" > "$root/$data/in"
cmd=("$nv" --config "$data/conf")
[ "$root" != / ] && cmd=(chroot "$root" "${cmd[@]}")
export NETAVARK_FW=$drv
err=0
call() { # VERB → dt (ns)
    local rc t
    if [ -n "${SPAWNER:-}" ]; then
        "$SPAWNER" --time-exec "$root/$data/t" "${cmd[@]}" "$1" "$netns" < "$root/$data/in" > "$root/$data/out" 2>"$root/$data/err"; rc=$?
        dt=$(<"$root/$data/t")
    else
        t=${EPOCHREALTIME/./}
        "${cmd[@]}" "$1" "$netns" < "$root/$data/in" > "$root/$data/out" 2>"$root/$data/err"; rc=$?
        dt=$(( (${EPOCHREALTIME/./} - t) * 1000 ))
    fi
    [ $rc = 0 ] || { err=1; echo "netavark $1: $(<"$root/$data/err")" >&2; }
}
call setup; add=$dt
call teardown; del=$dt
echo "$add $del $err"
