use super::index::entry_text;
use super::*;
use std::fs::FileTimes;
use std::os::unix::fs::MetadataExt;
use std::time::SystemTime;

fn tmp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("cnibox-store-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&p);
    p
}

#[test]
fn reserve_release_and_formats() {
    let d = tmp("basic");
    let o = Owner::new("c1", "eth0");
    let ip: IpAddr = "10.0.0.2".parse().unwrap();
    {
        let mut s = Store::open(&d, "net", true).unwrap().unwrap();
        assert!(s.reserve(ip, &o, 0).unwrap());
        assert!(!s.reserve(ip, &Owner::new("c2", "eth0"), 0).unwrap());
        assert_eq!(s.owned_by(&o).unwrap(), vec![ip]);
    }
    assert_eq!(fs::read(d.join("net/10.0.0.2")).unwrap(), b"c1\r\neth0");
    assert_eq!(
        fs::read(d.join("net/last_reserved_ip.0")).unwrap(),
        b"10.0.0.2"
    );
    assert_eq!(
        fs::metadata(d.join("net/10.0.0.2")).unwrap().mode() & 0o777,
        0o600
    );
    let mut s = Store::open(&d, "net", false).unwrap().unwrap();
    assert_eq!(s.release("c1", "eth0").unwrap(), 1);
    assert_eq!(s.release("c1", "eth0").unwrap(), 0);
    assert!(!d.join("net/10.0.0.2").exists());
    drop(s);
    assert!(Store::open(&d, "other", false).unwrap().is_none());
    assert!(Store::open(&d, "..", true).is_err());
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn foreign_changes_are_noticed() {
    let d = tmp("foreign");
    drop(Store::open(&d, "net", true).unwrap());
    // Another host-local (or a person) writes reservations, including a legacy one.
    fs::write(d.join("net/10.0.0.7"), "c9\r\neth1").unwrap();
    fs::write(d.join("net/10.0.0.8"), "old").unwrap();
    let mut s = Store::open(&d, "net", false).unwrap().unwrap();
    assert_eq!(
        s.owned_by(&Owner::new("c9", "eth1")).unwrap(),
        vec!["10.0.0.7".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(
        s.release("old", "eth0").unwrap(),
        1,
        "legacy reservation released by container ID"
    );
    drop(s);
    fs::remove_file(d.join("net/10.0.0.7")).unwrap();
    let s = Store::open(&d, "net", false).unwrap().unwrap();
    assert!(s.owned_by(&Owner::new("c9", "eth1")).unwrap().is_empty());
    drop(s);
    fs::remove_dir_all(&d).unwrap();
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A store with c1 holding .2 and c2 holding .3, sealed.
fn two(name: &str) -> PathBuf {
    let d = tmp(name);
    let mut s = Store::open(&d, "net", true).unwrap().unwrap();
    assert!(
        s.reserve(ip("10.0.0.2"), &Owner::new("c1", "eth0"), 0)
            .unwrap()
    );
    assert!(
        s.reserve(ip("10.0.0.3"), &Owner::new("c2", "eth0"), 0)
            .unwrap()
    );
    drop(s);
    d
}

fn release(d: &Path, cid: &str) -> usize {
    Store::open(d, "net", false)
        .unwrap()
        .unwrap()
        .release(cid, "eth0")
        .unwrap()
}

/// However the index is made wrong, DEL releases exactly the owner's reservations: never
/// another's, never none of its own.
#[test]
fn a_stale_index_is_never_trusted() {
    type Damage = fn(&Path);
    let cases: &[(&str, Damage)] = &[
        ("entry removed by an admin", |d| {
            fs::remove_file(d.join(".cnibox/net/c1:eth0")).unwrap()
        }),
        ("entry truncated", |d| {
            fs::write(d.join(".cnibox/net/c1:eth0"), "owner c1:eth0\n").unwrap()
        }),
        ("entry edited to another address", |d| {
            let t = entry_text(&Owner::new("c1", "eth0"), &[ip("10.0.0.3")]);
            fs::write(d.join(".cnibox/net/c1:eth0"), t).unwrap()
        }),
        ("entry emptied", |d| {
            fs::write(d.join(".cnibox/net/c1:eth0"), "").unwrap()
        }),
        ("index removed", |d| {
            fs::remove_dir_all(d.join(".cnibox/net")).unwrap()
        }),
        (
            "stamp removed (an older cnibox's crash mid-operation)",
            |d| fs::remove_file(d.join(".cnibox/.sealed/net")).unwrap(),
        ),
        ("stamp emptied (crash mid-operation)", |d| {
            fs::write(d.join(".cnibox/.sealed/net"), "").unwrap()
        }),
        ("stamp torn (crash while sealing), entry gone", |d| {
            let p = d.join(".cnibox/.sealed/net");
            let t = fs::read_to_string(&p).unwrap();
            fs::write(&p, &t[..t.len() / 2]).unwrap();
            fs::remove_file(d.join(".cnibox/net/c1:eth0")).unwrap();
        }),
        ("reservation moved behind our back", |d| {
            // The Go plugin released .2 and gave c1 .4 instead.
            fs::remove_file(d.join("net/10.0.0.2")).unwrap();
            fs::write(d.join("net/10.0.0.4"), "c1\r\neth0").unwrap();
        }),
        ("reservation handed to another owner", |d| {
            fs::write(d.join("net/10.0.0.2"), "c9\r\neth0").unwrap();
            fs::write(d.join("net/10.0.0.5"), "c1\r\neth0").unwrap();
        }),
        ("directory times set back to the very stamp", |d| {
            let m = fs::metadata(d.join("net")).unwrap();
            fs::write(d.join("net/10.0.0.6"), "c1\r\neth0").unwrap();
            let t = SystemTime::UNIX_EPOCH + Duration::new(m.mtime() as u64, m.mtime_nsec() as u32);
            let times = FileTimes::new().set_modified(t);
            File::open(d.join("net")).unwrap().set_times(times).unwrap();
        }),
        ("directory times restored by a backup tool", |d| {
            fs::write(d.join("net/10.0.0.6"), "c1\r\neth0").unwrap();
            let t = SystemTime::UNIX_EPOCH + Duration::new(1, 777_777_777);
            let times = FileTimes::new().set_modified(t);
            File::open(d.join("net")).unwrap().set_times(times).unwrap();
        }),
    ];
    for (i, (what, damage)) in cases.iter().enumerate() {
        let d = two(&format!("stale{i}"));
        damage(&d);
        let theirs: Vec<String> = fs::read_dir(d.join("net"))
            .unwrap()
            .flatten()
            .filter(|e| fs::read_to_string(e.path()).is_ok_and(|c| c.starts_with("c1\r")))
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        let n = release(&d, "c1");
        assert_eq!(n, theirs.len(), "{what}: released {n} of {theirs:?}");
        for f in fs::read_dir(d.join("net")).unwrap().flatten() {
            let c = fs::read_to_string(f.path()).unwrap_or_default();
            assert!(!c.starts_with("c1\r"), "{what}: {:?} left", f.file_name());
        }
        assert!(
            fs::read_dir(d.join("net"))
                .unwrap()
                .flatten()
                .any(
                    |e| fs::read_to_string(e.path()).is_ok_and(|c| c.starts_with("c2\r"))
                        || fs::read_to_string(e.path()).is_ok_and(|c| c.starts_with("c9\r"))
                ),
            "{what}: another owner's reservation was released"
        );
        // The next operation is correct again, and sealed.
        assert_eq!(release(&d, "c1"), 0, "{what}");
        fs::remove_dir_all(&d).unwrap();
    }
}

/// ADD and DEL are O(1) in the number of reservations while only cnibox changes the
/// store: no scan at open, reserve, lookup or release (also for an owner with nothing);
/// one change by anyone else costs exactly one scan, after which it is O(1) again.
#[test]
fn common_case_never_scans() {
    let d = tmp("o1");
    {
        let mut s = Store::open(&d, "net", true).unwrap().unwrap();
        for i in 1..=60 {
            let o = Owner::new(&format!("c{i}"), "eth0");
            assert!(s.reserve(ip(&format!("10.0.1.{i}")), &o, 0).unwrap());
        }
    }
    for round in 1..=3 {
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        assert!(
            s.reserve(ip(&format!("10.0.2.{round}")), &Owner::new("n", "eth1"), 0)
                .unwrap()
        );
        assert_eq!(
            s.owned_by(&Owner::new("c30", "eth0")).unwrap(),
            [ip("10.0.1.30")]
        );
        assert_eq!(s.release(&format!("c{round}"), "eth0").unwrap(), 1);
        assert_eq!(s.release("absent", "eth0").unwrap(), 0);
        assert_eq!(s.scans.get(), 0, "round {round}");
    }
    fs::write(d.join("net/10.0.3.1"), "go\r\neth0").unwrap();
    let mut s = Store::open(&d, "net", false).unwrap().unwrap();
    assert_eq!(s.release("go", "eth0").unwrap(), 1);
    assert_eq!(s.scans.get(), 1, "one scan after a foreign change");
    drop(s);
    let mut s = Store::open(&d, "net", false).unwrap().unwrap();
    assert_eq!(s.release("c40", "eth0").unwrap(), 1);
    assert_eq!(s.scans.get(), 0, "sealed again");
    drop(s);
    fs::remove_dir_all(&d).unwrap();
}

/// Owners longer than a file name (Go writes them) neither break the index nor leak.
#[test]
fn long_owners() {
    let d = tmp("long");
    drop(Store::open(&d, "net", true).unwrap());
    let long = "c".repeat(300);
    fs::write(d.join("net/10.0.0.9"), format!("{long}\r\neth0")).unwrap();
    let mut s = Store::open(&d, "net", false).unwrap().unwrap();
    let o = Owner::new(&long, "eth0");
    assert_eq!(s.owned_by(&o).unwrap(), vec![ip("10.0.0.9")]);
    let o2 = Owner::new(&"d".repeat(400), "eth1");
    assert!(s.reserve(ip("10.0.0.10"), &o2, 0).unwrap());
    drop(s);
    let mut s = Store::open(&d, "net", false).unwrap().unwrap();
    assert_eq!(s.owned_by(&o2).unwrap(), vec![ip("10.0.0.10")]);
    assert_eq!(s.owners().unwrap().len(), 2);
    assert_eq!(s.release(&long, "eth0").unwrap(), 1);
    assert_eq!(s.release(&"d".repeat(400), "eth1").unwrap(), 1);
    drop(s);
    fs::remove_dir_all(&d).unwrap();
}

/// No temporary or empty file is ever left where the Go plugin would read it.
#[test]
fn reservations_appear_complete() {
    let d = two("complete");
    for e in fs::read_dir(d.join("net")).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        assert!(!name.starts_with(".tmp"), "{name}");
        if name.parse::<IpAddr>().is_ok() {
            assert!(!fs::read_to_string(e.path()).unwrap().is_empty());
        }
    }
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn last_reserved_rewritten_to_exactly_the_new_bytes() {
    // In place, never truncated to zero first: a shorter address must not keep the tail of a
    // longer one ("10.0.0.10" then "10.0.0.9" is "10.0.0.9", not "10.0.0.90").
    let d = tmp("last-shorter");
    let mut s = Store::open(&d, "net", true).unwrap().unwrap();
    let o = Owner::new("c1", "eth0");
    assert!(s.reserve("10.0.0.10".parse().unwrap(), &o, 0).unwrap());
    assert!(s.reserve("10.0.0.9".parse().unwrap(), &o, 0).unwrap());
    assert_eq!(
        fs::read(d.join("net/last_reserved_ip.0")).unwrap(),
        b"10.0.0.9"
    );
    assert!(s.reserve("fd00::1:10".parse().unwrap(), &o, 1).unwrap());
    assert!(s.reserve("fd00::9".parse().unwrap(), &o, 1).unwrap());
    assert_eq!(
        fs::read(d.join("net/last_reserved_ip.1")).unwrap(),
        b"fd00::9"
    );
    drop(s);
    fs::remove_dir_all(&d).unwrap();
}
