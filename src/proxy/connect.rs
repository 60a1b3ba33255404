//! CONNECT (DESIGN.md §5): TLS interception, or a blind tunnel.
//!
//! In `intercept` mode the proxy answers `200`, terminates TLS with a leaf
//! certificate minted for the host, and runs every decrypted request through
//! the same pipeline as plain HTTP, with origin `https://host:port`. CONNECT
//! itself passes only the client checks: identity is checked on each
//! decrypted request, because common clients send CONNECT without a
//! `User-Agent`. In `tunnel` mode the proxy cannot see paths, so the only
//! decision is per origin: `403` when the agent may fetch nothing there.

use std::net::SocketAddr;
use std::sync::Arc;

use http::uri::{Authority, Scheme as UriScheme};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::idle::{serve_busy, Activity, IdleIo};
use super::response::Answer;
use super::service::{self, refuse, ClientContext, Outcome, Refusal, Scope};
use super::state::ProxyState;
use super::ConnectionScope;
use crate::config::TlsMode;
use crate::metrics::ConnectionKind;
use crate::origin::{Origin, Scheme};
use crate::policy::destination::{ConnectError, DestinationError};
use crate::telemetry::{log_request, RequestRecord};
use crate::upstream::ProxyBody;

/// Answers a CONNECT request.
pub async fn handle(
    state: Arc<ProxyState>,
    client: SocketAddr,
    scope: ConnectionScope,
    activity: Arc<Activity>,
    mut request: Request<Incoming>,
) -> Response<ProxyBody> {
    let started = std::time::Instant::now();
    let target = request.uri().clone();
    let mut user = None;
    let mut agent = String::new();
    let (response, verdict, rule_line) = match decide(&state, &request, &mut user, &mut agent).await
    {
        Err(refusal) => {
            let (answer, outcome) = *refusal;
            (answer.into_response(), outcome.verdict, outcome.rule_line)
        }
        Ok(Decision::Intercept(authority)) => {
            let on_upgrade = hyper::upgrade::on(&mut request);
            // The outer connection stays busy (no idle timer) while the
            // tunnel lives; the decrypted connection has its own timers.
            let busy = activity.begin();
            let state = state.clone();
            let context = ClientContext {
                addr: client,
                user: user.clone(),
                tunneled: true,
            };
            tokio::spawn(async move {
                match on_upgrade.await {
                    Ok(upgraded) => {
                        let _open = state.metrics.connection_opened(ConnectionKind::Intercepted);
                        intercept(state, scope, context, authority, upgraded).await;
                        drop(busy);
                    }
                    Err(error) => tracing::debug!(%client, %error, "CONNECT upgrade failed"),
                }
            });
            (established(), "intercept", None)
        }
        Ok(Decision::Tunnel { upstream, permit }) => {
            let on_upgrade = hyper::upgrade::on(&mut request);
            // A blind tunnel carries no request heads: only the idle timer.
            activity.mark_upgraded();
            let state = state.clone();
            tokio::spawn(async move {
                match on_upgrade.await {
                    Ok(upgraded) => {
                        // The start was paced; the slot is freed once the
                        // tunnel is up, so long-lived tunnels do not block
                        // the host's other requests.
                        drop(permit);
                        let _open = state.metrics.connection_opened(ConnectionKind::Tunnel);
                        // A blind tunnel cannot be wound down gracefully:
                        // it runs until either side closes or the drain
                        // times out.
                        tokio::select! {
                            () = tunnel(client, upgraded, upstream) => {},
                            () = scope.closing() => {},
                        }
                    }
                    Err(error) => tracing::debug!(%client, %error, "CONNECT upgrade failed"),
                }
            });
            (established(), "tunnel", None)
        }
    };
    let record = RequestRecord {
        host: None,
        client,
        user: user.as_deref(),
        method: "CONNECT",
        url: &target,
        agent: &agent,
        verdict,
        rule_line,
        status: response.status().as_u16(),
        upstream: None,
        duration: started.elapsed(),
    };
    log_request(&record);
    state.metrics.record(&record, response.headers());
    response
}

fn established() -> Response<ProxyBody> {
    let mut response = Response::new(super::response::text_body(String::new()));
    *response.status_mut() = StatusCode::OK;
    response
}

enum Decision {
    Intercept(Authority),
    Tunnel {
        upstream: TcpStream,
        permit: crate::policy::PacePermit,
    },
}

/// Decides a CONNECT with the pipeline's own steps and refusals; the user
/// and (in tunnel mode) the agent are written out for the log record.
async fn decide(
    state: &ProxyState,
    request: &Request<Incoming>,
    user: &mut Option<String>,
    agent: &mut String,
) -> Result<Decision, Refusal> {
    // CONNECT passes the client checks only; the user is carried to the
    // requests inside the tunnel.
    *user = service::authenticate(state, request.headers())?;
    let refused = |reason: String| {
        refuse(
            Answer::BadRequest { reason },
            Outcome::refused("bad-request"),
        )
    };
    let authority = request
        .uri()
        .authority()
        .cloned()
        .ok_or_else(|| refused("CONNECT needs a host:port target".to_string()))?;
    if authority.port_u16().is_none() {
        return Err(refused(format!(
            "CONNECT {authority}: the target needs a port"
        )));
    }
    let origin =
        Origin::from_authority(Scheme::Https, &authority).map_err(|e| refused(e.to_string()))?;
    if !state.connect_ports.contains(&origin.port) {
        return Err(refuse(
            Answer::PortRefused { port: origin.port },
            Outcome::refused("port-refused"),
        ));
    }
    if service::targets_listener(&origin, state.listen) {
        return Err(refuse(
            Answer::Loop {
                target: origin.to_string(),
            },
            Outcome::refused("loop"),
        ));
    }
    service::check_destination(state, &origin).await?;
    match state.tls_mode {
        // The decrypted requests go to the origin's spelling of an address.
        TlsMode::Intercept => Ok(Decision::Intercept(
            origin.respelled(&authority).unwrap_or(authority),
        )),
        TlsMode::Tunnel => {
            *agent = state.tunnel_agent(request);
            tunnel_decision(state, agent, origin).await
        }
    }
}

/// Tunnel mode, for `agent` (the CONNECT's own `User-Agent`'s token, else
/// the configured identity's): refuse when it may fetch nothing on the
/// origin, else pace the start and connect.
async fn tunnel_decision(
    state: &ProxyState,
    agent: &str,
    origin: Origin,
) -> Result<Decision, Refusal> {
    let entry = state.robots.lookup(&origin).await;
    let robots = service::robots_verdict(state, &entry, &origin, agent, Scope::Anything)?;
    let permit = service::pace(state, &origin, robots.delay, None).await?;
    let failed = |answer: Answer, verdict: &'static str| refuse(answer, Outcome::refused(verdict));
    // Only to an address the deny list allows, from the same answer the
    // check above used: a second lookup by the socket layer could differ.
    let upstream = state
        .destinations
        .connect(&origin.host, origin.port, state.client.connect_timeout())
        .await
        .map_err(|error| match error {
            ConnectError::Destination(DestinationError::Denied { .. }) => {
                service::destination_denied(&origin)
            }
            ConnectError::TimedOut { waited, .. } => failed(
                Answer::UpstreamTimeout {
                    origin: origin.to_string(),
                    waited,
                },
                "upstream-failed",
            ),
            error => failed(
                Answer::UpstreamError {
                    origin: origin.to_string(),
                    reason: error.to_string(),
                },
                "upstream-failed",
            ),
        })?;
    let _ = upstream.set_nodelay(true);
    Ok(Decision::Tunnel { upstream, permit })
}

async fn tunnel(client: SocketAddr, upgraded: hyper::upgrade::Upgraded, mut upstream: TcpStream) {
    let mut upgraded = TokioIo::new(upgraded);
    match tokio::io::copy_bidirectional(&mut upgraded, &mut upstream).await {
        Ok((up, down)) => tracing::debug!(%client, up, down, "tunnel closed"),
        Err(error) => tracing::debug!(%client, %error, "tunnel broke"),
    }
}

/// Terminates the client's TLS and serves the decrypted HTTP/1.1 or HTTP/2
/// requests through the pipeline.
async fn intercept(
    state: Arc<ProxyState>,
    scope: ConnectionScope,
    context: ClientContext,
    authority: Authority,
    upgraded: hyper::upgrade::Upgraded,
) {
    let client = context.addr;
    let Some(minter) = state.minter.clone() else {
        return;
    };
    let config = minter.server_config(authority.host());
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let tls = match tokio::time::timeout(
        state.timeouts.head,
        acceptor.accept(TokioIo::new(upgraded)),
    )
    .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::warn!(
                %client,
                host = authority.host(),
                %error,
                "TLS handshake with the client failed (does it trust the robots-guard CA?)"
            );
            return;
        }
        Err(_) => {
            tracing::warn!(%client, host = authority.host(), "TLS handshake with the client timed out");
            return;
        }
    };
    // The client chose the protocol in the handshake (we offer h2 and
    // http/1.1); no ALPN means HTTP/1.1 (RFC 9113 §3.2 has h2 over TLS
    // negotiated by ALPN only).
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let activity = Activity::new();
    let io = TokioIo::new(IdleIo::new(tls, activity.clone(), state.timeouts));
    let max_header_bytes = state.max_header_bytes;
    let live = scope.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        // Per request, so a reload applies to the next decrypted request.
        let state = live.state();
        let authority = authority.clone();
        let context = context.clone();
        let activity = activity.clone();
        async move {
            let response = serve_busy(activity, request, |request, activity| {
                let request = absolute_https(request, &authority);
                service::serve_request(state, context, activity, request)
            })
            .await;
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    // As for plain connections: finish the request in progress on
    // shutdown, and drop the connection when the drain times out.
    macro_rules! serve {
        ($connection:expr) => {{
            let connection = $connection;
            let result = serve_until_drained!(connection, &scope);
            if let Some(Err(error)) = result {
                tracing::debug!(%client, %error, "intercepted connection ended with an error");
            }
        }};
    }
    if http2 {
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .max_header_list_size(u32::try_from(max_header_bytes).unwrap_or(u32::MAX));
        serve!(builder.serve_connection(io, service));
    } else {
        serve!(super::http1_server(max_header_bytes)
            .serve_connection(io, service)
            .with_upgrades());
    }
}

/// Decrypted requests carry origin-form targets (HTTP/1.1) or their own
/// `:authority` (HTTP/2); the origin is the CONNECT's authority either way,
/// so the certificate we minted and the origin we fetch agree.
fn absolute_https(mut request: Request<Incoming>, authority: &Authority) -> Request<Incoming> {
    let path_and_query = request
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(UriScheme::HTTPS);
    parts.authority = Some(authority.clone());
    parts.path_and_query = Some(path_and_query);
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    request
}
