//! The pools against real origins on loopback: plain-http ones here
//! (blocking servers on their own threads, so they answer while a test's
//! runtime is blocked), TLS ones in [`tls`].

mod tls;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;

use super::send::STALE_RISK;
use super::{ProxyBody, UpstreamError, UpstreamPools, UpstreamSettings, MAX_IDLE_PER_ORIGIN};
use crate::origin::Scheme;
use crate::policy::destination::DestinationPolicy;

/// How the test origin ends each exchange.
#[derive(Clone, Copy)]
enum Ending {
    /// Keeps the connection open for the next request.
    KeepAlive,
    /// Says `Connection: close` and closes.
    ConnectionClose,
    /// Closes 50 ms after answering without saying so, as an origin
    /// whose keep-alive timeout fires.
    CloseSilently,
}

/// A blocking origin on its own threads: `body_len` bytes per answer.
struct Origin {
    port: u16,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    last_head: Arc<Mutex<String>>,
}

fn origin(body_len: usize, ending: Ending) -> Origin {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let last_head = Arc::new(Mutex::new(String::new()));
    let (a, c, h) = (accepted.clone(), closed.clone(), last_head.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            a.fetch_add(1, Ordering::SeqCst);
            let (c, h) = (c.clone(), h.clone());
            std::thread::spawn(move || {
                serve(stream, body_len, ending, &h);
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Origin {
        port,
        accepted,
        closed,
        last_head,
    }
}

/// Answers requests (heads only) until the client closes, or once.
fn serve(mut stream: TcpStream, body_len: usize, ending: Ending, last_head: &Mutex<String>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head: Vec<u8> = buffer.drain(..end).collect();
        *last_head.lock().expect("lock") = String::from_utf8_lossy(&head).into_owned();
        let close = match ending {
            Ending::ConnectionClose => "Connection: close\r\n",
            _ => "",
        };
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {body_len}\r\n{close}\r\n");
        if stream.write_all(answer.as_bytes()).is_err()
            || stream.write_all(&vec![b'x'; body_len]).is_err()
        {
            return;
        }
        match ending {
            Ending::KeepAlive => {}
            Ending::ConnectionClose => return,
            Ending::CloseSilently => {
                std::thread::sleep(Duration::from_millis(50));
                return;
            }
        }
    }
}

fn settings(idle_timeout: Duration) -> UpstreamSettings {
    UpstreamSettings {
        connect_timeout: Duration::from_secs(2),
        pool_idle_timeout: idle_timeout,
        extra_roots: Vec::new(),
        max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
    }
}

fn pools(idle_timeout: Duration) -> UpstreamPools {
    UpstreamPools::build(
        &settings(idle_timeout),
        DestinationPolicy::allow_all(),
        NonZeroUsize::MIN,
    )
    .expect("pools")
}

fn get(port: u16, path: &str) -> Request<ProxyBody> {
    Request::get(format!("http://127.0.0.1:{port}{path}"))
        .body(super::empty_body())
        .expect("request")
}

/// One request, its body read to the end; returns the body's length.
async fn fetch(pools: &UpstreamPools, port: u16) -> usize {
    let response = pools.send(get(port, "/page?q=1")).await.expect("response");
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.expect("body");
    body.to_bytes().len()
}

/// Idle HTTP/1.1 connections this thread's pool holds for
/// `http://127.0.0.1:port`.
fn idle(pools: &UpstreamPools, port: u16) -> usize {
    pools
        .current()
        .idle_count(Scheme::Http, &format!("127.0.0.1:{port}"))
}

#[test]
fn each_worker_thread_gets_its_own_pool() {
    let destinations = Arc::new(DestinationPolicy::new(
        Vec::new(),
        Duration::from_secs(1),
        NonZeroUsize::MIN,
    ));
    let workers = NonZeroUsize::new(3).unwrap();
    let pools = UpstreamPools::build(&settings(Duration::from_secs(1)), destinations, workers)
        .expect("pools");
    let chosen = |index: usize| {
        let pools = pools.clone();
        std::thread::spawn(move || {
            crate::worker::enter(index);
            std::ptr::from_ref(pools.current()) as usize
        })
        .join()
        .unwrap()
    };
    let (zero, one, two) = (chosen(0), chosen(1), chosen(2));
    assert!(zero != one && one != two && zero != two);
    assert_eq!(chosen(1), one, "the same worker always gets the same pool");
    // A thread that is no worker (tests, tools) shares worker 0's.
    assert_eq!(std::ptr::from_ref(pools.current()) as usize, zero);
}

#[tokio::test]
async fn sequential_requests_share_one_connection_in_origin_form_with_host() {
    let origin = origin(600, Ending::KeepAlive);
    let pools = pools(Duration::from_secs(30));
    for _ in 0..5 {
        assert_eq!(fetch(&pools, origin.port).await, 600);
    }
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(idle(&pools, origin.port), 1);
    let head = origin.last_head.lock().expect("lock").clone();
    assert!(head.starts_with("GET /page?q=1 HTTP/1.1\r\n"), "{head}");
    let host = format!("host: 127.0.0.1:{}\r\n", origin.port);
    assert!(head.to_ascii_lowercase().contains(&host), "{head}");
}

#[tokio::test]
async fn a_body_dropped_half_read_takes_its_connection_along() {
    let origin = origin(1 << 20, Ending::KeepAlive);
    let pools = pools(Duration::from_secs(30));
    let response = pools
        .send(get(origin.port, "/big"))
        .await
        .expect("response");
    let mut body = response.into_body();
    let first = body.frame().await.expect("a frame").expect("data");
    assert!(first.data_ref().is_some_and(|d| d.len() < 1 << 20));
    drop(body);
    assert_eq!(idle(&pools, origin.port), 0);
    assert_eq!(fetch(&pools, origin.port).await, 1 << 20);
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connection_close_answers_are_not_reused() {
    let origin = origin(10, Ending::ConnectionClose);
    let pools = pools(Duration::from_secs(30));
    for _ in 0..3 {
        assert_eq!(fetch(&pools, origin.port).await, 10);
    }
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_request_on_a_connection_the_origin_just_closed_is_sent_again() {
    let origin = origin(10, Ending::CloseSilently);
    let pools = pools(Duration::from_secs(30));
    for exchange in 1..=4 {
        assert_eq!(fetch(&pools, origin.port).await, 10);
        // The origin closes while this runtime is blocked, so the pooled
        // connection still looks ready when the next request takes it,
        // and the request is written before the close is seen: the race
        // an origin's keep-alive timeout causes.
        std::thread::sleep(STALE_RISK + Duration::from_millis(50));
        assert_eq!(origin.closed.load(Ordering::SeqCst), exchange);
        assert_eq!(idle(&pools, origin.port), 1);
    }
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 4);
    // A request with a body is not sent twice: the error stands.
    let post = Request::post(format!("http://127.0.0.1:{}/form", origin.port))
        .body(
            http_body_util::Full::new(Bytes::from_static(b"a=1"))
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("request");
    let error = pools
        .send(post)
        .await
        .expect_err("written on a closed connection");
    assert!(
        matches!(&error, UpstreamError::Protocol(e) if e.is_incomplete_message()),
        "{error:?}"
    );
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn idle_connections_close_after_the_idle_timeout() {
    let origin = origin(10, Ending::KeepAlive);
    let pools = pools(Duration::from_millis(100));
    assert_eq!(fetch(&pools, origin.port).await, 10);
    assert_eq!(idle(&pools, origin.port), 1);
    for _ in 0..100 {
        if origin.closed.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        origin.closed.load(Ordering::SeqCst),
        1,
        "the origin saw it close"
    );
    assert_eq!(idle(&pools, origin.port), 0);
    // The sweeper ended with the pool empty; the next connection gets a new one.
    assert_eq!(fetch(&pools, origin.port).await, 10);
    for _ in 0..100 {
        if origin.closed.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.closed.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn at_most_max_idle_connections_wait_per_origin() {
    let origin = origin(10, Ending::KeepAlive);
    let pools = pools(Duration::from_secs(30));
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..MAX_IDLE_PER_ORIGIN + 6 {
        let pools = pools.clone();
        requests.spawn(async move { fetch(&pools, origin.port).await });
    }
    while let Some(length) = requests.join_next().await {
        assert_eq!(length.expect("task"), 10);
    }
    assert!(origin.accepted.load(Ordering::SeqCst) > MAX_IDLE_PER_ORIGIN);
    assert_eq!(idle(&pools, origin.port), MAX_IDLE_PER_ORIGIN);
}

#[tokio::test]
async fn a_refused_connection_is_tagged_connect() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let pools = pools(Duration::from_secs(30));
    let error = pools.send(get(port, "/")).await.expect_err("refused");
    assert!(error.is_connect());
    match &error {
        UpstreamError::Connect {
            host,
            port: p,
            source,
        } => {
            assert_eq!((host.as_str(), *p), ("127.0.0.1", port));
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        other => panic!("expected Connect, got {other:?}"),
    }
    assert!(error.to_string().contains("refused"), "{error}");
}

#[tokio::test]
async fn a_denied_destination_is_tagged_denied_and_never_connected_to() {
    let origin = origin(10, Ending::KeepAlive);
    let destinations = Arc::new(DestinationPolicy::new(
        vec!["127.0.0.0/8".parse().expect("net")],
        Duration::from_secs(1),
        NonZeroUsize::MIN,
    ));
    let pools = UpstreamPools::build(
        &settings(Duration::from_secs(30)),
        destinations,
        NonZeroUsize::MIN,
    )
    .expect("pools");
    let error = pools.send(get(origin.port, "/")).await.expect_err("denied");
    assert!(matches!(error, UpstreamError::Denied { .. }), "{error:?}");
    assert_eq!(origin.accepted.load(Ordering::SeqCst), 0);
}
