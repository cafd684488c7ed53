#!/usr/bin/env bash
# What each applet adds to the static stripped binary: the full build's size minus the size of a
# build whose applet table lacks that one row (LTO then drops everything only it uses). Builds
# in a scratch copy of the tree with its own target dir; prints a Markdown table. Features that
# are not applets: benches/feature-sizes.sh.
#   benches/applet-sizes.sh [APPLET...]   (default: every applet of `cnibox --list`)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/sizes-scratch.sh
full=$(build)
applets=("$@")
[ ${#applets[@]} -gt 0 ] || mapfile -t applets < <("$bin" --list)
cp "$work/src/applets/mod.rs" "$work/mod.rs.orig"
echo "| applet | bytes it adds |"
echo "|---|---:|"
for a in "${applets[@]}"; do
    module=${a//-/_}
    [ "$a" = static ] && module=static_ipam
    # Drop the applet's row from TABLE; the module stays (dead code, removed by LTO).
    grep -v "^    &${module}::APPLET,\$" "$work/mod.rs.orig" > "$work/src/applets/mod.rs"
    if cmp -s "$work/src/applets/mod.rs" "$work/mod.rs.orig"; then
        echo "| $a | (no row \`&${module}::APPLET\` in TABLE) |"
        continue
    fi
    without=$(build 2>/dev/null)
    echo "| $a | $((full - without)) |"
done
cp "$work/mod.rs.orig" "$work/src/applets/mod.rs"
echo
echo "Whole binary ($TARGET): $full bytes."
