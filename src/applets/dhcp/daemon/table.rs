//! The lease table: one slot per attachment holding a lease, the thread that renews it, and
//! the calls' turns on an attachment. Every verb of the daemon ends here.

use super::super::lease::{Bound, Client, Cmd, Mailbox, Timing, lock, log};
use super::super::mapping::{Key, client_id, key, name, options, result};
use super::super::packet::{Msg, OPT_SERVER_ID};
use super::super::proto::{Call, Op};
use super::super::store::Store;
use super::spawn;
use crate::cni::env::validate_ifname;
use crate::cni::result::CniResult;
use crate::error::{Error, Result};
use crate::netns::NetNs;
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

struct Slot {
    generation: u64,
    mailbox: Arc<Mailbox>,
    ack: Arc<Mutex<Msg>>,
    thread: Option<JoinHandle<()>>,
}

pub(super) struct Daemon {
    leases: Mutex<HashMap<Key, Slot>>,
    /// The attachments a call is working on ([`Daemon::take_turn`]), and its signal when one
    /// ends.
    busy: Mutex<HashSet<Key>>,
    turn_over: Condvar,
    hostprefix: String,
    timing: Timing,
    generation: AtomicU64,
    store: Store,
}

/// The daemon's answer to a call.
pub(super) struct Answer {
    /// ADD's result; other verbs have none.
    pub result: Option<CniResult>,
    /// A new lease was acquired for the call: release it if the answer cannot be delivered.
    pub acquired: bool,
}

/// The lease an ADD hands over.
struct Handed {
    ack: Msg,
    /// Acquired for this call (not one held already).
    acquired: bool,
}

impl Daemon {
    pub(super) fn new(hostprefix: String, timing: Timing, store: Store) -> Daemon {
        Daemon {
            leases: Mutex::new(HashMap::new()),
            busy: Mutex::new(HashSet::new()),
            turn_over: Condvar::new(),
            hostprefix,
            timing,
            generation: AtomicU64::new(0),
            store,
        }
    }

    /// The answer to `c`.
    pub(super) fn answer(&'static self, c: Call) -> Result<Answer> {
        let k = key(&c);
        let none = Answer {
            result: None,
            acquired: false,
        };
        match c.op {
            Op::Add => {
                let h = self.lease_for(&c, &k)?;
                let r = result(&h.ack, c.priority).inspect_err(|_| self.release(&k))?;
                Ok(Answer {
                    result: Some(r),
                    acquired: h.acquired,
                })
            }
            Op::Del => {
                self.release(&k);
                Ok(none)
            }
            Op::Check => match lock(&self.leases).get(&k) {
                Some(s) => {
                    s.mailbox.post(Cmd::Check);
                    Ok(none)
                }
                None => Err(Error::internal(format!(
                    "no DHCP lease held for {}",
                    name(&k)
                ))),
            },
            Op::Status => Ok(none),
            Op::Gc => {
                self.release_all_but(&c.network, &c.keep);
                Ok(none)
            }
        }
    }

    /// GC: release the leases of `network` whose (container ID, interface) `keep` lacks.
    fn release_all_but(&self, network: &str, keep: &[(String, String)]) {
        let keep: HashSet<(&str, &str)> =
            keep.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let gone: Vec<Key> = lock(&self.leases)
            .keys()
            .filter(|(cid, net, ifname)| {
                net == network && !keep.contains(&(cid.as_str(), ifname.as_str()))
            })
            .cloned()
            .collect();
        for k in gone {
            self.release(&k);
        }
    }

    /// The plugin that asked for the new lease of `k` is gone: release it.
    pub(super) fn release_undelivered(&self, k: &Key, why: &str) {
        log(
            &name(k),
            &format!("the plugin is gone{why}, releasing the lease"),
        );
        self.release(k);
    }

    /// The calls on attachment `k` take turns: an ADD from the check of the leases held to the
    /// new lease's slot, a DEL from the slot's removal to the release. A runtime that retries
    /// an ADD while the first still waits for the server then gets the first one's lease, and
    /// no lease is acquired twice (the first one's thread would renew it for ever).
    fn take_turn(&self, k: &Key) -> Turn<'_> {
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
    fn lease_for(&'static self, c: &Call, k: &Key) -> Result<Handed> {
        let _turn = self.take_turn(k);
        if let Some(s) = lock(&self.leases).get(k) {
            s.mailbox.post(Cmd::Check);
            return Ok(Handed {
                ack: lock(&s.ack).clone(),
                acquired: false,
            });
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
        let ack = b.ack.clone();
        self.store.save(&client.id, c, &b.ack);
        self.start_renewing(c, k, client, b)?;
        Ok(Handed {
            ack,
            acquired: true,
        })
    }

    /// Hold lease `b` of `client`, which `c` made for `k`, in its slot: its thread renews it
    /// (recording each new ACK) until a DEL or its end.
    fn start_renewing(&'static self, c: &Call, k: &Key, client: Client, b: Bound) -> Result<()> {
        let ack = Arc::new(Mutex::new(b.ack.clone()));
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let (shared, key, mailbox) = (ack.clone(), k.clone(), client.mailbox.clone());
        let (call, id) = (c.clone(), client.id.clone());
        // Inserted under the lock the thread's `drop_ended` takes, so a thread that ends at
        // once cannot leave its slot behind.
        let mut leases = lock(&self.leases);
        let thread = spawn(
            move || {
                client.maintain(b, |b| {
                    *lock(&shared) = b.ack.clone();
                    self.store.save(&id, &call, &b.ack);
                });
                self.drop_ended(&key, generation);
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
    pub(super) fn resume_recorded(&'static self) {
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
                self.start_renewing(&s.call, &k, client, b)?;
                log(&name, &format!("lease restored, expires in {left}s"));
                Ok(())
            });
            if let Err(e) = kept {
                log(&name, &format!("lease dropped: {}", e.msg));
                self.store.remove(&name);
            }
        }
    }

    /// DEL: release the lease of `k` and wait until the DHCPRELEASE is sent; forget its record.
    fn release(&self, k: &Key) {
        let _turn = self.take_turn(k);
        let slot = lock(&self.leases).remove(k);
        if let Some(s) = slot {
            s.mailbox.post(Cmd::Stop);
            if let Some(t) = s.thread {
                // A panic on any thread ends the whole daemon (the panic hook exits with status
                // 1, `process.rs`), so the join cannot see one: systemd's unit restarts the
                // daemon and every lease resumes from its record.
                let _ = t.join();
            }
        }
        self.store.remove(&name(k));
    }

    /// A lease thread ended on its own: drop its slot and record, unless a newer lease took
    /// the key.
    fn drop_ended(&self, k: &Key, generation: u64) {
        let mut leases = lock(&self.leases);
        if leases.get(k).is_some_and(|s| s.generation == generation) {
            leases.remove(k);
            self.store.remove(&name(k));
        }
    }
}

/// A call's turn on an attachment ([`Daemon::take_turn`]), given up when dropped.
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
