//! The live configuration, and reloading it (SIGHUP) without dropping
//! connections.
//!
//! [`Live`] holds the [`Settings`] in an [`ArcSwap`] and the [`Services`]
//! beside them. Every request loads the settings once when it starts and
//! keeps that `Arc` to its end, so a reload changes what *new* requests see,
//! including the next request on an open keep-alive or intercepted
//! connection, while requests in flight finish with the settings they started
//! with. `ArcSwap::load_full` takes no lock: readers on many cores never
//! contend, and a reload never makes a request wait.
//!
//! A reload reads and checks the whole file, builds the new settings and
//! prepares what could still fail (another CA) before it changes anything; on
//! any error nothing changes. Then the services take their new settings and
//! the settings are swapped. What the process reads only once (its listening
//! socket, threads, admin listener and logging: [`Startup`]) cannot change;
//! a reload that changes it succeeds for the rest and warns, naming the keys,
//! which are found by comparing [`Startup`]'s own fields.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use super::services::{Services, ServicesError};
use super::settings::{Settings, SettingsError};
use crate::config::{Config, ConfigError, Startup};

/// Why a reload was refused; the running configuration stays as it was.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file could not be read or is not a valid configuration (toml's
    /// message: line, column, key and accepted values).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration is valid but cannot be used (a bad `tls.extra_roots`
    /// or htpasswd file, an unusable CA, ...).
    #[error("config {}: {error}", path.display())]
    Unusable {
        /// The file that was read.
        path: PathBuf,
        /// What could not be set up.
        error: ApplyError,
    },
}

/// Why a configuration could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Its settings are unusable.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A service could not take them.
    #[error(transparent)]
    Services(#[from] ServicesError),
}

/// What a successful reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Keys whose new values wait for a restart (see [`Startup`]).
    pub restart_needed: Vec<String>,
}

/// The running proxy's settings and services, and a way to reload them.
/// Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Live {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ArcSwap<Settings>,
    services: Arc<Services>,
    /// The configuration the settings were built from. The lock also makes
    /// reloads one at a time (two quick SIGHUPs must not interleave).
    config: Mutex<Config>,
}

impl Live {
    pub(super) fn new(settings: Settings, services: Services, config: Config) -> Live {
        Live {
            inner: Arc::new(Inner {
                settings: ArcSwap::from_pointee(settings),
                services: Arc::new(services),
                config: Mutex::new(config),
            }),
        }
    }

    /// The settings new requests use now.
    pub fn settings(&self) -> Arc<Settings> {
        self.inner.settings.load_full()
    }

    /// The services (the same for the process's life).
    pub fn services(&self) -> &Arc<Services> {
        &self.inner.services
    }

    /// Reads `path` again and, if it is valid, makes new requests use it.
    /// Logs the outcome: `error` with the reason when refused (the old
    /// configuration stays), `info` when applied, plus a `warn` naming keys
    /// that need a restart.
    ///
    /// # Errors
    ///
    /// [`ReloadError`] when the file cannot be read, parsed or used.
    pub fn reload_from(&self, path: &Path) -> Result<Reloaded, ReloadError> {
        let result = Config::load(path)
            .map_err(ReloadError::from)
            .and_then(|config| {
                self.apply(config).map_err(|error| ReloadError::Unusable {
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
    /// [`ApplyError`] when it cannot be used; nothing changes then.
    pub fn apply(&self, config: Config) -> Result<Reloaded, ApplyError> {
        // A panic while holding the lock leaves a complete config behind
        // (it is only ever replaced whole), so a poisoned lock is usable.
        let mut running = self
            .inner
            .config
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let settings = Settings::from_config(&config)?;
        let prepared = self.inner.services.prepare(&settings)?;
        self.inner.services.apply(&settings, prepared);
        self.inner.settings.store(Arc::new(settings));
        let restart_needed = changed_keys(&running.startup(), &config.startup());
        *running = config;
        Ok(Reloaded { restart_needed })
    }
}

/// The dotted keys (`proxy.listen`, `log.level`) whose values differ between
/// `old` and `new`, sorted, read from the structs' own fields.
pub fn changed_keys(old: &Startup, new: &Startup) -> Vec<String> {
    let (Ok(old), Ok(new)) = (toml::Value::try_from(old), toml::Value::try_from(new)) else {
        // Plain values always serialise; were one not to, say so rather
        // than claim nothing changed.
        return vec!["(startup keys)".to_owned()];
    };
    let mut keys = Vec::new();
    diff("", &old, &new, &mut keys);
    keys
}

fn diff(prefix: &str, old: &toml::Value, new: &toml::Value, keys: &mut Vec<String>) {
    match (old, new) {
        (toml::Value::Table(old), toml::Value::Table(new)) => {
            for (key, value) in old {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                match new.get(key) {
                    Some(other) => diff(&path, value, other, keys),
                    None => keys.push(path),
                }
            }
        }
        _ if old != new => keys.push(prefix.to_owned()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_name_what_changed_and_only_that() {
        let old = Config::default();
        assert!(changed_keys(&old.startup(), &old.startup()).is_empty());
        let mut new = old.clone();
        new.identity.user_agent = crate::config::IdentityMode::Pass;
        new.robots.default_ttl = std::time::Duration::from_secs(1);
        new.rate_limit.max_per_host = std::num::NonZeroU32::MIN;
        assert!(
            changed_keys(&old.startup(), &new.startup()).is_empty(),
            "everything else is applied by a reload"
        );
        new.proxy.listen = "127.0.0.1:1".parse().unwrap();
        new.log.level = "debug".to_owned();
        new.log.access_log = crate::config::AccessLog::Stderr;
        assert_eq!(
            changed_keys(&old.startup(), &new.startup()),
            ["log.access_log", "log.level", "proxy.listen"]
        );
    }
}
