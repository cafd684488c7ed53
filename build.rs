//! Relinks when the linker wrapper's inputs change: `.cargo/ld-order` packs the functions listed
//! in `.cargo/hot-functions.txt` together (see there); cargo does not track either file itself.
//! And links the release binary of the static musl targets without unwind tables
//! (`.cargo/no-unwind-tables.ld`): only there, because only the release profile aborts on panic
//! (tests and debug builds unwind) and only those targets link with rust-lld (.cargo/config.toml).
fn main() {
    println!("cargo:rerun-if-changed=.cargo/ld-order");
    println!("cargo:rerun-if-changed=.cargo/hot-functions.txt");
    println!("cargo:rerun-if-changed=.cargo/no-unwind-tables.ld");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let musl = std::env::var("TARGET").is_ok_and(|t| t.contains("-linux-musl"));
    if release && musl {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
        println!("cargo:rustc-link-arg-bins=-T{dir}/.cargo/no-unwind-tables.ld");
    }
}
