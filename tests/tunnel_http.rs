//! Plain HTTP inside a CONNECT tunnel, as Node's undici (and so Node's
//! `fetch` with a proxy) sends every request, `http://` ones included: the
//! tunnel's first bytes say HTTP, so each request inside runs through the
//! pipeline as scheme `http`, in intercept and in tunnel mode alike, with its
//! target normalised and judged like any other. Real proxy, scripted origin,
//! raw sockets as the client.

mod support;

use robots_guard::config::TlsMode;
use support::origin::{Reply, TestOrigin};
use support::proxy::{config_with, connect_head, raw_header, raw_status, TestProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";

async fn site() -> TestOrigin {
    TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, ROBOTS),
            _ => Reply::text(200, format!("ok {}", req.uri())),
        }
    })
    .await
}

/// Sends one origin-form request on the tunnel and reads one answer (its
/// head and a `Content-Length` body).
async fn exchange(tunnel: &mut TcpStream, host: &str, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: NodeBot/1.0\r\n\r\n");
    tunnel.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        assert_eq!(
            tunnel.read(&mut byte).await.expect("read head"),
            1,
            "closed"
        );
        answer.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&answer).into_owned();
    let length: usize = raw_header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .expect("a Content-Length");
    let mut body = vec![0u8; length];
    tunnel.read_exact(&mut body).await.expect("read body");
    format!("{head}{}", String::from_utf8_lossy(&body))
}

async fn plain_http_through_a_tunnel(mode: TlsMode) {
    let origin = site().await;
    let port = origin.port();
    let proxy = TestProxy::start(config_with(|c| {
        c.tls.mode = mode;
        c.tls.connect_ports = vec![port];
    }))
    .await;
    let host = format!("127.0.0.1:{port}");
    let (mut tunnel, head) = connect_head(proxy.addr(), &host, "").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // Keep-alive: several requests on one tunnel, each judged on its own.
    let page = exchange(&mut tunnel, &host, "/page?q=1").await;
    assert_eq!(raw_status(&page), 200, "{page}");
    assert!(page.ends_with("ok /page?q=1"), "{page}");
    let refused = exchange(&mut tunnel, &host, "/private/x").await;
    assert_eq!(raw_status(&refused), 403, "{refused}");
    assert_eq!(
        raw_header(&refused, "x-robots-guard-reason"),
        Some("robots-disallow")
    );
    // Normalised like any request: no way around a rule in a tunnel either.
    let respelled = exchange(&mut tunnel, &host, "/%70rivate/x").await;
    assert_eq!(raw_status(&respelled), 403, "{respelled}");
    let forwarded = exchange(&mut tunnel, &host, "/p%61ge/./a").await;
    assert!(forwarded.ends_with("ok /page/a"), "{forwarded}");

    let seen: Vec<String> = origin.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(seen, ["/robots.txt", "/page?q=1", "/page/a"]);
    // The origin saw the identity and the proxy's Via.
    let last = origin.last_request().expect("forwarded");
    assert_eq!(last.header("user-agent"), Some("NodeBot/1.0"));
    assert!(last
        .header("via")
        .is_some_and(|v| v.contains(proxy.pseudonym())));
}

#[tokio::test]
async fn plain_http_in_a_tunnel_runs_through_the_pipeline_in_intercept_mode() {
    plain_http_through_a_tunnel(TlsMode::Intercept).await;
}

#[tokio::test]
async fn plain_http_in_a_tunnel_runs_through_the_pipeline_in_tunnel_mode() {
    plain_http_through_a_tunnel(TlsMode::Tunnel).await;
}

#[tokio::test]
async fn ambiguous_length_inside_a_tunnel_is_400_and_closes() {
    let origin = site().await;
    let port = origin.port();
    let proxy = TestProxy::start(config_with(|c| c.tls.connect_ports = vec![port])).await;
    let host = format!("127.0.0.1:{port}");
    let (mut tunnel, head) = connect_head(proxy.addr(), &host, "").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let request = format!(
        "POST /form HTTP/1.1\r\nHost: {host}\r\nUser-Agent: NodeBot/1.0\r\n\
         Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    );
    tunnel.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let _ = tunnel.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(raw_status(&answer), 400, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-reason"),
        Some("bad-request")
    );
    assert!(origin.requests().iter().all(|r| r.path != "/form"));
}

/// In tunnel mode the CONNECT is judged for the `https` origin. When that
/// origin's robots.txt cannot be fetched (here: the origin speaks plain
/// HTTP), the tunnel opens, and only the first bytes tell: plain HTTP is
/// served (above), TLS is closed without reaching the origin.
#[tokio::test]
async fn a_blind_tls_tunnel_to_an_origin_without_https_robots_is_closed() {
    let origin = site().await;
    let port = origin.port();
    let proxy = TestProxy::start(config_with(|c| {
        c.tls.mode = TlsMode::Tunnel;
        c.tls.connect_ports = vec![port];
    }))
    .await;
    let (mut tunnel, head) = connect_head(proxy.addr(), &format!("127.0.0.1:{port}"), "").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The start of a TLS ClientHello.
    tunnel
        .write_all(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03")
        .await
        .expect("send");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tunnel.read_to_end(&mut rest),
    )
    .await;
    assert!(closed.is_ok(), "the tunnel was closed");
    assert!(rest.is_empty(), "nothing came back: {rest:?}");
    // The origin saw no relayed bytes: only the proxy's robots.txt attempt
    // (TLS to a plain-HTTP server, which fails before any request).
    assert!(origin.requests().is_empty(), "{:?}", origin.requests());
}
