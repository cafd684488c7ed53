#!/bin/sh
# cnibox in five minutes: two "containers" talking through bridge + host-local + portmap, and a
# hostPort reached from the node. Run as root: `make demo`, or `CNIBOX=path/to/cnibox ./demo.sh`.
#
# Everything happens in throwaway network namespaces: a "node" namespace stands in for the host
# (the bridge, the NAT rules and ip_forward live there, not on your machine), and two container
# namespaces hang off it. The plugins' files go to a temporary directory. All of it is removed at
# the end, also when a step fails. Needs iproute2 and busybox (or nc) for the little web server.
set -eu

bin=${CNIBOX:-$(dirname "$0")/target/x86_64-unknown-linux-musl/release/cnibox}
[ -x "$bin" ] || { echo "demo: no cnibox at $bin (run make, or set CNIBOX=)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces)" >&2; exit 1; }
command -v ip >/dev/null || { echo "demo: needs ip (iproute2)" >&2; exit 1; }
command -v busybox >/dev/null || { echo "demo: needs busybox (apt-get install busybox-static)" >&2; exit 1; }
bb=busybox

tag=cnibox-demo-$$
node=$tag-node
work=$(mktemp -d /tmp/cnibox-demo.XXXXXX)
step=0
say() { step=$((step + 1)); printf '\n\033[1m%d. %s\033[0m\n' "$step" "$*"; }
# Print a command and its output; a failing command fails the demo (its status, not sed's).
show() {
    printf '   $ %s\n' "$*"
    if out=$("$@" 2>&1); then rc=0; else rc=$?; fi
    [ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/   /'
    [ "$rc" -eq 0 ] || { echo "demo: '$*' failed (status $rc)" >&2; exit "$rc"; }
}
in_node() { ip netns exec "$node" "$@"; }

cleanup() {
    status=$?
    set +e
    if [ -n "${added:-}" ]; then
        for c in $added; do cnitool del "$c" >/dev/null 2>&1; done
    fi
    [ -n "${server:-}" ] && kill "$server" 2>/dev/null
    for c in c1 c2; do ip netns del "$tag-$c" 2>/dev/null; done
    ip netns del "$node" 2>/dev/null
    rm -rf "$work"
    if [ "$status" -eq 0 ]; then
        printf '\nDone: namespaces, links, rules and files are gone.\n'
    else
        printf '\ndemo: a step failed (status %s); everything it made was removed.\n' "$status" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "The multi-call binary: one file, every plugin an applet"
show "$bin" --version
mkdir -p "$work/bin" "$work/data"
for a in $("$bin" --list) cnitool; do ln -s "$bin" "$work/bin/$a"; done
printf '   applets linked in %s: %s\n' "$work/bin" "$(ls "$work/bin" | tr '\n' ' ')"

say "A throwaway node and two container namespaces"
ip netns add "$node"
in_node ip link set lo up
for c in c1 c2; do ip netns add "$tag-$c"; done
echo "   ip netns add $node; ip netns add $tag-c1; ip netns add $tag-c2"

say "The network config a runtime reads (a conflist: bridge, then portmap)"
mkdir -p "$work/net.d"
cat > "$work/net.d/10-demo.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "demo",
  "plugins": [
    {"type": "bridge", "bridge": "cni-demo0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "subnet": "10.99.0.0/24", "dataDir": "$work/data",
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}, "backend": "nftables"}
  ]
}
EOF
sed 's/^/   /' "$work/net.d/10-demo.conflist"

# The runtime side is cnibox too: `cnitool VERB NETWORK NETNS` runs the conflist as libcni does
# (each plugin in order, the previous result fed to the next, runtimeConfig from CAP_ARGS for the
# capabilities a plugin declares, the result cached for CHECK and DEL, which runs in reverse).
# Plugins that are cnibox run inside cnitool's own process.
cnitool() {
    cmd=$1 c=$2
    port=8080; [ "$c" = c2 ] && port=8081
    in_node env NETCONFPATH="$work/net.d" CNI_PATH="$work/bin" CNI_CACHE_DIR="$work/cache" \
        CNI_CONTAINERID="demo-$c" \
        CAP_ARGS="{\"portMappings\":[{\"hostPort\":$port,\"containerPort\":80,\"protocol\":\"tcp\"}]}" \
        "$work/bin/cnitool" "$cmd" demo "/run/netns/$tag-$c"
}

say "ADD: connect both containers (cnitool add demo NETNS, in the node)"
added=
for c in c1 c2; do
    res=$(cnitool add "$c")
    added="$added $c"
    echo "   $c result: $(echo "$res" | tr -d ' \n' | cut -c1-150)..."
done
ip1=$(ip netns exec "$tag-c1" ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
ip2=$(ip netns exec "$tag-c2" ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
echo "   c1 = $ip1, c2 = $ip2"

say "What the plugins made in the node: a bridge, two veths, NAT for the hostPorts"
show in_node ip -br link show master cni-demo0
show in_node ip -br addr show dev cni-demo0
if command -v nft >/dev/null; then show in_node nft list table ip cni_hostport; fi

say "c1 pings c2 across the bridge"
show ip netns exec "$tag-c1" $bb ping -c 2 -W 2 "$ip2"

say "A web server in c2 on port 80, reached from the node through hostPort 8081"
mkdir -p "$work/www"
echo "hello from c2 ($ip2), via cnibox portmap" > "$work/www/index.html"
ip netns exec "$tag-c2" $bb httpd -f -p 80 -h "$work/www" &
server=$!
node_ip=$(in_node ip -4 -o addr show dev cni-demo0 | awk '{print $4}' | cut -d/ -f1)
tries=0
until got=$(in_node timeout 3 $bb wget -q -O - "http://$node_ip:8081/" 2>/dev/null); do
    tries=$((tries + 1)); [ "$tries" -lt 50 ] || { echo "demo: no answer on $node_ip:8081" >&2; exit 1; }
    sleep 0.1
done
echo "   $ wget -O - http://$node_ip:8081/   (in the node)"
echo "   $got"

say "CHECK: both attachments are as ADD left them (against the cached results)"
for c in c1 c2; do cnitool check "$c"; echo "   $c: ok"; done
echo "   cached results (libcni's format, read by containerd/podman too): $(ls "$work/cache/results" | tr '\n' ' ')"

say "DEL: disconnect both (portmap, then bridge) — runtimes do this when a container stops"
for c in c1 c2; do cnitool del "$c" >/dev/null; added=${added# $c}; echo "   $c: deleted"; done
show in_node ip -br link show master cni-demo0
echo "   reservations left in $work/data/demo: $(ls "$work/data/demo" 2>/dev/null | grep -c '^10\.' || true)"
