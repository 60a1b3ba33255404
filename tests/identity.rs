//! Identity through the proxy: with `user_agent = "require"` a request without a
//! `User-Agent` is `403 identity` naming what to add, and nothing is fetched for it;
//! `fill` adds the configured one (a client's own is kept) and `pass` forwards without;
//! `From` is checked (`require`) or filled the same way; `robot_name` picks the robots.txt
//! group without rewriting the `User-Agent`; and naming the identity fields in
//! `Connection` cannot strip them after the check.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, scripted hyper origins
//! on loopback that record the headers they receive, and real clients (hyper's HTTP/1.1
//! client and raw sockets) sending absolute-form requests through the proxy. Identity
//! inside intercepted HTTPS is tested in `proxy_https.rs`.

mod support;

use robots_guard::config::IdentityMode;
use support::origin::TestOrigin;
use support::proxy::{
    anonymous_get_request, assert_status, config, config_with, get, get_request, raw, raw_status,
    send, TestProxy,
};
use support::{ROBOTS, TEST_FROM, TEST_USER_AGENT};

#[tokio::test]
async fn identity_require_without_user_agent_is_403_naming_what_to_add() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let request = anonymous_get_request(&origin.url("/page"));
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
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.identity.user_agent = IdentityMode::Fill)).await;
    let request = anonymous_get_request(&origin.url("/page"));
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
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.identity.user_agent = IdentityMode::Pass)).await;
    let request = anonymous_get_request(&origin.url("/page"));
    assert_status(&send(proxy.addr(), request).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.path, "/page");
    assert_eq!(seen.header("user-agent"), None);
}

#[tokio::test]
async fn identity_from_require_refuses_an_invalid_or_missing_from() {
    let origin = TestOrigin::site(ROBOTS).await;
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
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    assert_status(&get(proxy.addr(), &origin.url("/page")).await, 200);
    let seen = origin.last_request().expect("forwarded");
    assert_eq!(seen.header("from"), Some(TEST_FROM));
}

#[tokio::test]
async fn identity_robot_name_selects_its_robots_group() {
    let origin = TestOrigin::site(
        "User-agent: examplebot\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n",
    )
    .await;
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
    let origin = TestOrigin::site(ROBOTS).await;
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
