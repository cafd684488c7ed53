//! Network namespaces as open file descriptors.
//!
//! A [`NetNs`] holds an fd to a namespace (a `/var/run/netns/x` bind mount or a
//! `/proc/<pid>/ns/net` file). [`NetNs::enter`] runs a closure inside the namespace on the
//! current thread and always switches back; the program is single-threaded, so "current thread"
//! is the whole process, while tests may use it from parallel threads safely (setns(2) with
//! `CLONE_NEWNET` only affects the calling thread).

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sched::{CloneFlags, setns};
use nix::sys::statfs::{NSFS_MAGIC, PROC_SUPER_MAGIC, fstatfs};

use crate::error::code;
use crate::error::{self, Context};

/// Why a namespace path could not be opened. `NotFound` is distinct so that DEL can treat an
/// already-gone namespace as success.
#[derive(Debug)]
pub enum OpenError {
    /// The path does not exist.
    NotFound(String),
    /// The path exists but is not a namespace file.
    NotNetns(String),
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
                write!(f, "failed to open netns {p:?}: no such file or directory")
            }
            OpenError::NotNetns(p) => {
                write!(f, "failed to open netns {p:?}: not a network namespace")
            }
            OpenError::Io(p, e) => write!(f, "failed to open netns {p:?}: {e}"),
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

impl NetNs {
    /// Open the namespace at `path`, checking that it is a namespace file (nsfs or procfs).
    pub fn open(path: &str) -> Result<NetNs, OpenError> {
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => OpenError::NotFound(path.into()),
            _ => OpenError::Io(path.into(), e),
        })?;
        let st = fstatfs(&file).map_err(|e| OpenError::Io(path.into(), e.into()))?;
        let t = st.filesystem_type();
        if t != NSFS_MAGIC && t != PROC_SUPER_MAGIC {
            return Err(OpenError::NotNetns(path.into()));
        }
        Ok(NetNs {
            fd: file.into(),
            path: path.into(),
        })
    }

    /// The namespace of the calling thread.
    /// For DEL: `None` when `path` is empty or the namespace is already gone, which DEL treats
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

    /// Wrap an fd that is known to refer to a network namespace.
    pub fn from_fd(fd: OwnedFd, path: impl Into<String>) -> NetNs {
        NetNs {
            fd,
            path: path.into(),
        }
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
        let f = File::open(&self.path).ctx(format_args!("open {} to lock it", self.path))?;
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
#[doc(hidden)]
pub mod testing {
    use std::ops::Deref;
    use std::sync::atomic::{AtomicU32, Ordering};

    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    use nix::sched::{CloneFlags, unshare};

    use super::NetNs;
    use crate::error::{self, Context};

    /// A namespace bind-mounted at `/run/netns/<name>`; unmounted and removed on drop.
    #[derive(Debug)]
    pub struct TempNetNs {
        pub name: String,
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
                Ok(ns) => Ok(TempNetNs { name, ns }),
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

    #[test]
    fn open_regular_file_is_not_netns() {
        let e = NetNs::open(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap_err();
        assert!(matches!(e, OpenError::NotNetns(_)), "{e}");
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
