//! Configuration reload (SIGHUP) without dropping connections.
//!
//! The running [`ProxyState`] sits in an [`ArcSwap`]. Every request loads the
//! current state when it starts and keeps that `Arc` to its end, so a reload
//! changes what *new* requests see, including the next request on an open
//! keep-alive or intercepted connection, while requests in flight finish
//! with the state they started with.
//!
//! Why `arc-swap` rather than `RwLock<Arc<ProxyState>>` or a
//! `tokio::sync::watch`: the state is read once per request and written a
//! few times in a process's life. `ArcSwap::load_full` takes no lock, so
//! readers on many cores never contend on a shared lock word and a reload
//! never makes a request wait; a `watch` receiver would have to be cloned
//! into every connection and `borrow()` takes a read lock all the same.
//!
//! A reload parses and validates the whole file and builds the new state
//! first; on any error nothing changes. Some keys cannot change while
//! running (the listening socket, the robots.txt cache and pacer, which are
//! carried over so a reload does not refetch every robots.txt or forget
//! every host's pacing; see [`restart_keys`]): a reload that changes them
//! succeeds for the rest and warns, naming each.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use super::state::{ProxyState, StateError};
use crate::config::{Config, ConfigError};

/// Why a reload was refused; the running configuration stays as it was.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file could not be read or is not a valid configuration (toml's
    /// message: line, column, key and accepted values).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration is valid but the proxy cannot run with it (a bad
    /// `tls.extra_roots` file, an unusable CA, ...).
    #[error("config {}: {error}", path.display())]
    State {
        /// The file that was read.
        path: PathBuf,
        /// What could not be set up.
        error: StateError,
    },
}

/// What a successful reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Keys whose new values wait for a restart (see [`restart_keys`]).
    pub restart_needed: Vec<&'static str>,
}

/// Access to the running proxy's state and a way to replace it. Cheap to
/// clone; clones share everything.
#[derive(Clone)]
pub struct ReloadHandle {
    inner: Arc<Inner>,
}

struct Inner {
    state: ArcSwap<ProxyState>,
    /// The configuration the current state was built from. The lock also
    /// makes reloads one at a time (two quick SIGHUPs must not interleave).
    config: Mutex<Config>,
}

impl ReloadHandle {
    pub(super) fn new(state: ProxyState, config: Config) -> ReloadHandle {
        ReloadHandle {
            inner: Arc::new(Inner {
                state: ArcSwap::from_pointee(state),
                config: Mutex::new(config),
            }),
        }
    }

    /// The state new requests use now.
    pub fn current(&self) -> Arc<ProxyState> {
        self.inner.state.load_full()
    }

    /// Reads `path` again and, if it is valid, makes new requests use it.
    /// Logs the outcome: `error` with the reason when refused (the old
    /// configuration stays), `info` when applied, plus a `warn` naming keys
    /// that need a restart.
    ///
    /// # Errors
    ///
    /// [`ReloadError`] when the file cannot be read, parsed or validated, or
    /// the state cannot be built from it.
    pub fn reload_from(&self, path: &Path) -> Result<Reloaded, ReloadError> {
        let result = Config::load(path)
            .map_err(ReloadError::from)
            .and_then(|config| {
                self.apply(config).map_err(|error| ReloadError::State {
                    path: path.to_path_buf(),
                    error,
                })
            });
        match &result {
            Ok(done) => {
                tracing::info!(config = %path.display(), "configuration reloaded");
                if !done.restart_needed.is_empty() {
                    tracing::warn!(
                        keys = %done.restart_needed.join(", "),
                        "changed keys keep their old values until a restart"
                    );
                }
            }
            Err(error) => tracing::error!(
                config = %path.display(),
                "configuration reload refused, the running configuration is kept: {error}"
            ),
        }
        result
    }

    /// Makes new requests use `config`.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the state cannot be built; nothing changes then.
    pub fn apply(&self, config: Config) -> Result<Reloaded, StateError> {
        // A panic while holding the lock leaves a complete config behind
        // (it is only ever replaced whole), so a poisoned lock is usable.
        let mut running = self
            .inner
            .config
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = self.current().reconfigure(&config)?;
        self.inner.state.store(Arc::new(state));
        let restart_needed = restart_keys(&running, &config);
        *running = config;
        Ok(Reloaded { restart_needed })
    }
}

/// The keys that differ between `old` and `new` but take effect only after a
/// restart:
///
/// - `proxy.listen`, `proxy.max_connections`, `proxy.workers`: the socket,
///   the connection cap and the worker threads are set up once;
/// - `proxy.upstream_connect_timeout`, `tls.extra_roots`: the upstream
///   clients and their connection pools are kept;
/// - every `robots.*` key, and `identity.default_user_agent` /
///   `identity.default_from` for robots.txt fetches (requests filled in by
///   `fill` mode get the new values at once): the robots.txt cache is kept;
/// - `rate_limit.default_delay`, `max_per_host`, `max_wait`,
///   `idle_host_ttl`, `max_hosts`: the pacer and its per-host state are kept;
/// - `admin.*` and `log.*`: the admin listener, the log subscriber and the
///   access log writer are process-wide.
///
/// Everything else applies to the next request; the connection settings
/// (`proxy.allow_clients`, `header_read_timeout`, `max_header_bytes`) to
/// connections accepted after the reload.
pub fn restart_keys(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut keys = Vec::new();
    macro_rules! compare {
        ($($section:ident . $key:ident),* $(,)?) => {
            $(
                if old.$section.$key != new.$section.$key {
                    keys.push(concat!(stringify!($section), ".", stringify!($key)));
                }
            )*
        };
    }
    compare!(
        proxy.listen,
        proxy.max_connections,
        proxy.workers,
        proxy.upstream_connect_timeout,
        tls.extra_roots,
        identity.default_user_agent,
        identity.default_from,
        robots.cache_capacity,
        robots.default_ttl,
        robots.min_ttl,
        robots.fetch_timeout,
        robots.max_size,
        robots.max_redirects,
        robots.on_4xx,
        robots.stale_for,
        robots.failure_ttl,
        robots.max_failure_ttl,
        rate_limit.default_delay,
        rate_limit.max_per_host,
        rate_limit.max_wait,
        rate_limit.idle_host_ttl,
        rate_limit.max_hosts,
        admin.listen,
        log.format,
        log.level,
        log.access_log,
        log.access_log_format,
    );
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_keys_name_what_changed_and_only_that() {
        let old = Config::default();
        assert!(restart_keys(&old, &old).is_empty());
        let mut new = old.clone();
        new.identity.user_agent = crate::config::IdentityMode::Pass;
        new.rate_limit.honor_crawl_delay = false;
        assert!(restart_keys(&old, &new).is_empty(), "reloadable keys");
        new.proxy.listen = "127.0.0.1:1".parse().unwrap();
        new.robots.default_ttl = std::time::Duration::from_secs(1);
        new.log.level = "debug".to_owned();
        assert_eq!(
            restart_keys(&old, &new),
            ["proxy.listen", "robots.default_ttl", "log.level"]
        );
    }
}
