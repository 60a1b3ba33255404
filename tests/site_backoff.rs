//! Let the site steer: an origin's `429`/`503` with `Retry-After` (seconds or
//! an HTTP date) pauses its host, and nothing reaches it meanwhile; a request
//! that can wait (`max_wait`) waits, any other is `429 site-backoff` with a
//! `Retry-After`. A `429`/`503` without `Retry-After`, and connect errors,
//! double the host's extra delay, and successes halve it away. Pauses are
//! capped by `max_backoff`, are per host, and follow robots.txt answers too.
//!
//! How: the real proxy on `127.0.0.1:0`, scripted origins that answer what
//! each test needs and record when each request arrived, clients through the
//! proxy. Every origin here is on 127.0.0.1 or another loopback address, and
//! every proxy is its own instance.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::origin::{Reply, TestOrigin};
use support::proxy::{assert_status, config_with, get, TestProxy};
use tokio::time::Instant;

const ROBOTS: &str = "User-agent: *\nAllow: /\n";

/// An origin that answers `/busy` with `status` (and `Retry-After: retry_after` when
/// given), and `ok <path>` everywhere else.
async fn origin(status: u16, retry_after: Option<String>) -> TestOrigin {
    let retry_after: Option<Arc<str>> = retry_after.map(Arc::from);
    TestOrigin::start(move |req| {
        let retry_after = retry_after.clone();
        async move {
            match req.uri().path() {
                "/robots.txt" => Reply::text(200, ROBOTS),
                "/busy" => {
                    let reply = Reply::text(status, "slow down\n");
                    match retry_after {
                        Some(value) => reply.header("retry-after", &value),
                        None => reply,
                    }
                }
                path => Reply::text(200, format!("ok {path}")),
            }
        }
    })
    .await
}

fn proxy_config(max_wait: Duration) -> robots_guard::config::Config {
    config_with(|c| {
        c.rate_limit.max_wait = max_wait;
        c.rate_limit.max_backoff = Duration::from_secs(5);
    })
}

fn arrived(origin: &TestOrigin, path: &str) -> Vec<Instant> {
    origin
        .requests()
        .into_iter()
        .filter(|r| r.path == path)
        .map(|r| r.at)
        .collect()
}

#[tokio::test]
async fn a_short_retry_after_makes_the_next_request_wait_and_then_succeed() {
    let site = origin(429, Some("1".to_owned())).await;
    let proxy = TestProxy::start(proxy_config(Duration::from_secs(5))).await;
    // The origin's own 429 reaches the client that caused it.
    let busy = get(proxy.addr(), &site.url("/busy")).await;
    assert_status(&busy, 429);
    assert_eq!(busy.reason(), None, "the origin's answer, not the proxy's");
    let paused_at = Instant::now();
    let next = get(proxy.addr(), &site.url("/next")).await;
    assert_status(&next, 200);
    let at = arrived(&site, "/next")[0];
    assert!(
        at - paused_at >= Duration::from_millis(900),
        "reached the origin {:?} into a 1 s pause",
        at - paused_at
    );
}

#[tokio::test]
async fn a_long_pause_is_site_backoff_and_nothing_reaches_the_host() {
    // An HTTP date two minutes ahead; max_backoff caps it at 5 s.
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(120));
    let site = origin(503, Some(date)).await;
    let proxy = TestProxy::start(proxy_config(Duration::from_secs(1))).await;
    assert_status(&get(proxy.addr(), &site.url("/busy")).await, 503);
    let refused = get(proxy.addr(), &site.url("/next")).await;
    assert_status(&refused, 429);
    assert_eq!(refused.reason(), Some("site-backoff"));
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((4..=5).contains(&retry), "capped by max_backoff: {retry}");
    assert!(
        refused.text().contains("retry-after-503"),
        "{}",
        refused.text()
    );
    assert!(
        arrived(&site, "/next").is_empty(),
        "nothing reached the paused host"
    );
    // The status page's source: the host is listed as paused, with its cause.
    let backoffs = proxy.live().services().pacer.backoffs(10);
    assert_eq!(backoffs.len(), 1);
    assert_eq!(backoffs[0].0, "127.0.0.1");
    assert!(backoffs[0].1.paused_for.is_some());
}

#[tokio::test]
async fn errors_double_the_spacing_and_successes_halve_it_away() {
    // 503 without Retry-After: the extra delay starts at max(default_delay, 1 s).
    let site = origin(503, None).await;
    let proxy = TestProxy::start(proxy_config(Duration::from_secs(10))).await;
    for _ in 0..2 {
        assert_status(&get(proxy.addr(), &site.url("/busy")).await, 503);
    }
    // Two failures: 1 s, then 2 s of extra spacing after the last start.
    let last_busy = *arrived(&site, "/busy").last().expect("busy");
    assert_status(&get(proxy.addr(), &site.url("/a")).await, 200);
    let a = arrived(&site, "/a")[0];
    assert!(
        a - last_busy >= Duration::from_millis(1900),
        "{:?}",
        a - last_busy
    );
    // One success halves 2 s to 1 s; the next halves 1 s away.
    assert_status(&get(proxy.addr(), &site.url("/b")).await, 200);
    let b = arrived(&site, "/b")[0];
    assert!(b - a >= Duration::from_millis(900), "{:?}", b - a);
    assert_status(&get(proxy.addr(), &site.url("/c")).await, 200);
    let c = arrived(&site, "/c")[0];
    assert!(
        c - b < Duration::from_millis(500),
        "no extra spacing left: {:?}",
        c - b
    );
    let counts = proxy.live().services().pacer.backoff_counts();
    let status_503 = counts
        .iter()
        .find(|(cause, _)| cause.word() == "status-503")
        .map(|(_, n)| *n);
    assert_eq!(status_503, Some(2));
}

#[tokio::test]
async fn back_off_is_per_host() {
    let site = origin(429, Some("30".to_owned())).await;
    // The same origin server on another loopback address is another host.
    let other = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(proxy_config(Duration::from_secs(1))).await;
    assert_status(&get(proxy.addr(), &site.url("/busy")).await, 429);
    let refused = get(proxy.addr(), &site.url("/x")).await;
    assert_eq!(refused.reason(), Some("site-backoff"));
    let elsewhere = other.url("/x").replace("127.0.0.1", "localhost");
    assert_status(&get(proxy.addr(), &elsewhere).await, 200);
}

#[tokio::test]
async fn a_robots_txt_429_with_retry_after_pauses_the_host() {
    let fetches = Arc::new(AtomicUsize::new(0));
    let seen = fetches.clone();
    let site = TestOrigin::start(move |req| {
        let seen = seen.clone();
        async move {
            match req.uri().path() {
                "/robots.txt" => {
                    seen.fetch_add(1, Ordering::SeqCst);
                    Reply::text(429, "later\n").header("retry-after", "60")
                }
                path => Reply::text(200, format!("ok {path}")),
            }
        }
    })
    .await;
    let proxy = TestProxy::start(proxy_config(Duration::from_secs(1))).await;
    // robots.txt is unreachable (a 429): the request is a 503 with Retry-After.
    let first = get(proxy.addr(), &site.url("/a")).await;
    assert_status(&first, 503);
    assert_eq!(first.reason(), Some("robots-unreachable"));
    // The host is paused too: nothing more is sent to it, robots.txt included.
    let backoffs = proxy.live().services().pacer.backoffs(10);
    assert_eq!(backoffs.len(), 1, "{backoffs:?}");
    assert!(site.requests().iter().all(|r| r.path == "/robots.txt"));
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn connect_errors_slow_the_host_down() {
    let port = support::origin::closed_port().await;
    let proxy = TestProxy::start(config_with(|c| {
        c.rate_limit.max_wait = Duration::from_secs(5);
        // robots.txt of the closed port would be unreachable: no robots check here.
        c.robots.on_4xx = robots_guard::config::On4xx::Allow;
    }))
    .await;
    let url = format!("http://127.0.0.1:{port}/x");
    let answer = get(proxy.addr(), &url).await;
    // robots.txt cannot be fetched (refused): 503, and the host is slowed.
    assert_status(&answer, 503);
    let backoffs = proxy.live().services().pacer.backoffs(10);
    assert_eq!(backoffs.len(), 1, "{backoffs:?}");
    assert_eq!(backoffs[0].1.cause.map(|c| c.word()), Some("connect-error"));
    assert!(backoffs[0].1.extra >= Duration::from_secs(1));
}

#[tokio::test]
async fn the_status_page_and_metrics_show_paused_hosts_by_cause() {
    let site = origin(429, Some("60".to_owned())).await;
    let proxy = TestProxy::start_with_admin(config_with(|c| {
        c.rate_limit.max_wait = Duration::from_secs(1);
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
    }))
    .await;
    assert_status(&get(proxy.addr(), &site.url("/busy")).await, 429);
    let admin = |path: &str| {
        let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
        let addr = proxy.admin_addr();
        async move { support::proxy::raw(addr, request.as_bytes()).await }
    };
    let page = admin("/").await;
    assert!(
        page.contains("Hosts paused or slowed by the site"),
        "{page}"
    );
    assert!(page.contains("retry-after-429"), "{page}");
    let metrics = admin("/metrics").await;
    assert!(
        metrics.contains("robots_guard_site_backoffs_total{cause=\"retry-after-429\"} 1"),
        "{metrics}"
    );
}
