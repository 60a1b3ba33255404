//! The proxy listener: accept, connection cap, client check, hyper
//! connection serving with upgrades, graceful drain on shutdown.

mod connect;
mod forward;
mod idle;
pub mod response;
mod service;
mod state;
mod upgrade;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use ipnet::IpNet;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub use state::{ProxyState, StateError};

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
}

/// A bound, ready-to-run proxy.
pub struct Server {
    listener: TcpListener,
    state: Arc<ProxyState>,
    allow_clients: Vec<IpNet>,
    connections: Arc<Semaphore>,
    max_connections: usize,
    timeouts: idle::Timeouts,
    max_header_bytes: usize,
    drain_timeout: Duration,
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
        let state = Arc::new(ProxyState::new(config, listen)?);
        Ok(Server {
            listener,
            state,
            allow_clients: config.proxy.allow_clients.clone(),
            connections: Arc::new(Semaphore::new(config.proxy.max_connections.get())),
            max_connections: config.proxy.max_connections.get(),
            timeouts: idle::Timeouts {
                idle: config.proxy.idle_timeout,
                head: config.proxy.header_read_timeout,
            },
            // hyper refuses buffers below 8 KiB.
            max_header_bytes: config.proxy.max_header_bytes.get().max(8192),
            drain_timeout: Duration::from_secs(30),
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.state.listen
    }

    /// The shared state (for status pages and tests).
    pub fn state(&self) -> Arc<ProxyState> {
        self.state.clone()
    }

    /// Serves until `shutdown` completes, then stops accepting and lets
    /// in-flight requests finish (up to 30 s).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        // Connections watch this to start a graceful close (finish the
        // current request, then close) when the server stops.
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::pin!(shutdown);
        loop {
            // Take a connection slot before accepting: at the cap, new
            // clients wait in the kernel's backlog instead of being served
            // half-way.
            let Ok(slot) = self.connections.clone().acquire_owned().await else {
                break;
            };
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = &mut shutdown => break,
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
            if !self.client_allowed(client) {
                tokio::spawn(refuse_client(stream, client));
                continue;
            }
            let _ = stream.set_nodelay(true);
            let open = self.state.metrics.connection_opened(ConnectionKind::Client);
            let state = self.state.clone();
            let activity = idle::Activity::new();
            let io = idle::IdleIo::new(stream, activity.clone(), self.timeouts);
            let service = service_fn(move |request| {
                let state = state.clone();
                let activity = activity.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(
                        idle::serve_busy(activity, request, |request| {
                            service::handle(state, client, request)
                        })
                        .await,
                    )
                }
            });
            // hyper's own head timer would also close idle keep-alive
            // connections; `idle::IdleIo` keeps the two limits apart.
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(None)
                .max_buf_size(self.max_header_bytes)
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            let mut stop = stop_rx.clone();
            tokio::spawn(async move {
                tokio::pin!(connection);
                let result = tokio::select! {
                    result = connection.as_mut() => result,
                    // The guard `wait_for` returns is not Send: drop it at once.
                    _ = async { stop.wait_for(|stopping| *stopping).await.map(|_| ()) } => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                };
                if let Err(error) = result {
                    tracing::debug!(%client, %error, "connection ended with an error");
                }
                drop((slot, open));
            });
        }
        tracing::info!("shutting down: draining in-flight requests");
        let _ = stop_tx.send(true);
        // Every open connection holds a slot: when all slots are back, all
        // connections have finished.
        let all = u32::try_from(self.max_connections).unwrap_or(u32::MAX);
        let drained = self.connections.acquire_many(all);
        if tokio::time::timeout(self.drain_timeout, drained)
            .await
            .is_err()
        {
            tracing::warn!("drain timed out; closing remaining connections");
        }
    }

    fn client_allowed(&self, client: SocketAddr) -> bool {
        let ip = client.ip().to_canonical();
        self.allow_clients.iter().any(|net| net.contains(&ip))
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
