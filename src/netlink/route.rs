//! Routes: list, add/replace/delete (including ECMP multipath) and single-address lookups.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{
    Family, Handle, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, RTM_DELROUTE, RTM_GETROUTE,
    RTM_NEWROUTE, Result, request,
};
use crate::netlink::wire::{self, Writer};
use ipnet::IpNet;

pub const TABLE_MAIN: u32 = 254;
pub const SCOPE_UNIVERSE: u8 = 0;
pub const SCOPE_LINK: u8 = 253;
pub const SCOPE_HOST: u8 = 254;

/// One ECMP next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    pub gw: Option<IpAddr>,
    pub oif: u32,
}

/// A route. `table` 0 means the main table when adding or deleting; `scope` is RT_SCOPE_*.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    pub dst: IpNet,
    pub gw: Option<IpAddr>,
    pub oif: Option<u32>,
    /// Preferred source address (RTA_PREFSRC).
    pub src: Option<IpAddr>,
    pub table: u32,
    pub scope: u8,
    /// RTPROT_* (2 kernel, 3 boot, ...); 0 means boot when adding.
    pub protocol: u8,
    /// Metric (RTA_PRIORITY).
    pub metric: Option<u32>,
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    /// ECMP next hops; when non-empty, `gw` and `oif` are normally None.
    pub multipath: Vec<NextHop>,
}

fn af(v4: bool) -> u8 {
    if v4 { AF_INET } else { AF_INET6 }
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// RTM_NEWROUTE/RTM_DELROUTE request for `r`: unicast, protocol boot and `r.scope` when
/// adding; wildcards (so that unset fields match anything) when deleting.
pub(super) fn route_msg(ty: u16, r: &Route) -> Vec<u8> {
    let table = if r.table == 0 { TABLE_MAIN } else { r.table };
    let add = ty == RTM_NEWROUTE;
    let mut h = [0u8; RTMSG_LEN];
    h[0] = af(r.dst.addr().is_ipv4());
    h[1] = r.dst.prefix_len();
    h[4] = u8::try_from(table).unwrap_or(0);
    if add {
        let proto = if r.protocol == 0 {
            RTPROT_BOOT
        } else {
            r.protocol
        };
        (h[5], h[6], h[7]) = (proto, r.scope, RTN_UNICAST);
    } else {
        h[6] = RT_SCOPE_NOWHERE;
    }
    request(ty, &h, |w| {
        if r.dst.prefix_len() > 0 {
            w.attr(RTA_DST, &ip_bytes(r.dst.addr()));
        }
        w.u32(RTA_TABLE, table);
        if let Some(g) = r.gw {
            w.attr(RTA_GATEWAY, &ip_bytes(g));
        }
        if let Some(o) = r.oif {
            w.u32(RTA_OIF, o);
        }
        if let Some(s) = r.src {
            w.attr(RTA_PREFSRC, &ip_bytes(s));
        }
        if let Some(m) = r.metric {
            w.u32(RTA_PRIORITY, m);
        }
        if r.mtu.is_some() || r.advmss.is_some() {
            w.nest(RTA_METRICS, |w| {
                if let Some(v) = r.mtu {
                    w.u32(RTAX_MTU, v);
                }
                if let Some(v) = r.advmss {
                    w.u32(RTAX_ADVMSS, v);
                }
            });
        }
        if !r.multipath.is_empty() {
            w.attr(RTA_MULTIPATH, &next_hops_bytes(&r.multipath));
        }
    })
}

/// RTA_MULTIPATH's payload: per hop a struct rtnexthop (its length covering its attributes)
/// followed by RTA_GATEWAY.
fn next_hops_bytes(hops: &[NextHop]) -> Vec<u8> {
    let mut out = Vec::new();
    for nh in hops {
        let mut w = Writer::default();
        w.buf.resize(RTNH_LEN, 0);
        w.buf[4..8].copy_from_slice(&nh.oif.to_ne_bytes());
        if let Some(g) = nh.gw {
            w.attr(RTA_GATEWAY, &ip_bytes(g));
        }
        let len = w.buf.len() as u16;
        w.buf[..2].copy_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&w.buf);
    }
    out
}

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTAX_MTU: u16 = 2;
const RTAX_ADVMSS: u16 = 8;
const RTM_F_CLONED: u32 = 0x200;
const RTPROT_BOOT: u8 = 3;
const RTN_UNICAST: u8 = 1;
const RT_SCOPE_NOWHERE: u8 = 255;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
const RTMSG_LEN: usize = 12;
/// struct rtnexthop: len, flags, hops, ifindex.
const RTNH_LEN: usize = 8;

/// The gateway among a next hop's attributes.
fn gateway(attrs: &[u8]) -> Option<IpAddr> {
    wire::attrs(attrs)
        .find(|(ty, _)| *ty == RTA_GATEWAY)
        .and_then(|(_, v)| wire::get_ip(v))
}

/// The next hops of an RTA_MULTIPATH payload (a sequence of rtnexthop + attributes).
fn next_hops(mut buf: &[u8]) -> Vec<NextHop> {
    let mut out = Vec::new();
    while let (Some(len), Some(oif)) = (wire::get_u16(buf, 0), wire::get_u32(buf, 4)) {
        let len = usize::from(len);
        if len < RTNH_LEN || len > buf.len() {
            break;
        }
        out.push(NextHop {
            oif,
            gw: gateway(&buf[RTNH_LEN..len]),
        });
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

/// A route from an RTM_NEWROUTE payload; None for cached clones and other families.
pub(super) fn parse(body: &[u8]) -> Option<Route> {
    if wire::get_u32(body, 8)? & RTM_F_CLONED != 0 {
        return None;
    }
    let mut dst: IpAddr = match body[0] {
        AF_INET => Ipv4Addr::UNSPECIFIED.into(),
        AF_INET6 => Ipv6Addr::UNSPECIFIED.into(),
        _ => return None,
    };
    let mut r = Route {
        table: u32::from(body[4]),
        protocol: body[5],
        scope: body[6],
        ..Route::default()
    };
    for (ty, v) in wire::attrs(body.get(RTMSG_LEN..)?) {
        match ty {
            RTA_DST => dst = wire::get_ip(v)?,
            RTA_GATEWAY => r.gw = wire::get_ip(v),
            RTA_PREFSRC => r.src = wire::get_ip(v),
            RTA_OIF => r.oif = wire::get_u32(v, 0),
            RTA_TABLE => r.table = wire::get_u32(v, 0).unwrap_or(r.table),
            RTA_PRIORITY => r.metric = wire::get_u32(v, 0),
            RTA_METRICS => {
                for (ty, v) in wire::attrs(v) {
                    match ty {
                        RTAX_MTU => r.mtu = wire::get_u32(v, 0),
                        RTAX_ADVMSS => r.advmss = wire::get_u32(v, 0),
                        _ => {}
                    }
                }
            }
            RTA_MULTIPATH => r.multipath = next_hops(v),
            _ => {}
        }
    }
    r.dst = IpNet::new(dst, body[1]).ok()?;
    Some(r)
}

impl Handle {
    /// Routes of `family`, in `table` only when given (all tables otherwise). Cached clones
    /// are left out.
    pub fn routes(&mut self, family: Family, table: Option<u32>) -> Result<Vec<Route>> {
        let mut h = [0u8; RTMSG_LEN];
        h[0] = super::addr::family(family);
        let r = self
            .dump(request(RTM_GETROUTE, &h, |_| {}))
            .map_err(|e| e.ctx("list routes"))?;
        Ok(r.iter()
            .filter(|m| m.ty == RTM_NEWROUTE)
            .filter_map(|m| parse(&m.body))
            .filter(|r| table.is_none_or(|t| r.table == t))
            .collect())
    }

    fn route_req(&mut self, req: Vec<u8>, flags: u16, verb: &str, r: &Route) -> Result<()> {
        self.request_ack(req, flags).map(drop).map_err(|e| {
            let via = r.gw.map(|g| format!(" via {g}")).unwrap_or_default();
            let dev = r.oif.map(|i| format!(" dev {i}")).unwrap_or_default();
            e.ctx(format_args!("{verb} route {}{via}{dev}", r.dst))
        })
    }

    /// Add a route; EEXIST if it is already there.
    pub fn route_add(&mut self, r: &Route) -> Result<()> {
        self.route_req(
            route_msg(RTM_NEWROUTE, r),
            NLM_F_CREATE | NLM_F_EXCL,
            "add",
            r,
        )
    }

    /// Add a route or replace the one with the same destination, table and metric.
    pub fn route_replace(&mut self, r: &Route) -> Result<()> {
        self.route_req(
            route_msg(RTM_NEWROUTE, r),
            NLM_F_CREATE | NLM_F_REPLACE,
            "replace",
            r,
        )
    }

    /// Delete the route matching `r` (fields left unset match anything).
    pub fn route_del(&mut self, r: &Route) -> Result<()> {
        self.route_req(route_msg(RTM_DELROUTE, r), 0, "delete", r)
    }

    /// The output interface the kernel would use to reach `dst`; None when unreachable.
    pub fn route_get(&mut self, dst: IpAddr) -> Result<Option<u32>> {
        let mut h = [0u8; RTMSG_LEN];
        h[0] = af(dst.is_ipv4());
        h[1] = if dst.is_ipv4() { 32 } else { 128 };
        let req = request(RTM_GETROUTE, &h, |w| w.attr(RTA_DST, &ip_bytes(dst)));
        match self.request_ack(req, 0) {
            // The answer is a cached clone, which `parse` leaves out: read RTA_OIF directly.
            Ok(Some(m)) if m.ty == RTM_NEWROUTE => {
                Ok(wire::attrs(m.body.get(RTMSG_LEN..).unwrap_or_default())
                    .find(|(ty, _)| *ty == RTA_OIF)
                    .and_then(|(_, v)| wire::get_u32(v, 0)))
            }
            Ok(_) => Ok(None),
            Err(e) if matches!(e.errno, libc::ENETUNREACH | libc::EHOSTUNREACH) => Ok(None),
            Err(e) => Err(e.ctx(format_args!("get route to {dst}"))),
        }
    }
}
