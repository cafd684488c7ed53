//! The edge builds: the static aarch64 and armv7 binaries that `make test` builds and names in
//! `CNIBOX_STATIC_AARCH64` / `CNIBOX_STATIC_ARMV7` (this test builds nothing). Each one must be a
//! static, stripped ELF of its architecture under the 1.5 MB budget (`common::SIZE_BUDGET`), install with `symlinks.sh` from an
//! x86 host (via qemu-user, or `CNIBOX_APPLETS` without it), and pass `tests/vm/arm-smoke.sh`
//! booted on Debian's own kernel for that architecture under qemu-system-aarch64/-arm (TCG;
//! bridge + host-local + portmap on nftables + bandwidth, traffic, nft read back, DEL leaving
//! nothing). The kernels, modules, busybox and nft come from `tests/vm/fetch-arch.sh`.
//!
//! A missing binary, qemu or sysroot makes a test print a SKIP note and pass, except under
//! `CNIBOX_REQUIRE_ALL=1` or `CNIBOX_VM_REQUIRED=1` (CI), where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The runner's "missing host dependency" exit status.
const EX_MISSING: i32 = 3;

struct Arch {
    /// `--arch` of tests/vm/run.sh and fetch-arch.sh.
    name: &'static str,
    env: &'static str,
    target: &'static str,
    /// ELF e_machine and class (1: 32-bit, 2: 64-bit).
    machine: u16,
    class: u8,
    qemu_user: &'static str,
}

const AARCH64: Arch = Arch {
    name: "aarch64",
    env: "CNIBOX_STATIC_AARCH64",
    target: "aarch64-unknown-linux-musl",
    machine: 183,
    class: 2,
    qemu_user: "qemu-aarch64-static",
};
const ARMV7: Arch = Arch {
    name: "armv7",
    env: "CNIBOX_STATIC_ARMV7",
    target: "armv7-unknown-linux-musleabihf",
    machine: 40,
    class: 1,
    qemu_user: "qemu-arm-static",
};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn skip(test: &str, why: &str) {
    let vm_required = std::env::var("CNIBOX_VM_REQUIRED").is_ok_and(|v| v == "1" || v == "true");
    assert!(
        !vm_required,
        "{test} would skip ({why}), and CNIBOX_VM_REQUIRED=1 forbids it"
    );
    common::skip_note(test, why);
}

/// The binary named by the arch's variable, or a skip note.
fn binary(test: &str, a: &Arch) -> Option<PathBuf> {
    let Some(v) = std::env::var_os(a.env).filter(|v| !v.is_empty()) else {
        skip(
            test,
            &format!(
                "{} is not set (run `make test` or `make test-vm-arm`)",
                a.env
            ),
        );
        return None;
    };
    let bin = root().join(PathBuf::from(v));
    if !bin.is_file() {
        skip(
            test,
            &format!(
                "{}={} does not exist: `make TARGET={}` failed? (rustup target add {})",
                a.env,
                bin.display(),
                a.target,
                a.target
            ),
        );
        return None;
    }
    Some(bin)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// ELF facts: (class, e_machine, has PT_INTERP, has a .symtab section).
fn elf_facts(b: &[u8]) -> (u8, u16, bool, bool) {
    assert_eq!(&b[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(b[5], 1, "not little-endian");
    let class = b[4];
    let wide = class == 2;
    let word = |at32: usize, at64: usize| {
        if wide {
            u64_at(b, at64) as usize
        } else {
            u32_at(b, at32) as usize
        }
    };
    let (phoff, shoff) = (word(28, 32), word(32, 40));
    let (phentsize, phnum) = if wide {
        (u16_at(b, 54), u16_at(b, 56))
    } else {
        (u16_at(b, 42), u16_at(b, 44))
    };
    let (shentsize, shnum) = if wide {
        (u16_at(b, 58), u16_at(b, 60))
    } else {
        (u16_at(b, 46), u16_at(b, 48))
    };
    const PT_INTERP: u32 = 3;
    const SHT_SYMTAB: u32 = 2;
    let interp =
        (0..usize::from(phnum)).any(|i| u32_at(b, phoff + i * usize::from(phentsize)) == PT_INTERP);
    let symtab = (0..usize::from(shnum))
        .any(|i| u32_at(b, shoff + i * usize::from(shentsize) + 4) == SHT_SYMTAB);
    (class, u16_at(b, 18), interp, symtab)
}

fn static_stripped_small(a: &Arch) {
    let test = format!("{}_binary_static_stripped_small", a.name);
    let Some(bin) = binary(&test, a) else { return };
    let b = std::fs::read(&bin).unwrap();
    let (class, machine, interp, symtab) = elf_facts(&b);
    assert_eq!(
        (class, machine),
        (a.class, a.machine),
        "{}: wrong ELF class/machine",
        bin.display()
    );
    assert!(
        !interp,
        "{}: has a program interpreter (not static)",
        bin.display()
    );
    assert!(
        !symtab,
        "{}: has a symbol table (not stripped)",
        bin.display()
    );
    let size = b.len() as u64;
    eprintln!("{}: {size} bytes", a.target);
    assert!(
        size < common::SIZE_BUDGET,
        "{}: {size} bytes, over the budget of {} bytes",
        bin.display(),
        common::SIZE_BUDGET
    );
}

#[test]
fn aarch64_binary_static_stripped_small() {
    static_stripped_small(&AARCH64);
}

#[test]
fn armv7_binary_static_stripped_small() {
    static_stripped_small(&ARMV7);
}

/// The ELF checker itself, on the binary of this host (static musl, stripped) and on a
/// dynamically linked one, so that a broken parser cannot pass the checks above.
#[test]
fn elf_checker_tells_static_from_dynamic() {
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let (_, _, interp, symtab) = elf_facts(&me);
    assert!(
        interp && symtab,
        "the test binary is dynamic and has symbols"
    );
    if let Ok(b) = std::fs::read("/bin/busybox") {
        // Debian's busybox-static: static, stripped.
        let (_, _, interp, symtab) = elf_facts(&b);
        assert!(!interp && !symtab);
    }
}

fn links_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// symlinks.sh with a cross binary: `cnibox install` runs under qemu-user (and copies the ARM
/// binary, not qemu, into the directory); without qemu-user it fails, says what to do and
/// changes nothing.
fn symlinks_cross(a: &Arch) {
    let test = format!("{}_symlinks_install", a.name);
    let Some(bin) = binary(&test, a) else { return };
    let Ok(qemu) = which(a.qemu_user) else {
        skip(
            &test,
            &format!("{} missing (apt-get install qemu-user-static)", a.qemu_user),
        );
        return;
    };
    let tmp = std::env::temp_dir().join(format!("cnibox-vmarm-{}-{}", std::process::id(), a.name));
    let _ = std::fs::remove_dir_all(&tmp);
    let dir = tmp.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let script = root().join("symlinks.sh");
    let run = |env: &[(&str, &str)], path: &str| {
        Command::new("/bin/sh")
            .arg(&script)
            .arg(&dir)
            .env("CNIBOX", &bin)
            .env("PATH", path)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let expected: Vec<String> = {
        let out = Command::new(&qemu)
            .arg(&bin)
            .arg("--list")
            .output()
            .unwrap();
        assert!(out.status.success());
        let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    };
    assert!(expected.len() >= 8, "{expected:?}");
    let host_path = std::env::var("PATH").unwrap_or_default();
    let out = run(
        &[],
        &format!("{}:{host_path}", qemu.parent().unwrap().display()),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(links_in(&dir), expected, "links made through qemu-user");
    assert!(
        std::fs::read(dir.join("cnibox")).unwrap() == std::fs::read(&bin).unwrap(),
        "the installed cnibox is not the ARM binary"
    );

    // A PATH with the tools symlinks.sh uses but no qemu.
    let tools = tmp.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for t in ["od", "tr", "sed"] {
        if let Ok(p) = which(t) {
            std::os::unix::fs::symlink(p, tools.join(t)).unwrap();
        }
    }
    let tools_path = tools.to_string_lossy().into_owned();
    let fresh = tmp.join("bin");
    std::fs::remove_dir_all(&fresh).unwrap();
    std::fs::create_dir_all(&fresh).unwrap();
    let cross = tmp.join("cnibox");
    std::fs::copy(&bin, &cross).unwrap();
    let out = Command::new("/bin/sh")
        .arg(&script)
        .arg(&dir)
        .env("CNIBOX", &cross)
        .env("PATH", &tools_path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "no qemu-user, yet it succeeded: {out:?}"
    );
    assert!(err.contains("qemu-user"), "{err}");
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "a failed run changed the directory"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

fn which(cmd: &str) -> Result<PathBuf, ()> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(cmd))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn aarch64_symlinks_install() {
    symlinks_cross(&AARCH64);
}

#[test]
fn armv7_symlinks_install() {
    symlinks_cross(&ARMV7);
}

/// Boot the arch's VM with tests/vm/arm-smoke.sh; panics with the runner's output on failure.
fn smoke_in_vm(a: &Arch) {
    let test = format!("{}_smoke_in_vm", a.name);
    let Some(bin) = binary(&test, a) else { return };
    let modules = std::fs::read_to_string(root().join("tests/vm/arm-smoke.modules")).unwrap();
    let start = Instant::now();
    let out = Command::new(root().join("tests/vm/run.sh"))
        .arg("--arch")
        .arg(a.name)
        .arg("--bin")
        .arg(&bin)
        .arg("--script")
        .arg(root().join("tests/vm/arm-smoke.sh"))
        .arg("--modules")
        .arg(modules.trim())
        .output()
        .expect("run tests/vm/run.sh");
    let secs = start.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {
            assert!(
                text.contains("arm-smoke: all good"),
                "{test}: passed without finishing the script:\n{text}"
            );
            eprintln!("{text}\n{test}: VM run passed in {secs:.1} s");
        }
        Some(EX_MISSING) => skip(
            &test,
            &format!(
                "the VM runner is missing a host dependency (tests/vm/fetch-arch.sh {}):\n{text}",
                a.name
            ),
        ),
        code => panic!("{test}: VM run failed ({code:?}) after {secs:.1} s:\n{text}"),
    }
}

#[test]
fn aarch64_smoke_in_vm() {
    smoke_in_vm(&AARCH64);
}

#[test]
fn armv7_smoke_in_vm() {
    smoke_in_vm(&ARMV7);
}
