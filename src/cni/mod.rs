//! The CNI protocol: environment, configuration, results per spec version, errors, delegation.

pub mod config;
pub mod delegate;
pub mod env;
pub mod error;
pub mod gojson;
pub mod result;
pub mod skel;
pub mod version;

pub use config::Request;
pub use env::Command;
pub use error::{Context, Error, Result};
pub use result::CniResult;
pub use skel::Applet;
pub use version::Version;
