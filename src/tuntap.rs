//! Tap devices through `/dev/net/tun`. rtnetlink cannot create a tun/tap device (its link kind
//! `tun` only reports), so this is the one place that uses the TUNSETIFF family of ioctls.
//!
//! The ioctl numbers and `struct ifreq` come from libc, so their encoding and sizes are the
//! target's own (40-byte `ifreq` on 64-bit, 32 on 32-bit ARM); the unsafe code is three blocks:
//! the two small `ioctl_*` functions below and the zeroed `ifreq` in [`create_here`].
//!
//! With an SELinux label the device must be created by a process running in that label (the
//! kernel labels a tun device with its creator's context), so `create` then re-executes this
//! binary as `cnibox --tap-create …` with the label set for exec, as upstream runs `ip tuntap`
//! after setexeccon.

use crate::error::{Error, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;

pub const IFF_TAP: u16 = libc::IFF_TAP as u16;
pub const IFF_NO_PI: u16 = libc::IFF_NO_PI as u16;
pub const IFF_VNET_HDR: u16 = libc::IFF_VNET_HDR as u16;
pub const IFF_MULTI_QUEUE: u16 = libc::IFF_MULTI_QUEUE as u16;

/// The hidden option of the binary that creates a tap in an SELinux label (see module doc).
pub const HELPER_OPTION: &str = "--tap-create";

/// What a new tap device gets: TUNSETIFF flags, and owner/group (`None`: anyone may attach).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tap {
    pub flags: u16,
    pub owner: Option<u32>,
    pub group: Option<u32>,
}

/// ioctl with a `struct ifreq` argument.
fn ioctl_ifreq(f: &File, req: libc::Ioctl, ifr: &mut libc::ifreq) -> std::io::Result<()> {
    // SAFETY: `f` is an open fd for the call's duration and `ifr` a valid, exclusively borrowed
    // `struct ifreq` of the target's layout, which is what TUNSETIFF reads and writes.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), req as _, ifr as *mut libc::ifreq) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// ioctl whose argument is a plain integer (TUNSETPERSIST, TUNSETOWNER, TUNSETGROUP).
fn ioctl_value(f: &File, req: libc::Ioctl, value: libc::c_ulong) -> std::io::Result<()> {
    // SAFETY: these requests take their argument by value; no memory is passed.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), req as _, value) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Create a persistent tap in the calling thread's network namespace and return its name,
/// which the kernel picks (`tap<N>`): asking for a name could attach to an existing device of
/// that name instead of creating one. The caller renames it.
pub fn create_here(t: &Tap) -> Result<String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| Error::io("failed to open /dev/net/tun", e))?;
    // SAFETY: `ifreq` is a plain C struct (a name array and a union of integers and arrays),
    // for which all-zero bytes are a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_ifru.ifru_flags = t.flags as libc::c_short;
    let ioerr = |what: &str, e: std::io::Error| Error::io(format_args!("tap: {what}"), e);
    ioctl_ifreq(&f, libc::TUNSETIFF, &mut ifr).map_err(|e| ioerr("TUNSETIFF", e))?;
    let name: String = ifr
        .ifr_name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8 as char)
        .collect();
    // Until TUNSETPERSIST the device goes away with `f`, so a failure here leaves nothing.
    if let Some(uid) = t.owner {
        ioctl_value(&f, libc::TUNSETOWNER, uid.into()).map_err(|e| ioerr("TUNSETOWNER", e))?;
    }
    if let Some(gid) = t.group {
        ioctl_value(&f, libc::TUNSETGROUP, gid.into()).map_err(|e| ioerr("TUNSETGROUP", e))?;
    }
    ioctl_value(&f, libc::TUNSETPERSIST, 1).map_err(|e| ioerr("TUNSETPERSIST", e))?;
    Ok(name)
}

/// Whether this host labels with SELinux (selinuxfs mounted).
pub fn selinux_enabled() -> bool {
    std::path::Path::new("/sys/fs/selinux/enforce").exists()
}

/// `create_here` in a child process that runs in SELinux `label`; the child inherits the
/// calling thread's network namespace.
pub fn create_labelled(t: &Tap, label: &str) -> Result<String> {
    let attr = "/proc/thread-self/attr/exec";
    std::fs::write(attr, label)
        .map_err(|e| Error::io(format_args!("failed to set exec label {label:?}"), e))?;
    let fmt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let out = std::process::Command::new("/proc/self/exe")
        .arg0("cnibox")
        .args([
            HELPER_OPTION,
            &t.flags.to_string(),
            &fmt(t.owner),
            &fmt(t.group),
        ])
        .stdin(std::process::Stdio::null())
        .output();
    // The label applies to every later exec of this thread (IPAM plugins): reset it.
    let _ = std::fs::write(attr, "");
    let out = out.map_err(|e| Error::io("failed to run the tap helper", e))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || text.is_empty() {
        return Err(Error::internal(format!(
            "tap helper in label {label:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(text)
}

/// `cnibox --tap-create FLAGS OWNER|- GROUP|-`: create the tap here and print its name.
pub fn helper_main(args: &[String]) -> i32 {
    let num = |s: Option<&String>| -> Option<Option<u32>> {
        match s.map(String::as_str) {
            Some("-") => Some(None),
            Some(v) => v.parse().ok().map(Some),
            None => None,
        }
    };
    let flags = args.first().and_then(|f| f.parse::<u16>().ok());
    let (Some(flags), Some(owner), Some(group)) = (flags, num(args.get(1)), num(args.get(2)))
    else {
        crate::warn!("usage: cnibox {HELPER_OPTION} FLAGS OWNER|- GROUP|-");
        return 2;
    };
    match create_here(&Tap {
        flags,
        owner,
        group,
    }) {
        Ok(name) => {
            use std::io::Write as _;
            // The parent reads the name from this pipe; without it, it reports the failure.
            match writeln!(std::io::stdout(), "{name}") {
                Ok(()) => 0,
                Err(_) => 1,
            }
        }
        Err(e) => {
            crate::warn!("{e}");
            1
        }
    }
}
