//! Knowing that `iptables-restore` has committed before it exits.
//!
//! With iptables-nft, `iptables-restore` commits its batch inside one `sendmsg` and then exits;
//! its exit closes the nf_tables socket, and that close waits for the kernel to destroy what
//! the batch deleted (an RCU grace period: ~8-10 ms on a 2-core VM, measured with `strace -T`
//! on a portmap DEL), so a DEL waited for a deletion that had already taken effect. The kernel
//! announces every commit to the NFNLGRP_NFTABLES group: NFT_MSG_NEWGEN, naming the process that
//! committed (NFTA_GEN_PROC_PID). [`wait`] returns at the child's last expected commit, once the
//! rules are in or gone, and leaves the child to finish its exit alone (reaped by init or the
//! runtime's subreaper after the plugin exits, as the link-deleting child of
//! `NlSocket::request_until` is).
//!
//! Anything else is the old wait for the child's exit, with its status and stderr: a refused
//! script (no commit: the kernel aborts the batch, or the tool rejects it first), legacy
//! iptables (no nf_tables commits at all), a wrapper script that runs the tool as its child
//! (another pid), an empty commit (the kernel announces none), and notifications lost under a
//! flood of other commits (ENOBUFS: the count could be wrong, so it stops counting).

use crate::netfilter::nft;
use crate::netlink::NlSocket;
use crate::netlink::wire;
use netlink_sys::protocols::NETLINK_NETFILTER;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io::Read;
use std::os::fd::AsFd;
use std::process::{Child, ExitStatus};

/// NFNLGRP_NFTABLES: nf_tables' change notifications.
const NFNLGRP_NFTABLES: u32 = 7;
/// NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWGEN: a commit's announcement.
const NEWGEN: u16 = (10 << 8) | 15;
/// NFTA_GEN_PROC_PID: the committing process (big endian u32).
const NFTA_GEN_PROC_PID: u16 = 2;
/// struct nfgenmsg, before a NEWGEN's attributes.
const NFGENMSG_LEN: usize = 4;

/// A socket listening for nf_tables commits, opened before the child starts so that none of
/// its commits can be missed.
pub(super) struct CommitWatch {
    sock: NlSocket,
}

impl CommitWatch {
    /// `None` when nf_tables notifications cannot be had (no nf_tables, no permission): the
    /// caller then waits for the exit.
    pub(super) fn start() -> Option<CommitWatch> {
        let sock = NlSocket::open(NETLINK_NETFILTER, "nftables notifications").ok()?;
        sock.join(NFNLGRP_NFTABLES).ok()?;
        Some(CommitWatch { sock })
    }

    /// Count the commits of process `pid` in what is queued. `false`: stop watching (a
    /// notification was lost, or the socket failed).
    fn count(&mut self, pid: u32, seen: &mut usize) -> bool {
        loop {
            let got = self.sock.take_notifications(|ty, body| {
                if ty == NEWGEN && committer(body) == Some(pid) {
                    *seen += 1;
                }
            });
            match got {
                Ok(true) => {}
                Ok(false) => return true,
                Err(_) => return false,
            }
        }
    }
}

impl Drop for CommitWatch {
    fn drop(&mut self) {
        // Its close would wait, as any netfilter socket's, for what the commit deleted.
        nft::linger(self.sock.as_fd());
    }
}

/// The process a NEWGEN payload names.
fn committer(body: &[u8]) -> Option<u32> {
    let attrs = body.get(NFGENMSG_LEN..)?;
    wire::attrs(attrs)
        .find(|(ty, _)| *ty == NFTA_GEN_PROC_PID)
        .and_then(|(_, v)| Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?)))
}

/// How a child ended for [`wait`].
pub(super) enum Ended {
    /// It made its `commits` commits; it may still be exiting.
    Committed,
    /// It exited (or closed its stderr and then exited) before: its status and stderr.
    Exited(ExitStatus, String),
}

/// Wait until `child` (stdin already written and closed, stderr piped) has made `commits`
/// nf_tables commits, or has exited. Reads its stderr meanwhile, so a child writing much
/// cannot block on a full pipe.
pub(super) fn wait(
    child: &mut Child,
    mut watch: Option<CommitWatch>,
    commits: usize,
) -> std::io::Result<Ended> {
    let pid = child.id();
    let mut stderr = child.stderr.take();
    let mut err = Vec::new();
    let mut seen = 0;
    if commits == 0 {
        watch = None;
    }
    while let Some(pipe) = stderr.as_mut() {
        let (watch_ready, pipe_ready) = {
            let mut fds = vec![PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
            if let Some(w) = watch.as_ref() {
                fds.push(PollFd::new(w.sock.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            (fds.get(1).is_some_and(ready), ready(&fds[0]))
        };
        if watch_ready && let Some(w) = watch.as_mut() {
            if !w.count(pid, &mut seen) {
                watch = None;
            } else if seen >= commits {
                return Ok(Ended::Committed);
            }
        }
        if pipe_ready {
            let mut chunk = [0u8; 4096];
            match pipe.read(&mut chunk) {
                Ok(0) => stderr = None,
                Ok(n) => err.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    let status = child.wait()?;
    Ok(Ended::Exited(
        status,
        String::from_utf8_lossy(&err).trim().to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::{CommitWatch, Ended, committer, wait};

    /// A NEWGEN's payload comes from the kernel, but is read as foreign bytes: short,
    /// truncated or odd attributes name no process, and nothing panics.
    #[test]
    fn a_commit_names_its_process_or_none() {
        let pid = |v: u32| {
            let mut b = vec![2, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 7, 8, 0, 2, 0];
            b.extend_from_slice(&v.to_be_bytes());
            b
        };
        assert_eq!(committer(&pid(4242)), Some(4242));
        let good = pid(4242);
        for cut in 0..good.len() {
            assert_eq!(committer(&good[..cut]), None, "cut at {cut}");
        }
        // A PID attribute too short for a u32, and one of length 0.
        assert_eq!(committer(&[2, 0, 0, 0, 6, 0, 2, 0, 1, 2]), None);
        assert_eq!(committer(&[2, 0, 0, 0, 4, 0, 2, 0]), None);
        assert_eq!(committer(&[2, 0, 0, 0, 0, 0, 2, 0, 9, 9, 9, 9]), None);
    }
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// `iptables-restore` commits at `COMMIT` and then reads on: with its stdin kept open it is
    /// still running when `wait` must return, on the commit's announcement, with the rule in.
    /// Were the announcement missed, `wait` would wait for the exit; the watchdog then ends
    /// the child after two minutes (a bound for the failure only) and the test fails.
    #[test]
    fn a_commit_is_seen_before_the_exit() {
        let name = format!("cnibox-ipt-commit-{}", std::process::id());
        assert!(
            Command::new("ip")
                .args(["netns", "add", &name])
                .status()
                .is_ok_and(|s| s.success()),
            "ip netns add {name}"
        );
        let path = format!("/run/netns/{name}");
        let outcome = std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).expect("open netns");
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let watch = CommitWatch::start().expect("nf_tables notifications");
            let mut child = Command::new("iptables-restore")
                .arg("--noflush")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("iptables-restore");
            let mut stdin = child.stdin.take().expect("stdin");
            stdin
                .write_all(b"*filter\n-A FORWARD -s 10.9.9.9/32 -j ACCEPT\nCOMMIT\n")
                .expect("write");
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let (done, stop) = std::sync::mpsc::channel::<()>();
            let dog = std::thread::spawn(move || {
                if stop.recv_timeout(Duration::from_secs(120)).is_err() {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                }
            });
            let ended = wait(&mut child, Some(watch), 1).expect("wait");
            let running = child.try_wait().expect("try_wait").is_none();
            let _ = done.send(());
            let _ = dog.join();
            let rules = Command::new("iptables")
                .args(["-S", "FORWARD"])
                .output()
                .expect("iptables -S");
            drop(stdin);
            let status = child.wait().expect("wait for the child");
            (
                matches!(ended, Ended::Committed),
                running,
                String::from_utf8_lossy(&rules.stdout).into_owned(),
                status.success(),
            )
        })
        .join();
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        let (committed, running, rules, success) = outcome.expect("test thread");
        assert!(committed, "wait returned at the exit, not at the commit");
        assert!(running, "the child had exited when wait returned");
        assert!(
            rules.contains("-A FORWARD -s 10.9.9.9/32 -j ACCEPT"),
            "{rules}"
        );
        assert!(success, "iptables-restore failed");
    }
}
