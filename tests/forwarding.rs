//! Forwarding through the plain-HTTP proxy: what reaches the origin and what comes back.
//! The origin's answer is returned as it is, a client connection serves request after
//! request (the proxy's own answers included), `Host` is replaced by the target's, `Via`
//! names the proxy both ways and hop-by-hop fields stay behind, bodies stream intact
//! both ways, an absolute URL without a path is the root, and a request that would come
//! back to the proxy (directly or through a relay) is a loop.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, scripted hyper origins
//! on loopback, and real clients (hyper's HTTP/1.1 client and raw sockets) sending
//! absolute-form requests through it. Every proxy is its own instance, so the robots.txt
//! cache never leaks between tests although every origin is on host `127.0.0.1`. That
//! streaming keeps memory bounded is checked in `proxy_memory.rs`, a binary of its own
//! because it measures the whole process.

mod support;

use std::time::Duration;

use http_body_util::BodyExt;
use support::body::{Generated, PatternCheck};
use support::origin::{Reply, TestOrigin};
use support::proxy::{
    assert_status, config, get, get_request, raw, raw_body, raw_header, raw_status, request, send,
    ProxyConn, TestProxy,
};
use support::{ROBOTS, TEST_USER_AGENT};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn forward_allowed_get_returns_the_origin_answer() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let answer = get(proxy.addr(), &origin.url("/public?q=1")).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "ok /public?q=1");
    assert_eq!(answer.header("content-type"), Some("text/plain"));
    assert_eq!(
        answer.reason(),
        None,
        "an origin answer has no proxy reason"
    );
    assert_eq!(origin.hits("/robots.txt"), 1);
    assert_eq!(origin.hits("/public"), 1);
}

#[tokio::test]
async fn forward_keep_alive_serves_several_requests_on_one_client_connection() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    for i in 0..5 {
        let answer = conn
            .fetch(get_request(&origin.url(&format!("/page/{i}"))))
            .await;
        assert_status(&answer, 200);
        assert_eq!(answer.text(), format!("ok /page/{i}"));
    }
    // Answers of the proxy itself keep the connection open too.
    let refused = conn.fetch(get_request(&origin.url("/private"))).await;
    assert_status(&refused, 403);
    let answer = conn.fetch(get_request(&origin.url("/after"))).await;
    assert_status(&answer, 200);
    assert!(!conn.is_closed());
    assert_eq!(origin.hits("/robots.txt"), 1, "robots.txt is cached");
}

#[tokio::test]
async fn forward_sets_via_and_host_and_strips_hop_by_hop_fields() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::text(200, "ok")
                .header("connection", "x-bar")
                .header("x-bar", "hop")
                .header("keep-alive", "timeout=5")
                .header("x-end-to-end", "kept"),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    // Raw, so every field is sent exactly as written. RFC 9112 §3.2.2: a proxy replaces
    // the Host it received with the target's.
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: wrong.example\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         Proxy-Connection: keep-alive\r\nConnection: x-foo, close\r\nX-Foo: hop\r\n\
         Proxy-Authorization: Basic eDp5\r\nKeep-Alive: timeout=5\r\nVia: 1.0 fred\r\n\
         X-Kept: yes\r\n\r\n",
        origin.url("/headers")
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");

    let seen = origin.last_request().expect("the origin saw the request");
    assert_eq!(seen.path, "/headers");
    assert_eq!(
        seen.header("host"),
        Some(origin.addr().to_string().as_str())
    );
    let via = format!("1.0 fred, 1.1 {}", proxy.pseudonym());
    assert_eq!(seen.header("via"), Some(via.as_str()));
    assert!(proxy.pseudonym().starts_with("robots-guard-"));
    for name in [
        "proxy-connection",
        "connection",
        "x-foo",
        "proxy-authorization",
        "keep-alive",
    ] {
        assert_eq!(seen.header(name), None, "{name} reached the origin");
    }
    assert_eq!(seen.header("x-kept"), Some("yes"));
    assert_eq!(seen.header("user-agent"), Some(TEST_USER_AGENT));

    // The way back: the origin's hop-by-hop fields stay behind, Via names the proxy.
    assert_eq!(raw_header(&answer, "x-bar"), None, "{answer}");
    assert_eq!(raw_header(&answer, "keep-alive"), None, "{answer}");
    assert_eq!(raw_header(&answer, "x-end-to-end"), Some("kept"));
    let via = format!("1.1 {}", proxy.pseudonym());
    assert_eq!(raw_header(&answer, "via"), Some(via.as_str()));
    assert_eq!(raw_body(&answer), "ok");
}

#[tokio::test]
async fn forward_streams_a_chunked_post_body_intact() {
    let origin = TestOrigin::start(|req| async move {
        if req.uri().path() == "/robots.txt" {
            return Reply::empty(404);
        }
        let method = req.method().clone();
        let check = match PatternCheck::read(req.into_body()).await {
            Ok(check) => check,
            Err(e) => return Reply::text(500, format!("body broke: {e}")),
        };
        Reply::text(
            200,
            format!("{method} {} {:?}", check.len(), check.first_bad()),
        )
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    const MIB: u64 = 1 << 20;
    let body = Generated::new(MIB, 10_000).boxed();
    let answer = send(proxy.addr(), request("POST", &origin.url("/upload"), body)).await;
    assert_status(&answer, 200);
    assert_eq!(answer.text(), format!("POST {MIB} None"));
    let seen = origin.last_request().expect("the origin saw the upload");
    assert_eq!(seen.header("content-length"), None);
    assert_eq!(seen.header("transfer-encoding"), Some("chunked"));
}

#[tokio::test]
async fn forward_streams_a_large_download_intact() {
    const SIZE: u64 = 64 << 20;
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::empty(404),
            _ => Reply::Http(http::Response::new(Generated::new(SIZE, 64 * 1024).boxed())),
        }
    })
    .await;
    let proxy = TestProxy::start(config()).await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let response = conn
        .send(get_request(&origin.url("/big")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let check = tokio::time::timeout(
        Duration::from_secs(30),
        PatternCheck::read(response.into_body()),
    )
    .await
    .expect("64 MiB in time")
    .expect("the body streams without error");
    assert_eq!(check.len(), SIZE);
    assert_eq!(check.first_bad(), None);
}

// --- Targets ---------------------------------------------------------------------------

#[tokio::test]
async fn odd_absolute_url_without_a_path_is_checked_and_forwarded_as_root() {
    let origin = TestOrigin::site("User-agent: *\nDisallow: /$\n").await;
    let proxy = TestProxy::start(config()).await;
    let request = format!(
        "GET http://{} HTTP/1.1\r\nHost: {0}\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         Connection: close\r\n\r\n",
        origin.addr()
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-rule"),
        Some("disallow: /$")
    );

    let origin = TestOrigin::site(ROBOTS).await;
    let request = format!(
        "GET http://{} HTTP/1.1\r\nHost: {0}\r\nUser-Agent: {TEST_USER_AGENT}\r\n\
         Connection: close\r\n\r\n",
        origin.addr()
    );
    let answer = raw(proxy.addr(), request.as_bytes()).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    assert_eq!(origin.last_request().expect("forwarded").path, "/");
}

// --- Loops -----------------------------------------------------------------------------

#[tokio::test]
async fn loop_request_to_the_proxy_itself_is_508() {
    let proxy = TestProxy::start(config()).await;
    let port = proxy.addr().port();
    for url in [
        format!("http://127.0.0.1:{port}/x"),
        format!("http://localhost:{port}/x"),
    ] {
        let answer = get(proxy.addr(), &url).await;
        assert_status(&answer, 508);
        assert_eq!(answer.reason(), Some("loop"));
    }
}

/// A TCP relay on `127.0.0.1:0` that pipes every connection to `to`.
async fn relay(to: std::net::SocketAddr) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
    let port = listener.local_addr().expect("relay address").port();
    let task = tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (port, task)
}

#[tokio::test]
async fn loop_through_a_relay_back_to_the_proxy_is_508() {
    // The target is a relay to the proxy: the address differs, so only `Via` shows that
    // the forwarded request came back.
    let proxy = TestProxy::start(config()).await;
    let (port, relay) = relay(proxy.addr()).await;
    let answer = get(proxy.addr(), &format!("http://127.0.0.1:{port}/x")).await;
    assert_status(&answer, 508);
    assert_eq!(answer.reason(), Some("loop"));
    relay.abort();
}

/// A real HTTP/1.0 origin (Python's `http.server`, which answers HTTP/1.0 and
/// closes after each answer), started in a directory of its own.
struct Http10Origin {
    child: std::process::Child,
    port: u16,
}

impl Drop for Http10Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn http10_origin() -> Http10Origin {
    let dir = support::temp_dir("http10-origin");
    std::fs::write(
        dir.join("robots.txt"),
        "User-agent: *\nDisallow: /private/\n",
    )
    .expect("robots.txt");
    std::fs::write(dir.join("page.html"), "a page from an HTTP/1.0 server\n").expect("page");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        listener.local_addr().expect("addr").port()
    };
    // Owned at once, so it is killed and waited for however the test ends.
    let origin = Http10Origin {
        child: std::process::Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
            .arg(&dir)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m http.server"),
        port,
    };
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return origin;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("python3 -m http.server did not start on port {port}");
}

/// Behind an HTTP/1.0 origin the client still gets HTTP/1.1 and keeps its
/// connection: the origin's version and its closing are its own connection's
/// business, not the client's.
#[tokio::test]
async fn an_http10_origin_does_not_close_the_clients_keep_alive_connection() {
    let origin = http10_origin().await;
    let proxy = TestProxy::start(config()).await;
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let url = format!("http://127.0.0.1:{}/page.html", origin.port);
    for _ in 0..3 {
        let response = conn.send(get_request(&url)).await.expect("answered");
        assert_eq!(response.version(), http::Version::HTTP_11);
        let answer = support::proxy::collect(response).await.expect("body");
        assert_status(&answer, 200);
        assert_eq!(answer.text(), "a page from an HTTP/1.0 server\n");
        assert!(!conn.is_closed(), "the client's connection stays open");
    }
    let refused = conn
        .fetch(get_request(&format!(
            "http://127.0.0.1:{}/private/x",
            origin.port
        )))
        .await;
    assert_status(&refused, 403);
    assert!(!conn.is_closed());
}
