//! Traffic control over rtnetlink, just what bandwidth needs: a TBF root qdisc, the ingress
//! qdisc, a u32 match-all filter redirecting to another device (mirred), and a qdisc listing
//! that reads TBF parameters back for CHECK. No `tc` binary.
//!
//! TBF parameters are computed as upstream's bandwidth plugin does (vishvananda/netlink
//! semantics): rate in bytes/s, `buffer` = time to send the burst at that rate in psched ticks
//! (from /proc/net/psched), `limit` = rate × 25 ms + burst bytes.

use crate::netlink::{Handle, RTM_NEWQDISC, Result};
use crate::nlmsg;
use netlink_packet_core::{DefaultNla, NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::RouteNetlinkMessage as Rt;
use netlink_packet_route::tc::{
    TcAction, TcActionAttribute, TcActionGeneric, TcActionMirrorOption, TcActionOption,
    TcActionType, TcAttribute, TcFilterU32Option, TcHandle, TcMessage, TcMirror,
    TcMirrorActionType, TcOption, TcU32Key, TcU32Selector, TcU32SelectorFlags,
};

const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const LATENCY_USEC: f64 = 25_000.0;
const ETH_P_ALL: u16 = 0x0003;

/// TBF settings in the kernel's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Bytes per second.
    pub rate: u64,
    /// Bytes queued at most.
    pub limit: u32,
    /// Burst, in psched ticks.
    pub buffer: u32,
}

impl Tbf {
    /// From the plugin's bits/s and bits, as upstream computes it.
    pub fn from_bits(rate_bits: u64, burst_bits: u64) -> Tbf {
        let rate = rate_bits / 8;
        let burst = (burst_bits / 8) as u32;
        let usec = (f64::from(burst) * 1e6 / rate as f64) as u32;
        let buffer = (f64::from(usec) * tick_in_usec()) as u32;
        let limit = (rate as f64 * LATENCY_USEC / 1e6) as u32 + burst;
        Tbf {
            rate,
            limit,
            buffer,
        }
    }
}

/// psched ticks per microsecond, from /proc/net/psched (15.625 on current kernels).
fn tick_in_usec() -> f64 {
    let text = std::fs::read_to_string("/proc/net/psched").unwrap_or_default();
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|s| u64::from_str_radix(s, 16).ok())
        .collect();
    match v.as_slice() {
        [t2us, us2t, res, ..] if *us2t != 0 => {
            let t2us = if *res == 1_000_000_000 { *us2t } else { *t2us };
            t2us as f64 / *us2t as f64 * (*res as f64 / 1e6)
        }
        _ => 1.0,
    }
}

/// A qdisc as listed by the kernel.
#[derive(Debug, Clone)]
pub struct Qdisc {
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    pub tbf: Option<Tbf>,
}

fn handle(major: u16, minor: u16) -> TcHandle {
    TcHandle { major, minor }
}

fn u32_of(h: &TcHandle) -> u32 {
    (u32::from(h.major) << 16) | u32::from(h.minor)
}

fn qdisc_msg(
    ifindex: u32,
    parent: TcHandle,
    h: TcHandle,
    kind: &str,
    options: Vec<TcOption>,
) -> TcMessage {
    let mut m = TcMessage::default();
    m.header.index = ifindex as i32;
    m.header.parent = parent;
    m.header.handle = h;
    m.attributes.push(TcAttribute::Kind(kind.into()));
    if !options.is_empty() {
        m.attributes.push(TcAttribute::Options(options));
    }
    m
}

/// `tc qdisc add dev IF root handle 1: tbf …`
pub fn add_tbf(h: &mut Handle, ifindex: u32, t: Tbf) -> Result<()> {
    // struct tc_tbf_qopt: rate and peakrate ratespecs (12 bytes each), limit, buffer, mtu.
    let mut parms = vec![0u8; 36];
    parms[8..12].copy_from_slice(&(t.rate.min(u64::from(u32::MAX)) as u32).to_ne_bytes());
    parms[24..28].copy_from_slice(&t.limit.to_ne_bytes());
    parms[28..32].copy_from_slice(&t.buffer.to_ne_bytes());
    let mut opts = vec![TcOption::Other(DefaultNla::new(TCA_TBF_PARMS, parms))];
    if t.rate >= 1 << 32 {
        opts.push(TcOption::Other(DefaultNla::new(
            TCA_TBF_RATE64,
            t.rate.to_ne_bytes().to_vec(),
        )));
    }
    let m = qdisc_msg(ifindex, TcHandle::ROOT, handle(1, 0), "tbf", opts);
    h.request_ack(Rt::NewQueueDiscipline(m), NLM_F_CREATE | NLM_F_EXCL)
        .map(drop)
        .map_err(|e| e.ctx(format_args!("add tbf qdisc (link {ifindex})")))
}

/// `tc qdisc add dev IF handle ffff: ingress`
pub fn add_ingress(h: &mut Handle, ifindex: u32) -> Result<()> {
    let m = qdisc_msg(
        ifindex,
        TcHandle::INGRESS,
        handle(0xffff, 0),
        "ingress",
        Vec::new(),
    );
    h.request_ack(Rt::NewQueueDiscipline(m), NLM_F_CREATE | NLM_F_EXCL)
        .map(drop)
        .map_err(|e| e.ctx(format_args!("add ingress qdisc (link {ifindex})")))
}

/// `tc filter add dev IF parent ffff: protocol all prio 1 u32 match u32 0 0 flowid 1:1
///  action mirred egress redirect dev TARGET`
pub fn add_redirect(h: &mut Handle, ifindex: u32, target: u32) -> Result<()> {
    let mut m = TcMessage::default();
    m.header.index = ifindex as i32;
    m.header.parent = handle(0xffff, 0);
    m.header.info = (1 << 16) | u32::from(ETH_P_ALL.to_be());
    let mut sel = TcU32Selector::default();
    sel.flags = TcU32SelectorFlags::Terminal;
    sel.nkeys = 1;
    sel.keys = vec![TcU32Key::default()];
    let mut generic = TcActionGeneric::default();
    generic.action = TcActionType::Stolen;
    let mut mirred = TcMirror::default();
    mirred.generic = generic;
    mirred.eaction = TcMirrorActionType::EgressRedir;
    mirred.ifindex = target;
    let mut action = TcAction::default();
    action.tab = 1;
    action.attributes = vec![
        TcActionAttribute::Kind("mirred".into()),
        TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(
            mirred,
        ))]),
    ];
    m.attributes.push(TcAttribute::Kind("u32".into()));
    m.attributes.push(TcAttribute::Options(vec![
        TcOption::U32(TcFilterU32Option::ClassId(handle(1, 1))),
        TcOption::U32(TcFilterU32Option::Selector(sel)),
        TcOption::U32(TcFilterU32Option::Action(vec![action])),
    ]));
    h.request_ack(Rt::NewTrafficFilter(m), NLM_F_CREATE | NLM_F_EXCL)
        .map(drop)
        .map_err(|e| {
            e.ctx(format_args!(
                "add redirect filter (link {ifindex} -> {target})"
            ))
        })
}

const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
/// struct tcmsg: family, pad, pad, ifindex, handle, parent, info.
const TCMSG_LEN: usize = 20;

/// Qdiscs of one link.
pub fn qdiscs(h: &mut Handle, ifindex: u32) -> Result<Vec<Qdisc>> {
    let replies = h.dump(Rt::GetQueueDiscipline(TcMessage::default()))?;
    Ok(replies
        .iter()
        .filter(|r| r.ty == RTM_NEWQDISC && nlmsg::get_u32(&r.body, 4) == Some(ifindex))
        .filter_map(|r| parse(&r.body))
        .collect())
}

/// A qdisc from an RTM_NEWQDISC payload, with the TBF parameters of a `tbf` one.
fn parse(body: &[u8]) -> Option<Qdisc> {
    let mut q = Qdisc {
        kind: String::new(),
        handle: nlmsg::get_u32(body, 8)?,
        parent: nlmsg::get_u32(body, 12)?,
        tbf: None,
    };
    let mut rate64 = None;
    for (ty, v) in nlmsg::attrs(body.get(TCMSG_LEN..)?) {
        match ty {
            TCA_KIND => q.kind = nlmsg::get_str(v),
            TCA_OPTIONS => {
                for (kind, v) in nlmsg::attrs(v) {
                    match kind {
                        // struct tc_tbf_qopt: rate (tc_ratespec, 12 bytes), peakrate (12),
                        // limit, buffer, mtu; the rate in bytes/s is at offset 8.
                        TCA_TBF_PARMS => {
                            if let (Some(rate), Some(limit), Some(buffer)) = (
                                nlmsg::get_u32(v, 8),
                                nlmsg::get_u32(v, 24),
                                nlmsg::get_u32(v, 28),
                            ) {
                                q.tbf = Some(Tbf {
                                    rate: u64::from(rate),
                                    limit,
                                    buffer,
                                });
                            }
                        }
                        TCA_TBF_RATE64 => {
                            rate64 = v.try_into().ok().map(u64::from_ne_bytes);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let (Some(t), Some(r)) = (q.tbf.as_mut(), rate64) {
        t.rate = r;
    }
    Some(q)
}

/// The TBF at the root of a link, if any.
pub fn root_tbf(h: &mut Handle, ifindex: u32) -> Result<Option<Tbf>> {
    Ok(qdiscs(h, ifindex)?
        .into_iter()
        .find(|q| q.kind == "tbf" && q.parent == u32::MAX)
        .and_then(|q| q.tbf))
}

/// An ingress or clsact qdisc already on the link (someone else's tc program).
pub fn ingress_user(h: &mut Handle, ifindex: u32) -> Result<Option<String>> {
    Ok(qdiscs(h, ifindex)?
        .into_iter()
        .find(|q| q.parent == u32_of(&TcHandle::INGRESS))
        .map(|q| q.kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::Error;

    #[test]
    fn tbf_parameters_match_upstream_arithmetic() {
        // 8 Mbit/s, 80 kbit burst: 1,000,000 B/s, 10,000 B burst = 10 ms = 10,000 us.
        let t = Tbf::from_bits(8_000_000, 80_000);
        assert_eq!(t.rate, 1_000_000);
        assert_eq!(t.limit, 25_000 + 10_000);
        assert_eq!(t.buffer, (10_000.0 * tick_in_usec()) as u32);
    }

    #[test]
    fn error_type_is_netlink() {
        let e: Error = Error::new(libc::EEXIST, "x");
        assert!(e.is_exists());
    }
}
