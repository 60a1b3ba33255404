//! First contact with many origins, for `bench/origins.sh`: N requests through a running
//! proxy, each to an origin never seen before (`http://127.X.Y.Z:PORT/`), at C concurrent
//! client connections, with the origins served in this process.
//!
//! ```text
//! cargo run --release --example origins -- --proxy 127.0.0.1:3128 [--pid PROXY_PID]
//!     [--origins 100000] [--concurrency 64] [--series FILE]
//! ```
//!
//! Origins: one listener on `0.0.0.0:PORT` (an ephemeral port) answers every
//! `127.X.Y.Z`, which on Linux all reach loopback, so each request names a distinct host
//! (`127.1.0.1`, `127.1.0.2`, ... in order) and nothing leaves the machine.
//! Connections from elsewhere are dropped. Every host serves a robots.txt allowing
//! everything and `ok` for any other path.
//!
//! Requests: C tasks each hold a keep-alive connection to the proxy (opened again when
//! the proxy closes it, as tinyproxy does after each request; a GET that fails on a kept
//! connection is sent again once on a new one) and take host numbers from a shared
//! counter until N are taken. Any answer but `200 ok` is counted as an error.
//!
//! With `--pid`, the proxy's `VmRSS` is sampled every 250 ms, and with `--series` each
//! sample is written as `seconds,origins_done,rss_kib`, so the resident memory can be
//! seen against the number of origins visited. Prints the rate of new origins per
//! second, the peak `VmRSS` seen and the proxy's `VmHWM` at the end.

use std::convert::Infallible;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

struct Args {
    proxy: SocketAddr,
    pid: Option<u32>,
    origins: usize,
    concurrency: usize,
    series: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        proxy: SocketAddr::from(([127, 0, 0, 1], 3128)),
        pid: None,
        origins: 100_000,
        concurrency: 64,
        series: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--proxy" => args.proxy = value.parse().map_err(|e| bad(&e))?,
            "--pid" => args.pid = Some(value.parse().map_err(|e| bad(&e))?),
            "--origins" => args.origins = value.parse().map_err(|e| bad(&e))?,
            "--concurrency" => args.concurrency = value.parse().map_err(|e| bad(&e))?,
            "--series" => args.series = Some(value),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.origins == 0 || args.origins > 250 * 256 * 126 || args.concurrency == 0 {
        return Err("--origins must be 1..=8064000 and --concurrency at least 1".into());
    }
    Ok(args)
}

/// Host `n`: 127.1.0.1 ... 127.1.0.250, 127.1.1.1, ... (no .0 or .255).
fn host(n: usize, port: u16) -> String {
    let rest = n / 250;
    let ip = Ipv4Addr::new(
        127,
        // Below 127 by the check in `parse_args`.
        (1 + rest / 256) as u8,
        (rest % 256) as u8,
        (n % 250 + 1) as u8,
    );
    format!("{ip}:{port}")
}

/// Serves every loopback host on `listener`.
async fn run_origin(listener: TcpListener) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        if !peer.ip().is_loopback() {
            continue;
        }
        tokio::spawn(async move {
            let service = service_fn(|req: Request<Incoming>| async move {
                let body: &'static [u8] = if req.uri().path() == "/robots.txt" {
                    b"User-agent: *\nAllow: /\n"
                } else {
                    b"ok\n"
                };
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(body))))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
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

/// One `GET http://host/`, to the end of its body.
async fn get(sender: &mut Sender, host: &str) -> Result<(), String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let request = Request::get(format!("http://{host}/"))
        .header("host", host)
        .header(
            "user-agent",
            "originsbot/1.0 (+https://example.invalid/origins)",
        )
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
    if status != 200 || &body[..] != b"ok\n" {
        return Err(format!("{status} {body:?}"));
    }
    Ok(())
}

#[derive(Default)]
struct Tally {
    done: AtomicUsize,
    errors: AtomicUsize,
    connections: AtomicUsize,
}

async fn client(args: Arc<Args>, port: u16, next: Arc<AtomicUsize>, tally: Arc<Tally>) {
    let mut sender: Option<Sender> = None;
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= args.origins {
            return;
        }
        let host = host(n, port);
        let result = tokio::time::timeout(REQUEST_TIMEOUT, async {
            // A kept connection the proxy closed as the request went out (tinyproxy
            // closes after each answer) is opened again and the GET sent once more, as
            // HTTP clients do; a new connection gets no second try.
            for fresh in [false, true] {
                if fresh || sender.as_ref().is_none_or(|s| s.is_closed()) {
                    tally.connections.fetch_add(1, Ordering::Relaxed);
                    sender = Some(open(args.proxy).await.map_err(|e| e.to_string())?);
                    let s = sender.as_mut().ok_or("no connection")?;
                    return get(s, &host).await;
                }
                let s = sender.as_mut().ok_or("no connection")?;
                if get(s, &host).await.is_ok() {
                    return Ok(());
                }
            }
            Err("unreachable: the second try is on a fresh connection".to_string())
        })
        .await
        .unwrap_or_else(|_| Err("timed out".to_string()));
        match result {
            Ok(()) => {
                tally.done.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                let count = tally.errors.fetch_add(1, Ordering::Relaxed);
                if count < 5 {
                    eprintln!("origins: http://{host}/: {error}");
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

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = match parse_args() {
        Ok(args) => Arc::new(args),
        Err(e) => {
            eprintln!("origins: {e}");
            std::process::exit(2);
        }
    };
    let listener = match TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("origins: cannot bind 0.0.0.0:0: {e}");
            std::process::exit(2);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    tokio::spawn(run_origin(listener));

    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (tally, sampling, pid) = (tally.clone(), sampling.clone(), args.pid);
        tokio::spawn(async move {
            let mut samples: Vec<(f64, usize, u64)> = Vec::new();
            let mut last_report = 0.0;
            while sampling.load(Ordering::Relaxed) {
                let at = started.elapsed().as_secs_f64();
                let done = tally.done.load(Ordering::Relaxed);
                let rss = pid.and_then(memory_kib).map_or(0, |(rss, _)| rss);
                samples.push((at, done, rss));
                if at - last_report >= 10.0 {
                    last_report = at;
                    eprintln!("origins: {at:>6.1}s {done:>7} origins, rss {rss} KiB");
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            samples
        })
    };

    eprintln!(
        "origins: {} new origins ({}..{}) at {} connections via {}",
        args.origins,
        host(0, port),
        host(args.origins - 1, port),
        args.concurrency,
        args.proxy
    );
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        clients.spawn(client(args.clone(), port, next.clone(), tally.clone()));
    }
    while clients.join_next().await.is_some() {}
    let elapsed = started.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    let samples = sampler.await.unwrap_or_default();
    let end = args.pid.and_then(memory_kib);

    if let Some(path) = &args.series {
        let written = std::fs::File::create(path).and_then(|mut file| {
            writeln!(file, "seconds,origins_done,rss_kib")?;
            for (at, done, rss) in &samples {
                writeln!(file, "{at:.2},{done},{rss}")?;
            }
            Ok(())
        });
        if let Err(e) = written {
            eprintln!("origins: cannot write {path}: {e}");
        }
    }

    let done = tally.done.load(Ordering::Relaxed);
    let errors = tally.errors.load(Ordering::Relaxed);
    println!("origins            {}", args.origins);
    println!("concurrency        {}", args.concurrency);
    println!("duration_s         {elapsed:.2}");
    println!("new_origins_per_s  {:.0}", done as f64 / elapsed);
    println!("answered_ok        {done}");
    println!("errors             {errors}");
    println!(
        "client_connections {}",
        tally.connections.load(Ordering::Relaxed)
    );
    if let Some(pid) = args.pid {
        let peak = samples.iter().map(|s| s.2).max().unwrap_or(0);
        println!("proxy_pid          {pid}");
        println!("rss_peak_kib       {peak} ({} samples)", samples.len());
        // RSS at each tenth of the run: flat once the caps are reached.
        let tenths: Vec<String> = (1..=10)
            .filter_map(|t| {
                let target = args.origins * t / 10;
                samples
                    .iter()
                    .find(|s| s.1 >= target)
                    .map(|s| format!("{}k:{}", target / 1000, s.2 / 1024))
            })
            .collect();
        println!("rss_mib_by_origins {}", tenths.join(" "));
        if let Some((rss, hwm)) = end {
            println!("rss_end_kib        {rss}");
            println!("vmhwm_kib          {hwm}");
        }
    }
    if errors > 0 {
        std::process::exit(1);
    }
}
