//! Access control, for running the proxy as a shared service: proxy authentication with
//! the tunnel's user carried inside, destination rules checked after DNS,
//! client networks, crawler-trap paths. Real loopback servers and clients.

mod support;

use base64::Engine;
use http::StatusCode;

use support::origin::TestOrigin;
use support::proxy::{
    config, config_with, connect_head, get, get_request, raw, raw_header, raw_status, send,
    TestProxy,
};
use support::ROBOTS;

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

#[tokio::test]
async fn proxy_auth_407_then_200_and_credentials_not_forwarded() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| {
        c.auth.users.insert("alice".into(), "s3cret".into());
    }))
    .await;

    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_eq!(answer.status, StatusCode::PROXY_AUTHENTICATION_REQUIRED);
    assert_eq!(answer.reason(), Some("proxy-auth"));
    assert_eq!(
        answer.header("proxy-authenticate"),
        Some("Basic realm=\"robots-guard\", charset=\"UTF-8\"")
    );

    let mut wrong = get_request(&origin.url("/page"));
    wrong.headers_mut().insert(
        "proxy-authorization",
        basic("alice", "nope").parse().expect("header"),
    );
    assert_eq!(
        send(proxy.addr(), wrong).await.status,
        StatusCode::PROXY_AUTHENTICATION_REQUIRED
    );

    let mut right = get_request(&origin.url("/page"));
    right.headers_mut().insert(
        "proxy-authorization",
        basic("alice", "s3cret").parse().expect("header"),
    );
    let answer = send(proxy.addr(), right).await;
    assert_eq!(answer.status, StatusCode::OK);
    let seen = origin.last_request().expect("origin saw the request");
    assert_eq!(
        seen.header("proxy-authorization"),
        None,
        "credentials must not be forwarded"
    );
    // Nothing reached the origin before the credentials were right.
    assert_eq!(origin.hits("/page"), 1);
}

#[tokio::test]
async fn connect_needs_credentials_and_its_user_covers_the_tunnel() {
    let proxy = TestProxy::start(config_with(|c| {
        c.auth.users.insert("bob".into(), "pw".into());
    }))
    .await;
    let (_, answer) = connect_head(proxy.addr(), "example.com:443", "").await;
    assert_eq!(raw_status(&answer), 407, "{answer}");
    assert!(raw_header(&answer, "proxy-authenticate").is_some());
    let credentials = format!("Proxy-Authorization: {}\r\n", basic("bob", "pw"));
    // Intercept mode answers 200 before contacting anyone; the requests
    // inside the tunnel then run as bob without credentials of their own
    // (tests/proxy_https.rs covers the decrypted side).
    let (_, answer) = connect_head(proxy.addr(), "example.com:443", &credentials).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn denied_destinations_are_refused_after_resolution_without_contact() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.deny_destinations = vec![
            "127.0.0.0/8".parse().expect("net"),
            "::1/128".parse().expect("net"),
        ];
    }))
    .await;
    // An IP literal in a denied range.
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.reason(), Some("destination-denied"));
    // A name that resolves only into the denied range.
    let answer = get(
        proxy.addr(),
        &format!("http://localhost:{}/page", origin.port()),
    )
    .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.reason(), Some("destination-denied"));
    // CONNECT too.
    let target = format!("localhost:{}", origin.port());
    let (_, answer) = connect_head(proxy.addr(), &target, "").await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(origin.connections(), 0, "the origin was never contacted");
}

#[tokio::test]
async fn cloud_metadata_is_denied_by_default() {
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), "http://169.254.169.254/latest/meta-data/").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.reason(), Some("destination-denied"));
}

#[tokio::test]
async fn clients_outside_allow_clients_are_refused_at_accept() {
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.allow_clients = vec!["10.0.0.0/8".parse().expect("net")];
    }))
    .await;
    let answer = raw(
        proxy.addr(),
        b"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-reason"),
        Some("client-not-allowed")
    );
}

#[tokio::test]
async fn crawler_trap_paths_are_refused() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/a/b/a/b/a/b/a/b/page")).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.reason(), Some("crawler-trap"));
    assert!(answer.text().contains("`/a/b`"), "{}", answer.text());
    let answer = get(proxy.addr(), &origin.url("/a/b/a/b/a/b/page")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(origin.hits("/a/b/a/b/a/b/a/b/page"), 0);
}
