//! robots.txt fetching and caching through the public API (`RobotsFetcher`,
//! `RobotsCache`), against real origins on loopback: one test per fetch outcome (2xx,
//! redirects, 4xx, 429 and 5xx, timeouts and broken connections, TLS), then lifetimes,
//! failure handling, single flight, the LRU bound, identity and pacing. How those
//! outcomes decide a client's answer through the proxy is tested in `robots_outcomes.rs`.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::StatusCode;
use robots_guard::config::On4xx;
use robots_guard::fetch::{RobotsCache, RobotsEntry, RobotsFetcher, RobotsRules};
use robots_guard::origin::{Origin, Scheme};
use robots_guard::policy::{Pacer, PacingSettings};
use robots_guard::robots::RobotsTxt;
use support::origin::{closed_port, Reply, TestCa, TestOrigin};
use support::{cache, client, fetch_settings, fetch_settings_with, unpaced};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// The parsed file of `entry`; panics (failing the test) for any other rules.
fn parsed(entry: &RobotsEntry) -> &RobotsTxt {
    match &entry.rules {
        RobotsRules::Parsed(robots) => robots,
        other => panic!("expected parsed rules, got {other:?}"),
    }
}

fn allowed(entry: &RobotsEntry, path: &str) -> bool {
    parsed(entry).check("testbot", path).allowed
}

/// An origin serving `ROBOTS` at `/robots.txt` and 404 elsewhere.
async fn robots_origin() -> TestOrigin {
    TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, ROBOTS),
            _ => Reply::empty(404),
        }
    })
    .await
}

/// An origin answering `/robots.txt` with `status` (and a short body).
async fn status_origin(status: u16) -> TestOrigin {
    TestOrigin::serving(status, "no robots here\n").await
}

fn unreachable_reason(entry: &RobotsEntry) -> &str {
    match &entry.rules {
        RobotsRules::Unreachable { reason } => reason,
        other => panic!("expected unreachable, got {other:?}"),
    }
}

// --- 2xx -------------------------------------------------------------------------------

#[tokio::test]
async fn ok_2xx_is_parsed_and_applied() {
    let origin = robots_origin().await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    assert!(!allowed(&entry, "/private/x"));
    assert!(allowed(&entry, "/public"));
    assert_eq!(entry.origin, origin.origin());
    assert_eq!(entry.robots_url, origin.url("/robots.txt"));
    assert_eq!((entry.stale.as_deref(), entry.failures), (None, 0));
    assert!(!entry.truncated);

    let again = cache.lookup(&origin.origin()).await;
    assert!(
        Arc::ptr_eq(&entry, &again),
        "a fresh entry is served from the cache"
    );
    assert_eq!(origin.hits("/robots.txt"), 1);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.fetches_ok), (1, 1, 1));
    assert_eq!((stats.entries, stats.in_flight), (1, 0));
}

#[tokio::test]
async fn ok_2xx_over_max_size_is_truncated_and_later_rules_do_not_apply() {
    let mut body = String::from("User-agent: *\nDisallow: /early\n");
    while body.len() < 1000 {
        body.push_str("# padding padding padding padding\n");
    }
    body.push_str("Disallow: /late\n");
    // Far more than the cap follows; it must not be needed for the answer.
    body.push_str(&"#".repeat(4 * 1024 * 1024));
    let body: &'static str = Box::leak(body.into_boxed_str());
    let origin = TestOrigin::serving(200, body).await;
    let cache = cache(fetch_settings_with(|s| s.max_size = 1000));
    let entry = cache.lookup(&origin.origin()).await;
    assert!(entry.truncated);
    assert!(!allowed(&entry, "/early"));
    assert!(
        allowed(&entry, "/late"),
        "a rule after max_size does not apply"
    );
}

#[tokio::test]
async fn ok_2xx_of_exactly_max_size_is_not_truncated() {
    let body = "User-agent: *\nDisallow: /x\n";
    let origin = TestOrigin::serving(200, body).await;
    let cache = cache(fetch_settings_with(|s| s.max_size = body.len()));
    let entry = cache.lookup(&origin.origin()).await;
    assert!(!entry.truncated);
    assert!(!allowed(&entry, "/x"));
}

// --- 3xx -------------------------------------------------------------------------------

#[tokio::test]
async fn redirects_are_followed_across_hosts_and_ports_and_apply_to_the_original_origin() {
    // b: a relative redirect to the real file.
    let b = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::redirect(302, "rules/robots.txt"),
            "/rules/robots.txt" => Reply::text(200, ROBOTS),
            _ => Reply::empty(404),
        }
    })
    .await;
    // a: to another host name (`localhost`) and port.
    let target = format!("http://localhost:{}/robots.txt", b.port());
    let a = TestOrigin::start(move |_| {
        let target = target.clone();
        async move { Reply::redirect(301, &target) }
    })
    .await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&a.origin()).await;
    assert!(!allowed(&entry, "/private"));
    assert_eq!(
        entry.origin,
        a.origin(),
        "the rules apply to the original origin"
    );
    assert_eq!((a.hits("/robots.txt"), b.hits("/rules/robots.txt")), (1, 1));
    assert!(
        cache.peek(&b.origin()).is_none(),
        "nothing is cached for the target"
    );
}

/// An origin redirecting `/robots.txt?hop=n` to `?hop=n+1` until `hop=last`, which is
/// served.
async fn redirect_chain(last: usize) -> TestOrigin {
    TestOrigin::start(move |req| async move {
        let hop: usize = req
            .uri()
            .query()
            .and_then(|q| q.strip_prefix("hop="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if hop >= last {
            Reply::text(200, ROBOTS)
        } else {
            Reply::redirect(307, &format!("/robots.txt?hop={}", hop + 1))
        }
    })
    .await
}

#[tokio::test]
async fn max_redirects_hops_are_followed() {
    let origin = redirect_chain(5).await;
    let cache = cache(fetch_settings_with(|s| s.max_redirects = 5));
    let entry = cache.lookup(&origin.origin()).await;
    assert!(!allowed(&entry, "/private"));
    assert_eq!(origin.hits("/robots.txt"), 6);
}

#[tokio::test]
async fn too_many_redirects_allow_all() {
    let origin = redirect_chain(6).await;
    let cache = cache(fetch_settings_with(|s| s.max_redirects = 5));
    let entry = cache.lookup(&origin.origin()).await;
    assert!(
        matches!(entry.rules, RobotsRules::AllowAll { status } if status == StatusCode::TEMPORARY_REDIRECT),
        "{:?}",
        entry.rules
    );
    assert_eq!(
        origin.hits("/robots.txt"),
        6,
        "the sixth redirect is not followed"
    );
    assert_eq!(cache.stats().fetches_unavailable, 1);
}

#[tokio::test]
async fn redirect_without_location_allows_all() {
    let origin = TestOrigin::start(|_| async { Reply::empty(302) }).await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    assert!(matches!(entry.rules, RobotsRules::AllowAll { status } if status == 302));
}

// --- 4xx -------------------------------------------------------------------------------

#[tokio::test]
async fn client_errors_allow_all() {
    for status in [400, 401, 403, 404, 410] {
        let origin = status_origin(status).await;
        let cache = cache(fetch_settings());
        let entry = cache.lookup(&origin.origin()).await;
        assert!(
            matches!(entry.rules, RobotsRules::AllowAll { status: s } if s == status),
            "{status}: {:?}",
            entry.rules
        );
        assert_eq!(entry.retry_after, None);
    }
}

#[tokio::test]
async fn client_errors_disallow_all_with_on_4xx_disallow() {
    for status in [401, 403, 404] {
        let origin = status_origin(status).await;
        let cache = cache(fetch_settings_with(|s| s.on_4xx = On4xx::Disallow));
        let entry = cache.lookup(&origin.origin()).await;
        assert!(
            matches!(entry.rules, RobotsRules::DisallowAll { status: s } if s == status),
            "{status}: {:?}",
            entry.rules
        );
    }
}

// --- unreachable -----------------------------------------------------------------------

#[tokio::test]
async fn too_many_requests_is_unreachable_and_retry_after_is_honoured() {
    let origin =
        TestOrigin::start(|_| async { Reply::empty(429).header("retry-after", "3") }).await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    assert!(unreachable_reason(&entry).contains("429"));
    // failure_ttl is 100 ms; the server asked for 3 s.
    assert_eq!(entry.retry_after, Some(Duration::from_secs(3)));
    assert_eq!(entry.expires_at - entry.checked_at, Duration::from_secs(3));
    cache.lookup(&origin.origin()).await;
    assert_eq!(origin.hits("/robots.txt"), 1, "no retry before Retry-After");
    assert_eq!(cache.stats().fetches_unreachable, 1);
}

#[tokio::test]
async fn server_errors_are_unreachable() {
    for status in [500, 502, 503, 504] {
        let origin = status_origin(status).await;
        let cache = cache(fetch_settings());
        let entry = cache.lookup(&origin.origin()).await;
        assert!(
            unreachable_reason(&entry).contains(&status.to_string()),
            "{status}"
        );
        assert_eq!(entry.retry_after, Some(Duration::from_millis(100)));
    }
}

#[tokio::test]
async fn service_unavailable_honours_a_retry_after_date() {
    let now = SystemTime::now();
    let date = httpdate::fmt_http_date(now);
    let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
    let origin = TestOrigin::start(move |_| {
        let (date, later) = (date.clone(), later.clone());
        async move {
            Reply::empty(503)
                .header("date", &date)
                .header("retry-after", &later)
        }
    })
    .await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    unreachable_reason(&entry);
    assert_eq!(entry.retry_after, Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn timeout_is_unreachable() {
    let origin = TestOrigin::start(|_| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Reply::text(200, ROBOTS)
    })
    .await;
    let cache = cache(fetch_settings_with(|s| {
        s.fetch_timeout = Duration::from_millis(300)
    }));
    let started = Instant::now();
    let entry = cache.lookup(&origin.origin()).await;
    assert!(unreachable_reason(&entry).contains("within"));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn connection_refused_is_unreachable() {
    let origin = Origin {
        scheme: Scheme::Http,
        host: "127.0.0.1".to_owned(),
        port: closed_port().await,
    };
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin).await;
    assert!(
        unreachable_reason(&entry).contains("connect"),
        "{:?}",
        entry.rules
    );
}

#[tokio::test]
async fn connection_reset_mid_body_is_unreachable() {
    let origin =
        TestOrigin::start(|_| async { Reply::truncated(b"User-agent: *\nDisallow: /x\n", 1000) })
            .await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    unreachable_reason(&entry);
}

#[tokio::test]
async fn bad_chunking_is_unreachable() {
    let origin = TestOrigin::start(|_| async { Reply::bad_chunking(b"User-agent: *\n") }).await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    unreachable_reason(&entry);
}

#[tokio::test]
async fn connection_closed_without_an_answer_is_unreachable() {
    let origin = TestOrigin::start(|_| async { Reply::Reset }).await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    unreachable_reason(&entry);
}

// --- certificate -----------------------------------------------------------------------

#[tokio::test]
async fn untrusted_certificate_is_its_own_outcome() {
    let ca = TestCa::new();
    let origin = TestOrigin::start_tls(ca.server_config(&["127.0.0.1"]), |_| async {
        Reply::text(200, ROBOTS)
    })
    .await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    match &entry.rules {
        RobotsRules::Certificate { reason } => {
            assert!(reason.contains("certificate"), "{reason}")
        }
        other => panic!("expected a certificate failure, got {other:?}"),
    }
    assert_eq!(origin.hits("/robots.txt"), 0, "nothing was fetched");
    assert_eq!(cache.stats().fetches_certificate, 1);
}

#[tokio::test]
async fn trusted_https_origin_is_fetched() {
    let ca = TestCa::new();
    let origin = TestOrigin::start_tls(ca.server_config(&["127.0.0.1"]), |_| async {
        Reply::text(200, ROBOTS)
    })
    .await;
    assert_eq!(origin.origin().scheme, Scheme::Https);
    let roots = ca.pem_file();
    let fetcher = RobotsFetcher::new(
        client(std::slice::from_ref(&roots)),
        unpaced(),
        fetch_settings(),
    );
    let entry = RobotsCache::new(fetcher).lookup(&origin.origin()).await;
    let _ = std::fs::remove_file(roots);
    assert!(!allowed(&entry, "/private"));
}

// --- lifetimes and revalidation ----------------------------------------------------------

#[tokio::test]
async fn cache_control_max_age_shortens_the_lifetime() {
    let origin = TestOrigin::start(|_| async {
        Reply::text(200, ROBOTS).header("cache-control", "public, max-age=1")
    })
    .await;
    let cache = cache(fetch_settings());
    let entry = cache.lookup(&origin.origin()).await;
    assert_eq!(entry.expires_at - entry.fetched_at, Duration::from_secs(1));
    cache.lookup(&origin.origin()).await;
    assert_eq!(origin.hits("/robots.txt"), 1);
    sleep_until(entry.expires_at).await;
    let refreshed = cache.lookup(&origin.origin()).await;
    assert_eq!(origin.hits("/robots.txt"), 2, "refetched once expired");
    assert!(refreshed.fetched_at >= entry.expires_at);
}

#[tokio::test]
async fn min_ttl_floors_a_no_cache_file() {
    let origin = TestOrigin::start(|_| async {
        Reply::text(200, ROBOTS).header("cache-control", "no-cache")
    })
    .await;
    let cache = cache(fetch_settings_with(|s| {
        s.min_ttl = Duration::from_millis(500)
    }));
    let entry = cache.lookup(&origin.origin()).await;
    assert_eq!(
        entry.expires_at - entry.fetched_at,
        Duration::from_millis(500)
    );
    for _ in 0..10 {
        cache.lookup(&origin.origin()).await;
    }
    assert_eq!(origin.hits("/robots.txt"), 1, "no fetch per request");
}

#[tokio::test]
async fn revalidation_sends_validators_and_a_304_refreshes_the_entry() {
    const ETAG: &str = "\"v1\"";
    const LAST_MODIFIED: &str = "Mon, 01 Jan 2024 00:00:00 GMT";
    let origin = TestOrigin::start(|req| async move {
        let matches = req
            .headers()
            .get("if-none-match")
            .is_some_and(|v| v.as_bytes() == ETAG.as_bytes());
        if matches {
            Reply::empty(304).header("etag", ETAG)
        } else {
            Reply::text(200, ROBOTS)
                .header("etag", ETAG)
                .header("last-modified", LAST_MODIFIED)
        }
    })
    .await;
    let cache = cache(fetch_settings_with(|s| {
        s.default_ttl = Duration::from_millis(200)
    }));
    let first = cache.lookup(&origin.origin()).await;
    assert_eq!(
        first.validators.etag.as_ref().map(|v| v.as_bytes()),
        Some(ETAG.as_bytes())
    );
    let first_request = origin.last_request().expect("a request");
    assert_eq!(first_request.header("if-none-match"), None);

    sleep_until(first.expires_at).await;
    let second = cache.lookup(&origin.origin()).await;
    let revalidation = origin.last_request().expect("a second request");
    assert_eq!(revalidation.header("if-none-match"), Some(ETAG));
    assert_eq!(
        revalidation.header("if-modified-since"),
        Some(LAST_MODIFIED)
    );
    match (&first.rules, &second.rules) {
        (RobotsRules::Parsed(a), RobotsRules::Parsed(b)) => {
            assert!(Arc::ptr_eq(a, b), "the parsed file is kept")
        }
        other => panic!("expected parsed rules, got {other:?}"),
    }
    assert!(second.fetched_at > first.fetched_at);
    assert!(second.expires_at > Instant::now());
    assert_eq!(
        second
            .validators
            .last_modified
            .as_ref()
            .map(|v| v.as_bytes()),
        Some(LAST_MODIFIED.as_bytes())
    );
    let stats = cache.stats();
    assert_eq!((stats.fetches_ok, stats.fetches_not_modified), (1, 1));
}

// --- failures over time --------------------------------------------------------------------

#[tokio::test]
async fn last_good_copy_is_used_while_younger_than_stale_for() {
    let failing = Arc::new(AtomicBool::new(false));
    let origin = {
        let failing = failing.clone();
        TestOrigin::start(move |_| {
            let fail = failing.load(Ordering::SeqCst);
            async move {
                if fail {
                    Reply::empty(503)
                } else {
                    Reply::text(200, ROBOTS)
                }
            }
        })
        .await
    };
    let cache = cache(fetch_settings_with(|s| {
        s.default_ttl = Duration::from_millis(200);
        s.stale_for = Duration::from_millis(800);
        s.failure_ttl = Duration::from_millis(100);
        s.max_failure_ttl = Duration::from_millis(100);
    }));
    let good = cache.lookup(&origin.origin()).await;
    assert!(!allowed(&good, "/private"));

    failing.store(true, Ordering::SeqCst);
    sleep_until(good.expires_at).await;
    let stale = cache.lookup(&origin.origin()).await;
    assert!(
        !allowed(&stale, "/private"),
        "the last good copy still applies"
    );
    assert!(stale.stale.as_deref().is_some_and(|r| r.contains("503")));
    assert_eq!(stale.fetched_at, good.fetched_at);
    assert_eq!(stale.retry_after, Some(Duration::from_millis(100)));

    sleep_until(good.fetched_at + Duration::from_millis(800)).await;
    let gone = cache.lookup(&origin.origin()).await;
    unreachable_reason(&gone);
    assert_eq!(gone.stale, None);

    failing.store(false, Ordering::SeqCst);
    sleep_until(gone.expires_at).await;
    let back = cache.lookup(&origin.origin()).await;
    assert!(!allowed(&back, "/private"));
    assert_eq!((back.stale.as_deref(), back.failures), (None, 0));
}

#[tokio::test]
async fn failure_backoff_doubles_up_to_max_failure_ttl() {
    let origin = status_origin(500).await;
    let cache = cache(fetch_settings_with(|s| {
        s.failure_ttl = Duration::from_millis(50);
        s.max_failure_ttl = Duration::from_millis(200);
    }));
    let mut intervals = Vec::new();
    for n in 1..=5 {
        let entry = cache.lookup(&origin.origin()).await;
        assert_eq!(entry.failures, n);
        intervals.push(entry.retry_after.map(|d| d.as_millis()));
        assert_eq!(
            entry.expires_at - entry.checked_at,
            entry.retry_after.unwrap_or_default()
        );
        sleep_until(entry.expires_at).await;
    }
    assert_eq!(
        intervals,
        [Some(50), Some(100), Some(200), Some(200), Some(200)]
    );
    assert_eq!(origin.hits("/robots.txt"), 5);
}

// --- single flight, cancellation, LRU ----------------------------------------------------

#[tokio::test]
async fn one_fetch_serves_a_hundred_concurrent_lookups() {
    let origin = TestOrigin::start(|_| async {
        // Long enough for every lookup to arrive while the fetch runs.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Reply::text(200, ROBOTS)
    })
    .await;
    let cache = cache(fetch_settings());
    let mut lookups = JoinSet::new();
    for _ in 0..100 {
        let (cache, origin) = (cache.clone(), origin.origin());
        lookups.spawn(async move { cache.lookup(&origin).await });
    }
    let entries = lookups.join_all().await;
    assert_eq!(entries.len(), 100);
    assert!(entries.iter().all(|e| Arc::ptr_eq(e, &entries[0])));
    assert_eq!(origin.hits("/robots.txt"), 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.misses, stats.fetches_ok, stats.in_flight),
        (100, 1, 0)
    );
}

#[tokio::test]
async fn a_cancelled_lookup_does_not_cancel_the_fetch() {
    let released = Arc::new(tokio::sync::Notify::new());
    let origin = {
        let released = released.clone();
        TestOrigin::start(move |_| {
            let released = released.clone();
            async move {
                released.notified().await;
                Reply::text(200, ROBOTS)
            }
        })
        .await
    };
    let cache = cache(fetch_settings());
    let first = tokio::spawn({
        let (cache, origin) = (cache.clone(), origin.origin());
        async move { cache.lookup(&origin).await }
    });
    // Wait until the fetch reached the origin, then give up on the lookup.
    while origin.hits("/robots.txt") == 0 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.abort();
    assert!(first.await.is_err_and(|e| e.is_cancelled()));
    released.notify_one();
    let entry = cache.lookup(&origin.origin()).await;
    assert!(!allowed(&entry, "/private"));
    assert_eq!(
        origin.hits("/robots.txt"),
        1,
        "the first fetch finished and was shared"
    );
}

#[tokio::test]
async fn the_cache_holds_at_most_cache_capacity_origins() {
    let origins = [
        robots_origin().await,
        robots_origin().await,
        robots_origin().await,
    ];
    let cache = cache(fetch_settings_with(|s| {
        s.cache_capacity = std::num::NonZeroUsize::new(2).expect("non-zero")
    }));
    for o in &origins {
        cache.lookup(&o.origin()).await;
    }
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.evictions), (2, 1));
    assert!(
        cache.peek(&origins[0].origin()).is_none(),
        "the oldest went"
    );
    assert_eq!(cache.snapshot(10).len(), 2);
    cache.lookup(&origins[0].origin()).await;
    assert_eq!(
        origins[0].hits("/robots.txt"),
        2,
        "an evicted origin is refetched"
    );
    assert_eq!(cache.stats().entries, 2);
}

// --- identity and pacing -------------------------------------------------------------------

#[tokio::test]
async fn the_fetch_identifies_itself() {
    let origin = robots_origin().await;
    cache(fetch_settings()).lookup(&origin.origin()).await;
    let request = origin.last_request().expect("a request");
    assert_eq!(request.method, http::Method::GET);
    assert_eq!(request.path, "/robots.txt");
    assert_eq!(request.header("user-agent"), Some(support::TEST_USER_AGENT));
    assert_eq!(request.header("from"), Some(support::TEST_FROM));
}

fn pacer(max_per_host: usize, max_wait: Duration) -> Pacer {
    Pacer::new(PacingSettings {
        default_delay: Duration::ZERO,
        max_per_host: std::num::NonZeroUsize::new(max_per_host).expect("non-zero"),
        max_wait,
        idle_host_ttl: Duration::from_secs(60),
        max_hosts: 100,
        backoff: Default::default(),
    })
}

#[tokio::test]
async fn the_fetch_holds_a_pacing_slot_while_it_runs() {
    let in_flight_seen = Arc::new(AtomicUsize::new(usize::MAX));
    let pacer = pacer(4, Duration::from_secs(5));
    let origin = {
        let (seen, pacer) = (in_flight_seen.clone(), pacer.clone());
        TestOrigin::start(move |_| {
            let in_flight = pacer.host_snapshot("127.0.0.1").map_or(0, |s| s.in_flight);
            seen.store(in_flight, Ordering::SeqCst);
            async { Reply::text(200, ROBOTS) }
        })
        .await
    };
    let fetcher = RobotsFetcher::new(client(&[]), pacer.clone(), fetch_settings());
    RobotsCache::new(fetcher).lookup(&origin.origin()).await;
    assert_eq!(in_flight_seen.load(Ordering::SeqCst), 1);
    let after = pacer
        .host_snapshot("127.0.0.1")
        .expect("the host is tracked");
    assert_eq!(after.in_flight, 0, "the slot is returned");
    assert!(after.last_start_age.is_some());
}

#[tokio::test]
async fn a_pacing_rejection_does_not_stop_the_fetch() {
    let origin = robots_origin().await;
    let pacer = pacer(1, Duration::ZERO);
    // Another request to the host holds its only slot, so the fetch is rejected at once.
    let _busy = pacer
        .admit("127.0.0.1", Duration::ZERO)
        .await
        .expect("the first request is admitted");
    let fetcher = RobotsFetcher::new(client(&[]), pacer.clone(), fetch_settings());
    let entry = RobotsCache::new(fetcher).lookup(&origin.origin()).await;
    assert!(!allowed(&entry, "/private"));
}
