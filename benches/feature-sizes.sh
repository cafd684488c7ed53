#!/usr/bin/env bash
# What each feature that is not an applet adds to the static stripped binary, measured as
# applet-sizes.sh measures applets: the full build's size minus the size of a build where the
# feature's entry points return at once (LTO then drops everything only they reach). The cuts
# need not keep the program right, only compile; each is listed below so the numbers can be
# re-made. Builds in a scratch copy of the tree; prints a Markdown table.
#   benches/feature-sizes.sh [FEATURE...]   (default: every feature below)
#   CNIBOX_SIZES_TARGET=DIR: the target dir (reuse applet-sizes.sh's to build incrementally)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/sizes-scratch.sh
cp -r "$work/src" "$work/src.orig"

# cut FILE PATTERN STMT: insert STMT as the first statement of the fn whose signature starts at
# the first line matching PATTERN (the body opens at the first line from there ending in `{`).
cut() {
    local f=$work/src/$1
    perl -i -e '
        my ($pat, $stmt) = @ARGV[0, 1]; splice @ARGV, 0, 2; my $state = 0;
        while (<>) {
            print;
            $state = 1 if $state == 0 && /$pat/;
            if ($state == 1 && /\{\s*$/) { print "    $stmt\n"; $state = 2 }
        }
        exit($state == 2 ? 0 : 1);
    ' "$2" "$3" "$f" || { echo "cut: no fn /$2/ in $1" >&2; return 1; }
}

# Each feature: the edits that take it out (made on a fresh copy of src/).
cut_feature() {
    case $1 in
    cnitool) # the runtime (src/runtime/): `cnitool` link or `cnibox cnitool`
        cut main.rs '^fn cnitool\(' 'return 1;' ;;
    install) # `cnibox install` (src/install.rs)
        cut install.rs '^pub\(crate\) fn main\(' 'return 1;' ;;
    calllog) # the per-call log (src/cni/calllog.rs, CNIBOX_LOG)
        cut cni/calllog.rs '^pub\(crate\) fn start\(' 'return None;' ;;
    firewalld) # firewall's firewalld backend (firewall/firewalld.rs and src/dbus/)
        cut applets/firewall/firewalld.rs '^pub\(super\) fn bus\(' 'return Ok(None);'
        cut applets/firewall/firewalld.rs '^pub\(super\) fn running\(' 'return Ok(None);'
        cut applets/firewall/firewalld.rs '^pub\(super\) fn need\(' 'return Err(Error::internal("cut"));'
        cut applets/firewall/firewalld.rs '^pub\(super\) fn add<' 'return Ok(());'
        cut applets/firewall/firewalld.rs '^pub\(super\) fn check\(' 'return Ok(());'
        cut applets/firewall/firewalld.rs '^pub\(super\) fn remove\(' 'return Ok(());'
        cut applets/firewall/firewalld.rs '^pub\(super\) fn remove_from\(' 'return Ok(());' ;;
    dhcp-gorpc) # dhcp's Go net/rpc + gob wire protocol (dhcp/gorpc.rs, dhcp/gob.rs)
        cut applets/dhcp/gorpc.rs '^pub\(crate\) fn request\(' 'return Vec::new();'
        cut applets/dhcp/gorpc.rs '^pub\(crate\) fn call\(' 'return Err((false, String::new()));'
        cut applets/dhcp/gorpc.rs '^pub\(crate\) fn result\(' 'return Err(Error::internal("cut"));'
        cut applets/dhcp/gorpc.rs '^pub\(crate\) fn serve<' 'return;'
        cut applets/dhcp/gorpc.rs '^pub\(crate\) fn answer\(' 'return Vec::new();' ;;
    regex-lite) # the crate behind tuning's sysctl allowlist (tuning/allowlist.rs)
        cut applets/tuning/allowlist.rs '^    pub fn new\(' 'return Err(String::new());'
        cut applets/tuning/allowlist.rs '^    pub fn is_match\(' 'return false;' ;;
    dhcp-daemon) # `dhcp daemon` (dhcp/daemon.rs and all only it uses, its net/rpc side too)
        cut applets/mod.rs '^pub fn daemon\(' 'return None;' ;;
    *) echo "unknown feature $1" >&2; return 1 ;;
    esac
}

features=("$@")
[ ${#features[@]} -gt 0 ] || features=(cnitool install calllog firewalld dhcp-gorpc regex-lite dhcp-daemon)
full=$(build)
echo "| feature | bytes it adds |"
echo "|---|---:|"
for f in "${features[@]}"; do
    rm -rf "$work/src" && cp -r "$work/src.orig" "$work/src"
    if ! cut_feature "$f"; then
        echo "| $f | (edit failed) |"
    elif without=$(build); then
        echo "| $f | $((full - without)) |"
    else
        echo "| $f | (build failed) |"
    fi
done
rm -rf "$work/src" && cp -r "$work/src.orig" "$work/src"
echo
echo "Whole binary ($TARGET): $full bytes."
