//! Network namespaces as open file descriptors.
//!
//! A [`NetNs`] holds an fd to a namespace (a `/var/run/netns/x` bind mount or a
//! `/proc/<pid>/ns/net` file). [`NetNs::enter`] runs a closure inside the namespace on the
//! current thread and always switches back. setns(2) with `CLONE_NEWNET` only affects the
//! calling thread, so threads that enter namespaces (bridge DEL's helpers, the dhcp daemon's
//! lease threads, parallel tests) each switch only themselves: code that enters a namespace
//! must do its namespace work on the thread that entered it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, setns};
use nix::sys::stat::{Mode, fstat};
use nix::sys::statfs::{NSFS_MAGIC, PROC_SUPER_MAGIC, fstatfs};

use crate::error::code;
use crate::error::{self, Context};

/// Why a namespace path could not be opened. `NotFound` is distinct so that DEL can treat an
/// already-gone namespace as success.
#[derive(Debug)]
pub enum OpenError {
    /// The path does not exist.
    NotFound(String),
    /// The path exists but is not a network namespace file; the second member says what it is.
    NotNetns(String, String),
    /// Any other failure (permissions, ...).
    Io(String, io::Error),
}

impl OpenError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, OpenError::NotFound(_))
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::NotFound(p) => {
                write!(
                    f,
                    "failed to open netns {p:?} (CNI_NETNS): no such file or directory"
                )
            }
            OpenError::NotNetns(p, what) => {
                write!(
                    f,
                    "CNI_NETNS {p:?} is not a network namespace (it is {what})"
                )
            }
            OpenError::Io(p, e) => write!(f, "failed to open netns {p:?} (CNI_NETNS): {e}"),
        }
    }
}

impl std::error::Error for OpenError {}

impl From<OpenError> for error::Error {
    fn from(e: OpenError) -> Self {
        let c = if matches!(e, OpenError::Io(..)) {
            code::INTERNAL
        } else {
            code::INVALID_NETNS
        };
        error::Error::new(c, e.to_string())
    }
}

/// An open network namespace.
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
    path: String,
}

/// `NS_GET_NSTYPE` (linux/nsfs.h, `_IO(0xb7, 0x3)`): the CLONE_NEW* type of a namespace fd.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

/// The name of a CLONE_NEW* namespace type, for the message.
fn ns_kind(t: libc::c_int) -> String {
    let name = match t {
        libc::CLONE_NEWNS => "mnt",
        libc::CLONE_NEWUTS => "uts",
        libc::CLONE_NEWIPC => "ipc",
        libc::CLONE_NEWUSER => "user",
        libc::CLONE_NEWPID => "pid",
        libc::CLONE_NEWCGROUP => "cgroup",
        0x80 => "time", // CLONE_NEWTIME
        t => return format!("a namespace of type {t:#x}"),
    };
    format!("a {name} namespace")
}

impl NetNs {
    /// Open the network namespace at `path`. The file is looked at before it is opened (with
    /// O_PATH, which runs no open routine: a FIFO does not wait for a writer, a device is not
    /// touched), then opened non-blocking and checked to be the same file and a network
    /// namespace (NS_GET_NSTYPE): anything else is `NotNetns`, never a hang.
    pub fn open(path: &str) -> Result<NetNs, OpenError> {
        let io = |e: nix::Error| OpenError::Io(path.into(), e.into());
        let not = |what: &str| OpenError::NotNetns(path.into(), what.into());
        let probe = nix::fcntl::open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| match e {
                Errno::ENOENT => OpenError::NotFound(path.into()),
                e => io(e),
            })?;
        let st = fstat(&probe).map_err(io)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(not(crate::smallfile::kind(st.st_mode)));
        }
        // Namespace files live on nsfs (procfs before Linux 3.19).
        let fs = fstatfs(&probe).map_err(io)?.filesystem_type();
        if fs != NSFS_MAGIC && fs != PROC_SUPER_MAGIC {
            return Err(not("a regular file"));
        }
        // A regular file on nsfs or procfs: opening it cannot block; O_NONBLOCK makes sure of
        // it if the path was replaced meanwhile, and the inode check below notices that.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => OpenError::NotFound(path.into()),
                _ => OpenError::Io(path.into(), e),
            })?;
        let again = fstat(&file).map_err(io)?;
        if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino) {
            return Err(not("a file that changed while it was opened"));
        }
        // SAFETY: NS_GET_NSTYPE takes no argument and only reads the fd, which is open. (The
        // request is a c_ulong in glibc and a c_int in musl: `as _` takes either.)
        let t = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE as _) };
        if t < 0 && fs != NSFS_MAGIC {
            // ENOTTY: a procfs file that is not a namespace.
            return Err(not("a procfs file"));
        }
        if t >= 0 && t != libc::CLONE_NEWNET {
            return Err(not(&ns_kind(t)));
        }
        // An nsfs file without the ioctl (Linux before 4.11, or qemu-user, which does not
        // translate it): its /proc/self/fd link names the type ("mnt:[4026531841]"). Without
        // /proc either, it is left to setns(CLONE_NEWNET), which refuses another type.
        if t < 0
            && let Ok(link) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            && let Some((kind, _)) = link.to_string_lossy().split_once(":[")
            && kind != "net"
        {
            return Err(not(&format!("a {kind} namespace")));
        }
        Ok(NetNs {
            fd: file.into(),
            path: path.into(),
        })
    }

    /// The namespace at `path`, for DEL: `None` when `path` is empty or the namespace is already gone, which DEL treats
    /// as nothing left to do inside it.
    pub fn open_existing(path: &str) -> error::Result<Option<NetNs>> {
        if path.is_empty() {
            return Ok(None);
        }
        match NetNs::open(path) {
            Ok(ns) => Ok(Some(ns)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The namespace of the calling thread.
    pub fn current() -> error::Result<NetNs> {
        let path = "/proc/thread-self/ns/net";
        let f = File::open(path).ctx("open current netns")?;
        Ok(NetNs {
            fd: f.into(),
            path: path.into(),
        })
    }

    /// A new, empty, anonymous namespace that lives as long as the returned value (host-device
    /// renames a device there when its name is taken in the container). Dropped
    /// while it still holds a device, the kernel destroys a virtual one and hands a physical one
    /// to the initial namespace, so callers move devices out before dropping it.
    pub fn temporary() -> error::Result<NetNs> {
        let back = NetNs::current()?;
        nix::sched::unshare(CloneFlags::CLONE_NEWNET).ctx("failed to create a temporary netns")?;
        let _guard = Restore(back);
        let path = "/proc/thread-self/ns/net";
        let f = File::open(path).ctx("open temporary netns")?;
        Ok(NetNs {
            fd: f.into(),
            path: "temporary netns".into(),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// flock(LOCK_EX) on the namespace file, held until the returned file is dropped: the lock
    /// the Go `sbr` plugin takes (go-filemutex on CNI_NETNS) to serialise its runs per namespace.
    pub fn lock(&self) -> error::Result<File> {
        // A lock on its own open file (flock locks belong to the open file, a dup of ours would
        // be unlocked only when the namespace is closed), of the same inode: reopened through
        // the checked open, so a path replaced by a FIFO since cannot hang us.
        let f = File::from(NetNs::open(&self.path).map_err(error::Error::from)?.fd);
        let same = |a: &File| {
            fstat(a)
                .ok()
                .zip(fstat(&self.fd).ok())
                .is_some_and(|(a, b)| (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino))
        };
        if !same(&f) {
            return Err(error::Error::new(
                code::INVALID_NETNS,
                format!("{}: no longer the namespace that was opened", self.path),
            ));
        }
        f.lock().ctx(format_args!("lock {}", self.path))?;
        Ok(f)
    }

    /// Switch the calling thread into this namespace (no way back by itself; see `enter`).
    fn set(&self) -> error::Result<()> {
        setns(&self.fd, CloneFlags::CLONE_NEWNET).ctx(format_args!("setns {}", self.path))
    }

    /// Run `f` inside this namespace on the current thread, then switch back to the namespace
    /// the thread was in. If switching back fails the process aborts: continuing in the wrong
    /// namespace would silently change the wrong interfaces.
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> error::Result<T> {
        let back = NetNs::current()?;
        self.set()?;
        let _guard = Restore(back);
        Ok(f())
    }
}

impl AsFd for NetNs {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Switches the thread back to the saved namespace when dropped (also during unwinding).
struct Restore(NetNs);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = self.0.set() {
            crate::warn!("cnibox: cannot return to the original network namespace: {e}");
            std::process::abort();
        }
    }
}

/// Throwaway persistent namespaces for tests (no `ip` binary needed).
#[cfg(test)]
pub(crate) mod testing {
    use std::ops::Deref;
    use std::sync::atomic::{AtomicU32, Ordering};

    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    use nix::sched::{CloneFlags, unshare};

    use super::NetNs;
    use crate::error::{self, Context};

    /// A namespace bind-mounted at `/run/netns/<name>`; unmounted and removed on drop.
    #[derive(Debug)]
    pub struct TempNetNs {
        ns: NetNs,
    }

    impl TempNetNs {
        /// Create `/run/netns/<prefix>-<pid>-<n>` with a fresh, empty network namespace.
        pub fn new(prefix: &str) -> error::Result<TempNetNs> {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let name = format!("{prefix}-{}-{n}", std::process::id());
            let path = format!("/run/netns/{name}");
            std::fs::create_dir_all("/run/netns").ctx("create /run/netns")?;
            std::fs::File::create(&path).ctx(format_args!("create {path}"))?;
            let p = path.clone();
            // unshare(CLONE_NEWNET) affects only the calling thread, so do it on a thread of its
            // own and pin the new namespace with a bind mount.
            let res = std::thread::spawn(move || -> error::Result<()> {
                unshare(CloneFlags::CLONE_NEWNET).ctx("unshare netns")?;
                mount(
                    Some("/proc/thread-self/ns/net"),
                    p.as_str(),
                    None::<&str>,
                    MsFlags::MS_BIND,
                    None::<&str>,
                )
                .ctx(format_args!("bind mount {p}"))
            })
            .join()
            .unwrap_or_else(|_| Err(error::Error::internal("netns thread panicked")));
            if let Err(e) = res {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
            let ns = NetNs::open(&path).map_err(error::Error::from);
            match ns {
                Ok(ns) => Ok(TempNetNs { ns }),
                Err(e) => {
                    let _ = umount2(path.as_str(), MntFlags::MNT_DETACH);
                    let _ = std::fs::remove_file(&path);
                    Err(e)
                }
            }
        }
    }

    impl Deref for TempNetNs {
        type Target = NetNs;
        fn deref(&self) -> &NetNs {
            &self.ns
        }
    }

    impl Drop for TempNetNs {
        fn drop(&mut self) {
            let path = self.ns.path().to_string();
            let _ = umount2(path.as_str(), MntFlags::MNT_DETACH);
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::TempNetNs;
    use super::*;

    fn root() -> bool {
        crate::testing::require_root("netns")
    }

    #[test]
    fn open_missing_is_not_found() {
        let e = NetNs::open("/nonexistent/cnibox/ns").unwrap_err();
        assert!(e.is_not_found(), "{e}");
        assert_eq!(error::Error::from(e).code, code::INVALID_NETNS);
    }

    /// The error `NetNs::open(path)` gives, on a thread of its own: a hang fails the test
    /// after 10 s instead of hanging it (`unblock` then lets the thread end).
    fn open_err_within(path: &str, unblock: impl FnOnce()) -> OpenError {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.to_string();
        std::thread::spawn(move || {
            let _ = tx.send(NetNs::open(&p).map(|_| ()));
        });
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(r) => r.expect_err(path),
            Err(_) => {
                unblock();
                panic!("NetNs::open({path:?}) hangs");
            }
        }
    }

    #[track_caller]
    fn assert_not_netns(e: OpenError, path: &str, what: &str) {
        let OpenError::NotNetns(p, w) = &e else {
            panic!("{path}: {e:?}");
        };
        assert_eq!((p.as_str(), w.as_str()), (path, what));
        let e = error::Error::from(e);
        assert_eq!(e.code, code::INVALID_NETNS, "{e:?}");
        assert_eq!(
            e.msg,
            format!("CNI_NETNS {path:?} is not a network namespace (it is {what})")
        );
    }

    #[test]
    fn open_regular_file_is_not_netns() {
        let p = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        assert_not_netns(open_err_within(p, || {}), p, "a regular file");
        let d = env!("CARGO_MANIFEST_DIR");
        assert_not_netns(open_err_within(d, || {}), d, "a directory");
        assert_not_netns(
            open_err_within("/dev/null", || {}),
            "/dev/null",
            "a character device",
        );
    }

    /// A FIFO is refused at once: it used to block in open(2) until a writer came.
    #[test]
    fn open_fifo_is_not_netns_and_does_not_block() {
        let dir = std::env::temp_dir().join(format!("cnibox-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("ns");
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let path = fifo.to_str().unwrap().to_string();
        let e = open_err_within(&path, || {
            let _ = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo);
        });
        let _ = std::fs::remove_dir_all(&dir);
        assert_not_netns(e, &path, "a FIFO");
    }

    /// procfs files that are not a network namespace: another namespace type, a plain one.
    #[test]
    fn open_other_namespaces_and_procfs_files_is_not_netns() {
        for (p, what) in [
            ("/proc/self/ns/mnt", "a mnt namespace"),
            ("/proc/self/ns/uts", "a uts namespace"),
            ("/proc/self/status", "a procfs file"),
        ] {
            assert_not_netns(open_err_within(p, || {}), p, what);
        }
        let ns = NetNs::open("/proc/self/ns/net").unwrap();
        assert_eq!(ns.path(), "/proc/self/ns/net");
    }

    #[test]
    fn current_and_enter_switch_back() {
        if !root() {
            return;
        }
        let ns = TempNetNs::new("cnibox-ns").unwrap();
        let ino = |p: &str| {
            std::fs::metadata(p)
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .unwrap()
        };
        let host = ino("/proc/thread-self/ns/net");
        let inside = ns.enter(|| ino("/proc/thread-self/ns/net")).unwrap();
        assert_ne!(host, inside);
        assert_eq!(inside, ino(ns.path()));
        assert_eq!(host, ino("/proc/thread-self/ns/net"));
        let reopened = NetNs::open(ns.path()).unwrap();
        assert!(reopened.fd() >= 0);
        let path = ns.path().to_string();
        drop(ns);
        assert!(NetNs::open(&path).unwrap_err().is_not_found());
    }

    #[test]
    fn temporary_is_new_and_switches_back() {
        if !root() {
            return;
        }
        let ino = |p: &str| {
            std::fs::metadata(p)
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .unwrap()
        };
        let host = ino("/proc/thread-self/ns/net");
        let t = NetNs::temporary().unwrap();
        assert_eq!(host, ino("/proc/thread-self/ns/net"), "not switched back");
        let inside = t.enter(|| ino("/proc/thread-self/ns/net")).unwrap();
        assert_ne!(host, inside);
    }
}
