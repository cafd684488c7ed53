//! `sbr` (upstream `plugins/meta/sbr`, chained): source-based routing in the container.
//!
//! For each address of the prevResult on CNI_IFNAME, ADD adds the rule `from ADDR lookup N`,
//! where N is the first table from 100 up that no rule uses (one table per address, as
//! upstream), puts a default route via the address's gateway into N, copies there the main
//! table's routes of the interface that belong to the address (its source or gateway in the
//! address's subnet, or neither set), and finally removes the interface's routes from the main
//! table. With `table` (newer releases) only the rules are added, all pointing at that table,
//! whose routes the user manages. The prevResult is passed through. Runs hold the lock Go's
//! `sbr` takes on the namespace file. From upstream main: `gateways` (one IPv4 and/or one IPv6
//! address) replaces the prevResult's gateway of that family for the default routes, and with
//! `addSourceHints` the main table keeps each address's subnet route, with the address as its
//! preferred source (so traffic that picks no source still finds its way), and loses only the
//! interface's other routes. Neither applies with `table`. Unlike upstream, the interface's
//! default route in the main table is not copied over a static gateway's default route.
//!
//! DEL removes every rule whose source is an address of the interface (only rules of `table`
//! when set), and tolerates a missing namespace or interface.
//!
//! Beyond upstream: a failed ADD takes back its rules and routes (the main table's routes come
//! back); DEL removes every rule its ADD made, whatever the input: ADD records them on the host
//! with the tables (below), so a prevResult address that is not on the interface — `0.0.0.0/0`,
//! or thousands of them — leaves no rule behind (upstream's DEL finds rules only by the
//! interface's addresses and leaves those); DEL also empties of the interface's routes the numbered tables its ADD filled, which
//! ADD records on the host (`<state dir>/sbr/<network>/<cid>:<ifname>`; upstream leaves them
//! until the interface goes) — never a table it did not fill, such as the user's own that a
//! rule of an interface address points at, or the Go plugin's; CHECK (upstream: nothing)
//! verifies that each address still has its rule; a prevResult without addresses is code 7.

use crate::attachment;
use crate::cni::result::IpConfig;
use crate::cni::{Applet, CniResult, Context, Error, Request, Result, Version};
use crate::netlink::{Family, Handle, Route, Rule, SCOPE_LINK, TABLE_MAIN};
use crate::netns::NetNs;
use crate::undo::{ErrorList, Undo};
use serde::Deserialize;
use std::net::IpAddr;

pub static APPLET: Applet = Applet {
    name: "sbr",
    versions: Version::ALL,
    add,
    del,
    check,
    status: None,
    gc: None,
};

const FIRST_TABLE: u32 = 100;

/// Kind of sbr's records of what an ADD made (`<state dir>/sbr/<network>/<cid>:<ifname>`, see
/// [`crate::attachment`]): one line per table it filled (`100`; the only lines of records of
/// earlier versions) and one per rule it added (`rule 10.1.1.2 100`).
const RECORD: &str = "sbr";

/// A record's line for the rule `from addr lookup table`.
fn rule_item(addr: IpAddr, table: u32) -> String {
    format!("rule {addr} {table}")
}

/// The rules (source address, table) and the filled tables a record lists.
fn parse_record(items: &[String]) -> (Vec<(IpAddr, u32)>, Vec<u32>) {
    let (mut rules, mut tables) = (Vec::new(), Vec::new());
    for item in items {
        let mut words = item.split(' ');
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("rule"), Some(a), Some(t), None) => {
                if let (Ok(a), Ok(t)) = (a.parse(), t.parse()) {
                    rules.push((a, t));
                }
            }
            (Some(t), None, None, None) => tables.extend(t.parse::<u32>().ok()),
            _ => {}
        }
    }
    (rules, tables)
}

#[derive(Deserialize, Default)]
struct RawConf {
    #[serde(default)]
    table: Option<i64>,
    #[serde(default)]
    gateways: Option<Vec<String>>,
    #[serde(rename = "addSourceHints", default)]
    add_source_hints: bool,
}

struct Conf {
    /// The configured table, if any (1 .. 2^32-1).
    table: Option<u32>,
    /// `gateways`: at most one per family, used instead of the prevResult's.
    gateways: Vec<IpAddr>,
    add_source_hints: bool,
}

fn load(req: &Request) -> Result<Conf> {
    let c: RawConf = req.decode()?;
    let table = c
        .table
        .map(|t| {
            u32::try_from(t)
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| Error::config(format!("table: invalid routing table {t}")))
        })
        .transpose()?;
    let mut gateways: Vec<IpAddr> = Vec::new();
    for g in c.gateways.unwrap_or_default() {
        match g.parse::<IpAddr>() {
            Ok(ip) if !gateways.iter().any(|o| o.is_ipv4() == ip.is_ipv4()) => gateways.push(ip),
            _ => {
                return Err(Error::config(format!(
                    "gateways: {g:?} is not an IP address, or a second one of its family \
                     (at most one IPv4 and one IPv6)"
                )));
            }
        }
    }
    Ok(Conf {
        table,
        gateways,
        add_source_hints: c.add_source_hints,
    })
}

/// The prevResult's addresses on `ifname` (those naming no interface, or an unknown one,
/// included, as upstream does).
fn addresses(req: &Request) -> Result<(CniResult, Vec<IpConfig>)> {
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("prevResult: this plugin must be called as chained plugin"))?;
    let ifname = &req.env.ifname;
    if prev.ips.is_empty() {
        return Err(Error::config(format!(
            "prevResult: No IP addresses supplied on interface: {ifname}"
        )));
    }
    let ips = prev
        .ips
        .iter()
        .filter(|ip| {
            ip.interface
                .and_then(|i| prev.interfaces.get(i))
                .is_none_or(|i| &i.name == ifname)
        })
        .cloned()
        .collect();
    Ok((prev, ips))
}

/// The first table from `from` up that no rule and no route in `routes` uses.
fn next_free(rules: &[Rule], routes: &[Route], from: u32) -> u32 {
    let mut t = from;
    while rules.iter().any(|r| r.table == t) || routes.iter().any(|r| r.table == t) {
        t += 1;
    }
    t
}

fn add(req: &Request) -> Result<CniResult> {
    let conf = load(req)?;
    let (prev, ips) = addresses(req)?;
    let ns = req.netns()?;
    let _lock = ns.lock()?;
    let mut h = Handle::in_netns(&ns)?;
    let mut undo = Undo::new("sbr");
    let r = match conf.table {
        Some(t) => ips
            .iter()
            .try_for_each(|ip| {
                rule_add(
                    &mut h,
                    &ns,
                    &mut undo,
                    Rule::from_addr(ip.address.addr(), t),
                )
            })
            .map(|()| {
                let rules = ips.iter().map(|ip| rule_item(ip.address.addr(), t));
                rules.collect::<Vec<_>>()
            }),
        None => move_routes(req, &conf, &ips, &ns, &mut h, &mut undo).map(|tables| {
            // The tables this ADD filled (the only ones DEL empties), then its rules.
            let mut items: Vec<String> = tables.iter().map(u32::to_string).collect();
            items.extend(
                ips.iter()
                    .zip(&tables)
                    .map(|(ip, t)| rule_item(ip.address.addr(), *t)),
            );
            items
        }),
    };
    // On the host, for DEL: what this ADD made.
    let r = r.and_then(|items| {
        let env = &req.env;
        attachment::record(
            RECORD,
            &req.conf.name,
            &env.container_id,
            &env.ifname,
            &items,
        )?;
        undo.push("forget what ADD made", move || {
            attachment::forget(RECORD, &req.conf.name, &env.container_id, &env.ifname);
            Ok(())
        });
        Ok(())
    });
    undo.finish(r.map(|()| prev))
}

fn rule_add<'a>(h: &mut Handle, ns: &'a NetNs, undo: &mut Undo<'a>, rule: Rule) -> Result<()> {
    h.rule_add(&rule)?;
    let what = format!(
        "rule from {}",
        rule.src.map(|s| s.addr().to_string()).unwrap_or_default()
    );
    undo.push(what, move || Ok(Handle::in_netns(ns)?.rule_del(&rule)?));
    Ok(())
}

fn route_undo<'a>(undo: &mut Undo<'a>, ns: &'a NetNs, r: Route, re_add: bool) {
    undo.push(format!("route {} table {}", r.dst, r.table), move || {
        let mut h = Handle::in_netns(ns)?;
        match if re_add {
            h.route_replace(&r)
        } else {
            h.route_del(&r)
        } {
            // A copy replaced the default route added just before it: one route, two undos.
            Err(e) if !e.is_not_found() => Err(e.into()),
            _ => Ok(()),
        }
    });
}

fn move_routes<'a>(
    req: &Request,
    conf: &Conf,
    ips: &[IpConfig],
    ns: &'a NetNs,
    h: &mut Handle,
    undo: &mut Undo<'a>,
) -> Result<Vec<u32>> {
    let ifname = &req.env.ifname;
    let rules = h.rules(Family::All)?;
    let main = h.routes(Family::All, Some(TABLE_MAIN))?;
    let mut table = next_free(&rules, &main, FIRST_TABLE);
    let link = h
        .link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("Cannot find network interface {ifname}")))?;
    let routes: Vec<Route> = main
        .into_iter()
        .filter(|r| r.oif == Some(link.index))
        .collect();
    let mut filled = Vec::new();
    for ip in ips {
        let addr = ip.address.addr();
        rule_add(h, ns, undo, Rule::from_addr(addr, table))?;
        filled.push(table);
        let v4 = addr.is_ipv4();
        let gateway = conf.gateways.iter().copied().find(|g| g.is_ipv4() == v4);
        if let Some(gw) = gateway.or(ip.gateway) {
            let default = Route {
                dst: ipnet::IpNet::new(addr, 0)
                    .map_err(|e| Error::internal(e.to_string()))?
                    .trunc(),
                gw: Some(gw),
                oif: Some(link.index),
                table,
                ..Route::default()
            };
            h.route_add(&default).map_err(|e| {
                Error::from(e).ctx(format_args!("failed to add default route to {gw}"))
            })?;
            route_undo(undo, ns, default, false);
        }
        let mine = |a: Option<std::net::IpAddr>| a.is_some_and(|a| ip.address.contains(&a));
        for r in &routes {
            // A static gateway's default route stays: upstream's copy replaces it with the
            // main table's default route when that one's gateway is in the subnet.
            let replaces_static =
                gateway.is_some() && r.dst.prefix_len() == 0 && r.dst.addr().is_ipv4() == v4;
            if replaces_static {
                continue;
            }
            if mine(r.src) || mine(r.gw) || (r.src.is_none() && r.gw.is_none()) {
                let moved = Route { table, ..r.clone() };
                h.route_replace(&moved).ctx("failed to readd route")?;
                route_undo(undo, ns, moved, false);
            }
        }
        table = next_free(&rules, &routes, table + 1);
    }
    if conf.add_source_hints {
        source_hints(ips, link.index, &routes, ns, h, undo);
    }
    // Removed only now: several addresses of one subnet each need the routes copied. With
    // source hints the subnet routes (scope link) stay. Routes via a gateway go first, so a
    // failed ADD's undo (newest first) puts them back after the subnet route that makes their
    // gateway reachable (IPv6 dumps the default route last).
    for r in routes
        .iter()
        .filter(|r| r.gw.is_some())
        .chain(routes.iter().filter(|r| r.gw.is_none()))
    {
        if conf.add_source_hints && r.scope == SCOPE_LINK {
            continue;
        }
        h.route_del(r).ctx("failed to delete route")?;
        route_undo(undo, ns, r.clone(), true);
    }
    Ok(filled)
}

/// `addSourceHints`: each address's subnet route in the main table, with the address as its
/// preferred source (a replace: IPv4's kernel-made subnet route is that route). A failure is
/// a note on stderr, as upstream only logs it.
fn source_hints<'a>(
    ips: &[IpConfig],
    oif: u32,
    routes: &[Route],
    ns: &'a NetNs,
    h: &mut Handle,
    undo: &mut Undo<'a>,
) {
    for ip in ips {
        let addr = ip.address.addr();
        let hint = Route {
            dst: ip.address.trunc(),
            src: Some(addr),
            oif: Some(oif),
            scope: SCOPE_LINK,
            table: TABLE_MAIN,
            // IPv6's default for a route added without one, named so undo deletes only it.
            metric: (!addr.is_ipv4()).then_some(1024),
            ..Route::default()
        };
        if let Err(e) = h.route_replace(&hint) {
            crate::warn!("sbr: cannot add subnet route {} src {addr}: {e}", hint.dst);
            continue;
        }
        // IPv4: the replace took the place of the kernel's route (same key), which undo puts
        // back; IPv6: a route of its own beside the kernel's, which undo deletes.
        match routes
            .iter()
            .find(|r| addr.is_ipv4() && r.dst == hint.dst && r.metric.is_none())
        {
            Some(orig) => route_undo(undo, ns, orig.clone(), true),
            None => route_undo(undo, ns, hint, false),
        }
    }
}

fn del(req: &Request) -> Result<()> {
    let table = load(req)?.table;
    let env = &req.env;
    let forget = || attachment::forget(RECORD, &req.conf.name, &env.container_id, &env.ifname);
    let Some(ns) = req.netns_if_exists()? else {
        // Gone with its namespace (kept while CNI_NETNS is unset: a later DEL may have it).
        if !env.netns.is_empty() {
            forget();
        }
        return Ok(());
    };
    let _lock = ns.lock()?;
    let mut h = Handle::in_netns(&ns)?;
    let rules = h.rules(Family::All)?;
    // What our ADD made, whatever this DEL's input says; and, as upstream, every rule whose
    // source is an address of the interface (the Go plugin's ADD, or one of an earlier cnibox
    // that recorded only tables).
    let (made, filled) = parse_record(&attachment::get(
        RECORD,
        &req.conf.name,
        &env.container_id,
        &env.ifname,
    ));
    let link = h.link_by_name(&env.ifname)?;
    let addrs = match &link {
        Some(l) => h.addrs(Some(l.index), Family::All)?,
        None => Vec::new(),
    };
    let mut errors = ErrorList::new();
    let mut emptied = Vec::new();
    for rule in &rules {
        let Some(src) = rule.src else {
            continue;
        };
        let recorded =
            src.prefix_len() == src.max_prefix_len() && made.contains(&(src.addr(), rule.table));
        let on_link = addrs.iter().any(|a| a.net.addr() == src.addr());
        if !(recorded || on_link) || table.is_some_and(|t| t != rule.table) {
            continue;
        }
        match h.rule_del(rule) {
            Ok(()) => emptied.push(rule.table),
            Err(e) if e.is_not_found() => {}
            Err(e) => errors.push(Error::from(e).ctx("Failed to delete rule")),
        }
    }
    // The auto-numbered tables this interface's routes were moved into: only those cnibox's
    // ADD recorded filling (never a table of the user's own that a rule of an interface
    // address pointed at, nor one of the Go plugin's, which its DEL leaves too), never
    // main/default/local, none another rule still uses. Without the interface its routes
    // are gone already.
    if let (None, Some(link)) = (table, &link) {
        let left = h.rules(Family::All)?;
        emptied.retain(|t| {
            filled.contains(t) && !(253..=255).contains(t) && !left.iter().any(|r| r.table == *t)
        });
        for r in h.routes(Family::All, None)? {
            if emptied.contains(&r.table) && r.oif == Some(link.index) {
                match h.route_del(&r) {
                    Err(e) if !e.is_not_found() => errors.push(Error::from(e)),
                    _ => {}
                }
            }
        }
    }
    if errors.is_empty() {
        forget();
    }
    errors.into_result()
}

fn check(req: &Request) -> Result<()> {
    let table = load(req)?.table;
    let (_, ips) = addresses(req)?;
    let ns = req.netns()?;
    let rules = Handle::in_netns(&ns)?.rules(Family::All)?;
    for ip in &ips {
        let a = ip.address.addr();
        let found = rules.iter().any(|r| {
            r.src
                .is_some_and(|s| s.addr() == a && s.prefix_len() == s.max_prefix_len())
                && table.is_none_or(|t| t == r.table)
        });
        if !found {
            return Err(Error::internal(format!(
                "no source routing rule for {a} on {}",
                req.env.ifname
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_free_table_skips_tables_rules_or_routes_use() {
        let rule = |t| Rule::from_addr("10.0.0.1".parse().unwrap(), t);
        let route = |t| Route {
            table: t,
            ..Route::default()
        };
        assert_eq!(next_free(&[], &[], FIRST_TABLE), 100);
        let rules = [rule(100), rule(101), rule(103)];
        assert_eq!(next_free(&rules, &[], FIRST_TABLE), 102);
        assert_eq!(next_free(&rules, &[route(102)], FIRST_TABLE), 104);
        assert_eq!(next_free(&rules, &[route(TABLE_MAIN)], 104), 104);
    }
}
