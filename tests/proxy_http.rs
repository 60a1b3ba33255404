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

use support::origin::{Reply, TestOrigin};
use support::proxy::{assert_status, config, config_with, get, get_request, ProxyConn, TestProxy};
use support::ROBOTS;
use tokio::net::TcpStream;
use tokio::time::Instant;

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
    let origin = TestOrigin::site(ROBOTS).await;
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
