//! Unit tests: the delegate config, the stored shape and `subnet.env` parsing.

use super::stored::NAME_MAX;
use super::*;
use ipnet::IpNet;
use std::path::Path;

const DUAL: &str = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\n\
    FLANNEL_IPV6_NETWORK=2001:cafe:42::/56\nFLANNEL_IPV6_SUBNET=2001:cafe:42:1::1/64\n\
    FLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n";

#[test]
fn only_a_stored_delegate_config_has_its_shape() {
    let stored =
        br#"{"cniVersion":"1.0.0","ipam":{"type":"host-local"},"name":"cbr0","type":"bridge"}"#;
    assert_eq!(stored_shape(stored, "cbr0").as_deref(), Some("bridge"));
    assert_eq!(stored_shape(stored, "other"), None);
    for text in [
        &br#"{"name":"cbr0"}"#[..],
        br#"{"name":"cbr0","plugins":[{"type":"flannel"}],"type":"bridge","ipam":{}}"#,
        br#"{"name":"cbr0","type":"../bridge","ipam":{}}"#,
        br#"{"name":"cbr0","type":"bridge","ipam":"host-local"}"#,
        br#"["cbr0"]"#,
        b"\xff",
    ] {
        assert_eq!(
            stored_shape(text, "cbr0"),
            None,
            "{}",
            String::from_utf8_lossy(text)
        );
    }
}

#[test]
fn long_ids_get_hashed_names() {
    let f = Flannel {
        subnet_file: String::new(),
        data_dir: PathBuf::from("/d"),
        delegate: Map::new(),
        ipam: Map::new(),
        routes: Vec::new(),
    };
    let id = "a".repeat(NAME_MAX);
    assert_eq!(stored_path(&f, &id), Path::new("/d").join(&id));
    let long = "a".repeat(NAME_MAX + 1);
    let p = stored_path(&f, &long);
    let name = p.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with('~') && name.len() == 33, "{name}");
    assert_ne!(stored_path(&f, &"b".repeat(NAME_MAX + 1)), p);
}

#[test]
fn subnet_env_dual_stack() {
    let se = SubnetEnv::parse("f", DUAL).unwrap();
    assert_eq!(se.networks, vec!["10.42.0.0/16".parse::<IpNet>().unwrap()]);
    assert_eq!(se.subnet, Some("10.42.1.0/24".parse().unwrap()));
    assert_eq!(se.ip6_subnet, Some("2001:cafe:42:1::/64".parse().unwrap()));
    assert_eq!(se.mtu, Some(1450));
    assert_eq!(se.ipmasq, Some(true));
}

#[test]
fn subnet_env_lists_dedup_and_missing_keys() {
    let se = SubnetEnv::parse(
        "f",
        "FLANNEL_NETWORK=10.1.0.0/16,10.2.0.0/16,10.1.0.0/16\r\nFLANNEL_SUBNET=10.1.3.0/24\r\nFLANNEL_MTU=1400\r\nFLANNEL_IPMASQ=false\r\n",
    )
    .unwrap();
    assert_eq!(se.networks.len(), 2);
    assert_eq!(se.ipmasq, Some(false));
    let e = SubnetEnv::parse("/x", "FLANNEL_SUBNET=10.1.3.0/24\n").unwrap_err();
    assert!(
        e.msg.contains(
            "/x is missing FLANNEL_NETWORK, FLANNEL_IPV6_NETWORK, FLANNEL_MTU, FLANNEL_IPMASQ"
        ),
        "{}",
        e.msg
    );
    let e = SubnetEnv::parse("/x", "FLANNEL_SUBNET=10.1.3.0\n").unwrap_err();
    assert!(e.msg.contains("FLANNEL_SUBNET: invalid CIDR"), "{}", e.msg);
    assert!(SubnetEnv::parse("/x", "FLANNEL_MTU=-1\n").is_err());
}
