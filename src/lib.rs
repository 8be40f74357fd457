//! Tayga: an observability pipeline for OpenTelemetry traces and logs. See ARCHITECTURE.md
//! for the map of this crate and the rules each layer keeps.

pub mod bus;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod daemon;
pub mod demo;
#[doc(hidden)]
pub mod fuzz_checks;
pub mod identity;
pub mod mine;
pub mod otlp;
pub mod store;
pub mod wire;
