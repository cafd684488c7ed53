//! What identifies a link beyond what its namespace's owner can change: its permanent hardware
//! address (IFLA_PERM_ADDRESS, kernel 5.5+) and the bus device it sits on
//! (IFLA_PARENT_DEV_BUS_NAME / IFLA_PARENT_DEV_NAME, kernel 5.15+), and which namespace a
//! link's peer or lower device lives in (RTM_GETNSID). host-device uses them to tell a device
//! it moved into a container from a link the container made and named like it.

use super::link::{IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS, link_msg};
use super::{Handle, RTM_GETLINK, Result, request, wire};
use crate::netns::NetNs;

const IFLA_PERM_ADDRESS: u16 = 54;
const IFLA_PARENT_DEV_NAME: u16 = 56;
const IFLA_PARENT_DEV_BUS_NAME: u16 = 57;
const RTM_NEWNSID: u16 = 88;
const RTM_GETNSID: u16 = 90;
const NETNSA_NSID: u16 = 1;
const NETNSA_FD: u16 = 3;
const AF_UNSPEC: u8 = 0;

/// The parts of a link's identity a namespace's owner cannot set: empty when the kernel reports
/// none (a virtual link has neither a permanent address nor a parent device).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// IFLA_PERM_ADDRESS, as lower-case hex without separators.
    pub perm_addr: String,
    /// `<bus>:<device>` of the parent device (`pci:0000:3b:00.1`).
    pub parent: String,
}

impl Handle {
    /// The identity of link `index`, or None when there is no such link.
    pub fn link_identity(&mut self, index: u32) -> Result<Option<Identity>> {
        let req = link_msg(RTM_GETLINK, index, |w| {
            w.u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS)
        });
        let reply = match self.request_ack(req, 0) {
            Ok(r) => r,
            Err(e) if e.errno == libc::ENODEV => return Ok(None),
            Err(e) => return Err(e.ctx(format_args!("get link {index}"))),
        };
        let Some(body) = reply
            .as_ref()
            .and_then(|r| r.body.get(super::link::IFINFOMSG_LEN..))
        else {
            return Ok(None);
        };
        let (mut id, mut bus, mut dev) = (Identity::default(), String::new(), String::new());
        for (ty, v) in wire::attrs(body) {
            match ty {
                IFLA_PERM_ADDRESS => id.perm_addr = v.iter().map(|b| format!("{b:02x}")).collect(),
                IFLA_PARENT_DEV_NAME => dev = wire::get_str(v),
                IFLA_PARENT_DEV_BUS_NAME => bus = wire::get_str(v),
                _ => {}
            }
        }
        if !dev.is_empty() {
            id.parent = format!("{bus}:{dev}");
        }
        Ok(Some(id))
    }

    /// The id this handle's namespace gives `ns` (what IFLA_LINK_NETNSID says of a link whose
    /// peer lives there), None when it has given it none. Ask after reading the link: reporting
    /// a peer in another namespace is what makes the kernel assign the id.
    pub fn nsid_of(&mut self, ns: &NetNs) -> Result<Option<i32>> {
        let req = request(RTM_GETNSID, &[AF_UNSPEC], |w| {
            w.u32(NETNSA_FD, ns.fd() as u32)
        });
        let reply = self
            .request_ack(req, 0)
            .map_err(|e| e.ctx(format_args!("get the id of netns {}", ns.path())))?;
        let id = reply
            .filter(|r| r.ty == RTM_NEWNSID)
            .and_then(|r| {
                let attrs = r.body.get(4..)?.to_vec();
                wire::attrs(&attrs)
                    .find(|(ty, _)| *ty == NETNSA_NSID)
                    .and_then(|(_, v)| wire::get_u32(v, 0))
            })
            .map(|n| n as i32);
        Ok(id.filter(|&n| n >= 0))
    }
}
