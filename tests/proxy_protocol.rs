//! `proxy.proxy_protocol`: behind a load balancer, each connection starts with a PROXY
//! protocol header (v1 text, v2 binary) and the client it names is the client: for
//! `allow_clients`, for profiles selected by `clients`, and in what the proxy records. A
//! connection without a valid header is closed unanswered and counted.
//!
//! The headers are written over a raw TCP connection, by hand (v1) and with `ppp`'s
//! builder (v2), followed by an HTTP request in the same write, as a balancer sends them.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use ppp::v2;
use support::origin::TestOrigin;
use support::proxy::{config_with, raw_header, raw_status, TestProxy};
use support::ROBOTS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A proxy that reads PROXY protocol headers, admitting clients in `allow` only, with a
/// profile `balanced` for clients in 10.9.0.0/16.
async fn proxy(allow: &[&str]) -> TestProxy {
    let allow: Vec<ipnet::IpNet> = allow.iter().map(|net| net.parse().unwrap()).collect();
    let profiles = robots_guard::config::Config::from_toml(
        "[[profile]]\nname = \"balanced\"\nclients = [\"10.9.0.0/16\"]\n",
        "test profile",
    )
    .expect("a valid profile");
    TestProxy::start(config_with(|c| {
        c.proxy.proxy_protocol = true;
        c.proxy.allow_clients = allow;
        c.proxy.header_read_timeout = Duration::from_millis(500);
        c.profiles = profiles.profiles;
    }))
    .await
}

/// A `GET url` that closes the connection after its answer.
fn get(url: &str) -> Vec<u8> {
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default();
    format!(
        "GET {url} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {}\r\nConnection: close\r\n\r\n",
        support::TEST_USER_AGENT
    )
    .into_bytes()
}

/// Writes `bytes` to a new connection to `proxy` in one write and returns everything
/// the proxy sends until it closes (empty when it closes without answering).
async fn exchange(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer));
    // A reset after unread input still counts as closed.
    let _ = read.await.expect("the proxy answers or closes in time");
    String::from_utf8_lossy(&answer).into_owned()
}

/// `header` followed by `request`.
fn joined(header: &[u8], request: &[u8]) -> Vec<u8> {
    [header, request].concat()
}

/// A v2 `PROXY` header for a TCP connection from `source`.
fn v2_proxy(source: &str) -> Vec<u8> {
    let source: SocketAddr = source.parse().unwrap();
    let destination: SocketAddr = if source.is_ipv4() {
        "10.0.0.1:3128".parse().unwrap()
    } else {
        "[2001:db8::1]:3128".parse().unwrap()
    };
    v2::Builder::with_addresses(
        v2::Version::Two | v2::Command::Proxy,
        v2::Protocol::Stream,
        (source, destination),
    )
    .write_tlv(v2::Type::NoOp, b"padding")
    .expect("a TLV")
    .build()
    .expect("a v2 header")
}

/// The `robots_guard_proxy_protocol_rejected_total` count for `reason`.
fn rejected(proxy: &TestProxy, reason: &str) -> u64 {
    let text = proxy.live().services().metrics.encode().expect("metrics");
    let prefix = format!("robots_guard_proxy_protocol_rejected_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

#[tokio::test]
async fn a_v1_header_s_address_is_the_one_allow_clients_checks() {
    let origin = TestOrigin::site(ROBOTS).await;
    // Loopback, the real peer, is not allowed: only the header's network is.
    let proxy = proxy(&["10.1.2.0/24"]).await;
    let request = get(&origin.url("/page"));

    let header = b"PROXY TCP4 10.1.2.3 10.0.0.1 40000 3128\r\n";
    let answer = exchange(proxy.addr(), &joined(header, &request)).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");

    let header = b"PROXY TCP4 192.0.2.9 10.0.0.1 40000 3128\r\n";
    let answer = exchange(proxy.addr(), &joined(header, &request)).await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-reason"),
        Some("client-not-allowed")
    );
    assert_eq!(origin.hits("/page"), 1);
}

#[tokio::test]
async fn a_v1_tcp6_header_is_read_too() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = proxy(&["2001:db8::/32"]).await;
    let header = b"PROXY TCP6 2001:db8::7 2001:db8::1 40000 3128\r\n";
    let answer = exchange(proxy.addr(), &joined(header, &get(&origin.url("/x")))).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn a_v2_header_selects_the_profile_and_is_the_recorded_client() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = proxy(&["10.0.0.0/8"]).await;
    let header = v2_proxy("10.9.4.5:51000");

    let answer = exchange(
        proxy.addr(),
        &joined(&header, &get(&origin.url("/private"))),
    )
    .await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-reason"),
        Some("robots-disallow")
    );
    assert_eq!(
        raw_header(&answer, "x-robots-guard-profile"),
        Some("balanced")
    );
    let denials = proxy.live().services().metrics.denials(None);
    assert_eq!(
        denials.first().map(|d| d.client),
        Some("10.9.4.5:51000".parse().unwrap()),
        "the status page names the header's client"
    );

    // Outside the profile's network: the top level's robot.
    let header = v2_proxy("10.7.0.1:51000");
    let answer = exchange(
        proxy.addr(),
        &joined(&header, &get(&origin.url("/private"))),
    )
    .await;
    assert_eq!(
        raw_header(&answer, "x-robots-guard-profile"),
        Some("default")
    );

    // Bytes after the header in a later write arrive too.
    let header = v2_proxy("10.9.4.6:51000");
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream.write_all(&header).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(&get(&origin.url("/ok"))).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(raw_status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn a_v2_local_header_is_the_balancer_itself() {
    let origin = TestOrigin::site(ROBOTS).await;
    // The peer (loopback) is allowed; no header address would be.
    let proxy = proxy(&["127.0.0.0/8"]).await;
    let local = v2::Builder::with_addresses(
        v2::Version::Two | v2::Command::Local,
        v2::Protocol::Unspecified,
        v2::Addresses::Unspecified,
    )
    .build()
    .expect("a LOCAL header");
    let answer = exchange(proxy.addr(), &joined(&local, &get(&origin.url("/health")))).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");

    let unknown = b"PROXY UNKNOWN\r\n";
    let answer = exchange(proxy.addr(), &joined(unknown, &get(&origin.url("/health")))).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
}

#[tokio::test]
async fn connections_without_a_valid_header_are_closed_and_counted() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = proxy(&["0.0.0.0/0", "::/0"]).await;
    let request = get(&origin.url("/page"));

    // No header: the request itself is not answered.
    assert_eq!(exchange(proxy.addr(), &request).await, "");
    // Malformed: an address out of range, a v2 header with a bad command.
    let bad_v1 = b"PROXY TCP4 999.1.2.3 10.0.0.1 40000 3128\r\n";
    assert_eq!(exchange(proxy.addr(), &joined(bad_v1, &request)).await, "");
    let mut bad_v2 = v2_proxy("10.1.1.1:1000");
    bad_v2[12] = 0x2f;
    assert_eq!(exchange(proxy.addr(), &joined(&bad_v2, &request)).await, "");

    // Truncated: the peer stops sending half-way through and closes its side.
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream.write_all(b"PROXY TCP4 10.1.").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    assert!(answer.is_empty());

    // Timeout: half a header, then nothing (header_read_timeout is 500 ms).
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(&v2_proxy("10.1.1.1:1000")[..20])
        .await
        .unwrap();
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer));
    let _ = closed.await.expect("closed after the header timeout");
    assert!(answer.is_empty());

    assert_eq!(origin.hits("/page"), 0);
    assert_eq!(rejected(&proxy, "missing"), 1);
    assert_eq!(rejected(&proxy, "malformed"), 2);
    assert_eq!(rejected(&proxy, "truncated"), 1);
    assert_eq!(rejected(&proxy, "timeout"), 1);
}

#[tokio::test]
async fn without_the_key_a_header_is_not_read() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(support::proxy::config()).await;
    let header = b"PROXY TCP4 10.1.2.3 10.0.0.1 40000 3128\r\n";
    let answer = exchange(proxy.addr(), &joined(header, &get(&origin.url("/page")))).await;
    assert_eq!(raw_status(&answer), 400, "{answer}");
}

/// Through the real binary: the access log's `client` is the header's, and rejected
/// connections are warned about.
#[tokio::test(flavor = "multi_thread")]
async fn the_access_log_names_the_header_s_client() {
    use support::served::{message, Served};
    let origin = TestOrigin::site(ROBOTS).await;
    let dir = support::temp_dir("proxy-protocol");
    let config = dir.join("config.toml");
    let access = dir.join("access.jsonl");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\nproxy_protocol = true\n\
             allow_clients = [\"10.1.2.0/24\"]\n\
             [identity]\nuser_agent = \"pass\"\n[rate_limit]\ndefault_delay = \"0s\"\n\
             [tls]\nmode = \"tunnel\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             [log]\nformat = \"json\"\naccess_log = \"{}\"\n",
            access.display()
        ),
    )
    .expect("write config");
    let mut served = Served::start(&config);
    let ready = served.wait_for("ready line", |v| message(v).contains("proxy ready"));
    let proxy: SocketAddr = ready["listen"]
        .as_str()
        .expect("listen")
        .parse()
        .expect("an address");

    let header = b"PROXY TCP4 10.1.2.3 10.0.0.1 40000 3128\r\n";
    let answer = exchange(proxy, &joined(header, &get(&origin.url("/page")))).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    assert_eq!(exchange(proxy, &get(&origin.url("/page"))).await, "");
    served.wait_for("a warning", |v| {
        message(v).contains("without a valid PROXY protocol header")
    });

    served.signal("TERM");
    served.wait_for("stopped", |v| message(v).contains("robots-guard stopped"));
    let log = std::fs::read_to_string(&access).expect("access log");
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(records.len(), 1, "{log}");
    assert_eq!(records[0]["client"], "10.1.2.3:40000");
    assert_eq!(records[0]["outcome"], "allowed");
}
