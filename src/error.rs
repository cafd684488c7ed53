//! CNI errors as values: every failure carries a spec error code and a message a person can act
//! on. Printed as `{"cniVersion","code","msg","details"}` on stdout by the protocol driver.
//!
//! Upstream returns 999 for nearly every plugin error; we use the spec's codes where one fits
//! (7 for a bad config value, 11 for a lock wait that timed out, 50 from STATUS).
//!
//! **5 or 999, the one rule.** SPEC.md's code 5 is an "I/O failure" (its example: reading the
//! config from stdin): cnibox answers 5 when the host's I/O fails — reading or writing a file,
//! directory or pipe (stdin, host-local's store, tuning's backups, flannel's files, state
//! records), or running a host tool (`iptables-save`/`iptables-restore` missing, failing to
//! start, or failing for a reason that is neither the config's (7) nor the xtables lock's
//! (11)). Build these with [`Error::host_io`]. A request the kernel refused (rtnetlink,
//! nf_tables, conntrack, a sysctl value, a namespace or device call) and anything else is 999,
//! as upstream answers: [`Error::internal`], [`Error::io`], and every `netlink::Error`.
//!
//! **Context**: prefix what was being done with [`Error::ctx`] or, on a `Result` (ours, an
//! `io::Error`'s, a `nix::Error`'s or a `netlink::Error`'s), [`Context::ctx`]; with a code of
//! its own (a decoding or serde error, any other error type), [`CodeContext::ctx_code`]; never
//! a hand-written `format!("{what}: {e}")`.

use std::fmt;

/// Error codes from SPEC.md ("Error" section) plus Go's 8 and 999.
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENV: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODE_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const INVALID_NETNS: u32 = 8;
    pub const TRY_AGAIN_LATER: u32 = 11;
    pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
    #[allow(dead_code)] // unused so far; kept so the table is the spec's whole list
    pub const PLUGIN_LIMITED: u32 = 51;
    pub const INTERNAL: u32 = 999;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The CNI error code the protocol layer prints.
    pub code: u32,
    pub msg: String,
    pub details: String,
    /// The OS or kernel errno behind the failure (0: none), for typed checks such as
    /// [`Error::is_not_found`]; never printed on its own (the message carries its text).
    pub errno: i32,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Error {
            code,
            msg: msg.into(),
            details: String::new(),
            errno: 0,
        }
    }
    /// Record the errno behind this error.
    pub fn with_errno(mut self, errno: i32) -> Self {
        self.errno = errno;
        self
    }
    /// The object was not there (see [`errno_is_not_found`]).
    pub fn is_not_found(&self) -> bool {
        errno_is_not_found(self.errno)
    }
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }
    /// A bad value in the network configuration (code 7).
    pub fn config(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_CONFIG, msg)
    }
    /// A missing or malformed CNI_* environment variable (code 4).
    pub fn env(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_ENV, msg)
    }
    /// Content that could not be decoded (code 6).
    pub fn decode(msg: impl Into<String>) -> Self {
        Self::new(code::DECODE_FAILURE, msg)
    }
    /// A request the kernel refused, or any other failure with no better code: 999 like
    /// upstream (see the module documentation for 5 or 999).
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(code::INTERNAL, msg)
    }
    /// A transient condition such as a lock held too long (code 11).
    pub fn try_again(msg: impl Into<String>) -> Self {
        Self::new(code::TRY_AGAIN_LATER, msg)
    }
    /// Prefix the message with what was being done: `ctx: msg`.
    pub fn ctx(mut self, ctx: impl fmt::Display) -> Self {
        self.msg = format!("{ctx}: {}", self.msg);
        self
    }
    /// Wrap an OS error of a kernel request (code 999), naming the object:
    /// `set sysctl net.ipv4.ip_forward=1: Permission denied`.
    pub fn io(what: impl fmt::Display, err: std::io::Error) -> Self {
        Self::internal(format!("{what}: {err}")).with_errno(err.raw_os_error().unwrap_or(0))
    }
    /// Wrap a failure of the host's I/O (code 5: files, pipes, host tools), naming the object:
    /// `write /var/lib/cni/networks/n/10.1.0.2: No space left on device`.
    pub fn host_io(what: impl fmt::Display, err: std::io::Error) -> Self {
        Self::new(code::IO_FAILURE, format!("{what}: {err}"))
            .with_errno(err.raw_os_error().unwrap_or(0))
    }
}

/// An errno that says the object was not there: no such file or entry (ENOENT), device
/// (ENODEV), process or route (ESRCH), or address (EADDRNOTAVAIL). The one set behind both
/// [`Error::is_not_found`] and `netlink::Error::is_not_found`.
pub fn errno_is_not_found(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENOENT | libc::ENODEV | libc::ESRCH | libc::EADDRNOTAVAIL
    )
}

/// Longest `msg` or `details` printed: a hostile or broken config can be megabytes, and parts
/// of it end up in messages (a bad name, a serde error quoting a value).
const MAX_ERROR_TEXT: usize = 1024;

/// `s` cut to [`MAX_ERROR_TEXT`] bytes (on a character boundary), saying how much was cut.
pub(crate) fn bounded(s: &str) -> String {
    if s.len() <= MAX_ERROR_TEXT {
        return s.to_string();
    }
    let mut end = MAX_ERROR_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &s[..end], s.len() - end)
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.details.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}; {}", self.msg, self.details)
        }
    }
}

impl std::error::Error for Error {}

/// Attach context to any result whose error converts into ours.
pub trait Context<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, std::io::Error> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::io(what, e))
    }
}

impl<T> Context<T> for std::result::Result<T, nix::Error> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::io(what, std::io::Error::from(e)))
    }
}

impl<T> Context<T> for Result<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.ctx(what))
    }
}

/// Context with a code: `what: e` as an error of `code`, for a result whose error is not ours
/// (a decoding error, serde's, a file an operator names) and so has no code to keep.
pub trait CodeContext<T> {
    fn ctx_code(self, code: u32, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> CodeContext<T> for std::result::Result<T, E> {
    fn ctx_code(self, code: u32, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::new(code, format!("{what}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::{CodeContext, Context, Error, code};
    use std::io;

    /// The 5-or-999 rule: the host's I/O is 5, a kernel request 999; both keep the errno, and
    /// "not found" means the same for ours and netlink's errors.
    #[test]
    fn host_io_is_5_kernel_is_999_and_one_not_found_set() {
        let enospc = || io::Error::from_raw_os_error(libc::ENOSPC);
        let e = Error::host_io("write /x", enospc());
        assert_eq!((e.code, e.errno), (code::IO_FAILURE, libc::ENOSPC));
        assert!(e.msg.starts_with("write /x: "), "{e}");
        let e = Error::io("set sysctl a=1", enospc());
        assert_eq!((e.code, e.errno), (code::INTERNAL, libc::ENOSPC));
        let e = Err::<(), _>(enospc()).ctx("open /y").unwrap_err();
        assert_eq!(e.code, code::INTERNAL);
        for errno in [libc::ENOENT, libc::ENODEV, libc::ESRCH, libc::EADDRNOTAVAIL] {
            let ours = Error::internal("x").with_errno(errno);
            let nl = crate::netlink::Error::new(errno, "x");
            assert!(ours.is_not_found() && nl.is_not_found(), "{errno}");
            assert!(Error::from(nl).is_not_found(), "{errno}");
        }
        assert!(!Error::internal("x").with_errno(libc::EEXIST).is_not_found());
    }

    #[test]
    fn ctx_code_prefixes_and_sets_the_code() {
        let e = Err::<(), _>("bad")
            .ctx_code(code::DECODE_FAILURE, "runtimeConfig.x")
            .unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (code::DECODE_FAILURE, "runtimeConfig.x: bad")
        );
    }
}
