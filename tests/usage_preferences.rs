//! AI-use preferences through the proxy: a robot that declares purposes
//! (`identity.purposes`, a profile's `purposes`, or `X-Robots-Guard-Purpose`
//! on a request) is refused `403 usage-preference` where the site's
//! `Content-Signal` / `Content-Usage` lines refuse one, the answer naming the
//! statement and its line; an answer whose `Content-Usage` header refuses one
//! is passed on marked `X-Robots-Guard-Usage`, and counted.
//!
//! How: the real proxy on `127.0.0.1:0`, scripted loopback origins, real
//! clients (hyper's HTTP/1.1 client; a CONNECT over a raw socket).

mod support;

use http::HeaderValue;
use robots_guard::config::TlsMode;
use robots_guard::robots::{Purpose, Purposes};
use support::origin::{Reply, TestCa, TestOrigin};
use support::proxy::{
    assert_status, config_with, connect_head, get_as, get_request, raw, raw_body, send,
    with_users_and_profiles, Answer, TestProxy,
};

fn purposes(list: &[Purpose]) -> Purposes {
    list.iter().copied().collect()
}

/// A proxy whose robot declares `declared`.
async fn proxy_declaring(declared: &[Purpose]) -> TestProxy {
    let declared = purposes(declared);
    TestProxy::start_with_admin(config_with(|c| {
        c.identity.purposes = declared;
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
    }))
    .await
}

async fn get(proxy: &TestProxy, url: &str) -> Answer {
    send(proxy.addr(), get_request(url)).await
}

#[track_caller]
fn refused_by(answer: &Answer, purpose: &str, statement: &str, line: &str) {
    assert_status(answer, 403);
    assert_eq!(answer.reason(), Some("usage-preference"));
    assert_eq!(answer.header("x-robots-guard-purpose"), Some(purpose));
    assert_eq!(answer.header("x-robots-guard-rule"), Some(statement));
    assert_eq!(answer.header("x-robots-guard-line"), Some(line));
    let text = answer.text();
    assert!(text.contains(&format!("used for {purpose}")), "{text}");
    assert!(
        text.contains(&format!("`{statement}` on line {line}")),
        "{text}"
    );
}

#[tokio::test]
async fn content_signal_refuses_a_declared_purpose_and_allows_the_rest() {
    let origin = TestOrigin::site(
        "User-agent: *\nContent-Signal: search=yes, ai-input=yes, ai-train=no\nAllow: /\n",
    )
    .await;
    let trainer = proxy_declaring(&[Purpose::Search, Purpose::AiTrain]).await;
    refused_by(
        &get(&trainer, &origin.url("/article")).await,
        "ai-train",
        "content-signal: ai-train=no",
        "2",
    );
    assert_eq!(origin.hits("/article"), 0);
    let searcher = proxy_declaring(&[Purpose::Search]).await;
    assert_status(&get(&searcher, &origin.url("/article")).await, 200);
    // No purpose declared: no preference applies.
    let plain = proxy_declaring(&[]).await;
    assert_status(&get(&plain, &origin.url("/article")).await, 200);
    // robots.txt itself is always fetchable.
    assert_status(&get(&trainer, &origin.url("/robots.txt")).await, 200);
}

#[tokio::test]
async fn content_usage_paths_match_longest_first_and_the_strictest_statement_wins() {
    let origin = TestOrigin::site(
        "User-agent: *\n\
         Content-Usage: train-ai=n\n\
         Content-Usage: /open/ train-ai=y\n\
         Content-Usage: /open/closed/ train-ai=n\n\
         Content-Signal: ai-input=yes\n\
         Content-Usage: /quoted/ ai-use=n\n",
    )
    .await;
    let proxy = proxy_declaring(&[Purpose::AiTrain]).await;
    refused_by(
        &get(&proxy, &origin.url("/x")).await,
        "ai-train",
        "content-usage: train-ai=n",
        "2",
    );
    assert_status(&get(&proxy, &origin.url("/open/x")).await, 200);
    refused_by(
        &get(&proxy, &origin.url("/open/closed/x")).await,
        "ai-train",
        "content-usage: /open/closed/ train-ai=n",
        "4",
    );
    // Content-Signal says yes to ai-input; Content-Usage says no under
    // /quoted/: the most restrictive statement wins.
    let input = proxy_declaring(&[Purpose::AiInput]).await;
    assert_status(&get(&input, &origin.url("/open/x")).await, 200);
    refused_by(
        &get(&input, &origin.url("/quoted/x")).await,
        "ai-input",
        "content-usage: /quoted/ ai-use=n",
        "6",
    );
}

#[tokio::test]
async fn older_spellings_and_a_group_for_the_robot_apply() {
    let origin = TestOrigin::site(
        "User-agent: robots-guard-test\nContent-Usage: ai=n\nAllow: /\n\n\
         User-agent: *\nAllow: /\n",
    )
    .await;
    let proxy = proxy_declaring(&[Purpose::AiTrain]).await;
    refused_by(
        &get(&proxy, &origin.url("/page")).await,
        "ai-train",
        "content-usage: ai=n",
        "2",
    );
}

#[tokio::test]
async fn a_purpose_added_by_the_header_counts_and_is_never_forwarded() {
    let origin = TestOrigin::site("User-agent: *\nContent-Signal: ai-train=no\n").await;
    let proxy = proxy_declaring(&[Purpose::Search]).await;
    assert_status(&get(&proxy, &origin.url("/a")).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert!(seen.header("x-robots-guard-purpose").is_none());

    let mut request = get_request(&origin.url("/b"));
    request.headers_mut().insert(
        "x-robots-guard-purpose",
        HeaderValue::from_static("ai-train"),
    );
    refused_by(
        &send(proxy.addr(), request).await,
        "ai-train",
        "content-signal: ai-train=no",
        "2",
    );
    // Adding what is configured changes nothing; the header is removed.
    let mut request = get_request(&origin.url("/c"));
    request.headers_mut().insert(
        "x-robots-guard-purpose",
        HeaderValue::from_static(" search "),
    );
    assert_status(&send(proxy.addr(), request).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.path, "/c");
    assert!(seen.header("x-robots-guard-purpose").is_none());

    // A purpose the proxy does not know is a malformed request.
    let mut request = get_request(&origin.url("/d"));
    request.headers_mut().insert(
        "x-robots-guard-purpose",
        HeaderValue::from_static("ai-everything"),
    );
    let answer = send(proxy.addr(), request).await;
    assert_status(&answer, 400);
    assert!(answer.text().contains("ai-everything"), "{}", answer.text());
    assert_eq!(origin.hits("/d"), 0);
}

#[tokio::test]
async fn a_preference_cannot_be_dodged_by_a_spelling() {
    let origin = TestOrigin::site("User-agent: *\nContent-Usage: /private/ train-ai=n\n").await;
    let proxy = proxy_declaring(&[Purpose::AiTrain]).await;
    for path in ["//private/x", "/%70rivate/x", "/public/..//private/x"] {
        let answer = get(&proxy, &origin.url(path)).await;
        assert_status(&answer, 403);
        assert_eq!(answer.reason(), Some("usage-preference"), "{path}");
    }
    assert!(origin.requests().iter().all(|r| r.path == "/robots.txt"));
}

#[tokio::test]
async fn each_profile_declares_its_own_purposes() {
    let origin = TestOrigin::site("User-agent: *\nContent-Signal: ai-train=no\n").await;
    let proxy = TestProxy::start(with_users_and_profiles(
        &["alice", "bob"],
        "[[profile]]\nname = \"training\"\nusers = [\"alice\"]\npurposes = [\"ai-train\"]\n",
        |_| {},
    ))
    .await;
    let as_user = |user: &str| get_as(user, &origin.url("/page"));
    let alice = send(proxy.addr(), as_user("alice")).await;
    assert_status(&alice, 403);
    assert_eq!(alice.header("x-robots-guard-profile"), Some("training"));
    assert_status(&send(proxy.addr(), as_user("bob")).await, 200);
}

#[tokio::test]
async fn an_answer_refusing_a_purpose_by_header_is_passed_on_marked_and_counted() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            "/marked" => Reply::text(200, "page").header("content-usage", "search=y, train-ai=n"),
            _ => Reply::text(200, "plain"),
        }
    })
    .await;
    let proxy = proxy_declaring(&[Purpose::Search, Purpose::AiTrain]).await;
    let answer = get(&proxy, &origin.url("/marked")).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "page");
    assert_eq!(answer.header("x-robots-guard-usage"), Some("train-ai=n"));
    assert_eq!(
        answer.header("content-usage"),
        Some("search=y, train-ai=n"),
        "the origin's header is passed on"
    );
    let plain = get(&proxy, &origin.url("/other")).await;
    assert_eq!(plain.header("x-robots-guard-usage"), None);
    // A search-only robot is not refused by that header.
    let searcher = proxy_declaring(&[Purpose::Search]).await;
    let answer = get(&searcher, &origin.url("/marked")).await;
    assert_eq!(answer.header("x-robots-guard-usage"), None);

    let request = b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n";
    let metrics = raw_body(&raw(proxy.admin_addr(), request).await).to_owned();
    assert!(
        metrics.contains("robots_guard_usage_refused_answers_total{profile=\"default\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_blind_tunnel_is_refused_by_a_site_wide_content_signal() {
    let ca = TestCa::new();
    let tls = ca.server_config(&["127.0.0.1"]);
    let origin = TestOrigin::start_tls(
        tls,
        |req: http::Request<hyper::body::Incoming>| async move {
            match req.uri().path() {
                "/robots.txt" => Reply::text(200, "User-agent: *\nContent-Signal: ai-train=no\n"),
                _ => Reply::text(200, "secure"),
            }
        },
    )
    .await;
    let (port, roots) = (origin.port(), ca.pem_file());
    let proxy = TestProxy::start(config_with(|c| {
        c.tls.mode = TlsMode::Tunnel;
        c.tls.connect_ports = vec![port];
        c.tls.extra_roots = vec![roots];
        c.identity.purposes = purposes(&[Purpose::AiTrain]);
    }))
    .await;
    let target = format!("127.0.0.1:{port}");
    let user_agent = format!("User-Agent: {}\r\n", support::TEST_USER_AGENT);
    let (_, head) = connect_head(proxy.addr(), &target, &user_agent).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("usage-preference"), "{head}");
    // A robot declaring only search: the tunnel opens.
    let roots = ca.pem_file();
    let searcher = TestProxy::start(config_with(|c| {
        c.tls.mode = TlsMode::Tunnel;
        c.tls.connect_ports = vec![port];
        c.tls.extra_roots = vec![roots];
        c.identity.purposes = purposes(&[Purpose::Search]);
    }))
    .await;
    let (_, head) = connect_head(searcher.addr(), &target, &user_agent).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}
