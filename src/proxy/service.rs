//! The request pipeline, in the order of DESIGN.md §1: parse → identity →
//! robots.txt → verdict → pacing → forward. Each step returns a typed
//! decision; only the last touches the network.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::forward::{self, ForwardError, HoldingBody};
use super::idle::Activity;
use super::response::{Answer, ServedAs};
use super::state::ProxyState;
use crate::fetch::{RobotsEntry, RobotsRules};
use crate::origin::{Origin, OriginError};
use crate::robots::{Spelling, Spellings};
use crate::telemetry::{log_request, RequestRecord};
use crate::upstream::{BoxError, ClientBodyError, ProxyBody, UpstreamFailure};

/// How a request ended, for the log line and metrics.
pub(super) struct Outcome {
    pub(super) verdict: &'static str,
    pub(super) rule_line: Option<u32>,
    upstream: Option<Duration>,
}

impl Outcome {
    pub(super) fn refused(verdict: &'static str) -> Self {
        Outcome {
            verdict,
            rule_line: None,
            upstream: None,
        }
    }
}

/// Handles one request from a client of the proxy listener, on the
/// connection whose activity is `activity`; `scope` is the connection's
/// slot and lifecycle, given for a CONNECT (its tunnel outlives the request).
pub(super) async fn handle(
    state: Arc<ProxyState>,
    client: SocketAddr,
    scope: Option<super::ConnectionScope>,
    activity: Arc<Activity>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    // The listener hands a scope to CONNECTs, and only to them.
    if let (true, Some(scope)) = (request.method() == Method::CONNECT, scope) {
        // Boxed: a CONNECT's future (decision, tunnel set-up) is large, and
        // inline it would size the future of every plain request too.
        let connect = super::connect::handle(state, client, scope, activity, request);
        return Box::pin(connect).await;
    }
    let context = ClientContext {
        addr: client,
        user: None,
        tunneled: false,
    };
    serve_request(state, context, activity, request).await
}

/// Who sent a request.
#[derive(Debug, Clone)]
pub struct ClientContext {
    /// The client's address.
    pub addr: SocketAddr,
    /// The authenticated proxy user: for a request inside an intercepted
    /// tunnel, the user who opened the tunnel.
    pub user: Option<String>,
    /// The request was decrypted from a CONNECT tunnel whose CONNECT already
    /// passed the client checks (clients send `Proxy-Authorization` only on
    /// the CONNECT).
    pub tunneled: bool,
}

/// Runs one absolute-form request through the pipeline and logs it: a plain
/// HTTP request, or one decrypted from an intercepted CONNECT. `activity`
/// is its connection's, which a WebSocket upgrade keeps busy.
pub async fn serve_request(
    state: Arc<ProxyState>,
    mut context: ClientContext,
    activity: Arc<Activity>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let request = request.map(|body| body.map_err(|e| BoxError::from(ClientBodyError(e))).boxed());
    // Standard methods clone without allocating.
    let method = request.method().clone();
    // Kept for the log record (the forwarded request's target is rewritten
    // to origin form); cloning shares the parsed bytes.
    let url = request.uri().clone();
    let mut agent = String::new();
    let mut host = String::new();
    let (response, outcome) = match pipeline(
        &state,
        &mut context,
        &activity,
        request,
        &mut agent,
        &mut host,
    )
    .await
    {
        Ok((response, outcome)) => (response, outcome),
        Err(refusal) => {
            let (answer, outcome) = *refusal;
            (answer.into_response(), outcome)
        }
    };
    let record = RequestRecord {
        host: (!host.is_empty()).then_some(host.as_str()),
        client: context.addr,
        user: context.user.as_deref(),
        method: method.as_str(),
        url: &url,
        agent: &agent,
        verdict: outcome.verdict,
        rule_line: outcome.rule_line,
        status: response.status().as_u16(),
        upstream: outcome.upstream,
        duration: started.elapsed(),
    };
    log_request(&record);
    state.metrics.record(&record, response.headers());
    response
}

/// A refusal: the answer and how to log it. Boxed: it is the cold path.
/// The steps that CONNECT shares (authentication, destination, robots.txt,
/// pacing) return it too.
pub(super) type Refusal = Box<(Answer, Outcome)>;

pub(super) fn refuse(answer: Answer, outcome: Outcome) -> Refusal {
    Box::new((answer, outcome))
}

async fn pipeline(
    state: &ProxyState,
    context: &mut ClientContext,
    activity: &Arc<Activity>,
    mut request: Request<ProxyBody>,
    agent_out: &mut String,
    host_out: &mut String,
) -> Result<(Response<ProxyBody>, Outcome), Refusal> {
    // 1. The client's address was checked at accept; its credentials here.
    if !context.tunneled {
        context.user = authenticate(state, request.headers())?;
    }
    // 2. Parse the target; refuse denied destinations and crawler traps.
    let origin = target_origin(state, &request)?;
    respell_target(&mut request, &origin);
    // The client's spelling, for a refusal that names it (a cheap clone of
    // shared bytes); then the RFC 3986 normal form, judged and forwarded.
    let sent = request.uri().clone();
    normalise_target(&mut request)?;
    host_out.push_str(&origin.host);
    check_destination(state, &origin).await?;
    check_path_repeats(state, request.uri().path())?;
    // 3. Identity: reject, fill in, or pass (may add headers).
    if let Err(e) = state.identity.apply(request.headers_mut()) {
        return Err(refuse(
            Answer::Identity {
                problem: e.to_string(),
                hint: e.hint().to_string(),
            },
            Outcome::refused("identity"),
        ));
    }
    agent_out.push_str(state.agent_token(&request));
    let agent: &str = agent_out;

    // 4-5. robots.txt for the origin, and the verdict. `/robots.txt` itself
    // is always allowed (RFC 9309 §2.2.2).
    let mut delay = Duration::ZERO;
    let mut rule_line = None;
    if request.uri().path() != "/robots.txt" {
        let path = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
        let sent = sent.path_and_query().map_or("/", |pq| pq.as_str());
        let entry = state.robots.lookup(&origin).await;
        let verdict = robots_verdict(state, &entry, &origin, agent, Scope::Path { path, sent })?;
        delay = verdict.delay;
        rule_line = verdict.line;
    }

    // 6. Pacing.
    let permit = pace(state, &origin, delay, rule_line).await?;

    // 7. Forward. A protocol upgrade (WebSocket) keeps its Upgrade fields
    // and, once the origin answers 101, becomes a byte pipe.
    let upgrade = wants_upgrade(&request);
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    let busy = upgrade.then(|| activity.begin());
    forward::prepare_request(&mut request, &origin, &state.via, upgrade);
    let upstream_client = if upgrade {
        &state.upgrade_client
    } else {
        &state.client
    };
    let started = Instant::now();
    let forwarded =
        forward::forward(upstream_client, request, started, state.upstream_timeout).await;
    let upstream = Some(started.elapsed());
    let outcome = Outcome {
        verdict: "allowed",
        rule_line,
        upstream,
    };
    match forwarded {
        Ok(mut response) => {
            let switching = response.status() == http::StatusCode::SWITCHING_PROTOCOLS;
            if let (true, Some(client_upgrade)) = (switching, client_upgrade) {
                let origin_upgrade = hyper::upgrade::on(&mut response);
                // An upgraded pipe (WebSocket) keeps its own pace: the
                // connection stays busy, so the idle timer leaves it alone.
                let held = (permit, busy);
                tokio::spawn(super::upgrade::pipe(client_upgrade, origin_upgrade, held));
                forward::prepare_response(&mut response, &state.via, true);
                return Ok((response, outcome));
            }
            forward::prepare_response(&mut response, &state.via, false);
            let response = response.map(|body| HoldingBody::new(body, permit).boxed());
            Ok((response, outcome))
        }
        Err(error) => {
            let origin = origin.to_string();
            let answer = match error {
                ForwardError::Timeout(waited) => Answer::UpstreamTimeout { origin, waited },
                ForwardError::Failed(UpstreamFailure::Certificate(reason)) => {
                    Answer::UpstreamCertificate { origin, reason }
                }
                ForwardError::Failed(UpstreamFailure::ClientBody(reason)) => {
                    Answer::BadRequest { reason }
                }
                ForwardError::Failed(failure) => Answer::UpstreamError {
                    origin,
                    reason: failure.describe(),
                },
            };
            Err(refuse(
                answer,
                Outcome {
                    verdict: "upstream-failed",
                    ..outcome
                },
            ))
        }
    }
}

/// Step 6: waits for the origin's host to take another request, or refuses
/// with `429` when the wait would pass `max_wait`. `rule_line` is logged
/// with a refusal.
pub(super) async fn pace(
    state: &ProxyState,
    origin: &Origin,
    delay: Duration,
    rule_line: Option<u32>,
) -> Result<crate::policy::PacePermit, Refusal> {
    // The wait is timed only when there is one: most requests are admitted
    // on the first poll, and two clock reads each would time nothing.
    let mut admit = std::pin::pin!(state.pacer.admit(origin.pacing_key(), delay));
    let mut waiting_since = None;
    let permit = std::future::poll_fn(|cx| {
        let polled = std::future::Future::poll(admit.as_mut(), cx);
        if polled.is_pending() && waiting_since.is_none() {
            waiting_since = Some(Instant::now());
        }
        polled
    })
    .await
    .map_err(|rejected| {
        refuse(
            Answer::Pacing {
                host: origin.host.clone(),
                retry_after: rejected.retry_after,
            },
            Outcome {
                verdict: "pacing",
                rule_line,
                upstream: None,
            },
        )
    })?;
    state
        .metrics
        .pacing_wait(waiting_since.map_or(Duration::ZERO, |since| since.elapsed()));
    Ok(permit)
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

/// Step 2: the origin of an absolute-form target, or why it cannot be
/// proxied (origin-form requests to the proxy itself, loops, long URLs).
fn target_origin(state: &ProxyState, request: &Request<ProxyBody>) -> Result<Origin, Refusal> {
    let uri = request.uri();
    // The length as sent, without formatting the URI into a new string.
    let length = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if length > state.max_url_length {
        return Err(refuse(
            Answer::UriTooLong {
                limit: state.max_url_length,
            },
            Outcome::refused("bad-request"),
        ));
    }
    if state.via.names(request.headers()) {
        return Err(refuse(
            Answer::Loop {
                target: uri.to_string(),
            },
            Outcome::refused("loop"),
        ));
    }
    let origin = Origin::from_uri(uri).map_err(|e| {
        let reason = match e {
            OriginError::NoScheme if request.method() != Method::CONNECT => format!(
                "{e}. This is robots-guard, a forward proxy: set HTTP_PROXY=http://{} \
                 and request absolute URLs through it.",
                state.listen
            ),
            other => other.to_string(),
        };
        refuse(
            Answer::BadRequest { reason },
            Outcome::refused("bad-request"),
        )
    })?;
    if targets_listener(&origin, state.listen) {
        return Err(refuse(
            Answer::Loop {
                target: origin.to_string(),
            },
            Outcome::refused("loop"),
        ));
    }
    Ok(origin)
}

/// Rewrites the request's path and query into their RFC 3986 normal form
/// ([`crate::robots::normalise`]): what robots.txt is judged against and what
/// the origin receives, so the two cannot differ.
fn normalise_target(request: &mut Request<ProxyBody>) -> Result<(), Refusal> {
    let Some(path_and_query) = request.uri().path_and_query() else {
        return Ok(());
    };
    let std::borrow::Cow::Owned(normal) = crate::robots::normalise(path_and_query.as_str()) else {
        return Ok(());
    };
    let refused = |reason: String| {
        refuse(
            Answer::BadRequest { reason },
            Outcome::refused("bad-request"),
        )
    };
    let mut parts = request.uri().clone().into_parts();
    parts.path_and_query = Some(
        http::uri::PathAndQuery::try_from(normal)
            .map_err(|e| refused(format!("the normalised request target is invalid: {e}")))?,
    );
    *request.uri_mut() = http::Uri::from_parts(parts)
        .map_err(|e| refused(format!("the normalised request target is invalid: {e}")))?;
    Ok(())
}

/// Writes the origin's spelling of an address into the request's target
/// (`127.1` → `127.0.0.1`, see [`Origin::respelled`]); names are left as
/// the client wrote them. A `Host` field that then no longer names the
/// target is replaced when the request is forwarded.
fn respell_target(request: &mut Request<ProxyBody>, origin: &Origin) {
    let Some(authority) = request.uri().authority().and_then(|a| origin.respelled(a)) else {
        return;
    };
    let mut parts = request.uri().clone().into_parts();
    parts.authority = Some(authority);
    if let Ok(uri) = http::Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
}

/// Checks `Proxy-Authorization` when authentication is on; returns the user.
pub(super) fn authenticate(
    state: &ProxyState,
    headers: &http::HeaderMap,
) -> Result<Option<String>, Refusal> {
    let Some(auth) = &state.auth else {
        return Ok(None);
    };
    auth.check(headers).map(Some).map_err(|e| {
        refuse(
            Answer::ProxyAuth {
                problem: e.to_string(),
                challenge: auth.challenge(),
            },
            Outcome::refused("proxy-auth"),
        )
    })
}

/// Refuses origins whose every address is in `proxy.deny_destinations`,
/// after DNS resolution. A name that does not resolve passes here and fails
/// where it is fetched (as an unreachable robots.txt or a 502).
pub(super) async fn check_destination(state: &ProxyState, origin: &Origin) -> Result<(), Refusal> {
    if state.destinations.denies(&origin.host).await {
        return Err(destination_denied(origin));
    }
    Ok(())
}

/// The refusal for an origin whose every address `proxy.deny_destinations`
/// denies.
pub(super) fn destination_denied(origin: &Origin) -> Refusal {
    refuse(
        Answer::DestinationDenied {
            host: origin.host.clone(),
        },
        Outcome::refused("destination-denied"),
    )
}

/// Refuses crawler-trap paths (`/a/b/a/b/a/b/a/b`).
fn check_path_repeats(state: &ProxyState, path: &str) -> Result<(), Refusal> {
    match repeated_segments(path, state.max_path_repeats) {
        Some(run) => Err(refuse(
            Answer::CrawlerTrap {
                run,
                limit: state.max_path_repeats,
            },
            Outcome::refused("crawler-trap"),
        )),
        None => Ok(()),
    }
}

/// The first run of path segments that repeats back to back more than
/// `limit` times, if any (`limit` 0: never). Periods of up to 8 segments are
/// checked, which costs O(8 × segments).
pub fn repeated_segments(path: &str, limit: u32) -> Option<String> {
    // A trap needs more than `limit` segments: most paths are far shorter.
    if limit == 0 || memchr::memchr_iter(b'/', path.as_bytes()).count() <= limit as usize {
        return None;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let limit = limit as usize;
    for period in 1..=8.min(segments.len() / 2) {
        // `equal` counts consecutive positions i where segment i equals
        // segment i + period; a run of `period * (limit)` such positions means
        // limit + 1 back-to-back copies.
        let mut equal = 0;
        for i in 0..segments.len() - period {
            if segments[i] == segments[i + period] {
                equal += 1;
                if equal >= period * limit {
                    let start = i + 1 - equal;
                    return Some(format!("/{}", segments[start..start + period].join("/")));
                }
            } else {
                equal = 0;
            }
        }
    }
    None
}

/// Would a request to `origin` come straight back to this listener?
pub(super) fn targets_listener(origin: &Origin, listen: SocketAddr) -> bool {
    if origin.port != listen.port() {
        return false;
    }
    if origin.host == "localhost" {
        return true;
    }
    match origin.host.parse::<IpAddr>() {
        Ok(ip) => {
            let ours = listen.ip();
            let local = ip.is_loopback() || ip.is_unspecified();
            ip == ours || ((ours.is_unspecified() || ours.is_loopback()) && local)
        }
        Err(_) => false,
    }
}

/// What robots.txt says for this request.
pub(super) struct RobotsOk {
    /// The pause between request starts the group asks for (0 when
    /// `honor_crawl_delay` is off).
    pub(super) delay: Duration,
    line: Option<u32>,
}

/// What a robots.txt verdict is about.
#[derive(Clone, Copy)]
pub(super) enum Scope<'a> {
    /// One request's path and query, in normal form, and as the client sent
    /// them (for a refusal that names a server's reading of it).
    Path {
        /// The normal form.
        path: &'a str,
        /// The client's spelling.
        sent: &'a str,
    },
    /// A whole tunnel (CONNECT in tunnel mode): refused only when the agent
    /// may fetch nothing at all; the rule reported is the one for `/`.
    Anything,
}

/// Steps 4-5: the entry's rules applied to the agent and `scope`.
pub(super) fn robots_verdict(
    state: &ProxyState,
    entry: &RobotsEntry,
    origin: &Origin,
    agent: &str,
    scope: Scope<'_>,
) -> Result<RobotsOk, Refusal> {
    match &entry.rules {
        RobotsRules::Parsed(robots) => {
            let rules = robots.for_agent(agent);
            let spellings = state.spellings;
            let folded = spellings
                .contains(Spelling::CaseInsensitive)
                .then(|| robots.case_folded().for_agent(agent));
            let (judgment, refusable, sent) = match scope {
                Scope::Path { path, sent } => (
                    crate::robots::judge(&rules, folded.as_ref(), path, spellings),
                    true,
                    sent,
                ),
                Scope::Anything => (
                    crate::robots::judge(&rules, None, "/", Spellings::NONE),
                    rules.disallows_everything(),
                    "/",
                ),
            };
            let verdict = judgment.verdict;
            let line = verdict.rule.map(|r| r.line);
            if let (false, true, Some(rule)) = (verdict.allowed, refusable, verdict.rule) {
                let served_as = judgment.served_as.map(|form| ServedAs {
                    sent: sent.to_owned(),
                    form: form.target,
                    spellings: form.spellings.to_string(),
                });
                return Err(refuse(
                    Answer::RobotsDisallow {
                        origin: origin.to_string(),
                        agent: agent.to_string(),
                        kind: rule.kind,
                        pattern: rule.pattern.to_string(),
                        line: rule.line,
                        robots_url: entry.robots_url.clone(),
                        served_as,
                    },
                    Outcome {
                        verdict: "disallowed",
                        rule_line: line,
                        upstream: None,
                    },
                ));
            }
            let delay = if state.honor_crawl_delay {
                rules
                    .min_interval()
                    .map_or(Duration::ZERO, |d| d.min(state.max_crawl_delay))
            } else {
                Duration::ZERO
            };
            Ok(RobotsOk { delay, line })
        }
        RobotsRules::AllowAll { .. } => Ok(RobotsOk {
            delay: Duration::ZERO,
            line: None,
        }),
        RobotsRules::DisallowAll { status } => Err(refuse(
            Answer::RobotsForbidden {
                origin: origin.to_string(),
                status: status.as_u16(),
                robots_url: entry.robots_url.clone(),
            },
            Outcome::refused("disallowed"),
        )),
        RobotsRules::Unreachable { reason } => Err(refuse(
            Answer::RobotsUnreachable {
                origin: origin.to_string(),
                robots_url: entry.robots_url.clone(),
                reason: reason.clone(),
                retry_after: entry.retry_after.unwrap_or(Duration::from_secs(60)),
            },
            Outcome::refused("robots-unreachable"),
        )),
        RobotsRules::Certificate { reason } => Err(refuse(
            Answer::UpstreamCertificate {
                origin: origin.to_string(),
                reason: reason.clone(),
            },
            Outcome::refused("upstream-certificate"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::repeated_segments;

    #[test]
    fn crawler_trap_paths_are_found() {
        assert_eq!(
            repeated_segments("/a/b/a/b/a/b/a/b", 3),
            Some("/a/b".into())
        );
        assert_eq!(repeated_segments("/a/b/a/b/a/b", 3), None);
        assert_eq!(repeated_segments("/x/a/a/a/a/y", 3), Some("/a".into()));
        assert_eq!(repeated_segments("/x/a/a/a/y", 3), None);
        assert_eq!(
            repeated_segments("/c/1/2/3/1/2/3/1/2/3/1/2/3/d", 3),
            Some("/1/2/3".into())
        );
        assert_eq!(repeated_segments("/a/b/a/b/a/b/a/b", 0), None);
        assert_eq!(repeated_segments("/", 3), None);
        assert_eq!(repeated_segments("/images/2024/01/photo.jpg", 1), None);
        assert_eq!(repeated_segments("/a/a", 1), Some("/a".into()));
        // Long paths stay cheap: 4096 distinct segments.
        let long: String = (0..4096).map(|i| format!("/s{i}")).collect();
        assert_eq!(repeated_segments(&long, 3), None);
    }
}
