# Sourced by applet-sizes.sh and feature-sizes.sh: a scratch copy of the tracked tree in $work
# (removed on exit), the target dir (CNIBOX_SIZES_TARGET or one in the copy) and `build`, which
# prints the static stripped binary's size, or fails: it removes the old binary first, so a
# failed build never reports the previous one's size.
TARGET=${TARGET:-x86_64-unknown-linux-musl}
work=$(mktemp -d "${TMPDIR:-/tmp}/cnibox-sizes.XXXXXX")
trap 'rm -rf "$work"' EXIT
git ls-files -z | xargs -0 cp --parents -t "$work"
export CARGO_TARGET_DIR=${CNIBOX_SIZES_TARGET:-$work/target}
bin=$CARGO_TARGET_DIR/$TARGET/release/cnibox
build() {
    rm -f "$bin"
    (cd "$work" && cargo build -q --release --target "$TARGET" 2>/dev/null) || return 1
    stat -c %s "$bin"
}
