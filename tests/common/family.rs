//! Address families for the tests that every feature must pass in IPv4, IPv6 and dual-stack
//! (upstream's Ginkgo suites run each case for each): a table of families, not a second copy of
//! the test; subnets derived from the lab number `n` (see [`super::lab::unique_n`]) so nobody picks
//! numbers by hand; and the checks every family test makes — an address is usable (bindable) the
//! moment ADD returns, and host-local's reservations are counted from a directory that must exist.

use super::NetNs;
use serde_json::{Value, json};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;

/// One address-family configuration of a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fam {
    V4,
    V6,
    Dual,
}

/// Every family, in the order the tests run them.
pub const FAMILIES: [Fam; 3] = [Fam::V4, Fam::V6, Fam::Dual];

impl Fam {
    pub fn has_v4(self) -> bool {
        self != Fam::V6
    }
    pub fn has_v6(self) -> bool {
        self != Fam::V4
    }
    /// `v4`, `v6`, `dual`: for messages and names.
    pub fn tag(self) -> &'static str {
        match self {
            Fam::V4 => "v4",
            Fam::V6 => "v6",
            Fam::Dual => "dual",
        }
    }
    /// How many addresses a container of this family gets from [`Fam::ranges`].
    pub fn addr_count(self) -> usize {
        if self == Fam::Dual { 2 } else { 1 }
    }

    /// host-local `ranges` for lab number `n`: `10.n.0.0/24` and/or `fd00:n::/64`, one range
    /// set per family (IPv4 first, as clients write them).
    pub fn ranges(self, n: u8) -> Value {
        let mut sets = Vec::new();
        if self.has_v4() {
            sets.push(json!([{ "subnet": v4_subnet(n) }]));
        }
        if self.has_v6() {
            sets.push(json!([{ "subnet": v6_subnet(n) }]));
        }
        Value::Array(sets)
    }

    /// Default routes for this family (`0.0.0.0/0` and/or `::/0`).
    pub fn default_routes(self) -> Value {
        let mut r = Vec::new();
        if self.has_v4() {
            r.push(json!({ "dst": "0.0.0.0/0" }));
        }
        if self.has_v6() {
            r.push(json!({ "dst": "::/0" }));
        }
        Value::Array(r)
    }

    /// [`Fam::default_routes`] (no `gw`: the plugin takes the address's gateway) and, per
    /// family, a prefix outside the subnets with the gateway (`.1`, `::1`) given as `gw`.
    pub fn routes(self, n: u8) -> Value {
        let mut r = self
            .default_routes()
            .as_array()
            .cloned()
            .unwrap_or_default();
        if self.has_v4() {
            r.push(json!({ "dst": format!("10.{n}.99.0/24"), "gw": format!("10.{n}.0.1") }));
        }
        if self.has_v6() {
            let sub = v6_subnet(n);
            r.push(json!({ "dst": sub.replace("::/64", ":99::/64"), "gw": sub.replace("::/64", "::1") }));
        }
        Value::Array(r)
    }

    /// A host-local IPAM section with [`Fam::ranges`] and [`Fam::default_routes`], storing its
    /// reservations under `data_dir`.
    pub fn host_local(self, n: u8, data_dir: &Path) -> Value {
        json!({
            "type": "host-local",
            "ranges": self.ranges(n),
            "routes": self.default_routes(),
            "dataDir": data_dir,
        })
    }

    /// Whether an address belongs to this family's configuration.
    pub fn wants(self, a: IpAddr) -> bool {
        if a.is_ipv4() {
            self.has_v4()
        } else {
            self.has_v6()
        }
    }
}

/// The IPv4 test subnet of lab number `n`.
pub fn v4_subnet(n: u8) -> String {
    format!("10.{n}.0.0/24")
}

/// The IPv6 test subnet of lab number `n` (a ULA /64).
pub fn v6_subnet(n: u8) -> String {
    format!("fd00:{n}::/64")
}

/// The addresses (without prefix length) of a CNI result's `ips`.
pub fn result_ips(result: &Value) -> Vec<IpAddr> {
    result["ips"]
        .as_array()
        .map(|ips| {
            ips.iter()
                .map(|ip| {
                    let a = ip["address"].as_str().expect("ips[].address");
                    a.split('/').next().unwrap().parse().expect("an IP address")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Assert that the result lists exactly one address of each family `fam` has, and return them.
#[track_caller]
pub fn assert_result_family(result: &Value, fam: Fam) -> Vec<IpAddr> {
    let ips = result_ips(result);
    assert_eq!(
        ips.iter().filter(|a| a.is_ipv4()).count(),
        usize::from(fam.has_v4()),
        "{}: IPv4 addresses in {result}",
        fam.tag()
    );
    assert_eq!(
        ips.iter().filter(|a| a.is_ipv6()).count(),
        usize::from(fam.has_v6()),
        "{}: IPv6 addresses in {result}",
        fam.tag()
    );
    ips
}

/// Bind a UDP socket to `addr` inside `ns`, once, with no retry: fails (EADDRNOTAVAIL) while an
/// IPv6 address is still tentative. Call it right after ADD returns.
pub fn bindable(ns: &NetNs, addr: IpAddr) -> std::io::Result<()> {
    let path = ns.path();
    std::thread::spawn(move || -> std::io::Result<()> {
        let f = std::fs::File::open(&path)?;
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a file descriptor that stays open across the call; it changes the
        // network namespace of this short-lived thread only (CLONE_NEWNET is per thread).
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        UdpSocket::bind(SocketAddr::new(addr, 0)).map(drop)
    })
    .join()
    .expect("bind thread")
}

/// Assert that every address is bindable in `ns` right now (see [`bindable`]).
#[track_caller]
pub fn assert_bindable(ns: &NetNs, addrs: &[IpAddr]) {
    for a in addrs {
        if let Err(e) = bindable(ns, *a) {
            let state = ns.exec(&["ip", "addr"]).stdout;
            panic!(
                "{a} not usable in {} right after ADD: {e}\n{state}",
                ns.name
            );
        }
    }
}

/// How many host-local reservations (files named by an IP address) `dir` holds. A missing
/// directory is a test failure, not 0: a test that expects none after DEL must first have seen
/// some after ADD.
#[track_caller]
pub fn reservations(dir: &Path) -> usize {
    let rd = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reservations: cannot read {}: {e}", dir.display()));
    rd.map(|e| e.expect("read_dir entry"))
        .filter(|e| e.file_name().to_string_lossy().parse::<IpAddr>().is_ok())
        .count()
}

/// Assert that every route of `routes` (an IPAM `routes` list as configured) is in `ns` out of
/// `dev` (in its `table`, else main): via its `gw`, or without one via the gateway `result`
/// gives the address of its family, as the plugins install it.
#[track_caller]
pub fn assert_routes(ns: &NetNs, dev: &str, routes: &Value, result: &Value) {
    let result_gw = |v4: bool| -> IpAddr {
        let ips = result["ips"].as_array().into_iter().flatten();
        ips.filter_map(|ip| ip["gateway"].as_str()?.parse::<IpAddr>().ok())
            .find(|g| g.is_ipv4() == v4)
            .unwrap_or_else(|| panic!("no gateway of the family of a route in {result}"))
    };
    for r in routes.as_array().expect("routes: a list") {
        let dst = r["dst"].as_str().expect("routes[].dst");
        let v4 = !dst.contains(':');
        let gw = match r["gw"].as_str() {
            Some(g) => g.parse().expect("routes[].gw: an IP address"),
            None => result_gw(v4),
        };
        let table = r["table"]
            .as_u64()
            .map_or("main".to_string(), |t| t.to_string());
        let fam = if v4 { "-4" } else { "-6" };
        let cmd = [
            "ip", fam, "-j", "route", "show", "exact", dst, "table", &table,
        ];
        let shown: Value = serde_json::from_str(&ns.sh(&cmd)).expect("ip -j route: JSON");
        let found = shown.as_array().into_iter().flatten().any(|x| {
            x["dev"] == dev && x["gateway"].as_str().and_then(|g| g.parse().ok()) == Some(gw)
        });
        if !found {
            let all = ns.sh(&["ip", fam, "route", "show", "table", &table]);
            panic!(
                "route {dst} via {gw} dev {dev} (table {table}) missing in {}:\n{all}",
                ns.name
            );
        }
    }
}

/// [`assert_routes`] for the routes of `conf`'s IPAM section out of eth0, then the container's
/// routes of both families as `ip route` prints them, for [`assert_same_routes`].
#[track_caller]
pub fn routes_as_configured(ns: &NetNs, conf: &Value, result: &Value) -> String {
    assert_routes(ns, "eth0", &conf["ipam"]["routes"], result);
    routes_of_both_families(ns)
}

/// `ns`'s routes as `ip route` prints them, IPv4's then IPv6's.
pub fn routes_of_both_families(ns: &NetNs) -> String {
    ns.sh(&["ip", "-4", "route"]) + &ns.sh(&["ip", "-6", "route"])
}

/// Ours and, when the reference ran, the reference's views of [`routes_as_configured`] on the
/// same input are the same.
#[track_caller]
pub fn assert_same_routes(fam: Fam, views: &[String]) {
    if let [ours, theirs] = views {
        let what = format!("{}: container routes, ours vs reference", fam.tag());
        assert_eq!(ours, theirs, "{what}");
    }
}
