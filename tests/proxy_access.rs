//! Access control (issue: run it in production): proxy authentication with
//! the tunnel's user carried inside, destination rules checked after DNS,
//! client networks, crawler-trap paths. Real loopback servers and clients.

mod support;

use base64::Engine;
use http::StatusCode;

use support::origin::{Reply, TestOrigin};
use support::proxy::{config_with, get, get_request, raw, raw_header, raw_status, send, TestProxy};

/// Sends `request` and reads only the answer's head (a CONNECT that
/// succeeds keeps the connection open).
async fn head(proxy: std::net::SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(proxy)
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => answer.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

async fn allow_all_origin() -> TestOrigin {
    TestOrigin::start(|req: http::Request<hyper::body::Incoming>| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nDisallow: /private\n"),
            path => Reply::text(200, format!("page {path}")),
        }
    })
    .await
}

#[tokio::test]
async fn proxy_auth_407_then_200_and_credentials_not_forwarded() {
    let origin = allow_all_origin().await;
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
    let answer = head(
        proxy.addr(),
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    )
    .await;
    assert_eq!(raw_status(&answer), 407, "{answer}");
    assert!(raw_header(&answer, "proxy-authenticate").is_some());
    let request = format!(
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: {}\r\n\r\n",
        basic("bob", "pw")
    );
    // Intercept mode answers 200 before contacting anyone; the requests
    // inside the tunnel then run as bob without credentials of their own
    // (tests/proxy_https.rs covers the decrypted side).
    let answer = head(proxy.addr(), &request).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn denied_destinations_are_refused_after_resolution_without_contact() {
    let origin = allow_all_origin().await;
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
    let connect = format!(
        "CONNECT localhost:{0} HTTP/1.1\r\nHost: localhost:{0}\r\n\r\n",
        origin.port()
    );
    let answer = head(proxy.addr(), &connect).await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(origin.connections(), 0, "the origin was never contacted");
}

#[tokio::test]
async fn cloud_metadata_is_denied_by_default() {
    let proxy = TestProxy::start(support::proxy::config()).await;
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
    let origin = allow_all_origin().await;
    let proxy = TestProxy::start(support::proxy::config()).await;
    let answer = get(proxy.addr(), &origin.url("/a/b/a/b/a/b/a/b/page")).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.reason(), Some("crawler-trap"));
    assert!(answer.text().contains("`/a/b`"), "{}", answer.text());
    let answer = get(proxy.addr(), &origin.url("/a/b/a/b/a/b/page")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(origin.hits("/a/b/a/b/a/b/a/b/page"), 0);
}
