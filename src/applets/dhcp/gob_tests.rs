//! The gob codec and Go net/rpc messages against bytes upstream's plugin and daemon (v1.1.1,
//! Debian's package) wrote on the socket (tests/fuzz/gob/), and against hostile streams.

use super::gob::{Dec, Enc, MAX_MESSAGE, Val, read_message};
use super::gorpc::{TypesDefined, answer, request, result};
use crate::cni::env::{Command, Env};
use crate::cni::result::{CniResult, IpConfig, Route};
use crate::error::Error;

const PLUGIN_ALLOCATE: &[u8] = include_bytes!("../../../tests/fuzz/gob/go-plugin-allocate.bin");
const PLUGIN_RELEASE: &[u8] = include_bytes!("../../../tests/fuzz/gob/go-plugin-release.bin");
const DAEMON_ALLOCATE: &[u8] = include_bytes!("../../../tests/fuzz/gob/go-daemon-allocate.bin");
const DAEMON_RELEASE: &[u8] = include_bytes!("../../../tests/fuzz/gob/go-daemon-release.bin");
const STDIN: &str = r#"{"cniVersion":"1.0.0","name":"capnet","type":"dhcp","ipam":{"type":"dhcp","daemonSocketPath":"/tmp/dhcpcap/proxy.sock","priority":7}}
"#;

fn env() -> Env {
    Env {
        command: Command::Add,
        container_id: "cid1".into(),
        netns: "/run/netns/dhcpcap-c".into(),
        ifname: "eth0".into(),
        args: "K=V".into(),
        path: "/usr/lib/cni".into(),
    }
}

/// Every value of a stream (a header and a body per call or answer).
fn values(mut b: &[u8]) -> Result<Vec<Val>, String> {
    let mut dec = Dec::new();
    let mut out = Vec::new();
    while !b.is_empty() {
        out.push(dec.read(&mut b)?);
    }
    Ok(out)
}

#[test]
fn our_call_is_byte_for_byte_the_go_plugins() {
    assert_eq!(
        request("DHCP.Allocate", &env(), STDIN.as_bytes()),
        PLUGIN_ALLOCATE
    );
    assert_eq!(
        request("DHCP.Release", &env(), STDIN.as_bytes()),
        PLUGIN_RELEASE
    );
}

#[test]
fn the_go_plugins_call_as_the_daemon_reads_it() {
    let v = values(PLUGIN_ALLOCATE).unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].str("ServiceMethod"), "DHCP.Allocate");
    assert_eq!(v[0].int("Seq"), 0);
    let a = &v[1];
    assert_eq!(a.str("ContainerID"), "cid1");
    assert_eq!(a.str("Netns"), "/run/netns/dhcpcap-c");
    assert_eq!(a.str("IfName"), "eth0");
    assert_eq!(a.str("Args"), "K=V");
    assert_eq!(a.str("Path"), "/usr/lib/cni");
    assert_eq!(a.str("StdinData"), STDIN);
}

#[test]
fn the_go_daemons_answers() {
    let v = values(DAEMON_ALLOCATE).unwrap();
    assert_eq!(v[0].str("ServiceMethod"), "DHCP.Allocate");
    assert_eq!(v[0].str("Error"), "");
    let r = result(&v[1]).unwrap();
    let j = r.to_value(crate::cni::Version::V110).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"cniVersion": "1.1.0",
            "ips": [{"address": "10.231.0.97/24", "gateway": "10.231.0.1"}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.231.0.1"}]})
    );
    let v = values(DAEMON_RELEASE).unwrap();
    assert_eq!(v[0].str("ServiceMethod"), "DHCP.Release");
    assert_eq!(v[1], Val::Struct(vec![]));
}

fn sample() -> CniResult {
    let mut r = CniResult::default();
    for (a, g) in [
        ("10.1.2.3/24", "10.1.2.1"),
        ("2001:db8::5/64", "2001:db8::1"),
    ] {
        r.ips.push(IpConfig {
            version: None,
            interface: None,
            address: a.parse().unwrap(),
            gateway: Some(g.parse().unwrap()),
        });
    }
    let mut on_link = Route::new("10.8.1.0/24".parse().unwrap(), None);
    on_link.scope = Some(253);
    on_link.priority = Some(300);
    r.routes.push(on_link);
    r.routes.push(Route::new(
        "0.0.0.0/0".parse().unwrap(),
        Some("10.1.2.1".parse().unwrap()),
    ));
    r
}

/// What the daemon answers reads back as it was, types defined once per stream.
#[test]
fn our_answers_round_trip() {
    let mut sent = TypesDefined::default();
    let mut s = answer(&mut sent, "DHCP.Allocate", 0, &Ok(Some(sample())));
    let first = s.len();
    s.extend(answer(&mut sent, "DHCP.Allocate", 7, &Ok(Some(sample()))));
    assert!(s.len() - first < first / 2, "types sent again");
    s.extend(answer(&mut sent, "DHCP.Release", 8, &Ok(None)));
    s.extend(answer(
        &mut sent,
        "DHCP.Allocate",
        9,
        &Err(Error::config("bad: key")),
    ));
    let v = values(&s).unwrap();
    assert_eq!(v.len(), 8);
    assert_eq!(result(&v[1]).unwrap(), sample());
    assert_eq!((v[2].int("Seq"), result(&v[3]).unwrap()), (7, sample()));
    assert_eq!(
        (v[4].str("ServiceMethod"), v[4].int("Seq")),
        ("DHCP.Release".into(), 8)
    );
    assert_eq!(v[5], Val::Struct(vec![]));
    assert_eq!(v[6].str("Error"), "bad: key");
    // The Go daemon's answer to Release, byte for byte.
    assert_eq!(
        answer(&mut TypesDefined::default(), "DHCP.Release", 0, &Ok(None)).len(),
        DAEMON_RELEASE.len()
    );
}

#[test]
fn integers_as_go_writes_them() {
    for (v, b) in [
        (0u64, &[0u8][..]),
        (127, &[0x7f]),
        (128, &[0xff, 0x80]),
        (256, &[0xfe, 1, 0]),
        (
            u64::MAX,
            &[0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ),
    ] {
        let mut e = Enc::default();
        e.uint(v);
        assert_eq!(e.0, b, "{v}");
    }
    let mut e = Enc::default();
    e.int(-65);
    e.int(66);
    assert_eq!(e.0, [0xff, 0x81, 0xff, 0x84]);
}

/// Broken and hostile streams end in an error: every truncation of the captured ones, a
/// type nested in itself, counts past the message, unknown and redefined types, field numbers
/// out of range, messages too long.
#[test]
fn hostile_streams_are_errors() {
    for s in [
        PLUGIN_ALLOCATE,
        PLUGIN_RELEASE,
        DAEMON_ALLOCATE,
        DAEMON_RELEASE,
    ] {
        for n in 0..s.len() {
            let mut b = &s[..n];
            let mut dec = Dec::new();
            let got = std::iter::from_fn(|| dec.read(&mut b).ok()).count();
            assert!(got < 2, "a truncation to {n} bytes decoded {got} values");
        }
    }
    let msg = |body: &[u8]| {
        let mut e = Enc::default();
        e.message(&Enc(body.to_vec()));
        e.0
    };
    // Type 65 = struct { A []T65 }, then a value nested 1000 deep.
    let mut s = Enc::default();
    s.define(65, "T", &[("A", 66)]);
    s.define(66, "", &[("", 65)]);
    let mut deep = vec![0xff, 0x82]; // id 65
    deep.extend([1, 1].repeat(1000));
    deep.extend([0].repeat(1001));
    s.0.extend(msg(&deep));
    let e = values(&s.0).unwrap_err();
    assert!(e.contains("nested too deep"), "{e}");
    for (body, want) in [
        (&[0xff, 0x84, 0x00][..], "unknown type id"), // type 66: never defined
        (&[0x0c, 0x01, 0x41], "not a struct"),        // a bare string
        (
            &[0x1f, 0x07, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00],
            "type redefined",
        ), // -16
        (&[0xff, 0x82, 0x09, 0x00], "out of range"),
        (&[0xff, 0x82, 0xf7], "bad unsigned"),
        (&[0xff, 0x82, 0x00, 0x00], "extra data"),
    ] {
        let mut s = Enc::default();
        s.define(65, "T", &[("A", 5)]);
        s.0.extend(msg(body));
        let e = values(&s.0).unwrap_err();
        assert!(e.contains(want), "{body:?}: {e}");
    }
    // A count past the end of the message.
    let mut s = Enc::default();
    s.define(65, "T", &[("A", 5)]);
    s.0.extend(msg(&[0xff, 0x82, 0x01, 0x7f, 0x00]));
    assert!(values(&s.0).unwrap_err().contains("past the message"));
    // Message counts: too long, zero, nine bytes.
    let big = [0xfc, 0x10, 0x00, 0x00, 0x01];
    assert!(read_message(&mut &big[..]).unwrap_err().contains("bytes"));
    assert!(read_message(&mut &[0u8][..]).is_err());
    assert!(read_message(&mut &[0xf7u8, 1, 1, 1, 1, 1, 1, 1, 1, 1][..]).is_err());
    let just_over = (MAX_MESSAGE as u32 + 1).to_be_bytes();
    let mut over = vec![0xfc];
    over.extend(just_over);
    assert!(read_message(&mut &over[..]).unwrap_err().contains("bytes"));
}

/// Type id i64::MIN (zig-zagged: all ones) has no definition id to negate: an error, not an
/// overflow.
#[test]
fn the_lowest_type_id_is_an_error() {
    let mut body = Enc::default();
    body.int(i64::MIN);
    body.0.extend([0; 4]);
    let mut s = Enc::default();
    s.message(&body);
    let e = values(&s.0).unwrap_err();
    assert!(e.contains("bad type id"), "{e}");
}

/// What a stream's decoder holds is bounded in bytes, not only per message: one definition
/// of many empty fields, many definitions of a few named fields, a value of many one-byte
/// elements — each within the message bound — end in an error naming the decoder state;
/// a call's config of nearly a whole message still decodes.
#[test]
fn decoder_state_is_bounded_per_stream() {
    let state = |e: String| assert!(e.contains("decoder state"), "{e}");
    // One definition, 100,000 empty fields (one byte each on the wire).
    let mut d = Enc::default();
    d.int(-65);
    d.0.extend([3, 1, 1, 1, b'X', 1, 0xff, 0x82, 0, 1]);
    d.uint(100_000);
    d.0.extend(std::iter::repeat_n(0u8, 100_000));
    d.0.extend([0, 0]);
    let mut s = Enc::default();
    s.message(&d);
    assert!(s.0.len() <= MAX_MESSAGE);
    state(values(&s.0).unwrap_err());
    // Definitions of 100 fields named 32 bytes each: some ten fit, the next is refused.
    let names: Vec<String> = (0..100).map(|i| format!("{i:032}")).collect();
    let fields: Vec<(&str, i64)> = names.iter().map(|n| (n.as_str(), 5)).collect();
    let mut s = Enc::default();
    for id in 65..100 {
        s.define(id, "T", &fields);
    }
    let mut dec = Dec::new();
    let mut b = &s.0[..];
    let e = std::iter::from_fn(|| Some(dec.read(&mut b)))
        .find_map(Result::err)
        .unwrap();
    state(e);
    // A value: struct { A []uint } with 900,000 zeros.
    let mut s = Enc::default();
    s.define(65, "T", &[("A", 66)]);
    s.define(66, "", &[("", 2)]);
    let mut v = Enc::default();
    v.int(65);
    v.uint(1);
    v.uint(900_000);
    v.0.extend(std::iter::repeat_n(0u8, 900_000));
    v.uint(0);
    s.message(&v);
    state(values(&s.0).unwrap_err());
    // The whole message one string: a network config as big as a call can carry.
    let mut s = Enc::default();
    s.define(65, "T", &[("A", 6)]);
    let mut v = Enc::default();
    v.int(65);
    v.uint(1);
    v.bytes(&vec![b'x'; MAX_MESSAGE - 64]);
    v.uint(0);
    s.message(&v);
    let got = values(&s.0).unwrap();
    assert_eq!(got[0].str("A").len(), MAX_MESSAGE - 64);
}
