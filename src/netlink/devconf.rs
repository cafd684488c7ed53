//! Per-device and per-namespace IP settings over netlink instead of `/proc/sys`: the IPv4
//! settings of one link (`IFLA_AF_SPEC`/`AF_INET`/`IFLA_INET_CONF`, written with RTM_SETLINK)
//! and a namespace's `forwarding` (RTM_GETNETCONF for "all"). A link's IPv6 `accept_ra` is read
//! with the link itself (`link::parse`, from the `IFLA_INET6_CONF` of an RTM_GETLINK reply).
//!
//! Why not `/proc/sys`: the kernel looks up a `/proc/sys/net/…` path through dentries that every
//! network namespace has its own copies of, all hashed alike (`proc_sys_compare` rejects the
//! other namespaces' one by one, under a global lock). On a node with 250 containers each such
//! open costs ~10× what it costs with 5 (benches/notes/growth.md): a plugin that opens a few per
//! ADD grows with the node for no reason of its own.

use super::link::IFLA_AF_SPEC;
use super::{Handle, Result, request};
use crate::netlink::wire;

const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u16 = libc::AF_INET6 as u16;
/// IFLA_INET_CONF (linux/if_link.h): the IPv4 devconf of a link, by IPV4_DEVCONF_* number.
const IFLA_INET_CONF: u16 = 1;
/// IPV4_DEVCONF_ARP_NOTIFY (linux/ip.h), 1-based as IFLA_INET_CONF's attribute types are.
const IPV4_DEVCONF_ARP_NOTIFY: u16 = 22;
const RTM_GETNETCONF: u16 = 82;
const RTM_NEWNETCONF: u16 = 80;
const NETCONFA_IFINDEX: u16 = 1;
const NETCONFA_FORWARDING: u16 = 2;
/// NETCONFA_IFINDEX_ALL: the namespace's `conf/all` (for IPv4, `ip_forward` is the same value).
const NETCONFA_IFINDEX_ALL: i32 = -1;

impl Handle {
    /// `arp_notify` on for link `index`, as writing 1 to `net/ipv4/conf/<link>/arp_notify` does
    /// (the link announces its IPv4 addresses when it comes up).
    pub fn set_arp_notify(&mut self, index: u32) -> Result<()> {
        self.set_ipv4_conf(index, IPV4_DEVCONF_ARP_NOTIFY, 1)
    }

    /// Set the IPv4 setting `id` (IPV4_DEVCONF_*) of link `index` to `value`.
    fn set_ipv4_conf(&mut self, index: u32, id: u16, value: u32) -> Result<()> {
        self.set_link(index, format_args!("set ipv4 conf {id}={value}"), |w| {
            w.nest(IFLA_AF_SPEC, |w| {
                w.nest(u16::from(AF_INET), |w| {
                    w.nest(IFLA_INET_CONF, |w| w.u32(id, value))
                })
            })
        })
    }

    /// Whether forwarding is on for the whole namespace (`net.ipv4.ip_forward`, or
    /// `net.ipv6.conf.all.forwarding` with `v6`); None when the kernel does not say.
    pub fn forwarding(&mut self, v6: bool) -> Result<Option<bool>> {
        let family = if v6 { AF_INET6 as u8 } else { AF_INET };
        let req = request(RTM_GETNETCONF, &[family, 0, 0, 0], |w| {
            w.u32(NETCONFA_IFINDEX, NETCONFA_IFINDEX_ALL as u32)
        });
        let reply = self
            .request_ack(req, 0)
            .map_err(|e| e.ctx("get forwarding"))?;
        Ok(reply.filter(|r| r.ty == RTM_NEWNETCONF).and_then(|r| {
            let attrs = r.body.get(4..)?;
            wire::attrs(attrs)
                .find(|(ty, _)| *ty == NETCONFA_FORWARDING)
                .and_then(|(_, v)| wire::get_u32(v, 0))
                .map(|v| v != 0)
        }))
    }
}
