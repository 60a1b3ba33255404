//! Report-only rollout: with `enforce = false` (globally or for a profile)
//! every politeness refusal (robots.txt, usage preferences, identity,
//! pacing, site back-off) becomes `X-Robots-Guard-Would-Refuse` on a
//! forwarded answer, logged and counted; every security refusal (client
//! ACL, proxy auth, destinations, CONNECT ports, loops, malformed requests,
//! limits) still refuses.
//!
//! How: the real proxy on `127.0.0.1:0`, scripted loopback origins, and real
//! clients: hyper's HTTP/1.1 client, and raw sockets for what a client
//! library would not send.

mod support;

use std::time::Duration;

use robots_guard::config::{Config, IdentityMode, On4xx};
use support::origin::{Reply, TestOrigin};
use support::proxy::{
    anonymous_get_request, assert_status, config_with, connect_head, get_as, get_request, raw,
    raw_body, raw_header, raw_status, send, with_users_and_profiles, Answer, TestProxy,
};
use support::TEST_FROM;

/// A report-only proxy: the top level's `proxy.enforce = false`, then `f`.
fn report_only(f: impl FnOnce(&mut Config)) -> Config {
    config_with(|c| {
        c.proxy.enforce = false;
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
        f(c);
    })
}

/// The answer was forwarded (the origin's `ok ...` body) and marked with
/// `reasons`.
#[track_caller]
fn forwarded_but(answer: &Answer, reasons: &str) {
    assert_status(answer, 200);
    assert!(answer.text().starts_with("ok "), "{}", answer.text());
    assert_eq!(
        answer.header("x-robots-guard-would-refuse"),
        Some(reasons),
        "{:?}",
        answer.headers
    );
    assert_eq!(answer.header("x-robots-guard-profile"), Some("default"));
    assert_eq!(answer.reason(), None, "no refusal was made");
}

/// The admin listener's `/metrics`.
async fn metrics(proxy: &TestProxy) -> String {
    let request = b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n";
    raw_body(&raw(proxy.admin_addr(), request).await).to_owned()
}

#[tokio::test]
async fn report_only_forwards_and_marks_every_refusal_it_covers() {
    let site =
        TestOrigin::site("User-agent: *\nDisallow: /private\nContent-Signal: ai-train=no\n").await;
    let forbidding = TestOrigin::site_with(|| Reply::text(401, "who are you")).await;
    let failing = TestOrigin::site_with(|| Reply::text(500, "broken")).await;
    let proxy = TestProxy::start_with_admin(report_only(|c| {
        c.robots.on_4xx = On4xx::Disallow;
        c.identity.from = IdentityMode::Fill;
    }))
    .await;

    // robots.txt disallows the path.
    let answer = send(proxy.addr(), get_request(&site.url("/private/x"))).await;
    forwarded_but(&answer, "robots-disallow");
    assert_eq!(site.hits("/private/x"), 1);

    // No User-Agent under `require`: forwarded, `From` still filled in.
    let answer = send(proxy.addr(), anonymous_get_request(&site.url("/page"))).await;
    forwarded_but(&answer, "identity");
    let seen = site.last_request().expect("forwarded");
    assert_eq!(seen.header("from"), Some(TEST_FROM));
    assert_eq!(seen.header("user-agent"), None);

    // Identity and robots.txt both: every reason is named, in phase order.
    let answer = send(proxy.addr(), anonymous_get_request(&site.url("/private/y"))).await;
    forwarded_but(&answer, "identity, robots-disallow");

    // The site's usage preferences refuse the declared purpose.
    let mut request = get_request(&site.url("/page"));
    request.headers_mut().insert(
        "x-robots-guard-purpose",
        http::HeaderValue::from_static("ai-train"),
    );
    let answer = send(proxy.addr(), request).await;
    forwarded_but(&answer, "usage-preference");
    assert!(
        site.last_request()
            .expect("forwarded")
            .header("x-robots-guard-purpose")
            .is_none(),
        "the purpose header is never forwarded"
    );

    // robots.txt answered 401 under on_4xx = "disallow".
    let answer = send(proxy.addr(), get_request(&forbidding.url("/page"))).await;
    forwarded_but(&answer, "robots-forbidden");

    // robots.txt unreachable (500).
    let answer = send(proxy.addr(), get_request(&failing.url("/page"))).await;
    forwarded_but(&answer, "robots-unreachable");

    // Logged and counted by reason and profile.
    let text = metrics(&proxy).await;
    for reason in [
        "robots-disallow",
        "identity",
        "usage-preference",
        "robots-forbidden",
        "robots-unreachable",
    ] {
        let series =
            format!("robots_guard_would_refuse_total{{reason=\"{reason}\",profile=\"default\"}}");
        assert!(text.contains(&series), "{series} in {text}");
    }
    assert!(
        text.contains(
            "robots_guard_would_refuse_total{reason=\"robots-disallow\",profile=\"default\"} 2"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn report_only_lets_pacing_and_site_backoff_through() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            "/busy" => Reply::text(429, "slow down").header("retry-after", "120"),
            path => Reply::text(200, format!("ok {path}")),
        }
    })
    .await;
    let proxy = TestProxy::start_with_admin(report_only(|c| {
        c.rate_limit.default_delay = Duration::from_secs(30);
        c.rate_limit.max_wait = Duration::from_millis(100);
    }))
    .await;
    // The first request starts at once; the second would wait 30 s, more
    // than max_wait: pacing would refuse it.
    assert_status(
        &send(proxy.addr(), get_request(&origin.url("/one"))).await,
        200,
    );
    let started = tokio::time::Instant::now();
    let answer = send(proxy.addr(), get_request(&origin.url("/two"))).await;
    forwarded_but(&answer, "pacing");
    assert!(started.elapsed() < Duration::from_secs(5));

    // The site asks for a pause; its own 429 reaches the client.
    let busy = send(proxy.addr(), get_request(&origin.url("/busy"))).await;
    assert_status(&busy, 429);
    let answer = send(proxy.addr(), get_request(&origin.url("/three"))).await;
    forwarded_but(&answer, "site-backoff");
    assert_eq!(origin.hits("/three"), 1);
}

#[tokio::test]
async fn a_report_only_profile_beside_an_enforcing_one() {
    let origin = TestOrigin::site("User-agent: *\nDisallow: /private\n").await;
    let proxy = TestProxy::start(with_users_and_profiles(
        &["alice", "bob"],
        "[[profile]]\nname = \"trial\"\nusers = [\"alice\"]\nenforce = false\n",
        |_| {},
    ))
    .await;
    let as_user = |user: &str| get_as(user, &origin.url("/private/x"));
    let alice = send(proxy.addr(), as_user("alice")).await;
    assert_status(&alice, 200);
    assert_eq!(
        alice.header("x-robots-guard-would-refuse"),
        Some("robots-disallow")
    );
    assert_eq!(alice.header("x-robots-guard-profile"), Some("trial"));
    let bob = send(proxy.addr(), as_user("bob")).await;
    assert_status(&bob, 403);
    assert_eq!(bob.reason(), Some("robots-disallow"));
}

#[tokio::test]
async fn security_refusals_hold_in_report_only() {
    let origin = TestOrigin::site("User-agent: *\nDisallow: /private\n").await;
    let host = format!("127.0.0.1:{}", origin.port());

    // Client ACL: the connection is answered 403 and closed.
    let proxy = TestProxy::start(report_only(|c| {
        c.proxy.allow_clients = vec!["10.0.0.0/8".parse().expect("net")];
    }))
    .await;
    let request = format!("GET http://{host}/page HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-reason"),
        Some("client-not-allowed")
    );

    // Proxy authentication.
    let proxy = TestProxy::start(report_only(|c| {
        c.auth.users.insert("alice".into(), "pw".into());
    }))
    .await;
    let answer = send(proxy.addr(), get_request(&origin.url("/page"))).await;
    assert_status(&answer, 407);

    // Destinations, CONNECT ports, loops, malformed requests and limits.
    let proxy = TestProxy::start(report_only(|c| {
        c.proxy.deny_destinations = vec!["127.0.0.2/32".parse().expect("net")];
        c.proxy.max_url_length = std::num::NonZeroUsize::new(100).expect("non-zero");
    }))
    .await;
    let denied = format!("http://127.0.0.2:{}/page", origin.port());
    let answer = send(proxy.addr(), get_request(&denied)).await;
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("destination-denied"));

    let (_, head) = connect_head(proxy.addr(), &format!("127.0.0.1:{}", origin.port()), "").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("port-refused"), "{head}");

    let looping = format!("http://{}/page", proxy.addr());
    let answer = send(proxy.addr(), get_request(&looping)).await;
    assert_status(&answer, 508);

    let answer = raw(proxy.addr(), b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(raw_status(&answer), 400, "{answer}");

    let long = origin.url(&format!("/{}", "a".repeat(200)));
    let answer = send(proxy.addr(), get_request(&long)).await;
    assert_status(&answer, 414);

    let trap = origin.url(&"/a".repeat(25));
    let answer = send(proxy.addr(), get_request(&trap)).await;
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("crawler-trap"));

    assert_eq!(answer.header("x-robots-guard-would-refuse"), None);
    assert!(origin.requests().is_empty(), "nothing reached the origin");
}
