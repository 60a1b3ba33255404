//! Client-side policy applied before a request leaves the proxy: who the robot is
//! ([`identity`], pipeline step 3) and how fast it may go to each host ([`rate`], step 6).
//!
//! Both are plain decisions with typed errors; mapping them to `403` / `429` answers is the
//! job of `proxy`.

pub mod auth;
pub mod backoff;
pub mod destination;
pub mod eyeballs;
pub mod identity;
pub mod rate;

pub use backoff::{BackoffCause, BackoffSettings, BackoffView};
pub use destination::DestinationError;
pub use identity::{is_mailbox, IdentityError, IdentityMode, IdentityPolicy};
pub use rate::{
    BackoffSink, HostPaceStats, Lease, PacePermit, PaceRejected, Pacer, PacingSettings,
};
