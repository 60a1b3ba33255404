//! One exchange with an origin: on a pooled connection when there is one,
//! on a new one otherwise.
//!
//! What it must get right:
//! - a request sent on a pooled HTTP/1.1 connection that the origin has just
//!   closed comes back unsent (hyper's `try_send_request`) and goes out again
//!   on another connection. If it was already written when the close was
//!   seen, it goes out again only if it is idempotent and bodiless (RFC 9110
//!   §9.2.2) and the connection had been idle for [`STALE_RISK`] or more, as
//!   Squid does; otherwise the error stands: a request with a body is never
//!   sent twice. A request that a closing HTTP/2 connection turns away
//!   unsent goes out again likewise;
//! - HTTP/1.1 gets the origin-form target and a `Host` field (when the
//!   request has none); HTTP/2 gets the absolute URI, which hyper sends as
//!   `:scheme`, `:authority` and `:path`;
//! - every error is tagged here or below: the connector tags its own, and an
//!   exchange that fails is [`UpstreamError::ClientBody`] when the client's
//!   request body failed ([`BodyWatch`]), [`UpstreamError::Protocol`]
//!   otherwise.

use std::time::Duration;

use arc_swap::ArcSwap;
use http::header::{HeaderMap, HOST};
use http::uri::Uri;
use http::{Method, Request, Response};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::body::{BodyWatch, OutgoingBody, UpstreamBody};
use super::connect::{Connector, Offer};
use super::error::UpstreamError;
use super::pool::{Checkout, Http1Sender, Http2Sender, Pool};
use super::target::Target;
use super::ProxyBody;

/// A connection idle this long may be closed by the origin's keep-alive
/// timeout (seconds: nginx 75, Apache 5, Node 5, gunicorn 2) just as a
/// request goes out on it, so the request's head is kept to send it again.
/// Connections reused sooner, the busy case, skip that copy.
pub(super) const STALE_RISK: Duration = Duration::from_millis(250);

/// Sends `request` (absolute-form `http` or `https` URI) on a connection of
/// `pool`, or a new one opened by the connector in force, and returns the
/// answer with its body streamed.
pub(super) async fn send(
    pool: &Pool,
    connector: &ArcSwap<Connector>,
    request: Request<ProxyBody>,
) -> Result<Response<UpstreamBody>, UpstreamError> {
    let target = Target::of(request.uri())?;
    let (mut request, watch) = OutgoingBody::watch(request);
    let key = loop {
        match pool.checkout(target.scheme(), target.authority()) {
            Checkout::Http2 {
                key,
                mut sender,
                id,
            } => {
                for_http2(&mut request, &target);
                match sender.try_send_request(request).await {
                    Ok(response) => {
                        let pool = pool.clone();
                        return Ok(response.map(|body| UpstreamBody::http2(body, pool, key, id)));
                    }
                    Err(mut failed) => match failed.take_message() {
                        // The connection is going away; nothing was sent.
                        Some(unsent) => {
                            tracing::debug!(origin = %target.authority(), error = %failed.error(), "shared HTTP/2 connection closing, request resent");
                            pool.forget_http2(&key, id);
                            request = unsent;
                        }
                        None => return Err(exchange_failed(failed.into_error(), &watch)),
                    },
                }
            }
            Checkout::Http1 {
                key,
                mut sender,
                since,
            } => {
                let replay = if since.elapsed() >= STALE_RISK {
                    Replay::of(&request)
                } else {
                    None
                };
                for_http1(&mut request, &target);
                match sender.try_send_request(request).await {
                    Ok(response) => {
                        let pool = pool.clone();
                        return Ok(
                            response.map(|body| UpstreamBody::http1(body, pool, key, sender))
                        );
                    }
                    Err(mut failed) => match (failed.take_message(), replay) {
                        // Never written: the origin closed this idle connection
                        // as it was taken. Sending again cannot repeat anything.
                        (Some(unsent), _) => {
                            tracing::debug!(origin = %target.authority(), error = %failed.error(), "pooled connection closed, request resent");
                            request = unsent;
                        }
                        (None, Some(replay)) if failed.error().is_incomplete_message() => {
                            tracing::debug!(origin = %target.authority(), error = %failed.error(), "pooled connection closed unanswered, idempotent request resent");
                            request = replay.into_request();
                        }
                        (None, _) => return Err(exchange_failed(failed.into_error(), &watch)),
                    },
                }
            }
            Checkout::Nothing { key } => break key,
        }
    };
    // Boxed: opening a connection is the rare path, and its future (DNS,
    // TCP, TLS, handshake) would otherwise make every request's future
    // larger.
    let connector = connector.load_full();
    match Box::pin(open(&connector, &target, Offer::Http2OrHttp1)).await? {
        Opened::Http1(mut sender) => {
            for_http1(&mut request, &target);
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| exchange_failed(e, &watch))?;
            let pool = pool.clone();
            Ok(response.map(|body| UpstreamBody::http1(body, pool, key, sender)))
        }
        Opened::Http2(mut sender) => {
            // Shared at once: requests to the origin that come while this one
            // is under way ride it too.
            let id = pool.share_http2(key.clone(), sender.clone());
            for_http2(&mut request, &target);
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| exchange_failed(e, &watch))?;
            let pool = pool.clone();
            Ok(response.map(|body| UpstreamBody::http2(body, pool, key, id)))
        }
    }
}

/// Sends a protocol upgrade request (WebSocket) on a new HTTP/1.1
/// connection of its own, which hyper hands over to the upgrade once the
/// origin answers `101`. Never pooled: an upgraded connection is no longer
/// HTTP, and one that was not upgraded is not worth keeping for this rare
/// kind of request.
pub(super) async fn send_upgrade(
    connector: &Connector,
    request: Request<ProxyBody>,
) -> Result<Response<Incoming>, UpstreamError> {
    let target = Target::of(request.uri())?;
    let (mut request, watch) = OutgoingBody::watch(request);
    let connected = connector.connect(&target, Offer::Http1).await?;
    let (mut sender, connection) = http1::handshake(connected.io)
        .await
        .map_err(UpstreamError::Protocol)?;
    tokio::spawn(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!(%error, "upstream upgrade connection ended with an error");
        }
    });
    for_http1(&mut request, &target);
    sender
        .send_request(request)
        .await
        .map_err(|e| exchange_failed(e, &watch))
}

/// A new connection, ready for requests.
enum Opened {
    Http1(Http1Sender),
    Http2(Http2Sender),
}

/// Opens a connection to `target`'s origin, in the protocol it chose, and
/// starts the task that drives it.
async fn open(
    connector: &Connector,
    target: &Target,
    offer: Offer,
) -> Result<Opened, UpstreamError> {
    let connected = connector.connect(target, offer).await?;
    if connected.http2 {
        let (sender, connection) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(connected.io)
            .await
            .map_err(UpstreamError::Protocol)?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream HTTP/2 connection ended with an error");
            }
        });
        Ok(Opened::Http2(sender))
    } else {
        let (sender, connection) = http1::handshake(connected.io)
            .await
            .map_err(UpstreamError::Protocol)?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream connection ended with an error");
            }
        });
        Ok(Opened::Http1(sender))
    }
}

/// The exchange failed: the client's fault when its request body failed
/// (or ended before the length it declared, which hyper reports as an
/// aborted body write), else the origin's.
fn exchange_failed(error: hyper::Error, watch: &BodyWatch) -> UpstreamError {
    if watch.failed() || error.is_body_write_aborted() {
        UpstreamError::ClientBody(error)
    } else {
        UpstreamError::Protocol(error)
    }
}

/// Writes `request` for HTTP/1.1: origin-form target, `Host` from the URI
/// when the request has none.
fn for_http1(request: &mut Request<OutgoingBody>, target: &Target) {
    *request.uri_mut() = target.origin_form();
    if !request.headers().contains_key(HOST) {
        if let Some(host) = target.host_field() {
            request.headers_mut().insert(HOST, host);
        }
    }
}

/// Writes `request` for HTTP/2: the absolute URI (an earlier try on an
/// HTTP/1.1 connection may have left the origin form).
fn for_http2(request: &mut Request<OutgoingBody>, target: &Target) {
    *request.uri_mut() = target.absolute().clone();
}

/// A bodiless idempotent request's head, kept to send it again.
struct Replay {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl Replay {
    /// The copy, if `request` may be sent twice: its method is idempotent
    /// (RFC 9110 §9.2.2) and it has no body to replay.
    fn of(request: &Request<OutgoingBody>) -> Option<Replay> {
        let idempotent = matches!(
            *request.method(),
            Method::GET
                | Method::HEAD
                | Method::OPTIONS
                | Method::TRACE
                | Method::PUT
                | Method::DELETE
        );
        (idempotent && request.body().is_end_stream()).then(|| Replay {
            method: request.method().clone(),
            uri: request.uri().clone(),
            headers: request.headers().clone(),
        })
    }

    fn into_request(self) -> Request<OutgoingBody> {
        let mut request = Request::new(OutgoingBody::empty());
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.headers_mut() = self.headers;
        request
    }
}
