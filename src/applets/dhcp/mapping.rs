//! An attachment as the DHCP server sees it (upstream `daemon.go`'s `Allocate`): the lease's
//! key, its client identifier, the options its client sends, and the CNI result an ACK makes.

use super::packet::{Msg, OPT_PARAM_LIST};
use super::proto::Call;
use crate::cni::result::{CniResult, IpConfig, Route};
use crate::error::{Error, Result};
use ipnet::{IpNet, Ipv4Net};
use std::net::IpAddr;

/// A lease's key: the whole attachment (container ID, network, interface). Never the client
/// identifier, which is cut to fit an option: two long container IDs share its first bytes.
pub(super) type Key = (String, String, String);

pub(super) fn key(c: &Call) -> Key {
    (c.container_id.clone(), c.network.clone(), c.ifname.clone())
}

/// The attachment as logs and messages name it (upstream's client identifier, whole).
pub(super) fn name(k: &Key) -> String {
    format!("{}/{}/{}", k.0, k.1, k.2)
}

/// The longest client identifier (an option holds 255 bytes, one is the type byte).
const CLIENT_ID_MAX: usize = 254;
/// Hex digits of the hash that ends a shortened client identifier (128 bits).
const CLIENT_ID_HASH: usize = 32;

/// Upstream's client identifier, `containerID/network/ifname`. Upstream cuts a longer one to
/// 254 bytes, so attachments whose IDs share their first bytes share a lease at the server;
/// here a longer one keeps its first 221 bytes and ends `~` and 32 hex digits of the SHA-512
/// of the whole. It cannot equal the identifier of a short attachment: that one ends with
/// `/ifname`, at most 16 bytes after its last `/`, and the hash tail has 33 bytes without one.
pub(super) fn client_id(k: &Key) -> Vec<u8> {
    let whole = name(k).into_bytes();
    if whole.len() <= CLIENT_ID_MAX {
        return whole;
    }
    let hash = crate::hash::sha512_hex(&whole, CLIENT_ID_HASH);
    let mut id = whole[..CLIENT_ID_MAX - 1 - CLIENT_ID_HASH].to_vec();
    id.push(b'~');
    id.extend_from_slice(hash.as_bytes());
    id
}

/// The options a lease's client sends: the call's, and its parameter request list.
pub(super) fn options(c: &Call) -> Vec<(u8, Vec<u8>)> {
    let list = (OPT_PARAM_LIST, c.request.clone());
    let provided = c.options.iter().map(|(k, v)| (*k, v.clone().into_bytes()));
    provided
        .chain(std::iter::once(list).filter(|(_, v)| !v.is_empty()))
        .collect()
}

/// The result upstream builds from an ACK.
pub(super) fn result(ack: &Msg, priority: u32) -> Result<CniResult> {
    let (ip, prefix) = ack
        .address()
        .ok_or_else(|| Error::internal("DHCP option Subnet Mask not found in DHCPACK"))?;
    let net = |a, p| {
        Ipv4Net::new(a, p)
            .map(IpNet::V4)
            .map_err(|e| Error::internal(e.to_string()))
    };
    let mut r = CniResult::default();
    r.ips.push(IpConfig {
        version: None,
        interface: None,
        address: net(ip, prefix)?,
        gateway: ack.router().map(IpAddr::V4),
    });
    for (dst, p, gw) in ack.routes() {
        let mut route = Route::new(net(dst, p)?, Some(IpAddr::V4(gw)));
        if gw.is_unspecified() {
            route.scope = Some(253); // link: an on-link route of option 121
        }
        if priority != 0 {
            route.priority = Some(priority);
        }
        r.routes.push(route);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::super::packet::{ACK, OPT_CLASSLESS_ROUTES, OPT_ROUTER, OPT_SUBNET_MASK};
    use super::{Key, Msg, client_id, result};
    use crate::cni::Version;
    use serde_json::json;

    fn k(cid: &str, network: &str, ifname: &str) -> Key {
        (cid.into(), network.into(), ifname.into())
    }

    #[test]
    fn client_id_is_upstreams_up_to_254_bytes() {
        assert_eq!(client_id(&k("abc", "net", "eth0")), b"abc/net/eth0");
        let cid = "x".repeat(254 - "/n/eth0".len());
        assert_eq!(
            client_id(&k(&cid, "n", "eth0")),
            format!("{cid}/n/eth0").as_bytes()
        );
    }

    /// Longer: cut to 254 bytes with a hash of the whole at the end, so IDs that differ only
    /// past the cut (or only in the network or interface) still differ on the wire.
    #[test]
    fn long_client_ids_are_unique_and_254_bytes() {
        let long = "x".repeat(300);
        let ids = [
            client_id(&k(&format!("{long}1"), "net", "eth0")),
            client_id(&k(&format!("{long}2"), "net", "eth0")),
            client_id(&k(&format!("{long}1"), "net", "eth1")),
            client_id(&k(&format!("{long}1"), "other", "eth0")),
            client_id(&k(&"x".repeat(255 - "/n/eth0".len()), "n", "eth0")),
        ];
        for (i, a) in ids.iter().enumerate() {
            assert_eq!(a.len(), 254);
            assert_eq!(a[221], b'~');
            assert!(a[222..].iter().all(u8::is_ascii_hexdigit));
            for b in &ids[i + 1..] {
                assert_ne!(a, b);
            }
        }
        let whole = format!("{long}1/net/eth0");
        let hash = crate::hash::sha512_hex(whole.as_bytes(), 32);
        assert_eq!(ids[0], format!("{}~{hash}", &whole[..221]).as_bytes());
    }

    #[test]
    fn result_from_ack_as_upstream() {
        let mut ack = Msg::request(ACK, 1, [0; 6]);
        ack.yiaddr = "10.9.0.7".parse().unwrap();
        ack.set(OPT_SUBNET_MASK, vec![255, 255, 0, 0]);
        ack.set(OPT_ROUTER, vec![10, 9, 0, 1]);
        let res =
            |a: &Msg, p| json!({"result": result(a, p).unwrap().to_value(Version::V110).unwrap()});
        let v = res(&ack, 0);
        assert_eq!(
            v["result"],
            json!({"cniVersion": "1.1.0",
                   "ips": [{"address": "10.9.0.7/16", "gateway": "10.9.0.1"}],
                   "routes": [{"dst": "0.0.0.0/0", "gw": "10.9.0.1"}]})
        );
        ack.set(OPT_CLASSLESS_ROUTES, vec![24, 10, 8, 1, 0, 0, 0, 0]);
        let v = res(&ack, 5);
        assert_eq!(
            v["result"]["routes"],
            json!([{"dst": "10.8.1.0/24", "gw": "0.0.0.0", "priority": 5, "scope": 253}])
        );
        ack.options.retain(|(c, _)| *c != OPT_SUBNET_MASK);
        assert!(result(&ack, 0).unwrap_err().msg.contains("Subnet Mask"));
    }
}
