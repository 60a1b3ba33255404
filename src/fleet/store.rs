//! The connection to the fleet's shared store, and what the process knows of its health.
//!
//! # One connection per worker
//!
//! The proxy serves on `proxy.workers` threads, each with its own single-threaded
//! runtime (see [`crate::worker`]). Each worker gets its own [`ConnectionManager`],
//! made lazily on the worker's first store call, so its driver task runs on that
//! worker's runtime: a request and the connection answering it never wake each other
//! across threads, as with the upstream pools. The multiplexed connection pipelines the
//! concurrent calls of one worker's requests on one socket; N workers make N sockets,
//! which a store shard takes easily.
//!
//! # Failures
//!
//! Every call is bounded by `fleet.store_timeout` ([`tokio::time::timeout`] around the
//! whole call, and the same as the manager's own connect and response timeouts). The
//! first failure marks the store down: from then on requests do not ask it (no request
//! pays the timeout twice) and one background task pings it every
//! [`PROBE_INTERVAL`] until it answers, then marks it up again. The
//! [`ConnectionManager`] reconnects by itself on the next call after an I/O error.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use tokio::sync::OnceCell;
use tokio::time::Instant;

pub use super::connection::StoreConn;

/// What the store's connections are made from.
enum Backend {
    /// One server (boxed like the cluster's: both clients are large, and there is one
    /// per process).
    Single(Box<redis::Client>),
    /// A Redis Cluster, found from the one node `fleet.store` names.
    Cluster(Box<ClusterClient>),
}

/// How often a down store is pinged.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// The least time between two warnings that requests fall back to local state.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Why a store call gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store answered with an error, or the connection failed.
    #[error("fleet store: {0}")]
    Redis(#[from] redis::RedisError),
    /// No answer within `fleet.store_timeout`.
    #[error("fleet store: no answer within {0:?}")]
    Timeout(Duration),
    /// The store was found down and has not answered a ping since.
    #[error("fleet store is down")]
    Down,
    /// `fleet.store_ca` could not be read.
    #[error("fleet.store_ca {path}: {source}")]
    CaFile {
        /// The file named.
        path: std::path::PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The store answered something a script never returns.
    #[error("fleet store: unexpected reply {0}")]
    Reply(String),
}

/// The counters the store keeps, for metrics and the status page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// The store answered its last call (or the latest ping).
    pub up: bool,
    /// Calls sent to the store (each one network round trip, a script or a ping).
    pub round_trips: u64,
    /// Calls that failed or timed out.
    pub errors: u64,
    /// Requests served by local state because the store could not be used.
    pub fallbacks: u64,
}

/// The shared store: per-worker connections, health and counters. Cheap to share
/// (`Arc`).
pub struct Store {
    client: Backend,
    timeout: Duration,
    /// One connection per worker thread, made on its first use there.
    conns: Box<[OnceCell<StoreConn>]>,
    up: AtomicBool,
    probing: AtomicBool,
    round_trips: AtomicU64,
    errors: AtomicU64,
    fallbacks: AtomicU64,
    last_warn: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("timeout", &self.timeout)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store at `url` for a process of `workers` worker threads. Connects nothing yet.
    /// `ca_pem`, for a `rediss://` store, is the CA its certificate is checked
    /// against instead of the system's roots.
    ///
    /// # Errors
    ///
    /// [`StoreError::Redis`] when `url` is not a store URL.
    pub fn new(
        url: &str,
        ca_pem: Option<Vec<u8>>,
        cluster: bool,
        timeout: Duration,
        workers: usize,
    ) -> Result<Store, StoreError> {
        let certs = |root_cert| redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root_cert),
        };
        let client = if cluster {
            let mut builder = ClusterClient::builder([url])
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(1);
            if let Some(root_cert) = ca_pem {
                builder = builder.certs(certs(root_cert));
            }
            Backend::Cluster(Box::new(builder.build()?))
        } else {
            Backend::Single(Box::new(match ca_pem {
                Some(root_cert) => redis::Client::build_with_tls(url, certs(root_cert))?,
                None => redis::Client::open(url)?,
            }))
        };
        Ok(Store {
            client,
            timeout,
            conns: (0..workers.max(1)).map(|_| OnceCell::new()).collect(),
            // Optimistic: the first call finds out.
            up: AtomicBool::new(true),
            probing: AtomicBool::new(false),
            round_trips: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            last_warn: Mutex::new(None),
        })
    }

    /// The longest one call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether requests should ask the store now (it answered its last call or ping).
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// The counters.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            up: self.is_up(),
            round_trips: self.round_trips.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
        }
    }

    /// This worker's connection, made on first use (on this worker's runtime). A
    /// single server's is made lazily (it connects on the first call); a cluster's
    /// connects to a node and reads the slot map here, and a failure is not kept: the
    /// next call tries again.
    async fn conn(&self) -> Result<StoreConn, StoreError> {
        let slot = &self.conns[crate::worker::current() % self.conns.len()];
        if let Some(conn) = slot.get() {
            return Ok(conn.clone());
        }
        let made = slot
            .get_or_try_init(|| async {
                match &self.client {
                    Backend::Single(client) => {
                        let config = ConnectionManagerConfig::new()
                            .set_connection_timeout(Some(self.timeout))
                            .set_response_timeout(Some(self.timeout))
                            .set_number_of_retries(1)
                            .set_max_delay(PROBE_INTERVAL);
                        let conn =
                            ConnectionManager::new_lazy_with_config((**client).clone(), config)?;
                        Ok::<_, StoreError>(StoreConn::Single(conn))
                    }
                    Backend::Cluster(client) => {
                        Ok(StoreConn::Cluster(client.get_async_connection().await?))
                    }
                }
            })
            .await?;
        Ok(made.clone())
    }

    /// Runs one store call `call` on this worker's connection, bounded by the timeout.
    /// A failure marks the store down (see the module docs).
    ///
    /// # Errors
    ///
    /// [`StoreError::Down`] without trying while the store is down; else what the
    /// call or the timeout gave.
    pub async fn call<T, F, Fut>(self: &Arc<Self>, call: F) -> Result<T, StoreError>
    where
        F: FnOnce(StoreConn) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        if !self.is_up() {
            return Err(StoreError::Down);
        }
        self.send(call).await
    }

    async fn send<T, F, Fut>(self: &Arc<Self>, call: F) -> Result<T, StoreError>
    where
        F: FnOnce(StoreConn) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let call = async move { call(self.conn().await?).await };
        let result = match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        };
        if let Err(error) = &result {
            // A script error is the store answering: only transport failures mean down.
            if !matches!(error, StoreError::Reply(_)) {
                self.went_down(error);
            }
        }
        result
    }

    /// Counts a request served by local state, warning at most once a minute.
    pub fn fell_back(&self, why: &StoreError) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut last = self
            .last_warn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_none_or(|t| now.duration_since(t) >= WARN_EVERY) {
            *last = Some(now);
            tracing::warn!(
                error = %why,
                "the fleet store cannot be used; pacing and caching in this process alone \
                 until it is back (this warning repeats at most once a minute)"
            );
        }
    }

    fn went_down(self: &Arc<Self>, error: &StoreError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::debug!(%error, "fleet store call failed; marked down");
        }
        if self.probing.swap(true, Ordering::Relaxed) {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                let pong = store
                    .send(|mut conn| async move {
                        redis::cmd("PING")
                            .query_async::<String>(&mut conn)
                            .await
                            .map_err(StoreError::from)
                    })
                    .await;
                if pong.is_ok() {
                    break;
                }
            }
            store.probing.store(false, Ordering::Relaxed);
            store.up.store(true, Ordering::Relaxed);
            tracing::info!("the fleet store answers again; state is shared again");
        });
    }
}
