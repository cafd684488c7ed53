//! The CNI protocol: environment, configuration, results per spec version, errors, delegation.

pub mod applet;
pub(crate) mod calllog;
pub mod config;
pub(crate) mod delegate;
pub(crate) mod env;
pub(crate) mod gojson;
pub mod result;
pub mod skel;
pub mod version;

/// The crate's error type; the protocol layer prints it as CNI error JSON.
pub(crate) use crate::error;
pub use crate::error::{CodeContext, Context, Error, Result};
pub use applet::{Applet, Request};
pub use env::Command;
pub use result::CniResult;
pub use version::Version;
