//! The bytes a rule encodes to, checked in nf_tables byte order.

use super::*;
use crate::netfilter::{TCP, ct};
use crate::netlink::wire::attrs;

/// An expression: its name and the attributes of its data.
type Expr = (String, Vec<(u16, Vec<u8>)>);

/// The expressions of an encoded rule.
fn exprs(rule: &Rule, family: Family) -> Vec<Expr> {
    let mut w = Writer::default();
    rule.encode(family, &mut w).unwrap();
    let (ty, list) = attrs(&w.buf).next().unwrap();
    assert_eq!(ty, NFTA_RULE_EXPRESSIONS);
    attrs(list)
        .map(|(_, e)| {
            let mut name = String::new();
            let mut data = Vec::new();
            for (ty, v) in attrs(e) {
                match ty {
                    NFTA_EXPR_NAME => name = crate::netlink::wire::get_str(v),
                    NFTA_EXPR_DATA => data = attrs(v).map(|(t, v)| (t, v.to_vec())).collect(),
                    _ => {}
                }
            }
            (name, data)
        })
        .collect()
}

fn get(e: &Expr, ty: u16) -> &[u8] {
    &e.1.iter()
        .find(|(t, _)| *t == ty)
        .unwrap_or_else(|| panic!("{} has no attribute {ty}", e.0))
        .1
}

/// The NFTA_DATA_VALUE inside a nested data attribute (cmp data, immediate data, masks).
fn value(e: &Expr, ty: u16) -> Vec<u8> {
    attrs(get(e, ty))
        .find(|(t, _)| *t == NFTA_DATA_VALUE)
        .map(|(_, v)| v.to_vec())
        .unwrap()
}

/// nf_tables byte order, checked against known bytes: expression parameters (registers,
/// keys, offsets, lengths, NAT flags) are big-endian, packet data compared with the
/// payload (ports) is in network order, and values the kernel loads into registers in host
/// order (meta mark, ct state bits) are host-endian. A port written host-endian makes
/// `tcp dport 8080` match port 36895 on a little-endian machine.
#[test]
fn rule_bytes_in_nf_tables_byte_order() {
    let r = Rule::new()
        .l4proto(TCP)
        .dport(8080)
        .mark(0x1234_5678, false)
        .ct_state(ct::NEW)
        .dnat("10.88.0.2".parse().unwrap(), Some(80));
    let e = exprs(&r, Family::Ip);
    let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "meta",
            "cmp",
            "payload",
            "cmp",
            "meta",
            "cmp",
            "ct",
            "bitwise",
            "cmp",
            "immediate",
            "immediate",
            "nat"
        ]
    );
    // meta l4proto tcp
    assert_eq!(get(&e[0], NFTA_META_KEY), [0, 0, 0, 16]);
    assert_eq!(get(&e[0], NFTA_META_DREG), [0, 0, 0, 1]);
    assert_eq!(get(&e[1], NFTA_CMP_OP), [0, 0, 0, 0]);
    assert_eq!(value(&e[1], NFTA_CMP_DATA), [6]);
    // th dport 8080: transport header, offset 2, 2 bytes, 0x1f90 in network order
    assert_eq!(get(&e[2], NFTA_PAYLOAD_BASE), [0, 0, 0, 2]);
    assert_eq!(get(&e[2], NFTA_PAYLOAD_OFFSET), [0, 0, 0, 2]);
    assert_eq!(get(&e[2], NFTA_PAYLOAD_LEN), [0, 0, 0, 2]);
    assert_eq!(value(&e[3], NFTA_CMP_DATA), [0x1f, 0x90]);
    // meta mark 0x12345678: the register holds skb->mark in host order
    assert_eq!(get(&e[4], NFTA_META_KEY), [0, 0, 0, 3]);
    assert_eq!(value(&e[5], NFTA_CMP_DATA), 0x1234_5678u32.to_ne_bytes());
    // ct state new: host-order bits, masked, compared != 0
    assert_eq!(value(&e[7], NFTA_BITWISE_MASK), 8u32.to_ne_bytes());
    assert_eq!(value(&e[7], NFTA_BITWISE_XOR), [0; 4]);
    assert_eq!(get(&e[7], NFTA_BITWISE_LEN), [0, 0, 0, 4]);
    assert_eq!(get(&e[8], NFTA_CMP_OP), [0, 0, 0, 1]);
    // dnat to 10.88.0.2:80: address and port in network order, in registers 1 and 2
    assert_eq!(get(&e[9], NFTA_IMMEDIATE_DREG), [0, 0, 0, 1]);
    assert_eq!(value(&e[9], NFTA_IMMEDIATE_DATA), [10, 88, 0, 2]);
    assert_eq!(get(&e[10], NFTA_IMMEDIATE_DREG), [0, 0, 0, 2]);
    assert_eq!(value(&e[10], NFTA_IMMEDIATE_DATA), [0, 80]);
    assert_eq!(get(&e[11], NFTA_NAT_TYPE), [0, 0, 0, 1]);
    assert_eq!(get(&e[11], NFTA_NAT_FAMILY), [0, 0, 0, 2]);
    assert_eq!(get(&e[11], NFTA_NAT_REG_ADDR_MIN), [0, 0, 0, 1]);
    assert_eq!(get(&e[11], NFTA_NAT_REG_PROTO_MIN), [0, 0, 0, 2]);
    assert_eq!(get(&e[11], NFTA_NAT_FLAGS), [0, 0, 0, 2]);
    if cfg!(target_endian = "little") {
        assert_eq!(value(&e[5], NFTA_CMP_DATA), [0x78, 0x56, 0x34, 0x12]);
    }
}

/// A verdict code is a big-endian s32 (return = -5), a jump names its chain.
#[test]
fn verdict_bytes() {
    let e = exprs(&Rule::new().ret(), Family::Inet);
    assert_eq!(e[0].0, "immediate");
    let verdict = get(&e[0], NFTA_IMMEDIATE_DATA);
    let (_, v) = attrs(verdict).next().unwrap();
    let code: Vec<_> = attrs(v).collect();
    assert_eq!(code[0], (NFTA_VERDICT_CODE, &[0xff, 0xff, 0xff, 0xfb][..]));
}
