//! A CONNECT that passed the phases: answer `200`, then read what the tunnel
//! carries.
//!
//! In `intercept` mode nothing is connected yet: the tunnel's first bytes
//! decide ([`super::peek`]). TLS is terminated with a certificate minted for
//! the host and each decrypted request runs through the pipeline as `https`;
//! plain HTTP runs through it as `http`; anything else is closed.
//!
//! In `tunnel` mode the phases judged the `https` origin as a whole (refused
//! only when the robot may fetch nothing there) and paced the tunnel's start.
//! The upstream connection is opened before the `200`, so a failure is still
//! a `502`/`504`. TLS then flows blind; plain HTTP is read after all (the
//! proxy can see it, so it judges each request) and the upstream connection
//! is dropped; anything else is closed. When the `https` origin's robots.txt
//! could not be fetched, that is known only to matter once the tunnel shows
//! TLS: it is then closed, and the refusal logged and counted.

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::super::exchange::{Conn, Entry, Exchange};
use super::super::finish;
use super::super::idle::Activity;
use super::super::response::{text_body, Answer, Refusal};
use super::peek::{peek, Carried, Prefixed};
use super::{intercept, tunnel};
use crate::config::TlsMode;
use crate::metrics::ConnectionKind;
use crate::origin::{Origin, Scheme};
use crate::outcome::Reason;
use crate::policy::destination::{ConnectError, DestinationError};
use crate::policy::PacePermit;
use crate::upstream::ProxyBody;

/// Opens the tunnel: `200` now, the rest in a task of its own.
pub(super) async fn open(
    ex: &mut Exchange,
    origin: &Origin,
    mut request: Request<Incoming>,
    permit: Option<PacePermit>,
) -> Result<Response<ProxyBody>, Refusal> {
    // Requests inside go out to the origin's spelling of an address.
    let written = request.uri().authority().cloned();
    let Some(authority) = written.map(|a| origin.respelled(&a).unwrap_or(a)) else {
        return Err(Answer::BadRequest {
            reason: "CONNECT needs a host:port target".to_owned(),
        }
        .into());
    };
    let upstream = match ex.settings.tls_mode {
        TlsMode::Intercept => None,
        TlsMode::Tunnel => Some(connect_upstream(ex, origin).await?),
    };
    ex.reason = if upstream.is_some() {
        Reason::Tunnel
    } else {
        Reason::Intercept
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    // The listener's connection now carries the tunnel: it stays busy (no
    // idle or head timer) until the tunnel has decided what it carries.
    let busy = ex.conn.activity.begin();
    let outer = ex.conn.clone();
    let inner_origin = origin.clone();
    let user = ex.user.clone();
    // The purposes the CONNECT declared hold for every request inside.
    let purposes = ex.purposes;
    let services = ex.services.clone();
    let head_timeout = ex.settings.timeouts.head;
    let if_tls = ex.if_tls.take();
    let url = ex.url.clone();
    let agent = ex.agent.clone();
    let profile = ex.profile.clone();
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(client = %outer.client, %error, "CONNECT upgrade failed");
                return;
            }
        };
        let mut io = TokioIo::new(upgraded);
        let (carried, prefix) = peek(&mut io, head_timeout).await;
        let io = Prefixed::new(prefix, io);
        // The start was paced; the slot is freed once the tunnel is up, so
        // long-lived tunnels do not hold up the host's other requests (the
        // requests read inside take slots of their own).
        drop(permit);
        let inner = |scheme: Scheme| {
            Arc::new(Conn {
                client: outer.client,
                entry: Entry::Tunnel {
                    origin: Origin {
                        scheme,
                        ..inner_origin.clone()
                    },
                    authority: authority.clone(),
                    user: user.clone(),
                    purposes,
                },
                activity: Activity::new(),
                scope: outer.scope.clone(),
            })
        };
        match (carried, upstream) {
            (Carried::Tls, Some(_)) if if_tls.is_some() => {
                if let Some(answer) = &if_tls {
                    tracing::info!(
                        client = %outer.client,
                        target = %authority,
                        "blind tunnel carrying TLS closed: {}",
                        answer.reason()
                    );
                    finish::refused_tunnel(
                        &services,
                        outer.client,
                        &url,
                        &agent,
                        &profile.name,
                        answer,
                    );
                }
            }
            (Carried::Tls, Some(upstream)) => {
                // A blind tunnel carries no request heads: only the idle timer.
                outer.activity.mark_upgraded();
                drop(busy);
                let _open = services.metrics.connection_opened(ConnectionKind::Tunnel);
                tunnel::relay(outer.client, io, upstream, &outer.scope).await;
            }
            (Carried::Tls, None) => {
                let _open = services
                    .metrics
                    .connection_opened(ConnectionKind::Intercepted);
                intercept::serve_tls(io, inner(Scheme::Https), &authority).await;
                drop(busy);
            }
            (Carried::Http, _) => {
                let _open = services
                    .metrics
                    .connection_opened(ConnectionKind::Intercepted);
                super::super::connection::serve_in_tunnel(io, inner(Scheme::Http), false).await;
                drop(busy);
            }
            (Carried::Other, _) => {
                tracing::info!(
                    client = %outer.client,
                    target = %authority,
                    "CONNECT tunnel carried neither TLS nor HTTP; closed"
                );
            }
        }
    });
    let mut response = Response::new(text_body(String::new()));
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

/// Tunnel mode: connects to an address the deny list allows, from the same
/// DNS answer the destination phase used (a second lookup by the socket
/// layer could differ).
async fn connect_upstream(
    ex: &Exchange,
    origin: &Origin,
) -> Result<tokio::net::TcpStream, Refusal> {
    let upstream = ex
        .services
        .destinations
        .connect(
            &origin.host,
            origin.port,
            ex.services.upstream.connect_timeout(),
        )
        .await
        .map_err(|error| match error {
            ConnectError::Destination(DestinationError::Denied { .. }) => {
                Answer::DestinationDenied {
                    host: origin.host.clone(),
                }
            }
            ConnectError::TimedOut { waited, .. } => Answer::UpstreamTimeout {
                origin: origin.to_string(),
                waited,
            },
            error => Answer::UpstreamError {
                origin: origin.to_string(),
                problem: error.to_string(),
            },
        })?;
    let _ = upstream.set_nodelay(true);
    Ok(upstream)
}
