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

use crate::robots::RuleKind;

/// Why a request ended as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    pub const ALL: [Reason; 21] = [
        Reason::Allowed,
        Reason::Tunnel,
        Reason::Intercept,
        Reason::RobotsDisallow,
        Reason::RobotsForbidden,
        Reason::RobotsUnreachable,
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
            | Reason::UpstreamTimeout => Class::Failed,
            Reason::RobotsDisallow
            | Reason::RobotsForbidden
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

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// The robots.txt rule that decided a request, for logs and the status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidingRule<'a> {
    /// Allow or disallow.
    pub kind: RuleKind,
    /// The pattern as matched, when the record has it (refusals do).
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
