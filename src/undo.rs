//! Undo of a failed ADD, and the errors of cleanup steps that must all run.
//!
//! An ADD changes the host step by step; when a later step fails, everything done so far must
//! go again (SPEC: a failed ADD leaves nothing behind). Each step pushes its undo onto an
//! [`Undo`] right after it succeeded; [`Undo::finish`] commits on success, or runs the undo steps
//! newest first and reports their failures together with the error that stopped the ADD.
//!
//! ```text
//! let mut undo = Undo::new("bridge");
//! let r = (|| {
//!     create_veth(..)?;
//!     undo.push("veth eth0", || delete_veth(..));
//!     ipam_add(..)?;          // fails: the veth goes, the error names both failures if any
//!     Ok(result)
//! })();
//! undo.finish(r)
//! ```
//!
//! DEL and GC steps do not stop at the first failure: each one runs and an [`ErrorList`]
//! collects what went wrong.

use crate::error::{Context, Error, Result};

/// The failures of steps that all run whatever the others do, reported together.
#[derive(Debug, Default)]
pub struct ErrorList(Vec<Error>);

impl ErrorList {
    pub fn new() -> ErrorList {
        ErrorList::default()
    }

    /// Record `r`'s error, if any; its value otherwise.
    pub fn check<T>(&mut self, r: Result<T>) -> Option<T> {
        r.map_err(|e| self.0.push(e)).ok()
    }

    pub fn push(&mut self, e: impl Into<Error>) {
        self.0.push(e.into());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok` when nothing failed; one failure as it is (its code and details kept); several as
    /// one error with the first one's code and every message, `; `-separated.
    pub fn into_result(self) -> Result<()> {
        let mut errors = self.0.into_iter();
        let Some(first) = errors.next() else {
            return Ok(());
        };
        Err(errors.fold(first, |mut all, e| {
            all.msg = format!("{}; {}", all.msg, e.msg);
            all
        }))
    }
}

/// `e`, the error that stopped an ADD, with the failure of taking its steps back (if any)
/// appended: `msg (and undo WHAT: …)`, `u`'s message naming what it undid (`undo veth eth0`,
/// [`Context::ctx`]). The one way an ADD's error and its undo's failure are told together.
pub fn and_undo(mut e: Error, u: Result<()>) -> Error {
    if let Err(u) = u {
        e.msg = format!("{} (and {})", e.msg, u.msg);
    }
    e
}

type Step<'a> = Box<dyn FnOnce() -> Result<()> + 'a>;

/// The undo steps of an ADD in progress; see the module documentation. Dropped without
/// [`finish`](Undo::finish) or [`commit`](Undo::commit) (an early `return`), it still runs the
/// steps and writes their failures to stderr.
pub struct Undo<'a> {
    applet: &'static str,
    steps: Vec<(String, Step<'a>)>,
}

impl<'a> Undo<'a> {
    pub fn new(applet: &'static str) -> Undo<'a> {
        Undo {
            applet,
            steps: Vec::new(),
        }
    }

    /// Register how to take back the step that just succeeded; `what` names it in messages.
    pub fn push(&mut self, what: impl Into<String>, step: impl FnOnce() -> Result<()> + 'a) {
        self.steps.push((what.into(), Box::new(step)));
    }

    /// Everything succeeded: keep it.
    pub fn commit(mut self) {
        self.steps.clear();
    }

    /// Run the undo steps, newest first; every step runs whatever the others do.
    pub fn rollback(&mut self) -> ErrorList {
        let mut errors = ErrorList::new();
        while let Some((what, step)) = self.steps.pop() {
            errors.check(step().ctx(format_args!("undo {what}")));
        }
        errors
    }

    /// Commit on `Ok`; on `Err`, roll back and return the error, with the undo steps' failures
    /// appended to its message so that nothing left behind goes unreported.
    pub fn finish<T>(mut self, r: Result<T>) -> Result<T> {
        match r {
            Ok(v) => {
                self.commit();
                Ok(v)
            }
            Err(e) => Err(and_undo(e, self.rollback().into_result())),
        }
    }
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if self.steps.is_empty() {
            return;
        }
        if let Err(e) = self.rollback().into_result() {
            crate::warn!("{}: {}", self.applet, e.msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn rolls_back_newest_first_and_reports_every_failure() {
        let log = RefCell::new(Vec::new());
        let mut undo = Undo::new("t");
        undo.push("a", || {
            log.borrow_mut().push("a");
            Err(Error::internal("a broke"))
        });
        undo.push("b", || {
            log.borrow_mut().push("b");
            Ok(())
        });
        undo.push("c", || {
            log.borrow_mut().push("c");
            Err(Error::internal("c broke"))
        });
        let e = undo
            .finish::<()>(Err(Error::config("bad value")))
            .unwrap_err();
        assert_eq!(*log.borrow(), ["c", "b", "a"]);
        assert_eq!(e.code, 7, "the ADD's error keeps its code");
        assert_eq!(e.msg, "bad value (and undo c: c broke; undo a: a broke)");
    }

    #[test]
    fn commit_keeps_everything_and_drop_rolls_back() {
        let ran = RefCell::new(0);
        let mut undo = Undo::new("t");
        undo.push("x", || {
            *ran.borrow_mut() += 1;
            Ok(())
        });
        assert_eq!(undo.finish(Ok(5)).unwrap(), 5);
        assert_eq!(*ran.borrow(), 0);
        {
            let mut undo = Undo::new("t");
            undo.push("x", || {
                *ran.borrow_mut() += 1;
                Ok(())
            });
        }
        assert_eq!(*ran.borrow(), 1, "an abandoned guard must undo");
    }

    #[test]
    fn error_list_keeps_a_single_error_and_joins_several() {
        assert!(ErrorList::new().into_result().is_ok());
        let mut one = ErrorList::new();
        assert_eq!(one.check(Ok::<_, Error>(3)), Some(3));
        one.check::<()>(Err(Error::try_again("locked").with_details("d")));
        let e = one.into_result().unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (11, "locked", "d")
        );
        let mut two = ErrorList::new();
        two.push(Error::internal("x"));
        two.push(Error::config("y"));
        let e = two.into_result().unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (999, "x; y"));
    }
}
