//! Fault injection: this is the file for upstreams (and TLS clients) that misbehave. An
//! origin that refuses connections, closes without answering, answers garbage, hangs
//! past `upstream_timeout`, breaks off mid-body, drips a byte a second, serves a 20 MB or
//! endlessly redirecting robots.txt, or fails TLS; a client that speaks garbage inside a
//! tunnel. Each test proves that the proxy answers the fault with the right status *and
//! keeps serving other clients while it happens*: it runs a bystander (a normal client
//! of a healthy origin) during the fault, or after it when the fault is instantaneous.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, scripted hyper origins
//! on loopback whose replies are cut, delayed, streamed through a channel or replaced by
//! raw bytes (`Reply::Raw`, `Reply::Reset`), bare TCP listeners for broken TLS, and real
//! clients (hyper's HTTP/1.1 client and raw sockets) through the proxy.
//!
//! Elsewhere, with the feature they belong to: the outcomes of a robots.txt fetch through
//! the proxy (5xx, timeouts, refused connections, a redirect chain one hop too long) in
//! `robots_outcomes.rs`, and at the fetcher (resets, bad chunking, `max_size`
//! truncation) in `robots_fetch.rs`; an untrusted upstream certificate behind an
//! intercepted CONNECT (`bad_upstream_certificate_is_502_naming_it`) and a client that
//! rejects the proxy's CA (`client_that_rejects_our_ca_fails_and_proxy_stays_up`) in
//! `proxy_https.rs`; bad request heads from clients in `bad_input.rs`.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use support::origin::{closed_port, BoxError, Reply, TestCa, TestOrigin};
use support::proxy::{assert_status, config, config_with, get, get_request, ProxyConn, TestProxy};
use support::ROBOTS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

/// A normal client of `site` (a healthy [`TestOrigin::site`]) through `proxy` gets its
/// `200` promptly: the fault in progress elsewhere does not hold it up. It asks for the
/// site as `localhost`, another host than the faulty origins' `127.0.0.1`: a fault slows
/// its own host down (site back-off), by design, and that is tested in `site_backoff.rs`.
async fn bystander_is_served(proxy: &TestProxy, site: &TestOrigin, path: &str) {
    let started = Instant::now();
    let url = site.url(path).replace("127.0.0.1", "localhost");
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), format!("ok {path}"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "bystander waited {:?}",
        started.elapsed()
    );
}

/// Feeds a [`channel_reply`]: `Ok` chunks are body data, an `Err` breaks the body off
/// (hyper then drops the connection). A full channel makes `send` wait: backpressure.
type BodySender = mpsc::Sender<Result<Bytes, BoxError>>;

/// A reply body fed chunk by chunk through a channel.
struct ChannelBody(mpsc::Receiver<Result<Bytes, BoxError>>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0
            .poll_recv(cx)
            .map(|next| next.map(|chunk| chunk.map(Frame::data)))
    }
}

/// A streaming reply fed by the returned sender (no `Content-Length` unless the caller
/// adds one, so HTTP/1.1 sends it chunked).
fn channel_reply(status: u16) -> (BodySender, Reply) {
    let (sender, receiver) = mpsc::channel(1);
    let mut response = http::Response::new(ChannelBody(receiver).boxed());
    *response.status_mut() = http::StatusCode::from_u16(status).expect("status");
    (sender, Reply::Http(response))
}

// --- Origin refuses connections or closes without answering ----------------------------

#[tokio::test]
async fn upstream_refusing_connections_is_502() {
    let site = TestOrigin::site(ROBOTS).await;
    // `/robots.txt` skips the robots.txt lookup, so the refusal is the forward's own.
    let port = closed_port().await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &format!("http://127.0.0.1:{port}/robots.txt")).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
    assert!(
        answer.text().contains("cannot connect"),
        "{}",
        answer.text()
    );
    bystander_is_served(&proxy, &site, "/after-refused").await;

    // An origin that served robots.txt and a page, then went away (closing every
    // connection, so the proxy has none pooled).
    let origin = TestOrigin::start(|req| async move {
        let reply = match req.uri().path() {
            "/robots.txt" => Reply::text(200, ROBOTS),
            _ => Reply::text(200, "ok"),
        };
        reply.header("connection", "close")
    })
    .await;
    assert_status(&get(proxy.addr(), &origin.url("/first")).await, 200);
    let url = origin.url("/second");
    drop(origin);
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
    bystander_is_served(&proxy, &site, "/after-gone").await;
}

#[tokio::test]
async fn upstream_closing_without_an_answer_is_502() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::Reset,
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
    bystander_is_served(&proxy, &site, "/after").await;
}

// --- Origin breaks off mid-body --------------------------------------------------------

#[tokio::test]
async fn reset_mid_body_truncates_only_that_answer_while_others_are_served() {
    let release = Arc::new(Notify::new());
    let cut = release.clone();
    let origin = TestOrigin::start(move |req| {
        let cut = cut.clone();
        async move {
            match req.uri().path() {
                "/robots.txt" => Reply::empty(404),
                "/broken" => {
                    let (sender, reply) = channel_reply(200);
                    tokio::spawn(async move {
                        let _ = sender.send(Ok(Bytes::from_static(b"first part"))).await;
                        cut.notified().await;
                        // The body errors: hyper drops the connection 99,990 bytes short.
                        let _ = sender.send(Err("origin died".into())).await;
                    });
                    reply.header("content-length", "100000")
                }
                _ => Reply::text(200, "fine"),
            }
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;

    let mut conn = ProxyConn::open(proxy.addr()).await;
    let response = conn
        .send(get_request(&origin.url("/broken")))
        .await
        .expect("the head arrives");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "100000");
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(2), body.frame())
        .await
        .expect("the first part arrives before the origin finishes")
        .expect("a frame")
        .expect("a good frame");
    assert_eq!(first.into_data().expect("data"), "first part");

    // The broken answer is half-way: others are served meanwhile.
    bystander_is_served(&proxy, &site, "/during").await;

    release.notify_one();
    let rest = tokio::time::timeout(Duration::from_secs(5), body.collect())
        .await
        .expect("the body ends (with an error) instead of hanging");
    assert!(rest.is_err(), "a truncated body must not look complete");

    bystander_is_served(&proxy, &site, "/after").await;
    let again = get(proxy.addr(), &origin.url("/next")).await;
    assert_status(&again, 200);
    assert_eq!(again.text(), "fine");
}

// --- Origin hangs before answering -----------------------------------------------------

#[tokio::test]
async fn hang_before_answering_is_504_after_upstream_timeout_and_others_are_served() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            "/hang" => {
                // Never answers in the test's lifetime.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Reply::empty(200)
            }
            _ => Reply::text(200, "fast"),
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let timeout = Duration::from_millis(700);
    let proxy = TestProxy::start(config_with(|c| c.proxy.upstream_timeout = timeout)).await;

    let started = Instant::now();
    let hung = tokio::spawn({
        let addr = proxy.addr();
        let url = origin.url("/hang");
        async move { get(addr, &url).await }
    });
    // Several bystanders while the request hangs, each answered at once.
    for i in 0..3 {
        bystander_is_served(&proxy, &site, &format!("/during/{i}")).await;
    }
    assert!(
        started.elapsed() < timeout,
        "bystanders were not served during the hang"
    );

    let answer = hung.await.expect("client task");
    let waited = started.elapsed();
    assert_status(&answer, 504);
    assert_eq!(answer.reason(), Some("upstream-timeout"));
    assert!(
        waited >= timeout && waited < timeout + Duration::from_secs(2),
        "504 after {waited:?}"
    );
    bystander_is_served(&proxy, &site, "/after").await;
    // The origin that hung once is served again when it answers.
    let fast = get(proxy.addr(), &origin.url("/fast")).await;
    assert_status(&fast, 200);
    assert_eq!(fast.text(), "fast");
}

// --- Origin drips one byte a second ----------------------------------------------------

#[tokio::test]
async fn drip_of_one_byte_a_second_streams_unbuffered_and_blocks_no_one() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => {
                let (sender, reply) = channel_reply(200);
                tokio::spawn(async move {
                    for (i, byte) in [b"a", b"b", b"c"].into_iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        if sender.send(Ok(Bytes::from_static(byte))).await.is_err() {
                            return;
                        }
                    }
                    // Dropping the sender ends the body: three bytes, then done.
                });
                reply
            }
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    // Shorter than the drip: `upstream_timeout` bounds the wait for the head only, a body
    // may take as long as it needs while bytes keep moving.
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.upstream_timeout = Duration::from_millis(500)
    }))
    .await;

    let started = Instant::now();
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let response = conn
        .send(get_request(&origin.url("/drip")))
        .await
        .expect("the head arrives");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut arrivals = Vec::new();
    let mut text = Vec::new();
    let mut bystanders = 0;
    while let Some(frame) = tokio::time::timeout(Duration::from_secs(3), body.frame())
        .await
        .expect("the next byte within 3 s")
    {
        if let Ok(data) = frame.expect("an unbroken body").into_data() {
            arrivals.push(started.elapsed());
            text.extend_from_slice(&data);
            // Between two drips, another client is served at once.
            if bystanders < 2 {
                bystander_is_served(&proxy, &site, &format!("/during/{bystanders}")).await;
                bystanders += 1;
            }
        }
    }
    assert_eq!(text, b"abc");
    assert_eq!(bystanders, 2);
    // Each byte reaches the client about when the origin sends it (0 s, 1 s, 2 s), so the
    // proxy does not buffer the body: a buffering proxy would deliver all three at 2 s.
    assert_eq!(arrivals.len(), 3, "one frame per byte: {arrivals:?}");
    assert!(arrivals[0] < Duration::from_millis(800), "{arrivals:?}");
    assert!(
        arrivals[1] >= Duration::from_millis(900) && arrivals[1] < Duration::from_millis(1800),
        "{arrivals:?}"
    );
    assert!(arrivals[2] >= Duration::from_millis(1900), "{arrivals:?}");
    bystander_is_served(&proxy, &site, "/after").await;
}

// --- A 20 MB robots.txt ----------------------------------------------------------------

const TWENTY_MB: usize = 20 * 1024 * 1024;

#[tokio::test]
async fn robots_txt_of_20_mb_is_read_up_to_max_size_and_later_rules_are_ignored() {
    // `Disallow: /private` on line 2, 1 MiB of comment lines, `Disallow: /late`, then
    // padding to 20 MiB. Sent in 64 KiB chunks with a Content-Length; `sent` counts the
    // bytes the proxy actually pulled.
    let sent = Arc::new(AtomicUsize::new(0));
    let pulled = sent.clone();
    let origin = TestOrigin::start(move |req| {
        let pulled = pulled.clone();
        async move {
            match req.uri().path() {
                "/robots.txt" => {
                    let (sender, reply) = channel_reply(200);
                    tokio::spawn(async move {
                        let line = format!("# {}\n", "x".repeat(1021)); // 1 KiB
                        let padding = Bytes::from(line.repeat(64)); // 64 KiB
                        let head = Bytes::from_static(b"User-agent: *\nDisallow: /private\n");
                        let late = Bytes::from_static(b"Disallow: /late\n");
                        let mut total = 0;
                        let mut chunks = vec![head];
                        chunks.extend(std::iter::repeat_n(padding.clone(), 16)); // 1 MiB
                        chunks.push(late);
                        for chunk in chunks.into_iter().chain(std::iter::repeat(padding)) {
                            let chunk = chunk.slice(..chunk.len().min(TWENTY_MB - total));
                            if chunk.is_empty() {
                                break;
                            }
                            total += chunk.len();
                            if sender.send(Ok(chunk)).await.is_err() {
                                break; // the proxy stopped reading and hung up
                            }
                            pulled.store(total, Ordering::Relaxed);
                        }
                    });
                    reply.header("content-length", &TWENTY_MB.to_string())
                }
                path => Reply::text(200, format!("ok {path}")),
            }
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let max_size = robots_guard::config::Config::default()
        .robots
        .max_size
        .get();

    let started = Instant::now();
    let first = tokio::spawn({
        let addr = proxy.addr();
        let url = origin.url("/private/x");
        async move { get(addr, &url).await }
    });
    bystander_is_served(&proxy, &site, "/during").await;
    let answer = first.await.expect("client task");
    let took = started.elapsed();
    assert_status(&answer, 403);
    assert_eq!(answer.header("x-robots-guard-line"), Some("2"));
    assert!(took < Duration::from_secs(3), "answered after {took:?}");

    // The rule past the cap was never parsed.
    let late = get(proxy.addr(), &origin.url("/late")).await;
    assert_status(&late, 200);
    assert_eq!(late.text(), "ok /late");
    assert_eq!(origin.hits("/robots.txt"), 1);

    // The proxy read `max_size` and hung up: the origin got to push only what fits in
    // the socket buffers beyond that, far from 20 MiB. Memory held for the file is
    // bounded by `max_size` (`read_body` stops there and never buffers the rest).
    let pushed = sent.load(Ordering::Relaxed);
    assert!(pushed >= max_size, "pushed {pushed}");
    assert!(
        pushed < TWENTY_MB / 2,
        "the origin pushed {pushed} bytes: the proxy kept reading past max_size"
    );
}

// --- Endless redirects on robots.txt ---------------------------------------------------

#[tokio::test]
async fn endless_robots_redirect_loop_is_cut_at_max_redirects_and_treated_as_4xx() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            // Redirects to itself, forever.
            "/robots.txt" => Reply::redirect(302, "/robots.txt"),
            path => Reply::text(200, format!("ok {path}")),
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let started = Instant::now();
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    // Too many redirects is "unavailable", as a 4xx: no restrictions (RFC 9309 §2.3.1.2).
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "ok /page");
    assert!(started.elapsed() < Duration::from_secs(2));
    let max_redirects = robots_guard::config::Config::default().robots.max_redirects;
    assert_eq!(
        origin.hits("/robots.txt"),
        1 + max_redirects as usize,
        "the first request and max_redirects hops, no more"
    );
    // The outcome is cached: no second round of redirects.
    assert_status(&get(proxy.addr(), &origin.url("/other")).await, 200);
    assert_eq!(origin.hits("/robots.txt"), 1 + max_redirects as usize);
    bystander_is_served(&proxy, &site, "/after").await;
}

// --- Garbage status lines --------------------------------------------------------------

/// Answers the origin writes instead of a valid response head.
const GARBAGE: [&[u8]; 9] = [
    b"NOT HTTP AT ALL\r\n\r\n",
    b"HTTP/1.1 abc\r\n\r\n",
    b"NOPE\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\xff\xfe\x00\x80",
    b"HTTP/1.1 20 OK\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello",
    b"\r\n\r\n\r\n",
];

#[tokio::test]
async fn garbage_status_lines_from_the_origin_are_502_and_others_are_served() {
    let origin = TestOrigin::start(|req| async move {
        let path = req.uri().path().to_owned();
        if path == "/robots.txt" {
            return Reply::empty(404);
        }
        let index: usize = path.trim_start_matches("/g").parse().unwrap_or(0);
        Reply::Raw(Bytes::from_static(GARBAGE[index]))
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let mut clients = tokio::task::JoinSet::new();
    for i in 0..GARBAGE.len() {
        let addr = proxy.addr();
        let url = origin.url(&format!("/g{i}"));
        clients.spawn(async move { (i, get(addr, &url).await) });
    }
    bystander_is_served(&proxy, &site, "/during").await;
    while let Some(done) = clients.join_next().await {
        let (i, answer) = done.expect("client task");
        assert_eq!(
            answer.status.as_u16(),
            502,
            "{:?}: {}",
            String::from_utf8_lossy(GARBAGE[i]),
            answer.text()
        );
        assert_eq!(answer.reason(), Some("upstream-error"));
        assert!(
            answer.text().contains("not valid HTTP"),
            "{:?}: {}",
            String::from_utf8_lossy(GARBAGE[i]),
            answer.text()
        );
    }
    bystander_is_served(&proxy, &site, "/after").await;
}

#[tokio::test]
async fn garbage_status_line_for_robots_txt_is_503_robots_unreachable() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::Raw(Bytes::from_static(b"HTTP/1.1 abc\r\n\r\n")),
            path => Reply::text(200, format!("ok {path}")),
        }
    })
    .await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/page")).await;
    // A robots.txt that cannot be read is "unreachable": complete disallow.
    assert_status(&answer, 503);
    assert_eq!(answer.reason(), Some("robots-unreachable"));
    assert!(answer.header("retry-after").is_some());
    assert_eq!(origin.hits("/page"), 0);
    bystander_is_served(&proxy, &site, "/after").await;
}

// --- TLS failures ----------------------------------------------------------------------

/// Plain HTTP to the proxy with an `https://` absolute-form target: the proxy fetches
/// robots.txt and the page over TLS, verifying the origin's certificate.
#[tokio::test]
async fn https_target_with_an_untrusted_certificate_is_502_naming_the_problem() {
    let ca = TestCa::new();
    let origin = TestOrigin::start_tls(ca.server_config(&["127.0.0.1"]), |_| async {
        Reply::text(200, "secret")
    })
    .await;
    let url = origin.url("/page");
    assert!(url.starts_with("https://"));
    let site = TestOrigin::site(ROBOTS).await;

    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-certificate"));
    let text = answer.text();
    assert!(text.contains("certificate"), "{text}");
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert_eq!(origin.requests().len(), 0, "nothing is fetched");
    bystander_is_served(&proxy, &site, "/after").await;

    // Trusted through extra_roots, the same origin is served.
    let proxy = TestProxy::start(config_with(|c| c.tls.extra_roots = vec![ca.pem_file()])).await;
    let answer = get(proxy.addr(), &url).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "secret");
}

/// A "TLS origin" on loopback that reads the client's first bytes (its ClientHello) and
/// then does `misbehave` instead of a handshake. Returns the port and how many
/// connections it took.
async fn broken_tls_origin(plaintext: bool) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let mut hello = [0u8; 512];
                let _ = stream.read(&mut hello).await;
                if plaintext {
                    let _ = stream
                        .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                        .await;
                }
                // Dropping the stream closes the connection mid-handshake.
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn tls_origin_closing_during_the_handshake_is_502_or_503() {
    let (port, accepted) = broken_tls_origin(false).await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;

    // robots.txt itself is forwarded without a lookup: the forward fails, 502.
    let answer = get(
        proxy.addr(),
        &format!("https://127.0.0.1:{port}/robots.txt"),
    )
    .await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));

    // Any other path needs robots.txt first, whose fetch fails: unreachable, 503.
    let answer = get(proxy.addr(), &format!("https://127.0.0.1:{port}/page")).await;
    assert_status(&answer, 503);
    assert_eq!(answer.reason(), Some("robots-unreachable"));
    assert!(accepted.load(Ordering::Relaxed) >= 2);
    bystander_is_served(&proxy, &site, "/after").await;
}

#[tokio::test]
async fn tls_origin_answering_in_plaintext_is_502_naming_the_handshake() {
    let (port, _) = broken_tls_origin(true).await;
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(
        proxy.addr(),
        &format!("https://127.0.0.1:{port}/robots.txt"),
    )
    .await;
    assert_status(&answer, 502);
    assert_eq!(answer.reason(), Some("upstream-error"));
    assert!(answer.text().contains("TLS"), "{}", answer.text());
    bystander_is_served(&proxy, &site, "/after").await;
}

/// Reads until the proxy closes the connection; panics if it is still open after
/// `within`. Returns what it sent (a TLS alert, at most).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the proxy kept the connection open");
    got
}

#[tokio::test]
async fn client_speaking_tls_garbage_after_connect_is_dropped_and_the_proxy_stays_up() {
    let site = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| {
        c.proxy.header_read_timeout = Duration::from_millis(500);
    }))
    .await;
    let garbage: [&[u8]; 4] = [
        // Another protocol inside the tunnel (plain HTTP is served: see
        // tests/tunnel_http.rs).
        b"SSH-2.0-OpenSSH_9.6\r\n",
        // Random bytes.
        b"\x00\x01\x02\x03\xff\xfe\xfd\xfc\x80\x81",
        // A handshake record header announcing 16 MB, then nothing much.
        b"\x16\x03\x01\xff\xff\x01\xff\xff\xff",
        // An alert record, out of place.
        b"\x15\x03\x03\x00\x02\x02\x28",
    ];
    for bytes in garbage {
        let (mut stream, head) =
            support::proxy::connect_head(proxy.addr(), "127.0.0.1:443", "").await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        stream.write_all(bytes).await.expect("send garbage");
        // Either rustls refuses at once, or the handshake timer
        // (`header_read_timeout`) ends the wait for the rest.
        closed_within(&mut stream, Duration::from_secs(3)).await;
        bystander_is_served(&proxy, &site, "/between").await;
    }
    // Silence after CONNECT: closed by the handshake timer.
    let (mut stream, head) = support::proxy::connect_head(proxy.addr(), "127.0.0.1:443", "").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = Instant::now();
    closed_within(&mut stream, Duration::from_secs(3)).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    bystander_is_served(&proxy, &site, "/after").await;
}
