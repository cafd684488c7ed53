//! In-process mutation fuzzers for the parsers that read bytes from outside the host's control
//! (issue 24, item 13): DHCP replies (a container's network answers the daemon, which runs as
//! root on the host), Go net/rpc gob streams (the dhcp daemon's socket), netlink replies (what a container sets — names, aliases, addresses,
//! nested link info — comes back through them), the tuning allowlist (its patterns, and sysctl
//! keys from pod annotations matched against them), flannel's subnet.env, D-Bus replies
//! (firewall's firewalld backend), nf_tables dumps, libcni result-cache files and network
//! configurations (issue 35). Each target runs the library's own entry point
//! (`cnibox::applets::fuzz`, `cnibox::netlink::fuzz`, `cnibox::dbus::fuzz`) on mutated
//! seeds — the seed files under tests/fuzz/ plus well-formed messages built here — and fails on
//! a panic (with the input), on one execution longer than `SLOW` and, by taking the test binary
//! down, on a stack overflow. The loop runs on a thread with the binary's main-thread stack
//! (8 MiB), so an overflow here is one there.
//!
//! `corpus_replay` runs every file under tests/fuzz/<target>/ of the byte targets unmutated:
//! the seeds, the minimized corpora and each crash input of the coverage-guided fuzzers
//! (fuzz/, `make fuzz-long`).
//!
//! Deterministic: `FUZZ_SEED` and `FUZZ_PARSER_EXECS` (per target; default 3000, `make fuzz`
//! runs 100,000).

mod common;
use common::rng::Rng;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest one execution may take (the allowlist matcher has a step bound; nothing else loops).
const SLOW: Duration = Duration::from_secs(2);

fn execs() -> usize {
    std::env::var("FUZZ_PARSER_EXECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

fn seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00c0_ffee_cafe_f00d)
}

/// The seed files of one target: tests/fuzz/<target>/*.
fn seed_files(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// Byte-level mutations: flips, interesting bytes and lengths, inserts, deletes, duplicated and
/// spliced ranges, truncation.
fn mutate(r: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = r.pick(seeds).clone();
    for _ in 0..1 + r.below(4) {
        let at = r.below(b.len() + 1);
        match r.below(9) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << r.below(8);
            }
            1 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = *r.pick(&[
                    0u8, 1, 2, 3, 4, 0x7f, 0x80, 0xfe, 0xff, b'(', b'\\', b'=', b'\n',
                ]);
            }
            2 if b.len() >= 2 => {
                // A length field (u16 either order) set to something interesting.
                let i = at.min(b.len() - 2);
                let v = *r.pick(&[0u16, 1, 3, 4, 5, 8, 0xff, 0x100, 0x7fff, 0xffff]);
                b[i..i + 2].copy_from_slice(&v.to_ne_bytes());
            }
            3 => {
                let n = 1 + r.below(16);
                for _ in 0..n {
                    b.insert(at, r.next() as u8);
                }
            }
            4 if !b.is_empty() => {
                let end = (at + 1 + r.below(16)).min(b.len());
                b.drain(at.min(end)..end);
            }
            5 if !b.is_empty() => {
                let s = r.below(b.len());
                let e = (s + 1 + r.below(64)).min(b.len());
                let chunk = b[s..e].to_vec();
                let at = at.min(b.len());
                b.splice(at..at, chunk);
            }
            6 => {
                let other = r.pick(seeds).clone();
                let cut = r.below(other.len() + 1);
                b.truncate(at);
                b.extend_from_slice(&other[cut..]);
            }
            7 => b.truncate(at),
            _ if b.len() >= 4 => {
                let i = at.min(b.len() - 4);
                let v = *r.pick(&[0u32, 1, 16, 20, u32::MAX, 0x8000_0000, 0xffff]);
                b[i..i + 4].copy_from_slice(&v.to_ne_bytes());
            }
            _ => b.push(r.next() as u8),
        }
    }
    b
}

/// Run `target` on `n` inputs made by `generate`. The loop runs in a child process (this test
/// binary re-run for the one test, `FUZZ_PARSER_CHILD=name`), on a thread with the binary's
/// 8 MiB main-thread stack, announcing each execution's number on stderr before it starts; so
/// a stack overflow or any other signal, or a hang past the deadline, fails the test here with
/// the input that caused it (made again from the same seed) instead of taking every target
/// down. Panics and executions slower than `SLOW` fail it with their inputs too.
fn fuzz<G, T>(name: &str, test: &str, n: usize, make: impl Fn() -> (G, T))
where
    G: FnMut(&mut Rng) -> Vec<u8> + Send + 'static,
    T: Fn(&[u8]) + Send + 'static,
{
    let seed = seed();
    if std::env::var("FUZZ_PARSER_CHILD").as_deref() == Ok(name) {
        let (mut generate, target) = make();
        let name_s = name.to_string();
        let worker = std::thread::Builder::new()
            .name(format!("fuzz-{name}"))
            .stack_size(8 << 20)
            .spawn(move || {
                let mut r = Rng(seed | 1);
                let mut failures = Vec::new();
                let mut err = std::io::stderr();
                for i in 0..n {
                    let input = generate(&mut r);
                    let _ = err.write_all(format!("@{i}\n").as_bytes());
                    let t = Instant::now();
                    let res =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&input)));
                    let took = t.elapsed();
                    let why = match res {
                        Err(e) => e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .map(|t| format!("panicked: {t}")),
                        Ok(()) => (took > SLOW).then(|| format!("took {took:?}")),
                    };
                    if let Some(why) = why {
                        failures.push(format!(
                            "{name_s} exec {i}: {why}\n  input: {}",
                            show(&input)
                        ));
                    }
                }
                failures
            })
            .unwrap();
        let failures = worker.join().expect("fuzz worker");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        return;
    }
    let t0 = Instant::now();
    let me = std::env::current_exe().unwrap();
    let child = std::process::Command::new(me)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("FUZZ_PARSER_CHILD", name)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the fuzz child");
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let deadline = Duration::from_secs(60) + Duration::from_millis(20) * n as u32;
    let (out, hung) = match rx.recv_timeout(deadline) {
        Ok(out) => (out.expect("wait for the fuzz child"), false),
        Err(_) => {
            // SAFETY: kill(2) has no memory preconditions; `pid` is the child the waiter has
            // not reaped (it has not answered), so it names no other process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            (rx.recv().unwrap().expect("wait for the fuzz child"), true)
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix('@')?.parse::<usize>().ok());
    let input_of = |i: usize| {
        let (mut generate, _) = make();
        let mut r = Rng(seed | 1);
        let mut input = Vec::new();
        for _ in 0..=i {
            input = generate(&mut r);
        }
        show(&input)
    };
    use std::os::unix::process::ExitStatusExt;
    let report: Vec<&str> = stderr.lines().filter(|l| !l.starts_with('@')).collect();
    let problem = if hung {
        Some(format!("hangs at exec {last:?}"))
    } else if let Some(sig) = out.status.signal() {
        Some(format!("killed by signal {sig} at exec {last:?}"))
    } else if !out.status.success() {
        Some(format!("failed:\n{}", report.join("\n")))
    } else {
        None
    };
    let _ = std::io::stderr().write_all(
        format!(
            "fuzz {name}: {} executions, seed {seed}, {}, {:.1} s\n",
            last.map_or(0, |i| i + 1),
            problem.as_deref().map_or("0 failures", |_| "FAILED"),
            t0.elapsed().as_secs_f64()
        )
        .as_bytes(),
    );
    if let Some(p) = problem {
        let input = match (hung || out.status.signal().is_some(), last) {
            (true, Some(i)) => format!("\n  input: {}", input_of(i)),
            _ => String::new(),
        };
        panic!("{name} (FUZZ_SEED={seed}): {p}{input}");
    }
    assert_eq!(
        last,
        n.checked_sub(1),
        "{name}: the child did not run every execution"
    );
}

/// An input as shown in a failure: its length and its first 300 bytes.
fn show(input: &[u8]) -> String {
    format!(
        "({} bytes) {:?}",
        input.len(),
        String::from_utf8_lossy(&input[..input.len().min(300)])
    )
}

#[test]
fn dhcp_packet_parser() {
    fuzz("dhcp-packet", "dhcp_packet_parser", execs(), || {
        let mut seeds = seed_files("dhcp");
        seeds.extend(cnibox::applets::fuzz::dhcp_seeds());
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::applets::fuzz::dhcp_packet(b));
            },
        )
    });
}

/// Go net/rpc gob streams (the dhcp plugin's calls and the daemon's answers, upstream's
/// captured and cnibox's own), as both sides decode them.
#[test]
fn gob_stream_decoder() {
    fuzz("gob", "gob_stream_decoder", execs(), || {
        let mut seeds = seed_files("gob");
        seeds.extend(cnibox::applets::fuzz::gob_seeds());
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::applets::fuzz::gob_stream(b));
            },
        )
    });
}

/// Well-formed rtnetlink replies: a link (name, MTU, MAC, alias, link info of a veth with a
/// nested peer), an address, a route with multipath, a rule, a tbf qdisc and an NLMSG_ERROR with
/// extended-ack text.
fn netlink_seeds() -> Vec<Vec<u8>> {
    fn attr(ty: u16, data: &[u8]) -> Vec<u8> {
        let mut v = ((4 + data.len()) as u16).to_ne_bytes().to_vec();
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(data);
        while !v.len().is_multiple_of(4) {
            v.push(0);
        }
        v
    }
    fn msg(ty: u16, flags: u16, fixed: &[u8], attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut body = fixed.to_vec();
        for a in attrs {
            body.extend_from_slice(a);
        }
        let mut m = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&body);
        m
    }
    let ifinfo = [
        &[0u8, 0, 1, 0][..],
        &5i32.to_ne_bytes(),
        &0u32.to_ne_bytes(),
        &0u32.to_ne_bytes(),
    ]
    .concat();
    let veth_peer = attr(1, &[ifinfo.clone(), attr(3, b"peer0\0")].concat());
    let link = msg(
        16,
        2,
        &ifinfo,
        &[
            attr(3, b"eth0\0"),
            attr(4, &1500u32.to_ne_bytes()),
            attr(1, &[2, 0, 0, 0, 0, 1]),
            attr(20, b"injected0\0"),
            attr(5, &3u32.to_ne_bytes()),
            attr(
                0x8000 | 18,
                &[attr(1, b"veth\0"), attr(0x8000 | 2, &veth_peer)].concat(),
            ),
            attr(0x8000 | 26, &attr(2, &[attr(2, &[0u8; 8])].concat())),
        ],
    );
    let addr = msg(
        20,
        2,
        &[2, 24, 0, 0, 5, 0, 0, 0],
        &[
            attr(2, &[10, 0, 0, 2]),
            attr(1, &[10, 0, 0, 2]),
            attr(8, &0x80u32.to_ne_bytes()),
        ],
    );
    let addr6 = msg(20, 2, &[10, 64, 0, 0, 5, 0, 0, 0], &[attr(1, &[0xfd; 16])]);
    let route = msg(
        24,
        2,
        &[2, 24, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0],
        &[
            attr(1, &[10, 0, 0, 0]),
            attr(5, &[10, 0, 0, 1]),
            attr(4, &5u32.to_ne_bytes()),
            attr(15, &254u32.to_ne_bytes()),
            attr(6, &100u32.to_ne_bytes()),
            attr(
                9,
                &[
                    8u16.to_ne_bytes().to_vec(),
                    vec![0, 0],
                    5u32.to_ne_bytes().to_vec(),
                    attr(5, &[10, 0, 0, 9]),
                ]
                .concat(),
            ),
        ],
    );
    let rule = msg(
        32,
        2,
        &[2, 0, 32, 0, 0, 0, 0, 1, 0, 0, 0, 0],
        &[
            attr(2, &[10, 0, 0, 2]),
            attr(15, &777u32.to_ne_bytes()),
            attr(6, &100u32.to_ne_bytes()),
        ],
    );
    let tcmsg = [
        &[0u8, 0, 0, 0][..],
        &5i32.to_ne_bytes(),
        &0x0001_0000u32.to_ne_bytes(),
        &u32::MAX.to_ne_bytes(),
        &0u32.to_ne_bytes(),
    ]
    .concat();
    let qdisc = msg(
        36,
        2,
        &tcmsg,
        &[
            attr(1, b"tbf\0"),
            attr(
                0x8000 | 2,
                &[attr(1, &[0u8; 36]), attr(6, &1_000_000u64.to_ne_bytes())].concat(),
            ),
        ],
    );
    let mut err_body = (-17i32).to_ne_bytes().to_vec();
    err_body.extend_from_slice(&[0u8; 16]);
    err_body.extend_from_slice(&attr(1, b"File exists, says the kernel\0"));
    let error = msg(2, 0x100 | 0x200, &err_body, &[]);
    let done = msg(3, 2, &0u32.to_ne_bytes(), &[]);
    vec![
        link.clone(),
        addr.clone(),
        addr6,
        route.clone(),
        rule,
        qdisc,
        error,
        [link, addr, route, done].concat(),
    ]
}

#[test]
fn netlink_reply_readers() {
    fuzz("netlink-reply", "netlink_reply_readers", execs(), || {
        let mut seeds = seed_files("netlink");
        seeds.extend(netlink_seeds());
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::netlink::fuzz::reply(b));
            },
        )
    });
}

/// D-Bus messages as the firewall applet's client reads them (the bus's and firewalld's replies,
/// errors and signals, captured: tests/fuzz/dbus-split.py), framed by their own header.
#[test]
fn dbus_reply_reader() {
    fuzz("dbus-reply", "dbus_reply_reader", execs(), || {
        let mut seeds = seed_files("dbus");
        seeds.extend(cnibox::dbus::fuzz::seeds());
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::dbus::fuzz::reply(b));
            },
        )
    });
}

/// nf_tables chain and rule dumps as the netfilter client reads them (captured from a kernel:
/// tests/fuzz/nftables-capture.py over tests/fuzz/nftables-ruleset.nft).
#[test]
fn nftables_dump_reader() {
    fuzz("nftables-dump", "nftables_dump_reader", execs(), || {
        let seeds = seed_files("nftables");
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::netlink::fuzz::nft_dump(b));
            },
        )
    });
}

/// libcni result-cache files as `cnibox doctor` and a runtime's DEL read them.
#[test]
fn libcni_cache_reader() {
    fuzz("cache", "libcni_cache_reader", execs(), || {
        let seeds = seed_files("cache");
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::applets::fuzz::cache_record(b));
            },
        )
    });
}

/// Network configurations (lists, single plugins, prevResults) as the loader and the Go-style
/// decoder read them.
#[test]
fn config_loader() {
    fuzz("config", "config_loader", execs(), || {
        let seeds = seed_files("config");
        (
            move |r: &mut Rng| mutate(r, &seeds),
            |b: &[u8]| {
                std::hint::black_box(cnibox::applets::fuzz::config(b));
            },
        )
    });
}

/// The byte-input targets of the coverage-guided fuzzers (fuzz/, `make fuzz-long`): the
/// directory of their seeds and crash inputs under tests/fuzz/, and the library entry point.
/// A library fuzz entry point over bytes.
type Entry = fn(&[u8]) -> usize;

const CORPORA: [(&str, Entry); 7] = [
    ("dhcp", cnibox::applets::fuzz::dhcp_packet),
    ("gob", cnibox::applets::fuzz::gob_stream),
    ("netlink", cnibox::netlink::fuzz::reply),
    ("dbus", cnibox::dbus::fuzz::reply),
    ("nftables", cnibox::netlink::fuzz::nft_dump),
    ("cache", cnibox::applets::fuzz::cache_record),
    ("config", cnibox::applets::fuzz::config),
];

/// Every file under tests/fuzz/<target>/ — the seeds, and every crash or timeout input
/// `make fuzz-long` found (kept there as `crash-*` / `timeout-*`) — run unmutated through its
/// target: no panic, none slower than `SLOW`.
#[test]
fn corpus_replay() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (target, entry) in CORPORA {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz")
            .join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus in {}", dir.display());
        for file in files {
            let input = std::fs::read(&file).unwrap();
            let t = Instant::now();
            let res = std::panic::catch_unwind(|| std::hint::black_box(entry(&input)));
            let took = t.elapsed();
            count += 1;
            if res.is_err() {
                failures.push(format!("{}: panicked", file.display()));
            } else if took > SLOW {
                failures.push(format!("{}: took {took:?}", file.display()));
            }
        }
    }
    let _ = std::io::stderr().write_all(format!("corpus replay: {count} files\n").as_bytes());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A scratch directory for the file-reading targets, removed at the end.
struct Scratch(PathBuf);
impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("cnibox-fuzzp-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Allowlist files: mutated seed lists, pattern fragments stitched together, deep nesting and
/// long repetitions; each load matched against mutated sysctl keys, some of them as long as
/// tuning lets a key be.
#[test]
fn tuning_allowlist_matcher() {
    let seeds = seed_files("allowlist");
    let scratch = Scratch::new("allow");
    let path = scratch.0.join("allowlist.conf");
    let path_s = path.display().to_string();
    let keys_base = [
        "net.ipv4.conf.eth0.rp_filter",
        "net.ipv6.conf.net1.accept_ra",
        "net.core.somaxconn",
        "net.ipv4.ip_forward",
        "kernel.panic",
    ];
    const FRAGMENTS: &[&str] = &[
        "^",
        "$",
        ".",
        ".*",
        ".+",
        "\\.",
        "\\d",
        "\\w+",
        "[a-z]",
        "[^.]",
        "(a|b)",
        "(?:x)",
        "{2}",
        "{1,3}",
        "{2,}",
        "*",
        "+",
        "?",
        "(",
        ")",
        "[",
        "]",
        "\\",
        "|",
        "net",
        "ipv4",
        "conf",
        "(?i)",
        "\\x41",
        "[[:alpha:]]",
        "\\p{L}",
        "(a*)*",
        "(a+)+b",
        "{99999}",
        "{1,99999}",
    ];
    fuzz(
        "tuning-allowlist",
        "tuning_allowlist_matcher",
        execs(),
        || {
            let seeds = seeds.clone();
            let path = path.clone();
            let path_s = path_s.clone();
            (
                move |r: &mut Rng| {
                    let text: Vec<u8> = match r.below(4) {
                        0 => mutate(r, &seeds),
                        1 => {
                            let mut line = String::new();
                            for _ in 0..1 + r.below(12) {
                                let f: &&str = r.pick(FRAGMENTS);
                                line.push_str(f);
                            }
                            line.into_bytes()
                        }
                        2 => {
                            let most = if r.below(10) == 0 { 20_000 } else { 200 };
                            let d = 1 + r.below(most);
                            let open = *r.pick(&["(", "(?:", "(a|"]);
                            format!("{}a{}", open.repeat(d), ")".repeat(d)).into_bytes()
                        }
                        _ => format!("^net\\.{}$\n", ".*".repeat(1 + r.below(50))).into_bytes(),
                    };
                    // The input is the file, then NUL, then the keys (so a failure shows both).
                    let mut input = text;
                    input.push(0);
                    for _ in 0..1 + r.below(3) {
                        let mut k = r.pick(&keys_base).to_string();
                        match r.below(5) {
                            // Up to the longest key tuning lets through to the matcher (a
                            // sysctl path is at most 4096 bytes; longer keys are refused at
                            // load, which tests/badinput.rs checks through the binary).
                            0 => {
                                let n = if r.below(4) == 0 { 4000 } else { 300 };
                                k.push_str(&"a".repeat(n));
                            }
                            1 => k = k.replace('.', "/"),
                            2 => k.insert(r.below(k.len() + 1), '\u{e9}'),
                            _ => {}
                        }
                        input.extend_from_slice(k.as_bytes());
                        input.push(0);
                    }
                    input
                },
                move |input: &[u8]| {
                    let mut parts = input.split(|&b| b == 0);
                    let file = parts.next().unwrap_or_default();
                    std::fs::write(&path, file).unwrap();
                    let keys: Vec<String> = parts
                        .filter(|k| !k.is_empty())
                        .map(|k| String::from_utf8_lossy(k).into_owned())
                        .collect();
                    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                    let _ = std::hint::black_box(cnibox::applets::fuzz::allowlist(&path_s, &keys));
                },
            )
        },
    );
}

/// subnet.env files: mutated seeds (non-UTF-8 bytes, CRLF, missing and repeated keys, long
/// values) read the way flannel reads them.
#[test]
fn flannel_subnet_env_reader() {
    let seeds = seed_files("subnet-env");
    let scratch = Scratch::new("subnet");
    let path = scratch.0.join("subnet.env");
    let path_s = path.display().to_string();
    fuzz(
        "flannel-subnet-env",
        "flannel_subnet_env_reader",
        execs(),
        || {
            let seeds = seeds.clone();
            let path = path.clone();
            let path_s = path_s.clone();
            (
                move |r: &mut Rng| {
                    let mut b = mutate(r, &seeds);
                    if r.below(8) == 0 {
                        let at = r.below(b.len() + 1);
                        let long = vec![b'9'; 1 + r.below(100_000)];
                        b.splice(at..at, long);
                    }
                    b
                },
                move |input: &[u8]| {
                    std::fs::write(&path, input).unwrap();
                    let _ = std::hint::black_box(cnibox::applets::fuzz::subnet_env(&path_s));
                },
            )
        },
    );
}
