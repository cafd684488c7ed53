//! `dhcp daemon` (upstream `daemon.go`): holds the leases of the `dhcp` plugin's attachments.
//!
//! Listens on `-socketpath` (default `/run/cni/dhcp.sock`, under `-hostprefix`), or on the one
//! socket systemd passes (LISTEN_FDS, `contrib/systemd/cnibox-dhcp.socket`). A connection
//! carries one cnibox [`Call`] (JSON), or upstream's plugin's net/rpc calls ([`gorpc`], after
//! `CONNECT`). Leases are recorded ([`Store`]) and taken up again at start. Each lease has a thread that entered the container namespace and keeps
//! it there (the namespace stays open while the lease lives, so DEL can release the lease even
//! after the runtime removed the namespace's mount). SIGTERM and SIGINT end the daemon: the
//! socket (unless systemd owns it) and the pidfile are removed, leases are not released, as
//! upstream. Beyond upstream: a stale socket file of a daemon that is gone is replaced (a live
//! daemon on it is an error); a lease whose interface disappeared is forgotten, so a later ADD
//! acquires a new one; leases are keyed by the whole attachment (upstream keys them by the
//! client identifier cut to 254 bytes, so long container IDs share one); a new lease whose
//! plugin is gone when the answer is written (its deadline passed) is released at once.

use super::conns::{Conns, IDLE, Ticket};
use super::flags::{Flags, Stop, USAGE};
use super::gorpc::{self, Reply, Undo};
use super::lease::{Bound, Client, Cmd, Mailbox, Timing, lock, log};
use super::packet::{Msg, OPT_PARAM_LIST, OPT_SERVER_ID};
use super::proto::{Call, MAX_MESSAGE};
use super::store::Store;
use crate::cni::Version;
use crate::cni::env::{Env, validate_ifname};
use crate::cni::result::{CniResult, IpConfig, Route};
use crate::error::{Error, Result};
use crate::netns::NetNs;
use ipnet::{IpNet, Ipv4Net};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// A lease's key: the whole attachment (container ID, network, interface). Never the client
/// identifier, which is cut to fit an option: two long container IDs share its first bytes.
type Key = (String, String, String);

fn key(c: &Call) -> Key {
    (c.container_id.clone(), c.network.clone(), c.ifname.clone())
}

/// The attachment as logs and messages name it (upstream's client identifier, whole).
fn name(k: &Key) -> String {
    format!("{}/{}/{}", k.0, k.1, k.2)
}

struct Slot {
    generation: u64,
    mailbox: Arc<Mailbox>,
    ack: Arc<Mutex<Msg>>,
    thread: Option<JoinHandle<()>>,
}

struct Daemon {
    leases: Mutex<HashMap<Key, Slot>>,
    /// The attachments a call is working on ([`Daemon::turn`]), and its signal when one ends.
    busy: Mutex<HashSet<Key>>,
    turn_over: Condvar,
    hostprefix: String,
    timing: Timing,
    generation: AtomicU64,
    store: Store,
}

/// Run `job` on a thread of its own (1 MiB of stack): its handle to join, or `None` when
/// `detached` (the handle is dropped, which detaches it). std's threads here: the daemon is
/// no plugin, so their start-up machinery costs no plugin call anything.
fn spawn(job: impl FnOnce() + Send + 'static, detached: bool) -> Result<Option<JoinHandle<()>>> {
    let t = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(job)
        .map_err(|e| Error::io("start a thread", e))?;
    Ok((!detached).then_some(t))
}

/// What SIGTERM and SIGINT remove: the socket (unless systemd's) and the pidfile.
static CLEANUP: OnceLock<Vec<CString>> = OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    const MSG: &[u8] = b"dhcp daemon: terminating\n";
    // SAFETY: only async-signal-safe calls (write, unlink, _exit) on data set before the
    // handler was installed.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        for p in CLEANUP.get().into_iter().flatten() {
            libc::unlink(p.as_ptr());
        }
        libc::_exit(0);
    }
}

/// `dhcp daemon ARGS…`: the exit status.
pub fn main(args: &[String]) -> i32 {
    // The daemon lives for months: its memory goes back to the system after a burst (the
    // binary's own classes, made for short plugin runs, keep every freed block).
    crate::alloc::use_system();
    let f = match Flags::parse(args) {
        Ok(f) => f,
        Err(Stop::Help) => {
            crate::warn!("{USAGE}");
            return 0;
        }
        Err(Stop::Bad(m)) => {
            crate::warn!("{m}\n{USAGE}");
            return 2;
        }
    };
    match run(f) {
        Ok(()) => 0,
        Err(e) => {
            crate::warn!("dhcp daemon: {e}");
            1
        }
    }
}

fn run(f: Flags) -> std::result::Result<(), String> {
    if !f.pidfile.is_empty() {
        if !f.pidfile.starts_with('/') {
            return Err(format!(
                "Error writing pidfile {:?}: path not absolute",
                f.pidfile
            ));
        }
        std::fs::write(&f.pidfile, std::process::id().to_string())
            .map_err(|e| format!("Error writing pidfile {:?}: {e}", f.pidfile))?;
    }
    let path = match f.socketpath.as_str() {
        "" => super::DEFAULT_SOCKET,
        s => s,
    };
    let path = format!("{}{path}", f.hostprefix);
    let (listener, activated) = listen(&path).inspect_err(|_| {
        let _ = std::fs::remove_file(&f.pidfile);
    })?;
    let store = Store::open(&path).inspect_err(|_| {
        let _ = std::fs::remove_file(&f.pidfile);
        if !activated {
            let _ = std::fs::remove_file(&path);
        }
    })?;
    let owned = [(!activated).then_some(&path), Some(&f.pidfile)];
    let files = owned.into_iter().flatten().filter(|p| !p.is_empty());
    let _ = CLEANUP.set(
        files
            .filter_map(|p| CString::new(p.as_str()).ok())
            .collect(),
    );
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: installs a handler that only makes async-signal-safe calls.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    crate::warn!("dhcp daemon: listening on {path}");
    let d: &'static Daemon = Box::leak(Box::new(Daemon {
        leases: Mutex::new(HashMap::new()),
        busy: Mutex::new(HashSet::new()),
        turn_over: Condvar::new(),
        hostprefix: f.hostprefix,
        timing: Timing {
            timeout: f.timeout,
            resend_max: f.resendmax,
            resend_timeout: f.resendtimeout,
            broadcast: f.broadcast,
        },
        generation: AtomicU64::new(0),
        store,
    }));
    d.restore();
    let conns: &'static Conns = Box::leak(Box::new(Conns::new()));
    // Doubled on each failed accept in a row (out of file descriptors: no busy loop).
    let mut backoff = Duration::ZERO;
    for conn in listener.incoming() {
        match conn {
            Ok(c) => {
                backoff = Duration::ZERO;
                let job = move || {
                    if let Some(ticket) = conns.admit(&c) {
                        serve(d, &c, &ticket);
                        // Unregistered before the connection is closed (see Conns).
                        drop(ticket);
                    }
                    drop(c);
                    give_back();
                };
                if let Err(e) = spawn(job, true) {
                    crate::warn!("dhcp daemon: {e}");
                }
            }
            Err(e) => {
                let out_of_fds = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                if backoff.is_zero() {
                    let more = if out_of_fds {
                        ": closing idle connections, backing off"
                    } else {
                        ""
                    };
                    crate::warn!("dhcp daemon: accept: {e}{more}");
                }
                if out_of_fds {
                    conns.make_room();
                }
                backoff = (backoff * 2).clamp(ACCEPT_BACKOFF.0, ACCEPT_BACKOFF.1);
                std::thread::sleep(backoff);
            }
        }
    }
    Ok(())
}

/// The listener's first and longest wait after a failed accept.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// After a connection: glibc's malloc (a build for the host's tests; the release binary is
/// musl's, whose allocator returns emptied groups on its own) keeps freed memory in its
/// per-thread arenas until asked to give it back.
fn give_back() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own state, under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The socket systemd passed, or a new one at `path`; `true` when systemd's.
fn listen(path: &str) -> std::result::Result<(UnixListener, bool), String> {
    let var = |k| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    if var("LISTEN_PID") == Some(std::process::id()) {
        match var("LISTEN_FDS").unwrap_or(0) {
            0 => {}
            // SAFETY: systemd hands fd 3 to this process (LISTEN_PID) and nothing else owns it.
            1 => unsafe {
                libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
                return Ok((UnixListener::from_raw_fd(3), true));
            },
            n => {
                return Err(format!(
                    "Too many ({n}) FDs passed through socket activation"
                ));
            }
        }
    }
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("Error getting listener: {}: {e}", dir.display()))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.file_type().is_socket()
    {
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "Error getting listener: {path}: another daemon is listening"
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    UnixListener::bind(path)
        .map(|l| (l, false))
        .map_err(|e| format!("Error getting listener: {path}: {e}"))
}

/// One connection: Go's net/rpc when it starts with `CONNECT`, else one cnibox JSON call.
/// A connection silent for [`IDLE`] (or a JSON call not whole by then) is closed.
fn serve(d: &'static Daemon, c: &UnixStream, ticket: &Ticket<'_>) {
    let mut c = c;
    let _ = c.set_read_timeout(Some(IDLE));
    let _ = c.set_write_timeout(Some(IDLE));
    let end = std::time::Instant::now() + IDLE;
    let mut first = [0u8];
    if c.read_exact(&mut first).is_err() {
        return;
    }
    if first[0] == b'C' {
        let handle = |method: &str, env: Env, stdin: Vec<u8>| -> (Reply, Undo<'_>) {
            ticket.busy(true);
            let _idle = Idle(ticket);
            let op = if method == "DHCP.Allocate" {
                "add"
            } else {
                "del"
            };
            let call = super::go_call(op, env, stdin);
            let k = call.as_ref().ok().map(key);
            match call.and_then(|call| d.handle(call)) {
                Ok((r, true)) => (Ok(r), k.map(|k| Box::new(move || d.lost(&k, "")) as _)),
                Ok((r, false)) => (Ok(r), None),
                Err(e) => (Err(e), None),
            }
        };
        return gorpc::serve(c, first[0], &handle);
    }
    let mut buf = first.to_vec();
    let call = match read_call(c, end, &mut buf) {
        Ok(()) => serde_json::from_slice(&buf)
            .ok()
            .as_ref()
            .and_then(Call::from_json)
            .ok_or_else(|| Error::decode("bad call: not a cnibox dhcp call")),
        Err(e) => Err(e),
    };
    ticket.busy(true);
    let added = call.as_ref().ok().map(key);
    let answer = |(r, new): (Option<CniResult>, bool)| -> Result<(Value, bool)> {
        Ok(match r {
            Some(r) => (json!({ "result": r.to_value(Version::V110)? }), new),
            None => (json!({}), new),
        })
    };
    let (v, new) = match call.and_then(|call| d.handle(call)).and_then(answer) {
        Ok(a) => a,
        Err(e) => (json!({"code": e.code, "msg": e.msg}), false),
    };
    // A plugin that gave up waiting (its deadline passed) has closed the connection: nobody
    // will use a lease acquired for it, so it is released instead of kept forever.
    if let Err(e) = c.write_all(v.to_string().as_bytes())
        && new
        && let Some(k) = added
    {
        d.lost(&k, &format!(" ({e})"));
    }
}

/// A connection's call was answered: it is idle again (when dropped).
struct Idle<'a, 'b>(&'a Ticket<'b>);

impl Drop for Idle<'_, '_> {
    fn drop(&mut self) {
        self.0.busy(false);
    }
}

/// The rest of a cnibox call (at most [`MAX_MESSAGE`] bytes in all, until the writer's end)
/// into `buf`, whole by `end`.
fn read_call(mut c: &UnixStream, end: std::time::Instant, buf: &mut Vec<u8>) -> Result<()> {
    let mut chunk = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(Error::io("read call", std::io::ErrorKind::TimedOut.into()));
        }
        let _ = c.set_read_timeout(Some(left));
        let n = c.read(&mut chunk).map_err(|e| Error::io("read call", e))?;
        if n == 0 {
            return Ok(());
        }
        if (buf.len() + n) as u64 > MAX_MESSAGE - 1 {
            return Err(Error::decode("bad call: longer than a call can be"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The longest client identifier (an option holds 255 bytes, one is the type byte).
const CLIENT_ID_MAX: usize = 254;
/// Hex digits of the hash that ends a shortened client identifier (128 bits).
const CLIENT_ID_HASH: usize = 32;

/// Upstream's client identifier, `containerID/network/ifname`. Upstream cuts a longer one to
/// 254 bytes, so attachments whose IDs share their first bytes share a lease at the server;
/// here a longer one keeps its first 221 bytes and ends `~` and 32 hex digits of the SHA-512
/// of the whole. It cannot equal the identifier of a short attachment: that one ends with
/// `/ifname`, at most 16 bytes after its last `/`, and the hash tail has 33 bytes without one.
fn client_id(k: &Key) -> Vec<u8> {
    let whole = name(k).into_bytes();
    if whole.len() <= CLIENT_ID_MAX {
        return whole;
    }
    let hash = crate::hash::sha512_hex(&whole, CLIENT_ID_HASH);
    let mut id = whole[..CLIENT_ID_MAX - 1 - CLIENT_ID_HASH].to_vec();
    id.push(b'~');
    id.extend_from_slice(hash.as_bytes());
    id
}

/// The options a lease's client sends: the call's, and its parameter request list.
fn options(c: &Call) -> Vec<(u8, Vec<u8>)> {
    let list = (OPT_PARAM_LIST, c.request.clone());
    let provided = c.options.iter().map(|(k, v)| (*k, v.clone().into_bytes()));
    provided
        .chain(std::iter::once(list).filter(|(_, v)| !v.is_empty()))
        .collect()
}

/// The result upstream builds from an ACK.
fn result(ack: &Msg, priority: u32) -> Result<CniResult> {
    let (ip, prefix) = ack
        .address()
        .ok_or_else(|| Error::internal("DHCP option Subnet Mask not found in DHCPACK"))?;
    let net = |a, p| {
        Ipv4Net::new(a, p)
            .map(IpNet::V4)
            .map_err(|e| Error::internal(e.to_string()))
    };
    let mut r = CniResult::default();
    r.ips.push(IpConfig {
        version: None,
        interface: None,
        address: net(ip, prefix)?,
        gateway: ack.router().map(IpAddr::V4),
    });
    for (dst, p, gw) in ack.routes() {
        let mut route = Route::new(net(dst, p)?, Some(IpAddr::V4(gw)));
        if gw.is_unspecified() {
            route.scope = Some(253); // link: an on-link route of option 121
        }
        if priority != 0 {
            route.priority = Some(priority);
        }
        r.routes.push(route);
    }
    Ok(r)
}

impl Daemon {
    /// The answer to `c`, and whether a new lease was acquired for it (to release if the
    /// answer cannot be delivered).
    fn handle(&'static self, c: Call) -> Result<(Option<CniResult>, bool)> {
        let k = key(&c);
        if c.op == "add" {
            let (ack, new) = self.add(&c, &k)?;
            return result(&ack, c.priority)
                .inspect_err(|_| self.stop(&k))
                .map(|r| (Some(r), new));
        }
        self.other(c, k).map(|()| (None, false))
    }

    /// The plugin that asked for the new lease of `k` is gone: release it.
    fn lost(&self, k: &Key, why: &str) {
        log(
            &name(k),
            &format!("the plugin is gone{why}, releasing the lease"),
        );
        self.stop(k);
    }

    fn other(&'static self, c: Call, k: Key) -> Result<()> {
        match c.op.as_str() {
            "del" => {
                self.stop(&k);
                Ok(())
            }
            "check" => match lock(&self.leases).get(&k) {
                Some(s) => {
                    s.mailbox.post(Cmd::Check);
                    Ok(())
                }
                None => Err(Error::internal(format!(
                    "no DHCP lease held for {}",
                    name(&k)
                ))),
            },
            "status" => Ok(()),
            "gc" => {
                let keep: HashSet<(&str, &str)> = c
                    .keep
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                let gone: Vec<Key> = lock(&self.leases)
                    .keys()
                    .filter(|(cid, network, ifname)| {
                        *network == c.network && !keep.contains(&(cid.as_str(), ifname.as_str()))
                    })
                    .cloned()
                    .collect();
                for k in gone {
                    self.stop(&k);
                }
                Ok(())
            }
            op => Err(Error::decode(format!("unknown call {op:?}"))),
        }
    }

    /// The calls on attachment `k` take turns: an ADD from the check of the leases held to the
    /// new lease's slot, a DEL from the slot's removal to the release. A runtime that retries
    /// an ADD while the first still waits for the server then gets the first one's lease, and
    /// no lease is acquired twice (the first one's thread would renew it for ever).
    fn turn(&self, k: &Key) -> Turn<'_> {
        let mut busy = lock(&self.busy);
        while busy.contains(k) {
            busy = self
                .turn_over
                .wait(busy)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        busy.insert(k.clone());
        Turn {
            d: self,
            k: k.clone(),
        }
    }

    /// The lease of attachment `k`: the one held (its maintenance is woken, as upstream's
    /// Check), or a new one.
    fn add(&'static self, c: &Call, k: &Key) -> Result<(Msg, bool)> {
        let _turn = self.turn(k);
        if let Some(s) = lock(&self.leases).get(k) {
            s.mailbox.post(Cmd::Check);
            return Ok((lock(&s.ack).clone(), false));
        }
        validate_ifname(&c.ifname)?;
        if !c.netns.starts_with('/') {
            return Err(Error::new(
                crate::error::code::INVALID_NETNS,
                format!("netns {:?}: not an absolute path", c.netns),
            ));
        }
        let ns = NetNs::open(&format!("{}{}", self.hostprefix, c.netns))?;
        let name = name(k);
        log(&name, "acquiring lease");
        // The sockets are made inside the namespace and keep working (and keep it alive) after
        // this thread is back in its own.
        let (client, b) = ns.enter(|| -> Result<_> {
            let mut client = Client::open(&c.ifname, name, client_id(k), options(c), self.timing)?;
            let b = client.acquire()?;
            Ok((client, b))
        })??;
        log(
            &client.id,
            &format!("lease acquired, expires in {}s", b.expires_in()),
        );
        let acked = b.ack.clone();
        self.store.save(&client.id, c, &b.ack);
        self.keep(c, k, client, b)?;
        Ok((acked, true))
    }

    /// Keep lease `b` of `client`, which `c` made for `k`: its thread renews it (recording
    /// each new ACK) until a DEL or its end.
    fn keep(&'static self, c: &Call, k: &Key, client: Client, b: Bound) -> Result<()> {
        let ack = Arc::new(Mutex::new(b.ack.clone()));
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let (shared, key, mailbox) = (ack.clone(), k.clone(), client.mailbox.clone());
        let (call, id) = (c.clone(), client.id.clone());
        // Inserted under the lock the thread's `forget` takes, so a thread that ends at once
        // cannot leave its slot behind.
        let mut leases = lock(&self.leases);
        let thread = spawn(
            move || {
                client.maintain(b, |b| {
                    *lock(&shared) = b.ack.clone();
                    self.store.save(&id, &call, &b.ack);
                });
                self.forget(&key, generation);
            },
            false,
        )
        .inspect_err(|_| self.store.remove(&name(k)))?;
        leases.insert(
            k.clone(),
            Slot {
                generation,
                mailbox,
                ack,
                thread,
            },
        );
        Ok(())
    }

    /// The leases recorded before a restart: kept again where their namespace and interface
    /// (the same MAC address) still are, dropped elsewhere. Renewal goes on from the last ACK.
    fn restore(&'static self) {
        for s in self.store.load() {
            let k = key(&s.call);
            let name = name(&k);
            let back = || -> Result<Client> {
                let ns = NetNs::open(&format!("{}{}", self.hostprefix, s.call.netns))?;
                let id = client_id(&k);
                let o = options(&s.call);
                let client =
                    ns.enter(|| Client::open(&s.call.ifname, name.clone(), id, o, self.timing))??;
                if client.mac() != s.ack.chaddr {
                    return Err(Error::internal("the interface was replaced"));
                }
                Ok(client)
            };
            let kept = back().and_then(|client| {
                let server = s.ack.ip(OPT_SERVER_ID).unwrap_or(Ipv4Addr::UNSPECIFIED);
                let b = Bound::new(s.ack.clone(), server, s.age);
                let left = b.expires_in();
                self.keep(&s.call, &k, client, b)?;
                log(&name, &format!("lease restored, expires in {left}s"));
                Ok(())
            });
            if let Err(e) = kept {
                log(&name, &format!("lease dropped: {}", e.msg));
                self.store.remove(&name);
            }
        }
    }

    /// DEL: release the lease and wait until it is sent.
    fn stop(&self, k: &Key) {
        let _turn = self.turn(k);
        let slot = lock(&self.leases).remove(k);
        if let Some(s) = slot {
            s.mailbox.post(Cmd::Stop);
            if let Some(t) = s.thread {
                // A lease thread that panicked has nothing left to release.
                let _ = t.join();
            }
        }
        self.store.remove(&name(k));
    }

    /// A lease thread ended on its own: drop its slot, unless a newer lease took the key.
    fn forget(&self, k: &Key, generation: u64) {
        let mut leases = lock(&self.leases);
        if leases.get(k).is_some_and(|s| s.generation == generation) {
            leases.remove(k);
            self.store.remove(&name(k));
        }
    }
}

/// A call's turn on an attachment ([`Daemon::turn`]), given up when dropped.
struct Turn<'a> {
    d: &'a Daemon,
    k: Key,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        lock(&self.d.busy).remove(&self.k);
        self.d.turn_over.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::super::packet::{ACK, OPT_CLASSLESS_ROUTES, OPT_ROUTER, OPT_SUBNET_MASK};
    use super::{Key, Msg, client_id, result};
    use crate::cni::Version;
    use serde_json::json;

    fn k(cid: &str, network: &str, ifname: &str) -> Key {
        (cid.into(), network.into(), ifname.into())
    }

    #[test]
    fn client_id_is_upstreams_up_to_254_bytes() {
        assert_eq!(client_id(&k("abc", "net", "eth0")), b"abc/net/eth0");
        let cid = "x".repeat(254 - "/n/eth0".len());
        assert_eq!(
            client_id(&k(&cid, "n", "eth0")),
            format!("{cid}/n/eth0").as_bytes()
        );
    }

    /// Longer: cut to 254 bytes with a hash of the whole at the end, so IDs that differ only
    /// past the cut (or only in the network or interface) still differ on the wire.
    #[test]
    fn long_client_ids_are_unique_and_254_bytes() {
        let long = "x".repeat(300);
        let ids = [
            client_id(&k(&format!("{long}1"), "net", "eth0")),
            client_id(&k(&format!("{long}2"), "net", "eth0")),
            client_id(&k(&format!("{long}1"), "net", "eth1")),
            client_id(&k(&format!("{long}1"), "other", "eth0")),
            client_id(&k(&"x".repeat(255 - "/n/eth0".len()), "n", "eth0")),
        ];
        for (i, a) in ids.iter().enumerate() {
            assert_eq!(a.len(), 254);
            assert_eq!(a[221], b'~');
            assert!(a[222..].iter().all(u8::is_ascii_hexdigit));
            for b in &ids[i + 1..] {
                assert_ne!(a, b);
            }
        }
        let whole = format!("{long}1/net/eth0");
        let hash = crate::hash::sha512_hex(whole.as_bytes(), 32);
        assert_eq!(ids[0], format!("{}~{hash}", &whole[..221]).as_bytes());
    }

    #[test]
    fn result_from_ack_as_upstream() {
        let mut ack = Msg::request(ACK, 1, [0; 6]);
        ack.yiaddr = "10.9.0.7".parse().unwrap();
        ack.set(OPT_SUBNET_MASK, vec![255, 255, 0, 0]);
        ack.set(OPT_ROUTER, vec![10, 9, 0, 1]);
        let res =
            |a: &Msg, p| json!({"result": result(a, p).unwrap().to_value(Version::V110).unwrap()});
        let v = res(&ack, 0);
        assert_eq!(
            v["result"],
            json!({"cniVersion": "1.1.0",
                   "ips": [{"address": "10.9.0.7/16", "gateway": "10.9.0.1"}],
                   "routes": [{"dst": "0.0.0.0/0", "gw": "10.9.0.1"}]})
        );
        ack.set(OPT_CLASSLESS_ROUTES, vec![24, 10, 8, 1, 0, 0, 0, 0]);
        let v = res(&ack, 5);
        assert_eq!(
            v["result"]["routes"],
            json!([{"dst": "10.8.1.0/24", "gw": "0.0.0.0", "priority": 5, "scope": 253}])
        );
        ack.options.retain(|(c, _)| *c != OPT_SUBNET_MASK);
        assert!(result(&ack, 0).unwrap_err().msg.contains("Subnet Mask"));
    }
}
