//! robots.txt through the proxy: how each outcome of fetching an origin's robots.txt
//! decides the answer a client gets. A 2xx file is applied, and a refusal names the rule,
//! its line, the file and the agent; a 4xx allows everything (nothing with
//! `on_4xx = "disallow"`); a 5xx, a 429, a timeout or a refused connection is
//! `503 robots-unreachable` with a `Retry-After`; redirects are followed up to
//! `max_redirects` and the file applies to the origin first asked; robots.txt itself is
//! always forwarded. One fetch per origin serves every client waiting for it, however the
//! client spells the origin's address.
//!
//! The fetcher and cache on their own (lifetimes, revalidation, backoff, the LRU bound)
//! are tested in `robots_fetch.rs`; robots.txt files that misbehave (endless redirects,
//! 20 MB, a garbage status line) in `faults.rs`.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, scripted hyper origins
//! on loopback serving robots.txt, and hyper's HTTP/1.1 client sending absolute-form
//! requests through the proxy. Every proxy is its own instance, so the robots.txt cache
//! never leaks between tests although every origin is on host `127.0.0.1`.

mod support;

use std::time::Duration;

use robots_guard::config::On4xx;
use support::origin::{closed_port, Reply, TestOrigin};
use support::proxy::{assert_status, config, config_with, get, Answer, TestProxy};
use support::{ROBOTS, TEST_AGENT};
use tokio::task::JoinSet;
use tokio::time::Instant;

// --- Fetch outcomes --------------------------------------------------------------------

#[tokio::test]
async fn robots_2xx_allows_by_the_rules_and_disallow_names_the_rule() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/public")).await, 200);

    let answer = get(proxy.addr(), &origin.url("/private/x?y=1")).await;
    assert_status(&answer, 403);
    let origin_name = format!("http://{}", origin.addr());
    let robots_url = origin.url("/robots.txt");
    assert_eq!(answer.reason(), Some("robots-disallow"));
    assert_eq!(
        answer.header("x-robots-guard-rule"),
        Some("disallow: /private")
    );
    assert_eq!(answer.header("x-robots-guard-line"), Some("3"));
    assert_eq!(
        answer.header("x-robots-guard-robots-url"),
        Some(robots_url.as_str())
    );
    assert_eq!(answer.header("x-robots-guard-agent"), Some(TEST_AGENT));
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let text = answer.text();
    for part in [
        origin_name.as_str(),
        TEST_AGENT,
        "disallow: /private",
        "line 3",
        robots_url.as_str(),
    ] {
        assert!(text.contains(part), "{part:?} missing from {text:?}");
    }
    assert_eq!(
        origin.hits("/private"),
        0,
        "nothing disallowed is forwarded"
    );
}

#[tokio::test]
async fn robots_404_forwards_everything() {
    let origin = TestOrigin::site_with(|| Reply::empty(404)).await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/private")).await, 200);
    assert_eq!(origin.hits("/private"), 1);
}

#[tokio::test]
async fn robots_403_with_on_4xx_disallow_is_robots_forbidden() {
    let origin = TestOrigin::site_with(|| Reply::empty(403)).await;
    let proxy = TestProxy::start(config_with(|c| c.robots.on_4xx = On4xx::Disallow)).await;
    let answer = get(proxy.addr(), &origin.url("/anything")).await;
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("robots-forbidden"));
    let robots_url = origin.url("/robots.txt");
    assert_eq!(
        answer.header("x-robots-guard-robots-url"),
        Some(robots_url.as_str())
    );
    assert!(answer.text().contains("answered 403"), "{}", answer.text());
    assert_eq!(origin.hits("/anything"), 0);

    // The default reading forwards.
    let origin = TestOrigin::site_with(|| Reply::empty(403)).await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/anything")).await, 200);
}

/// Asserts a `503 robots-unreachable` with a `Retry-After`, and returns that.
fn assert_unreachable(answer: &Answer) -> u64 {
    assert_status(answer, 503);
    assert_eq!(answer.reason(), Some("robots-unreachable"));
    let retry = answer
        .header("retry-after")
        .and_then(|v| v.parse::<u64>().ok())
        .expect("a Retry-After in seconds");
    assert!(retry >= 1);
    retry
}

#[tokio::test]
async fn robots_5xx_and_429_answer_503_with_retry_after() {
    for status in [500, 503, 429] {
        let origin = TestOrigin::site_with(move || Reply::empty(status)).await;
        let proxy = TestProxy::start(config()).await;
        let answer = get(proxy.addr(), &origin.url("/page")).await;
        let retry = assert_unreachable(&answer);
        assert_eq!(retry, 60, "failure_ttl (1 min) for {status}");
        assert!(
            answer.text().contains(&status.to_string()),
            "{status}: {}",
            answer.text()
        );
        assert_eq!(origin.hits("/page"), 0);
    }
    // The origin's own Retry-After raises the proxy's.
    let origin = TestOrigin::site_with(|| Reply::empty(429).header("retry-after", "120")).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_eq!(assert_unreachable(&answer), 120);
}

#[tokio::test]
async fn robots_timeout_answers_503() {
    let origin = TestOrigin::start(|req| async move {
        if req.uri().path() == "/robots.txt" {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        Reply::text(200, "late")
    })
    .await;
    let proxy = TestProxy::start(config_with(|c| {
        c.robots.fetch_timeout = Duration::from_millis(300)
    }))
    .await;
    let started = Instant::now();
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_unreachable(&answer);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(origin.hits("/page"), 0);
}

#[tokio::test]
async fn robots_connection_refused_answers_503() {
    let port = closed_port().await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &format!("http://127.0.0.1:{port}/page")).await;
    assert_unreachable(&answer);
    let robots_url = format!("http://127.0.0.1:{port}/robots.txt");
    assert_eq!(
        answer.header("x-robots-guard-robots-url"),
        Some(robots_url.as_str())
    );
}

// --- Redirects -------------------------------------------------------------------------

#[tokio::test]
async fn robots_redirect_is_followed_and_applies_to_the_original_origin() {
    let rules = TestOrigin::site(ROBOTS).await;
    let target = format!("http://localhost:{}/robots.txt", rules.port());
    let origin = TestOrigin::site_with(move || Reply::redirect(301, &target)).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/private")).await;
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("robots-disallow"));
    let robots_url = origin.url("/robots.txt");
    assert_eq!(
        answer.header("x-robots-guard-robots-url"),
        Some(robots_url.as_str())
    );
    assert_status(&get(proxy.addr(), &origin.url("/public")).await, 200);
    assert_eq!(
        (origin.hits("/robots.txt"), rules.hits("/robots.txt")),
        (1, 1)
    );
}

#[tokio::test]
async fn robots_six_redirects_are_too_many_and_allow_all() {
    let origin = TestOrigin::start(|req| async move {
        let hop: usize = req
            .uri()
            .query()
            .and_then(|q| q.strip_prefix("hop="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        match req.uri().path() {
            "/robots.txt" if hop < 6 => {
                Reply::redirect(302, &format!("/robots.txt?hop={}", hop + 1))
            }
            "/robots.txt" => Reply::text(200, "User-agent: *\nDisallow: /\n"),
            _ => Reply::text(200, "ok"),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/private")).await, 200);
    assert_eq!(
        origin.hits("/robots.txt"),
        6,
        "the sixth hop is not followed"
    );
}

#[tokio::test]
async fn robots_txt_itself_is_always_forwarded() {
    let origin = TestOrigin::site("User-agent: *\nDisallow: /\n").await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/page")).await, 403);
    let answer = get(proxy.addr(), &origin.url("/robots.txt")).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "User-agent: *\nDisallow: /\n");
}

// --- One fetch per origin --------------------------------------------------------------

#[tokio::test]
async fn single_flight_one_robots_fetch_serves_a_hundred_clients() {
    let origin = TestOrigin::start(|req| async move {
        if req.uri().path() == "/robots.txt" {
            // Long enough for every client to be waiting on the fetch.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return Reply::text(200, ROBOTS);
        }
        Reply::text(200, "ok")
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    let mut clients = JoinSet::new();
    for i in 0..100 {
        let path = if i % 10 == 0 { "/private" } else { "/public" };
        let url = origin.url(&format!("{path}/{i}"));
        let addr = proxy.addr();
        clients.spawn(async move { (path, get(addr, &url).await.status.as_u16()) });
    }
    let mut answers = Vec::new();
    while let Some(done) = clients.join_next().await {
        answers.push(done.expect("client task"));
    }
    assert_eq!(answers.len(), 100);
    for (path, status) in answers {
        let want = if path == "/private" { 403 } else { 200 };
        assert_eq!(status, want, "{path}");
    }
    assert_eq!(origin.hits("/robots.txt"), 1);
}

/// `127.1` and `2130706433` are `127.0.0.1` to every resolver: one origin,
/// so one robots.txt and its rules, however the client spells the address.
#[tokio::test]
async fn every_spelling_of_an_address_is_one_origin() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let port = origin.port();
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.0.0.1",
        "127.0.0.1.",
    ] {
        let public = get(proxy.addr(), &format!("http://{host}:{port}/public")).await;
        assert_status(&public, 200);
        let private = get(proxy.addr(), &format!("http://{host}:{port}/private")).await;
        assert_status(&private, 403);
    }
    assert_eq!(origin.hits("/robots.txt"), 1);
}
