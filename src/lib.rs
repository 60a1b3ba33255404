//! robots-guard: a forward HTTP(S) proxy that makes any HTTP client a polite robot.
#![warn(missing_docs)]

pub mod admin;
pub mod check;
pub mod config;
pub mod fd_limit;
pub mod fetch;
pub mod fleet;
pub mod metrics;
mod new_file;
pub mod origin;
pub mod outcome;
pub mod policy;
pub mod proxy;
mod random_id;
pub mod robots;
pub mod signing;
pub mod telemetry;
pub mod tls;
pub mod upstream;
pub mod worker;
