//! Every answer the proxy makes itself, in one place: short `text/plain` a
//! person can read, plus `X-Robots-Guard-*` headers a program can parse, so a
//! scraper can log and skip.
//!
//! A phase that refuses returns a [`Refusal`]: the [`Answer`] to send. The
//! answer's [`Reason`] (its `X-Robots-Guard-Reason` word) follows from the
//! variant, so a refusal cannot be sent under one word and logged under
//! another.

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::outcome::Reason;
use crate::robots::{PreferenceKind, Purpose, RuleKind};
use crate::upstream::ProxyBody;

/// `X-Robots-Guard-Reason`: the [`Reason`] word of an answer the proxy made.
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

/// `X-Robots-Guard-Purpose`: on a `usage-preference` refusal, the purpose
/// the site refuses. (The request header of the same name adds purposes;
/// it is never forwarded.)
pub const PURPOSE: HeaderName = HeaderName::from_static("x-robots-guard-purpose");
/// `X-Robots-Guard-Usage`: on a forwarded answer whose `Content-Usage`
/// header refuses a declared purpose, the members that refuse it.
pub const USAGE: HeaderName = HeaderName::from_static("x-robots-guard-usage");
/// `X-Robots-Guard-Profile`: the profile (robot) a refused or report-only
/// request ran under.
pub const PROFILE: HeaderName = HeaderName::from_static("x-robots-guard-profile");
/// `X-Robots-Guard-Would-Refuse`: on a report-only profile's forwarded
/// answer, the reasons it would have been refused for, comma-separated.
pub const WOULD_REFUSE: HeaderName = HeaderName::from_static("x-robots-guard-would-refuse");

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
    /// 403: the site refuses a purpose the robot declared.
    UsagePreference {
        /// `scheme://host[:port]`.
        origin: String,
        /// The product token that was matched.
        agent: String,
        /// The purpose refused.
        purpose: Purpose,
        /// The deciding statement's key.
        kind: PreferenceKind,
        /// Its value as written (`/news/ train-ai=n`; for `Content-Signal`
        /// the member that refused, `ai-train=no`).
        statement: String,
        /// Its line.
        line: u32,
        /// Where the statement came from.
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
    /// 429: the site asked for a pause or is slowed after errors, longer than
    /// `rate_limit.max_wait`.
    SiteBackoff {
        /// The host being paused.
        host: String,
        /// Why.
        cause: crate::policy::BackoffCause,
        /// When to try again.
        retry_after: Duration,
    },
    /// 403: the client's address is outside `proxy.allow_clients`.
    ClientNotAllowed,
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
    /// 403: CONNECT to a port outside `tls.connect_ports`.
    PortRefused {
        /// The port asked for.
        port: u16,
    },
    /// 403: the path repeats a run of segments like a crawler trap.
    CrawlerTrap {
        /// The repeating run.
        run: String,
        /// `proxy.max_path_repeats`.
        limit: u32,
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
    /// 431: the request head is larger than `proxy.max_header_bytes`.
    HeaderTooLarge {
        /// The limit.
        limit: usize,
    },
    /// 508: the request would come back to this proxy.
    Loop {
        /// What the request targeted.
        target: String,
    },
    /// 502: the origin's TLS certificate failed verification.
    UpstreamCertificate {
        /// `scheme://host[:port]`.
        origin: String,
        /// The verification problem.
        problem: String,
    },
    /// 502: the origin could not be reached or answered badly.
    UpstreamError {
        /// `scheme://host[:port]`.
        origin: String,
        /// What went wrong.
        problem: String,
    },
    /// 504: the origin did not answer in time.
    UpstreamTimeout {
        /// `scheme://host[:port]`.
        origin: String,
        /// How long the proxy waited.
        waited: Duration,
    },
    /// 503: the fleet's shared store cannot be reached and
    /// `fleet.on_store_error = "refuse"`.
    FleetStoreUnavailable {
        /// The host whose shared pacing could not be asked.
        host: String,
    },
}

impl Answer {
    /// Why the request ended with this answer.
    pub fn reason(&self) -> Reason {
        match self {
            Answer::RobotsDisallow { .. } => Reason::RobotsDisallow,
            Answer::RobotsForbidden { .. } => Reason::RobotsForbidden,
            Answer::RobotsUnreachable { .. } => Reason::RobotsUnreachable,
            Answer::UsagePreference { .. } => Reason::UsagePreference,
            Answer::Identity { .. } => Reason::Identity,
            Answer::Pacing { .. } => Reason::Pacing,
            Answer::SiteBackoff { .. } => Reason::SiteBackoff,
            Answer::ClientNotAllowed => Reason::ClientNotAllowed,
            Answer::ProxyAuth { .. } => Reason::ProxyAuth,
            Answer::DestinationDenied { .. } => Reason::DestinationDenied,
            Answer::PortRefused { .. } => Reason::PortRefused,
            Answer::CrawlerTrap { .. } => Reason::CrawlerTrap,
            Answer::BadRequest { .. } => Reason::BadRequest,
            Answer::UriTooLong { .. } => Reason::UriTooLong,
            Answer::HeaderTooLarge { .. } => Reason::HeaderTooLarge,
            Answer::Loop { .. } => Reason::Loop,
            Answer::UpstreamCertificate { .. } => Reason::UpstreamCertificate,
            Answer::UpstreamError { .. } => Reason::UpstreamError,
            Answer::UpstreamTimeout { .. } => Reason::UpstreamTimeout,
            Answer::FleetStoreUnavailable { .. } => Reason::FleetStoreUnavailable,
        }
    }

    /// The status code of this answer.
    pub fn status(&self) -> StatusCode {
        match self.reason() {
            Reason::ProxyAuth => StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            Reason::Pacing | Reason::SiteBackoff => StatusCode::TOO_MANY_REQUESTS,
            Reason::RobotsUnreachable | Reason::FleetStoreUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Reason::UpstreamCertificate | Reason::UpstreamError => StatusCode::BAD_GATEWAY,
            Reason::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Reason::BadRequest => StatusCode::BAD_REQUEST,
            Reason::UriTooLong => StatusCode::URI_TOO_LONG,
            Reason::HeaderTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Reason::Loop => StatusCode::LOOP_DETECTED,
            // Not answers the proxy makes: a refusal is never one of these.
            Reason::Allowed | Reason::Tunnel | Reason::Intercept => StatusCode::OK,
            Reason::RobotsDisallow
            | Reason::RobotsForbidden
            | Reason::UsagePreference
            | Reason::Identity
            | Reason::ClientNotAllowed
            | Reason::DestinationDenied
            | Reason::PortRefused
            | Reason::CrawlerTrap => StatusCode::FORBIDDEN,
        }
    }

    /// Answers after which the client's connection is closed: the request
    /// could not be read reliably, so nothing after it on the connection can.
    fn closes_connection(&self) -> bool {
        matches!(
            self,
            Answer::BadRequest { .. } | Answer::HeaderTooLarge { .. } | Answer::ClientNotAllowed
        )
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
            Answer::RobotsUnreachable {
                origin,
                robots_url,
                reason,
                retry_after,
            } => format!(
                "503 Service Unavailable: robots.txt unreachable\n\n{robots_url} could not be fetched \
                 ({reason}). Until it can, nothing on {origin} may be fetched (RFC 9309 §2.3.1.4). \
                 Next attempt in {} s.\n",
                whole_seconds(*retry_after)
            ),
            Answer::UsagePreference {
                origin,
                agent,
                purpose,
                kind,
                statement,
                line,
                robots_url,
            } => format!(
                "403 Forbidden by the site's usage preferences\n\n{origin} does not allow its content \
                 to be used for {purpose}, which `{agent}` declared it fetches for.\n\
                 Deciding statement: `{kind}: {statement}` on line {line} of {robots_url}\n"
            ),
            Answer::Identity { problem, hint } => {
                format!("403 Forbidden: the robot must identify itself\n\n{problem}\nTo fix: {hint}\n")
            }
            Answer::Pacing { host, retry_after } => format!(
                "429 Too Many Requests\n\nRequests to {host} are paced (robots.txt Crawl-delay or the \
                 configured delay) and the queue is full. Retry in {} s.\n",
                whole_seconds(*retry_after)
            ),
            Answer::SiteBackoff {
                host,
                cause,
                retry_after,
            } => {
                let why = match cause {
                    crate::policy::BackoffCause::RetryAfter(status) => {
                        format!("it answered {status} with Retry-After")
                    }
                    crate::policy::BackoffCause::Status(status) => {
                        format!("it answered {status}")
                    }
                    crate::policy::BackoffCause::ConnectError => "it could not be reached".to_owned(),
                    crate::policy::BackoffCause::Timeout => "it did not answer in time".to_owned(),
                    crate::policy::BackoffCause::Reset => "it broke off an answer".to_owned(),
                };
                format!(
                    "429 Too Many Requests: the site asked to slow down\n\n{host} is paused or \
                     slowed down because {why} ({cause}). Nothing is sent to it meanwhile. \
                     Retry in {} s.\n",
                    whole_seconds(*retry_after)
                )
            }
            Answer::ClientNotAllowed => {
                "403 Forbidden\n\nYour address is not in this proxy's proxy.allow_clients.\n".to_owned()
            }
            Answer::ProxyAuth { problem, .. } => format!(
                "407 Proxy Authentication Required\n\n{problem}. Send Proxy-Authorization: Basic \
                 (e.g. curl --proxy-user USER:PASSWORD, or http://USER:PASSWORD@proxy:port).\n"
            ),
            Answer::DestinationDenied { host } => format!(
                "403 Forbidden\n\n{host} resolves only to addresses this proxy may not reach \
                 (proxy.deny_destinations). Nothing was fetched.\n"
            ),
            Answer::PortRefused { port } => format!(
                "403 Forbidden\n\nCONNECT to port {port} is not allowed (tls.connect_ports); \
                 the origin was not contacted.\n"
            ),
            Answer::CrawlerTrap { run, limit } => format!(
                "403 Forbidden: crawler trap\n\nThe path repeats `{run}` more than {limit} times in a \
                 row (proxy.max_path_repeats); such URLs are usually endless link loops.\n"
            ),
            Answer::BadRequest { reason } => format!("400 Bad Request\n\n{reason}\n"),
            Answer::UriTooLong { limit } => format!(
                "414 URI Too Long\n\nThis proxy refuses URLs longer than {limit} bytes \
                 (proxy.max_url_length); very long URLs are usually crawler traps.\n"
            ),
            Answer::HeaderTooLarge { limit } => format!(
                "431 Request Header Fields Too Large\n\nThe request head (request line and header \
                 fields) is larger than {limit} bytes (proxy.max_header_bytes).\n"
            ),
            Answer::Loop { target } => format!(
                "508 Loop Detected\n\n{target} is this proxy itself; the request would loop.\n"
            ),
            Answer::UpstreamCertificate { origin, problem } => format!(
                "502 Bad Gateway: untrusted certificate\n\nThe TLS certificate of {origin} failed \
                 verification ({problem}), so nothing was fetched. If your organisation trusts \
                 this origin's CA, add it to tls.extra_roots.\n"
            ),
            Answer::UpstreamError { origin, problem } => {
                format!("502 Bad Gateway\n\n{origin}: {problem}\n")
            }
            Answer::UpstreamTimeout { origin, waited } => format!(
                "504 Gateway Timeout\n\n{origin} did not answer within {} s.\n",
                whole_seconds(*waited)
            ),
            Answer::FleetStoreUnavailable { host } => format!(
                "503 Service Unavailable: the fleet's shared store cannot be reached\n\n\
                 Requests to {host} are paced together with the other proxies of the fleet \
                 through a shared store, which does not answer; this proxy is set to refuse \
                 rather than pace alone (fleet.on_store_error = \"refuse\"). Retry in 1 s.\n"
            ),
        }
    }

    /// The full HTTP response to a request that ran under `profile`: the
    /// body names it, and `X-Robots-Guard-Profile` carries it.
    pub fn into_response_for(self, profile: &str) -> Response<ProxyBody> {
        let body = format!("{}Profile: {profile}\n", self.body());
        let mut response = self.response_with_body(body);
        if let Ok(value) = HeaderValue::from_str(profile) {
            response.headers_mut().insert(PROFILE, value);
        }
        response
    }

    /// The full HTTP response.
    pub fn into_response(self) -> Response<ProxyBody> {
        let body = self.body();
        self.response_with_body(body)
    }

    fn response_with_body(self, body: String) -> Response<ProxyBody> {
        let mut response = Response::new(text_body(body));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(REASON, HeaderValue::from_static(self.reason().word()));
        if self.closes_connection() {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
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
            Answer::UsagePreference {
                agent,
                purpose,
                kind,
                statement,
                line,
                robots_url,
                ..
            } => {
                put(RULE, &format!("{kind}: {statement}"));
                put(LINE, &line.to_string());
                put(ROBOTS_URL, robots_url);
                put(AGENT, agent);
                put(PURPOSE, purpose.name());
            }
            Answer::RobotsForbidden { robots_url, .. } => put(ROBOTS_URL, robots_url),
            Answer::RobotsUnreachable {
                robots_url,
                retry_after,
                ..
            } => {
                put(ROBOTS_URL, robots_url);
                put(RETRY_AFTER, &whole_seconds(*retry_after).to_string());
            }
            Answer::Pacing { retry_after, .. } | Answer::SiteBackoff { retry_after, .. } => {
                put(RETRY_AFTER, &whole_seconds(*retry_after).to_string())
            }
            Answer::FleetStoreUnavailable { .. } => put(RETRY_AFTER, "1"),
            Answer::ProxyAuth { challenge, .. } => put(http::header::PROXY_AUTHENTICATE, challenge),
            _ => {}
        }
        response
    }

    /// The answer as HTTP/1.1 bytes, for a connection the proxy answers
    /// without hyper (a client refused at accept, a head hyper could not
    /// read). Always closes the connection.
    pub fn to_http1_bytes(&self) -> Vec<u8> {
        let response = self.clone().into_response();
        let body = self.body();
        let mut out = format!(
            "HTTP/1.1 {} {}\r\n",
            response.status().as_u16(),
            response.status().canonical_reason().unwrap_or("")
        )
        .into_bytes();
        for (name, value) in response.headers() {
            if name == CONNECTION {
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(
            format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(body.as_bytes());
        out
    }
}

/// A phase's refusal: the answer to send. Boxed, because refusals are the
/// cold path and the `Result` of every phase stays small.
#[derive(Debug)]
pub(crate) struct Refusal(pub Box<Answer>);

impl From<Answer> for Refusal {
    fn from(answer: Answer) -> Refusal {
        Refusal(Box::new(answer))
    }
}

/// Whole seconds, at least 1, rounded up: for `Retry-After` and messages.
fn whole_seconds(d: Duration) -> u64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
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
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(whole_seconds(Duration::from_secs(30)), 30);
        let response = Answer::Pacing {
            host: "e.com".into(),
            retry_after: Duration::from_secs(4),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "4");
    }

    #[test]
    fn a_certificate_failure_says_it_once_and_points_to_extra_roots() {
        let body = Answer::UpstreamCertificate {
            origin: "https://127.0.0.1:8443".into(),
            problem: "UnknownIssuer".into(),
        }
        .body();
        assert_eq!(body.matches("verification").count(), 1, "{body}");
        assert!(body.contains("tls.extra_roots"), "{body}");
    }

    #[test]
    fn raw_answers_carry_the_reason_and_close() {
        let bytes = Answer::HeaderTooLarge { limit: 8192 }.to_http1_bytes();
        let text = String::from_utf8(bytes).expect("ascii");
        assert!(
            text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{text}"
        );
        assert!(
            text.contains("x-robots-guard-reason: header-too-large\r\n"),
            "{text}"
        );
        assert!(text.contains("connection: close\r\n"), "{text}");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(body.contains("proxy.max_header_bytes"));
    }
}
