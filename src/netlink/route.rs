//! Routes: list, add/replace/delete (including ECMP multipath) and single-address lookups.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteNextHop,
    RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as Rt};

use super::{Family, Handle, Result};

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
    /// Metric (RTA_PRIORITY).
    pub metric: Option<u32>,
    pub mtu: Option<u32>,
    pub advmss: Option<u32>,
    /// ECMP next hops; when non-empty, `gw` and `oif` are normally None.
    pub multipath: Vec<NextHop>,
}

fn ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v) => Some(IpAddr::V4(*v)),
        RouteAddress::Inet6(v) => Some(IpAddr::V6(*v)),
        _ => None,
    }
}

fn af(v4: bool) -> AddressFamily {
    if v4 {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

/// RTM_NEWROUTE/RTM_DELROUTE body for `r`.
pub(super) fn route_msg(r: &Route, add: bool) -> RouteMessage {
    let mut m = RouteMessage::default();
    let table = if r.table == 0 { TABLE_MAIN } else { r.table };
    let h: &mut RouteHeader = &mut m.header;
    h.address_family = af(r.dst.addr().is_ipv4());
    h.destination_prefix_length = r.dst.prefix_len();
    h.table = u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    if add {
        h.protocol = RouteProtocol::Boot;
        h.scope = r.scope.into();
        h.kind = RouteType::Unicast;
    } else {
        h.protocol = RouteProtocol::Unspec;
        h.scope = RouteScope::NoWhere;
        h.kind = RouteType::Unspec;
    }
    let a = &mut m.attributes;
    if r.dst.prefix_len() > 0 {
        a.push(RouteAttribute::Destination(r.dst.addr().into()));
    }
    a.push(RouteAttribute::Table(table));
    a.extend(r.gw.map(|g| RouteAttribute::Gateway(g.into())));
    a.extend(r.oif.map(RouteAttribute::Oif));
    a.extend(r.src.map(|s| RouteAttribute::PrefSource(s.into())));
    a.extend(r.metric.map(RouteAttribute::Priority));
    let mut metrics = Vec::new();
    metrics.extend(r.mtu.map(RouteMetric::Mtu));
    metrics.extend(r.advmss.map(RouteMetric::Advmss));
    if !metrics.is_empty() {
        a.push(RouteAttribute::Metrics(metrics));
    }
    if !r.multipath.is_empty() {
        let hops = r
            .multipath
            .iter()
            .map(|nh| {
                let mut h = RouteNextHop::default();
                h.interface_index = nh.oif;
                h.attributes
                    .extend(nh.gw.map(|g| RouteAttribute::Gateway(g.into())));
                h
            })
            .collect();
        a.push(RouteAttribute::MultiPath(hops));
    }
    m
}

pub(super) fn parse(m: RouteMessage) -> Option<Route> {
    if m.header.flags.contains(RouteFlags::Cloned) {
        return None;
    }
    let v4 = match m.header.address_family {
        AddressFamily::Inet => true,
        AddressFamily::Inet6 => false,
        _ => return None,
    };
    let mut r = Route {
        table: m.header.table.into(),
        scope: m.header.scope.into(),
        ..Route::default()
    };
    let mut dst: IpAddr = if v4 {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    for a in m.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = ip(&d)?,
            RouteAttribute::Gateway(g) => r.gw = ip(&g),
            RouteAttribute::PrefSource(s) => r.src = ip(&s),
            RouteAttribute::Oif(i) => r.oif = Some(i),
            RouteAttribute::Table(t) => r.table = t,
            RouteAttribute::Priority(p) => r.metric = Some(p),
            RouteAttribute::Metrics(ms) => {
                for x in ms {
                    match x {
                        RouteMetric::Mtu(v) => r.mtu = Some(v),
                        RouteMetric::Advmss(v) => r.advmss = Some(v),
                        _ => {}
                    }
                }
            }
            RouteAttribute::MultiPath(hops) => {
                r.multipath = hops
                    .iter()
                    .map(|h| NextHop {
                        oif: h.interface_index,
                        gw: h.attributes.iter().find_map(|a| {
                            if let RouteAttribute::Gateway(g) = a {
                                ip(g)
                            } else {
                                None
                            }
                        }),
                    })
                    .collect()
            }
            _ => {}
        }
    }
    r.dst = IpNet::new(dst, m.header.destination_prefix_length).ok()?;
    Some(r)
}

impl Handle {
    /// Routes of `family`, in `table` only when given (all tables otherwise). Cached clones
    /// are left out.
    pub fn routes(&mut self, family: Family, table: Option<u32>) -> Result<Vec<Route>> {
        let mut m = RouteMessage::default();
        m.header.address_family = super::addr::family(family);
        let r = self
            .dump(Rt::GetRoute(m))
            .map_err(|e| e.ctx("list routes"))?;
        Ok(r.into_iter()
            .filter_map(|m| {
                if let Rt::NewRoute(m) = m {
                    parse(m)
                } else {
                    None
                }
            })
            .filter(|r| table.is_none_or(|t| r.table == t))
            .collect())
    }

    fn route_req(&mut self, msg: Rt, flags: u16, verb: &str, r: &Route) -> Result<()> {
        self.request_ack(msg, flags).map(drop).map_err(|e| {
            let via = r.gw.map(|g| format!(" via {g}")).unwrap_or_default();
            let dev = r.oif.map(|i| format!(" dev {i}")).unwrap_or_default();
            e.ctx(format_args!("{verb} route {}{via}{dev}", r.dst))
        })
    }

    /// Add a route; EEXIST if it is already there.
    pub fn route_add(&mut self, r: &Route) -> Result<()> {
        self.route_req(
            Rt::NewRoute(route_msg(r, true)),
            NLM_F_CREATE | NLM_F_EXCL,
            "add",
            r,
        )
    }

    /// Add a route or replace the one with the same destination, table and metric.
    pub fn route_replace(&mut self, r: &Route) -> Result<()> {
        self.route_req(
            Rt::NewRoute(route_msg(r, true)),
            NLM_F_CREATE | NLM_F_REPLACE,
            "replace",
            r,
        )
    }

    /// Delete the route matching `r` (fields left unset match anything).
    pub fn route_del(&mut self, r: &Route) -> Result<()> {
        self.route_req(Rt::DelRoute(route_msg(r, false)), 0, "delete", r)
    }

    /// The output interface the kernel would use to reach `dst`; None when unreachable.
    pub fn route_get(&mut self, dst: IpAddr) -> Result<Option<u32>> {
        let mut m = RouteMessage::default();
        m.header.address_family = af(dst.is_ipv4());
        m.header.destination_prefix_length = if dst.is_ipv4() { 32 } else { 128 };
        m.attributes.push(RouteAttribute::Destination(dst.into()));
        match self.request_ack(Rt::GetRoute(m), 0) {
            Ok(Some(Rt::NewRoute(m))) => Ok(m.attributes.iter().find_map(|a| {
                if let RouteAttribute::Oif(i) = a {
                    Some(*i)
                } else {
                    None
                }
            })),
            Ok(_) => Ok(None),
            Err(e) if matches!(e.errno, libc::ENETUNREACH | libc::EHOSTUNREACH) => Ok(None),
            Err(e) => Err(e.ctx(format_args!("get route to {dst}"))),
        }
    }
}
