//! The pooled connections that talk to origins: for forwarded requests and
//! for robots.txt fetches alike, so both share connections and TLS settings
//! (one pool per worker thread, see [`UpstreamPools`]).
//!
//! One pool family serves `http` and `https` origins, HTTP/1.1 and HTTP/2,
//! and one error type says what went wrong. The parts, each with one job:
//! - `target.rs`: where a request goes and how its target is written
//!   (origin form and `Host` for HTTP/1.1, the absolute URI for HTTP/2);
//! - `connect.rs`: DNS through the destination policy, TCP with Happy
//!   Eyeballs, TLS with ALPN;
//! - `pool.rs`: the connections a worker keeps, and their limits;
//! - `send.rs`: one exchange, on a kept connection or a new one, with the
//!   rules for sending a request again;
//! - `body.rs`: the request body on its way (noting when the client's
//!   fails) and the answer's body (handing its connection back);
//! - `error.rs`: [`UpstreamError`], tagged where each failure arises;
//! - `tls.rs`: trusted roots and ALPN.
//!
//! Upstream TLS is verified against the Mozilla roots (webpki-roots) plus
//! the PEM files of `tls.extra_roots`; nothing here can turn verification
//! off.

mod body;
mod connect;
mod error;
mod pool;
mod send;
mod target;
mod tls;

#[cfg(test)]
mod tests;

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;

use crate::policy::destination::DestinationPolicy;
use connect::Connector;
use pool::Pool;

pub use body::UpstreamBody;
pub use error::{UpstreamBuildError, UpstreamError};
pub use pool::MAX_IDLE_PER_ORIGIN;
pub use tls::client_tls_config;

/// Errors of any body the proxy passes along.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body type used on both sides of the proxy: streamed, never buffered.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// An empty body, for requests that send none.
pub fn empty_body() -> ProxyBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::<Bytes>::new()
        .map_err(|never: std::convert::Infallible| -> BoxError { match never {} })
        .boxed()
}

/// Settings for [`UpstreamPools::build`].
#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    /// Time allowed to open a connection: TCP and, for `https`, TLS.
    pub connect_timeout: Duration,
    /// Idle pooled connections are closed after this long.
    pub pool_idle_timeout: Duration,
    /// PEM files whose certificates are trusted as roots besides Mozilla's.
    pub extra_roots: Vec<PathBuf>,
    /// Connections kept for reuse in all, split between the workers' pools
    /// (`proxy.max_idle_upstream`); read when the pools are built.
    pub max_idle: NonZeroUsize,
}

/// Builds one set of pools, shared by every thread, with no destination
/// rules: for tools and tests that run no workers.
///
/// # Errors
///
/// See [`client_tls_config`].
pub fn build_client(settings: &UpstreamSettings) -> Result<UpstreamPools, UpstreamBuildError> {
    UpstreamPools::build(settings, DestinationPolicy::allow_all(), NonZeroUsize::MIN)
}

/// The upstream pools of each proxy worker thread ([`crate::worker`]).
///
/// A pooled connection is driven by a task on the runtime that opened it.
/// Were the pools shared, a request on one worker would often ride a
/// connection driven by another, and every exchange would cost two
/// cross-thread wake-ups; with pools per worker a request, its upstream
/// exchange and its answer stay on one thread. The price is that each
/// worker opens its own connections to an origin. The connector (DNS
/// policy, TLS configuration, connect timeout) is one for all, replaced
/// whole by [`UpstreamPools::reconfigure`].
#[derive(Clone)]
pub struct UpstreamPools {
    workers: Arc<[Pool]>,
    connector: Arc<ArcSwap<Connector>>,
}

impl UpstreamPools {
    /// Pools for `workers` threads, connecting through `destinations` (so
    /// denied addresses are never connected to, and a reload's new deny
    /// list applies at once).
    ///
    /// # Errors
    ///
    /// See [`client_tls_config`].
    pub fn build(
        settings: &UpstreamSettings,
        destinations: Arc<DestinationPolicy>,
        workers: NonZeroUsize,
    ) -> Result<UpstreamPools, UpstreamBuildError> {
        let tls = client_tls_config(&settings.extra_roots)?;
        let connector = Connector::new(&tls, destinations, settings.connect_timeout);
        // The total split evenly; a worker keeps at least one.
        let per_worker = (settings.max_idle.get() / workers.get()).max(1);
        let workers = (0..workers.get())
            .map(|_| Pool::new(settings.pool_idle_timeout, per_worker))
            .collect();
        Ok(UpstreamPools {
            workers,
            connector: Arc::new(ArcSwap::from_pointee(connector)),
        })
    }

    /// Applies a reloaded configuration's `connect_timeout` and
    /// `extra_roots` to the connections opened from now on; open ones keep
    /// what they were opened with, and `pool_idle_timeout` stays as built.
    /// Should the roots no longer be readable (they were read when the
    /// configuration was checked), the old roots stay, with a warning: a
    /// reload cannot fail at this point.
    pub fn reconfigure(&self, settings: &UpstreamSettings) {
        let current = self.connector.load();
        let connector = match client_tls_config(&settings.extra_roots) {
            Ok(tls) => Connector::new(
                &tls,
                current.destinations().clone(),
                settings.connect_timeout,
            ),
            Err(error) => {
                tracing::warn!(%error, "tls.extra_roots unusable on reload; the previous roots stay");
                current.with_timeout(settings.connect_timeout)
            }
        };
        self.connector.store(Arc::new(connector));
    }

    /// The time allowed to open a connection (`proxy.upstream_connect_timeout`
    /// when these pools were built), for connections opened beside the
    /// pools (blind tunnels), so both use one value.
    pub fn connect_timeout(&self) -> Duration {
        self.connector.load().timeout()
    }

    /// How many workers these pools serve.
    pub fn workers(&self) -> NonZeroUsize {
        // Never empty: built from a NonZeroUsize.
        NonZeroUsize::new(self.workers.len()).unwrap_or(NonZeroUsize::MIN)
    }

    /// Connections the pools hold now, idle HTTP/1.1 and shared HTTP/2, in
    /// all workers: at most `max_idle` (one per worker when that is less
    /// than the workers).
    pub fn held(&self) -> usize {
        self.workers.iter().map(Pool::held).sum()
    }

    /// The pool of the worker thread this runs on; a thread that is no
    /// worker (tests, tools) shares worker 0's.
    fn current(&self) -> &Pool {
        // Never empty: built from a NonZeroUsize.
        &self.workers[crate::worker::current() % self.workers.len()]
    }

    /// Sends `request` (absolute-form `http` or `https` URI) to its origin
    /// on a pooled connection of this worker, or a new one, and returns the
    /// response, its body streamed. HTTP/1.1, or HTTP/2 when an `https`
    /// origin chose it by ALPN. On HTTP/1.1 the target goes in origin form
    /// and `Host` is set from the URI when the request has none.
    ///
    /// # Errors
    ///
    /// [`UpstreamError`], saying what failed.
    pub async fn send(
        &self,
        request: Request<ProxyBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        send::send(self.current(), &self.connector, request).await
    }

    /// Sends a protocol upgrade request (WebSocket) on a fresh HTTP/1.1
    /// connection with upgrades on, never pooled: after a `101`,
    /// `hyper::upgrade::on` on the response yields the origin's side.
    ///
    /// # Errors
    ///
    /// [`UpstreamError`], saying what failed.
    pub async fn send_upgrade(
        &self,
        request: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        // Boxed: upgrades are rare, and their future (DNS, TCP, TLS,
        // handshake) would otherwise size that of every caller that can
        // send either kind of request.
        let connector = self.connector.load_full();
        Box::pin(send::send_upgrade(&connector, request)).await
    }
}
