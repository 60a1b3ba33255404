//! How long the proxy keeps a client connection it is not serving: a keep-alive
//! connection idle for `idle_timeout` is closed, and that is not the
//! `header_read_timeout`, which instead cuts a request head that arrives too slowly.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, a scripted hyper
//! origin on loopback, hyper's HTTP/1.1 client on a keep-alive connection, and a raw
//! socket that sends half a head. Closing idle connections at shutdown is tested in
//! `lifecycle.rs`.

mod support;

use std::time::Duration;

use support::origin::TestOrigin;
use support::proxy::{assert_status, config_with, get_request, ProxyConn, TestProxy};
use support::ROBOTS;

#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_idle_timeout() {
    let origin = TestOrigin::site(ROBOTS).await;
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
    let origin = TestOrigin::site(ROBOTS).await;
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
