//! The nf_tables netlink client: atomic batches of table/chain/rule operations (each
//! acknowledged, errors naming the object), rule and chain dumps, and existence checks.

use super::msg::{self, Writer};
use super::rule::Rule;
use super::validate;
use crate::error::{Error, Result};
use crate::netlink::Error as NlError;
use crate::netlink::socket::{NlSocket, message};
use netlink_sys::protocols::NETLINK_NETFILTER;
use nix::errno::Errno;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

const SUBSYS: u16 = 10; // NFNL_SUBSYS_NFTABLES
const BATCH_BEGIN: u16 = 0x10;
const BATCH_END: u16 = 0x11;
const NEWTABLE: u8 = 0;
const GETTABLE: u8 = 1;
const DELTABLE: u8 = 2;
const NEWCHAIN: u8 = 3;
const GETCHAIN: u8 = 4;
const DELCHAIN: u8 = 5;
const NEWRULE: u8 = 6;
const GETRULE: u8 = 7;
const DELRULE: u8 = 8;
pub(crate) const F_DUMP: u16 = crate::netlink::socket::NLM_F_DUMP;
const F_CREATE: u16 = 0x400;
const F_APPEND: u16 = 0x800;
const TRIES: u32 = 3;

/// Table address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Ip = 2,
    Ip6 = 10,
    Inet = 1,
    Bridge = 7,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Inet => "inet",
            Family::Bridge => "bridge",
        })
    }
}

/// A table: family and name; prints as `inet cni_plugins_masquerade`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub family: Family,
    pub name: String,
}

impl Table {
    pub fn new(family: Family, name: impl Into<String>) -> Self {
        Table {
            family,
            name: name.into(),
        }
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family, self.name)
    }
}

/// Netfilter hook of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Prerouting = 0,
    Input = 1,
    Forward = 2,
    Output = 3,
    Postrouting = 4,
}

/// Base chain type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainType {
    Filter,
    Nat,
    Route,
}

impl ChainType {
    fn name(self) -> &'static str {
        match self {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        }
    }
}

/// Base chain policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Drop = 0,
    Accept = 1,
}

/// What makes a chain a base chain: `type T hook H priority P; policy X;`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseChain {
    pub kind: ChainType,
    pub hook: Hook,
    /// `srcnat` = 100, `dstnat` = -100, `filter` = 0.
    pub priority: i32,
    pub policy: Policy,
}

impl BaseChain {
    /// A base chain with policy accept.
    pub fn new(kind: ChainType, hook: Hook, priority: i32) -> Self {
        BaseChain {
            kind,
            hook,
            priority,
            policy: Policy::Accept,
        }
    }
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
}

/// A chain as dumped by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainInfo {
    pub name: String,
    pub handle: u64,
    /// Hook, type, priority and policy of a base chain (`None` for a regular chain or a
    /// hook this module does not model).
    pub base: Option<BaseChain>,
}

/// A rule as dumped by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    pub chain: String,
    pub handle: u64,
    /// The `comment "..."` of the rule, if any.
    pub comment: Option<String>,
    /// Raw NFTA_RULE_EXPRESSIONS, to compare encodings in tests.
    #[cfg(test)]
    pub exprs: Vec<u8>,
}

/// What exists of one table: its chains and all their rules (see [`Nft::snapshot`]). ADD
/// paths plan from it so that a batch only creates what is missing: re-adding an existing
/// chain or flushing and re-adding fixed rules would put objects on the kernel's destroy list,
/// and closing the socket afterwards waits for an RCU grace period (~10–30 ms) in
/// `nft_rcv_nl_event`.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub table: bool,
    pub chains: Vec<ChainInfo>,
    pub rules: Vec<RuleInfo>,
}

impl Snapshot {
    pub fn has_chain(&self, chain: &str) -> bool {
        self.chains.iter().any(|c| c.name == chain)
    }
    pub fn rules_in<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = &'a RuleInfo> + 'a {
        self.rules.iter().filter(move |r| r.chain == chain)
    }
    /// The (handle, comment) of the rules in `chain` that have a comment.
    pub fn comments_in<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = (u64, &'a str)> + 'a {
        self.rules_in(chain)
            .filter_map(|r| Some((r.handle, r.comment.as_deref()?)))
    }
}

struct Op {
    what: String,
    ty: u8,
    family: Family,
    flags: u16,
    body: Vec<u8>,
}

/// Operations applied atomically by [`Nft::apply`] (all or none).
#[derive(Default)]
pub struct Batch {
    ops: Vec<Op>,
    err: Option<Error>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.err.is_none()
    }
    fn op(
        &mut self,
        what: String,
        ty: u8,
        family: Family,
        flags: u16,
        f: impl FnOnce(&mut Writer) -> Result<()>,
    ) -> &mut Self {
        let mut w = Writer::default();
        match f(&mut w) {
            Ok(()) => self.ops.push(Op {
                what,
                ty,
                family,
                flags,
                body: w.buf,
            }),
            Err(e) => {
                if self.err.is_none() {
                    self.err = Some(e.ctx(format_args!("nftables: {what}")));
                }
            }
        }
        self
    }
    /// `add table`: creates the table unless it exists (no error if it does; an existing
    /// table keeps its comment).
    pub fn add_table(&mut self, t: &Table, comment: Option<&str>) -> &mut Self {
        self.op(
            format!("add table {t}"),
            NEWTABLE,
            t.family,
            F_CREATE,
            |w| {
                validate::nft_name("nftables table", &t.name)?;
                w.str(1, &t.name);
                w.be32(2, 0);
                if let Some(c) = comment {
                    w.attr(
                        6,
                        &msg::udata_comment(c)
                            .ok_or_else(|| Error::internal("comment too long"))?,
                    );
                }
                Ok(())
            },
        )
    }
    /// `delete table` (fails with ENOENT when missing; see [`Batch::ensure_no_table`]).
    pub fn del_table(&mut self, t: &Table) -> &mut Self {
        self.op(format!("delete table {t}"), DELTABLE, t.family, 0, |w| {
            w.str(1, &t.name);
            Ok(())
        })
    }
    /// Delete the table with everything in it, whether or not it exists (add, then delete).
    pub fn ensure_no_table(&mut self, t: &Table) -> &mut Self {
        self.add_table(t, None).del_table(t)
    }
    /// `add chain`: a regular chain (`base` None) or a base chain; no error if it exists.
    pub fn add_chain(&mut self, t: &Table, chain: &str, base: Option<BaseChain>) -> &mut Self {
        self.op(
            format!("add chain {t} {chain}"),
            NEWCHAIN,
            t.family,
            F_CREATE,
            |w| {
                validate::nft_name("nftables chain", chain)?;
                w.str(1, &t.name);
                w.str(3, chain);
                if let Some(b) = base {
                    w.nest(4, |w| {
                        w.be32(1, b.hook as u32);
                        w.be32(2, b.priority as u32);
                    });
                    w.be32(5, b.policy as u32);
                    w.str(7, b.kind.name());
                }
                Ok(())
            },
        )
    }
    /// `flush chain`: delete all its rules.
    pub fn flush_chain(&mut self, t: &Table, chain: &str) -> &mut Self {
        self.op(
            format!("flush chain {t} {chain}"),
            DELRULE,
            t.family,
            0,
            |w| {
                w.str(1, &t.name);
                w.str(2, chain);
                Ok(())
            },
        )
    }
    /// `delete chain` (must be empty and unreferenced).
    pub fn del_chain(&mut self, t: &Table, chain: &str) -> &mut Self {
        self.op(
            format!("delete chain {t} {chain}"),
            DELCHAIN,
            t.family,
            0,
            |w| {
                w.str(1, &t.name);
                w.str(3, chain);
                Ok(())
            },
        )
    }
    fn rule(&mut self, what: String, t: &Table, chain: &str, rule: &Rule, flags: u16) -> &mut Self {
        self.op(what, NEWRULE, t.family, flags, |w| {
            validate::nft_name("nftables chain", chain)?;
            w.str(1, &t.name);
            w.str(2, chain);
            rule.encode(t.family, w)
        })
    }
    /// `add rule`: append at the end of the chain.
    pub fn add_rule(&mut self, t: &Table, chain: &str, rule: &Rule) -> &mut Self {
        self.rule(
            format!("add rule to {t} {chain}"),
            t,
            chain,
            rule,
            F_CREATE | F_APPEND,
        )
    }
    /// `insert rule`: put it at the head of the chain.
    pub fn insert_rule(&mut self, t: &Table, chain: &str, rule: &Rule) -> &mut Self {
        self.rule(
            format!("insert rule into {t} {chain}"),
            t,
            chain,
            rule,
            F_CREATE,
        )
    }
    /// `add table` unless `snap` has it.
    pub fn ensure_table(&mut self, snap: &Snapshot, t: &Table, comment: Option<&str>) -> &mut Self {
        if !snap.table {
            self.add_table(t, comment);
        }
        self
    }
    /// `add chain` unless `snap` has it.
    pub fn ensure_chain(
        &mut self,
        snap: &Snapshot,
        t: &Table,
        chain: &str,
        base: Option<BaseChain>,
    ) -> &mut Self {
        if !snap.has_chain(chain) {
            self.add_chain(t, chain, base);
        }
        self
    }
    /// A chain whose whole content is `rules`: (created,) flushed and filled when missing or
    /// when its rule count differs, left alone otherwise.
    pub fn ensure_fixed_chain(
        &mut self,
        snap: &Snapshot,
        t: &Table,
        chain: &str,
        base: Option<BaseChain>,
        rules: &[Rule],
    ) -> &mut Self {
        if snap.has_chain(chain) {
            if snap.rules_in(chain).count() == rules.len() {
                return self;
            }
        } else {
            self.add_chain(t, chain, base);
        }
        // Flushed in the same transaction even when we create the chain: a concurrent first
        // ADD may have created and filled it since our snapshot (flushing an empty chain
        // deletes nothing, so costs no grace period).
        self.flush_chain(t, chain);
        for r in rules {
            self.add_rule(t, chain, r);
        }
        self
    }
    /// `delete rule ... handle H`.
    pub fn del_rule(&mut self, t: &Table, chain: &str, handle: u64) -> &mut Self {
        self.op(
            format!("delete rule handle {handle} from {t} {chain}"),
            DELRULE,
            t.family,
            0,
            |w| {
                w.str(1, &t.name);
                w.str(2, chain);
                w.be64(3, handle);
                Ok(())
            },
        )
    }
}

/// A netfilter netlink socket bound to the network namespace it was opened in.
pub struct Nft {
    sock: NlSocket,
    /// A batch was committed through this socket.
    applied: bool,
}

static LINGER: AtomicBool = AtomicBool::new(false);
/// The one socket kept open for exit (-1: none); a newer one replaces (closes) it, so a GC
/// that commits many batches holds one extra descriptor, not one per batch.
static LINGERING: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// Keep sockets that committed a batch open until the process exits instead of closing them
/// when dropped. Closing a netfilter socket waits until the kernel has destroyed what earlier
/// commits deleted (`nft_rcv_nl_event` flushes the destroy work, an RCU grace period of
/// 10–30 ms); deferred to exit, that wait overlaps the applet's remaining work (a bridge DEL
/// deletes its veth meanwhile, which waits for grace periods of its own). For the
/// short-lived plugin process only: `main` calls it, library users and tests do not.
pub fn linger_at_exit() {
    LINGER.store(true, Ordering::Relaxed);
}

impl Drop for Nft {
    fn drop(&mut self) {
        if self.applied && LINGER.load(Ordering::Relaxed) {
            // A duplicate keeps the socket alive; the kernel closes it at exit. Replacing an
            // older one closes that (at most one lingers).
            if let Ok(copy) = self.sock.as_fd().try_clone_to_owned()
                && let Ok(mut slot) = LINGERING.lock()
            {
                *slot = Some(copy);
            }
        }
    }
}

fn strerror(errno: i32) -> &'static str {
    Errno::from_raw(errno).desc()
}

fn transient(errno: i32) -> bool {
    [libc::EINTR, libc::EAGAIN, libc::EBUSY, libc::ERESTART].contains(&errno)
}

/// A netfilter message: netlink header, nfgenmsg (family, version 0, big-endian resource id),
/// then `body`.
fn nf_message(ty: u16, family: u8, res_id: u16, body: &[u8]) -> Vec<u8> {
    let mut fixed = [family, 0, 0, 0];
    fixed[2..].copy_from_slice(&res_id.to_be_bytes());
    message(ty, &fixed, |w| w.buf.extend_from_slice(body))
}

fn nft_type(ty: u8) -> u16 {
    SUBSYS << 8 | ty as u16
}

impl Nft {
    /// Open a socket in the current network namespace.
    pub fn open() -> Result<Nft> {
        Ok(Nft {
            sock: NlSocket::open(NETLINK_NETFILTER, "nftables")
                .map_err(|e| Error::from(e).ctx("nftables"))?,
            applied: false,
        })
    }

    /// Open a socket in the network namespace at `netns` (e.g. `/var/run/netns/NAME`); only the
    /// calling thread switches, and it switches back before returning.
    pub fn open_in(netns: &Path) -> Result<Nft> {
        let path = netns.to_string_lossy();
        crate::netns::NetNs::open(&path)
            .map_err(Error::from)?
            .enter(Nft::open)?
    }

    /// Apply all operations of `batch` atomically. Transient conflicts (EBUSY, EINTR, EAGAIN,
    /// ERESTART) are retried a few times before failing with a try-again error.
    pub fn apply(&mut self, batch: &Batch) -> Result<()> {
        if let Some(e) = &batch.err {
            return Err(e.clone());
        }
        if batch.ops.is_empty() {
            return Ok(());
        }
        let mut tries = 0;
        loop {
            let (what, errno, ext) = match self.apply_once(batch) {
                Ok(()) => {
                    self.applied = true;
                    return Ok(());
                }
                Err((i, e)) => (
                    i.map_or("apply batch", |i| batch.ops[i].what.as_str()),
                    if e.errno == 0 { libc::EIO } else { e.errno },
                    e.ext,
                ),
            };
            let mut msg = format!("nftables: {what}: {}", strerror(errno));
            if !ext.is_empty() {
                msg = format!("{msg} ({ext})");
            }
            tries += 1;
            if !transient(errno) {
                return Err(Error::internal(msg).with_errno(errno));
            }
            if tries >= TRIES {
                return Err(Error::try_again(msg).with_errno(errno));
            }
            std::thread::sleep(std::time::Duration::from_millis(20 * tries as u64));
        }
    }

    /// One attempt: Err((index of the failing op or None for the batch itself, the error)).
    fn apply_once(&mut self, batch: &Batch) -> std::result::Result<(), (Option<usize>, NlError)> {
        let mut msgs = Vec::with_capacity(batch.ops.len() + 2);
        msgs.push((nf_message(BATCH_BEGIN, 0, SUBSYS, &[]), 0));
        for op in &batch.ops {
            let m = nf_message(nft_type(op.ty), op.family as u8, 0, &op.body);
            msgs.push((m, op.flags));
        }
        msgs.push((nf_message(BATCH_END, 0, SUBSYS, &[]), 0));
        self.sock.batch(msgs)
    }

    /// Send one request and collect the payloads (after the nfgenmsg header) of its replies.
    /// Dumps end at NLMSG_DONE (restarted when interrupted), other requests at their ACK.
    fn request(
        &mut self,
        ty: u8,
        family: Family,
        flags: u16,
        body: &[u8],
    ) -> std::result::Result<Vec<Vec<u8>>, i32> {
        self.request_raw(nft_type(ty), family as u8, flags, body)
            .map_err(|e| if e.errno == 0 { libc::EIO } else { e.errno })
    }

    /// One request of any netfilter subsystem (`msg_type` = subsystem << 8 | message): the
    /// payloads (after the nfgenmsg header) of the replies.
    pub(crate) fn request_raw(
        &mut self,
        msg_type: u16,
        family: u8,
        flags: u16,
        body: &[u8],
    ) -> std::result::Result<Vec<Vec<u8>>, NlError> {
        let req = nf_message(msg_type, family, 0, body);
        let replies = if flags & F_DUMP == F_DUMP {
            self.sock.dump(req, flags)?
        } else {
            self.sock.request_ack(req, flags)?.0
        };
        Ok(replies
            .into_iter()
            .map(|r| r.body.get(4..).unwrap_or_default().to_vec())
            .collect())
    }

    /// [`Nft::request`] with retries; ENOENT yields `None`.
    fn query(
        &mut self,
        what: fmt::Arguments,
        ty: u8,
        family: Family,
        flags: u16,
        body: &[u8],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let mut tries = 0;
        loop {
            let errno = match self.request(ty, family, flags, body) {
                Ok(v) => return Ok(Some(v)),
                Err(libc::ENOENT) => return Ok(None),
                Err(e) => e,
            };
            tries += 1;
            let msg = format!("nftables: {what}: {}", strerror(errno));
            if !transient(errno) {
                return Err(Error::internal(msg).with_errno(errno));
            }
            if tries >= TRIES {
                return Err(Error::try_again(msg).with_errno(errno));
            }
        }
    }

    /// The table's chains and rules (two dumps; an empty snapshot if the table is missing).
    pub fn snapshot(&mut self, t: &Table) -> Result<Snapshot> {
        let chains = self.chains(t)?;
        if chains.is_empty() && !self.table_exists(t)? {
            return Ok(Snapshot::default());
        }
        let rules = self.rules(t, None)?;
        Ok(Snapshot {
            table: true,
            chains,
            rules,
        })
    }

    /// Whether the table exists.
    pub fn table_exists(&mut self, t: &Table) -> Result<bool> {
        let mut w = Writer::default();
        w.str(1, &t.name);
        Ok(self
            .query(format_args!("get table {t}"), GETTABLE, t.family, 0, &w.buf)?
            .is_some())
    }

    /// Whether the chain exists (false also when the table does not).
    pub fn chain_exists(&mut self, t: &Table, chain: &str) -> Result<bool> {
        let mut w = Writer::default();
        w.str(1, &t.name);
        w.str(3, chain);
        Ok(self
            .query(
                format_args!("get chain {t} {chain}"),
                GETCHAIN,
                t.family,
                0,
                &w.buf,
            )?
            .is_some())
    }

    /// The chains of a table (empty if the table does not exist).
    pub fn chains(&mut self, t: &Table) -> Result<Vec<ChainInfo>> {
        let mut w = Writer::default();
        w.str(1, &t.name);
        let msgs = self.query(
            format_args!("list chains of {t}"),
            GETCHAIN,
            t.family,
            F_DUMP,
            &w.buf,
        )?;
        let mut out = Vec::new();
        for m in msgs.unwrap_or_default() {
            let (mut table, mut c) = (
                String::new(),
                ChainInfo {
                    name: String::new(),
                    handle: 0,
                    base: None,
                },
            );
            let (mut hook, mut prio, mut policy, mut kind) = (None, 0, Policy::Accept, None);
            for (ty, d) in msg::attrs(&m) {
                match ty {
                    1 => table = msg::get_str(d),
                    2 => c.handle = msg::get_be64(d),
                    3 => c.name = msg::get_str(d),
                    4 => {
                        for (ty, d) in msg::attrs(d) {
                            match ty {
                                1 => hook = hook_from(msg::get_be32(d)),
                                2 => prio = msg::get_be32(d) as i32,
                                _ => {}
                            }
                        }
                    }
                    5 if msg::get_be32(d) == 0 => policy = Policy::Drop,
                    7 => {
                        kind = match msg::get_str(d).as_str() {
                            "filter" => Some(ChainType::Filter),
                            "nat" => Some(ChainType::Nat),
                            "route" => Some(ChainType::Route),
                            _ => None,
                        }
                    }
                    _ => {}
                }
            }
            if table == t.name {
                if let (Some(hook), Some(kind)) = (hook, kind) {
                    c.base = Some(BaseChain {
                        kind,
                        hook,
                        priority: prio,
                        policy,
                    });
                }
                out.push(c);
            }
        }
        Ok(out)
    }

    /// The rules of a table, or of one chain of it, in chain order (empty if the table or
    /// chain does not exist).
    pub fn rules(&mut self, t: &Table, chain: Option<&str>) -> Result<Vec<RuleInfo>> {
        let mut w = Writer::default();
        w.str(1, &t.name);
        if let Some(c) = chain {
            w.str(2, c);
        }
        let msgs = self.query(
            format_args!("list rules of {t}"),
            GETRULE,
            t.family,
            F_DUMP,
            &w.buf,
        )?;
        let mut out = Vec::new();
        for m in msgs.unwrap_or_default() {
            let mut table = String::new();
            let mut r = RuleInfo {
                chain: String::new(),
                handle: 0,
                comment: None,
                #[cfg(test)]
                exprs: Vec::new(),
            };
            for (ty, d) in msg::attrs(&m) {
                match ty {
                    1 => table = msg::get_str(d),
                    2 => r.chain = msg::get_str(d),
                    3 => r.handle = msg::get_be64(d),
                    #[cfg(test)]
                    4 => r.exprs = d.to_vec(),
                    7 => r.comment = msg::udata_get_comment(d),
                    _ => {}
                }
            }
            if table == t.name && chain.is_none_or(|c| c == r.chain) {
                out.push(r);
            }
        }
        Ok(out)
    }
}

/// Delete, in one batch, the rules of `chains` in table `t` whose comment `doomed` picks. A
/// missing table or chain, or a kernel without nf_tables, means nothing to delete.
pub fn delete_commented(t: &Table, chains: &[&str], doomed: impl Fn(&str) -> bool) -> Result<()> {
    let Ok(mut nft) = Nft::open() else {
        return Ok(());
    };
    let snap = nft.snapshot(t)?;
    let mut b = Batch::new();
    for chain in chains {
        for (h, c) in snap.comments_in(chain) {
            if doomed(c) {
                b.del_rule(t, chain, h);
            }
        }
    }
    nft.apply(&b)
}

fn hook_from(n: u32) -> Option<Hook> {
    [
        Hook::Prerouting,
        Hook::Input,
        Hook::Forward,
        Hook::Output,
        Hook::Postrouting,
    ]
    .into_iter()
    .find(|h| *h as u32 == n)
}
