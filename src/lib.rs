//! cnibox: the standard CNI plugins as one multi-call binary.
//!
//! Layers point one way: `applets` use `cni` (the protocol), `ipam`, `netlink`, `netns`,
//! `netfilter` (tc lives in `netlink::tc`), `sysctl` and `dbus` (firewalld); `runtime` (the
//! runtime side, `cnitool`) and `doctor` (which reads the runtime's cache) sit beside them and
//! run plugins as processes; none of those know about applets.

// No panic in production code (README): no unwrap/expect outside tests. Set here rather than in
// Cargo.toml's [lints], which would also reach tests/ and benches/.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// `eprintln!` that cannot panic. Plugins run with SIGPIPE ignored (`process::start`, called
/// first by main.rs) and their
/// stderr is a pipe the runtime may close early: `eprintln!` would then panic half-way through
/// an ADD, and a panic aborts without running the undo guard. A message that cannot be
/// written is dropped instead.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod alloc;
pub mod applets;
pub(crate) mod attachment;
pub mod cni;
pub mod dbus;
pub mod doctor;
pub(crate) mod error;
pub(crate) mod hash;
pub mod ipam;
pub mod netfilter;
pub mod netlink;
pub(crate) mod netns;
pub(crate) mod overlap;
pub mod process;
pub(crate) mod random;
pub mod runtime;
pub(crate) mod smallfile;
pub(crate) mod sysctl;
#[cfg(test)]
pub(crate) mod testing;
pub mod tuntap;
pub(crate) mod undo;
