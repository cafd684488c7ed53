//! `cnibox status [--json] [--gc [--yes]] [--grace SECONDS]`: a node doctor for CNI. For each
//! network configuration of NETCONFPATH (default /etc/cni/net.d) it lists the attachments
//! libcni's result cache records (CNI_CACHE_DIR) and what the node holds for each —
//! host-local reservations, host-side interfaces, the ipMasq, portmap and firewall rules of
//! iptables and nftables — and the orphans, each with why (`survey.rs`, `rules.rs`). Exit status: 0 no orphans, 1 orphans, 2 error.
//!
//! `--gc` removes the orphans through the runtime's own paths (`runtime::chain`, as `cnitool`
//! runs them, plugins in-process when they are this binary): the list's DEL, with the cached
//! result, for each cache entry whose netns is gone; then the list's GC with the live
//! attachments as the valid ones (lists below 1.1.0, or with `disableGC`: the DEL of each
//! orphan reservation's owner instead); a reservation the GC left (a plugin whose GC does not
//! reach its IPAM) gets its owner's DEL without a netns. What is still there after that is
//! printed and makes the exit status 1. It is a dry run unless `--yes`. A reservation younger
//! than `--grace` (default 30 s) with no cache entry may be an ADD in flight: it is left alone
//! and its owner passed to GC as valid. Runtime-side like `runtime/`; nothing imports it.

mod rules;
pub(crate) mod survey;

use crate::cni::Applet;
use crate::cni::error::Error;
use crate::cni::skel;
use crate::runtime::cache::Rt;
use crate::runtime::chain::Runner;
use crate::runtime::var;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;
use survey::{Kind, Survey, survey};

const USAGE: &str = "\
usage: cnibox status [--json] [--gc [--yes]] [--grace SECONDS]
Lists each network of $NETCONFPATH (default /etc/cni/net.d), its attachments in libcni's cache
($CNI_CACHE_DIR, default /var/lib/cni) and what the node holds for them, and the orphans.
--gc removes the orphans with the network's DEL/GC (dry run unless --yes). Exit status: 0 no
orphans, 1 orphans found, 2 error.";

struct Opts {
    json: bool,
    gc: bool,
    yes: bool,
    grace: Duration,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        json: false,
        gc: false,
        yes: false,
        grace: Duration::from_secs(30),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--gc" => o.gc = true,
            "--yes" | "-y" => o.yes = true,
            "--grace" => {
                let v = it.next().ok_or("--grace needs a number of seconds")?;
                o.grace = Duration::from_secs(
                    v.parse()
                        .map_err(|_| format!("--grace {v:?}: not seconds"))?,
                );
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.yes && !o.gc {
        return Err("--yes goes with --gc".into());
    }
    Ok(Some(o))
}

fn conf_dir() -> PathBuf {
    match var("NETCONFPATH") {
        d if d.is_empty() => "/etc/cni/net.d".into(),
        d => d.into(),
    }
}

fn to_json(s: &Survey) -> Value {
    let nets: Vec<Value> = s
        .networks
        .iter()
        .map(|n| {
            let atts: Vec<Value> = s
                .attachments
                .iter()
                .filter(|a| a.network == n.name)
                .map(|a| {
                    json!({"containerID": a.rt.container_id, "ifname": a.rt.ifname,
                           "netns": a.rt.netns, "netnsState": format!("{:?}", a.netns).to_lowercase(),
                           "addresses": a.addresses, "hostInterfaces": a.host_ifaces,
                           "reservations": a.reservations, "leases": a.leases, "rules": a.rules,
                           "cacheFile": a.cache_file})
                })
                .collect();
            json!({"name": n.name, "error": n.error, "dataDirs": n.stores, "attachments": atts})
        })
        .collect();
    let orphans: Vec<Value> = s
        .orphans
        .iter()
        .map(|o| {
            json!({"kind": o.kind.name(), "network": o.network, "object": o.object,
                   "containerID": o.container_id, "ifname": o.ifname, "why": o.why})
        })
        .collect();
    json!({"networks": nets, "orphans": orphans, "notes": s.notes})
}

fn to_table(s: &Survey) -> String {
    let mut out = String::new();
    for n in &s.networks {
        out.push_str(&format!("network {}", n.name));
        if let Some(e) = &n.error {
            out.push_str(&format!("  (cannot load: {e})"));
        }
        out.push('\n');
        out.push_str("  CONTAINER                 IFNAME  NETNS      ADDRESSES                    RESV  RULES  HOST IFACES\n");
        for a in s.attachments.iter().filter(|a| a.network == n.name) {
            let cid: String = a.rt.container_id.chars().take(24).collect();
            out.push_str(&format!(
                "  {cid:<25} {:<7} {:<10} {:<28} {:<5} {:<6} {}\n",
                a.rt.ifname,
                format!("{:?}", a.netns).to_lowercase(),
                a.addresses.join(","),
                a.reservations.len(),
                a.rules,
                a.host_ifaces.join(",")
            ));
        }
    }
    if s.orphans.is_empty() {
        out.push_str("no orphans\n");
    } else {
        out.push_str(&format!("{} orphan(s):\n", s.orphans.len()));
        for o in &s.orphans {
            out.push_str(&format!(
                "  {} {} {} (owner {}:{}): {}\n",
                o.kind.name(),
                o.network,
                o.object,
                o.container_id,
                o.ifname,
                o.why
            ));
        }
    }
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// One step of `--gc`.
enum Step {
    /// The list's DEL of a cached attachment whose netns is gone.
    Del(String, Rt),
    /// The list's GC keeping these (container ID, ifname).
    Gc(String, Vec<(String, String)>),
}

fn describe(step: &Step) -> String {
    match step {
        Step::Del(net, rt) => format!(
            "DEL network {net} container {} ifname {} (netns {:?})",
            rt.container_id, rt.ifname, rt.netns
        ),
        Step::Gc(net, keep) => format!("GC network {net} keeping {} attachment(s)", keep.len()),
    }
}

fn plan(s: &Survey) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut dels: Vec<(String, String, String)> = Vec::new();
    for a in s.attachments.iter().filter(|a| !a.live()) {
        dels.push((
            a.network.clone(),
            a.rt.container_id.clone(),
            a.rt.ifname.clone(),
        ));
        steps.push(Step::Del(
            a.network.clone(),
            Rt {
                container_id: a.rt.container_id.clone(),
                netns: a.rt.netns.clone(),
                ifname: a.rt.ifname.clone(),
                args: a.rt.args.clone(),
                caps: a.rt.caps.clone(),
            },
        ));
    }
    for n in &s.networks {
        let Some(list) = &n.list else { continue };
        let mine = |k: Kind| {
            s.orphans
                .iter()
                .filter(move |o| o.network == n.name && o.kind == k)
        };
        // portmap's nftables rules name only a container: one no cached attachment of any
        // network has is left to the GC of every list with portmap.
        let has_portmap = list.plugins.iter().any(|p| p.kind == "portmap");
        let unnamed = s
            .orphans
            .iter()
            .any(|o| o.kind == Kind::Rule && o.network.is_empty() && has_portmap);
        let leftover = unnamed
            || mine(Kind::Reservation)
                .chain(mine(Kind::Rule))
                .chain(mine(Kind::Lease))
                .any(|o| {
                    !dels
                        .iter()
                        .any(|(dn, c, _)| *dn == n.name && *c == o.container_id)
                });
        if !leftover {
            continue;
        }
        if Runner::gc_runs(list) {
            let mut keep: Vec<(String, String)> = s
                .attachments
                .iter()
                .filter(|a| a.network == n.name && a.live())
                .map(|a| (a.rt.container_id.clone(), a.rt.ifname.clone()))
                .collect();
            keep.extend(
                s.in_flight
                    .iter()
                    .filter(|(net, ..)| *net == n.name)
                    .map(|(_, c, i)| (c.clone(), i.clone())),
            );
            steps.push(Step::Gc(n.name.clone(), keep));
        } else {
            // No GC in this list: the DEL of each orphan reservation's owner, without a netns.
            for o in mine(Kind::Reservation) {
                let owner = (n.name.clone(), o.container_id.clone(), o.ifname.clone());
                if o.container_id.is_empty() || o.ifname.is_empty() || dels.contains(&owner) {
                    continue;
                }
                dels.push(owner);
                steps.push(Step::Del(
                    n.name.clone(),
                    Rt {
                        container_id: o.container_id.clone(),
                        netns: String::new(),
                        ifname: o.ifname.clone(),
                        args: Vec::new(),
                        caps: serde_json::Map::new(),
                    },
                ));
            }
        }
    }
    steps
}

fn run(applets: &'static [&'static Applet], o: &Opts) -> Result<i32, Error> {
    let dir = conf_dir();
    let s = survey(&dir, o.grace)?;
    let print = |s: &Survey| {
        let text = if o.json {
            format!("{:#}\n", to_json(s))
        } else {
            to_table(s)
        };
        let _ = skel::write_stdout(&text);
    };
    if !o.gc {
        print(&s);
        return Ok(i32::from(!s.orphans.is_empty()));
    }
    let steps = plan(&s);
    if !o.yes {
        print(&s);
        for st in &steps {
            crate::warn!("would {}", describe(st));
        }
        return Ok(i32::from(!s.orphans.is_empty()));
    }
    let runner = Runner {
        applets,
        path: var("CNI_PATH"),
    };
    let mut failed = false;
    for st in &steps {
        let list = match st {
            Step::Del(net, _) | Step::Gc(net, _) => s.networks.iter().find(|n| n.name == *net),
        };
        let Some(list) = list.and_then(|n| n.list.as_ref()) else {
            continue;
        };
        crate::warn!("{}", describe(st));
        let r = match st {
            Step::Del(_, rt) => runner.del(list, rt),
            Step::Gc(_, keep) => runner.gc_keeping(list, keep),
        };
        if let Err(e) = r {
            crate::warn!("cnibox status: {}: {}", describe(st), e.msg);
            failed = true;
        }
    }
    // A plugin whose GC collects nothing (the Go bridge of v1.9.1 does not pass GC on to its
    // IPAM) leaves reservations whose owner is known: the list's DEL of that owner, without a
    // netns, as a runtime cleans up an attachment whose namespace is gone.
    let mut after = survey(&dir, o.grace)?;
    let mut done: Vec<(String, String, String)> = Vec::new();
    for orphan in after.orphans.iter().filter(|o| o.kind == Kind::Reservation) {
        let owner = (
            orphan.network.clone(),
            orphan.container_id.clone(),
            orphan.ifname.clone(),
        );
        let list = after.networks.iter().find(|n| n.name == orphan.network);
        let Some(list) = list.and_then(|n| n.list.as_ref()) else {
            continue;
        };
        if owner.1.is_empty() || owner.2.is_empty() || done.contains(&owner) {
            continue;
        }
        let step = Step::Del(
            owner.0.clone(),
            Rt {
                container_id: owner.1.clone(),
                netns: String::new(),
                ifname: owner.2.clone(),
                args: Vec::new(),
                caps: serde_json::Map::new(),
            },
        );
        crate::warn!("{} (GC left its reservation)", describe(&step));
        if let Step::Del(_, rt) = &step
            && let Err(e) = runner.del(list, rt)
        {
            crate::warn!("cnibox status: {}: {}", describe(&step), e.msg);
            failed = true;
        }
        done.push(owner);
    }
    if !done.is_empty() {
        after = survey(&dir, o.grace)?;
    }
    print(&after);
    Ok(if failed {
        2
    } else {
        i32::from(!after.orphans.is_empty())
    })
}

/// `cnibox status ARGS…`: its exit status.
pub fn main(applets: &'static [&'static Applet], args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            let _ = skel::write_stdout(&format!("{USAGE}\n"));
            return 0;
        }
        Err(e) => {
            crate::warn!("cnibox status: {e}\n{USAGE}");
            return 2;
        }
    };
    match run(applets, &o) {
        Ok(code) => code,
        Err(e) => {
            crate::warn!("cnibox status: {}", e.msg);
            2
        }
    }
}
