//! Soak driver for `bench/soak.sh`: N requests over M origins at C concurrent keep-alive
//! connections through a running robots-guard, with the origins served in-process.
//!
//! ```text
//! cargo run --release --example soak -- --proxy 127.0.0.1:3128 [--pid PROXY_PID]
//!     [--requests 100000] [--origins 1000] [--concurrency 200] [--origin-port 18080]
//! ```
//!
//! Origins: one listener per origin on `127.1.X.Y:PORT` (all of `127.0.0.0/8` is
//! loopback on Linux), so the proxy sees M distinct hosts and nothing leaves the
//! machine. Each serves `/robots.txt` = `User-agent: *` / `Disallow: /private/` and
//! `ok <path>` for every other path, and counts the robots.txt fetches it gets.
//!
//! Requests: request `i` goes to origin `i % M`; every fifth is `/private/i` (expected
//! `403` from the proxy), the rest `/page/i` (expected `200` from the origin, body
//! checked). C tasks each hold one keep-alive connection to the proxy and take request
//! numbers from a shared counter until N are taken, so the run ends by itself. A request
//! that fails or takes over 30 s is counted as an error and its connection replaced.
//!
//! Checks (exit code 1 if any fails): every request got exactly one complete answer
//! (answered == N, no errors), every status is the expected one, every origin served
//! robots.txt exactly once. With `--pid`, the proxy's `VmRSS` is sampled every 100 ms
//! and its peak (and `VmHWM`) reported.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

struct Args {
    proxy: SocketAddr,
    pid: Option<u32>,
    requests: usize,
    origins: usize,
    concurrency: usize,
    origin_port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        proxy: SocketAddr::from(([127, 0, 0, 1], 3128)),
        pid: None,
        requests: 100_000,
        origins: 1_000,
        concurrency: 200,
        origin_port: 18080,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--proxy" => args.proxy = value.parse().map_err(|e| bad(&e))?,
            "--pid" => args.pid = Some(value.parse().map_err(|e| bad(&e))?),
            "--requests" => args.requests = value.parse().map_err(|e| bad(&e))?,
            "--origins" => args.origins = value.parse().map_err(|e| bad(&e))?,
            "--concurrency" => args.concurrency = value.parse().map_err(|e| bad(&e))?,
            "--origin-port" => args.origin_port = value.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.origins == 0 || args.origins > 250 * 250 || args.concurrency == 0 {
        return Err("--origins must be 1..=62500 and --concurrency at least 1".into());
    }
    Ok(args)
}

/// The loopback address of origin `i`: 127.1.0.1, 127.1.0.2, ..., 127.1.0.250, 127.1.1.1...
fn origin_ip(i: usize) -> Ipv4Addr {
    // Both parts are < 250 by the check in `parse_args`.
    Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// Counters of one origin.
#[derive(Default)]
struct OriginStats {
    robots: AtomicUsize,
    pages: AtomicUsize,
}

async fn run_origin(listener: TcpListener, stats: Arc<OriginStats>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let stats = stats.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let stats = stats.clone();
                async move {
                    let body = if req.uri().path() == "/robots.txt" {
                        stats.robots.fetch_add(1, Ordering::Relaxed);
                        Bytes::from_static(ROBOTS.as_bytes())
                    } else {
                        stats.pages.fetch_add(1, Ordering::Relaxed);
                        Bytes::from(format!("ok {}", req.uri().path()))
                    };
                    Ok::<_, Infallible>(Response::new(Full::new(body)))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Tallies of the driver.
#[derive(Default)]
struct Tally {
    answered: AtomicUsize,
    ok_200: AtomicUsize,
    forbidden_403: AtomicUsize,
    other_status: AtomicUsize,
    wrong: AtomicUsize,
    errors: AtomicUsize,
    reconnects: AtomicUsize,
    latency_us_total: AtomicU64,
    latency_us_max: AtomicU64,
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn open(proxy: SocketAddr) -> std::io::Result<Sender> {
    let stream = TcpStream::connect(proxy).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// One request, start to end of body: `(status, body)`.
async fn exchange(
    sender: &mut Sender,
    url: &str,
    host: &str,
) -> Result<(StatusCode, Bytes), String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let request = Request::get(url)
        .header("host", host)
        .header("user-agent", "soakbot/1.0 (+https://example.invalid/soak)")
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body))
}

async fn client(args: Arc<Args>, next: Arc<AtomicUsize>, tally: Arc<Tally>) {
    let mut sender: Option<Sender> = None;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= args.requests {
            return;
        }
        let host = format!("{}:{}", origin_ip(i % args.origins), args.origin_port);
        let disallowed = i % 5 == 0;
        let path = if disallowed {
            format!("/private/{i}")
        } else {
            format!("/page/{i}")
        };
        let url = format!("http://{host}{path}");
        let started = Instant::now();
        let result = tokio::time::timeout(REQUEST_TIMEOUT, async {
            if sender.as_ref().is_none_or(|s| s.is_closed()) {
                if sender.is_some() {
                    tally.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                sender = Some(open(args.proxy).await.map_err(|e| e.to_string())?);
            }
            // Just set above when missing.
            let s = sender.as_mut().ok_or("no connection")?;
            exchange(s, &url, &host).await
        })
        .await
        .unwrap_or_else(|_| Err("timed out".to_string()));
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        match result {
            Ok((status, body)) => {
                tally.answered.fetch_add(1, Ordering::Relaxed);
                tally.latency_us_total.fetch_add(micros, Ordering::Relaxed);
                tally.latency_us_max.fetch_max(micros, Ordering::Relaxed);
                let expected = match status.as_u16() {
                    200 => {
                        tally.ok_200.fetch_add(1, Ordering::Relaxed);
                        !disallowed && body == format!("ok {path}").as_bytes()
                    }
                    403 => {
                        tally.forbidden_403.fetch_add(1, Ordering::Relaxed);
                        disallowed
                    }
                    _ => {
                        tally.other_status.fetch_add(1, Ordering::Relaxed);
                        false
                    }
                };
                if !expected {
                    let n = tally.wrong.fetch_add(1, Ordering::Relaxed);
                    if n < 5 {
                        eprintln!("soak: unexpected answer to {url}: {status} {body:?}");
                    }
                }
            }
            Err(error) => {
                let n = tally.errors.fetch_add(1, Ordering::Relaxed);
                if n < 5 {
                    eprintln!("soak: {url}: {error}");
                }
                sender = None;
            }
        }
    }
}

/// `VmRSS` and `VmHWM` of `pid`, in KiB.
fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(args) => Arc::new(args),
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    };
    let mut origins = Vec::with_capacity(args.origins);
    for i in 0..args.origins {
        let addr = SocketAddr::from((origin_ip(i), args.origin_port));
        let listener = match TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("soak: cannot bind origin {addr}: {e}");
                std::process::exit(2);
            }
        };
        let stats = Arc::new(OriginStats::default());
        tokio::spawn(run_origin(listener, stats.clone()));
        origins.push(stats);
    }

    let idle_rss = args.pid.and_then(memory_kib).map(|(rss, _)| rss);
    let sampling = Arc::new(AtomicBool::new(true));
    let peak_rss = Arc::new(AtomicU64::new(0));
    let sampler = args.pid.map(|pid| {
        let (sampling, peak) = (sampling.clone(), peak_rss.clone());
        tokio::spawn(async move {
            let mut samples = Vec::new();
            while sampling.load(Ordering::Relaxed) {
                if let Some((rss, _)) = memory_kib(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                    samples.push(rss);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            samples
        })
    });

    eprintln!(
        "soak: {} requests over {} origins ({}..{}:{}) at {} connections via {}",
        args.requests,
        args.origins,
        origin_ip(0),
        origin_ip(args.origins - 1),
        args.origin_port,
        args.concurrency,
        args.proxy
    );
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let progress = {
        let (tally, sampling, peak) = (tally.clone(), sampling.clone(), peak_rss.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_secs(5)).await;
                eprintln!(
                    "soak: {:>6.1}s answered {:>7} errors {} peak rss {} KiB",
                    started.elapsed().as_secs_f64(),
                    tally.answered.load(Ordering::Relaxed),
                    tally.errors.load(Ordering::Relaxed),
                    peak.load(Ordering::Relaxed)
                );
            }
        })
    };
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        clients.spawn(client(args.clone(), next.clone(), tally.clone()));
    }
    while clients.join_next().await.is_some() {}
    let elapsed = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    progress.abort();
    let samples = match sampler {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let final_memory = args.pid.and_then(memory_kib);

    let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    let answered = load(&tally.answered);
    let errors = load(&tally.errors);
    let wrong = load(&tally.wrong);
    let expected_403 = (0..args.requests).filter(|i| i % 5 == 0).count();
    let robots: Vec<usize> = origins.iter().map(|o| load(&o.robots)).collect();
    let robots_total: usize = robots.iter().sum();
    let robots_exactly_once = robots.iter().filter(|&&n| n == 1).count();
    let pages_total: usize = origins.iter().map(|o| load(&o.pages)).sum();
    let mean_ms =
        tally.latency_us_total.load(Ordering::Relaxed) as f64 / answered.max(1) as f64 / 1e3;
    let max_ms = tally.latency_us_max.load(Ordering::Relaxed) as f64 / 1e3;
    let median_rss = {
        let mut s = samples.clone();
        s.sort_unstable();
        s.get(s.len() / 2).copied()
    };

    println!("requests           {}", args.requests);
    println!("origins            {}", args.origins);
    println!("connections        {}", args.concurrency);
    println!("duration_s         {:.2}", elapsed.as_secs_f64());
    println!(
        "req_per_s          {:.0}",
        args.requests as f64 / elapsed.as_secs_f64()
    );
    println!("answered           {answered}");
    println!("errors             {errors}");
    println!("status_200         {}", load(&tally.ok_200));
    println!(
        "status_403         {} (expected {expected_403})",
        load(&tally.forbidden_403)
    );
    println!("status_other       {}", load(&tally.other_status));
    println!("unexpected         {wrong}");
    println!("reconnects         {}", load(&tally.reconnects));
    println!("latency_mean_ms    {mean_ms:.2}");
    println!("latency_max_ms     {max_ms:.1}");
    println!(
        "robots_fetches     {robots_total} ({robots_exactly_once} of {} origins exactly once)",
        args.origins
    );
    println!("origin_page_hits   {pages_total}");
    if let Some(pid) = args.pid {
        println!("proxy_pid          {pid}");
        println!("rss_before_kib     {}", idle_rss.unwrap_or(0));
        println!(
            "rss_peak_kib       {} ({} samples, median {})",
            peak_rss.load(Ordering::Relaxed),
            samples.len(),
            median_rss.unwrap_or(0)
        );
        if let Some((rss, hwm)) = final_memory {
            println!("rss_end_kib        {rss}");
            println!("vmhwm_kib          {hwm}");
        }
    }

    let mut failures = Vec::new();
    if answered != args.requests || errors != 0 {
        failures.push(format!(
            "{answered} of {} answered, {errors} errors",
            args.requests
        ));
    }
    if wrong != 0 {
        failures.push(format!("{wrong} unexpected answers"));
    }
    if load(&tally.forbidden_403) != expected_403 {
        failures.push("403 count differs from the disallowed requests sent".to_string());
    }
    if pages_total != args.requests - expected_403 {
        failures.push(format!(
            "origins saw {pages_total} page requests, expected {}",
            args.requests - expected_403
        ));
    }
    if robots_exactly_once != args.origins {
        failures.push(format!(
            "robots.txt fetched {robots_total} times; {robots_exactly_once} of {} origins exactly once",
            args.origins
        ));
    }
    if failures.is_empty() {
        println!("result             PASS");
    } else {
        for f in &failures {
            println!("result             FAIL: {f}");
        }
        std::process::exit(1);
    }
}
