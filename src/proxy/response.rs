//! Every answer the proxy makes itself, in one place (DESIGN.md §6): short
//! `text/plain` a person can read, plus `X-Robots-Guard-*` headers a program
//! can parse, so a scraper can log and skip.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::robots::RuleKind;
use crate::upstream::ProxyBody;

/// `X-Robots-Guard-Reason`: a stable, machine-readable reason word.
pub const REASON: HeaderName = HeaderName::from_static("x-robots-guard-reason");
/// `X-Robots-Guard-Rule`: the deciding robots.txt rule (`disallow: /x`).
pub const RULE: HeaderName = HeaderName::from_static("x-robots-guard-rule");
/// `X-Robots-Guard-Line`: the rule's line in robots.txt.
pub const LINE: HeaderName = HeaderName::from_static("x-robots-guard-line");
/// `X-Robots-Guard-Robots-Url`: the robots.txt that decided.
pub const ROBOTS_URL: HeaderName = HeaderName::from_static("x-robots-guard-robots-url");
/// `X-Robots-Guard-Agent`: the product token matched against robots.txt.
pub const AGENT: HeaderName = HeaderName::from_static("x-robots-guard-agent");

/// `X-Robots-Guard-Served-As`: the form a server reads the URL as, when that
/// form, not the URL as normalised, was disallowed.
pub const SERVED_AS: HeaderName = HeaderName::from_static("x-robots-guard-served-as");
/// `X-Robots-Guard-Spelling`: the spellings that lead to that form.
pub const SPELLING: HeaderName = HeaderName::from_static("x-robots-guard-spelling");

/// A URL disallowed as a server reads it (`//private/x` as `/private/x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedAs {
    /// The path and query as the client sent them.
    pub sent: String,
    /// The form a server serves them as.
    pub form: String,
    /// The spellings that lead there (`merge-slashes`, ...).
    pub spellings: String,
}

/// An answer made by the proxy instead of the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 403: robots.txt disallows the URL for this agent.
    RobotsDisallow {
        /// `scheme://host[:port]`.
        origin: String,
        /// The product token that was matched.
        agent: String,
        /// The deciding rule.
        kind: RuleKind,
        /// Its (normalised) pattern.
        pattern: String,
        /// Its line.
        line: u32,
        /// Where the rules came from.
        robots_url: String,
        /// When a server's reading of the URL decided rather than its
        /// normal form: how the client spelled it and what it is served as.
        served_as: Option<ServedAs>,
    },
    /// 403: robots.txt answered 4xx and `robots.on_4xx = "disallow"`.
    RobotsForbidden {
        /// `scheme://host[:port]`.
        origin: String,
        /// The status robots.txt answered.
        status: u16,
        /// Where the rules came from.
        robots_url: String,
    },
    /// 403: the request does not identify its robot as configured.
    Identity {
        /// What is wrong.
        problem: String,
        /// What to add.
        hint: String,
    },
    /// 429: the host's pacing queue is too long.
    Pacing {
        /// The host being paced.
        host: String,
        /// When to try again.
        retry_after: Duration,
    },
    /// 503: robots.txt could not be fetched, so nothing may be.
    RobotsUnreachable {
        /// `scheme://host[:port]`.
        origin: String,
        /// Where robots.txt was asked for.
        robots_url: String,
        /// What went wrong.
        reason: String,
        /// When the proxy will try robots.txt again.
        retry_after: Duration,
    },
    /// 502: the origin's TLS certificate failed verification.
    UpstreamCertificate {
        /// `scheme://host[:port]`.
        origin: String,
        /// The verification problem.
        reason: String,
    },
    /// 502: the origin could not be reached or answered badly.
    UpstreamError {
        /// `scheme://host[:port]`.
        origin: String,
        /// What went wrong.
        reason: String,
    },
    /// 504: the origin did not answer in time.
    UpstreamTimeout {
        /// `scheme://host[:port]`.
        origin: String,
        /// How long the proxy waited.
        waited: Duration,
    },
    /// 400: the request cannot be proxied.
    BadRequest {
        /// Why.
        reason: String,
    },
    /// 414: the URL is longer than `proxy.max_url_length`.
    UriTooLong {
        /// The limit.
        limit: usize,
    },
    /// 407: proxy authentication is on and the request has no valid
    /// credentials.
    ProxyAuth {
        /// What is wrong.
        problem: String,
        /// The `Proxy-Authenticate` challenge.
        challenge: String,
    },
    /// 403: the destination's addresses are all in `proxy.deny_destinations`.
    DestinationDenied {
        /// The host asked for.
        host: String,
    },
    /// 403: the path repeats a run of segments like a crawler trap.
    CrawlerTrap {
        /// The repeating run.
        run: String,
        /// `proxy.max_path_repeats`.
        limit: u32,
    },
    /// 403: CONNECT to a port outside `tls.connect_ports`.
    PortRefused {
        /// The port asked for.
        port: u16,
    },
    /// 508: the request would come back to this proxy.
    Loop {
        /// What the request targeted.
        target: String,
    },
}

impl Answer {
    /// The status code of this answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Answer::RobotsDisallow { .. }
            | Answer::RobotsForbidden { .. }
            | Answer::Identity { .. }
            | Answer::PortRefused { .. }
            | Answer::DestinationDenied { .. }
            | Answer::CrawlerTrap { .. } => StatusCode::FORBIDDEN,
            Answer::ProxyAuth { .. } => StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            Answer::Pacing { .. } => StatusCode::TOO_MANY_REQUESTS,
            Answer::RobotsUnreachable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Answer::UpstreamCertificate { .. } | Answer::UpstreamError { .. } => {
                StatusCode::BAD_GATEWAY
            }
            Answer::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Answer::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Answer::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            Answer::Loop { .. } => StatusCode::LOOP_DETECTED,
        }
    }

    /// The `X-Robots-Guard-Reason` word.
    pub fn reason(&self) -> &'static str {
        match self {
            Answer::RobotsDisallow { .. } => "robots-disallow",
            Answer::RobotsForbidden { .. } => "robots-forbidden",
            Answer::Identity { .. } => "identity",
            Answer::Pacing { .. } => "pacing",
            Answer::RobotsUnreachable { .. } => "robots-unreachable",
            Answer::UpstreamCertificate { .. } => "upstream-certificate",
            Answer::UpstreamError { .. } => "upstream-error",
            Answer::UpstreamTimeout { .. } => "upstream-timeout",
            Answer::BadRequest { .. } => "bad-request",
            Answer::UriTooLong { .. } => "uri-too-long",
            Answer::PortRefused { .. } => "port-refused",
            Answer::ProxyAuth { .. } => "proxy-auth",
            Answer::DestinationDenied { .. } => "destination-denied",
            Answer::CrawlerTrap { .. } => "crawler-trap",
            Answer::Loop { .. } => "loop",
        }
    }

    /// The text a person reads.
    pub fn body(&self) -> String {
        match self {
            Answer::RobotsDisallow {
                origin,
                agent,
                kind,
                pattern,
                line,
                robots_url,
                served_as,
            } => {
                let rule = format!("{}: {pattern}", kind.as_str());
                let served = match served_as {
                    Some(ServedAs {
                        sent,
                        form,
                        spellings,
                    }) => format!(
                        "`{sent}` is served as `{form}` ({spellings}): {rule} (line {line})\n"
                    ),
                    None => String::new(),
                };
                format!(
                    "403 Forbidden by robots.txt\n\n{origin} does not allow `{agent}` to fetch this URL.\n\
                     {served}Deciding rule: `{rule}` on line {line} of {robots_url}\n"
                )
            }
            Answer::RobotsForbidden {
                origin,
                status,
                robots_url,
            } => format!(
                "403 Forbidden by robots.txt\n\n{robots_url} answered {status}; this proxy reads that \
                 as \"keep out\" (robots.on_4xx = \"disallow\"), so nothing on {origin} may be fetched.\n"
            ),
            Answer::Identity { problem, hint } => {
                format!("403 Forbidden: the robot must identify itself\n\n{problem}\nTo fix: {hint}\n")
            }
            Answer::Pacing { host, retry_after } => format!(
                "429 Too Many Requests\n\nRequests to {host} are paced (robots.txt Crawl-delay or the \
                 configured delay) and the queue is full. Retry in {} s.\n",
                retry_after.as_secs().max(1)
            ),
            Answer::RobotsUnreachable {
                origin,
                robots_url,
                reason,
                retry_after,
            } => format!(
                "503 Service Unavailable: robots.txt unreachable\n\n{robots_url} could not be fetched \
                 ({reason}). Until it can, nothing on {origin} may be fetched (RFC 9309 §2.3.1.4). \
                 Next attempt in {} s.\n",
                retry_after.as_secs().max(1)
            ),
            Answer::UpstreamCertificate { origin, reason } => format!(
                "502 Bad Gateway: untrusted certificate\n\nThe TLS certificate of {origin} failed \
                 verification: {reason}\nNothing was fetched.\n"
            ),
            Answer::UpstreamError { origin, reason } => {
                format!("502 Bad Gateway\n\n{origin}: {reason}\n")
            }
            Answer::UpstreamTimeout { origin, waited } => format!(
                "504 Gateway Timeout\n\n{origin} did not answer within {} s.\n",
                waited.as_secs_f64()
            ),
            Answer::BadRequest { reason } => format!("400 Bad Request\n\n{reason}\n"),
            Answer::UriTooLong { limit } => format!(
                "414 URI Too Long\n\nThis proxy refuses URLs longer than {limit} bytes \
                 (proxy.max_url_length); very long URLs are usually crawler traps.\n"
            ),
            Answer::ProxyAuth { problem, .. } => format!(
                "407 Proxy Authentication Required\n\n{problem}. Send Proxy-Authorization: Basic \
                 (e.g. curl --proxy-user USER:PASSWORD, or http://USER:PASSWORD@proxy:port).\n"
            ),
            Answer::DestinationDenied { host } => format!(
                "403 Forbidden\n\n{host} resolves only to addresses this proxy may not reach \
                 (proxy.deny_destinations). Nothing was fetched.\n"
            ),
            Answer::CrawlerTrap { run, limit } => format!(
                "403 Forbidden: crawler trap\n\nThe path repeats `{run}` more than {limit} times in a \
                 row (proxy.max_path_repeats); such URLs are usually endless link loops.\n"
            ),
            Answer::PortRefused { port } => format!(
                "403 Forbidden\n\nCONNECT to port {port} is not allowed (tls.connect_ports); \
                 the origin was not contacted.\n"
            ),
            Answer::Loop { target } => format!(
                "508 Loop Detected\n\n{target} is this proxy itself; the request would loop.\n"
            ),
        }
    }

    /// The full HTTP response.
    pub fn into_response(self) -> Response<ProxyBody> {
        let mut response = Response::new(text_body(self.body()));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(REASON, HeaderValue::from_static(self.reason()));
        let mut put = |name: HeaderName, value: &str| {
            // Values come from validated origins, ASCII patterns and tokens;
            // anything else is left out rather than sent broken.
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        match &self {
            Answer::RobotsDisallow {
                agent,
                kind,
                pattern,
                line,
                robots_url,
                served_as,
                ..
            } => {
                put(RULE, &format!("{}: {pattern}", kind.as_str()));
                put(LINE, &line.to_string());
                put(ROBOTS_URL, robots_url);
                put(AGENT, agent);
                if let Some(served) = served_as {
                    put(SERVED_AS, &served.form);
                    put(SPELLING, &served.spellings);
                }
            }
            Answer::RobotsForbidden { robots_url, .. } => put(ROBOTS_URL, robots_url),
            Answer::RobotsUnreachable {
                robots_url,
                retry_after,
                ..
            } => {
                put(ROBOTS_URL, robots_url);
                put(RETRY_AFTER.clone(), &retry_after_secs(*retry_after));
            }
            Answer::Pacing { retry_after, .. } => {
                put(RETRY_AFTER.clone(), &retry_after_secs(*retry_after))
            }
            Answer::ProxyAuth { challenge, .. } => put(http::header::PROXY_AUTHENTICATE, challenge),
            _ => {}
        }
        response
    }
}

/// Whole seconds, at least 1, rounded up.
fn retry_after_secs(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1).to_string()
}

/// A complete body from a string.
pub fn text_body(text: String) -> ProxyBody {
    Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_disallow_is_readable_and_parseable() {
        let answer = Answer::RobotsDisallow {
            origin: "http://example.com".into(),
            agent: "FooBot".into(),
            kind: RuleKind::Disallow,
            pattern: "/private".into(),
            line: 7,
            robots_url: "http://example.com/robots.txt".into(),
            served_as: None,
        };
        let body = answer.body();
        assert!(body.contains("`disallow: /private` on line 7 of http://example.com/robots.txt"));
        let response = answer.into_response();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let h = response.headers();
        assert_eq!(h[REASON], "robots-disallow");
        assert_eq!(h[RULE], "disallow: /private");
        assert_eq!(h[LINE], "7");
        assert_eq!(h[AGENT], "FooBot");
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), "1");
        assert_eq!(retry_after_secs(Duration::from_millis(2500)), "3");
        assert_eq!(retry_after_secs(Duration::from_secs(30)), "30");
        let response = Answer::Pacing {
            host: "e.com".into(),
            retry_after: Duration::from_secs(4),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "4");
    }
}
