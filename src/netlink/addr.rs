//! Interface addresses: list, add, delete.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as Rt};

use super::{Family, Handle, RTM_NEWADDR, Result};
use crate::nlmsg;

/// Skip duplicate address detection (IPv6).
pub const IFA_F_NODAD: u32 = 0x02;
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

pub(super) fn family(f: Family) -> AddressFamily {
    match f {
        Family::All => AddressFamily::Unspec,
        Family::V4 => AddressFamily::Inet,
        Family::V6 => AddressFamily::Inet6,
    }
}

/// RTM_NEWADDR/RTM_DELADDR body for `net` on `index`.
pub(super) fn addr_msg(index: u32, net: IpNet, flags: u32, add: bool) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header.family = family(if net.addr().is_ipv4() {
        Family::V4
    } else {
        Family::V6
    });
    m.header.prefix_len = net.prefix_len();
    m.header.index = index;
    m.header.flags = AddressHeaderFlags::from_bits_retain(flags as u8);
    m.attributes.push(AddressAttribute::Local(net.addr()));
    m.attributes.push(AddressAttribute::Address(net.addr()));
    if let (true, IpNet::V4(n)) = (add, net)
        && n.prefix_len() < 31
    {
        m.attributes
            .push(AddressAttribute::Broadcast(n.broadcast()));
    }
    if flags > 0xff {
        m.attributes
            .push(AddressAttribute::Flags(AddressFlags::from_bits_retain(
                flags,
            )));
    }
    m
}

const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
/// struct ifaddrmsg: family, prefixlen, flags, scope, index.
const IFADDRMSG_LEN: usize = 8;

/// An address from an RTM_NEWADDR payload.
fn parse(body: &[u8]) -> Option<Addr> {
    let (prefix, scope) = (*body.get(1)?, *body.get(3)?);
    let mut flags = u32::from(*body.get(2)?);
    let (mut local, mut address) = (None, None);
    for (ty, v) in nlmsg::attrs(body.get(IFADDRMSG_LEN..)?) {
        match ty {
            IFA_LOCAL => local = nlmsg::get_ip(v),
            IFA_ADDRESS => address = nlmsg::get_ip(v),
            IFA_FLAGS => flags = nlmsg::get_u32(v, 0).unwrap_or(flags),
            _ => {}
        }
    }
    // For IPv4 point-to-point links IFA_ADDRESS is the peer; IFA_LOCAL is ours.
    let ip: IpAddr = local.or(address)?;
    Some(Addr {
        index: nlmsg::get_u32(body, 4)?,
        net: IpNet::new(ip, prefix).ok()?,
        flags,
        scope,
    })
}

impl Handle {
    /// Addresses of `family`, on link `index` only when given.
    pub fn addrs(&mut self, index: Option<u32>, fam: Family) -> Result<Vec<Addr>> {
        let mut m = AddressMessage::default();
        m.header.family = family(fam);
        let r = self
            .dump(Rt::GetAddress(m))
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
            Rt::NewAddress(addr_msg(index, net, flags, true)),
            NLM_F_CREATE | NLM_F_EXCL,
        )
        .map(drop)
        .map_err(|e| e.ctx(format_args!("add address {net} (link {index})")))
    }

    /// Remove `net` from link `index`.
    pub fn del_addr(&mut self, index: u32, net: IpNet) -> Result<()> {
        self.request_ack(Rt::DelAddress(addr_msg(index, net, 0, false)), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("delete address {net} (link {index})")))
    }
}
