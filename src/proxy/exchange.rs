//! The context of one request on its way through the pipeline.
//!
//! An [`Exchange`] is made when a request arrives and filled in by the phases
//! as they run: who asked, for which origin, as which robot, what robots.txt
//! decided, how long the origin took. The one `finish` reads it to log and
//! count the request, so nothing has to be recovered from the answer later.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::uri::Authority;
use http::{Method, Request, Uri};
use tokio::time::Instant;

use super::idle::Activity;
use super::services::Services;
use super::settings::{Profile, Settings};
use super::ConnectionScope;
use crate::fetch::RobotsEntry;
use crate::origin::Origin;
use crate::outcome::{DecidingRule, Finished, Reason};
use crate::robots::RuleKind;

/// Where a connection's requests come from, which decides how their targets
/// are read and which checks they have passed already.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// The proxy's listener: absolute-form requests and CONNECTs.
    Listener,
    /// Inside a CONNECT tunnel: decrypted TLS, or plain HTTP. The requests
    /// carry origin-form targets (or their own `:authority`), and all go to
    /// the CONNECT's origin; the CONNECT's user covers them (clients send
    /// `Proxy-Authorization` on the CONNECT only).
    Tunnel {
        /// `https` for decrypted TLS, `http` for plain HTTP in the tunnel.
        origin: Origin,
        /// The CONNECT's authority, as the requests go out to it.
        authority: Authority,
        /// The user who opened the tunnel.
        user: Option<String>,
        /// Purposes the CONNECT added (`X-Robots-Guard-Purpose`), for every
        /// request inside.
        purposes: crate::robots::Purposes,
    },
}

/// One client connection (or a tunnel's inner connection): who is on the
/// other end, and how it is served.
pub(crate) struct Conn {
    /// The client's address.
    pub client: SocketAddr,
    /// Where its requests come from.
    pub entry: Entry,
    /// Busy or quiet, for the idle and head timers.
    pub activity: Arc<Activity>,
    /// The connection's slot, the server's phase and the live settings.
    pub scope: ConnectionScope,
}

/// One request's context.
pub(crate) struct Exchange {
    /// The connection it arrived on.
    pub conn: Arc<Conn>,
    /// The settings it runs with, from start to end.
    pub settings: Arc<Settings>,
    /// The services.
    pub services: Arc<Services>,
    /// When it arrived.
    pub started: Instant,
    /// Its method.
    pub method: Method,
    /// Its target as the client sent it (a cheap clone of shared bytes).
    pub url: Uri,
    /// A CONNECT from the listener: its ending is a tunnel, not a forward.
    pub connect: bool,
    /// The authenticated proxy user.
    pub user: Option<String>,
    /// The robot this client is: its profile, chosen by the admit phase
    /// (the top level's until then).
    pub profile: Arc<Profile>,
    /// Refusals waived because the profile is report-only; they go out as
    /// `X-Robots-Guard-Would-Refuse` and are logged and counted.
    pub would_refuse: Vec<Reason>,
    /// The robots.txt refusal (a rule's or a usage preference's) a
    /// report-only profile let through, for the deciding statement in the log.
    pub waived_statement: Option<Box<super::response::Answer>>,
    /// The origin, once the target phase has read it (the phases after it
    /// are handed it directly; this copy is for `finish`).
    pub origin: Option<Arc<Origin>>,
    /// The product token robots.txt is matched for.
    pub agent: String,
    /// What the request fetches for, held against the site's usage
    /// preferences.
    pub purposes: crate::robots::Purposes,
    /// The `Content-Usage` members of the origin's answer that refuse a
    /// declared purpose (sent on as `X-Robots-Guard-Usage`).
    pub usage_refused: Option<String>,
    /// The robots.txt copy the request was judged by, for the audit trail.
    pub robots: Option<Arc<RobotsEntry>>,
    /// The robots.txt rule that decided, if one did.
    pub rule: Option<(RuleKind, u32)>,
    /// The spacing robots.txt asks for (`Crawl-delay`, `Request-rate`).
    pub delay: Duration,
    /// Time to the origin's response head, once forwarded.
    pub upstream: Option<Duration>,
    /// How it ended, when it went through: forwarded, or a tunnel.
    pub reason: Reason,
    /// A blind tunnel's refusal that holds only if the tunnel turns out to
    /// carry TLS: the `https` origin's robots.txt could not be fetched, which
    /// says nothing about plain HTTP in the tunnel (judged request by
    /// request).
    pub if_tls: Option<super::response::Answer>,
}

/// `uri`'s path and query at `origin`'s scheme and `authority`.
fn absolute_url(uri: &Uri, origin: &Origin, authority: &Authority) -> Uri {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(match origin.scheme {
        crate::origin::Scheme::Http => http::uri::Scheme::HTTP,
        crate::origin::Scheme::Https => http::uri::Scheme::HTTPS,
    });
    parts.authority = Some(authority.clone());
    parts.path_and_query = uri.path_and_query().cloned();
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

impl Exchange {
    /// The context of `request`, arriving now on `conn`.
    pub fn new<B>(conn: Arc<Conn>, request: &Request<B>) -> Exchange {
        let live = conn.scope.live();
        let connect = request.method() == Method::CONNECT && matches!(conn.entry, Entry::Listener);
        // Inside a tunnel every request goes to the tunnel's origin, whatever
        // its own target says (origin-form, or an HTTP/2 `:authority`): that
        // is the URL it is for, in the log and in the target phase.
        let url = match &conn.entry {
            Entry::Tunnel {
                origin, authority, ..
            } => absolute_url(request.uri(), origin, authority),
            Entry::Listener => request.uri().clone(),
        };
        let settings = live.settings();
        Exchange {
            profile: settings.default_profile.clone(),
            would_refuse: Vec::new(),
            waived_statement: None,
            robots: None,
            settings,
            services: live.services().clone(),
            started: Instant::now(),
            method: request.method().clone(),
            url,
            connect,
            user: None,
            origin: None,
            agent: String::new(),
            purposes: crate::robots::Purposes::NONE,
            usage_refused: None,
            rule: None,
            delay: Duration::ZERO,
            upstream: None,
            reason: Reason::Allowed,
            if_tls: None,
            conn,
        }
    }

    /// The record of this request, ended for `reason` with `status`.
    pub fn finished<'a>(
        &'a self,
        reason: Reason,
        rule: Option<DecidingRule<'a>>,
        status: u16,
    ) -> Finished<'a> {
        Finished {
            client: self.conn.client,
            user: self.user.as_deref(),
            method: self.method.as_str(),
            url: &self.url,
            host: self.origin.as_ref().map(|o| o.pacing_key()),
            agent: &self.agent,
            reason,
            rule: rule.or_else(|| {
                self.rule.map(|(kind, line)| DecidingRule {
                    kind: kind.as_str(),
                    pattern: None,
                    line,
                })
            }),
            status,
            upstream: self.upstream,
            duration: self.started.elapsed(),
            profile: &self.profile.name,
            would_refuse: &self.would_refuse,
            robots: self
                .robots
                .as_deref()
                .map(|entry| entry as &dyn crate::outcome::RobotsSource),
            purposes: self.purposes,
            usage_refused: self.usage_refused.as_deref(),
        }
    }
}
