//! Pacing through the proxy: requests to one host start `default_delay` apart, in the
//! order they arrived; a robots.txt `Crawl-delay` raises the spacing; a request that
//! would wait longer than `max_wait` is `429 pacing` with a `Retry-After` and never
//! reaches the origin; and hosts are paced apart, so one busy host holds up no other.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, scripted hyper origins
//! on loopback that record when each request arrived, and concurrent hyper HTTP/1.1
//! clients sending absolute-form requests through the proxy. Every proxy is its own
//! instance, so pacing never leaks between tests although every origin is on host
//! `127.0.0.1`. How the robots.txt fetch itself takes a pacing slot is tested in
//! `robots_fetch.rs`.

mod support;

use std::time::Duration;

use support::origin::TestOrigin;
use support::proxy::{assert_status, config_with, get, TestProxy};
use tokio::task::JoinSet;
use tokio::time::Instant;

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
    let origin = TestOrigin::site("User-agent: *\nAllow: /\n").await;
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
    let origin = TestOrigin::site("User-agent: *\nCrawl-delay: 0.5\n").await;
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
    let origin = TestOrigin::site("User-agent: *\nAllow: /\n").await;
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
    let origin = TestOrigin::site("User-agent: *\nAllow: /\n").await;
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
