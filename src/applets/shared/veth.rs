//! The container's veth pair, shared by the applets that make one (bridge, ptp): created from
//! inside the container namespace, the peer landing in the host namespace under upstream's
//! random name `veth<8 hex>`.

use crate::error::{Error, Result};
use crate::netlink::Handle;
use crate::netns::NetNs;
use crate::random;

/// Create the pair from inside the container, the peer landing in the host with a random name.
pub fn create_veth(
    cont: &mut Handle,
    ifname: &str,
    mtu: Option<u32>,
    mac: Option<[u8; 6]>,
    host: &NetNs,
) -> Result<String> {
    for _ in 0..10 {
        let peer = format!("veth{}", random::hex(8));
        match cont.add_veth(ifname, &peer, mtu, mac, Some(host)) {
            Ok(()) => return Ok(peer),
            // Either name may clash; only the random one is worth retrying.
            Err(e) if e.is_exists() => continue,
            Err(e) => {
                return Err(Error::from(e).ctx(format_args!("failed to create veth {ifname:?}")));
            }
        }
    }
    Err(Error::internal(format!(
        "failed to find a free host veth name for {ifname:?}"
    )))
}
