//! The listener: worker threads, each accepting from the one listening
//! socket, and the connection cap.
//!
//! Clients are served on `proxy.workers` threads, each running its own
//! single-threaded runtime and accepting from the one listening socket:
//! whichever worker is free takes the next connection, and everything a
//! connection does (its requests, their upstream exchanges, a tunnel) stays
//! on that worker. A multi-threaded runtime would move tasks between threads,
//! and every hand-off between a request and its pooled upstream connection
//! would cost a cross-thread wake-up. The price: each worker opens its own
//! connections to an origin, and a long-lived connection stays on the worker
//! that took it.
//!
//! With `proxy.proxy_protocol` on, each connection's PROXY protocol header
//! is read first, in the connection's task ([`proxy_protocol`]): the client
//! it names is the one checked against `allow_clients` and served.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::connection;
use super::exchange::{Conn, Entry};
use super::finish;
use super::idle::Activity;
use super::proxy_protocol::{self, Rejections};
use super::reload::Live;
use super::response::Answer;
use super::rewind::Rewind;
use super::{finished, reached, ConnectionScope, Phase};
use crate::metrics::ConnectionKind;

/// What every worker's accept loop shares: the connection cap, the live
/// settings and services, and the server's phase.
#[derive(Clone)]
pub(super) struct Acceptor {
    pub(super) live: Live,
    pub(super) connections: Arc<Semaphore>,
    pub(super) phase: watch::Receiver<Phase>,
    /// `proxy.proxy_protocol`, and the log of connections refused for it.
    pub(super) proxy_protocol: Option<Arc<Rejections>>,
}

impl Acceptor {
    /// Starts `count` worker threads, each accepting from its own handle on
    /// `listener`. Returns how many started, and a channel that nothing is
    /// sent on: it reports closed once every started worker has ended.
    pub(super) fn start_workers(
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

    /// Serves one accepted connection, from `peer`, in a task of this worker.
    fn serve(&self, stream: TcpStream, peer: SocketAddr, slot: OwnedSemaphorePermit) {
        let scope = ConnectionScope {
            _slot: Arc::new(slot),
            phase: self.phase.clone(),
            live: self.live.clone(),
        };
        let _ = stream.set_nodelay(true);
        let Some(rejections) = &self.proxy_protocol else {
            serve_client(Rewind::new(stream), peer, scope);
            return;
        };
        let rejections = rejections.clone();
        // Connection settings come from the settings at accept time.
        let timeout = self.live.settings().timeouts.head;
        tokio::spawn(async move {
            match proxy_protocol::read_header(stream, peer, timeout).await {
                Ok((client, io)) => serve_client(io, client, scope),
                Err(rejected) => {
                    rejections.note(peer, &rejected);
                    scope
                        .live()
                        .services()
                        .metrics
                        .proxy_protocol_rejected(rejected.word());
                }
            }
        });
    }
}

/// Serves `client`'s connection `io` in a task of its own, or refuses it
/// when the client is outside `allow_clients`.
fn serve_client(io: Rewind<TcpStream>, client: SocketAddr, scope: ConnectionScope) {
    // Connection settings come from the settings at accept time, so a
    // reload applies to connections opened after it.
    if !scope.live().settings().client_allowed(client) {
        tokio::spawn(refuse_client(io, client, scope));
        return;
    }
    let open = scope
        .live()
        .services()
        .metrics
        .connection_opened(ConnectionKind::Client);
    let conn = Arc::new(Conn {
        client,
        entry: Entry::Listener,
        activity: Activity::new(),
        scope,
    });
    tokio::spawn(async move {
        let _open = open;
        connection::serve(io, conn, false).await;
    });
}

/// Tells a client outside `allow_clients` why, logs and counts it, then
/// closes. Nothing of what it sends is read.
async fn refuse_client<T: AsyncWrite + Unpin>(
    mut stream: T,
    client: SocketAddr,
    scope: ConnectionScope,
) {
    let answer = Answer::ClientNotAllowed;
    finish::refused_connection(&scope.live, client, &answer);
    let _ = stream.write_all(&answer.to_http1_bytes()).await;
    let _ = stream.shutdown().await;
}
