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

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::connection;
use super::exchange::{Conn, Entry};
use super::finish;
use super::idle::Activity;
use super::reload::Live;
use super::response::Answer;
use super::{finished, reached, ConnectionScope, Phase};
use crate::metrics::ConnectionKind;

/// What every worker's accept loop shares: the connection cap, the live
/// settings and services, and the server's phase.
#[derive(Clone)]
pub(super) struct Acceptor {
    pub(super) live: Live,
    pub(super) connections: Arc<Semaphore>,
    pub(super) phase: watch::Receiver<Phase>,
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

    /// Serves one accepted connection in a task of this worker.
    fn serve(&self, stream: TcpStream, client: SocketAddr, slot: OwnedSemaphorePermit) {
        let scope = ConnectionScope {
            _slot: Arc::new(slot),
            phase: self.phase.clone(),
            live: self.live.clone(),
        };
        // Connection settings come from the settings at accept time, so a
        // reload applies to connections opened after it.
        if !self.live.settings().client_allowed(client) {
            tokio::spawn(refuse_client(stream, client, scope));
            return;
        }
        let _ = stream.set_nodelay(true);
        let open = self
            .live
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
            connection::serve(stream, conn, false).await;
        });
    }
}

/// Tells a client outside `allow_clients` why, logs and counts it, then
/// closes. Nothing of what it sends is read.
async fn refuse_client(mut stream: TcpStream, client: SocketAddr, scope: ConnectionScope) {
    let answer = Answer::ClientNotAllowed;
    finish::refused_connection(&scope.live, client, &answer);
    let _ = stream.write_all(&answer.to_http1_bytes()).await;
    let _ = stream.shutdown().await;
}
