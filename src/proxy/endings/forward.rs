//! Forwarding: the request goes to its origin and the answer streams back.
//!
//! Hop-by-hop fields are removed and `Via` added both ways; `Host` becomes
//! the target's authority. The origin has `proxy.upstream_timeout` to start
//! its answer; bodies then stream without a limit, and the host's pacing slot
//! is held until the answer's body has been sent. A protocol upgrade
//! (WebSocket) keeps its `Upgrade` fields and, once the origin answers `101`,
//! becomes a byte pipe. How the origin did (a `429`/`503`, a failure, or an
//! ordinary answer) feeds the host's back-off.
//!
//! An answer whose `Content-Usage` header refuses a purpose the request
//! declared cannot be un-fetched: it goes to the client marked
//! `X-Robots-Guard-Usage` (the refusing members), and is logged and counted.
//!
//! With `[signing]`, the request is signed (Web Bot Auth) as it leaves, with
//! the key of the request's profile: last, so the signature covers the
//! fields as the origin receives them.

use http::header::{HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::super::exchange::Exchange;
use super::super::headers::{prepare_request, prepare_response};
use super::super::holding_body::HoldingBody;
use super::super::response::{Answer, Refusal, USAGE};
use super::upgrade;
use crate::fetch::retry_after;
use crate::origin::Origin;
use crate::policy::{BackoffCause, PacePermit};
use crate::robots::refusing_members;
use crate::upstream::{BoxError, ProxyBody, UpstreamError};

/// The `Content-Usage` response header (draft-ietf-aipref-attach).
const CONTENT_USAGE: HeaderName = HeaderName::from_static("content-usage");

/// Forwards the request and relays the answer.
pub(super) async fn forward(
    ex: &mut Exchange,
    origin: &Origin,
    mut request: Request<Incoming>,
    mut permit: Option<PacePermit>,
) -> Result<Response<ProxyBody>, Refusal> {
    let upgrade = wants_upgrade(&request);
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    let mut request = request.map(|body| body.map_err(BoxError::from).boxed());
    prepare_request(&mut request, origin, &ex.services.via, upgrade);
    if let Some(signer) = ex.services.signers.load().for_profile(&ex.profile.name) {
        signer.sign(
            request.headers_mut(),
            &origin.authority(),
            std::time::SystemTime::now(),
        );
    }
    let pools = &ex.services.upstream;
    let started = Instant::now();
    let deadline = started + ex.settings.upstream_timeout;
    if let Some(client_upgrade) = client_upgrade {
        // The connection stays busy while the pipe lives, so the idle timer
        // leaves an upgraded connection (a WebSocket keeps its own pace) alone.
        let busy = ex.conn.activity.begin();
        let sent = tokio::time::timeout_at(deadline, pools.send_upgrade(request)).await;
        ex.upstream = Some(started.elapsed());
        let mut response = answered(ex, origin, sent, &mut permit)?;
        let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
        prepare_response(&mut response, &ex.services.via, switching);
        if !switching {
            return Ok(response.map(|body| {
                HoldingBody::new(body.map_err(BoxError::from).boxed(), permit).boxed()
            }));
        }
        // The pipe holds the pacing slot and the busy mark while it lives.
        let origin_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(upgrade::pipe(
            client_upgrade,
            origin_upgrade,
            (permit, busy),
        ));
        return Ok(response.map(|body| body.map_err(BoxError::from).boxed()));
    }
    let sent = tokio::time::timeout_at(deadline, pools.send(request)).await;
    ex.upstream = Some(started.elapsed());
    let mut response = answered(ex, origin, sent, &mut permit)?;
    prepare_response(&mut response, &ex.services.via, false);
    if !ex.purposes.is_empty() {
        mark_usage_refusal(ex, &mut response);
    }
    Ok(response.map(|body| HoldingBody::new(body.map_err(BoxError::from).boxed(), permit).boxed()))
}

/// The origin's response, or the answer for why there is none; either way
/// the host's back-off hears how the origin did.
fn answered<B>(
    ex: &Exchange,
    origin: &Origin,
    sent: Result<Result<Response<B>, UpstreamError>, tokio::time::error::Elapsed>,
    permit: &mut Option<PacePermit>,
) -> Result<Response<B>, Refusal> {
    let pacer = &ex.services.pacer;
    let host = origin.pacing_key();
    let error = match sent {
        Ok(Ok(response)) => {
            let wait = retry_after(response.headers(), std::time::SystemTime::now());
            match BackoffCause::of_answer(response.status().as_u16(), wait) {
                Some((cause, Some(wait))) => pacer.pause(host, wait, cause),
                Some((cause, None)) => pacer.failed(host, cause),
                None => {
                    if let Some(permit) = permit {
                        permit.succeeded();
                    }
                }
            }
            return Ok(response);
        }
        Err(_) => {
            pacer.failed(host, BackoffCause::Timeout);
            return Err(Answer::UpstreamTimeout {
                origin: origin.to_string(),
                waited: ex.settings.upstream_timeout,
            }
            .into());
        }
        Ok(Err(error)) => error,
    };
    match &error {
        UpstreamError::Connect { .. } | UpstreamError::ConnectTimeout { .. } => {
            pacer.failed(host, BackoffCause::ConnectError)
        }
        UpstreamError::Protocol(_) => pacer.failed(host, BackoffCause::Reset),
        _ => {}
    }
    let host = &origin.host;
    let origin = origin.to_string();
    Err(match error {
        // As `proxy.upstream_connect_timeout` promises, and as a tunnel
        // answers the same failure.
        UpstreamError::ConnectTimeout { waited, .. } => Answer::UpstreamTimeout { origin, waited },
        UpstreamError::Certificate { reason } => Answer::UpstreamCertificate {
            origin,
            problem: reason,
        },
        UpstreamError::ClientBody(_) => Answer::BadRequest {
            reason: error.to_string(),
        },
        UpstreamError::Denied { .. } => Answer::DestinationDenied {
            host: host.to_owned(),
        },
        other => Answer::UpstreamError {
            origin,
            problem: other.to_string(),
        },
    }
    .into())
}

/// Marks an answer whose `Content-Usage` refuses a declared purpose.
fn mark_usage_refusal<B>(ex: &mut Exchange, response: &mut Response<B>) {
    let headers = response.headers_mut();
    let mut refusing: Vec<&str> = Vec::new();
    for value in headers.get_all(CONTENT_USAGE) {
        if let Ok(text) = value.to_str() {
            refusing.extend(refusing_members(text, ex.purposes));
        }
    }
    if refusing.is_empty() {
        return;
    }
    let members = refusing.join(", ");
    if let Ok(value) = HeaderValue::from_str(&members) {
        headers.insert(USAGE, value);
    }
    ex.usage_refused = Some(members);
}

/// `Connection: upgrade` with an `Upgrade` field (RFC 9110 §7.8).
fn wants_upgrade<B>(request: &Request<B>) -> bool {
    let connection_says_upgrade = request
        .headers()
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    connection_says_upgrade && request.headers().contains_key(http::header::UPGRADE)
}
