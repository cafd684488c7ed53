//! Relinks when the linker wrapper's inputs change: `.cargo/ld-order` packs the functions listed
//! in `.cargo/hot-functions.txt` together (see there); cargo does not track either file itself.
fn main() {
    println!("cargo:rerun-if-changed=.cargo/ld-order");
    println!("cargo:rerun-if-changed=.cargo/hot-functions.txt");
}
