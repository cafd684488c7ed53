//! Kernel parameters under `/proc/sys`.
//!
//! Keys follow sysctl(8) and upstream's `pkg/utils/sysctl`: the first separator decides the
//! form. In dotted form (`net.ipv4.ip_forward`) dots and slashes swap places, so an interface
//! name with a dot is written with a slash (`net.ipv4.conf.eth0/100.forwarding`); in slash form
//! (`net/ipv4/conf/eth0.100/forwarding`) the key is used as is. [`iface`] builds per-interface
//! keys in slash form so any interface name works. Values in network keys apply to the network
//! namespace of the calling thread.

use crate::error::{Error, Result};

/// The `/proc/sys` path for `key`, refusing empty, `.` and `..` components.
pub fn path(key: &str) -> Result<String> {
    let first = key.find(['.', '/']);
    let norm: String = if first.is_some_and(|i| key.as_bytes()[i] == b'.') {
        key.chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect()
    } else {
        key.to_string()
    };
    if norm
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(Error::config(format!("invalid sysctl key {key:?}")));
    }
    Ok(format!("/proc/sys/{norm}"))
}

/// A per-interface key in slash form: `iface("net/ipv4/conf", "eth0.100", "forwarding")` gives
/// `net/ipv4/conf/eth0.100/forwarding`. `dir` may also be dotted (`net.ipv6.conf`).
pub fn iface(dir: &str, ifname: &str, leaf: &str) -> String {
    format!("{}/{ifname}/{leaf}", dir.replace('.', "/"))
}

/// Read a value, without the trailing newline.
pub fn get(key: &str) -> Result<String> {
    let p = path(key)?;
    let mut s =
        std::fs::read_to_string(&p).map_err(|e| Error::io(format_args!("read sysctl {key}"), e))?;
    while s.ends_with('\n') {
        s.pop();
    }
    Ok(s)
}

/// Write a value.
pub fn set(key: &str, value: &str) -> Result<()> {
    let p = path(key)?;
    std::fs::write(&p, value).map_err(|e| Error::io(format_args!("set sysctl {key}={value}"), e))
}

/// Write a value unless the key already holds it. For keys whose every write is work for the
/// kernel even when nothing changes: a write to `net/ipv6/conf/all/forwarding` takes the RTNL
/// lock (restarting the write while another task holds it), walks every interface and purges
/// default routers, where a read takes no lock.
pub fn ensure(key: &str, value: &str) -> Result<()> {
    if get(key).is_ok_and(|v| v == value) {
        return Ok(());
    }
    set(key, value)
}

/// Forwarding on for the calling thread's namespace: `net.ipv4.ip_forward`, or with `v6`
/// `net.ipv6.conf.all.forwarding`. Read over `h` (RTM_GETNETCONF, no `/proc/sys` lookup, whose
/// cost grows with the number of namespaces on the node: `netlink/devconf.rs`), written only
/// when it is off or the kernel does not say. `h` must be in the calling thread's namespace.
pub fn forwarding_on(h: &mut crate::netlink::Handle, v6: bool) -> Result<()> {
    if let Ok(Some(true)) = h.forwarding(v6) {
        return Ok(());
    }
    if v6 {
        ensure("net/ipv6/conf/all/forwarding", "1")
    } else {
        set("net/ipv4/ip_forward", "1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_forms() {
        assert_eq!(
            path("net.ipv4.ip_forward").unwrap(),
            "/proc/sys/net/ipv4/ip_forward"
        );
        assert_eq!(
            path("net.ipv4.conf.eth0/100.forwarding").unwrap(),
            "/proc/sys/net/ipv4/conf/eth0.100/forwarding"
        );
        assert_eq!(
            path("net/ipv4/conf/eth0.100/forwarding").unwrap(),
            "/proc/sys/net/ipv4/conf/eth0.100/forwarding"
        );
        assert_eq!(path("kernel").unwrap(), "/proc/sys/kernel");
        for bad in ["", "net..x", "net/../x", "../etc", "net/ipv4/", ".net"] {
            assert!(path(bad).is_err(), "{bad}");
        }
        assert_eq!(
            iface("net.ipv6.conf", "a.b", "accept_ra"),
            "net/ipv6/conf/a.b/accept_ra"
        );
        assert_eq!(
            path(&iface("net/ipv4/conf", "a.b", "rp_filter")).unwrap(),
            "/proc/sys/net/ipv4/conf/a.b/rp_filter"
        );
    }

    #[test]
    fn get_and_errors() {
        assert!(!get("kernel.ostype").unwrap().ends_with('\n'));
        let e = get("net.ipv4.conf.nonexistent-cnibox.forwarding").unwrap_err();
        assert!(
            e.msg
                .contains("net.ipv4.conf.nonexistent-cnibox.forwarding"),
            "{e}"
        );
    }

    #[test]
    fn set_in_netns() {
        if !crate::testing::require_root("sysctl::set_in_netns") {
            return;
        }
        let ns = crate::netns::testing::TempNetNs::new("cnibox-sysctl").unwrap();
        ns.enter(|| {
            set("net.ipv4.conf.lo.forwarding", "1").unwrap();
            assert_eq!(get("net/ipv4/conf/lo/forwarding").unwrap(), "1");
            set(&iface("net.ipv4.conf", "lo", "forwarding"), "0").unwrap();
            assert_eq!(get("net.ipv4.conf.lo.forwarding").unwrap(), "0");
            // ensure writes only a different value: both ways, and once more as a no-op.
            for v in ["1", "1", "0"] {
                ensure("net/ipv6/conf/all/forwarding", v).unwrap();
                assert_eq!(get("net/ipv6/conf/all/forwarding").unwrap(), v);
            }
            assert!(ensure("net/ipv6/conf/nonexistent-cnibox/forwarding", "1").is_err());
        })
        .unwrap();
    }

    /// The netlink read agrees with `/proc/sys` both ways, in both families, and
    /// `forwarding_on` turns each on.
    #[test]
    fn forwarding_over_netlink() {
        if !crate::testing::require_root("sysctl::forwarding_over_netlink") {
            return;
        }
        let ns = crate::netns::testing::TempNetNs::new("cnibox-fwd").unwrap();
        ns.enter(|| {
            let mut h = crate::netlink::Handle::new().unwrap();
            for (v6, key) in [
                (false, "net/ipv4/ip_forward"),
                (true, "net/ipv6/conf/all/forwarding"),
            ] {
                set(key, "0").unwrap();
                assert_eq!(h.forwarding(v6).unwrap(), Some(false), "{key}");
                forwarding_on(&mut h, v6).unwrap();
                assert_eq!(get(key).unwrap(), "1", "{key}");
                assert_eq!(h.forwarding(v6).unwrap(), Some(true), "{key}");
                forwarding_on(&mut h, v6).unwrap();
                set(key, "0").unwrap();
                assert_eq!(h.forwarding(v6).unwrap(), Some(false), "{key}");
            }
        })
        .unwrap();
    }
}
