//! The proxy listener: accept, connection cap, client check, hyper
//! connection serving with upgrades, graceful drain on shutdown, and the
//! current state, which a reload replaces (see [`reload`]).

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
            () = $crate::proxy::woken::PolledWhenWoken::new(scope.draining()) => {
                connection.as_mut().graceful_shutdown();
                tokio::select! {
                    result = connection.as_mut() => Some(result),
                    () = scope.closing() => None,
                }
            }
        }
    }};
}

mod connect;
mod forward;
mod idle;
pub mod reload;
pub mod response;
mod service;
mod state;
mod upgrade;
mod woken;

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

pub use reload::{ReloadError, ReloadHandle, Reloaded};
pub use service::repeated_segments;
pub use state::{preflight, CaStatus, ProxyState, StateError};

use crate::config::Config;
use crate::metrics::ConnectionKind;

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
    /// The shared state could not be built.
    #[error(transparent)]
    State(#[from] StateError),
    /// No worker thread could serve (or every one stopped): the listening
    /// socket could not be handed over, or threads or their runtimes could
    /// not be created. Each cause is logged as it happens.
    #[error("no worker thread is serving clients (see the errors logged before)")]
    NoWorkers,
}

/// A bound, ready-to-run proxy.
pub struct Server {
    listener: TcpListener,
    live: ReloadHandle,
    connections: Arc<Semaphore>,
    max_connections: usize,
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

/// What a CONNECT hands to the task that outlives it (the tunnel or the
/// interception): the connection's slot, so draining waits for the task and
/// the connection cap counts it; the server's phase, so it can wind down;
/// and the live state, so intercepted requests see reloads. The listener
/// hands it to the CONNECT handling with the request.
#[derive(Clone)]
pub(crate) struct ConnectionScope {
    _slot: Arc<OwnedSemaphorePermit>,
    phase: watch::Receiver<Phase>,
    live: ReloadHandle,
}

impl ConnectionScope {
    /// The state a new request should use.
    pub(crate) fn state(&self) -> Arc<ProxyState> {
        self.live.current()
    }

    /// Completes once the server has reached `phase` (or is gone).
    async fn reached(&self, phase: Phase) {
        reached(&self.phase, phase).await;
    }

    /// Completes when shutdown begins: a connection should then finish the
    /// request in progress and close (`graceful_shutdown`).
    pub(crate) async fn draining(&self) {
        self.reached(Phase::Draining).await;
    }

    /// Completes when the drain has timed out: drop the connection now.
    pub(crate) async fn closing(&self) {
        self.reached(Phase::Closing).await;
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
    /// Binds `config.proxy.listen` and builds the shared state.
    ///
    /// # Errors
    ///
    /// [`ServeError`] when the address cannot be bound or the state cannot
    /// be built.
    pub async fn bind(config: &Config) -> Result<Server, ServeError> {
        let addr = config.proxy.listen;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| ServeError::Bind { addr, error })?;
        let listen = listener
            .local_addr()
            .map_err(|error| ServeError::Bind { addr, error })?;
        let state = ProxyState::new(config, listen)?;
        Ok(Server {
            listener,
            live: ReloadHandle::new(state, config.clone()),
            connections: Arc::new(Semaphore::new(config.proxy.max_connections.get())),
            max_connections: config.proxy.max_connections.get(),
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.live.current().listen
    }

    /// How many worker threads [`Server::run`] starts (`proxy.workers`).
    pub fn workers(&self) -> NonZeroUsize {
        // The state's upstream pools were sized for them: one count, one place.
        self.live.current().client.workers()
    }

    /// The current state (for tests; the admin listener follows reloads
    /// through [`Server::reload_handle`]).
    pub fn state(&self) -> Arc<ProxyState> {
        self.live.current()
    }

    /// A handle to reload the configuration while [`Server::run`] runs.
    pub fn reload_handle(&self) -> ReloadHandle {
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
        let workers = self.workers();
        let Server {
            listener,
            live,
            connections,
            max_connections,
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
        let drain_timeout = live.current().drain_timeout;
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

/// What every worker's accept loop shares: the connection cap, the live
/// state and the server's phase.
#[derive(Clone)]
struct Acceptor {
    live: ReloadHandle,
    connections: Arc<Semaphore>,
    phase: watch::Receiver<Phase>,
}

impl Acceptor {
    /// Starts `count` worker threads, each accepting from its own handle on
    /// `listener`. Returns how many started, and a channel that nothing is
    /// sent on: it reports closed once every started worker has ended.
    fn start_workers(
        &self,
        listener: &std::net::TcpListener,
        count: NonZeroUsize,
    ) -> (usize, mpsc::Receiver<()>) {
        let (alive, running) = mpsc::channel::<()>(1);
        let mut started = 0;
        for index in 0..count.get() {
            let listener = match listener.try_clone() {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::error!(%error, index, "cannot start a worker: listening socket not shared");
                    break;
                }
            };
            let acceptor = self.clone();
            let alive = alive.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("robots-guard-worker-{index}"))
                .spawn(move || {
                    crate::worker::enter(index);
                    acceptor.run_on_own_runtime(listener);
                    drop(alive);
                });
            match spawned {
                Ok(_) => started += 1,
                Err(error) => {
                    tracing::error!(%error, index, "cannot start a worker thread");
                    break;
                }
            }
        }
        (started, running)
    }

    /// Runs this worker on a runtime of its own, on the calling thread,
    /// until the server has finished.
    fn run_on_own_runtime(self, listener: std::net::TcpListener) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                tracing::error!(%error, "cannot start a worker's runtime");
                return;
            }
        };
        runtime.block_on(async move {
            // This worker's upstream requests go out in batches.
            #[cfg(target_os = "linux")]
            if let Err(error) = crate::upstream::send_batch::install() {
                tracing::debug!(%error, "io_uring unavailable: upstream requests are sent one by one");
            }
            self.accept(listener).await;
            // The connections this worker serves are tasks of its runtime:
            // keep it running until the drain is over.
            finished(&self.phase).await;
        });
        // Tasks still open were given up on by the drain; blocking work
        // (a DNS lookup) gets a moment, not a hang.
        runtime.shutdown_timeout(Duration::from_secs(1));
    }

    /// Accepts and serves connections until shutdown begins.
    async fn accept(&self, listener: std::net::TcpListener) {
        let listener = match TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(error) => {
                tracing::error!(%error, "a worker cannot use the listening socket");
                return;
            }
        };
        loop {
            // Take a connection slot before accepting: at the cap, new
            // clients wait in the kernel's backlog instead of being served
            // half-way.
            let slot = tokio::select! {
                slot = self.connections.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => break,
                },
                () = reached(&self.phase, Phase::Draining) => break,
            };
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = reached(&self.phase, Phase::Draining) => break,
            };
            let (stream, client) = match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Running out of file descriptors must not end the
                    // server: pause briefly and go on.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            self.serve(stream, client, slot);
        }
    }

    /// Serves one accepted connection in a task of this worker.
    fn serve(&self, stream: TcpStream, client: SocketAddr, slot: OwnedSemaphorePermit) {
        // Connection settings come from the state at accept time, so a
        // reload applies to connections opened after it.
        let state = self.live.current();
        if !state.client_allowed(client) {
            tokio::spawn(refuse_client(stream, client));
            return;
        }
        let _ = stream.set_nodelay(true);
        let open = state.metrics.connection_opened(ConnectionKind::Client);
        let activity = idle::Activity::new();
        let io = idle::IdleIo::new(stream, activity.clone(), state.timeouts);
        let scope = ConnectionScope {
            _slot: Arc::new(slot),
            phase: self.phase.clone(),
            live: self.live.clone(),
        };
        let per_request = scope.clone();
        let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            // The state is resolved per request, not per connection: a
            // keep-alive connection's next request sees a reload.
            let state = per_request.state();
            // Only a CONNECT outlives its request (as a tunnel) and needs
            // the connection's slot and lifecycle.
            let scope = (request.method() == hyper::Method::CONNECT).then(|| per_request.clone());
            let activity = activity.clone();
            async move {
                Ok::<_, std::convert::Infallible>(
                    idle::serve_busy(activity, request, |request, activity| {
                        service::handle(state, client, scope, activity, request)
                    })
                    .await,
                )
            }
        });
        let connection = http1_server(state.max_header_bytes)
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        tokio::spawn(async move {
            let _open = open;
            match serve_until_drained!(connection, &scope) {
                Some(Ok(())) => {}
                Some(Err(error)) => {
                    tracing::debug!(%client, %error, "connection ended with an error");
                }
                None => tracing::debug!(%client, "connection closed: drain timed out"),
            }
        });
    }
}

/// Tells a client outside `allow_clients` why, then closes.
async fn refuse_client(mut stream: TcpStream, client: SocketAddr) {
    tracing::warn!(%client, "client address not in proxy.allow_clients; refused");
    let body = "403 Forbidden\n\nYour address is not in this proxy's allow_clients.\n";
    let answer = format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain; charset=utf-8\r\n\
         x-robots-guard-reason: client-not-allowed\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The HTTP/1.1 server settings of every client connection, plain or
/// intercepted: heads bounded by `max_header_bytes` (431 past it), and no
/// head timer of hyper's own (it would also close idle keep-alive
/// connections; `idle::IdleIo` keeps the two limits apart).
/// `max_buf_size` alone is not a head limit: one read can take the buffer
/// past it, and a head that then parses is accepted; `max_header_size`
/// checks the parsed head itself.
fn http1_server(max_header_bytes: usize) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(max_header_bytes)
        .max_header_size(max_header_bytes);
    builder
}
