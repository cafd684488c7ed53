//! The CNI protocol: environment, configuration, results per spec version, errors, delegation.

pub mod error;

pub use error::{Context, Error, Result};
