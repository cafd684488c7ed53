//! FIB (policy routing) rules: list, add, delete — `ip rule`'s `from PREFIX lookup TABLE`.
//!
//! Rules are added as vishvananda/netlink's `RuleAdd` sends them for the Go plugins (action
//! "to table", the table in the header when it fits and in FRA_TABLE, no priority: the kernel
//! picks one), so a rule made by cnibox and one made by the Go `sbr` look the same.

use std::net::IpAddr;

use super::{Family, Handle, NLM_F_CREATE, NLM_F_EXCL, Result, request};
use crate::netlink::wire;
use ipnet::IpNet;

pub(crate) const RTM_NEWRULE: u16 = 32;
pub(crate) const RTM_DELRULE: u16 = 33;
pub(crate) const RTM_GETRULE: u16 = 34;
const FRA_SRC: u16 = 2;
const FRA_PRIORITY: u16 = 6;
const FRA_TABLE: u16 = 15;
const FR_ACT_TO_TBL: u8 = 1;
/// struct fib_rule_hdr: family, dst_len, src_len, tos, table, res1, res2, action, flags.
const FRHDR_LEN: usize = 12;

/// A rule as the kernel reports it (only what cnibox uses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// `from` selector; None: from all.
    pub src: Option<IpNet>,
    pub table: u32,
    /// Preference; None when adding lets the kernel choose.
    pub priority: Option<u32>,
    /// FR_ACT_*: 1 = lookup a table.
    pub action: u8,
    /// AF_INET or AF_INET6.
    pub family: u8,
}

impl Rule {
    /// `from ADDR lookup TABLE`, ADDR as a host prefix (/32 or /128).
    pub fn from_addr(addr: IpAddr, table: u32) -> Rule {
        Rule {
            src: Some(IpNet::from(addr)),
            table,
            priority: None,
            action: FR_ACT_TO_TBL,
            family: if addr.is_ipv4() { AF_INET } else { AF_INET6 },
        }
    }
}

const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

pub(super) fn rule_msg(ty: u16, r: &Rule) -> Vec<u8> {
    let mut h = [0u8; FRHDR_LEN];
    h[0] = r.family;
    h[2] = r.src.map_or(0, |s| s.prefix_len());
    h[4] = u8::try_from(r.table).unwrap_or(0);
    h[7] = r.action;
    request(ty, &h, |w| {
        if let Some(s) = r.src {
            match s.addr() {
                IpAddr::V4(a) => w.attr(FRA_SRC, &a.octets()),
                IpAddr::V6(a) => w.attr(FRA_SRC, &a.octets()),
            }
        }
        if let Some(p) = r.priority {
            w.u32(FRA_PRIORITY, p);
        }
        w.u32(FRA_TABLE, r.table);
    })
}

pub(super) fn parse(body: &[u8]) -> Option<Rule> {
    let mut r = Rule {
        family: *body.first()?,
        table: u32::from(*body.get(4)?),
        action: *body.get(7)?,
        ..Rule::default()
    };
    let src_len = *body.get(2)?;
    for (ty, v) in wire::attrs(body.get(FRHDR_LEN..)?) {
        match ty {
            FRA_SRC => r.src = wire::get_ip(v).and_then(|ip| IpNet::new(ip, src_len).ok()),
            FRA_PRIORITY => r.priority = wire::get_u32(v, 0),
            FRA_TABLE => r.table = wire::get_u32(v, 0).unwrap_or(r.table),
            _ => {}
        }
    }
    Some(r)
}

fn describe(r: &Rule) -> String {
    let from = r.src.map_or("all".to_string(), |s| s.to_string());
    format!("rule from {from} table {}", r.table)
}

impl Handle {
    /// Every rule of `family`.
    pub fn rules(&mut self, family: Family) -> Result<Vec<Rule>> {
        let mut h = [0u8; FRHDR_LEN];
        h[0] = super::addr::family(family);
        let r = self
            .dump(request(RTM_GETRULE, &h, |_| {}))
            .map_err(|e| e.ctx("list rules"))?;
        Ok(r.iter()
            .filter(|m| m.ty == RTM_NEWRULE)
            .filter_map(|m| parse(&m.body))
            .collect())
    }

    /// Add a rule. Without a priority the kernel picks a new one, so adding the same rule twice
    /// makes two (as with `ip rule add` and the Go plugins).
    pub fn rule_add(&mut self, r: &Rule) -> Result<()> {
        self.request_ack(rule_msg(RTM_NEWRULE, r), NLM_F_CREATE | NLM_F_EXCL)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("add {}", describe(r))))
    }

    /// Delete the rule matching `r` (its priority too, when given).
    pub fn rule_del(&mut self, r: &Rule) -> Result<()> {
        self.request_ack(rule_msg(RTM_DELRULE, r), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("delete {}", describe(r))))
    }
}
