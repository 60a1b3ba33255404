//! The plain-HTTP proxy end to end: the real proxy (`Server::bind` + `run`) on
//! `127.0.0.1:0`, scripted hyper origins on loopback, and real clients (hyper's HTTP/1.1
//! client and raw sockets) sending absolute-form requests through it. One section per
//! concern: forwarding, the robots.txt outcomes of DESIGN.md §3, single flight, pacing,
//! identity, malformed requests and upstream failures, shutdown.
//!
//! Every proxy here is its own instance, so pacing and the robots.txt cache never leak
//! between tests although every origin is on host `127.0.0.1`. That streaming keeps
//! memory bounded is checked in `proxy_memory.rs`, a binary of its own because it
//! measures the whole process.

mod support;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use robots_guard::config::{IdentityMode, On4xx};
use support::body::{Generated, PatternCheck};
use support::origin::{closed_port, Reply, TestCa, TestOrigin};
use support::proxy::{
    assert_status, config, config_with, get, get_request, nonzero, raw, raw_body, raw_header,
    raw_status, request, send, Answer, ProxyConn, TestProxy,
};
use support::{TEST_FROM, TEST_USER_AGENT};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The product token of [`TEST_USER_AGENT`].
const TEST_AGENT: &str = "robots-guard-test";

/// A robots.txt with its `Disallow` on line 3.
const ROBOTS: &str = "# test rules\nUser-agent: *\nDisallow: /private\n";

/// An origin serving `robots` at `/robots.txt` and `ok <path>` everywhere else.
async fn site(robots: &'static str) -> TestOrigin {
    TestOrigin::start(move |req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, robots),
            _ => Reply::text(200, format!("ok {}", req.uri())),
        }
    })
    .await
}

/// An origin answering `/robots.txt` with `robots` and `ok <path>` everywhere else.
async fn site_with<F>(robots: F) -> TestOrigin
where
    F: Fn() -> Reply + Send + Sync + 'static,
{
    TestOrigin::start(move |req| {
        let reply = match req.uri().path() {
            "/robots.txt" => robots(),
            _ => Reply::text(200, format!("ok {}", req.uri())),
        };
        async move { reply }
    })
    .await
}

// --- 1. Forwarding ---------------------------------------------------------------------

#[tokio::test]
async fn forward_allowed_get_returns_the_origin_answer() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/public?q=1")).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "ok /public?q=1");
    assert_eq!(answer.header("content-type"), Some("text/plain"));
    assert_eq!(
        answer.reason(),
        None,
        "an origin answer has no proxy reason"
    );
    assert_eq!(origin.hits("/robots.txt"), 1);
    assert_eq!(origin.hits("/public"), 1);
}

#[tokio::test]
async fn forward_keep_alive_serves_several_requests_on_one_client_connection() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    for i in 0..5 {
        let answer = conn
            .fetch(get_request(&origin.url(&format!("/page/{i}"))))
            .await;
        assert_status(&answer, 200);
        assert_eq!(answer.text(), format!("ok /page/{i}"));
    }
    // Answers of the proxy itself keep the connection open too.
    let refused = conn.fetch(get_request(&origin.url("/private"))).await;
    assert_status(&refused, 403);
    let answer = conn.fetch(get_request(&origin.url("/after"))).await;
    assert_status(&answer, 200);
    assert!(!conn.is_closed());
    assert_eq!(origin.hits("/robots.txt"), 1, "robots.txt is cached");
}

#[tokio::test]
async fn forward_sets_via_and_host_and_strips_hop_by_hop_fields() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::text(200, "ok")
                .header("connection", "x-bar")
                .header("x-bar", "hop")
                .header("keep-alive", "timeout=5")
                .header("x-end-to-end", "kept"),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    // Raw, so every field is sent exactly as written. RFC 9112 §3.2.2: a proxy replaces
    // the Host it received with the target's.
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: wrong.example\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         Proxy-Connection: keep-alive\r\nConnection: x-foo, close\r\nX-Foo: hop\r\n\
         Proxy-Authorization: Basic eDp5\r\nKeep-Alive: timeout=5\r\nVia: 1.0 fred\r\n\
         X-Kept: yes\r\n\r\n",
        origin.url("/headers")
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");

    let seen = origin.last_request().expect("the origin saw the request");
    assert_eq!(seen.path, "/headers");
    assert_eq!(
        seen.header("host"),
        Some(origin.addr().to_string().as_str())
    );
    let via = format!("1.0 fred, 1.1 {}", proxy.pseudonym());
    assert_eq!(seen.header("via"), Some(via.as_str()));
    assert!(proxy.pseudonym().starts_with("robots-guard-"));
    for name in [
        "proxy-connection",
        "connection",
        "x-foo",
        "proxy-authorization",
        "keep-alive",
    ] {
        assert_eq!(seen.header(name), None, "{name} reached the origin");
    }
    assert_eq!(seen.header("x-kept"), Some("yes"));
    assert_eq!(seen.header("user-agent"), Some(TEST_USER_AGENT));

    // The way back: the origin's hop-by-hop fields stay behind, Via names the proxy.
    assert_eq!(raw_header(&answer, "x-bar"), None, "{answer}");
    assert_eq!(raw_header(&answer, "keep-alive"), None, "{answer}");
    assert_eq!(raw_header(&answer, "x-end-to-end"), Some("kept"));
    let via = format!("1.1 {}", proxy.pseudonym());
    assert_eq!(raw_header(&answer, "via"), Some(via.as_str()));
    assert_eq!(raw_body(&answer), "ok");
}

#[tokio::test]
async fn forward_streams_a_chunked_post_body_intact() {
    let origin = TestOrigin::start(|req| async move {
        if req.uri().path() == "/robots.txt" {
            return Reply::empty(404);
        }
        let method = req.method().clone();
        let check = match PatternCheck::read(req.into_body()).await {
            Ok(check) => check,
            Err(e) => return Reply::text(500, format!("body broke: {e}")),
        };
        Reply::text(
            200,
            format!("{method} {} {:?}", check.len(), check.first_bad()),
        )
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    const MIB: u64 = 1 << 20;
    let body = Generated::new(MIB, 10_000).boxed();
    let answer = send(proxy.addr(), request("POST", &origin.url("/upload"), body)).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), format!("POST {MIB} None"));
    let seen = origin.last_request().expect("the origin saw the upload");
    assert_eq!(seen.header("content-length"), None);
    assert_eq!(seen.header("transfer-encoding"), Some("chunked"));
}

#[tokio::test]
async fn forward_streams_a_large_download_intact() {
    const SIZE: u64 = 64 << 20;
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::Http(http::Response::new(Generated::new(SIZE, 64 * 1024).boxed())),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let response = conn
        .send(get_request(&origin.url("/big")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let check = tokio::time::timeout(
        Duration::from_secs(30),
        PatternCheck::read(response.into_body()),
    )
    .await
    .expect("64 MiB in time")
    .expect("the body streams without error");
    assert_eq!(check.len(), SIZE);
    assert_eq!(check.first_bad(), None);
}

// --- 2. robots.txt outcomes (DESIGN.md §3) ----------------------------------------------

#[tokio::test]
async fn robots_2xx_allows_by_the_rules_and_disallow_names_the_rule() {
    let origin = site(ROBOTS).await;
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
    let origin = site_with(|| Reply::empty(404)).await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/private")).await, 200);
    assert_eq!(origin.hits("/private"), 1);
}

#[tokio::test]
async fn robots_403_with_on_4xx_disallow_is_robots_forbidden() {
    let origin = site_with(|| Reply::empty(403)).await;
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
    let origin = site_with(|| Reply::empty(403)).await;
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
        let origin = site_with(move || Reply::empty(status)).await;
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
    let origin = site_with(|| Reply::empty(429).header("retry-after", "120")).await;
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

#[tokio::test]
async fn robots_redirect_is_followed_and_applies_to_the_original_origin() {
    let rules = site(ROBOTS).await;
    let target = format!("http://localhost:{}/robots.txt", rules.port());
    let origin = site_with(move || Reply::redirect(301, &target)).await;
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
    let origin = site("User-agent: *\nDisallow: /\n").await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/page")).await, 403);
    let answer = get(proxy.addr(), &origin.url("/robots.txt")).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "User-agent: *\nDisallow: /\n");
}

/// Plain HTTP to the proxy with an `https://` absolute-form target: the proxy fetches
/// robots.txt and the page over TLS, verifying the origin's certificate.
#[tokio::test]
async fn https_target_with_an_untrusted_certificate_is_502_naming_the_problem() {
    let ca = TestCa::new();
    let origin = TestOrigin::start_tls(ca.server_config(&["127.0.0.1"]), |_| async {
        Reply::text(200, "secret")
    })
    .await;
    let url = origin.url("/page");
    assert!(url.starts_with("https://"));

    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-certificate"));
    let text = answer.text();
    assert!(text.contains("certificate"), "{text}");
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert_eq!(origin.requests().len(), 0, "nothing is fetched");

    // Trusted through extra_roots, the same origin is served.
    let proxy = TestProxy::start(config_with(|c| c.tls.extra_roots = vec![ca.pem_file()])).await;
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "secret");
}

// --- 3. Single flight ------------------------------------------------------------------

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
    let origin = site(ROBOTS).await;
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

// --- 4. Pacing -------------------------------------------------------------------------

/// Arrival times at `origin` of the requests whose path starts with `prefix`, with their
/// paths, in arrival order.
fn arrivals(origin: &TestOrigin, prefix: &str) -> Vec<(String, Instant)> {
    origin
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(prefix))
        .map(|r| (r.path, r.at))
        .collect()
}

fn assert_spaced(arrived: &[(String, Instant)], at_least: Duration) {
    for pair in arrived.windows(2) {
        let gap = pair[1].1 - pair[0].1;
        assert!(
            gap >= at_least,
            "{} came {gap:?} after {}, expected at least {at_least:?}",
            pair[1].0,
            pair[0].0
        );
    }
}

/// Sends `GET path{i}` for `i` in `0..n`, each 20 ms after the previous one (so they
/// queue in that order), and returns the statuses in `i` order.
async fn staggered(proxy: &TestProxy, origin: &TestOrigin, path: &str, n: usize) -> Vec<u16> {
    let mut clients = JoinSet::new();
    for i in 0..n {
        let url = origin.url(&format!("{path}{i}"));
        let addr = proxy.addr();
        clients.spawn(async move {
            tokio::time::sleep(Duration::from_millis(20 * i as u64)).await;
            (i, get(addr, &url).await.status.as_u16())
        });
    }
    let mut statuses = vec![0; n];
    while let Some(done) = clients.join_next().await {
        let (i, status) = done.expect("client task");
        statuses[i] = status;
    }
    statuses
}

#[tokio::test]
async fn pacing_default_delay_spaces_starts_in_fifo_order() {
    let origin = site("User-agent: *\nAllow: /\n").await;
    let proxy = TestProxy::start(config_with(|c| {
        c.rate_limit.default_delay = Duration::from_millis(200);
        c.rate_limit.max_per_host = 1.try_into().expect("non-zero");
    }))
    .await;
    // Fetch robots.txt first, so the burst queues at the pacer, not at the fetch.
    assert_status(&get(proxy.addr(), &origin.url("/warm")).await, 200);
    let statuses = staggered(&proxy, &origin, "/q", 5).await;
    assert_eq!(statuses, vec![200; 5]);
    let arrived = arrivals(&origin, "/q");
    let order: Vec<&str> = arrived.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(order, ["/q0", "/q1", "/q2", "/q3", "/q4"], "FIFO");
    let with_warm = arrivals(&origin, "/");
    // Timers never fire early; allow a little for the way from pacer to origin.
    assert_spaced(&with_warm, Duration::from_millis(180));
}

#[tokio::test]
async fn pacing_crawl_delay_raises_the_spacing() {
    let origin = site("User-agent: *\nCrawl-delay: 0.5\n").await;
    let proxy = TestProxy::start(config_with(|c| {
        c.rate_limit.max_per_host = 1.try_into().expect("non-zero");
    }))
    .await;
    assert_status(&get(proxy.addr(), &origin.url("/warm")).await, 200);
    let statuses = staggered(&proxy, &origin, "/q", 2).await;
    assert_eq!(statuses, vec![200; 2]);
    let arrived = arrivals(&origin, "/");
    assert_eq!(arrived.len(), 4, "robots.txt, warm-up and two requests");
    // robots.txt itself is fetched unpaced (default_delay 0); the rest 0.5 s apart.
    assert_spaced(&arrived, Duration::from_millis(480));
}

#[tokio::test]
async fn pacing_max_wait_answers_429_with_retry_after() {
    let origin = site("User-agent: *\nAllow: /\n").await;
    let proxy = TestProxy::start(config_with(|c| {
        c.rate_limit.default_delay = Duration::from_millis(200);
        c.rate_limit.max_per_host = 1.try_into().expect("non-zero");
        c.rate_limit.max_wait = Duration::from_millis(300);
    }))
    .await;
    assert_status(&get(proxy.addr(), &origin.url("/warm")).await, 200);
    let mut clients = JoinSet::new();
    for i in 0..5 {
        let url = origin.url(&format!("/burst{i}"));
        let addr = proxy.addr();
        clients.spawn(async move { get(addr, &url).await });
    }
    let (mut ok, mut paced) = (0, 0);
    while let Some(done) = clients.join_next().await {
        let answer = done.expect("client task");
        match answer.status.as_u16() {
            200 => ok += 1,
            429 => {
                paced += 1;
                assert_eq!(answer.reason(), Some("pacing"));
                let retry: u64 = answer
                    .header("retry-after")
                    .and_then(|v| v.parse().ok())
                    .expect("a Retry-After in seconds");
                assert!(retry >= 1);
            }
            _ => panic!("unexpected answer {answer:?}"),
        }
    }
    assert!(ok >= 1, "the head of the queue is served");
    assert!(paced >= 1, "a queue longer than max_wait is refused");
    assert_eq!(
        arrivals(&origin, "/burst").len(),
        ok,
        "a 429 never reaches the origin"
    );
}

#[tokio::test]
async fn pacing_is_per_host_so_hosts_do_not_wait_on_each_other() {
    let origin = site("User-agent: *\nAllow: /\n").await;
    let proxy = TestProxy::start(config_with(|c| {
        c.rate_limit.default_delay = Duration::from_millis(300);
        c.rate_limit.max_per_host = 1.try_into().expect("non-zero");
    }))
    .await;
    // Host 127.0.0.1: robots.txt and four requests, 300 ms apart: about 1.2 s.
    let busy = {
        let origin_url: Vec<String> = (0..4).map(|i| origin.url(&format!("/a{i}"))).collect();
        let addr = proxy.addr();
        tokio::spawn(async move {
            let mut clients = JoinSet::new();
            for url in origin_url {
                clients.spawn(async move { get(addr, &url).await.status.as_u16() });
            }
            clients.join_all().await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Host localhost, same port: its own robots.txt and one request, 300 ms apart.
    let started = Instant::now();
    let url = format!("http://localhost:{}/b", origin.port());
    assert_status(&get(proxy.addr(), &url).await, 200);
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(800),
        "localhost waited {took:?}"
    );
    assert!(
        arrivals(&origin, "/a").len() < 4,
        "localhost was served while 127.0.0.1 was still busy"
    );
    let statuses = busy.await.expect("busy host task");
    assert_eq!(statuses, vec![200; 4]);
}

// --- 5. Identity -----------------------------------------------------------------------

#[tokio::test]
async fn identity_require_without_user_agent_is_403_naming_what_to_add() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let mut request = get_request(&origin.url("/page"));
    request.headers_mut().remove("user-agent");
    let answer = send(proxy.addr(), request).await;
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("identity"));
    let text = answer.text();
    assert!(text.contains("add a User-Agent header"), "{text}");
    assert!(
        origin.requests().is_empty(),
        "not even robots.txt is fetched"
    );
}

#[tokio::test]
async fn identity_fill_adds_the_default_user_agent() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.identity.user_agent = IdentityMode::Fill)).await;
    let mut request = get_request(&origin.url("/page"));
    request.headers_mut().remove("user-agent");
    assert_status(&send(proxy.addr(), request).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.header("user-agent"), Some(TEST_USER_AGENT));

    // A client's own User-Agent is kept.
    let mut request = get_request(&origin.url("/page"));
    request
        .headers_mut()
        .insert("user-agent", "OwnBot/2.0".parse().expect("value"));
    assert_status(&send(proxy.addr(), request).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.header("user-agent"), Some("OwnBot/2.0"));
}

#[tokio::test]
async fn identity_pass_forwards_without_user_agent() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.identity.user_agent = IdentityMode::Pass)).await;
    let mut request = get_request(&origin.url("/page"));
    request.headers_mut().remove("user-agent");
    assert_status(&send(proxy.addr(), request).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.path, "/page");
    assert_eq!(seen.header("user-agent"), None);
}

#[tokio::test]
async fn identity_from_require_refuses_an_invalid_or_missing_from() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.identity.from = IdentityMode::Require)).await;

    let mut request = get_request(&origin.url("/page"));
    request
        .headers_mut()
        .insert("from", "not a mailbox".parse().expect("value"));
    let answer = send(proxy.addr(), request).await;
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("identity"));
    assert!(answer.text().contains("not a mailbox"), "{}", answer.text());
    assert!(answer.text().contains("From: "), "{}", answer.text());

    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_status(&answer, 403);
    assert!(
        answer.text().contains("add a From header"),
        "{}",
        answer.text()
    );
    assert!(origin.requests().is_empty());

    let mut request = get_request(&origin.url("/page"));
    request
        .headers_mut()
        .insert("from", "bot-admin@example.com".parse().expect("value"));
    assert_status(&send(proxy.addr(), request).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.header("from"), Some("bot-admin@example.com"));
}

#[tokio::test]
async fn identity_from_fill_adds_the_default_from() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/page")).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.header("from"), Some(TEST_FROM));
}

#[tokio::test]
async fn identity_robot_name_selects_its_robots_group() {
    let origin =
        site("User-agent: examplebot\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n").await;
    let proxy = TestProxy::start(config_with(|c| {
        c.identity.robot_name = Some("examplebot".to_owned())
    }))
    .await;
    // The User-Agent's own token would get the `*` group (everything disallowed).
    assert_status(&get(proxy.addr(), &origin.url("/public")).await, 200);
    let answer = get(proxy.addr(), &origin.url("/private")).await;
    assert_status(&answer, 403);
    assert_eq!(answer.header("x-robots-guard-agent"), Some("examplebot"));
    assert_eq!(answer.header("x-robots-guard-line"), Some("2"));
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(
        seen.header("user-agent"),
        Some(TEST_USER_AGENT),
        "the User-Agent itself is not rewritten"
    );
}

#[tokio::test]
async fn identity_cannot_be_dropped_by_naming_it_in_connection() {
    // `Connection: user-agent, from` must not let a request pass the identity check and
    // then reach the origin anonymously.
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: x\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         From: bot-admin@example.com\r\nConnection: user-agent, from, close\r\n\r\n",
        origin.url("/page")
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.header("user-agent"), Some(TEST_USER_AGENT));
    assert_eq!(seen.header("from"), Some("bot-admin@example.com"));
}

// --- 6. Malformed and odd requests, upstream failures ----------------------------------

#[tokio::test]
async fn bad_origin_form_request_is_400_saying_to_use_a_proxy() {
    let proxy = TestProxy::start(config()).await;
    let answer = raw(
        proxy.addr(),
        b"GET /x HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t/1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(raw_status(&answer), 400, "{answer}");
    assert!(
        answer.contains("x-robots-guard-reason: bad-request"),
        "{answer}"
    );
    let body = raw_body(&answer);
    assert!(body.contains("forward proxy"), "{body}");
    assert!(
        body.contains(&format!("HTTP_PROXY=http://{}", proxy.addr())),
        "{body}"
    );
}

#[tokio::test]
async fn bad_garbage_request_line_is_400_and_other_clients_are_still_served() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let mut garbage = JoinSet::new();
    for bytes in [
        &b"THIS IS NOT HTTP\r\n\r\n"[..],
        b"GET http://a b c HTTP/1.1\r\n\r\n",
        b"\x00\x01\x02\xff\r\n\r\n",
        b"GET http://127.0.0.1/ HTTP/1.1\r\nBad Header\r\n\r\n",
    ] {
        let addr = proxy.addr();
        garbage.spawn(async move { (bytes, raw(addr, bytes).await) });
    }
    let ok = get(proxy.addr(), &origin.url("/page")).await;
    assert_status(&ok, 200);
    while let Some(done) = garbage.join_next().await {
        let (bytes, answer) = done.expect("client task");
        let status = raw_status(&answer);
        assert!(
            (400..500).contains(&status),
            "{:?} got {answer:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert_status(&get(proxy.addr(), &origin.url("/again")).await, 200);
}

#[tokio::test]
async fn bad_unsupported_scheme_is_400() {
    let proxy = TestProxy::start(config()).await;
    let answer = raw(
        proxy.addr(),
        b"GET ftp://127.0.0.1/file HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: t/1\r\n\
          Connection: close\r\n\r\n",
    )
    .await;
    assert_eq!(raw_status(&answer), 400, "{answer}");
    assert!(
        raw_body(&answer).contains("unsupported scheme `ftp`"),
        "{answer}"
    );
}

#[tokio::test]
async fn loop_request_to_the_proxy_itself_is_508() {
    let proxy = TestProxy::start(config()).await;
    let port = proxy.addr().port();
    for url in [
        format!("http://127.0.0.1:{port}/x"),
        format!("http://localhost:{port}/x"),
    ] {
        let answer = get(proxy.addr(), &url).await;
        assert_status(&answer, 508);
        assert_eq!(answer.reason(), Some("loop"));
    }
}

/// A TCP relay on `127.0.0.1:0` that pipes every connection to `to`.
async fn relay(to: std::net::SocketAddr) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
    let port = listener.local_addr().expect("relay address").port();
    let task = tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (port, task)
}

#[tokio::test]
async fn loop_through_a_relay_back_to_the_proxy_is_508() {
    // The target is a relay to the proxy: the address differs, so only `Via` shows that
    // the forwarded request came back.
    let proxy = TestProxy::start(config()).await;
    let (port, relay) = relay(proxy.addr()).await;
    let answer = get(proxy.addr(), &format!("http://127.0.0.1:{port}/x")).await;
    assert_status(&answer, 508);
    assert_eq!(answer.reason(), Some("loop"));
    relay.abort();
}

#[tokio::test]
async fn long_url_is_414() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.proxy.max_url_length = nonzero(100))).await;
    let answer = get(proxy.addr(), &origin.url(&format!("/{}", "a".repeat(100)))).await;
    assert_status(&answer, 414);
    assert_eq!(answer.reason(), Some("uri-too-long"));
    assert!(origin.requests().is_empty());
    assert_status(&get(proxy.addr(), &origin.url("/short")).await, 200);
}

#[tokio::test]
async fn odd_absolute_url_without_a_path_is_checked_and_forwarded_as_root() {
    let origin = site("User-agent: *\nDisallow: /$\n").await;
    let proxy = TestProxy::start(config()).await;
    let request = format!(
        "GET http://{} HTTP/1.1\r\nHost: {0}\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         Connection: close\r\n\r\n",
        origin.addr()
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-rule"),
        Some("disallow: /$")
    );

    let origin = site(ROBOTS).await;
    let request = format!(
        "GET http://{} HTTP/1.1\r\nHost: {0}\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         Connection: close\r\n\r\n",
        origin.addr()
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    assert_eq!(origin.last_request().expect("forwarded").path, "/");
}

#[tokio::test]
async fn upstream_refusing_connections_is_502() {
    // `/robots.txt` skips the robots.txt lookup, so the refusal is the forward's own.
    let port = closed_port().await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &format!("http://127.0.0.1:{port}/robots.txt")).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
    assert!(
        answer.text().contains("cannot connect"),
        "{}",
        answer.text()
    );

    // An origin that served robots.txt and a page, then went away (closing every
    // connection, so the proxy has none pooled).
    let origin = TestOrigin::start(|req| async move {
        let reply = match req.uri().path() {
            "/robots.txt" => Reply::text(200, ROBOTS),
            _ => Reply::text(200, "ok"),
        };
        reply.header("connection", "close")
    })
    .await;
    assert_status(&get(proxy.addr(), &origin.url("/first")).await, 200);
    let url = origin.url("/second");
    drop(origin);
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
}

#[tokio::test]
async fn upstream_closing_without_an_answer_is_502() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::Reset,
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
}

#[tokio::test]
async fn upstream_answering_garbage_is_502() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::Raw(Bytes::from_static(b"NOT HTTP AT ALL\r\n\r\n")),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
    assert!(
        answer.text().contains("not valid HTTP"),
        "{}",
        answer.text()
    );
}

#[tokio::test]
async fn upstream_slower_than_upstream_timeout_is_504() {
    let origin = TestOrigin::start(|req| async move {
        if req.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        Reply::text(200, "ok")
    })
    .await;
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.upstream_timeout = Duration::from_millis(300)
    }))
    .await;
    let started = Instant::now();
    let answer = get(proxy.addr(), &origin.url("/slow")).await;
    assert_status(&answer, 504);
    assert_eq!(answer.reason(), Some("upstream-timeout"));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_status(&get(proxy.addr(), &origin.url("/fast")).await, 200);
}

#[tokio::test]
async fn upstream_reset_mid_body_breaks_the_client_body_and_the_proxy_goes_on() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            "/broken" => Reply::truncated(b"the first part", 100_000),
            _ => Reply::text(200, "fine"),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let response = conn
        .send(get_request(&origin.url("/broken")))
        .await
        .expect("the head arrives");
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
        .await
        .expect("the body ends in time");
    assert!(body.is_err(), "a truncated body must not look complete");

    let answer = get(proxy.addr(), &origin.url("/next")).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "fine");
}

// --- 7. Shutdown and idle connections --------------------------------------------------

#[tokio::test]
async fn shutdown_stops_accepting_and_drains_the_in_flight_request() {
    let origin = TestOrigin::start(|req| async move {
        if req.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_millis(600)).await;
            return Reply::text(200, "finished");
        }
        Reply::empty(404)
    })
    .await;
    let mut proxy = TestProxy::start(config()).await;
    let addr = proxy.addr();
    let url = origin.url("/slow");
    let slow = tokio::spawn(async move { get(addr, &url).await });
    while origin.hits("/slow") == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let run = proxy.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!run.is_finished(), "run waits for the in-flight request");
    let answer = slow.await.expect("client task");
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "finished");
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns once drained")
        .expect("run did not panic");
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed after run returns"
    );
}

#[tokio::test]
async fn shutdown_closes_idle_keep_alive_connections_without_waiting() {
    let origin = site(ROBOTS).await;
    let mut proxy = TestProxy::start(config()).await;
    let mut idle = ProxyConn::open(proxy.addr()).await;
    assert_status(&idle.fetch(get_request(&origin.url("/a"))).await, 200);
    let _silent = TcpStream::connect(proxy.addr())
        .await
        .expect("connect without sending anything");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), proxy.shutdown())
        .await
        .expect("idle connections do not hold up the drain")
        .expect("run did not panic");
    assert!(started.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(idle.is_closed(), "the idle connection was closed");
}

#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_idle_timeout() {
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.idle_timeout = Duration::from_millis(300);
    }))
    .await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    assert_status(&conn.fetch(get_request(&origin.url("/a"))).await, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(conn.is_closed(), "idle for 1 s with idle_timeout = 300ms");
}

#[tokio::test]
async fn idle_timeout_is_not_the_head_timeout() {
    // A keep-alive connection idle longer than header_read_timeout (but not
    // idle_timeout) stays open; a slow request head is still cut.
    let origin = site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.idle_timeout = Duration::from_secs(5);
        c.proxy.header_read_timeout = Duration::from_millis(300);
    }))
    .await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    assert_status(&conn.fetch(get_request(&origin.url("/a"))).await, 200);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(!conn.is_closed(), "idle 900 ms < idle_timeout 5 s");
    assert_status(&conn.fetch(get_request(&origin.url("/b"))).await, 200);

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut slow = tokio::net::TcpStream::connect(proxy.addr())
        .await
        .expect("connect");
    slow.write_all(b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("partial head");
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the slow head was cut by header_read_timeout"
    );
}
