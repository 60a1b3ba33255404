//! Bodies are streamed, never buffered: a 256 MiB download through the proxy grows the
//! process's resident memory by far less than the body.
//!
//! The proxy runs in this process, so its memory is this process's `VmRSS`. That figure
//! counts every thread, and cargo runs a binary's tests in parallel, so this test has a
//! binary to itself: nothing else allocates while it measures.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use support::body::{Generated, PatternCheck};
use support::origin::{Reply, TestOrigin};
use support::proxy::{config, get, get_request, ProxyConn, TestProxy};

const MIB: u64 = 1 << 20;

/// `VmRSS` of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kib * 1024
}

/// Samples [`rss`] every 5 ms on its own thread until dropped; keeps the highest value.
struct PeakRss {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakRss {
    fn start() -> PeakRss {
        let peak = Arc::new(AtomicU64::new(rss()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        PeakRss {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("sampler thread");
        }
        self.peak.load(Ordering::Relaxed).max(rss())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_256_mib_download_streams_through_in_bounded_memory() {
    const SIZE: u64 = 256 * MIB;
    const LIMIT: u64 = 32 * MIB;
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            "/warm" => Reply::Http(http::Response::new(Generated::new(MIB, 64 * 1024).boxed())),
            _ => Reply::Http(http::Response::new(Generated::new(SIZE, 64 * 1024).boxed())),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    // Warm up: robots.txt cached, upstream connection pooled, buffers allocated once.
    let warm = get(proxy.addr(), &origin.url("/warm")).await;
    assert_eq!(warm.body.len() as u64, MIB);
    drop(warm);

    let before = rss();
    let sampler = PeakRss::start();
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let response = conn
        .send(get_request(&origin.url("/big")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let check = tokio::time::timeout(
        Duration::from_secs(60),
        PatternCheck::read(response.into_body()),
    )
    .await
    .expect("256 MiB in time")
    .expect("the body streams without error");
    let peak = sampler.finish();

    assert_eq!(check.len(), SIZE);
    assert_eq!(check.first_bad(), None);
    let growth = peak.saturating_sub(before);
    assert!(
        growth < LIMIT,
        "resident memory grew by {} MiB (from {} MiB) for a {} MiB body",
        growth / MIB,
        before / MIB,
        SIZE / MIB
    );
    eprintln!(
        "RSS {} MiB before, peak growth {:.1} MiB for {} MiB streamed",
        before / MIB,
        growth as f64 / MIB as f64,
        SIZE / MIB
    );
}
