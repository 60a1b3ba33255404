//! One process, many origins: a crawl across thousands of distinct origins leaves the
//! proxy's state within its caps. The robots.txt cache holds at most `cache_capacity`
//! origins, the pacer at most `max_hosts` hosts, the pools at most `max_idle_upstream`
//! connections, the status page at most `HOST_CAPACITY` hosts, and the process's open
//! file descriptors stay bounded by the connections in use plus the pool cap, however
//! many origins were visited.
//!
//! Every origin is a distinct `127.x.y.z` served by one listener on `0.0.0.0`
//! ([`LoopbackOrigins`]). The proxy runs in this process, so `/proc/self/fd` counts its
//! sockets (and the origin's and the clients' ends of them), which is why this test has
//! a binary of its own.

mod support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use robots_guard::metrics::HOST_CAPACITY;
use support::proxy::{config_with, get_request, ProxyConn, TestProxy};
use support::wide::LoopbackOrigins;

/// Distinct origins visited.
const ORIGINS: usize = 3000;
/// Client connections to the proxy, each sending its share of the requests in turn.
const CLIENTS: usize = 16;
const CACHE_CAPACITY: usize = 500;
const MAX_HOSTS: usize = 200;
const MAX_IDLE_UPSTREAM: usize = 32;

/// File descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .count()
}

/// Samples [`open_fds`] every 2 ms on its own thread until stopped; keeps the highest.
struct PeakFds {
    peak: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl PeakFds {
    fn start() -> PeakFds {
        let peak = Arc::new(AtomicUsize::new(open_fds()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(open_fds(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        PeakFds { peak, stop, thread }
    }

    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler thread");
        self.peak.load(Ordering::Relaxed).max(open_fds())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_thousand_origins_stay_within_every_cap() {
    let origins = Arc::new(LoopbackOrigins::start().await);
    let proxy = TestProxy::start(config_with(|c| {
        c.robots.cache_capacity = NonZeroUsize::new(CACHE_CAPACITY).unwrap();
        c.rate_limit.max_hosts = NonZeroUsize::new(MAX_HOSTS).unwrap();
        c.proxy.max_idle_upstream = NonZeroUsize::new(MAX_IDLE_UPSTREAM).unwrap();
    }))
    .await;
    let before = open_fds();
    let sampler = PeakFds::start();

    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (origins, next, addr) = (origins.clone(), next.clone(), proxy.addr());
        clients.push(tokio::spawn(async move {
            let mut conn = ProxyConn::open(addr).await;
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= ORIGINS {
                    return;
                }
                let answer = conn.fetch(get_request(&origins.url(n, "/page"))).await;
                assert_eq!(
                    answer.status,
                    200,
                    "{}: {}",
                    origins.url(n, "/page"),
                    answer.text()
                );
            }
        }));
    }
    for client in clients {
        client.await.expect("a client");
    }
    let peak = sampler.finish();

    assert_eq!(origins.pages_served(), ORIGINS);
    assert_eq!(
        origins.robots_served(),
        ORIGINS,
        "each origin's robots.txt once"
    );

    let services = proxy.live().services();
    let cache = services.robots.stats();
    assert_eq!(cache.entries, CACHE_CAPACITY);
    assert_eq!(cache.evictions, (ORIGINS - CACHE_CAPACITY) as u64);
    assert!(services.pacer.tracked_hosts() <= MAX_HOSTS);
    let held = services.upstream.held();
    assert!(
        held <= MAX_IDLE_UPSTREAM,
        "{held} upstream connections held"
    );
    let hosts = services.metrics.hosts(usize::MAX, None).len();
    assert!(hosts <= HOST_CAPACITY, "{hosts} hosts on the status page");

    // The metrics say the same.
    let text = services.metrics.encode().expect("metrics");
    let gauge = |name: &str| -> usize {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics"))
    };
    assert_eq!(gauge("robots_guard_robots_cache_entries"), CACHE_CAPACITY);
    assert!(gauge("robots_guard_paced_hosts") <= MAX_HOSTS);
    assert!(gauge("robots_guard_upstream_idle_connections") <= MAX_IDLE_UPSTREAM);

    // Each socket shows up twice here (the proxy's end and the origin's or the
    // client's): the clients' connections, one upstream connection per request in
    // flight, the idle ones and a few being closed. Without the pool cap it would grow
    // by two per origin.
    let bound = before + 2 * (CLIENTS + CLIENTS + MAX_IDLE_UPSTREAM) + 64;
    assert!(
        peak <= bound,
        "{peak} descriptors at the peak ({before} before, bound {bound})"
    );
    eprintln!(
        "{ORIGINS} origins: {} cache entries, {} paced hosts, {held} idle upstream, \
         descriptors {before} before, {peak} at the peak, origin connections open {}",
        cache.entries,
        services.pacer.tracked_hosts(),
        origins.open_connections()
    );
}
