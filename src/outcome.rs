//! How a request ended, in one vocabulary.
//!
//! Every request the proxy handles ends with one [`Reason`]. Its
//! [`word`](Reason::word) is the `X-Robots-Guard-Reason` header of a refusal,
//! the `outcome` field of the log line and the access log, and the `outcome`
//! label of the request metrics: one spelling everywhere, like an Envoy
//! response flag. [`Finished`] is the record of a finished request that the
//! pipeline's one `finish` hands to the log and the metrics, so neither has to
//! parse an answer to learn what happened.

use std::net::SocketAddr;
use std::time::Duration;

/// Why a request ended as it did. Ordered as declared: allowed first, then
/// refusals, throttling, failures (the order of legends and tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Forwarded to the origin; its answer (whatever its status) was relayed.
    Allowed,
    /// A CONNECT became a blind tunnel (`tls.mode = "tunnel"`).
    Tunnel,
    /// A CONNECT was answered so that its requests could be read (TLS
    /// interception, or plain HTTP inside the tunnel); each of those
    /// requests has an outcome of its own.
    Intercept,
    /// 403: robots.txt disallows the URL for this robot.
    RobotsDisallow,
    /// 403: robots.txt answered 4xx and `robots.on_4xx = "disallow"`.
    RobotsForbidden,
    /// 503: robots.txt could not be fetched, so nothing may be.
    RobotsUnreachable,
    /// 403: the site's `Content-Signal` / `Content-Usage` refuses a purpose
    /// the robot declared.
    UsagePreference,
    /// 403: `User-Agent` or `From` missing or invalid.
    Identity,
    /// 429: the host's pacing queue is longer than `rate_limit.max_wait`.
    Pacing,
    /// 429: the site asked for a pause (`Retry-After`) or is slowed after errors, and
    /// the wait is longer than `rate_limit.max_wait`.
    SiteBackoff,
    /// 403: the client's address is outside `proxy.allow_clients`.
    ClientNotAllowed,
    /// 407: proxy authentication is on and the credentials are missing or wrong.
    ProxyAuth,
    /// 403: every address of the destination is in `proxy.deny_destinations`.
    DestinationDenied,
    /// 403: CONNECT to a port outside `tls.connect_ports`.
    PortRefused,
    /// 403: the path repeats a run of segments like a crawler trap.
    CrawlerTrap,
    /// 400: the request cannot be proxied (malformed, not absolute-form, ...).
    BadRequest,
    /// 414: the URL is longer than `proxy.max_url_length`.
    UriTooLong,
    /// 431: the request head is larger than `proxy.max_header_bytes`.
    HeaderTooLarge,
    /// 508: the request would come back to this proxy.
    Loop,
    /// 502: the origin's TLS certificate failed verification.
    UpstreamCertificate,
    /// 502: the origin could not be reached or broke off.
    UpstreamError,
    /// 504: the origin did not answer within `proxy.upstream_timeout`.
    UpstreamTimeout,
    /// 503: the fleet's shared store cannot be reached and
    /// `fleet.on_store_error = "refuse"`.
    FleetStoreUnavailable,
}

/// How a [`Reason`] counts on the status page and in the totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// The request reached the origin (or its tunnel was opened).
    Allowed,
    /// Refused by policy: robots.txt, identity, access rules, malformed.
    Denied,
    /// Answered `429` by the pacer.
    Throttled,
    /// The origin (or its robots.txt) could not be reached safely.
    Failed,
    /// Not a request of its own: a CONNECT whose inner requests count.
    Session,
}

impl Reason {
    /// Every reason, for documentation and exhaustive tests.
    pub const ALL: [Reason; 23] = [
        Reason::Allowed,
        Reason::Tunnel,
        Reason::Intercept,
        Reason::RobotsDisallow,
        Reason::RobotsForbidden,
        Reason::RobotsUnreachable,
        Reason::UsagePreference,
        Reason::Identity,
        Reason::Pacing,
        Reason::SiteBackoff,
        Reason::ClientNotAllowed,
        Reason::ProxyAuth,
        Reason::DestinationDenied,
        Reason::PortRefused,
        Reason::CrawlerTrap,
        Reason::BadRequest,
        Reason::UriTooLong,
        Reason::HeaderTooLarge,
        Reason::Loop,
        Reason::UpstreamCertificate,
        Reason::UpstreamError,
        Reason::UpstreamTimeout,
        Reason::FleetStoreUnavailable,
    ];

    /// The one word for this reason: header, logs and metrics label.
    pub fn word(self) -> &'static str {
        match self {
            Reason::Allowed => "allowed",
            Reason::Tunnel => "tunnel",
            Reason::Intercept => "intercept",
            Reason::RobotsDisallow => "robots-disallow",
            Reason::RobotsForbidden => "robots-forbidden",
            Reason::RobotsUnreachable => "robots-unreachable",
            Reason::UsagePreference => "usage-preference",
            Reason::Identity => "identity",
            Reason::Pacing => "pacing",
            Reason::SiteBackoff => "site-backoff",
            Reason::ClientNotAllowed => "client-not-allowed",
            Reason::ProxyAuth => "proxy-auth",
            Reason::DestinationDenied => "destination-denied",
            Reason::PortRefused => "port-refused",
            Reason::CrawlerTrap => "crawler-trap",
            Reason::BadRequest => "bad-request",
            Reason::UriTooLong => "uri-too-long",
            Reason::HeaderTooLarge => "header-too-large",
            Reason::Loop => "loop",
            Reason::UpstreamCertificate => "upstream-certificate",
            Reason::UpstreamError => "upstream-error",
            Reason::UpstreamTimeout => "upstream-timeout",
            Reason::FleetStoreUnavailable => "fleet-store-unavailable",
        }
    }

    /// How it counts.
    pub fn class(self) -> Class {
        match self {
            Reason::Allowed | Reason::Tunnel => Class::Allowed,
            Reason::Intercept => Class::Session,
            Reason::Pacing | Reason::SiteBackoff => Class::Throttled,
            Reason::RobotsUnreachable
            | Reason::UpstreamCertificate
            | Reason::UpstreamError
            | Reason::UpstreamTimeout
            | Reason::FleetStoreUnavailable => Class::Failed,
            Reason::RobotsDisallow
            | Reason::RobotsForbidden
            | Reason::UsagePreference
            | Reason::Identity
            | Reason::ClientNotAllowed
            | Reason::ProxyAuth
            | Reason::DestinationDenied
            | Reason::PortRefused
            | Reason::CrawlerTrap
            | Reason::BadRequest
            | Reason::UriTooLong
            | Reason::HeaderTooLarge
            | Reason::Loop => Class::Denied,
        }
    }
}

impl Reason {
    /// Refusals a report-only profile (`enforce = false`) waives: the request
    /// goes on and its answer carries `X-Robots-Guard-Would-Refuse`. They are
    /// the politeness rules (robots.txt, identity, pacing, the site's own
    /// back-off); the security refusals (client ACL, proxy auth, destinations,
    /// ports, loops, malformed requests, limits) always hold.
    pub fn waivable(self) -> bool {
        matches!(
            self,
            Reason::RobotsDisallow
                | Reason::RobotsForbidden
                | Reason::RobotsUnreachable
                | Reason::UsagePreference
                | Reason::Identity
                | Reason::Pacing
                | Reason::SiteBackoff
        )
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// The robots.txt statement that decided a request, for logs and the status
/// page: a rule, or a usage preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidingRule<'a> {
    /// Its key: `allow`, `disallow`, `content-signal` or `content-usage`.
    pub kind: &'static str,
    /// The pattern as matched (a preference's value), when the record has
    /// it (refusals do).
    pub pattern: Option<&'a str>,
    /// Its line in robots.txt.
    pub line: u32,
}

/// What one finished request came to: everything its log line, access log
/// record and metrics need, gathered by the pipeline as it went.
#[derive(Debug, Clone)]
pub struct Finished<'a> {
    /// The client's address.
    pub client: SocketAddr,
    /// The authenticated proxy user, if authentication is on.
    pub user: Option<&'a str>,
    /// The request method (`CONNECT` for a tunnel).
    pub method: &'a str,
    /// The request target as the client sent it (absolute URL, or
    /// `host:port` for a CONNECT); formatted only where it is written out.
    pub url: &'a http::Uri,
    /// The target's host as its origin holds it, when the request got that far.
    pub host: Option<&'a str>,
    /// The product token matched against robots.txt (empty if none yet).
    pub agent: &'a str,
    /// How it ended.
    pub reason: Reason,
    /// The robots.txt rule that decided, if one did.
    pub rule: Option<DecidingRule<'a>>,
    /// The status sent to the client.
    pub status: u16,
    /// Time to the origin's response head, if forwarded.
    pub upstream: Option<Duration>,
    /// Time from the request's arrival to its answer's head (bodies stream
    /// afterwards and are not counted).
    pub duration: Duration,
    /// The profile the request ran under (`default` for the top level's).
    pub profile: &'a std::sync::Arc<str>,
    /// Refusals waived because the profile is report-only, in the order the
    /// phases found them.
    pub would_refuse: &'a [Reason],
    /// The robots.txt copy the request was judged by, when one was consulted;
    /// read only by what records it (the access log), so a request does not
    /// pay for its record when no one writes it.
    pub robots: Option<&'a dyn RobotsSource>,
    /// What the request declared it fetches for.
    pub purposes: crate::robots::Purposes,
    /// The origin's `Content-Usage` members that refused a declared purpose
    /// (the answer was passed on, marked).
    pub usage_refused: Option<&'a str>,
}

/// Something that knows which robots.txt copy it holds (the robots.txt
/// cache's entries): lets this record name the copy without this layer
/// knowing the cache.
pub trait RobotsSource: std::fmt::Debug + Sync {
    /// The copy's record.
    fn copy(&self) -> RobotsCopy<'_>;
}

/// Which robots.txt copy decided a request: enough to answer "what did the
/// site say then?" from the access log alone.
#[derive(Debug, Clone, Copy)]
pub struct RobotsCopy<'a> {
    /// Where it was fetched from.
    pub url: &'a str,
    /// When the origin last gave or confirmed it (2xx, 304 or 4xx), or when
    /// the failed fetch ended.
    pub fetched_on: std::time::SystemTime,
    /// What the proxy made of it: `parsed`, `allow_all` (4xx: no
    /// restrictions), `disallow_all`, `unreachable` or `certificate`.
    pub kind: &'static str,
    /// The status behind `allow_all` / `disallow_all` (`404`, `401`).
    pub status: Option<u16>,
    /// Its `ETag`, when the origin gave one.
    pub etag: Option<&'a str>,
    /// Its `Last-Modified`, when the origin gave one.
    pub last_modified: Option<&'a str>,
    /// The first 12 hex digits of the SHA-256 of the bytes parsed, for a
    /// file that was parsed.
    pub sha256: Option<&'a str>,
    /// The bytes parsed, for quoting a statement.
    pub body: Option<&'a [u8]>,
}

/// The longest statement quoted from a robots.txt (bytes).
const MAX_STATEMENT: usize = 512;

impl RobotsCopy<'_> {
    /// Line `line` (1-based) of the file as the site wrote it, trimmed and
    /// cut to a bounded length: the statement an audit quotes.
    pub fn statement(&self, line: u32) -> Option<String> {
        let text = crate::robots::nth_line(self.body?, line)?;
        let text = String::from_utf8_lossy(&text[..text.len().min(MAX_STATEMENT)]);
        Some(text.trim().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_quoted_as_written() {
        let copy = RobotsCopy {
            url: "http://a.example/robots.txt",
            fetched_on: std::time::SystemTime::UNIX_EPOCH,
            kind: "parsed",
            status: None,
            etag: None,
            last_modified: None,
            sha256: None,
            body: Some(b"User-agent: *\r\n  Disallow: /private  # keep out\rAllow: /"),
        };
        assert_eq!(
            copy.statement(2).as_deref(),
            Some("Disallow: /private  # keep out")
        );
        assert_eq!(copy.statement(3).as_deref(), Some("Allow: /"));
        assert_eq!(copy.statement(0), None);
        assert_eq!(copy.statement(4), None);
    }

    #[test]
    fn security_refusals_are_never_waived() {
        for reason in Reason::ALL {
            let politeness = matches!(reason.class(), Class::Throttled)
                || matches!(
                    reason,
                    Reason::RobotsDisallow
                        | Reason::RobotsForbidden
                        | Reason::RobotsUnreachable
                        | Reason::UsagePreference
                        | Reason::Identity
                );
            assert_eq!(reason.waivable(), politeness, "{reason}");
        }
    }

    #[test]
    fn every_reason_has_its_own_word() {
        let mut words: Vec<&str> = Reason::ALL.iter().map(|r| r.word()).collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), Reason::ALL.len());
        for word in words {
            assert!(
                word.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{word} is a header-safe lower-case word"
            );
        }
    }
}
