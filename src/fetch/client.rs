//! One robots.txt fetch: GET `/robots.txt` of an origin and map what happened to a
//! [`FetchOutcome`] (RFC 9309 §2.3.1).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::{
    ACCEPT, CONTENT_LENGTH, ETAG, FROM, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LOCATION,
    USER_AGENT,
};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body as _;
use http_body_util::BodyExt;

use super::ttl::{freshness_lifetime, retry_after};
use super::{FetchSettings, RobotsFile, Validators};
use crate::origin::Origin;
use crate::policy::{BackoffCause, Pacer};
use crate::upstream::{empty_body, ProxyBody, UpstreamBody, UpstreamError, UpstreamPools};

/// What one fetch of an origin's robots.txt came to. Each variant is a row of the table
/// in the [module docs](super).
#[derive(Debug, Clone)]
pub enum FetchOutcome {
    /// A 2xx answer, parsed.
    Parsed {
        /// The parsed file.
        robots: Arc<RobotsFile>,
        /// How long it may be used (see [`freshness_lifetime`]).
        ttl: Duration,
        /// `ETag` / `Last-Modified` for a later revalidation.
        validators: Validators,
        /// The body was longer than `max_size`; only the complete lines within the first
        /// `max_size` bytes were parsed.
        truncated: bool,
    },
    /// A `304` to a conditional fetch: the cached file is still current.
    NotModified {
        /// The new lifetime of the cached file.
        ttl: Duration,
        /// Validators the `304` carried (possibly none; they replace the old ones).
        validators: Validators,
    },
    /// "Unavailable": a 4xx other than 429, a redirect without a usable `Location`, or
    /// more redirects than `max_redirects`. `status` is the deciding answer's.
    Unavailable {
        /// The deciding status.
        status: StatusCode,
        /// How long this verdict may be used.
        ttl: Duration,
    },
    /// "Unreachable": 429, 5xx, timeout, connection failure, broken answer.
    Unreachable {
        /// What went wrong, for people.
        reason: String,
        /// The `Retry-After` of a 429 or 503, if it had one.
        retry_after: Option<Duration>,
    },
    /// The origin's TLS certificate failed verification.
    Certificate {
        /// The verification failure, for people.
        reason: String,
    },
}

impl FetchOutcome {
    /// The outcome's name as used in metrics: `ok`, `not_modified`, `unavailable`,
    /// `unreachable` or `certificate`.
    pub fn kind(&self) -> &'static str {
        match self {
            FetchOutcome::Parsed { .. } => "ok",
            FetchOutcome::NotModified { .. } => "not_modified",
            FetchOutcome::Unavailable { .. } => "unavailable",
            FetchOutcome::Unreachable { .. } => "unreachable",
            FetchOutcome::Certificate { .. } => "certificate",
        }
    }
}

/// Fetches robots.txt files through the shared upstream clients, paced like any request
/// to the host. Cheap to clone.
#[derive(Clone)]
pub struct RobotsFetcher {
    client: UpstreamPools,
    pacer: Pacer,
    /// Swapped whole by [`RobotsFetcher::reconfigure`]; each fetch reads one copy.
    settings: Arc<arc_swap::ArcSwap<FetchSettings>>,
}

impl RobotsFetcher {
    /// A fetcher using `client` (so robots.txt fetches share connections and TLS roots
    /// with forwarded requests; each fetch uses the pool of the worker it runs on) and
    /// `pacer` (so they count towards each host's pace).
    pub fn new(client: UpstreamPools, pacer: Pacer, settings: FetchSettings) -> Self {
        RobotsFetcher {
            client,
            pacer,
            settings: Arc::new(arc_swap::ArcSwap::from_pointee(settings)),
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> Arc<FetchSettings> {
        self.settings.load_full()
    }

    /// Applies new settings (a configuration reload) to the fetches started from now on.
    pub fn reconfigure(&self, settings: FetchSettings) {
        self.settings.store(Arc::new(settings));
    }

    /// Fetches `origin`'s robots.txt, conditionally when `validators` holds any.
    ///
    /// The fetch first takes a pacing slot for the origin's host and holds it until the
    /// fetch is over, so it counts towards the host's rate limit. If the pacer rejects
    /// because the host's queue is too long, the fetch goes ahead anyway: it happens once
    /// per origin per lifetime, every request to the origin waits on it, and refusing it
    /// would turn a busy host into a `503` for everyone. If the site asked for a pause,
    /// nothing is sent: the file counts as unreachable until the pause is over. The
    /// site's `429`/`503` and failures feed the host's back-off like any request's.
    ///
    /// The whole fetch (connects, redirects, headers and body) is bounded by
    /// `fetch_timeout`; the pacing wait is not part of it.
    pub async fn fetch(&self, origin: &Origin, validators: Option<&Validators>) -> FetchOutcome {
        let _permit = match self.pacer.admit(origin.pacing_key(), Duration::ZERO).await {
            Ok(permit) => Some(permit),
            Err(rejected) if rejected.site_backoff.is_some() => {
                return FetchOutcome::Unreachable {
                    reason: format!(
                        "{} asked to pause ({}); nothing is sent to it until then",
                        origin.host,
                        rejected.site_backoff.map_or("", |c| c.word())
                    ),
                    retry_after: Some(rejected.retry_after),
                };
            }
            Err(rejected) => {
                tracing::debug!(
                    %origin,
                    retry_after = ?rejected.retry_after,
                    "pacer rejected the robots.txt fetch; fetching anyway"
                );
                None
            }
        };
        let url = origin.robots_url();
        let timeout = self.settings.load().fetch_timeout;
        let outcome = match tokio::time::timeout(timeout, self.fetch_chain(&url, validators)).await
        {
            Ok(outcome) => outcome,
            Err(_) => {
                self.pacer
                    .failed(origin.pacing_key(), BackoffCause::Timeout);
                FetchOutcome::Unreachable {
                    reason: format!("{url}: no complete answer within {timeout:?}"),
                    retry_after: None,
                }
            }
        };
        tracing::debug!(%origin, outcome = outcome.kind(), "robots.txt fetched");
        outcome
    }

    /// The request, the redirects and the final answer, without the timeout.
    async fn fetch_chain(&self, url: &str, validators: Option<&Validators>) -> FetchOutcome {
        let mut uri: Uri = match url.parse() {
            Ok(uri) => uri,
            // Origins are validated, so this means a bug rather than a bad origin; it is
            // still no reason to panic.
            Err(e) => {
                return FetchOutcome::Unreachable {
                    reason: format!("invalid robots.txt URL {url}: {e}"),
                    retry_after: None,
                }
            }
        };
        let conditional = validators.filter(|v| !v.is_empty());
        let mut hops = 0;
        loop {
            let response = match self.client.send(self.request(&uri, conditional)).await {
                Ok(response) => response,
                Err(e) => {
                    match &e {
                        UpstreamError::Connect { .. } | UpstreamError::ConnectTimeout { .. } => {
                            self.slow_down(&uri, BackoffCause::ConnectError)
                        }
                        UpstreamError::Protocol(_) => self.slow_down(&uri, BackoffCause::Reset),
                        _ => {}
                    }
                    return failure(&uri, &e);
                }
            };
            let status = response.status();
            let headers = response.headers();
            if status == StatusCode::NOT_MODIFIED && conditional.is_some() {
                return FetchOutcome::NotModified {
                    ttl: self.lifetime(headers),
                    validators: validators_of(headers),
                };
            }
            if status.is_redirection() {
                // RFC 9309 §2.3.1.2: follow at least five hops; the rules found apply to
                // the original origin. A 304 to an unconditional request has no Location
                // and lands here too.
                let next = headers
                    .get(LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| resolve_location(&uri, l));
                match next {
                    Some(next) if hops < self.settings.load().max_redirects => {
                        tracing::debug!(from = %uri, to = %next, status = status.as_u16(), "robots.txt redirect");
                        hops += 1;
                        uri = next;
                        continue;
                    }
                    _ => {
                        return FetchOutcome::Unavailable {
                            status,
                            ttl: self.lifetime(headers),
                        }
                    }
                }
            }
            if status.is_success() {
                return self.read_body(&uri, response).await;
            }
            if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
                return FetchOutcome::Unavailable {
                    status,
                    ttl: self.lifetime(headers),
                };
            }
            // 429, 5xx, and codes no RFC defines: the file's state is unknown.
            let retry = match status {
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                    retry_after(headers, SystemTime::now())
                }
                _ => None,
            };
            if let Some((cause, wait)) = BackoffCause::of_answer(status.as_u16(), retry) {
                let host = uri_host(&uri);
                match wait {
                    Some(wait) => self.pacer.pause(&host, wait, cause),
                    None => self.pacer.failed(&host, cause),
                }
            }
            return FetchOutcome::Unreachable {
                reason: format!("{uri} answered {status}"),
                retry_after: retry,
            };
        }
    }

    /// Reads at most `max_size` bytes of a 2xx body and parses them. Reading stops at the
    /// cap: the rest is never read, let alone buffered (the connection is then dropped
    /// rather than reused, which is cheaper than draining a huge body).
    async fn read_body(&self, uri: &Uri, response: Response<UpstreamBody>) -> FetchOutcome {
        let (parts, mut body) = response.into_parts();
        let max = self.settings.load().max_size;
        let hint = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(8 * 1024);
        let mut buf = Vec::with_capacity(hint.min(max));
        let mut truncated = false;
        while let Some(frame) = body.frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                Err(e) => return failure(uri, &UpstreamError::Protocol(e)),
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            let room = max - buf.len();
            if data.len() > room {
                buf.extend_from_slice(&data[..room]);
                truncated = true;
                break;
            }
            buf.extend_from_slice(&data);
            if buf.len() == max {
                truncated = !body.is_end_stream();
                break;
            }
        }
        if truncated {
            // A line cut in half could mean anything (`Disallow: /private` cut to
            // `Disallow: /p` forbids more, `Allow: /p` allows more), so only complete
            // lines are parsed.
            let cut = buf
                .iter()
                .rposition(|&b| b == b'\n' || b == b'\r')
                .map_or(0, |i| i + 1);
            buf.truncate(cut);
        }
        // The cache keeps these bytes for as long as the entry lives: at their size, not
        // the buffer's (8 KiB when the length was not announced), or a cache of 100,000
        // small files would hold most of a gigabyte of spare capacity.
        buf.shrink_to_fit();
        // Parsing is linear and bounded by `max_size`, so it runs here rather than on a
        // blocking thread.
        FetchOutcome::Parsed {
            robots: Arc::new(RobotsFile::parse(buf)),
            ttl: self.lifetime(&parts.headers),
            validators: validators_of(&parts.headers),
            truncated,
        }
    }

    /// Slows the host of `uri` down after a failure.
    fn slow_down(&self, uri: &Uri, cause: BackoffCause) {
        self.pacer.failed(&uri_host(uri), cause);
    }

    fn request(&self, uri: &Uri, conditional: Option<&Validators>) -> Request<ProxyBody> {
        let mut request = Request::new(empty_body());
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        let settings = self.settings.load();
        headers.insert(USER_AGENT, settings.user_agent.clone());
        headers.insert(FROM, settings.from.clone());
        headers.insert(ACCEPT, HeaderValue::from_static("text/plain, */*;q=0.5"));
        if let Some(v) = conditional {
            if let Some(etag) = &v.etag {
                headers.insert(IF_NONE_MATCH, etag.clone());
            }
            if let Some(date) = &v.last_modified {
                headers.insert(IF_MODIFIED_SINCE, date.clone());
            }
        }
        request
    }

    fn lifetime(&self, headers: &HeaderMap) -> Duration {
        freshness_lifetime(
            headers,
            SystemTime::now(),
            self.settings.load().default_ttl,
            self.settings.load().min_ttl,
        )
    }
}

/// The pacing key of `uri`'s host (a redirect may have led to another host).
fn uri_host(uri: &Uri) -> String {
    Origin::from_uri(uri).map_or_else(
        |_| uri.host().unwrap_or_default().to_owned(),
        |o| o.pacing_key().to_owned(),
    )
}

fn validators_of(headers: &HeaderMap) -> Validators {
    Validators {
        etag: headers.get(ETAG).cloned(),
        last_modified: headers.get(LAST_MODIFIED).cloned(),
    }
}

/// An error of the exchange or of the body: a certificate failure, or "unreachable".
fn failure(uri: &Uri, error: &UpstreamError) -> FetchOutcome {
    match error {
        UpstreamError::Certificate { .. } => FetchOutcome::Certificate {
            reason: format!("{uri}: {error}"),
        },
        _ => FetchOutcome::Unreachable {
            reason: format!("{uri}: {error}"),
            retry_after: None,
        },
    }
}

/// Resolves a `Location` against the URL it came from (RFC 9110 §10.2.2, RFC 3986 §5.2),
/// dropping any fragment. `None` unless the result is an absolute http(s) URL.
fn resolve_location(base: &Uri, location: &str) -> Option<Uri> {
    let location = location.trim();
    let location = location.split('#').next().unwrap_or_default();
    if location.is_empty() {
        return None;
    }
    let scheme = base.scheme_str()?;
    let authority = base.authority()?.as_str();
    let target = if has_scheme(location) {
        location.to_owned()
    } else if let Some(rest) = location.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if location.starts_with('/') {
        format!("{scheme}://{authority}{}", remove_dot_segments(location))
    } else if location.starts_with('?') {
        format!("{scheme}://{authority}{}{location}", base.path())
    } else {
        let path = base.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let merged = format!("/{}{location}", dir.trim_start_matches('/'));
        format!("{scheme}://{authority}{}", remove_dot_segments(&merged))
    };
    let uri: Uri = target.parse().ok()?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.authority().is_some() => Some(uri),
        _ => None,
    }
}

/// RFC 3986 §3.1: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"` before any `/`.
fn has_scheme(reference: &str) -> bool {
    let Some(colon) = reference.find(':') else {
        return false;
    };
    let scheme = &reference[..colon];
    scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// RFC 3986 §5.2.4 on an absolute path (with an optional query, left alone).
fn remove_dot_segments(path_and_query: &str) -> String {
    let (path, query) = match path_and_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_and_query, None),
    };
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." => {}
            ".." => {
                out.pop();
            }
            s => {
                out.push(s);
                continue;
            }
        }
        // A trailing `.` or `..` leaves the path ending in `/`.
        if last {
            out.push("");
        }
    }
    let mut result = format!("/{}", out.join("/"));
    if let Some(query) = query {
        result.push('?');
        result.push_str(query);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(base: &str, location: &str) -> Option<String> {
        let base: Uri = base.parse().expect("test base");
        resolve_location(&base, location).map(|u| u.to_string())
    }

    #[test]
    fn locations_resolve_like_rfc_3986() {
        let base = "http://a.example:8080/dir/robots.txt";
        let cases = [
            (
                "https://b.example/robots.txt",
                "https://b.example/robots.txt",
            ),
            ("//c.example/r.txt", "http://c.example/r.txt"),
            (
                "/other/robots.txt",
                "http://a.example:8080/other/robots.txt",
            ),
            ("new.txt", "http://a.example:8080/dir/new.txt"),
            ("../up.txt", "http://a.example:8080/up.txt"),
            ("./x/../y.txt", "http://a.example:8080/dir/y.txt"),
            ("?v=2", "http://a.example:8080/dir/robots.txt?v=2"),
            ("/a/b/..", "http://a.example:8080/a/"),
            ("/../../x", "http://a.example:8080/x"),
            ("/robots.txt#frag", "http://a.example:8080/robots.txt"),
        ];
        for (location, want) in cases {
            assert_eq!(resolve(base, location).as_deref(), Some(want), "{location}");
        }
    }

    #[test]
    fn unusable_locations_are_refused() {
        let base = "http://a.example/robots.txt";
        for location in [
            "",
            "#only",
            "ftp://a.example/robots.txt",
            "mailto:x@y.z",
            "http://",
        ] {
            assert_eq!(resolve(base, location), None, "{location}");
        }
    }
}
