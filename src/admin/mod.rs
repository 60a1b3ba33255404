//! The admin listener (`[admin] listen`, `127.0.0.1:9180` by default):
//!
//! - `GET /metrics`: Prometheus exposition of [`crate::metrics::Metrics`];
//! - `GET /healthz`: `200 ok` while the proxy runs;
//! - `GET /.well-known/http-message-signatures-directory`: the robot's key
//!   directory when `[signing]` is configured (404 otherwise), signed as
//!   draft-ietf-webbotauth-httpsig-protocol-01 Appendix B.1 says, for a
//!   front end to publish at the `signing.signature_agent` URL;
//! - `GET /audit?origin=ORIGIN`: the cached robots.txt copy of an origin as
//!   JSON, with the fields the access log records of it and its bytes
//!   (`robots-guard audit ORIGIN` prints it);
//! - `GET /` (`/?profile=NAME`): a status page for people: totals, the
//!   profiles in force, requests per minute by outcome over the last hour,
//!   hosts paused by the site, the per-host table (robots.txt state and age,
//!   requests allowed/denied, pacing delay and queue) and the recent
//!   refusals, refreshing itself every few seconds.
//!
//! The listener has no authentication and shows client addresses, URLs and
//! agents: keep it on loopback (the default) or behind something that
//! authenticates. The proxy binds whatever the config says, because an
//! operator may have such a front end.

mod audit;
pub mod audit_cli;
mod chart;
mod status_page;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::proxy::Live;

/// At most this many admin connections are served at once: the endpoint is
/// for a scraper and a few people, and must not compete with the proxy.
const MAX_CONNECTIONS: usize = 32;

/// Time a client has to send its request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The status page reloads itself this often (seconds).
pub const REFRESH_SECONDS: u32 = 5;

/// `Content-Type` of the classic Prometheus text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `Content-Type` of OpenMetrics text, for scrapers that ask for it.
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the admin listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be bound.
    #[error("cannot listen on {addr} (admin.listen): {error}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
}

/// A bound admin listener, ready to [`run`](AdminServer::run).
pub struct AdminServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    /// Read per request: the page and the scrape show the configuration
    /// in force now, not the one at start.
    live: Live,
}

impl AdminServer {
    /// Binds `addr` (port 0 picks a free port; see
    /// [`local_addr`](AdminServer::local_addr)) for the proxy whose current
    /// state `live` gives (it follows reloads).
    ///
    /// # Errors
    ///
    /// [`AdminError::Bind`] when the address cannot be bound.
    pub async fn bind(addr: SocketAddr, live: Live) -> Result<AdminServer, AdminError> {
        let bind_error = |error| AdminError::Bind { addr, error };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        Ok(AdminServer {
            listener,
            local_addr,
            live,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until the task is dropped or aborted. Nothing here needs a
    /// graceful drain: every answer is computed in one go.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let (stream, peer) = match self.listener.accept().await {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::warn!(%error, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let live = self.live.clone();
            let service = service_fn(move |request| {
                let live = live.clone();
                async move { Ok::<_, Infallible>(route(&live, &request)) }
            });
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(error) = connection.await {
                    tracing::debug!(%peer, %error, "admin connection ended with an error");
                }
                drop(slot);
            });
        }
    }
}

/// Answers one admin request.
fn route(live: &Live, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served here\n",
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/metrics" => metrics(live, request),
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/audit" => audit::answer(live, request.uri().query()),
        crate::signing::DIRECTORY_PATH => key_directory(live, request),
        "/" => {
            let profile = profile_asked_for(request.uri().query());
            let html = status_page::render(&live.settings(), live.services(), profile);
            let mut response = answer(StatusCode::OK, "text/html; charset=utf-8", html);
            let headers = response.headers_mut();
            // No scripts at all; inline styles only. Anything from the
            // network is escaped, and this makes a slip harmless.
            headers.insert(
                "content-security-policy",
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                     base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                ),
            );
            headers.insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
            response
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; this is the robots-guard admin endpoint: /, /metrics, /healthz, \
             /audit?origin=ORIGIN, /.well-known/http-message-signatures-directory\n",
        ),
    }
}

/// `NAME` of a `profile=NAME` query. Profile names are plain words (letters,
/// digits, `-`, `_`, `.`), so nothing needs decoding; anything else selects
/// no profile.
fn profile_asked_for(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("profile="))
        .filter(|name| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// The answer when nothing is signed.
const NOT_SIGNING: &str =
    "no key directory: requests are not signed ([signing] is not configured)\n";

/// The key directory of the signers in force (every key, the profiles'
/// too), signed for the authority the request named (its `Host`, as the
/// front end publishing it passes it on).
fn key_directory(live: &Live, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let signers = live.services().signers.load_full();
    if signers.is_empty() {
        return text(StatusCode::NOT_FOUND, NOT_SIGNING);
    }
    let authority = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            let host = request.headers().get(http::header::HOST)?;
            host.to_str().ok().map(str::to_owned)
        });
    let Some(authority) = authority.filter(|a| !a.is_empty()) else {
        return text(
            StatusCode::BAD_REQUEST,
            "the directory is signed for the authority asked for: send a Host field\n",
        );
    };
    let Some((headers, body)) = signers.directory(&authority, std::time::SystemTime::now()) else {
        return text(StatusCode::NOT_FOUND, NOT_SIGNING);
    };
    let mut response = Response::new(Full::new(body));
    *response.headers_mut() = headers;
    response
}

/// The exposition: the classic Prometheus text format, unless the scraper's
/// `Accept` asks for OpenMetrics. The two differ for counters (the classic
/// format types the `_total` sample itself, and knows no `# UNIT` or
/// `# EOF`), and a classic parser misreads OpenMetrics counters.
fn metrics(live: &Live, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match live.services().metrics.encode() {
        Ok(body) => body,
        Err(error) => {
            tracing::error!(%error, "cannot encode metrics");
            return text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n");
        }
    };
    let openmetrics = request
        .headers()
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        answer(StatusCode::OK, OPENMETRICS_TEXT, body)
    } else {
        answer(StatusCode::OK, PROMETHEUS_TEXT, classic_text(&body))
    }
}

/// The classic Prometheus text format (0.0.4) of an OpenMetrics exposition:
/// a counter family `x` is described as `x_total`, the name its samples
/// carry; `# UNIT` lines, `_created` samples and the `# EOF` marker go.
pub fn classic_text(openmetrics: &str) -> String {
    let mut counters: Vec<&str> = Vec::new();
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.push(name);
        }
    }
    let is_counter = |name: &str| counters.contains(&name);
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let described = line
            .strip_prefix("# HELP ")
            .map(|rest| ("# HELP ", rest))
            .or_else(|| line.strip_prefix("# TYPE ").map(|rest| ("# TYPE ", rest)));
        match described {
            Some((kind, rest)) => {
                let name = rest.split(' ').next().unwrap_or_default();
                if is_counter(name) {
                    out.push_str(kind);
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(&rest[name.len()..]);
                } else {
                    out.push_str(line);
                }
            }
            None => {
                let sample = line.split(['{', ' ']).next().unwrap_or_default();
                let created = sample.strip_suffix("_created").is_some_and(&is_counter);
                if created {
                    continue;
                }
                out.push_str(line);
            }
        }
        out.push('\n');
    }
    out
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    answer(status, "text/plain; charset=utf-8", body)
}

fn answer(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Every answer is a snapshot of now.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
