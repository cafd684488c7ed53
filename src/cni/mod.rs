//! The CNI protocol: environment, configuration, results per spec version, errors, delegation.

pub(crate) mod calllog;
pub mod config;
pub mod delegate;
pub mod env;
pub mod gojson;
pub mod result;
pub mod skel;
pub mod version;

/// The crate's error type; the protocol layer prints it as CNI error JSON.
pub use crate::error::{self, Context, Error, Result};
pub use config::Request;
pub use env::Command;
pub use result::CniResult;
pub use skel::Applet;
pub use version::Version;
