//! One origin server for many hosts: a socket bound to `0.0.0.0:PORT` accepts
//! connections to every `127.x.y.z` on Linux, so each loopback address is a distinct
//! origin (its own robots.txt, pacing state and pooled connections) served by one
//! listener. Connections from anything but loopback are dropped at once.
//!
//! Every host serves the same small site: a robots.txt that allows everything and
//! `ok` for any other path.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What the origin counts.
#[derive(Default)]
struct Counts {
    robots: AtomicUsize,
    pages: AtomicUsize,
    open: AtomicUsize,
}

/// The origin of every `127.x.y.z` on one port; stops accepting when dropped.
pub struct LoopbackOrigins {
    port: u16,
    counts: Arc<Counts>,
    accept: JoinHandle<()>,
}

impl LoopbackOrigins {
    /// Binds `0.0.0.0:0` and serves until dropped.
    pub async fn start() -> LoopbackOrigins {
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
            .await
            .expect("bind 0.0.0.0:0");
        let port = listener.local_addr().expect("local address").port();
        let counts = Arc::new(Counts::default());
        let shared = counts.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                if !peer.ip().is_loopback() {
                    continue;
                }
                let counts = shared.clone();
                tokio::spawn(async move {
                    counts.open.fetch_add(1, Ordering::SeqCst);
                    let service = service_fn(|request: Request<Incoming>| {
                        let body = if request.uri().path() == "/robots.txt" {
                            counts.robots.fetch_add(1, Ordering::Relaxed);
                            "User-agent: *\nAllow: /\n"
                        } else {
                            counts.pages.fetch_add(1, Ordering::Relaxed);
                            "ok\n"
                        };
                        async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    counts.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        LoopbackOrigins {
            port,
            counts,
            accept,
        }
    }

    /// The `n`th host (from 0): `127.1.0.1`, `127.1.0.2`, ... (no `.0` or `.255`
    /// last byte), as an address with this origin's port.
    pub fn host(&self, n: usize) -> SocketAddr {
        let last = n % 250 + 1;
        let rest = n / 250;
        let third = rest % 256;
        let second = 1 + rest / 256;
        let ip = Ipv4Addr::new(
            127,
            u8::try_from(second).expect("fewer hosts than 127.255.255.x holds"),
            u8::try_from(third).expect("a byte"),
            u8::try_from(last).expect("a byte"),
        );
        SocketAddr::from((ip, self.port))
    }

    /// `http://host(n)/path`.
    pub fn url(&self, n: usize, path: &str) -> String {
        format!("http://{}{path}", self.host(n))
    }

    /// robots.txt requests served.
    pub fn robots_served(&self) -> usize {
        self.counts.robots.load(Ordering::Relaxed)
    }

    /// Other requests served.
    pub fn pages_served(&self) -> usize {
        self.counts.pages.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.counts.open.load(Ordering::SeqCst)
    }
}

impl Drop for LoopbackOrigins {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
