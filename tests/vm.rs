//! Tests that need kernel features the build machine may lack (8021q for `vlan`): each boots
//! the static release binary in a throwaway QEMU VM with `tests/vm/run.sh` and runs a shell
//! script there (see tests/vm/README.md). The VM has no network device and touches nothing on
//! the host.
//!
//! `CNIBOX_STATIC` must point at the static musl release binary (`make test` sets it). When it
//! is unset, or the runner reports a missing host dependency (qemu, kernel, static busybox:
//! exit 3), the test prints a SKIP note and passes — unless `CNIBOX_VM_REQUIRED=1`, which makes
//! that a failure (for CI, where the dependencies are installed on purpose), as does
//! `CNIBOX_REQUIRE_ALL=1`.
//! `CNIBOX_VM_ACCEL`, `CNIBOX_VM_TIMEOUT` etc. are passed through to the runner. When the Go
//! reference plugins (v1.9.1, unpacked by `.ci/fetch-unstable`) are there, they are copied into
//! the VM as well and the script compares against them.

mod common;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The runner's "missing host dependency" exit status.
const EX_MISSING: i32 = 3;

fn required() -> bool {
    ["CNIBOX_VM_REQUIRED", "CNIBOX_REQUIRE_ALL"]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| v == "1" || v == "true"))
}

fn skip(test: &str, why: &str) {
    assert!(!required(), "{test}: {why}, and CNIBOX_VM_REQUIRED is set");
    // Straight to fd 2: visible past the test harness's output capture.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("SKIP {test}: {why}\n").as_bytes(),
    );
}

/// The reference plugins (v1.9.1, [`common::reference_dir`]) are dynamically linked (Debian's
/// build): they go into the VM
/// as `/ref/<name>` together with their loader and libc, when all of those exist.
const REFERENCE: &[&str] = &["vlan", "ipvlan", "vrf"];
const REFERENCE_LIBS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/libc.so.6",
];

fn reference_args() -> Vec<String> {
    let present = |p: &str| Path::new(p).is_file();
    let plugins: Vec<String> = REFERENCE
        .iter()
        .map(|n| format!("{}/{n}", common::reference_dir()))
        .filter(|p| present(p))
        .collect();
    if plugins.is_empty() || !REFERENCE_LIBS.iter().all(|l| present(l)) {
        skip(
            "VM reference comparison",
            "reference plugins (containernetworking-plugins) or their libc missing",
        );
        return Vec::new();
    }
    let mut args = Vec::new();
    for p in &plugins {
        let name = p.rsplit('/').next().unwrap_or_default();
        args.extend(["--add".to_string(), format!("{p}:/ref/{name}")]);
    }
    for l in REFERENCE_LIBS {
        args.extend(["--add".to_string(), format!("{l}:{l}")]);
    }
    args
}

/// Boot the VM with `script`; panics on failure with the runner's whole output.
fn run_in_vm(test: &str, script: &str) {
    run_in_vm_with(test, script, &[]);
}

/// [`run_in_vm`] with more `--add SRC:DST` files for the initramfs.
fn run_in_vm_with(test: &str, script: &str, adds: &[String]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(bin) = std::env::var_os("CNIBOX_STATIC").filter(|v| !v.is_empty()) else {
        skip(
            test,
            "CNIBOX_STATIC is not set (build with `make build`, or run `make test`)",
        );
        return;
    };
    let bin = root.join(PathBuf::from(bin));
    assert!(
        bin.is_file(),
        "CNIBOX_STATIC={} does not exist: run `cargo build --release --target x86_64-unknown-linux-musl`",
        bin.display()
    );
    let start = Instant::now();
    let out = Command::new(root.join("tests/vm/run.sh"))
        .arg("--bin")
        .arg(&bin)
        .arg("--script")
        .arg(root.join(script))
        .args(reference_args())
        .args(adds.iter().flat_map(|a| ["--add", a.as_str()]))
        .output()
        .expect("run tests/vm/run.sh");
    let secs = start.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => eprintln!("{text}\n{test}: VM run passed in {secs:.1} s"),
        Some(EX_MISSING) => skip(
            test,
            &format!("the VM runner is missing a host dependency:\n{text}"),
        ),
        code => panic!("{test}: VM run failed ({code:?}) after {secs:.1} s:\n{text}"),
    }
}

/// vlan end to end (two masters on a veth wire, ping, CHECK, GC, DEL, errors,
/// linkInContainer, side by side with the reference) and loopback, from an initramfs.
#[test]
fn vlan_and_loopback_in_vm() {
    run_in_vm("vlan_and_loopback_in_vm", "tests/vm/vlan.sh");
}

/// ipvlan end to end (l2 and l3 on a veth master, ping, CHECK, DEL, undo, errors, the chained
/// form with master and addresses from a prevResult, side by side with the reference): this
/// build machine's kernel has no ipvlan.
#[test]
fn ipvlan_in_vm() {
    run_in_vm("ipvlan_in_vm", "tests/vm/ipvlan.sh");
}

/// dummy end to end (address, ping inside the container, CHECK, DEL, every version, failed
/// ADDs leaving nothing): this build machine's kernel has no dummy links.
#[test]
fn dummy_in_vm() {
    run_in_vm("dummy_in_vm", "tests/vm/dummy.sh");
}

/// vrf end to end (two interfaces in one VRF, their routes moved into its table, ping through
/// it, CHECK, DEL of the last one removing the VRF, a fixed table, errors and undo, side by
/// side with the reference): this build machine's kernel has no vrf.
#[test]
fn vrf_in_vm() {
    run_in_vm("vrf_in_vm", "tests/vm/vrf.sh");
}

/// IPv6 and dual-stack for ipvlan, vlan and dummy (addresses usable the moment ADD returns,
/// CHECK, DEL, a duplicate address failing the ADD on ipvlan and vlan): the shared settling
/// step on the link kinds this build machine's kernel lacks.
#[test]
fn v6_links_in_vm() {
    run_in_vm("v6_links_in_vm", "tests/vm/v6.sh");
}

/// iproute2's `bridge` and the libraries it loads, for reading bridge port VLANs in the VM.
const BRIDGE_TOOL: &[&str] = &[
    "/usr/sbin/bridge",
    "/lib/x86_64-linux-gnu/libmnl.so.0",
    "/lib/x86_64-linux-gnu/libcap.so.2",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/ld-linux-x86-64.so.2",
];

/// bridge VLAN filtering (vlanTrunk with an `id` and a range in one entry, `{}`, `[]`, VLAN 1
/// as the native VLAN of trunk-only ports, refused ranges): this build machine's kernel cannot
/// filter VLANs on a bridge.
#[test]
fn bridge_vlan_in_vm() {
    if let Some(missing) = BRIDGE_TOOL.iter().find(|p| !Path::new(p).is_file()) {
        skip(
            "bridge_vlan_in_vm",
            &format!("{missing} missing (iproute2)"),
        );
        return;
    }
    let adds: Vec<String> = BRIDGE_TOOL.iter().map(|p| format!("{p}:{p}")).collect();
    run_in_vm_with("bridge_vlan_in_vm", "tests/vm/bridge_vlan.sh", &adds);
}
