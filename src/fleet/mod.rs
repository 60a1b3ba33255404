//! Fleet mode: several robots-guard processes pace each host as one, through a shared
//! Redis or Valkey store (`[fleet] store`).
//!
//! Shared: per-host pacing (spacing between starts, `max_per_host` slots as leases that
//! expire if a process dies: [`pacing`]), the site's back-off (pauses and extra delays,
//! reported through [`pacing::SharedBackoff`]) and the robots.txt cache (one fetch per
//! origin for the fleet: [`robots`]). The store is reached through [`store::Store`];
//! every update is a Lua script ([`scripts`]) run with the store's clock.
//!
//! Without `[fleet]` none of this exists and the proxy runs exactly as a process alone.
//! A services-layer module: it uses `policy` and `fetch`, never `proxy`.

pub mod connection;
pub mod pacing;
pub mod robots;
pub mod scripts;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

pub use pacing::{FleetPacer, FleetRefusal, SharedBackoff};
pub use robots::FleetRobots;
pub use store::{Store, StoreError, StoreStats};

use crate::config::{FleetConfig, OnStoreError};
use crate::fetch::RobotsCache;
use crate::policy::Pacer;

/// The fleet's services, built once at start.
pub struct Fleet {
    /// The store, its health and counters.
    pub store: Arc<Store>,
    /// The shared pacer.
    pub pacer: FleetPacer,
    /// `fleet.store`, for the status page.
    pub url: String,
    /// `fleet.on_store_error`.
    pub on_store_error: OnStoreError,
}

impl Fleet {
    /// Connects `local` (the process's pacer) and `robots` (its cache) to the store of
    /// `config`, for a process of `workers` workers. Nothing is sent yet: each worker
    /// connects on its first request.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store URL cannot be used.
    pub fn start(
        config: &FleetConfig,
        local: &Pacer,
        robots: &RobotsCache,
        workers: usize,
    ) -> Result<Fleet, StoreError> {
        let ca_pem = match &config.store_ca {
            Some(path) => Some(std::fs::read(path).map_err(|source| StoreError::CaFile {
                path: path.clone(),
                source,
            })?),
            None => None,
        };
        let store = Arc::new(Store::new(
            &config.store,
            ca_pem,
            config.cluster,
            config.store_timeout,
            workers,
        )?);
        let pacer = FleetPacer::new(
            store.clone(),
            &local.settings(),
            config.lease_ttl,
            config.on_store_error,
        );
        local.report_backoff_to(Arc::new(SharedBackoff::new(store.clone())));
        let lock_ttl = robots.settings().fetch_timeout * 2 + Duration::from_secs(1);
        robots.share_through(Arc::new(FleetRobots::new(store.clone(), lock_ttl)));
        tracing::info!(
            store = %redacted(&config.store),
            on_store_error = ?config.on_store_error,
            "fleet mode: pacing, site back-off and robots.txt are shared through the store"
        );
        Ok(Fleet {
            store,
            pacer,
            url: redacted(&config.store),
            on_store_error: config.on_store_error,
        })
    }
}

/// `url` without a password (`redis://user:secret@host` → `redis://user:***@host`).
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => format!("{scheme}://***@{host}"),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redacted("redis://127.0.0.1:6379/0"),
            "redis://127.0.0.1:6379/0"
        );
        assert_eq!(redacted("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redacted("redis://:pw@h:1/0"), "redis://:***@h:1/0");
    }
}
