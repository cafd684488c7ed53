//! The CNI protocol: environment, configuration, results per spec version, errors, delegation.

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
pub use crate::error::{Context, Error, Result};
pub use config::Request;
pub use env::Command;
pub use result::CniResult;
pub use skel::Applet;
pub use version::Version;
