//! robots-guard: a forward HTTP(S) proxy that makes any HTTP client a polite robot.
#![warn(missing_docs)]

/// The hasher of the maps every request touches: the upstream connection
/// pool, the robots.txt cache, the pacer and the status page's hosts.
/// std's SipHash cost a few hundred instructions per lookup there; foldhash
/// is several times cheaper. It is only "minimally DoS-resistant" (seeded
/// per process and per map): the keys come from clients the proxy already
/// admits (`allow_clients`), and each of these maps is bounded in size
/// (the caches, the status hosts) or in time (the pacer forgets idle hosts,
/// the pool's reaper sweeps idle lists), so the worst a crafted set of
/// hosts can do is slow lookups for a while.
pub(crate) type FastHash = foldhash::fast::RandomState;

pub mod admin;
pub mod check;
pub mod config;
pub mod fetch;
pub mod metrics;
pub mod origin;
pub mod policy;
pub mod proxy;
pub mod robots;
pub mod telemetry;
pub mod tls;
pub mod upstream;
pub mod worker;
