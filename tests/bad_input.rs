//! Bad client input: requests a forward proxy cannot serve (origin-form targets, other
//! schemes, garbage) and, over raw sockets, malformed request lines, request smuggling,
//! invalid header bytes, oversize heads and targets. Each gets a `4xx` answer, the
//! origin never sees a smuggled request, and other clients of the same proxy are
//! served meanwhile: a keep-alive client between every two cases of a table.
//!
//! Two layers refuse, and every case of a table says which ([`Layer`]); the answers
//! are the same kind either way (a reason header, text for people, a log line and a
//! metric):
//! - **hyper** (the HTTP/1.1 parser, `httparse` underneath) refuses heads it cannot
//!   parse before our code runs: `400` for request lines, header syntax, bad framing,
//!   `431` for heads over `proxy.max_header_bytes` or more than 100 fields, and closes
//!   the connection. Its own bare answer is replaced by the proxy's (`bad-request`,
//!   `header-too-large`).
//! - **our pipeline** (the target phase, before any robots.txt lookup) refuses heads
//!   hyper accepts but a proxy cannot serve: origin-form targets, bad hosts or ports,
//!   URLs over `proxy.max_url_length` (`414`), and both `Content-Length` and
//!   `Transfer-Encoding` (`400`, closing).
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, a scripted hyper origin
//! on loopback that records what reaches it, and clients writing bytes as a hostile
//! client would: raw sockets, next to hyper's HTTP/1.1 client for the bystanders.

mod support;

use support::origin::{Reply, TestOrigin};
use support::proxy::{
    assert_status, config, config_with, get, get_request, nonzero, raw, raw_body, raw_header,
    raw_status, ProxyConn, TestProxy,
};
use support::ROBOTS;
use tokio::task::JoinSet;

/// Who refuses a bad request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// hyper's parser, before the request reaches our service.
    Hyper,
    /// Our pipeline, with this `X-Robots-Guard-Reason`.
    Pipeline(&'static str),
}

/// One bad request and the answer it must get.
struct Case {
    what: &'static str,
    bytes: Vec<u8>,
    status: u16,
    layer: Layer,
}

fn case(what: &'static str, bytes: impl Into<Vec<u8>>, status: u16, layer: Layer) -> Case {
    Case {
        what,
        bytes: bytes.into(),
        status,
        layer,
    }
}

/// A proxy, a site whose every path answers `ok <path>` (robots.txt: everything
/// allowed), and a keep-alive client that must keep being served.
struct Bench {
    proxy: TestProxy,
    origin: TestOrigin,
    bystander: ProxyConn,
    served: usize,
}

impl Bench {
    async fn start() -> Bench {
        let origin = TestOrigin::start(|req| async move {
            match req.uri().path() {
                "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
                path => Reply::text(200, format!("ok {path}")),
            }
        })
        .await;
        let proxy = TestProxy::start(config()).await;
        let bystander = ProxyConn::open(proxy.addr()).await;
        Bench {
            proxy,
            origin,
            bystander,
            served: 0,
        }
    }

    /// `host:port` of the origin.
    fn host(&self) -> String {
        self.origin.addr().to_string()
    }

    /// Sends each case on its own connection, checks its answer and layer, and has the
    /// bystander served on its one keep-alive connection after each. The proxy closes
    /// each case's connection: hyper after its own refusals, and the cases our pipeline
    /// refuses ask for it with `Connection: close`.
    async fn check(&mut self, cases: Vec<Case>) {
        for case in cases {
            let answer = raw(self.proxy.addr(), &case.bytes).await;
            let status = raw_status(&answer);
            assert_eq!(
                status, case.status,
                "{}: expected {}, got {answer:?}",
                case.what, case.status
            );
            let reason = raw_header(&answer, "x-robots-guard-reason");
            match case.layer {
                Layer::Hyper => {
                    // hyper's bare answer, replaced: a reason, text, and a close.
                    assert!(
                        matches!(reason, Some("bad-request" | "header-too-large")),
                        "{}: {answer}",
                        case.what
                    );
                    assert!(
                        raw_body(&answer).contains(&case.status.to_string()),
                        "{}: {answer}",
                        case.what
                    );
                    assert_eq!(raw_header(&answer, "connection"), Some("close"));
                }
                Layer::Pipeline(want) => {
                    assert_eq!(reason, Some(want), "{}: not ours: {answer}", case.what)
                }
            }
            self.bystander_is_served().await;
        }
    }

    async fn bystander_is_served(&mut self) {
        self.served += 1;
        let path = format!("/bystander/{}", self.served);
        let answer = self
            .bystander
            .fetch(get_request(&self.origin.url(&path)))
            .await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.text(), format!("ok {path}"));
    }

    /// Paths the origin saw other than robots.txt and the bystander's.
    fn origin_saw(&self) -> Vec<String> {
        self.origin
            .requests()
            .into_iter()
            .map(|r| r.path)
            .filter(|p| p != "/robots.txt" && !p.starts_with("/bystander/"))
            .collect()
    }
}

// --- Requests a forward proxy cannot serve ---------------------------------------------

#[tokio::test]
async fn bad_origin_form_request_is_400_saying_to_use_a_proxy() {
    let proxy = TestProxy::start(config()).await;
    let answer = raw(
        proxy.addr(),
        b"GET /x HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t/1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(raw_status(&answer), 400, "{answer}");
    assert!(
        answer.contains("x-robots-guard-reason: bad-request"),
        "{answer}"
    );
    let body = raw_body(&answer);
    assert!(body.contains("forward proxy"), "{body}");
    assert!(
        body.contains(&format!("HTTP_PROXY=http://{}", proxy.addr())),
        "{body}"
    );
}

#[tokio::test]
async fn bad_garbage_request_line_is_400_and_other_clients_are_still_served() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let mut garbage = JoinSet::new();
    for bytes in [
        &b"THIS IS NOT HTTP\r\n\r\n"[..],
        b"GET http://a b c HTTP/1.1\r\n\r\n",
        b"\x00\x01\x02\xff\r\n\r\n",
        b"GET http://127.0.0.1/ HTTP/1.1\r\nBad Header\r\n\r\n",
    ] {
        let addr = proxy.addr();
        garbage.spawn(async move { (bytes, raw(addr, bytes).await) });
    }
    let ok = get(proxy.addr(), &origin.url("/page")).await;
    assert_status(&ok, 200);
    while let Some(done) = garbage.join_next().await {
        let (bytes, answer) = done.expect("client task");
        let status = raw_status(&answer);
        assert!(
            (400..500).contains(&status),
            "{:?} got {answer:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert_status(&get(proxy.addr(), &origin.url("/again")).await, 200);
}

#[tokio::test]
async fn bad_unsupported_scheme_is_400() {
    let proxy = TestProxy::start(config()).await;
    let answer = raw(
        proxy.addr(),
        b"GET ftp://127.0.0.1/file HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: t/1\r\n\
          Connection: close\r\n\r\n",
    )
    .await;
    assert_eq!(raw_status(&answer), 400, "{answer}");
    assert!(
        raw_body(&answer).contains("unsupported scheme `ftp`"),
        "{answer}"
    );
}

// --- Malformed heads, smuggling, oversize heads (tables) -------------------------------

#[tokio::test]
async fn malformed_request_lines_are_400() {
    let mut bench = Bench::start().await;
    let host = bench.host();
    let storm = "\r\n".repeat(40_000);
    bench
        .check(vec![
            case("method only", "GET\r\n\r\n", 400, Layer::Hyper),
            case("no target", "GET  HTTP/1.1\r\n\r\n", 400, Layer::Hyper),
            case(
                "HTTP/9.9",
                format!("GET http://{host}/ HTTP/9.9\r\nHost: {host}\r\n\r\n"),
                400,
                Layer::Hyper,
            ),
            case(
                "HTTP/2.0 in an HTTP/1 request line",
                format!("GET http://{host}/ HTTP/2.0\r\nHost: {host}\r\n\r\n"),
                400,
                Layer::Hyper,
            ),
            case(
                "extra token after the version",
                format!("GET http://{host}/ HTTP/1.1 x\r\nHost: {host}\r\n\r\n"),
                400,
                Layer::Hyper,
            ),
            case(
                "tab in the method",
                format!("G\tET http://{host}/ HTTP/1.1\r\n\r\n"),
                400,
                Layer::Hyper,
            ),
            case(
                "binary junk",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\xff\r\n\r\n".to_vec(),
                400,
                Layer::Hyper,
            ),
            case(
                "NUL in the target",
                format!("GET http://{host}/a\0b HTTP/1.1\r\n\r\n"),
                400,
                Layer::Hyper,
            ),
            case(
                "scheme without host",
                "GET http:// HTTP/1.1\r\n\r\n",
                400,
                Layer::Hyper,
            ),
            // Leading empty lines are skipped (RFC 9112 §2.2), but 80 KB of them never
            // make a request head: the buffer limit answers.
            case("a lone CRLF storm", storm.clone(), 431, Layer::Hyper),
        ])
        .await;
    // A few empty lines before a good request are tolerated, as RFC 9112 §2.2 asks.
    let answer = raw(
        bench.proxy.addr(),
        format!(
            "\r\n\r\n\r\nGET http://{host}/after-crlf HTTP/1.1\r\nHost: {host}\r\n\
             User-Agent: t/1\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    assert_eq!(bench.origin_saw(), ["/after-crlf"]);
}

#[tokio::test]
async fn malformed_targets_are_400_from_the_pipeline() {
    let mut bench = Bench::start().await;
    let host = bench.host();
    let ip = bench.origin.addr().ip();
    let get = |target: String| {
        format!(
            "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t/1\r\nConnection: close\r\n\r\n"
        )
    };
    bench
        .check(vec![
            case(
                "port out of range",
                get(format!("http://{ip}:99999/x")),
                400,
                Layer::Pipeline("bad-request"),
            ),
            case(
                "port not a number",
                get(format!("http://{ip}:8o/x")),
                400,
                Layer::Pipeline("bad-request"),
            ),
            case(
                "brackets around a name",
                get("http://[example.com]/x".into()),
                400,
                Layer::Pipeline("bad-request"),
            ),
            case(
                "bad host characters",
                get("http://exa_mple$.com/x".into()),
                400,
                Layer::Pipeline("bad-request"),
            ),
            case(
                "authority-form outside CONNECT",
                get(host.clone()),
                400,
                Layer::Pipeline("bad-request"),
            ),
            case(
                "asterisk-form",
                get("*".into()),
                400,
                Layer::Pipeline("bad-request"),
            ),
            case(
                "CONNECT without a port",
                "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
                400,
                Layer::Pipeline("bad-request"),
            ),
        ])
        .await;
    assert!(bench.origin_saw().is_empty(), "{:?}", bench.origin_saw());
}

#[tokio::test]
async fn smuggling_attempts_are_refused_or_neutralised() {
    let mut bench = Bench::start().await;
    let host = bench.host();
    let smuggled = format!("GET http://{host}/smuggled HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let post = |framing: &str, body: &str| {
        format!(
            "POST http://{host}/post HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t/1\r\n\
             {framing}\r\n{body}"
        )
    };
    bench
        .check(vec![
            // Two different lengths: which one ends the body is ambiguous.
            case(
                "two different Content-Lengths",
                post(
                    "Content-Length: 5\r\nContent-Length: 60\r\n",
                    &format!("hello{smuggled}"),
                ),
                400,
                Layer::Hyper,
            ),
            case(
                "Content-Length list",
                post("Content-Length: 5, 60\r\n", &format!("hello{smuggled}")),
                400,
                Layer::Hyper,
            ),
            case(
                "negative Content-Length",
                post("Content-Length: -1\r\n", &smuggled),
                400,
                Layer::Hyper,
            ),
            case(
                "Content-Length with a sign",
                post("Content-Length: +5\r\n", &format!("hello{smuggled}")),
                400,
                Layer::Hyper,
            ),
            // Chunked must be the final coding of a request (RFC 9112 §6.3).
            case(
                "Transfer-Encoding: xchunked",
                post(
                    "Transfer-Encoding: xchunked\r\n",
                    &format!("0\r\n\r\n{smuggled}"),
                ),
                400,
                Layer::Hyper,
            ),
            case(
                "chunked, then identity",
                post(
                    "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                    &format!("0\r\n\r\n{smuggled}"),
                ),
                400,
                Layer::Hyper,
            ),
            case(
                "space before the colon",
                post(
                    "Transfer-Encoding : chunked\r\n",
                    &format!("0\r\n\r\n{smuggled}"),
                ),
                400,
                Layer::Hyper,
            ),
            case(
                "obs-fold continuation line",
                post(
                    "Transfer-Encoding:\r\n chunked\r\n",
                    &format!("0\r\n\r\n{smuggled}"),
                ),
                400,
                Layer::Hyper,
            ),
            case(
                "Transfer-Encoding in HTTP/1.0",
                format!(
                    "POST http://{host}/post HTTP/1.0\r\nHost: {host}\r\n\
                     Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}"
                ),
                400,
                Layer::Hyper,
            ),
        ])
        .await;
    assert!(bench.origin_saw().is_empty(), "{:?}", bench.origin_saw());

    // Content-Length and Transfer-Encoding together (either order). RFC 9112 §6.1 lets
    // a server refuse such a request, and a proxy whose origin read the length the
    // other way would let a second request through: it is a 400 that closes the
    // connection, and nothing is forwarded.
    for framing in [
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
    ] {
        let answer = raw(
            bench.proxy.addr(),
            post(framing, &format!("0\r\n\r\n{smuggled}")).as_bytes(),
        )
        .await;
        assert_eq!(raw_status(&answer), 400, "{framing}: {answer}");
        assert_eq!(
            raw_header(&answer, "x-robots-guard-reason"),
            Some("bad-request")
        );
        assert_eq!(
            answer.matches("HTTP/1.1 ").count(),
            1,
            "one answer: {answer}"
        );
        assert_eq!(raw_header(&answer, "connection"), Some("close"), "{answer}");
        assert!(bench.origin_saw().is_empty(), "{:?}", bench.origin_saw());
        bench.bystander_is_served().await;
    }

    // A body that looks like a request is just a body: the origin gets it inside /post.
    let body = smuggled.clone();
    let answer = raw(
        bench.proxy.addr(),
        post(
            &format!("Content-Length: {}\r\nConnection: close\r\n", body.len()),
            &body,
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(raw_status(&answer), 200, "{answer}");

    // A chunk size that overflows 64 bits: the head is fine, so the request reaches our
    // pipeline and is forwarded; hyper fails the body as it streams. The client's own
    // body failed, so the answer is our `400` (or a closed connection if hyper gave up
    // on the connection first), never a `502` blaming the origin, and never a second
    // request through.
    let answer = raw(
        bench.proxy.addr(),
        post(
            "Transfer-Encoding: chunked\r\n",
            &format!("fffffffffffffffff1\r\nxx\r\n0\r\n\r\n{smuggled}"),
        )
        .as_bytes(),
    )
    .await;
    let status = raw_status(&answer);
    assert!(status == 400, "chunk-size overflow: {answer}");
    assert!(answer.matches("HTTP/1.1 ").count() <= 1, "{answer}");
    bench.bystander_is_served().await;

    assert!(
        bench.origin_saw().iter().all(|p| p == "/post"),
        "the origin saw a smuggled request: {:?}",
        bench.origin_saw()
    );
}

#[tokio::test]
async fn invalid_header_bytes_are_400() {
    let mut bench = Bench::start().await;
    let host = bench.host();
    let with = |line: &[u8]| {
        let mut bytes = format!("GET http://{host}/x HTTP/1.1\r\nHost: {host}\r\n").into_bytes();
        bytes.extend_from_slice(line);
        bytes.extend_from_slice(b"\r\nUser-Agent: t/1\r\n\r\n");
        bytes
    };
    bench
        .check(vec![
            case("NUL in a value", with(b"X-A: a\0b"), 400, Layer::Hyper),
            case("bare CR in a value", with(b"X-A: a\rb"), 400, Layer::Hyper),
            case("DEL in a value", with(b"X-A: a\x7fb"), 400, Layer::Hyper),
            case("space in a name", with(b"X A: b"), 400, Layer::Hyper),
            case("parenthesis in a name", with(b"X(A): b"), 400, Layer::Hyper),
            case(
                "non-ASCII name",
                with("Ümlaut: b".as_bytes()),
                400,
                Layer::Hyper,
            ),
            case("empty name", with(b": b"), 400, Layer::Hyper),
            case("NUL in a name", with(b"X\0A: b"), 400, Layer::Hyper),
            case(
                "bare LF line ends throughout, then a bare CR",
                format!("GET http://{host}/x HTTP/1.1\nHost: {host}\r\rX: y\n\n"),
                400,
                Layer::Hyper,
            ),
        ])
        .await;
    assert!(bench.origin_saw().is_empty(), "{:?}", bench.origin_saw());
}

#[tokio::test]
async fn oversize_heads_are_431_and_long_urls_414() {
    let mut bench = Bench::start().await;
    let host = bench.host();
    let defaults = robots_guard::config::Config::default().proxy;
    let max_head = defaults.max_header_bytes.get();
    let max_url = defaults.max_url_length.get();
    let with_headers = |lines: String| {
        format!(
            "GET http://{host}/x HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t/1\r\n\
             Connection: close\r\n{lines}\r\n"
        )
    };
    let target = |length: usize| {
        let prefix = format!("http://{host}/");
        format!("{prefix}{}", "a".repeat(length - prefix.len()))
    };
    bench
        .check(vec![
            case(
                "one header over max_header_bytes",
                with_headers(format!("X-Big: {}\r\n", "b".repeat(max_head + 1))),
                431,
                Layer::Hyper,
            ),
            case(
                "many small headers over max_header_bytes",
                with_headers(
                    (0..99)
                        .map(|i| format!("X-{i}: {}\r\n", "v".repeat(max_head / 90)))
                        .collect(),
                ),
                431,
                Layer::Hyper,
            ),
            case(
                "more than 100 header fields",
                with_headers((0..150).map(|i| format!("X-{i}: v\r\n")).collect()),
                431,
                Layer::Hyper,
            ),
            case(
                "URL just over max_url_length",
                format!(
                    "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t/1\r\n\
                     Connection: close\r\n\r\n",
                    target(max_url + 1)
                ),
                414,
                Layer::Pipeline("uri-too-long"),
            ),
            case(
                "URL longer than the head buffer",
                format!(
                    "GET {} HTTP/1.1\r\nHost: {host}\r\n\r\n",
                    target(max_head * 2)
                ),
                431,
                Layer::Hyper,
            ),
        ])
        .await;
    // At the limits themselves, requests pass.
    let answer = raw(
        bench.proxy.addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t/1\r\nConnection: close\r\n\r\n",
            target(max_url)
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(
        raw_status(&answer),
        200,
        "{}",
        &answer[..answer.len().min(300)]
    );
    assert_eq!(bench.origin_saw().len(), 1);

    // A configured `max_url_length` is the one applied, and a URL over it is refused
    // before robots.txt is even fetched.
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config_with(|c| c.proxy.max_url_length = nonzero(100))).await;
    let answer = get(proxy.addr(), &origin.url(&format!("/{}", "a".repeat(100)))).await;
    assert_status(&answer, 414);
    assert_eq!(answer.reason(), Some("uri-too-long"));
    assert!(origin.requests().is_empty());
    assert_status(&get(proxy.addr(), &origin.url("/short")).await, 200);
}
