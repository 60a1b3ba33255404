//! The proxy: a listener whose every request runs through one pipeline.
//!
//! - [`listener`]: worker threads accepting from the listening socket, the
//!   connection cap and the client check;
//!   ([`proxy_protocol`]: the PROXY protocol header a load balancer sends
//!   first, [`rewind`]: the bytes read past it, put back);
//! - [`connection`]: one HTTP connection served through the pipeline;
//! - [`pipeline`]: the phases in their order, then one `finish`;
//!   [`phases`] holds one file per phase, [`endings`] the ways a request
//!   ends (forward, tunnel, interception);
//! - [`exchange`]: the context a request carries through the phases;
//! - [`response`]: every answer the proxy makes itself;
//! - [`settings`] and [`services`]: what a reload replaces, and what it keeps;
//!   [`reload`] swaps the one and reconfigures the other.
//!
//! This module holds the [`Server`]: bind, run until shutdown, then drain.

/// Drives a hyper server connection (`$connection`, a future with
/// `graceful_shutdown`) within a [`ConnectionScope`] (`$scope`): serves until
/// it ends; once the server drains, lets it finish the request in progress
/// and close; when the drain times out, gives up on it. Evaluates to the
/// connection's result, or `None` when it was given up on.
///
/// A macro, not a generic async function: over hyper's connection types a
/// generic helper trips rustc's higher-ranked `Send` inference in the
/// spawned task that awaits it.
macro_rules! serve_until_drained {
    ($connection:expr, $scope:expr) => {{
        let connection = $connection;
        let scope = $scope;
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => Some(result),
            () = scope.draining() => {
                connection.as_mut().graceful_shutdown();
                tokio::select! {
                    result = connection.as_mut() => Some(result),
                    () = scope.closing() => None,
                }
            }
        }
    }};
}

mod connection;
mod endings;
mod exchange;
mod finish;
mod head_scan;
pub mod headers;
mod holding_body;
mod idle;
mod listener;
mod phases;
mod pipeline;
mod proxy_protocol;
pub mod reload;
pub mod response;
mod rewind;
pub mod services;
pub mod settings;

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

pub use phases::repeated_segments;
pub use reload::{ApplyError, Live, ReloadError, Reloaded};
pub use services::{Services, ServicesError};
pub use settings::{Profile, Settings, SettingsError};

use crate::config::Config;
use listener::Acceptor;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// The configuration cannot be used.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The services could not be started.
    #[error(transparent)]
    Services(#[from] ServicesError),
    /// No worker thread could serve (or every one stopped): the listening
    /// socket could not be handed over, or threads or their runtimes could
    /// not be created. Each cause is logged as it happens.
    #[error("no worker thread is serving clients (see the errors logged before)")]
    NoWorkers,
}

/// A bound, ready-to-run proxy.
pub struct Server {
    listener: TcpListener,
    live: Live,
    connections: Arc<Semaphore>,
    max_connections: usize,
    workers: NonZeroUsize,
    /// `proxy.proxy_protocol`.
    proxy_protocol: bool,
}

/// Where the server is in its life, as connections see it. Ordered: each
/// phase implies the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Accepting and serving.
    Serving,
    /// Shutdown began: finish the request in progress, then close.
    Draining,
    /// The drain timed out: close now.
    Closing,
}

/// What a connection (and a tunnel or interception it turns into) holds: its
/// slot, so draining waits for it and the connection cap counts it; the
/// server's phase, so it can wind down; and the live settings, so each new
/// request sees reloads.
#[derive(Clone)]
pub(crate) struct ConnectionScope {
    _slot: Arc<OwnedSemaphorePermit>,
    phase: watch::Receiver<Phase>,
    live: Live,
}

impl ConnectionScope {
    /// The live settings and services.
    pub(crate) fn live(&self) -> &Live {
        &self.live
    }

    /// Completes when shutdown begins: a connection should then finish the
    /// request in progress and close (`graceful_shutdown`).
    pub(crate) async fn draining(&self) {
        reached(&self.phase, Phase::Draining).await;
    }

    /// Completes when the drain has timed out: drop the connection now.
    pub(crate) async fn closing(&self) {
        reached(&self.phase, Phase::Closing).await;
    }
}

/// Completes once the server watched by `phase` has reached `target`, or
/// has finished `run` altogether (the sender is gone).
async fn reached(phase: &watch::Receiver<Phase>, target: Phase) {
    let mut watching = phase.clone();
    let _ = watching.wait_for(|now| *now >= target).await;
}

/// Completes when the server has finished `run`: its phase sender is gone.
async fn finished(phase: &watch::Receiver<Phase>) {
    let mut watching = phase.clone();
    while watching.changed().await.is_ok() {}
}

impl Server {
    /// Binds `config.proxy.listen`, builds the settings and starts the
    /// services.
    ///
    /// # Errors
    ///
    /// [`ServeError`] when the address cannot be bound, the configuration
    /// cannot be used or a service cannot start.
    pub async fn bind(config: &Config) -> Result<Server, ServeError> {
        let addr = config.proxy.listen;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| ServeError::Bind { addr, error })?;
        let listen = listener
            .local_addr()
            .map_err(|error| ServeError::Bind { addr, error })?;
        let workers = crate::worker::count(config.proxy.workers);
        let settings = Settings::from_config(config)?;
        let services = Services::start(&settings, listen, workers)?;
        Ok(Server {
            listener,
            live: Live::new(settings, services, config.clone()),
            connections: Arc::new(Semaphore::new(config.proxy.max_connections.get())),
            max_connections: config.proxy.max_connections.get(),
            workers,
            proxy_protocol: config.proxy.proxy_protocol,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.live.services().listen
    }

    /// How many worker threads [`Server::run`] starts (`proxy.workers`).
    pub fn workers(&self) -> NonZeroUsize {
        self.workers
    }

    /// The live settings and services, which follow reloads (for the admin
    /// listener, SIGHUP and tests).
    pub fn live(&self) -> Live {
        self.live.clone()
    }

    /// Serves until `shutdown` completes, then stops accepting and lets
    /// in-flight requests finish for up to `proxy.drain_timeout`: each
    /// connection finishes its current request and closes (idle keep-alive
    /// connections close at once). Returns when all have closed, or when
    /// the time is up, after closing what is left.
    ///
    /// Clients are served on `proxy.workers` threads, each running its own
    /// single-threaded runtime and accepting from the one listening socket:
    /// whichever worker is free takes the next connection, and everything a
    /// connection does (its requests, their upstream exchanges, a tunnel)
    /// stays on that worker. A multi-threaded runtime would move tasks
    /// between threads, and every hand-off between a request and its pooled
    /// upstream connection would cost a cross-thread wake-up (about a
    /// quarter of the CPU per request, measured in BENCHMARKS.md). This
    /// future itself only coordinates: it waits for `shutdown`, then drives
    /// the drain. Dropping it ends the workers and their connections.
    ///
    /// # Errors
    ///
    /// [`ServeError::NoWorkers`] when no worker could start, or when every
    /// worker stopped before `shutdown` (after draining what is left).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let (phase_tx, phase_rx) = watch::channel(Phase::Serving);
        let Server {
            listener,
            live,
            connections,
            max_connections,
            workers,
            proxy_protocol,
        } = self;
        let listener = match listener.into_std() {
            Ok(listener) => listener,
            Err(error) => {
                tracing::error!(%error, "cannot hand the listening socket to the workers");
                return Err(ServeError::NoWorkers);
            }
        };
        let shared = Acceptor {
            live: live.clone(),
            connections: connections.clone(),
            phase: phase_rx,
            proxy_protocol: proxy_protocol.then(|| Arc::new(proxy_protocol::Rejections::new())),
        };
        let (started, mut running) = shared.start_workers(&listener, workers);
        // The workers hold their own handles on the socket.
        drop(listener);
        if started == 0 {
            return Err(ServeError::NoWorkers);
        }
        // A worker ends early only when its runtime or socket failed (it
        // says why); the others go on. Once none is left, stop.
        let outcome = tokio::select! {
            () = shutdown => Ok(()),
            None = running.recv() => {
                tracing::error!("every worker thread has stopped; shutting down");
                Err(ServeError::NoWorkers)
            }
        };
        // Read now, not at start: a reload may have changed it since.
        let drain_timeout = live.settings().drain_timeout;
        tracing::info!(
            timeout = ?drain_timeout,
            "shutting down: draining in-flight requests"
        );
        // The workers close their listening sockets first: new clients are
        // then refused at once instead of waiting in the backlog of a
        // server that will not serve.
        let _ = phase_tx.send(Phase::Draining);
        // Every open connection (and tunnel or interception it turned into)
        // holds a slot: when all slots are back, all have finished.
        let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
        if tokio::time::timeout(drain_timeout, connections.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("drain timed out; closing remaining connections");
            let _ = phase_tx.send(Phase::Closing);
            // Closing is immediate (the tasks drop their connections); wait
            // for it briefly so that callers see the sockets closed.
            let closed = connections.acquire_many(all);
            let _ = tokio::time::timeout(Duration::from_secs(1), closed).await;
        }
        // Workers end when the phase sender is gone.
        drop(phase_tx);
        while running.recv().await.is_some() {}
        outcome
    }
}

/// What a proxy with `config` would need that `check-config` can find out
/// without starting it: every file the configuration names can be read and
/// used (extra roots, htpasswd, and the CA in intercept mode when it exists;
/// a missing CA would be created on start).
///
/// # Errors
///
/// The [`ServeError`] starting the proxy with `config` would meet.
pub fn preflight(config: &Config) -> Result<CaStatus, ServeError> {
    let settings = Settings::from_config(config)?;
    // Every signing key, the profiles' too, as `serve` loads them.
    services::load_signers(&settings)?;
    let Some((cert, key)) = &settings.ca_files else {
        return Ok(CaStatus::NotUsed);
    };
    let absent = |path: &std::path::Path| std::fs::symlink_metadata(path).is_err();
    if absent(cert) && absent(key) {
        return Ok(CaStatus::WillBeCreated);
    }
    // Only one of the two present is an error, as on start.
    crate::tls::CertificateAuthority::load_or_create(cert, key)
        .map_err(|e| ServeError::Services(ServicesError::Tls(e)))?;
    Ok(CaStatus::Loaded)
}

/// What [`preflight`] found out about the interception CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaStatus {
    /// `tls.mode = "tunnel"`: no CA is used.
    NotUsed,
    /// Both files exist and hold a usable CA.
    Loaded,
    /// Neither file exists: `serve` will create the CA on start.
    WillBeCreated,
}
