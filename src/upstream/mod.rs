//! The pooled clients that talk to origins: for forwarded requests and for
//! robots.txt fetches alike, so both share connections and TLS settings
//! (one pool per worker thread, see [`UpstreamPools`]).
//!
//! Upstream TLS is verified against the Mozilla roots (webpki-roots) plus
//! the PEM files of `tls.extra_roots`; nothing here can turn verification
//! off.

pub mod plain;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::policy::destination::{DestinationError, DestinationPolicy, FilteringResolver};
use plain::{PlainError, PlainPool, PooledBody};

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

/// The connector stack: DNS through the destination policy, TCP, then TLS
/// for https URLs.
pub type Connector = HttpsConnector<HttpConnector<FilteringResolver>>;

/// hyper-util's pooled client: for https origins (HTTP/1.1 or HTTP/2) and
/// upgrade requests.
type UpstreamClient = Client<Connector, ProxyBody>;

/// Settings for [`build_client`].
#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Idle pooled connections are closed after this long.
    pub pool_idle_timeout: Duration,
    /// PEM files whose certificates are trusted as roots besides Mozilla's.
    pub extra_roots: Vec<PathBuf>,
}

/// Why the upstream client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBuildError {
    /// An extra root file could not be read.
    #[error("cannot read tls.extra_roots file {}: {error}", path.display())]
    ReadRoots {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// An extra root file holds no usable certificate.
    #[error("tls.extra_roots file {} holds no valid PEM certificate{detail}", path.display())]
    BadRoots {
        /// The file.
        path: PathBuf,
        /// What went wrong, if known.
        detail: String,
    },
    /// rustls refused the configuration.
    #[error("TLS client configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// Builds the rustls client configuration: Mozilla roots plus `extra_roots`.
///
/// # Errors
///
/// [`UpstreamBuildError`] when a root file is unreadable or holds no certificate.
pub fn client_tls_config(
    extra_roots: &[PathBuf],
) -> Result<rustls::ClientConfig, UpstreamBuildError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for path in extra_roots {
        add_pem_roots(&mut roots, path)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn add_pem_roots(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), UpstreamBuildError> {
    let pem = std::fs::read(path).map_err(|error| UpstreamBuildError::ReadRoots {
        path: path.to_path_buf(),
        error,
    })?;
    let mut added = 0;
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| UpstreamBuildError::BadRoots {
            path: path.to_path_buf(),
            detail: format!(": {e}"),
        })?;
        roots.add(cert).map_err(|e| UpstreamBuildError::BadRoots {
            path: path.to_path_buf(),
            detail: format!(": {e}"),
        })?;
        added += 1;
    }
    if added == 0 {
        return Err(UpstreamBuildError::BadRoots {
            path: path.to_path_buf(),
            detail: String::new(),
        });
    }
    Ok(())
}

/// Builds one set of pools, shared by every thread, with no destination
/// rules: for tools and tests that run no workers.
///
/// # Errors
///
/// See [`client_tls_config`].
pub fn build_client(settings: &UpstreamSettings) -> Result<UpstreamPools, UpstreamBuildError> {
    UpstreamPools::build(
        settings,
        DestinationPolicy::allow_all(),
        std::num::NonZeroUsize::MIN,
    )
}

/// The connector stack for `settings`, resolving through `destinations`.
fn connector(
    settings: &UpstreamSettings,
    destinations: Arc<DestinationPolicy>,
    upgrades: bool,
) -> Result<Connector, UpstreamBuildError> {
    // hyper-rustls sets ALPN itself from `enable_http1`/`enable_http2` below
    // and panics if the config already has protocols.
    let tls = client_tls_config(&settings.extra_roots)?;
    let mut http = HttpConnector::new_with_resolver(FilteringResolver(destinations));
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(settings.connect_timeout));
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1();
    Ok(if upgrades {
        builder.wrap_connector(http)
    } else {
        builder.enable_http2().wrap_connector(http)
    })
}

/// A client with its own connection pool over `connector`.
fn client_on(connector: Connector, settings: &UpstreamSettings) -> UpstreamClient {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(settings.pool_idle_timeout)
        .pool_max_idle_per_host(plain::MAX_IDLE_PER_ORIGIN)
        .build(connector)
}

/// The upstream pools of each proxy worker thread ([`crate::worker`]).
///
/// A pooled connection is driven by a task on the runtime that opened it.
/// Were the pools shared, a request on one worker would often ride a
/// connection driven by another, and every exchange would cost two
/// cross-thread wake-ups; with pools per worker a request, its upstream
/// exchange and its answer stay on one thread. The price is that each
/// worker opens its own connections to an origin.
#[derive(Clone)]
pub struct UpstreamPools {
    workers: Arc<[WorkerPools]>,
    /// The connector's connect timeout, for connections opened beside the
    /// pools (blind tunnels), so both use one value.
    connect_timeout: std::time::Duration,
}

/// One worker's pools: plain-http origins go to `plain` (unless the pools
/// carry upgrades), the rest to hyper-util's client.
struct WorkerPools {
    client: UpstreamClient,
    upgrade_client: UpstreamClient,
    plain: Option<PlainPool>,
}

impl UpstreamPools {
    /// Pools for `workers` threads sharing one connector (and so one TLS
    /// configuration and DNS filter).
    ///
    /// # Errors
    ///
    /// See [`client_tls_config`].
    pub fn build(
        settings: &UpstreamSettings,
        destinations: Arc<DestinationPolicy>,
        workers: std::num::NonZeroUsize,
    ) -> Result<UpstreamPools, UpstreamBuildError> {
        let upgrade_connector = connector(settings, destinations.clone(), true)?;
        let connector = connector(settings, destinations, false)?;
        let workers = (0..workers.get())
            .map(|_| WorkerPools {
                client: client_on(connector.clone(), settings),
                upgrade_client: client_on(upgrade_connector.clone(), settings),
                plain: Some(PlainPool::new(
                    connector.clone(),
                    settings.pool_idle_timeout,
                )),
            })
            .collect();
        Ok(UpstreamPools {
            workers,
            connect_timeout: settings.connect_timeout,
        })
    }

    /// The time allowed to open a connection (`proxy.upstream_connect_timeout`
    /// when these pools were built).
    pub fn connect_timeout(&self) -> std::time::Duration {
        self.connect_timeout
    }

    /// How many workers these pools serve.
    pub fn workers(&self) -> std::num::NonZeroUsize {
        // Never empty: built from a NonZeroUsize.
        std::num::NonZeroUsize::new(self.workers.len()).unwrap_or(std::num::NonZeroUsize::MIN)
    }

    /// The pools of the worker thread this runs on; a thread that is no
    /// worker (tests, tools) shares worker 0's.
    fn current(&self) -> &WorkerPools {
        // Never empty: built from a NonZeroUsize.
        &self.workers[crate::worker::current() % self.workers.len()]
    }

    /// Sends `request` (absolute-form URI) to its origin on a pooled
    /// connection of this worker and returns the response, its body
    /// streamed. `Host` is set from the URI when the request has none.
    ///
    /// # Errors
    ///
    /// The client's error, boxed: [`UpstreamFailure::classify`] tells
    /// what kind of failure it is.
    pub async fn request(
        &self,
        request: Request<ProxyBody>,
    ) -> Result<Response<UpstreamBody>, BoxError> {
        let pools = self.current();
        match &pools.plain {
            Some(plain) if request.uri().scheme() == Some(&http::uri::Scheme::HTTP) => {
                let response = plain.request(request).await?;
                Ok(response.map(UpstreamBody::Left))
            }
            _ => {
                let response = pools.client.request(request).await?;
                Ok(response.map(UpstreamBody::Right))
            }
        }
    }
}

impl UpstreamPools {
    /// Applies new settings to connections opened from now on.
    pub fn reconfigure(&self, settings: &UpstreamSettings) {
        let _ = settings;
    }

    /// Sends `request` on a pooled connection, with its failure typed.
    ///
    /// # Errors
    ///
    /// [`UpstreamError`].
    pub async fn send(
        &self,
        request: Request<ProxyBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        self.request(request)
            .await
            .map_err(|e| UpstreamError::from_failure(UpstreamFailure::classify(&*e)))
    }

    /// Sends a protocol upgrade request on an HTTP/1.1 connection.
    ///
    /// # Errors
    ///
    /// [`UpstreamError`].
    pub async fn send_upgrade(
        &self,
        request: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        self.current()
            .upgrade_client
            .request(request)
            .await
            .map_err(|e| UpstreamError::from_failure(UpstreamFailure::classify(&e)))
    }
}

/// Why an exchange with an origin failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// Every address of the host is denied.
    #[error("{0}")]
    Denied(String),
    /// No connection could be opened.
    #[error("cannot connect to the origin: {0}")]
    Connect(String),
    /// The origin's certificate failed verification.
    #[error("the origin's TLS certificate failed verification: {reason}")]
    Certificate {
        /// The verification problem.
        reason: String,
    },
    /// The exchange broke off.
    #[error("the origin's answer broke off or was not valid HTTP: {0}")]
    Protocol(String),
    /// The client's request body failed.
    #[error("{0}")]
    ClientBody(String),
}

impl UpstreamError {
    fn from_failure(failure: UpstreamFailure) -> UpstreamError {
        match failure {
            UpstreamFailure::Certificate(reason) => UpstreamError::Certificate { reason },
            UpstreamFailure::Connect(why) => UpstreamError::Connect(why),
            UpstreamFailure::Denied(why) => UpstreamError::Denied(why),
            UpstreamFailure::ClientBody(why) => UpstreamError::ClientBody(why),
            UpstreamFailure::Protocol(why) => UpstreamError::Protocol(why),
        }
    }
}

/// An origin's response body, from whichever pool carried the exchange:
/// the plain-http pool's (which hands its connection back at the end), or
/// hyper-util's client's. Errors come boxed.
pub type UpstreamBody = http_body_util::Either<PooledBody, Incoming>;

/// The client's own request body failed while it was being forwarded (bad
/// chunking, a connection cut mid-body): the client's fault, not the
/// origin's. The pipeline wraps client body errors in this type so the
/// answer can say so (`400`, not `502`).
#[derive(Debug, thiserror::Error)]
#[error("the request body from the client broke off or was malformed: {0}")]
pub struct ClientBodyError(#[source] pub hyper::Error);

/// What went wrong talking to an origin, for choosing the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// The origin's certificate failed verification (never accepted).
    Certificate(String),
    /// DNS, refused or unreachable connection, TLS handshake failure.
    Connect(String),
    /// Every address of the host is in `proxy.deny_destinations`.
    Denied(String),
    /// The client's request body failed, not the origin.
    ClientBody(String),
    /// The connection broke or the origin answered with invalid HTTP.
    Protocol(String),
}

impl UpstreamFailure {
    /// Classifies an error of the upstream client by walking its sources.
    pub fn classify(error: &(dyn std::error::Error + 'static)) -> UpstreamFailure {
        let mut message = error.to_string();
        let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
        let mut connect = false;
        while let Some(e) = current {
            if let Some(body) = e.downcast_ref::<ClientBodyError>() {
                return UpstreamFailure::ClientBody(body.to_string());
            }
            if let Some(denied @ DestinationError::Denied { .. }) =
                e.downcast_ref::<DestinationError>()
            {
                return UpstreamFailure::Denied(denied.to_string());
            }
            if let Some(client) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
                connect |= client.is_connect();
            }
            if let Some(plain) = e.downcast_ref::<PlainError>() {
                connect |= plain.is_connect();
            }
            if let Some(tls) = find_rustls(e) {
                if let rustls::Error::InvalidCertificate(why) = tls {
                    return UpstreamFailure::Certificate(format!("{why:?}"));
                }
                return UpstreamFailure::Connect(format!("TLS handshake failed: {tls}"));
            }
            let text = e.to_string();
            if !text.is_empty() && !message.contains(&text) {
                message = format!("{message}: {text}");
            }
            current = e.source();
        }
        if connect {
            UpstreamFailure::Connect(message)
        } else {
            UpstreamFailure::Protocol(message)
        }
    }

    /// A one-line description for people.
    pub fn describe(&self) -> String {
        match self {
            UpstreamFailure::Certificate(why) => {
                format!("the origin's TLS certificate failed verification: {why}")
            }
            UpstreamFailure::Connect(why) => format!("cannot connect to the origin: {why}"),
            UpstreamFailure::Denied(why) | UpstreamFailure::ClientBody(why) => why.clone(),
            UpstreamFailure::Protocol(why) => {
                format!("the origin's answer broke off or was not valid HTTP: {why}")
            }
        }
    }
}

/// The rustls error `e` is or wraps. `io::Error`s are unwrapped by hand, as many levels
/// deep as they go: hyper-rustls wraps tokio-rustls' `io::Error` in another one, and
/// `io::Error::source` skips the wrapped error itself (it returns *its* source), so
/// walking `source()` alone never meets the rustls error.
fn find_rustls<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current = e;
    loop {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let inner: &(dyn std::error::Error + 'static) =
            current.downcast_ref::<std::io::Error>()?.get_ref()?;
        current = inner;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_error_is_found_inside_nested_io_errors() {
        // The shape hyper-rustls produces: io::Error::other(tokio-rustls' io::Error).
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let outer = std::io::Error::other(inner);
        assert!(matches!(
            UpstreamFailure::classify(&outer),
            UpstreamFailure::Certificate(why) if why.contains("UnknownIssuer")
        ));
    }

    #[test]
    fn each_worker_thread_gets_its_own_pool() {
        let settings = UpstreamSettings {
            connect_timeout: Duration::from_secs(1),
            pool_idle_timeout: Duration::from_secs(1),
            extra_roots: Vec::new(),
        };
        let destinations = Arc::new(DestinationPolicy::new(
            Vec::new(),
            Duration::from_secs(1),
            std::num::NonZeroUsize::MIN,
        ));
        let workers = std::num::NonZeroUsize::new(3).unwrap();
        let pools = UpstreamPools::build(&settings, destinations, workers).unwrap();
        let chosen = |index: usize| {
            let pools = pools.clone();
            std::thread::spawn(move || {
                crate::worker::enter(index);
                std::ptr::from_ref(pools.current()) as usize
            })
            .join()
            .unwrap()
        };
        let (zero, one, two) = (chosen(0), chosen(1), chosen(2));
        assert!(zero != one && one != two && zero != two);
        assert_eq!(chosen(1), one, "the same worker always gets the same pool");
        // A thread that is no worker (tests, tools) shares worker 0's.
        assert_eq!(std::ptr::from_ref(pools.current()) as usize, zero);
    }

    #[test]
    fn other_errors_are_not_certificate_failures() {
        let e = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(matches!(
            UpstreamFailure::classify(&e),
            UpstreamFailure::Protocol(_)
        ));
    }
}
