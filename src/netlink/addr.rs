//! Interface addresses: list, add, delete.

use std::net::IpAddr;

use super::{
    Family, Handle, NLM_F_CREATE, NLM_F_EXCL, RTM_DELADDR, RTM_GETADDR, RTM_NEWADDR, Result,
    request,
};
use crate::netlink::wire;
use ipnet::IpNet;

/// Skip duplicate address detection (IPv6).
pub const IFA_F_NODAD: u32 = 0x02;
/// Optimistic DAD (RFC 4429, IPv6): usable while detection runs, which starts without the
/// random initial delay. The kernel keeps it only where `optimistic_dad` and `use_optimistic`
/// are on for the interface.
pub const IFA_F_OPTIMISTIC: u32 = 0x04;
/// Duplicate address detection found the address in use elsewhere (IPv6).
pub const IFA_F_DADFAILED: u32 = 0x08;
/// Duplicate address detection has not finished (IPv6): unusable unless also optimistic.
pub const IFA_F_TENTATIVE: u32 = 0x40;
/// Do not add the prefix route for the address.
pub const IFA_F_NOPREFIXROUTE: u32 = 0x200;

/// An address on an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    pub index: u32,
    /// Address with its prefix length.
    pub net: IpNet,
    /// IFA_F_* flags.
    pub flags: u32,
    /// RT_SCOPE_* scope (0 universe, 253 link, 254 host).
    pub scope: u8,
}

pub(super) fn family(f: Family) -> u8 {
    match f {
        Family::All => 0,
        Family::V4 => libc::AF_INET as u8,
        Family::V6 => libc::AF_INET6 as u8,
    }
}

/// RTM_NEWADDR/RTM_DELADDR request for `net` on `index`: IFA_LOCAL and IFA_ADDRESS, the IPv4
/// broadcast address when adding (prefixes shorter than /31), IFA_FLAGS when a flag does not
/// fit the header's 8 bits.
pub(super) fn addr_msg(ty: u16, index: u32, net: IpNet, flags: u32) -> Vec<u8> {
    let v4 = net.addr().is_ipv4();
    let mut h = [0u8; IFADDRMSG_LEN];
    h[0] = family(if v4 { Family::V4 } else { Family::V6 });
    h[1] = net.prefix_len();
    h[2] = flags as u8;
    h[4..8].copy_from_slice(&index.to_ne_bytes());
    request(ty, &h, |w| {
        let ip = match net.addr() {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        w.attr(IFA_LOCAL, &ip);
        w.attr(IFA_ADDRESS, &ip);
        if let (RTM_NEWADDR, IpNet::V4(n)) = (ty, net)
            && n.prefix_len() < 31
        {
            w.attr(IFA_BROADCAST, &n.broadcast().octets());
        }
        if flags > 0xff {
            w.u32(IFA_FLAGS, flags);
        }
    })
}

const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_BROADCAST: u16 = 4;
const IFA_FLAGS: u16 = 8;
/// struct ifaddrmsg: family, prefixlen, flags, scope, index.
const IFADDRMSG_LEN: usize = 8;

/// An address from an RTM_NEWADDR payload.
pub(super) fn parse(body: &[u8]) -> Option<Addr> {
    let (prefix, scope) = (*body.get(1)?, *body.get(3)?);
    let mut flags = u32::from(*body.get(2)?);
    let (mut local, mut address) = (None, None);
    for (ty, v) in wire::attrs(body.get(IFADDRMSG_LEN..)?) {
        match ty {
            IFA_LOCAL => local = wire::get_ip(v),
            IFA_ADDRESS => address = wire::get_ip(v),
            IFA_FLAGS => flags = wire::get_u32(v, 0).unwrap_or(flags),
            _ => {}
        }
    }
    // For IPv4 point-to-point links IFA_ADDRESS is the peer; IFA_LOCAL is ours.
    let ip: IpAddr = local.or(address)?;
    Some(Addr {
        index: wire::get_u32(body, 4)?,
        net: IpNet::new(ip, prefix).ok()?,
        flags,
        scope,
    })
}

impl Handle {
    /// Addresses of `family`, on link `index` only when given.
    pub fn addrs(&mut self, index: Option<u32>, fam: Family) -> Result<Vec<Addr>> {
        let mut h = [0u8; IFADDRMSG_LEN];
        h[0] = family(fam);
        let r = self
            .dump(request(RTM_GETADDR, &h, |_| {}))
            .map_err(|e| e.ctx("list addresses"))?;
        Ok(r.iter()
            .filter(|m| m.ty == RTM_NEWADDR)
            .filter_map(|m| parse(&m.body))
            .filter(|a| index.is_none_or(|i| a.index == i))
            .filter(|a| match fam {
                Family::All => true,
                Family::V4 => a.net.addr().is_ipv4(),
                Family::V6 => a.net.addr().is_ipv6(),
            })
            .collect())
    }

    /// Add `net` to link `index` with IFA_F_* `flags` (e.g. [`IFA_F_NODAD`]); IPv4 addresses
    /// get the broadcast address derived from the prefix.
    pub fn add_addr(&mut self, index: u32, net: IpNet, flags: u32) -> Result<()> {
        self.request_ack(
            addr_msg(RTM_NEWADDR, index, net, flags),
            NLM_F_CREATE | NLM_F_EXCL,
        )
        .map(drop)
        .map_err(|e| e.ctx(format_args!("add address {net} (link {index})")))
    }

    /// Remove `net` from link `index`.
    pub fn del_addr(&mut self, index: u32, net: IpNet) -> Result<()> {
        self.request_ack(addr_msg(RTM_DELADDR, index, net, 0), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("delete address {net} (link {index})")))
    }
}
