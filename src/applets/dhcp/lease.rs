//! One lease: the DHCP client on a packet socket bound to the container's interface, and the
//! thread that keeps the lease (upstream `lease.go`).
//!
//! As upstream (insomniacslk/dhcp's nclient4): every message leaves as a broadcast frame, the
//! client identifier is type 0 followed by the ID, DISCOVER and REQUEST carry the maximum
//! message size 1500 and the configured options, a renewal is a REQUEST with `ciaddr` and no
//! server identifier, a RELEASE goes to the server's address. Timing as upstream: each attempt
//! waits `timeout` for an answer; failed attempts are retried after 2 s ± 1 s four times, then
//! after 4 s ± 1 s doubling up to `resendmax`, until `resendtimeout` has passed. T1 defaults to
//! half the lease, T2 to 85 % of it, the lease to an hour. A renewal that fails past T2 becomes a
//! rebinding (a new DISCOVER); a lease that expires sets the interface down.
//!
//! The `-broadcast` flag sets the BROADCAST bit of DISCOVER and REQUEST (upstream accepts the
//! flag but no longer uses it); replies are read from the packet socket either way.

use super::packet::{self, Msg};
use crate::error::{Error, Result};
use crate::netlink::Handle;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
pub struct Timing {
    pub timeout: Duration,
    pub resend_max: Duration,
    pub resend_timeout: Duration,
    pub broadcast: bool,
}

/// What the daemon tells a lease's thread.
#[derive(Clone, Copy, PartialEq)]
pub enum Cmd {
    /// CHECK or a repeated ADD: log, go on.
    Check,
    /// DEL: release and end.
    Stop,
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The daemon's commands to one lease thread; a Stop is never overwritten.
#[derive(Default)]
pub struct Mailbox {
    cmd: Mutex<Option<Cmd>>,
    cv: Condvar,
}

impl Mailbox {
    pub fn post(&self, c: Cmd) {
        let mut g = lock(&self.cmd);
        if *g != Some(Cmd::Stop) {
            *g = Some(c);
        }
        self.cv.notify_one();
    }

    fn wait(&self, d: Duration) -> Option<Cmd> {
        let g = lock(&self.cmd);
        let (mut g, _) = self
            .cv
            .wait_timeout_while(g, d, |c| c.is_none())
            .unwrap_or_else(|e| e.into_inner());
        g.take()
    }
}

/// A packet socket on one interface, sending and receiving IPv4 frames.
struct Port {
    fd: OwnedFd,
    ifindex: i32,
    mac: [u8; 6],
}

fn ll_addr(ifindex: i32) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = (libc::ETH_P_IP as u16).to_be();
    sa.sll_ifindex = ifindex;
    sa
}

fn os<T: Default + PartialOrd>(r: T) -> io::Result<T> {
    if r < T::default() {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Port {
    fn open(ifindex: u32, mac: [u8; 6]) -> io::Result<Port> {
        let ifindex = ifindex as i32;
        let proto = i32::from((libc::ETH_P_IP as u16).to_be());
        // SAFETY: socket(2) with constant arguments; the fd is owned right after.
        let fd = os(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                proto,
            )
        })?;
        // SAFETY: fd is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let sa = ll_addr(ifindex);
        // SAFETY: sa is a valid sockaddr_ll and its size is passed.
        os(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const sa).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        })?;
        Ok(Port { fd, ifindex, mac })
    }

    fn send(&self, src: Ipv4Addr, dst: Ipv4Addr, m: &Msg) -> io::Result<()> {
        let f = packet::frame(src, dst, &m.encode());
        let mut sa = ll_addr(self.ifindex);
        sa.sll_halen = 6;
        sa.sll_addr[..6].copy_from_slice(&[0xff; 6]);
        // SAFETY: f and sa are valid for the lengths passed.
        os(unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                f.as_ptr().cast(),
                f.len(),
                0,
                (&raw const sa).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        })
        .map(|_| ())
    }

    /// The first reply to `xid` for this client that `want` accepts, until `deadline`.
    fn recv(
        &self,
        xid: u32,
        deadline: Instant,
        want: &dyn Fn(&Msg) -> bool,
    ) -> io::Result<Option<Msg>> {
        let mut buf = [0u8; 2048];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, 60_000) as i32;
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
                continue; // timeout (the loop ends it) or EINTR
            }
            // SAFETY: buf is valid for its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            let Ok(n) = usize::try_from(n) else {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            };
            if let Some(m) = packet::unframe(&buf[..n]).and_then(Msg::decode)
                && m.op == 2
                && m.xid == xid
                && m.chaddr == self.mac
                && want(&m)
            {
                return Ok(Some(m));
            }
        }
    }
}

/// A lease the server acknowledged.
pub struct Bound {
    pub ack: Msg,
    pub server: Ipv4Addr,
    renew_at: Instant,
    rebind_at: Instant,
    expire_at: Instant,
}

impl Bound {
    /// The lease `ack` gave, acknowledged `age` ago (zero: just now; more: a lease the daemon
    /// kept before it restarted).
    pub fn new(ack: Msg, server: Ipv4Addr, age: Duration) -> Bound {
        let lease = u64::from(ack.secs(packet::OPT_LEASE_TIME).unwrap_or(3600));
        let opt = |c, default| ack.secs(c).map_or(default, u64::from);
        // A lease time or T1 of 0 must not renew in a loop as fast as the server answers:
        // a renewal a second at most, T1 <= T2 <= lease.
        let t1 = opt(packet::OPT_T1, lease / 2).max(1);
        let t2 = opt(packet::OPT_T2, lease * 85 / 100).max(t1);
        let lease = lease.max(t2);
        let now = Instant::now();
        let at = |s: u64| now + Duration::from_secs(s).saturating_sub(age);
        Bound {
            renew_at: at(t1),
            rebind_at: at(t2),
            expire_at: at(lease),
            ack,
            server,
        }
    }

    pub fn expires_in(&self) -> u64 {
        self.expire_at
            .saturating_duration_since(Instant::now())
            .as_secs()
    }
}

/// The client of one lease. Its sockets were opened inside the container namespace and work
/// from any thread.
pub struct Client {
    port: Port,
    nl: Handle,
    ifindex: u32,
    pub id: String,
    client_id: Vec<u8>,
    options: Vec<(u8, Vec<u8>)>,
    t: Timing,
    pub mailbox: std::sync::Arc<Mailbox>,
    stopped: bool,
}

fn xid() -> u32 {
    u32::from_ne_bytes(crate::random::bytes::<4>())
}

/// ±1 s, from the kernel's random bytes.
fn jitter(d: Duration) -> Duration {
    let r = u64::from(u16::from_ne_bytes(crate::random::bytes::<2>())) * 2000 / 65536;
    (d + Duration::from_millis(r)).saturating_sub(Duration::from_secs(1))
}

impl Client {
    /// Find `ifname` in the calling thread's namespace, set it up if it is down (as upstream)
    /// and open the client's sockets there. `id` names the lease in logs, `wire_id` is the
    /// client identifier sent (at most 254 bytes).
    pub fn open(
        ifname: &str,
        id: String,
        wire_id: Vec<u8>,
        options: Vec<(u8, Vec<u8>)>,
        t: Timing,
    ) -> Result<Client> {
        let mut nl = Handle::new()?;
        let link = nl.link_by_name(ifname)?.ok_or_else(|| {
            Error::internal(format!("error looking up {ifname:?}: no such interface"))
        })?;
        if !link.up {
            nl.set_up(link.index, true)?;
        }
        let mac = link.mac.ok_or_else(|| {
            Error::config(format!("{ifname}: has no MAC address, DHCP needs one"))
        })?;
        let port = Port::open(link.index, mac)
            .map_err(|e| Error::io(format_args!("open packet socket on {ifname}"), e))?;
        let mut client_id = vec![0u8];
        client_id.extend_from_slice(&wire_id);
        Ok(Client {
            port,
            nl,
            ifindex: link.index,
            id,
            client_id,
            options,
            t,
            mailbox: Default::default(),
            stopped: false,
        })
    }

    pub fn mac(&self) -> [u8; 6] {
        self.port.mac
    }

    fn msg(&self, kind: u8, xid: u32) -> Msg {
        let mut m = Msg::request(kind, xid, self.port.mac);
        m.set(packet::OPT_MAX_SIZE, 1500u16.to_be_bytes().to_vec());
        m.set(packet::OPT_CLIENT_ID, self.client_id.clone());
        for (c, v) in &self.options {
            m.set(*c, v.clone());
        }
        m
    }

    /// Sleep `d` unless a command comes; a Stop ends every wait that follows.
    fn pause(&mut self, d: Duration) {
        if self.stopped {
            return;
        }
        match self.mailbox.wait(d) {
            Some(Cmd::Check) => log(&self.id, "checking lease"),
            Some(Cmd::Stop) => self.stopped = true,
            None => {}
        }
    }

    /// Run `attempt` as upstream's backoffRetry does.
    fn retry(
        &mut self,
        what: &str,
        attempt: impl Fn(&Client) -> io::Result<Option<Msg>>,
    ) -> Result<Msg> {
        let start = Instant::now();
        let mut fast = 4;
        let mut delay = Duration::from_secs(4);
        loop {
            // A DEL that came during the last pause: no further attempt.
            if self.stopped {
                return Err(Error::internal(format!("{}: {what}: stopped", self.id)));
            }
            let why = match attempt(self) {
                Ok(Some(m)) if m.kind() == packet::NAK => {
                    let text = m.get(packet::OPT_MESSAGE).unwrap_or_default();
                    format!(
                        "server rejected request with NAK: {}",
                        String::from_utf8_lossy(text)
                    )
                }
                Ok(Some(m)) => return Ok(m),
                Ok(None) => format!("no answer within {}ms", self.t.timeout.as_millis() as u64),
                Err(e) => e.to_string(),
            };
            let sleep = if fast > 0 {
                fast -= 1;
                jitter(Duration::from_secs(2))
            } else {
                let s = jitter(delay);
                delay = (delay * 2).min(self.t.resend_max.max(Duration::from_secs(4)));
                s
            };
            if self.stopped || start.elapsed() + sleep > self.t.resend_timeout {
                return Err(Error::internal(format!(
                    "{}: {what}: {why}; no more tries",
                    self.id
                )));
            }
            log(
                &self.id,
                &format!("{what}: {why}; retrying in {}ms", sleep.as_millis() as u64),
            );
            self.pause(sleep);
        }
    }

    /// DISCOVER, OFFER, REQUEST, ACK.
    pub fn acquire(&mut self) -> Result<Bound> {
        let flags = if self.t.broadcast {
            packet::BROADCAST_FLAG
        } else {
            0
        };
        let ack = self.retry("acquiring lease", |c| {
            let x = xid();
            let mut d = c.msg(packet::DISCOVER, x);
            d.flags = flags;
            let wait = Instant::now() + c.t.timeout;
            c.port
                .send(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, &d)?;
            let offer = c.port.recv(x, wait, &|m| {
                m.kind() == packet::OFFER && m.ip(packet::OPT_SERVER_ID).is_some()
            })?;
            let Some(offer) = offer else { return Ok(None) };
            invalid("DHCPOFFER", &offer)?;
            let sid = offer
                .ip(packet::OPT_SERVER_ID)
                .unwrap_or(Ipv4Addr::UNSPECIFIED);
            let mut r = c.msg(packet::REQUEST, x);
            r.flags = flags;
            r.set(packet::OPT_REQUESTED_IP, offer.yiaddr.octets().to_vec());
            r.set(packet::OPT_SERVER_ID, sid.octets().to_vec());
            let wait = Instant::now() + c.t.timeout;
            c.port
                .send(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, &r)?;
            let ack = c.port.recv(x, wait, &|m| {
                matches!(m.kind(), packet::ACK | packet::NAK)
                    && m.ip(packet::OPT_SERVER_ID) == Some(sid)
            })?;
            ack.as_ref().map_or(Ok(()), |m| invalid("DHCPACK", m))?;
            Ok(ack)
        })?;
        let server = ack
            .ip(packet::OPT_SERVER_ID)
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        Ok(Bound::new(ack, server, Duration::ZERO))
    }

    /// A REQUEST for the address held, to any server (renewing and rebinding alike, as
    /// nclient4 sends both to the broadcast address).
    fn renew(&mut self, b: &Bound) -> Result<Bound> {
        let (addr, server) = (b.ack.yiaddr, b.server);
        let ack = self.retry("renewing lease", |c| {
            let x = xid();
            let mut r = c.msg(packet::REQUEST, x);
            r.ciaddr = addr;
            let wait = Instant::now() + c.t.timeout;
            c.port.send(addr, Ipv4Addr::BROADCAST, &r)?;
            let ack = c.port.recv(x, wait, &|m| {
                matches!(m.kind(), packet::ACK | packet::NAK)
                    && m.ip(packet::OPT_SERVER_ID) == Some(server)
            })?;
            ack.as_ref().map_or(Ok(()), |m| invalid("DHCPACK", m))?;
            Ok(ack)
        })?;
        Ok(Bound::new(ack, server, Duration::ZERO))
    }

    fn release(&self, b: &Bound) -> io::Result<()> {
        let mut m = Msg::request(packet::RELEASE, xid(), self.port.mac);
        m.ciaddr = b.ack.yiaddr;
        m.set(packet::OPT_SERVER_ID, b.server.octets().to_vec());
        m.set(packet::OPT_CLIENT_ID, self.client_id.clone());
        self.port.send(b.ack.yiaddr, b.server, &m)
    }

    /// Keep the lease until a Stop (then release it), the interface goes, or it expires (then
    /// set the interface down). `publish` gets every new ACK.
    pub fn maintain(mut self, mut b: Bound, publish: impl Fn(&Bound)) {
        #[derive(PartialEq)]
        enum State {
            Bound,
            Renewing,
            Rebinding,
        }
        let mut state = State::Bound;
        loop {
            if self.stopped {
                log(&self.id, "releasing lease");
                if let Err(e) = self.release(&b) {
                    log(&self.id, &format!("failed to send DHCPRELEASE: {e}"));
                }
                return;
            }
            if let Ok(None) = self.nl.link_by_index(self.ifindex) {
                log(
                    &self.id,
                    "interface no longer exists, terminating lease maintenance",
                );
                return;
            }
            let now = Instant::now();
            let sleep = match state {
                State::Bound if now >= b.renew_at => {
                    log(&self.id, "renewing lease");
                    state = State::Renewing;
                    continue;
                }
                State::Bound => b.renew_at - now,
                State::Renewing | State::Rebinding => {
                    let r = if state == State::Renewing {
                        self.renew(&b)
                    } else {
                        self.acquire()
                    };
                    // After a round of tries that failed (NAKs, no answer), a pause before
                    // the next: never two REQUESTs back to back.
                    let mut after = Duration::ZERO;
                    match r {
                        Ok(n) => {
                            b = n;
                            publish(&b);
                            log(
                                &self.id,
                                &format!("lease renewed, expires in {}s", b.expires_in()),
                            );
                            state = State::Bound;
                        }
                        Err(e) if self.stopped => log(&self.id, &e.msg),
                        Err(e) => {
                            log(&self.id, &e.msg);
                            if Instant::now() >= b.expire_at {
                                log(&self.id, "lease expired, bringing interface DOWN");
                                let _ = self.nl.set_up(self.ifindex, false);
                                return;
                            }
                            if state == State::Renewing && Instant::now() >= b.rebind_at {
                                log(&self.id, "renewal time expired, rebinding");
                                state = State::Rebinding;
                            }
                            after = jitter(Duration::from_secs(2));
                        }
                    }
                    after
                }
            };
            self.pause(sleep);
        }
    }
}

/// An OFFER or ACK that cannot be a lease ([`Msg::problem`]), as the attempt's error (the
/// retry names it); a NAK is what it is.
fn invalid(what: &str, m: &Msg) -> io::Result<()> {
    match m.problem() {
        Some(p) if m.kind() != packet::NAK => Err(io::Error::other(format!("invalid {what}: {p}"))),
        _ => Ok(()),
    }
}

pub fn log(id: &str, what: &str) {
    crate::warn!("dhcp daemon: {id}: {what}");
}
