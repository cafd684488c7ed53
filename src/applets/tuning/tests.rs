use super::*;

#[test]
fn sysctl_paths_stay_under_proc_sys_net() {
    let p = |k: &str| sysctl_path(k, "eth0").map(|p| p.display().to_string());
    assert_eq!(
        p("net.ipv4.conf.IFNAME.arp_filter").unwrap(),
        "/proc/sys/net/ipv4/conf/eth0/arp_filter"
    );
    assert_eq!(
        p("net/ipv6/conf/all/forwarding").unwrap(),
        "/proc/sys/net/ipv6/conf/all/forwarding"
    );
    // Only the first IFNAME is replaced, as upstream.
    assert_eq!(p("net.IFNAME.IFNAME").unwrap(), "/proc/sys/net/eth0/IFNAME");
    for bad in ["kernel.panic", "net", "net.", "net\n.x", "vm.x"] {
        let e = sysctl_path(bad, "eth0").unwrap_err();
        assert_eq!(e.code, 7, "{bad}");
        assert!(e.msg.contains("sysctl"), "{}", e.msg);
    }
    // Dots become slashes before anything else, so `..` cannot be spelt in a key; an
    // interface name could carry it (the environment refuses such names), and the cleaned
    // path still has to stay under /proc/sys/net.
    assert_eq!(
        p("net/../kernel/panic").unwrap(),
        "/proc/sys/net/kernel/panic"
    );
    assert!(sysctl_path("net.IFNAME.panic", "..").is_err());
}

#[test]
fn backup_format_is_upstreams() {
    let s = Saved {
        mac: "aa:bb:cc:dd:ee:ff".into(),
        promisc: Some(false),
        mtu: 1500,
        allmulti: None,
        tx_qlen: Some(1000),
    };
    assert_eq!(
        crate::cni::gojson::pretty_with_indent(&s, b" "),
        "{\n \"mac\": \"aa:bb:cc:dd:ee:ff\",\n \"promisc\": false,\n \"mtu\": 1500,\n \"txQLen\": 1000\n}"
    );
    assert_eq!(
        crate::cni::gojson::pretty_with_indent(&Saved::default(), b" "),
        "{}"
    );
}

#[test]
fn duplicate_sysctl_keys() {
    let dup = br#"{"name":"n","sysctl":{"net.a":"1","net.a":"2"}}"#;
    assert_eq!(refuse_duplicate_sysctls(dup).unwrap_err().code, 7);
    let fold = br#"{"name":"n","sysctl":{"net.a":"1"},"SysCtl":{"net.a":"2"}}"#;
    assert!(refuse_duplicate_sysctls(fold).is_err());
    let ok = br#"{"name":"n","sysctl":{"net.a":"1","net.b":"1"},"other":{"x":1,"x":2}}"#;
    assert!(refuse_duplicate_sysctls(ok).is_ok());
    assert!(refuse_duplicate_sysctls(br#"{"sysctl":null}"#).is_ok());
}

#[test]
fn sysctl_keys_are_bounded_and_not_echoed() {
    let key = format!("net.{}", "a".repeat(keys::MAX_KEY));
    let e = sysctl_path(&key, "eth0").unwrap_err();
    assert_eq!(e.code, 7);
    assert!(
        e.msg.contains("longer than any sysctl") && e.msg.len() < 200,
        "{}",
        e.msg
    );
    let ok = format!("net.{}", "a".repeat(keys::MAX_KEY - 4));
    assert!(sysctl_path(&ok, "eth0").is_ok());
}
