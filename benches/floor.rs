//! The kernel floor of a CNI operation: the same system calls cnibox makes for it — every
//! netlink request byte for byte, every file and /proc/sys operation, namespace switch and tap
//! ioctl — replayed from one already-running process. No exec, no dynamic start-up, no JSON, no
//! result, no decisions: what is left is the kernel's work for those requests plus a few µs of
//! replay. `benches/compare.sh` records a cnibox sample with strace, turns it into a script
//! (`benches/floor-record.py`) and interleaves floor samples with cnibox's and the reference's.
//!
//! Protocol on stdin (one command a line, one answer a line on stdout):
//! - `load NAME SCRIPT`: read a replay script;
//! - `spawn N PATH`: run PATH N times with CNI_COMMAND=VERSION (the process cost alone);
//!   answers the mean ns per run;
//! - `run NAME NODE_NETNS CONTAINER_NETNS`: replay its ADD then its DEL, each plugin run
//!   starting in NODE_NETNS (as a plugin process would), the recording's container namespace
//!   replaced by CONTAINER_NETNS; answers `ADD_NS DEL_NS DIVERGENCES`.
//!
//! What a recording cannot hold verbatim is mapped while replaying: file descriptors (recorded
//! number → this process's), interface indexes and nf_tables handles (learned by pairing each
//! recorded reply with the live reply to the same request, then patched into later requests:
//! ifinfomsg/ifaddrmsg/ndmsg/tcmsg indexes, IFLA_MASTER/IFLA_LINK, RTA_OIF/RTA_IIF, the
//! veth peer, tc mirred's target, IFLA_NET_NS_FD, rule/chain/table/set handles and rule
//! positions). A live reply that differs from the recorded one in message count, type or
//! error code is a divergence: the answer counts them (0 expected; FLOOR_VERBOSE=1 prints them).
//! Each plugin run ends by closing what its process still held, as exit would (closing a
//! netfilter socket can wait for the kernel's deferred destruction of deleted objects).
//! A thread a plugin starts (bridge DEL deletes the veth on one while it removes the
//! masquerading) is replayed on a thread of its own, concurrently, from where it was started
//! to where it exited in the recording, sharing the replay's descriptors. Descriptors a plugin
//! hands over a unix socket (SCM_RIGHTS: cnibox lets the kernel close nf_tables sockets in the
//! background that way) are handed over the same way. A recording of the reference (Go)
//! plugins (`floor-record.py --go`) is one stream per plugin run with `netns N|C` switches
//! where a recorded Go thread in the other namespace made the next call; the replayer holds
//! the node's and the container's namespace open for them.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{BufRead, Write};
use std::time::Instant;

type Pid = u32;

#[derive(Clone)]
enum Path {
    Container,
    Lit(CString),
}

enum Op {
    Exit(Pid),
    Thread(Pid),
    Socket(Pid, i32, i32, i32, i32),
    SocketPair(Pid, [i32; 2], i32, i32),
    SendFds(Pid, i32, Vec<u8>, Vec<i32>),
    Bind(Pid, i32, u32),
    Connect(Pid, i32),
    GetSockName(Pid, i32),
    SetSockOpt(Pid, i32, i32, i32, Vec<u8>),
    Send(Pid, i32, i32, Vec<u8>),
    Recv(Pid, i32, i32, Option<Vec<u8>>),
    /// The receives of a wait for a link's deletion on a socket in RTNLGRP_LINK (cnibox's
    /// `request_until`): which notifications come before the RTM_DELLINK varies run to run,
    /// so live datagrams are read until one holds an RTM_DELLINK (or an error reply).
    RecvUntilDellink(Pid, i32, i32),
    Open(Pid, i32, i32, u32, Path),
    Read(Pid, i32, usize),
    Pread(Pid, i32, usize, i64),
    Write(Pid, i32, Vec<u8>),
    Pwrite(Pid, i32, i64, Vec<u8>),
    Close(Pid, i32),
    OnPath(&'static str, Path),
    Mkdir(Path, u32),
    TwoPath(&'static str, Path, Path),
    OnFd(&'static str, Pid, i32),
    Utimens(Pid, i32, Option<Path>, [i64; 4]),
    Flock(Pid, i32, i32),
    Setns(Pid, i32, i32),
    Unshare(i32),
    /// `netns N|C` (a recording of the Go plugins): on to the node's or the container's
    /// namespace, where the next recorded call was made (floor-record.py --go).
    Netns(bool),
    /// TUNSETIFF with these flags, and the name asked for (empty: the kernel picks tap%d).
    TunSetIff(Pid, i32, i16, Vec<u8>),
    IoctlInt(Pid, i32, u64, u64),
}

struct Seg {
    add: bool,
    timed: bool,
    /// (recorded pid or thread id, op)
    ops: Vec<(Pid, Op)>,
}

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

fn path(s: &str) -> Path {
    if s == "@C" {
        Path::Container
    } else {
        Path::Lit(CString::new(unhex(s)).unwrap_or_default())
    }
}

fn load(file: &str) -> Result<Vec<Seg>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let mut segs: Vec<Seg> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t: Vec<&str> = line.split(' ').collect();
        let bad = || format!("{file}:{}: bad line", n + 1);
        let i = |k: usize| -> Result<i64, String> {
            t.get(k).and_then(|s| s.parse::<i64>().ok()).ok_or_else(bad)
        };
        let s = |k: usize| -> Result<&str, String> { t.get(k).copied().ok_or_else(bad) };
        if t[0] == "seg" {
            segs.push(Seg {
                add: s(1)? == "ADD",
                timed: s(2)? == "1",
                ops: Vec::new(),
            });
            continue;
        }
        let pid = i(1)? as Pid;
        let fd = || i(2).map(|v| v as i32);
        let op = match t[0] {
            "exit" => Op::Exit(pid),
            "thread" => Op::Thread(i(2)? as Pid),
            "socket" => Op::Socket(pid, fd()?, i(3)? as i32, i(4)? as i32, i(5)? as i32),
            "socketpair" => Op::SocketPair(pid, [fd()?, i(3)? as i32], i(4)? as i32, i(5)? as i32),
            "sendfds" => Op::SendFds(
                pid,
                fd()?,
                unhex(s(3)?),
                t[4..]
                    .iter()
                    .map(|v| v.parse().map_err(|_| bad()))
                    .collect::<Result<_, _>>()?,
            ),
            "bind" => Op::Bind(pid, fd()?, i(3)? as u32),
            "connect" => Op::Connect(pid, fd()?),
            "getsockname" => Op::GetSockName(pid, fd()?),
            "setsockopt" => Op::SetSockOpt(pid, fd()?, i(3)? as i32, i(4)? as i32, unhex(s(5)?)),
            "send" => Op::Send(pid, fd()?, i(3)? as i32, unhex(s(4)?)),
            "recv" => Op::Recv(
                pid,
                fd()?,
                i(3)? as i32,
                Some(s(4)?).filter(|h| *h != "-").map(unhex),
            ),
            "open" => Op::Open(pid, fd()?, i(3)? as i32, i(4)? as u32, path(s(5)?)),
            "read" => Op::Read(pid, fd()?, i(3)? as usize),
            "pread" => Op::Pread(pid, fd()?, i(3)? as usize, i(4)?),
            "write" => Op::Write(pid, fd()?, unhex(s(3)?)),
            "pwrite" => Op::Pwrite(pid, fd()?, i(3)?, unhex(s(4)?)),
            "close" => Op::Close(pid, fd()?),
            "stat" => Op::OnPath("stat", path(s(2)?)),
            "lstat" => Op::OnPath("lstat", path(s(2)?)),
            "statfs" => Op::OnPath("statfs", path(s(2)?)),
            "access" => Op::OnPath("access", path(s(2)?)),
            "rmdir" => Op::OnPath("rmdir", path(s(2)?)),
            "unlink" => Op::OnPath("unlink", path(s(2)?)),
            "readlink" => Op::OnPath("readlink", path(s(2)?)),
            "mkdir" => Op::Mkdir(path(s(2)?), i(3)? as u32),
            "rename" => Op::TwoPath("rename", path(s(2)?), path(s(3)?)),
            "link" => Op::TwoPath("link", path(s(2)?), path(s(3)?)),
            "symlink" => Op::TwoPath("symlink", path(s(2)?), path(s(3)?)),
            "fstat" => Op::OnFd("fstat", pid, fd()?),
            "fstatfs" => Op::OnFd("fstatfs", pid, fd()?),
            "fsync" => Op::OnFd("fsync", pid, fd()?),
            "fdatasync" => Op::OnFd("fdatasync", pid, fd()?),
            "getdents64" => Op::OnFd("getdents64", pid, fd()?),
            "utimens" => Op::Utimens(
                pid,
                fd()?,
                Some(s(3)?).filter(|p| *p != "-").map(path),
                [i(4)?, i(5)?, i(6)?, i(7)?],
            ),
            "flock" => Op::Flock(pid, fd()?, i(3)? as i32),
            "setns" => Op::Setns(pid, fd()?, i(3)? as i32),
            "unshare" => Op::Unshare(i(2)? as i32),
            "netns" => Op::Netns(s(2)? == "C"),
            "tunsetiff" => Op::TunSetIff(
                pid,
                fd()?,
                i(3)? as i16,
                t.get(4).map_or(Vec::new(), |h| unhex(h)),
            ),
            "ioctlint" => Op::IoctlInt(pid, fd()?, i(3)? as u64, i(4)? as u64),
            _ => return Err(format!("{file}:{}: unknown op {}", n + 1, t[0])),
        };
        segs.last_mut().ok_or_else(bad)?.ops.push((pid, op));
    }
    for seg in &mut segs {
        seg.ops = dellink_waits(std::mem::take(&mut seg.ops));
    }
    Ok(segs)
}

const RTM_DELLINK: u16 = 17;

/// Replace each run of receives on a socket that joined a netlink group and whose last
/// datagram holds an RTM_DELLINK by one [`Op::RecvUntilDellink`] (other processes' and
/// threads' ops in between stay where they are).
fn dellink_waits(ops: Vec<(Pid, Op)>) -> Vec<(Pid, Op)> {
    let mut joined = std::collections::HashSet::new();
    let mut skip = vec![false; ops.len()];
    let mut until = vec![false; ops.len()];
    for (k, (pid, op)) in ops.iter().enumerate() {
        match op {
            Op::SetSockOpt(_, fd, 270, 1, _) => {
                joined.insert((*pid, *fd));
            }
            Op::Bind(_, fd, groups) if *groups != 0 => {
                joined.insert((*pid, *fd));
            }
            Op::Close(_, fd) => {
                joined.remove(&(*pid, *fd));
            }
            Op::Recv(_, fd, _, _) if joined.contains(&(*pid, *fd)) && !skip[k] => {
                // The run: this receive and the next ones of the same process on the same
                // socket, up to its next other op.
                let mut run = vec![k];
                for (j, (p, o)) in ops.iter().enumerate().skip(k + 1) {
                    if p != pid {
                        continue;
                    }
                    match o {
                        Op::Recv(_, f, _, _) if f == fd => run.push(j),
                        _ => break,
                    }
                }
                let last = run.last().copied().unwrap_or(k);
                let ends_in_dellink = matches!(&ops[last].1, Op::Recv(_, _, _, Some(b))
                    if messages(b).iter().any(|m| m.0 == RTM_DELLINK));
                if ends_in_dellink {
                    until[k] = true;
                    for j in run.into_iter().skip(1) {
                        skip[j] = true;
                    }
                }
            }
            _ => {}
        }
    }
    ops.into_iter()
        .enumerate()
        .filter(|(k, _)| !skip[*k])
        .map(|(k, (pid, op))| match op {
            Op::Recv(p, fd, flags, _) if until[k] => (pid, Op::RecvUntilDellink(p, fd, flags)),
            other => (pid, other),
        })
        .collect()
}

/// Netlink attributes of `b[start..end]`: (type without flags, payload start, payload end).
fn attrs(b: &[u8], start: usize, end: usize) -> Vec<(u16, usize, usize)> {
    let mut out = Vec::new();
    let mut p = start;
    while p + 4 <= end {
        let len = u16::from_ne_bytes([b[p], b[p + 1]]) as usize;
        let ty = u16::from_ne_bytes([b[p + 2], b[p + 3]]) & 0x3fff;
        if len < 4 || p + len > end {
            break;
        }
        out.push((ty, p + 4, p + len));
        p += (len + 3) & !3;
    }
    out
}

/// Netlink messages of a datagram: (type, start, end).
fn messages(b: &[u8]) -> Vec<(u16, usize, usize)> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 16 <= b.len() {
        let len = u32::from_ne_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]]) as usize;
        if len < 16 || p + len > b.len() {
            break;
        }
        out.push((u16::from_ne_bytes([b[p + 4], b[p + 5]]), p, p + len));
        p += (len + 3) & !3;
    }
    out
}

fn u32_at(b: &[u8], p: usize) -> u32 {
    u32::from_ne_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]])
}

fn be64_at(b: &[u8], p: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[p..p + 8]);
    u64::from_be_bytes(a)
}

/// The nf_tables object a message describes: (kind, family, table, handle attribute type).
fn nft_kind(b: &[u8], start: usize, end: usize, ty: u16) -> Option<(u8, u8, Vec<u8>, u16)> {
    if ty >> 8 != 10 || end < start + 20 {
        return None;
    }
    let (kind, handle_attr) = match ty & 0xff {
        0..=2 => (b't', 4),
        3..=5 => (b'c', 2),
        6..=8 => (b'r', 3),
        9..=11 => (b's', 16),
        _ => return None,
    };
    let table = attrs(b, start + 20, end)
        .into_iter()
        .find(|a| a.0 == 1)
        .map(|(_, s, e)| b[s..e].to_vec())
        .unwrap_or_default();
    Some((kind, b[start + 16], table, handle_attr))
}

#[derive(Default, Clone)]
struct Run {
    cpath: Option<CString>,
    fds: HashMap<(Pid, i32), i32>,
    label: HashMap<i32, u32>,
    proto: HashMap<i32, i32>,
    cur: u32,
    next_label: u32,
    ifmap: HashMap<(u32, u32), u32>,
    nft: HashMap<(u32, u8, u8, Vec<u8>, u64), u64>,
    divergences: u32,
    verbose: bool,
    buf: Vec<u8>,
    /// The node's and the container's namespace, held open for `netns`.
    nsfds: [i32; 2],
}

impl Run {
    fn fd(&self, pid: Pid, fd: i32) -> i32 {
        *self.fds.get(&(pid, fd)).unwrap_or(&-1)
    }

    fn cpath(&self, p: &Path) -> CString {
        match p {
            Path::Container => self.cpath.clone().unwrap_or_default(),
            Path::Lit(c) => c.clone(),
        }
    }

    fn diverge(&mut self, what: &str) {
        self.divergences += 1;
        if self.verbose {
            eprintln!("floor: divergence: {what}");
        }
    }

    fn adopt(&mut self, pid: Pid, rec: i32, live: i32) {
        if rec >= 0 && live >= 0 {
            self.fds.insert((pid, rec), live);
        } else if (rec >= 0) != (live >= 0) {
            self.diverge(&format!("open/socket returned {live}, recorded {rec}"));
        }
    }

    fn close_fd(&mut self, pid: Pid, rec: i32) {
        if let Some(live) = self.fds.remove(&(pid, rec)) {
            // SAFETY: `live` is a descriptor the replayer opened and owns (taken off its table
            // here, so closed once).
            unsafe { libc::close(live) };
            self.label.remove(&live);
            self.proto.remove(&live);
        }
    }

    fn patch_if(&self, lbl: u32, b: &mut [u8], p: usize) {
        let rec = u32_at(b, p);
        if rec != 0
            && let Some(live) = self.ifmap.get(&(lbl, rec))
        {
            b[p..p + 4].copy_from_slice(&live.to_ne_bytes());
        }
    }

    fn patch_link_attrs(&self, pid: Pid, lbl: u32, b: &mut [u8], start: usize, end: usize) {
        for (ty, s, e) in attrs(b, start, end) {
            match ty {
                5 | 10 if e - s >= 4 => self.patch_if(lbl, b, s),
                28 if e - s >= 4 => {
                    let live = self.fd(pid, u32_at(b, s) as i32);
                    if live >= 0 {
                        b[s..s + 4].copy_from_slice(&(live as u32).to_ne_bytes());
                    }
                }
                18 => {
                    let info = attrs(b, s, e);
                    let veth = info
                        .iter()
                        // Go writes the kind without its NUL, cnibox with it.
                        .any(|a| a.0 == 1 && matches!(&b[a.1..a.2], b"veth" | b"veth\0"));
                    for (ity, is, ie) in info {
                        if ity == 2 && veth {
                            for (pty, ps, pe) in attrs(b, is, ie) {
                                if pty == 1 && pe - ps >= 16 {
                                    self.patch_link_attrs(pid, lbl, b, ps + 16, pe);
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Map what the recording cannot hold verbatim in one outgoing datagram.
    fn patch(&self, pid: Pid, lbl: u32, proto: i32, b: &mut [u8]) {
        for (ty, start, end) in messages(b) {
            let body = start + 16;
            if proto == libc::NETLINK_ROUTE {
                match ty {
                    16..=19 if end >= body + 16 => {
                        self.patch_if(lbl, b, body + 4);
                        self.patch_link_attrs(pid, lbl, b, body + 16, end);
                    }
                    20..=22 | 28..=30 | 36..=46 | 100..=102 if end >= body + 8 => {
                        self.patch_if(lbl, b, body + 4);
                        if (36..=46).contains(&ty) || ty >= 100 {
                            self.patch_mirred(lbl, b, body, end);
                        }
                    }
                    24..=26 if end >= body + 12 => {
                        for (aty, s, e) in attrs(b, body + 12, end) {
                            if (aty == 3 || aty == 4) && e - s >= 4 {
                                self.patch_if(lbl, b, s);
                            }
                        }
                    }
                    _ => {}
                }
            } else if proto == libc::NETLINK_NETFILTER
                && let Some((kind, fam, table, hattr)) = nft_kind(b, start, end, ty)
            {
                for (aty, s, e) in attrs(b, body + 4, end) {
                    let hit = aty == hattr || (kind == b'r' && aty == 6);
                    let key = (
                        lbl,
                        kind,
                        fam,
                        table.clone(),
                        be64_at(b, s.min(e.saturating_sub(8))),
                    );
                    if hit
                        && e - s == 8
                        && let Some(live) = self.nft.get(&key)
                    {
                        b[s..s + 8].copy_from_slice(&live.to_be_bytes());
                    }
                }
            }
        }
    }

    /// tc's mirred action names its target by index: `kind "mirred"` then its options.
    fn patch_mirred(&self, lbl: u32, b: &mut [u8], start: usize, end: usize) {
        const KIND: &[u8] = b"\x0b\x00\x01\x00mirred\x00";
        let mut p = start;
        while p + KIND.len() + 4 <= end {
            if &b[p..p + KIND.len()] == KIND {
                let o = p + 12;
                let olen = u16::from_ne_bytes([b[o], b[o + 1]]) as usize;
                let oty = u16::from_ne_bytes([b[o + 2], b[o + 3]]) & 0x3fff;
                if oty == 2 && o + olen <= end {
                    for (ty, s, e) in attrs(b, o + 4, o + olen) {
                        if ty == 2 && e - s >= 28 {
                            self.patch_if(lbl, b, s + 24);
                        }
                    }
                }
            }
            p += 4;
        }
    }

    /// Pair a recorded reply with the live one: learn indexes and handles, count divergences.
    fn learn(&mut self, lbl: u32, proto: i32, rec: &[u8], live: &[u8]) {
        let (rm, lm) = (messages(rec), messages(live));
        if rm.len() != lm.len() {
            self.diverge(&format!(
                "{} reply messages, recorded {}",
                lm.len(),
                rm.len()
            ));
        }
        for (&(rty, rs, re), &(lty, ls, le)) in rm.iter().zip(lm.iter()) {
            if rty != lty {
                self.diverge(&format!("reply type {lty}, recorded {rty}"));
                continue;
            }
            if rty == 2 && re >= rs + 20 && le >= ls + 20 {
                let (r, l) = (u32_at(rec, rs + 16) as i32, u32_at(live, ls + 16) as i32);
                if r != l {
                    self.diverge(&format!("error {l}, recorded {r}"));
                }
                continue;
            }
            let (rb, lb) = (rs + 16, ls + 16);
            if proto == libc::NETLINK_ROUTE {
                let idx = match rty {
                    16 | 20 | 28 | 36 | 40 | 44 => Some(4),
                    _ => None,
                };
                if let Some(off) = idx
                    && re >= rb + off + 4
                    && le >= lb + off + 4
                {
                    self.ifmap
                        .insert((lbl, u32_at(rec, rb + off)), u32_at(live, lb + off));
                }
            } else if proto == libc::NETLINK_NETFILTER
                && let (Some((k, f, t, h)), Some((_, _, lt, _))) =
                    (nft_kind(rec, rs, re, rty), nft_kind(live, ls, le, lty))
                && t == lt
            {
                let find = |b: &[u8], s: usize, e: usize| {
                    attrs(b, s + 20, e)
                        .into_iter()
                        .find(|a| a.0 == h && a.2 - a.1 == 8)
                        .map(|a| be64_at(b, a.1))
                };
                if let (Some(r), Some(l)) = (find(rec, rs, re), find(live, ls, le)) {
                    self.nft.insert((lbl, k, f, t, r), l);
                }
            }
        }
    }

    /// One plugin run. A thread the plugin started (`thread TID`, recorded at its clone) is
    /// replayed on a thread of its own, concurrently, from that point: it shares the process's
    /// descriptors and what was learned so far, and is joined where it exited in the recording
    /// (its `exit`), after which what it closed, opened and learned is the process's again.
    /// A thread without an `exit` is a child process the plugin forked and does not wait for
    /// (cnibox's DEL leaves a link deletion's RCU barrier to one, see
    /// `NlSocket::request_until`): it is joined after the returned instant, the end of the
    /// plugin's own run, which is where the caller stops timing; its descriptors stay its own.
    fn segment(&mut self, ops: &[(Pid, Op)]) -> Instant {
        let mut end = None;
        std::thread::scope(|sc| {
            let mut workers = HashMap::new();
            for (k, (pid, op)) in ops.iter().enumerate() {
                if let Op::Thread(tid) = op {
                    let tid = *tid;
                    let mine: Vec<&Op> = ops[k + 1..]
                        .iter()
                        .filter(|(p, o)| *p == tid && !matches!(o, Op::Exit(_)))
                        .map(|(_, o)| o)
                        .collect();
                    let mut w = self.clone();
                    w.divergences = 0;
                    let shared: Vec<(i32, i32)> = self
                        .fds
                        .iter()
                        .filter(|(key, _)| key.0 == *pid)
                        .map(|(key, live)| (key.1, *live))
                        .collect();
                    for (fd, live) in &shared {
                        w.fds.insert((tid, *fd), *live);
                    }
                    let h = sc.spawn(move || {
                        for o in mine {
                            w.step(o);
                        }
                        w
                    });
                    workers.insert(tid, (h, *pid, shared));
                    continue;
                }
                if let Op::Exit(p) = op
                    && let Some((h, leader, shared)) = workers.remove(p)
                {
                    if let Ok(w) = h.join() {
                        self.merge(w, *p, leader, &shared);
                    }
                    continue;
                }
                if workers.contains_key(pid) {
                    continue;
                }
                self.step(op);
            }
            end = Some(Instant::now());
            for (_, (h, _, _)) in workers.drain() {
                if let Ok(w) = h.join() {
                    self.label.extend(w.label);
                    self.proto.extend(w.proto);
                    self.ifmap.extend(w.ifmap);
                    self.nft.extend(w.nft);
                    self.divergences += w.divergences;
                }
            }
        });
        end.unwrap_or_else(Instant::now)
    }

    /// After joining thread `tid` of `leader`: its descriptors are the leader's (those it
    /// closed are gone), its learned indexes and handles and its divergences count here.
    fn merge(&mut self, w: Run, tid: Pid, leader: Pid, shared: &[(i32, i32)]) {
        for (fd, _) in shared {
            if !w.fds.contains_key(&(tid, *fd)) {
                self.fds.remove(&(leader, *fd));
            }
        }
        for ((p, fd), live) in w.fds {
            if p == tid {
                self.fds.insert((leader, fd), live);
            }
        }
        self.label.extend(w.label);
        self.proto.extend(w.proto);
        self.ifmap.extend(w.ifmap);
        self.nft.extend(w.nft);
        self.divergences += w.divergences;
    }

    fn step(&mut self, op: &Op) {
        // SAFETY: plain system calls on descriptors the replayer owns (its table maps each
        // recorded one to a live one), with buffers and socket addresses that live on this
        // stack frame or in `op` for the duration of each call, sized by their own types.
        unsafe {
            match op {
                Op::Thread(_) => {}
                Op::Exit(pid) => {
                    let mine: Vec<i32> = self
                        .fds
                        .keys()
                        .filter(|k| k.0 == *pid)
                        .map(|k| k.1)
                        .collect();
                    for fd in mine {
                        self.close_fd(*pid, fd);
                    }
                }
                Op::Socket(pid, rec, dom, ty, proto) => {
                    let fd = libc::socket(*dom, *ty, *proto);
                    self.adopt(*pid, *rec, fd);
                    self.label.insert(fd, self.cur);
                    self.proto.insert(fd, *proto);
                }
                Op::SocketPair(pid, rec, dom, ty) => {
                    let mut sv = [-1i32; 2];
                    let r = libc::socketpair(*dom, *ty, 0, sv.as_mut_ptr());
                    for k in 0..2 {
                        self.adopt(*pid, rec[k], if r == 0 { sv[k] } else { -1 });
                    }
                }
                Op::SendFds(pid, fd, data, fds) => {
                    // A unix datagram carrying descriptors (SCM_RIGHTS): cnibox hands nf_tables
                    // sockets to the kernel this way to close them in the background.
                    let live: Vec<i32> = fds.iter().map(|f| self.fd(*pid, *f)).collect();
                    let room = libc::CMSG_SPACE((live.len() * 4) as u32) as usize;
                    let mut ctl = vec![0u8; room];
                    let mut iov = libc::iovec {
                        iov_base: data.as_ptr() as *mut _,
                        iov_len: data.len(),
                    };
                    let mut msg: libc::msghdr = std::mem::zeroed();
                    msg.msg_iov = &mut iov;
                    msg.msg_iovlen = 1;
                    msg.msg_control = ctl.as_mut_ptr().cast();
                    msg.msg_controllen = room as _;
                    let c = libc::CMSG_FIRSTHDR(&msg);
                    (*c).cmsg_level = libc::SOL_SOCKET;
                    (*c).cmsg_type = libc::SCM_RIGHTS;
                    (*c).cmsg_len = libc::CMSG_LEN((live.len() * 4) as u32) as _;
                    std::ptr::copy_nonoverlapping(
                        live.as_ptr().cast::<u8>(),
                        libc::CMSG_DATA(c),
                        live.len() * 4,
                    );
                    if live.contains(&-1) || libc::sendmsg(self.fd(*pid, *fd), &msg, 0) < 0 {
                        self.diverge("sendmsg with descriptors failed");
                    }
                }
                Op::Bind(pid, fd, groups) => {
                    let mut sa: libc::sockaddr_nl = std::mem::zeroed();
                    sa.nl_family = libc::AF_NETLINK as u16;
                    sa.nl_groups = *groups;
                    let sz = std::mem::size_of::<libc::sockaddr_nl>() as u32;
                    libc::bind(
                        self.fd(*pid, *fd),
                        &sa as *const _ as *const libc::sockaddr,
                        sz,
                    );
                }
                Op::Connect(pid, fd) => {
                    let mut sa: libc::sockaddr_nl = std::mem::zeroed();
                    sa.nl_family = libc::AF_NETLINK as u16;
                    let sz = std::mem::size_of::<libc::sockaddr_nl>() as u32;
                    libc::connect(
                        self.fd(*pid, *fd),
                        &sa as *const _ as *const libc::sockaddr,
                        sz,
                    );
                }
                Op::GetSockName(pid, fd) => {
                    let mut sa: libc::sockaddr_nl = std::mem::zeroed();
                    let mut sz = std::mem::size_of::<libc::sockaddr_nl>() as u32;
                    libc::getsockname(
                        self.fd(*pid, *fd),
                        &mut sa as *mut _ as *mut libc::sockaddr,
                        &mut sz,
                    );
                }
                Op::SetSockOpt(pid, fd, level, opt, v) => {
                    libc::setsockopt(
                        self.fd(*pid, *fd),
                        *level,
                        *opt,
                        v.as_ptr().cast(),
                        v.len() as u32,
                    );
                }
                Op::Send(pid, fd, flags, data) => {
                    let live = self.fd(*pid, *fd);
                    if live < 0 {
                        return;
                    }
                    let mut msg = data.clone();
                    let (lbl, proto) = (
                        self.label.get(&live).copied().unwrap_or(0),
                        self.proto.get(&live).copied().unwrap_or(-1),
                    );
                    self.patch(*pid, lbl, proto, &mut msg);
                    if libc::send(live, msg.as_ptr().cast(), msg.len(), *flags) < 0 {
                        self.diverge("send failed");
                    }
                }
                Op::Recv(pid, fd, flags, rec) => {
                    let live = self.fd(*pid, *fd);
                    if live < 0 {
                        return;
                    }
                    let mut buf = std::mem::take(&mut self.buf);
                    buf.resize(256 * 1024, 0);
                    let mut n = libc::recv(
                        live,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        *flags | libc::MSG_DONTWAIT,
                    );
                    if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN)
                    {
                        let mut p = libc::pollfd {
                            fd: live,
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        libc::poll(&mut p, 1, 2000);
                        n = libc::recv(
                            live,
                            buf.as_mut_ptr().cast(),
                            buf.len(),
                            *flags | libc::MSG_DONTWAIT,
                        );
                    }
                    match (rec, n) {
                        // A peek sizes the buffer (iproute2): strace shows none of its bytes.
                        _ if *flags & libc::MSG_PEEK != 0 => {}
                        (Some(r), n) if n >= 0 => {
                            let n = (n as usize).min(buf.len());
                            let (lbl, proto) = (
                                self.label.get(&live).copied().unwrap_or(0),
                                self.proto.get(&live).copied().unwrap_or(-1),
                            );
                            self.learn(lbl, proto, r, &buf[..n]);
                        }
                        (None, n) if n < 0 => {}
                        _ => self.diverge("recv: one side had no reply"),
                    }
                    self.buf = buf;
                }
                Op::RecvUntilDellink(pid, fd, flags) => {
                    let live = self.fd(*pid, *fd);
                    if live < 0 {
                        return;
                    }
                    let mut buf = std::mem::take(&mut self.buf);
                    buf.resize(256 * 1024, 0);
                    loop {
                        let mut p = libc::pollfd {
                            fd: live,
                            events: libc::POLLIN,
                            revents: 0,
                        };
                        if libc::poll(&mut p, 1, 2000) <= 0 {
                            self.diverge("no RTM_DELLINK came");
                            break;
                        }
                        let n = libc::recv(
                            live,
                            buf.as_mut_ptr().cast(),
                            buf.len(),
                            *flags | libc::MSG_DONTWAIT,
                        );
                        if n < 0 {
                            continue;
                        }
                        let got = &buf[..(n as usize).min(buf.len())];
                        if messages(got).iter().any(|m| m.0 == RTM_DELLINK || m.0 == 2) {
                            break;
                        }
                    }
                    self.buf = buf;
                }
                Op::Open(pid, rec, flags, mode, p) => {
                    let c = self.cpath(p);
                    let fd = libc::open(c.as_ptr(), *flags, *mode);
                    self.adopt(*pid, *rec, fd);
                    if fd >= 0 {
                        let b = c.as_bytes();
                        let lbl = if matches!(p, Path::Container) {
                            1
                        } else if b == b"/proc/thread-self/ns/net" || b == b"/proc/self/ns/net" {
                            self.cur
                        } else {
                            u32::MAX
                        };
                        self.label.insert(fd, lbl);
                    }
                }
                Op::Read(pid, fd, n) | Op::Pread(pid, fd, n, _) => {
                    let mut buf = std::mem::take(&mut self.buf);
                    buf.resize((*n).max(1), 0);
                    let live = self.fd(*pid, *fd);
                    if let Op::Pread(_, _, _, off) = op {
                        libc::pread(live, buf.as_mut_ptr().cast(), *n, *off);
                    } else {
                        libc::read(live, buf.as_mut_ptr().cast(), *n);
                    }
                    self.buf = buf;
                }
                Op::Write(pid, fd, d) => {
                    libc::write(self.fd(*pid, *fd), d.as_ptr().cast(), d.len());
                }
                Op::Pwrite(pid, fd, off, d) => {
                    libc::pwrite(self.fd(*pid, *fd), d.as_ptr().cast(), d.len(), *off);
                }
                Op::Close(pid, fd) => self.close_fd(*pid, *fd),
                Op::OnPath(what, p) => {
                    let c = self.cpath(p);
                    let mut st: libc::stat = std::mem::zeroed();
                    match *what {
                        "stat" => libc::stat(c.as_ptr(), &mut st),
                        "lstat" => libc::lstat(c.as_ptr(), &mut st),
                        "statfs" => {
                            let mut sf: libc::statfs = std::mem::zeroed();
                            libc::statfs(c.as_ptr(), &mut sf)
                        }
                        "access" => libc::access(c.as_ptr(), libc::F_OK),
                        "rmdir" => libc::rmdir(c.as_ptr()),
                        "unlink" => libc::unlink(c.as_ptr()),
                        _ => {
                            let mut b = [0u8; 256];
                            libc::readlink(c.as_ptr(), b.as_mut_ptr().cast(), b.len()) as i32
                        }
                    };
                }
                Op::Mkdir(p, mode) => {
                    libc::mkdir(self.cpath(p).as_ptr(), *mode);
                }
                Op::TwoPath(what, a, b) => {
                    let (a, b) = (self.cpath(a), self.cpath(b));
                    match *what {
                        "rename" => libc::rename(a.as_ptr(), b.as_ptr()),
                        "link" => libc::link(a.as_ptr(), b.as_ptr()),
                        _ => libc::symlink(a.as_ptr(), b.as_ptr()),
                    };
                }
                Op::OnFd(what, pid, fd) => {
                    let live = self.fd(*pid, *fd);
                    match *what {
                        "fstat" => {
                            let mut st: libc::stat = std::mem::zeroed();
                            libc::fstat(live, &mut st)
                        }
                        "fstatfs" => {
                            let mut sf: libc::statfs = std::mem::zeroed();
                            libc::fstatfs(live, &mut sf)
                        }
                        "fsync" => libc::fsync(live),
                        "fdatasync" => libc::fdatasync(live),
                        _ => {
                            let mut b = vec![0u8; 32768];
                            libc::syscall(libc::SYS_getdents64, live, b.as_mut_ptr(), b.len())
                                as i32
                        }
                    };
                }
                Op::Utimens(pid, dirfd, p, t) => {
                    let ts = [
                        libc::timespec {
                            tv_sec: t[0],
                            tv_nsec: t[1],
                        },
                        libc::timespec {
                            tv_sec: t[2],
                            tv_nsec: t[3],
                        },
                    ];
                    let dfd = if *dirfd == -100 {
                        libc::AT_FDCWD
                    } else {
                        self.fd(*pid, *dirfd)
                    };
                    let c = p.as_ref().map(|p| self.cpath(p));
                    let cp = c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
                    libc::syscall(libc::SYS_utimensat, dfd, cp, ts.as_ptr(), 0);
                }
                Op::Flock(pid, fd, how) => {
                    libc::flock(self.fd(*pid, *fd), *how);
                }
                Op::Setns(pid, fd, ty) => {
                    let live = self.fd(*pid, *fd);
                    if libc::setns(live, *ty) == 0 {
                        self.cur = self.label.get(&live).copied().unwrap_or(u32::MAX);
                    } else {
                        self.diverge("setns failed");
                    }
                }
                Op::Netns(container) => {
                    if libc::setns(self.nsfds[usize::from(*container)], libc::CLONE_NEWNET) == 0 {
                        self.cur = u32::from(*container);
                    } else {
                        self.diverge("netns switch failed");
                    }
                }
                Op::Unshare(flags) => {
                    if libc::unshare(*flags) == 0 && *flags & libc::CLONE_NEWNET != 0 {
                        self.next_label += 1;
                        self.cur = self.next_label;
                    }
                }
                Op::TunSetIff(pid, fd, flags, name) => {
                    let mut ifr: libc::ifreq = std::mem::zeroed();
                    ifr.ifr_ifru.ifru_flags = *flags;
                    for (d, c) in ifr
                        .ifr_name
                        .iter_mut()
                        .zip(name.iter().take(libc::IFNAMSIZ - 1))
                    {
                        *d = *c as libc::c_char;
                    }
                    if libc::ioctl(self.fd(*pid, *fd), libc::TUNSETIFF as _, &mut ifr) < 0 {
                        self.diverge("TUNSETIFF failed");
                    }
                }
                Op::IoctlInt(pid, fd, req, arg) => {
                    libc::ioctl(self.fd(*pid, *fd), *req as _, *arg);
                }
            }
        }
    }
}

/// `floor --time-exec FILE PROG [ARGS…]`: run PROG as a runtime runs a plugin (posix_spawn,
/// stdin, stdout, stderr and environment inherited), write the nanoseconds from spawn to its
/// exit into FILE and exit with its status. chain.sh times plugin calls with it, so that the
/// harness's own fork (a copy of bash, ~0.2 ms here) is not counted as the plugin's.
fn time_exec(args: &[String]) -> i32 {
    let [file, prog, rest @ ..] = args else {
        eprintln!("usage: floor --time-exec FILE PROG [ARGS…]");
        return 2;
    };
    let start = Instant::now();
    let status = std::process::Command::new(prog).args(rest).status();
    let ns = start.elapsed().as_nanos();
    if std::fs::write(file, ns.to_string()).is_err() {
        return 2;
    }
    match status {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            eprintln!("floor --time-exec: {prog}: {e}");
            127
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--time-exec") {
        std::process::exit(time_exec(&args[1..]));
    }
    let mut scripts: HashMap<String, Vec<Seg>> = HashMap::new();
    let mut nodes: HashMap<String, i32> = HashMap::new();
    let verbose = std::env::var_os("FLOOR_VERBOSE").is_some();
    let gap: u64 = std::env::var("FLOOR_GAP_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let t: Vec<&str> = line.split_whitespace().collect();
        let answer = match t.as_slice() {
            ["load", name, file] => match load(file) {
                Ok(s) => {
                    scripts.insert(name.to_string(), s);
                    "ok".to_string()
                }
                Err(e) => format!("error {e}"),
            },
            // The process cost alone: `n` VERSION calls of `path`, spawned the way a runtime
            // spawns a plugin (posix_spawn: no copy of this process), stdin/stdout /dev/null;
            // answers the mean ns per call.
            ["spawn", n, path] => {
                let n: u32 = n.parse().unwrap_or(1).max(1);
                let start = Instant::now();
                let mut failed = 0;
                for _ in 0..n {
                    let st = std::process::Command::new(path)
                        .env("CNI_COMMAND", "VERSION")
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status();
                    failed += u32::from(!st.is_ok_and(|s| s.success()));
                }
                let per = start.elapsed().as_nanos() / u128::from(n);
                if failed > 0 {
                    format!("error {failed} of {n} failed")
                } else {
                    per.to_string()
                }
            }
            ["run", name, node, cont] => match scripts.get(*name) {
                None => format!("error no script {name}"),
                Some(segs) => {
                    let nfd = *nodes.entry(node.to_string()).or_insert_with(|| {
                        let c = CString::new(*node).unwrap_or_default();
                        // SAFETY: a plain open of a NUL-terminated path; kept above the replay's fds.
                        unsafe {
                            let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                            let hi = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 900);
                            libc::close(fd);
                            hi
                        }
                    });
                    let cpath = CString::new(*cont).unwrap_or_default();
                    // SAFETY: a plain open of a NUL-terminated path, closed below.
                    let cfd =
                        unsafe { libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                    let mut run = Run {
                        cpath: Some(cpath),
                        next_label: 1,
                        verbose,
                        nsfds: [nfd, cfd],
                        ..Run::default()
                    };
                    let (mut add, mut del) = (0u128, 0u128);
                    for (k, seg) in segs.iter().enumerate() {
                        if k > 0 && gap > 0 {
                            std::thread::sleep(std::time::Duration::from_micros(gap));
                        }
                        // Every plugin process starts in the node namespace.
                        // SAFETY: setns on an fd this process holds open.
                        unsafe { libc::setns(nfd, libc::CLONE_NEWNET) };
                        run.cur = 0;
                        let t0 = Instant::now();
                        let ns = run.segment(&seg.ops).duration_since(t0).as_nanos();
                        if seg.timed {
                            if seg.add {
                                add += ns;
                            } else {
                                del += ns;
                            }
                        }
                    }
                    let left: Vec<(Pid, i32)> = run.fds.keys().copied().collect();
                    for (p, f) in left {
                        run.close_fd(p, f);
                    }
                    // SAFETY: as above; `cfd` is this run's own descriptor, closed once.
                    unsafe {
                        libc::setns(nfd, libc::CLONE_NEWNET);
                        libc::close(cfd);
                    }
                    format!("{add} {del} {}", run.divergences)
                }
            },
            ["quit"] => break,
            _ => format!("error bad command {line}"),
        };
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
}
