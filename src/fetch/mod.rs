//! Fetching and caching robots.txt (the robots phase's source).
//!
//! [`RobotsFetcher`] makes one fetch of an origin's `/robots.txt` and maps what happened to
//! a [`FetchOutcome`], following RFC 9309 §2.3.1:
//!
//! | what the origin did | outcome | rules |
//! |---|---|---|
//! | 2xx | [`FetchOutcome::Parsed`] | [`RobotsRules::Parsed`], the first `max_size` bytes |
//! | 3xx with `Location` | followed, up to `max_redirects` hops, across hosts too | the final answer's |
//! | 3xx without `Location`, more hops | [`FetchOutcome::Unavailable`] | as a 4xx |
//! | 304 to a conditional request | [`FetchOutcome::NotModified`] | the cached ones, refreshed |
//! | 4xx except 429 | [`FetchOutcome::Unavailable`] | [`RobotsRules::AllowAll`] (or [`RobotsRules::DisallowAll`] with `on_4xx = "disallow"`) |
//! | 429, 5xx, timeout, connect error, reset, broken body | [`FetchOutcome::Unreachable`] | [`RobotsRules::Unreachable`] |
//! | upstream certificate fails verification | [`FetchOutcome::Certificate`] | [`RobotsRules::Certificate`] |
//!
//! [`RobotsCache`] keeps one [`RobotsEntry`] per [`Origin`] in a bounded [`RobotsStore`]
//! (an LRU in memory, [`MemoryStore`]), runs at most one fetch per origin at a time, and
//! applies lifetimes, failure backoff and the last-good-copy rule.
//!
//! # Layout
//!
//! - `client.rs`: one fetch, status and errors to outcome, redirects, the size cap.
//! - `ttl.rs`: cache lifetime from `Cache-Control` / `Expires` / `Age`, and `Retry-After`.
//! - `cache.rs`: the cache, the store trait and its LRU implementation, metrics counters.

mod cache;
mod client;
mod ttl;

pub use cache::{
    CacheStats, MemoryStore, RobotsCache, RobotsStore, SharedFuture, SharedLookup, SharedRobots,
};
pub use client::{FetchOutcome, RobotsFetcher};
pub use ttl::{freshness_lifetime, retry_after};

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, StatusCode};
use tokio::time::Instant;

use crate::config::{Config, On4xx};
use crate::origin::Origin;
use crate::robots::RobotsTxt;

/// The knobs of fetching and caching, from `[robots]` and `[identity]` of the config.
///
/// A separate type (rather than the config sections themselves) so that the identity is
/// already a valid header value and tests can set any field directly.
#[derive(Debug, Clone)]
pub struct FetchSettings {
    /// `User-Agent` sent with every robots.txt fetch (`identity.default_user_agent`).
    pub user_agent: HeaderValue,
    /// `From` sent with every robots.txt fetch (`identity.default_from`): RFC 9110 §10.1.2
    /// asks robots to give a contact.
    pub from: HeaderValue,
    /// Most origins kept in the cache.
    pub cache_capacity: NonZeroUsize,
    /// Lifetime of a fetched file when the origin says nothing shorter.
    pub default_ttl: Duration,
    /// Floor on the lifetime, so `no-cache` cannot cause a fetch per request.
    pub min_ttl: Duration,
    /// Time for one whole fetch: connect, redirects, headers and body.
    pub fetch_timeout: Duration,
    /// Bytes of the body that are parsed; the rest is never read.
    pub max_size: usize,
    /// Redirects followed; one more counts as "unavailable".
    pub max_redirects: u32,
    /// How a 4xx (other than 429) is read.
    pub on_4xx: On4xx,
    /// Oldest a last good copy may be to stand in while fetches fail.
    pub stale_for: Duration,
    /// First interval before retrying after a failed fetch.
    pub failure_ttl: Duration,
    /// Cap on the doubling retry interval.
    pub max_failure_ttl: Duration,
}

impl FetchSettings {
    /// Settings from a loaded configuration.
    ///
    /// # Errors
    ///
    /// [`FetchError::InvalidIdentity`] if the configured `User-Agent` or `From` is not a
    /// valid header value (the config loader already refuses such values, so this is a
    /// second line of defence for configs built in code).
    pub fn from_config(config: &Config) -> Result<FetchSettings, FetchError> {
        let header = |name: &'static str, value: &str| {
            HeaderValue::from_str(value).map_err(|_| FetchError::InvalidIdentity {
                header: name,
                value: value.to_owned(),
            })
        };
        let robots = &config.robots;
        Ok(FetchSettings {
            user_agent: header("User-Agent", &config.identity.default_user_agent)?,
            from: header("From", &config.identity.default_from)?,
            cache_capacity: robots.cache_capacity,
            default_ttl: robots.default_ttl,
            min_ttl: robots.min_ttl,
            fetch_timeout: robots.fetch_timeout,
            max_size: robots.max_size.get(),
            max_redirects: robots.max_redirects,
            on_4xx: robots.on_4xx,
            stale_for: robots.stale_for,
            failure_ttl: robots.failure_ttl,
            max_failure_ttl: robots.max_failure_ttl,
        })
    }

    /// The retry interval after `failures` consecutive failed fetches (1 for the first):
    /// `failure_ttl` doubled per further failure, capped at `max_failure_ttl` (which caps
    /// `failure_ttl` itself too), then raised to the server's `Retry-After`, which is
    /// itself capped at `default_ttl` so no answer can shut an origin out for longer than
    /// a good file would be kept.
    pub fn failure_interval(
        &self,
        failures: u32,
        server_retry_after: Option<Duration>,
    ) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(31);
        let backoff = self
            .failure_ttl
            .saturating_mul(factor)
            .min(self.max_failure_ttl);
        let server = server_retry_after.map_or(Duration::ZERO, |d| d.min(self.default_ttl));
        backoff.max(server)
    }
}

/// Errors of this module's setup. Fetch failures are not errors: they are
/// [`FetchOutcome`]s, because each one has a defined meaning for the proxy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The robot identity cannot be sent as a header.
    #[error("the configured {header} `{value}` is not a valid header value")]
    InvalidIdentity {
        /// `User-Agent` or `From`.
        header: &'static str,
        /// The offending value.
        value: String,
    },
}

/// A fetched robots.txt: the bytes that were parsed, and the parsed file (which it
/// derefs to). The bytes are kept for the case-folded parse, made on first use for
/// sites judged `case-insensitive` (see [`crate::robots::Spelling`]).
#[derive(Debug)]
pub struct RobotsFile {
    body: bytes::Bytes,
    sha256: String,
    parsed: RobotsTxt,
    /// Boxed: most sites never need it, and a cache of 100,000 files would
    /// otherwise carry room for a second parsed file in every entry.
    folded: std::sync::OnceLock<Box<RobotsTxt>>,
}

impl RobotsFile {
    /// Parses `body` (complete lines, at most `max_size` bytes).
    pub fn parse(body: impl Into<bytes::Bytes>) -> RobotsFile {
        let body = body.into();
        RobotsFile {
            parsed: RobotsTxt::parse(&body),
            sha256: short_sha256(&body),
            body,
            folded: std::sync::OnceLock::new(),
        }
    }

    /// The bytes that were parsed.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The first 12 hex digits of the SHA-256 of [`body`](Self::body): names
    /// this copy in the access log and the audit, so two records can be seen
    /// to have been judged by the same bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The file parsed from its lower-cased bytes
    /// ([`RobotsTxt::parse_case_folded`]), parsed once on first use.
    pub fn case_folded(&self) -> &RobotsTxt {
        self.folded
            .get_or_init(|| Box::new(RobotsTxt::parse_case_folded(&self.body)))
    }
}

fn header_text(value: Option<&HeaderValue>) -> Option<&str> {
    value.and_then(|v| v.to_str().ok())
}

/// The first 6 bytes of the SHA-256 of `bytes`, in hex: 48 bits tell copies
/// of one site's robots.txt apart.
fn short_sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..6]
        .iter()
        .fold(String::with_capacity(12), |mut hex, byte| {
            use std::fmt::Write as _;
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

impl std::ops::Deref for RobotsFile {
    type Target = RobotsTxt;

    fn deref(&self) -> &RobotsTxt {
        &self.parsed
    }
}

/// What the proxy knows about an origin's robots.txt, and so what it answers clients.
#[derive(Debug, Clone)]
pub enum RobotsRules {
    /// A file was fetched (2xx) and parsed: answer by its rules.
    Parsed(Arc<RobotsFile>),
    /// The file is "unavailable" (4xx other than 429, or a redirect chain that went
    /// nowhere): there are no restrictions (RFC 9309 §2.3.1.3). `status` is the answer
    /// that decided it (a 3xx status for a broken redirect chain).
    AllowAll {
        /// The deciding HTTP status.
        status: StatusCode,
    },
    /// A 4xx read as "keep out" because `robots.on_4xx = "disallow"`: nothing is allowed.
    DisallowAll {
        /// The deciding HTTP status.
        status: StatusCode,
    },
    /// The file could not be fetched (429, 5xx, network failure): a complete disallow
    /// (RFC 9309 §2.3.1.4); the proxy answers `503` with `Retry-After`.
    Unreachable {
        /// What went wrong, for people (status, timeout, error).
        reason: String,
    },
    /// The origin's TLS certificate failed verification: nothing may be fetched there;
    /// the proxy answers `502` naming the problem.
    Certificate {
        /// The verification failure, for people.
        reason: String,
    },
}

impl RobotsRules {
    /// Rules that came from an answer of the origin (2xx or 4xx) rather than a failure:
    /// the kinds that may stand in as a last good copy.
    pub fn is_good(&self) -> bool {
        matches!(
            self,
            RobotsRules::Parsed(_) | RobotsRules::AllowAll { .. } | RobotsRules::DisallowAll { .. }
        )
    }

    /// A short name of the kind, for logs and metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            RobotsRules::Parsed(_) => "parsed",
            RobotsRules::AllowAll { .. } => "allow_all",
            RobotsRules::DisallowAll { .. } => "disallow_all",
            RobotsRules::Unreachable { .. } => "unreachable",
            RobotsRules::Certificate { .. } => "certificate",
        }
    }
}

/// Cache validators of a fetched file, sent back as `If-None-Match` /
/// `If-Modified-Since` when it is revalidated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// The `ETag` the origin gave.
    pub etag: Option<HeaderValue>,
    /// The `Last-Modified` the origin gave.
    pub last_modified: Option<HeaderValue>,
}

impl Validators {
    /// Neither validator is known: a revalidation cannot be conditional.
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    /// `self` with whatever `newer` (the validators of a `304`) carries replacing it.
    pub fn updated_by(&self, newer: Validators) -> Validators {
        Validators {
            etag: newer.etag.or_else(|| self.etag.clone()),
            last_modified: newer.last_modified.or_else(|| self.last_modified.clone()),
        }
    }
}

/// One origin's robots.txt as cached: the rules plus when and how they were obtained.
#[derive(Debug, Clone)]
pub struct RobotsEntry {
    /// The origin the rules apply to (after redirects too: RFC 9309 §2.3.1.2).
    pub origin: Origin,
    /// `origin`'s `/robots.txt` URL, for answers and logs.
    pub robots_url: String,
    /// What the proxy enforces.
    pub rules: RobotsRules,
    /// When `rules` were last obtained or confirmed (2xx, 304 or 4xx) by the origin; for
    /// a failure without a stand-in, when the failed attempt ended. The age compared
    /// with `stale_for`.
    pub fetched_at: Instant,
    /// `fetched_at` on the wall clock, for the audit trail.
    pub fetched_on: std::time::SystemTime,
    /// When the latest fetch attempt ended, whatever its outcome.
    pub checked_at: Instant,
    /// After this instant the entry is refetched (revalidated when it has validators).
    pub expires_at: Instant,
    /// `Some(reason)` when `rules` are a last good copy used because the latest fetch
    /// failed for `reason`; the proxy should note it in logs and headers.
    pub stale: Option<String>,
    /// After a failed fetch: the interval until the next attempt, for the `Retry-After`
    /// of the proxy's `503` (`expires_at - now` is the precise remainder).
    pub retry_after: Option<Duration>,
    /// Validators for revalidating `rules` (only ever set for parsed files).
    pub validators: Validators,
    /// Consecutive failed fetches; 0 after any answer of the origin.
    pub failures: u32,
    /// The body was longer than `max_size` and only its first part was parsed.
    pub truncated: bool,
}

impl crate::outcome::RobotsSource for RobotsEntry {
    fn copy(&self) -> crate::outcome::RobotsCopy<'_> {
        RobotsEntry::copy(self)
    }
}

impl RobotsEntry {
    /// The copy's record for the access log and the audit.
    pub fn copy(&self) -> crate::outcome::RobotsCopy<'_> {
        let (status, file) = match &self.rules {
            RobotsRules::Parsed(file) => (None, Some(file)),
            RobotsRules::AllowAll { status } | RobotsRules::DisallowAll { status } => {
                (Some(status.as_u16()), None)
            }
            RobotsRules::Unreachable { .. } | RobotsRules::Certificate { .. } => (None, None),
        };
        crate::outcome::RobotsCopy {
            url: &self.robots_url,
            fetched_on: self.fetched_on,
            kind: self.rules.kind(),
            status,
            etag: header_text(self.validators.etag.as_ref()),
            last_modified: header_text(self.validators.last_modified.as_ref()),
            sha256: file.map(|f| f.sha256()),
            body: file.map(|f| f.body()),
        }
    }

    /// Still usable without a fetch at `now`.
    pub fn is_fresh(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    /// The time left until the next fetch attempt, rounded up to whole seconds and at
    /// least 1 s: ready for a `Retry-After` header.
    pub fn retry_after_secs(&self, now: Instant) -> u64 {
        let left = self.expires_at.saturating_duration_since(now);
        (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> FetchSettings {
        let mut s = FetchSettings::from_config(&Config::default()).expect("default identity");
        s.failure_ttl = Duration::from_secs(60);
        s.max_failure_ttl = Duration::from_secs(3600);
        s
    }

    #[test]
    fn failure_interval_doubles_up_to_the_cap() {
        let s = settings();
        let got: Vec<u64> = (1..=9)
            .map(|n| s.failure_interval(n, None).as_secs())
            .collect();
        assert_eq!(got, [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        assert_eq!(s.failure_interval(u32::MAX, None).as_secs(), 3600);
    }

    #[test]
    fn failure_interval_is_at_least_retry_after_but_not_beyond_default_ttl() {
        let s = settings();
        assert_eq!(
            s.failure_interval(1, Some(Duration::from_secs(600))),
            Duration::from_secs(600)
        );
        assert_eq!(
            s.failure_interval(1, Some(Duration::from_secs(10 * 86_400))),
            s.default_ttl
        );
    }

    #[test]
    fn max_failure_ttl_caps_failure_ttl_itself() {
        let mut s = settings();
        s.max_failure_ttl = Duration::from_secs(30);
        assert_eq!(s.failure_interval(1, None), Duration::from_secs(30));
    }

    #[test]
    fn validators_of_a_304_replace_only_what_they_carry() {
        let old = Validators {
            etag: Some(HeaderValue::from_static("\"a\"")),
            last_modified: Some(HeaderValue::from_static("Mon, 01 Jan 2024 00:00:00 GMT")),
        };
        let new = old.updated_by(Validators {
            etag: Some(HeaderValue::from_static("\"b\"")),
            last_modified: None,
        });
        assert_eq!(new.etag, Some(HeaderValue::from_static("\"b\"")));
        assert_eq!(new.last_modified, old.last_modified);
    }
}
