# Helpers for test scripts running inside the cnibox test VM (busybox ash).
# Installed as /lib/cnibox-vm.sh in the initramfs; use with:
#     . /lib/cnibox-vm.sh
#
# busybox's `ip` has no `netns` subcommand and `ip link set ... netns` only
# takes a PID, so named namespaces are bind mounts made with busybox unshare
# (ip-netns compatible: /run/netns/NAME), and moving a link uses a
# short-lived process that sits in the target namespace.

NETNS_DIR=${NETNS_DIR:-/run/netns}

# netns_add NAME: create a named network namespace at $NETNS_DIR/NAME.
netns_add() {
    mkdir -p "$NETNS_DIR" || return 1
    : > "$NETNS_DIR/$1" || return 1
    unshare --net="$NETNS_DIR/$1" ip link set lo up
}

# netns_del NAME
netns_del() {
    umount "$NETNS_DIR/$1" 2>/dev/null
    rm -f "$NETNS_DIR/$1"
}

# netns_exec NAME CMD [ARGS...]: run CMD inside the named namespace.
netns_exec() {
    _ns=$1
    shift
    nsenter --net="$NETNS_DIR/$_ns" "$@"
}

# netns_path NAME: print the path CNI expects in CNI_NETNS.
netns_path() {
    echo "$NETNS_DIR/$1"
}

# link_to_netns IFACE NAME [IN_NS]: move IFACE (from the current namespace or
# from namespace IN_NS) into the named namespace NAME.
link_to_netns() {
    _if=$1
    _to=$2
    _from=$3
    nsenter --net="$NETNS_DIR/$_to" sleep 30 &
    _pid=$!
    # wait until the sleeper has actually entered the namespace (2 s at most); moving the link
    # to a process still in this namespace would "succeed" and leave it here
    _i=0
    while [ "$(readlink /proc/$_pid/ns/net 2>/dev/null)" = "$(readlink /proc/self/ns/net)" ] \
        || [ "$(readlink /proc/$_pid/exe 2>/dev/null)" = "" ]; do
        _i=$((_i + 1))
        if [ $_i -gt 200 ]; then
            echo "link_to_netns: no process entered namespace $_to within 2 s" >&2
            kill "$_pid" 2>/dev/null
            wait "$_pid" 2>/dev/null
            return 1
        fi
        usleep 10000
    done
    if [ -n "$_from" ]; then
        netns_exec "$_from" ip link set "$_if" netns "$_pid"
    else
        ip link set "$_if" netns "$_pid"
    fi
    _rc=$?
    kill "$_pid" 2>/dev/null
    wait "$_pid" 2>/dev/null
    return $_rc
}

# veth_add NAME PEER: create a veth pair (busybox ip cannot name the peer:
# `ip link add NAME type veth` lets the kernel pick vethN for it, so rename).
veth_add() {
    _before=$(ls /sys/class/net)
    ip link add "$1" type veth || return 1
    for _n in $(ls /sys/class/net); do
        case " $(echo $_before) $1 " in
            *" $_n "*) ;;
            *) ip link set "$_n" name "$2"; return $? ;;
        esac
    done
    echo "veth_add: cannot find the peer of $1" >&2
    return 1
}

# vlan_add PARENT VID [NAME]: create a VLAN link (needs the 8021q module).
vlan_add() {
    ip link add link "$1" name "${3:-$1.$2}" type vlan id "$2"
}

# fail MSG...: print and exit 1.
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# check DESC CMD [ARGS...]: run CMD, print ok/FAIL, exit 1 on failure.
check() {
    _desc=$1
    shift
    if "$@"; then
        echo "ok   - $_desc"
    else
        echo "FAIL - $_desc (rc=$?)"
        exit 1
    fi
}

# ---- running applets (scripts set BIN, the applet directory)

# run CMD APPLET CID NETNS IFNAME CONF: sets OUT (stdout) and RC; stderr goes to /tmp/stderr.
run() {
    OUT=$(printf '%s' "$6" | env CNI_COMMAND="$1" CNI_CONTAINERID="$3" CNI_NETNS="$4" \
        CNI_IFNAME="$5" CNI_PATH="$BIN" "$BIN/$2" 2>/tmp/stderr)
    RC=$?
}

# must_ok DESC: the last run succeeded.
must_ok() {
    if [ "$RC" -eq 0 ]; then
        echo "ok   - $1"
    else
        echo "FAIL - $1 (rc=$RC)"
        echo "$OUT"
        cat /tmp/stderr
        exit 1
    fi
}

# must_fail DESC CODE TEXT: the last run failed with CNI error CODE and a msg containing TEXT.
must_fail() {
    if [ "$RC" -ne 0 ] && echo "$OUT" | grep -q "\"code\": $2," && echo "$OUT" | grep -q "$3"; then
        echo "ok   - $1 (code $2)"
    else
        echo "FAIL - $1: expected error $2 mentioning '$3', got rc=$RC"
        echo "$OUT"
        cat /tmp/stderr
        exit 1
    fi
}

# with_prev CONF RESULT: CONF with prevResult set.
with_prev() {
    printf '%s, "prevResult": %s}' "${1%\}}" "$2"
}

ip4_of() { echo "$1" | sed -n 's/.*"address": "\([0-9.]*\)\/[0-9]*".*/\1/p' | head -n 1; }
ip6_of() { echo "$1" | sed -n 's/.*"address": "\([0-9a-f:]*:[0-9a-f:]*\)\/[0-9]*".*/\1/p' | head -n 1; }
