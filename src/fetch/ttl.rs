//! How long a fetched robots.txt may be used, and when a failing origin asks to be
//! retried.
//!
//! RFC 9309 §2.4: crawlers may use standard HTTP cache control and SHOULD NOT use a cached
//! copy for more than 24 hours unless the file is unreachable. So the origin's caching
//! headers (RFC 9111) can only *shorten* the configured lifetime, never lengthen it, and a
//! floor keeps `no-cache` from turning every request into a fetch.

use std::time::{Duration, SystemTime};

use http::header::{AGE, CACHE_CONTROL, DATE, EXPIRES, RETRY_AFTER};
use http::HeaderMap;

/// The lifetime of a response with `headers` received at `now` (wall clock, only used to
/// read HTTP dates): `default_ttl`, shortened by what the origin allows, never below
/// `min_ttl` (which wins over `default_ttl` if larger).
///
/// The origin's allowance (RFC 9111 §4.2.1, as a shared cache) is `s-maxage`, else
/// `max-age`, else `Expires` minus `Date` (or minus `now` without a usable `Date`; an
/// unparsable `Expires` means already expired, §5.3); `no-store` and `no-cache` allow
/// nothing. An `Age` header is subtracted, as the copy has already aged in a cache on
/// the way.
pub fn freshness_lifetime(
    headers: &HeaderMap,
    now: SystemTime,
    default_ttl: Duration,
    min_ttl: Duration,
) -> Duration {
    let allowed = origin_allowance(headers, now).map(|allowed| {
        let age = header_str(headers, AGE.as_str())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::ZERO, Duration::from_secs);
        allowed.saturating_sub(age)
    });
    let ttl = allowed.map_or(default_ttl, |allowed| allowed.min(default_ttl));
    ttl.max(min_ttl)
}

/// The `Retry-After` of a response, as a wait from now: delay-seconds, or an HTTP date
/// (measured against the response's `Date` when present, which cancels clock skew, else
/// against `now`). `None` when absent or unreadable; a date in the past is a zero wait.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = header_str(headers, RETRY_AFTER.as_str())?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(reference_time(headers, now))
            .unwrap_or(Duration::ZERO),
    )
}

/// The lifetime the origin's own headers allow, `None` if they say nothing.
fn origin_allowance(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let mut max_age = None;
    let mut s_maxage = None;
    for value in headers.get_all(CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',') {
            let (name, arg) = match directive.split_once('=') {
                Some((name, arg)) => (name.trim(), Some(arg.trim().trim_matches('"'))),
                None => (directive.trim(), None),
            };
            let seconds = || {
                arg.and_then(|a| a.parse::<u64>().ok())
                    .map(Duration::from_secs)
            };
            if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
                return Some(Duration::ZERO);
            } else if name.eq_ignore_ascii_case("s-maxage") {
                // An unreadable value is treated as stale (RFC 9111 §4.2.1 lets a cache
                // treat invalid freshness information as stale).
                s_maxage = Some(seconds().unwrap_or(Duration::ZERO));
            } else if name.eq_ignore_ascii_case("max-age") {
                max_age = Some(seconds().unwrap_or(Duration::ZERO));
            }
        }
    }
    if let Some(ttl) = s_maxage.or(max_age) {
        return Some(ttl);
    }
    let expires = header_str(headers, EXPIRES.as_str())?;
    match httpdate::parse_http_date(expires.trim()) {
        Ok(at) => Some(
            at.duration_since(reference_time(headers, now))
                .unwrap_or(Duration::ZERO),
        ),
        Err(_) => Some(Duration::ZERO),
    }
}

/// The response's `Date`, or `now` when it has none that parses.
fn reference_time(headers: &HeaderMap, now: SystemTime) -> SystemTime {
    header_str(headers, DATE.as_str())
        .and_then(|d| httpdate::parse_http_date(d.trim()).ok())
        .unwrap_or(now)
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);
    const MIN: Duration = Duration::from_secs(60);

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("test header"));
        }
        map
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn date(secs: u64) -> String {
        httpdate::fmt_http_date(at(secs))
    }

    fn lifetime(pairs: &[(&'static str, &str)]) -> Duration {
        freshness_lifetime(&headers(pairs), at(1_700_000_000), DAY, MIN)
    }

    #[test]
    fn no_caching_headers_keep_the_default() {
        assert_eq!(lifetime(&[]), DAY);
    }

    #[test]
    fn max_age_shortens_but_never_lengthens() {
        assert_eq!(
            lifetime(&[("cache-control", "public, max-age=600")]),
            600 * SEC
        );
        assert_eq!(lifetime(&[("cache-control", "max-age=999999")]), DAY);
    }

    #[test]
    fn s_maxage_wins_over_max_age_for_a_shared_cache() {
        assert_eq!(
            lifetime(&[("cache-control", "max-age=60000, s-maxage=300")]),
            300 * SEC
        );
    }

    #[test]
    fn no_cache_and_no_store_fall_to_the_floor() {
        assert_eq!(lifetime(&[("cache-control", "no-cache")]), MIN);
        assert_eq!(lifetime(&[("cache-control", "max-age=600, No-Store")]), MIN);
    }

    #[test]
    fn the_floor_applies_to_short_max_age() {
        assert_eq!(lifetime(&[("cache-control", "max-age=5")]), MIN);
    }

    #[test]
    fn min_ttl_above_default_ttl_wins() {
        let got = freshness_lifetime(&HeaderMap::new(), at(0), MIN, 2 * MIN);
        assert_eq!(got, 2 * MIN);
    }

    #[test]
    fn expires_counts_from_the_servers_date() {
        let now = 1_700_000_000;
        // The server's clock is an hour behind ours; Expires is two hours after its Date.
        let got = lifetime(&[
            ("date", &date(now - 3600)),
            ("expires", &date(now - 3600 + 7200)),
        ]);
        assert_eq!(got, 7200 * SEC);
        // Without Date, measured against our clock.
        assert_eq!(lifetime(&[("expires", &date(now + 1800))]), 1800 * SEC);
    }

    #[test]
    fn invalid_or_past_expires_means_expired() {
        assert_eq!(lifetime(&[("expires", "0")]), MIN);
        assert_eq!(lifetime(&[("expires", &date(1_000))]), MIN);
    }

    #[test]
    fn max_age_wins_over_expires() {
        let got = lifetime(&[
            ("cache-control", "max-age=900"),
            ("expires", &date(1_700_000_000 + 60)),
        ]);
        assert_eq!(got, 900 * SEC);
    }

    #[test]
    fn age_is_subtracted() {
        assert_eq!(
            lifetime(&[("cache-control", "max-age=3600"), ("age", "600")]),
            3000 * SEC
        );
    }

    #[test]
    fn retry_after_seconds_or_date() {
        let now = at(1_700_000_000);
        assert_eq!(
            retry_after(&headers(&[("retry-after", "120")]), now),
            Some(120 * SEC)
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", &date(1_700_000_000 + 300))]),
                now
            ),
            Some(300 * SEC)
        );
        assert_eq!(
            retry_after(
                &headers(&[
                    ("date", &date(1_600_000_000)),
                    ("retry-after", &date(1_600_000_090)),
                ]),
                now
            ),
            Some(90 * SEC)
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", &date(1_000))]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    const SEC: Duration = Duration::from_secs(1);
}
