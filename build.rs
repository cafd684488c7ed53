//! Relinks when the linker wrapper's inputs change: `.cargo/ld-order` packs the functions listed
//! in `.cargo/hot-functions.txt` together (see there); cargo does not track either file itself.
//! And links the release binary of the static musl targets without unwind tables
//! (`.cargo/no-unwind-tables.ld`): only there, because only the release profile aborts on panic
//! (tests and debug builds unwind) and only those targets link with rust-lld (.cargo/config.toml).
fn main() {
    build_identity();
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

/// `cnibox --version` names the commit the binary was built from, and `-dirty` when tracked
/// files differ from it, so a bug report identifies the binary; no build time, so a build stays
/// reproducible. Outside a git checkout (a source archive) `CNIBOX_COMMIT` names it, else
/// "unknown".
fn build_identity() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = match std::env::var("CNIBOX_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(head) => {
                let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                    .is_some_and(|s| !s.is_empty());
                if dirty { format!("{head}-dirty") } else { head }
            }
            None => "unknown".to_string(),
        },
    };
    println!("cargo:rustc-env=CNIBOX_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=CNIBOX_COMMIT");
    // A new commit moves HEAD or the branch it names; an edit of a tracked file changes the
    // sources (a directory here means any file in it) or the index.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
        for p in ["src", "Cargo.toml", "Cargo.lock", "build.rs"] {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
