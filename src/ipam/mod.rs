//! IP address management shared by host-local: ranges and range sets with upstream's
//! validation and defaults, the round-robin allocation order, and the on-disk store; and the
//! dhcp daemon's lease record format (`lease_record.rs`), shared by the dhcp applet and the doctor.
//!
//! Mirrors containernetworking/plugins `plugins/ipam/host-local/backend/allocator`: a range
//! defaults to `subnet+1 … broadcast-1` (IPv4) or `… last address` (IPv6), the gateway defaults
//! to `subnet+1` and is never handed out, and iteration starts just after the last reserved
//! address of the range set, wrapping across the set's ranges.

pub mod lease_record;
pub mod store;

use crate::error::{Error, Result};
use ipnet::IpNet;
use serde::Deserialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address as a number, for arithmetic on both families.
pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn from_u128(v: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(v as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(v))
    }
}

/// Go's canonicalizeIP: IPv4-mapped IPv6 addresses count as IPv4.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// A range as written in the config (every field optional but `subnet`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeConf {
    #[serde(default)]
    pub subnet: Option<IpNet>,
    #[serde(default)]
    pub range_start: Option<IpAddr>,
    #[serde(default)]
    pub range_end: Option<IpAddr>,
    #[serde(default)]
    pub gateway: Option<IpAddr>,
}

/// A validated range: every field resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub subnet: IpNet,
    pub start: IpAddr,
    pub end: IpAddr,
    pub gateway: IpAddr,
}

impl Range {
    /// Validate and fill in defaults exactly as upstream's `Range.Canonicalize`.
    pub fn from_conf(c: &RangeConf) -> Result<Range> {
        let subnet = c
            .subnet
            .ok_or_else(|| Error::config("range is missing \"subnet\""))?;
        let subnet = match canonical(subnet.addr()) {
            IpAddr::V4(a) if subnet.addr().is_ipv6() => {
                IpNet::new(IpAddr::V4(a), subnet.prefix_len().saturating_sub(96))
                    .map_err(|_| Error::config(format!("invalid subnet {subnet}")))?
            }
            _ => subnet,
        };
        if subnet.prefix_len() + 2 > subnet.max_prefix_len() {
            return Err(Error::config(format!(
                "Network {} too small to allocate from",
                subnet.trunc()
            )));
        }
        if subnet.addr() != subnet.network() {
            return Err(Error::config(format!(
                "network has host bits set. For a subnet mask of length {} the network address is {}",
                subnet.prefix_len(),
                subnet.network()
            )));
        }
        let v4 = subnet.addr().is_ipv4();
        let net = to_u128(subnet.network());
        let last = to_u128(subnet.broadcast()) - u128::from(v4);
        let first = from_u128(net + 1, v4);
        let gateway = c.gateway.map(canonical).unwrap_or(first);
        // Beyond upstream, which returns it: a gateway of the other family makes no route
        // (ptp and bridge would fail, or worse, on it).
        if gateway.is_ipv4() != v4 {
            return Err(Error::config(format!(
                "gateway {gateway} is not an {} address like subnet {subnet}",
                if v4 { "IPv4" } else { "IPv6" }
            )));
        }
        let mut r = Range {
            subnet,
            start: first,
            end: from_u128(last, v4),
            gateway,
        };
        if let Some(s) = c.range_start.map(canonical) {
            if !r.in_subnet(s) {
                return Err(Error::config(format!(
                    "RangeStart {s} not in network {subnet}"
                )));
            }
            r.start = s;
        }
        if let Some(e) = c.range_end.map(canonical) {
            if !r.in_subnet(e) {
                return Err(Error::config(format!(
                    "RangeEnd {e} not in network {subnet}"
                )));
            }
            // Upstream accepts the IPv4 broadcast address as rangeEnd and then hands it out;
            // the config stays valid here, but the range ends before it.
            r.end = if v4 && to_u128(e) == last + 1 {
                from_u128(last, v4)
            } else {
                e
            };
        }
        // Beyond upstream, which hands out the network address or addresses past the subnet
        // here: the range must lie within the allocatable part of the subnet, in order.
        for (what, ip) in [("rangeStart", r.start), ("rangeEnd", r.end)] {
            let n = to_u128(ip);
            if n == net {
                return Err(Error::config(format!(
                    "{what} {ip} is the network address of {subnet}"
                )));
            }
            if v4 && n == last + 1 {
                return Err(Error::config(format!(
                    "{what} {ip} is the broadcast address of {subnet}"
                )));
            }
        }
        if to_u128(r.start) > to_u128(r.end) {
            return Err(Error::config(format!(
                "rangeStart {} is after rangeEnd {} in {subnet}",
                r.start, r.end
            )));
        }
        Ok(r)
    }

    fn in_subnet(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.subnet.addr().is_ipv4() && self.subnet.contains(&ip)
    }

    /// Is `ip` an allocatable address of this range (inside start…end)?
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.in_subnet(ip) && (to_u128(self.start)..=to_u128(self.end)).contains(&to_u128(ip))
    }

    fn overlaps(&self, o: &Range) -> bool {
        self.start.is_ipv4() == o.start.is_ipv4()
            && (self.contains(o.start)
                || self.contains(o.end)
                || o.contains(self.start)
                || o.contains(self.end))
    }

    /// Addresses this range can hand out (the gateway excluded).
    pub fn capacity(&self) -> u128 {
        let n = to_u128(self.end) - to_u128(self.start) + 1;
        n - u128::from(self.contains(self.gateway))
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

/// Ranges of one family from which one address is handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeSet(pub Vec<Range>);

impl RangeSet {
    pub fn from_conf(confs: &[RangeConf]) -> Result<RangeSet> {
        if confs.is_empty() {
            return Err(Error::config("empty range set"));
        }
        let ranges = confs
            .iter()
            .map(Range::from_conf)
            .collect::<Result<Vec<_>>>()?;
        if ranges
            .iter()
            .any(|r| r.start.is_ipv4() != ranges[0].start.is_ipv4())
        {
            return Err(Error::config("mixed address families"));
        }
        for (i, a) in ranges.iter().enumerate() {
            if let Some(b) = ranges[i + 1..].iter().find(|b| a.overlaps(b)) {
                return Err(Error::config(format!("subnets {a} and {b} overlap")));
            }
        }
        Ok(RangeSet(ranges))
    }

    pub fn is_ipv4(&self) -> bool {
        self.0[0].start.is_ipv4()
    }

    pub fn range_for(&self, ip: IpAddr) -> Option<&Range> {
        self.0.iter().find(|r| r.contains(ip))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.range_for(ip).is_some()
    }

    pub fn overlaps(&self, o: &RangeSet) -> bool {
        self.0.iter().any(|a| o.0.iter().any(|b| a.overlaps(b)))
    }

    pub fn capacity(&self) -> u128 {
        self.0
            .iter()
            .map(Range::capacity)
            .fold(0, u128::saturating_add)
    }

    /// Candidates in upstream's round-robin order: starting after `last` when it lies in the
    /// set (else at the first range's start), wrapping across ranges, skipping gateways, each
    /// address at most once.
    pub fn candidates(&self, last: Option<IpAddr>) -> Candidates<'_> {
        let start = last.filter(|ip| self.contains(*ip)).and_then(|ip| {
            self.0
                .iter()
                .position(|r| r.contains(ip))
                .map(|i| (i, to_u128(canonical(ip))))
        });
        Candidates {
            set: self,
            range: start.map_or(0, |s| s.0),
            cur: start.map(|s| s.1),
            first: None,
            done: false,
        }
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(Range::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// Iterator over allocation candidates: (address with the subnet's prefix, gateway).
pub struct Candidates<'a> {
    set: &'a RangeSet,
    range: usize,
    cur: Option<u128>,
    first: Option<u128>,
    done: bool,
}

impl Iterator for Candidates<'_> {
    type Item = (IpNet, IpAddr);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let r = &self.set.0[self.range];
            let next = match self.cur {
                None => to_u128(r.start),
                Some(c) if c == to_u128(r.end) => {
                    self.range = (self.range + 1) % self.set.0.len();
                    to_u128(self.set.0[self.range].start)
                }
                Some(c) => c + 1,
            };
            self.cur = Some(next);
            match self.first {
                None => self.first = Some(next),
                Some(f) if f == next => {
                    self.done = true;
                    return None;
                }
                Some(_) => {}
            }
            let r = &self.set.0[self.range];
            let ip = from_u128(next, r.start.is_ipv4());
            if ip != r.gateway {
                let net = IpNet::new(ip, r.subnet.prefix_len()).ok()?;
                return Some((net, r.gateway));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(subnet: &str) -> RangeConf {
        RangeConf {
            subnet: Some(subnet.parse().unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_match_upstream() {
        let r = Range::from_conf(&rc("10.1.2.0/24")).unwrap();
        assert_eq!(r.start.to_string(), "10.1.2.1");
        assert_eq!(r.end.to_string(), "10.1.2.254");
        assert_eq!(r.gateway.to_string(), "10.1.2.1");
        assert_eq!(r.capacity(), 253);
        let r6 = Range::from_conf(&rc("fd00::/120")).unwrap();
        assert_eq!(r6.end.to_string(), "fd00::ff");
        assert_eq!(r6.to_string(), "fd00::1-fd00::ff");
    }

    #[test]
    fn validation_errors() {
        let err = |c: RangeConf| Range::from_conf(&c).unwrap_err().msg;
        assert_eq!(
            err(rc("10.0.0.0/31")),
            "Network 10.0.0.0/31 too small to allocate from"
        );
        assert!(err(rc("10.0.0.1/24")).starts_with("network has host bits set"));
        let mut c = rc("10.0.0.0/24");
        c.range_start = Some("10.0.1.5".parse().unwrap());
        assert_eq!(err(c), "RangeStart 10.0.1.5 not in network 10.0.0.0/24");
        let mut c = rc("10.0.0.0/24");
        c.range_end = Some("10.0.0.255".parse().unwrap());
        assert_eq!(
            Range::from_conf(&c).unwrap().end.to_string(),
            "10.0.0.254",
            "upstream accepts the broadcast address as rangeEnd; it is never handed out"
        );
        let range = |start: Option<&str>, end: Option<&str>| {
            let mut c = rc("10.0.0.0/24");
            c.range_start = start.map(|s| s.parse().unwrap());
            c.range_end = end.map(|s| s.parse().unwrap());
            Range::from_conf(&c).map_err(|e| e.msg)
        };
        assert_eq!(
            range(Some("10.0.0.255"), None).unwrap_err(),
            "rangeStart 10.0.0.255 is the broadcast address of 10.0.0.0/24"
        );
        assert_eq!(
            range(Some("10.0.0.0"), None).unwrap_err(),
            "rangeStart 10.0.0.0 is the network address of 10.0.0.0/24"
        );
        assert_eq!(
            range(Some("10.0.0.50"), Some("10.0.0.40")).unwrap_err(),
            "rangeStart 10.0.0.50 is after rangeEnd 10.0.0.40 in 10.0.0.0/24"
        );
        assert!(range(Some("10.0.0.50"), Some("10.0.0.50")).is_ok());
        let mut c = rc("fd00::/120");
        c.range_start = Some("fd00::".parse().unwrap());
        assert!(Range::from_conf(&c).is_err());
        assert!(RangeSet::from_conf(&[rc("10.0.0.0/24"), rc("10.0.0.0/25")]).is_err());
        assert_eq!(
            RangeSet::from_conf(&[rc("10.0.0.0/24"), rc("fd00::/64")])
                .unwrap_err()
                .msg,
            "mixed address families"
        );
    }

    #[test]
    fn round_robin_order() {
        let set = RangeSet::from_conf(&[rc("10.0.0.0/29"), rc("10.0.1.0/30")]).unwrap();
        let all: Vec<String> = set
            .candidates(None)
            .map(|(n, _)| n.addr().to_string())
            .collect();
        assert_eq!(
            all,
            [
                "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.1.2"
            ]
        );
        let from: Vec<String> = set
            .candidates(Some("10.0.0.5".parse().unwrap()))
            .map(|(n, _)| n.addr().to_string())
            .collect();
        assert_eq!(
            from,
            [
                "10.0.0.6", "10.0.1.2", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"
            ]
        );
        // A last-reserved address outside the set restarts at the beginning.
        assert_eq!(
            set.candidates(Some("192.168.0.1".parse().unwrap())).count(),
            6
        );
        assert_eq!(set.capacity(), 6);
    }

    #[test]
    fn gateway_not_at_start_leaves_dot_one_allocatable() {
        let mut c = rc("10.0.0.0/29");
        c.gateway = Some("10.0.0.6".parse().unwrap());
        let set = RangeSet::from_conf(&[c]).unwrap();
        let all: Vec<String> = set
            .candidates(None)
            .map(|(n, g)| format!("{n} via {g}"))
            .collect();
        assert_eq!(all[0], "10.0.0.1/29 via 10.0.0.6");
        assert_eq!(all.len(), 5);
    }
}
