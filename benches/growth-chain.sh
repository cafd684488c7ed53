#!/usr/bin/env bash
# portmap and firewall ADD/DEL cost against the number of other containers' rules on the node.
#   growth-chain.sh BIN [BASE_BIN] [N] [SAMPLES]
# For each binary (BIN, and BASE_BIN for a before/after run) and each backend (iptables,
# nftables) two node namespaces are filled with the portmap (tcp+udp mapping) and firewall rules
# of 3 and of N (default 200) other containers (chained ADDs with a made-up prevResult; no
# container namespaces: the plugins only write rules). Then SAMPLES (default 30) rounds, each
# timing, in every node in a rotated order, portmap ADD, firewall ADD, firewall DEL, portmap
# DEL of one more container (the execs only, inside the node). Prints the median per binary,
# backend, node and step in ms.
set -euo pipefail
if [ "${1:-}" = --sample ]; then
    # --sample DIR BACKEND CID IP STATE: one timed ADD/ADD/DEL/DEL, inside the node namespace.
    dir=$2 bk=$3 cid=$4 ip=$5
    export CNIBOX_STATE_DIR=$6 CNI_CONTAINERID=$cid CNI_NETNS=/var/run/netns/none CNI_IFNAME=eth0 CNI_PATH=$dir
    prev="{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/var/run/netns/none\"}],\"ips\":[{\"address\":\"$ip/16\",\"interface\":0,\"gateway\":\"10.240.0.1\"}]}"
    pm="{\"cniVersion\":\"1.0.0\",\"name\":\"pg\",\"type\":\"portmap\",\"backend\":\"$bk\",\"runtimeConfig\":{\"portMappings\":[{\"hostPort\":8080,\"containerPort\":80,\"protocol\":\"tcp\"},{\"hostPort\":8053,\"containerPort\":53,\"protocol\":\"udp\"}]},\"prevResult\":$prev}"
    fw="{\"cniVersion\":\"1.0.0\",\"name\":\"pg\",\"type\":\"firewall\",\"backend\":\"$bk\",\"prevResult\":$prev}"
    out=""
    for step in "ADD portmap $pm" "ADD firewall $fw" "DEL firewall $fw" "DEL portmap $pm"; do
        read -r cmd p conf <<< "$step"
        t=${EPOCHREALTIME/./}
        CNI_COMMAND=$cmd "$dir/$p" <<< "$conf" > /dev/null || { echo "$cmd $p failed" >&2; exit 1; }
        out+=" $(( ${EPOCHREALTIME/./} - t ))"
    done
    echo "$out"
    exit 0
fi
bin=$1 base=${2:-} n=${3:-200} samples=${4:-30}
work=$(mktemp -d /tmp/growth-chain.XXXXXX)
variants=(after)
[ -n "$base" ] && variants+=(before)
nodes=()
cleanup() { for x in "${nodes[@]}"; do ip netns del "$x" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for v in "${variants[@]}"; do
    mkdir -p "$work/$v"
    src=$bin; [ "$v" = before ] && src=$base
    cp "$src" "$work/$v/cnibox"
    ln -s cnibox "$work/$v/portmap"; ln -s cnibox "$work/$v/firewall"
done
me=$(readlink -f "$0")
ip_of() { echo "10.240.$(( $1 / 250 )).$(( $1 % 250 + 2 ))"; }
for v in "${variants[@]}"; do
    for bk in iptables nftables; do
        for size in 3 "$n"; do
            node="gch-$$-$v-$bk-$size"; nodes+=("$node")
            ip netns add "$node"
            ip netns exec "$node" sh -c 'ip link set lo up; ip link add d0 type veth peer name d1; ip link set d1 up; ip addr add 10.240.0.1/16 dev d0; ip link set d0 up'
            mkdir -p "$work/state-$node"
            # Fill: ADD portmap + firewall for `size` other containers (untimed).
            ip netns exec "$node" bash -c '
                dir=$1 bk=$2 size=$3; export CNIBOX_STATE_DIR=$4 CNI_NETNS=/var/run/netns/none CNI_IFNAME=eth0 CNI_PATH=$1
                for ((i = 0; i < size; i++)); do
                    ip="10.240.$(( (i + 1000) / 250 )).$(( (i + 1000) % 250 + 2 ))"
                    prev="{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/var/run/netns/none\"}],\"ips\":[{\"address\":\"$ip/16\",\"interface\":0,\"gateway\":\"10.240.0.1\"}]}"
                    export CNI_CONTAINERID=other$i CNI_COMMAND=ADD
                    "$dir/portmap" > /dev/null <<< "{\"cniVersion\":\"1.0.0\",\"name\":\"pg\",\"type\":\"portmap\",\"backend\":\"$bk\",\"runtimeConfig\":{\"portMappings\":[{\"hostPort\":8080,\"containerPort\":80,\"protocol\":\"tcp\"},{\"hostPort\":8053,\"containerPort\":53,\"protocol\":\"udp\"}]},\"prevResult\":$prev}"
                    "$dir/firewall" > /dev/null <<< "{\"cniVersion\":\"1.0.0\",\"name\":\"pg\",\"type\":\"firewall\",\"backend\":\"$bk\",\"prevResult\":$prev}"
                done' _ "$work/$v" "$bk" "$size" "$work/state-$node"
        done
    done
done
echo "filled ${#nodes[@]} nodes (3 and $n other containers)" >&2
: > "$work/samples"
for ((s = 0; s < samples; s++)); do
    k=${#nodes[@]}
    for ((j = 0; j < k; j++)); do
        node=${nodes[$(( (j + s) % k ))]}
        IFS=- read -r _ _ v bk size <<< "$node"
        t=$(ip netns exec "$node" "$me" --sample "$work/$v" "$bk" "probe$s" "$(ip_of $((s + 3)))" "$work/state-$node")
        echo "$v $bk $size $t" >> "$work/samples"
    done
done
echo "median ms over $samples samples: variant backend others | portmap-ADD firewall-ADD firewall-DEL portmap-DEL"
sort -k1,1 -k2,2 -k3,3n "$work/samples" | awk '
    function med(arr, c,   i, j, t) { for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
        return c % 2 ? arr[(c + 1) / 2] : (arr[c / 2] + arr[c / 2 + 1]) / 2 }
    { key = $1 " " $2 " " $3; if (!(key in cnt)) order[++nk] = key; c = ++cnt[key]; for (f = 4; f <= 7; f++) v[key, f, c] = $f }
    END { for (i = 1; i <= nk; i++) { key = order[i]; line = key; for (f = 4; f <= 7; f++) { delete a; for (c = 1; c <= cnt[key]; c++) a[c] = v[key, f, c]; line = line sprintf(" %.2f", med(a, cnt[key]) / 1000) } print line } }'
