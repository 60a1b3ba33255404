//! The real proxy on `127.0.0.1:0` ([`TestProxy`], optionally with its admin listener)
//! and clients that talk to it: hyper's HTTP/1.1 client over a TCP connection to the
//! proxy, sending absolute-form URIs ([`ProxyConn`], [`get`], [`send`]), a raw socket for
//! requests hyper would not write ([`raw`]), and CONNECT tunnels with TLS through the
//! proxy's CA ([`connect_head`], [`intercept`]).
//!
//! ```ignore
//! let origin = TestOrigin::serving(200, "hello\n").await;
//! let proxy = TestProxy::start(config()).await;
//! let answer = get(proxy.addr(), &origin.url("/x")).await;
//! assert_eq!(answer.status, 200);
//! ```

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use robots_guard::admin::AdminServer;
use robots_guard::config::Config;
use robots_guard::proxy::{Live, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::origin::{BoxError, ReplyBody};
use super::{TEST_FROM, TEST_USER_AGENT};

/// How long a client helper waits for a whole answer before failing the test.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A configuration for tests: listen on `127.0.0.1:0`, the test identity as defaults, no
/// pacing (`default_delay` 0, 1000 requests per host), `fetch_timeout` 2 s, upstream
/// timeouts 2 s (connect) and 5 s (first byte). Everything else is the default, including
/// `user_agent = "require"` and `from = "fill"`, and a CA in a directory of
/// its own.
pub fn config() -> Config {
    let mut config = Config::default();
    config.proxy.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    // Each proxy gets its own interception CA: tests run in parallel, and
    // the default `certs/` path would have them race to create one (and
    // would write into the repository).
    let dir = super::temp_dir("proxy-ca");
    config.tls.ca_cert = dir.join("ca.pem");
    config.tls.ca_key = dir.join("ca.key");
    config.proxy.upstream_connect_timeout = Duration::from_secs(2);
    config.proxy.upstream_timeout = Duration::from_secs(5);
    config.identity.default_user_agent = TEST_USER_AGENT.to_owned();
    config.identity.default_from = TEST_FROM.to_owned();
    config.robots.fetch_timeout = Duration::from_secs(2);
    config.rate_limit.default_delay = Duration::ZERO;
    config.rate_limit.max_per_host = NonZeroU32::new(1000).expect("non-zero");
    config.rate_limit.max_wait = Duration::from_secs(10);
    config
}

/// [`config`] with `f` applied.
pub fn config_with(f: impl FnOnce(&mut Config)) -> Config {
    let mut config = config();
    f(&mut config);
    config
}

/// A proxy running in a task of the test's runtime (with its admin listener, if started
/// by [`TestProxy::start_with_admin`]); aborted when dropped.
pub struct TestProxy {
    addr: SocketAddr,
    live: Live,
    ca_cert: PathBuf,
    admin: Option<(SocketAddr, JoinHandle<()>)>,
    stop: Option<oneshot::Sender<()>>,
    run: Option<JoinHandle<()>>,
}

impl TestProxy {
    /// Binds `config` (whose `listen` should be `127.0.0.1:0`) and runs the proxy until
    /// [`TestProxy::shutdown`] or drop.
    pub async fn start(config: Config) -> TestProxy {
        let server = Server::bind(&config).await.expect("bind the proxy");
        TestProxy::spawn(server, &config, None)
    }

    /// [`TestProxy::start`], plus the admin listener on `config.admin.listen` (which
    /// should be `127.0.0.1:0`), following reloads as `serve`'s does.
    pub async fn start_with_admin(config: Config) -> TestProxy {
        let server = Server::bind(&config).await.expect("bind the proxy");
        let admin = AdminServer::bind(config.admin.listen, server.live())
            .await
            .expect("bind the admin listener");
        let admin_addr = admin.local_addr();
        let admin = (admin_addr, tokio::spawn(admin.run()));
        TestProxy::spawn(server, &config, Some(admin))
    }

    fn spawn(
        server: Server,
        config: &Config,
        admin: Option<(SocketAddr, JoinHandle<()>)>,
    ) -> TestProxy {
        let addr = server.local_addr();
        let live = server.live();
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            let stop = async move {
                let _ = stopped.await;
            };
            server.run(stop).await.expect("the proxy runs and drains");
        });
        TestProxy {
            addr,
            live,
            ca_cert: config.tls.ca_cert.clone(),
            admin,
            stop: Some(stop),
            run: Some(run),
        }
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin listener's address.
    ///
    /// # Panics
    ///
    /// If the proxy was not started by [`TestProxy::start_with_admin`].
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .as_ref()
            .map(|(addr, _)| *addr)
            .expect("started with start_with_admin")
    }

    /// The proxy's live settings and services, and its reload (what SIGHUP does).
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The proxy's interception CA certificate (PEM), created at start in intercept mode.
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    /// The name this proxy puts in `Via`.
    pub fn pseudonym(&self) -> &str {
        self.live.services().via.pseudonym()
    }

    /// Fires the shutdown future and returns the task running `Server::run`, which ends
    /// when in-flight requests have drained.
    pub fn shutdown(&mut self) -> JoinHandle<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.run.take().expect("shutdown called once")
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        if let Some(run) = &self.run {
            run.abort();
        }
        if let Some((_, admin)) = &self.admin {
            admin.abort();
        }
    }
}

/// A complete answer: status, headers and the whole body.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// Asserts the answer's status, showing its headers and body if it differs.
#[track_caller]
pub fn assert_status(answer: &Answer, status: u16) {
    assert_eq!(
        answer.status.as_u16(),
        status,
        "unexpected answer: {:?} {}",
        answer.headers,
        answer.text()
    );
}

impl Answer {
    /// The value of header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `X-Robots-Guard-Reason`.
    pub fn reason(&self) -> Option<&str> {
        self.header("x-robots-guard-reason")
    }
}

/// An empty request body.
pub fn empty() -> ReplyBody {
    Empty::<Bytes>::new().map_err(BoxError::from).boxed()
}

/// A `GET` of absolute `url` with the test `User-Agent` and a `Host` naming the target.
pub fn get_request(url: &str) -> Request<ReplyBody> {
    request("GET", url, empty())
}

/// A `GET` of absolute `url` with a `Host` naming the target and no `User-Agent`.
pub fn anonymous_get_request(url: &str) -> Request<ReplyBody> {
    let mut request = get_request(url);
    request.headers_mut().remove(http::header::USER_AGENT);
    request
}

/// A request of `method` for absolute `url` with `body`, the test `User-Agent` and a
/// `Host` naming the target.
pub fn request(method: &str, url: &str, body: ReplyBody) -> Request<ReplyBody> {
    let uri: http::Uri = url.parse().expect("test URL");
    let host = uri.authority().expect("absolute test URL").to_string();
    Request::builder()
        .method(method)
        .uri(uri)
        .header("host", host)
        .header("user-agent", TEST_USER_AGENT)
        .body(body)
        .expect("test request")
}

/// One HTTP/1.1 client connection to the proxy; requests on it reuse the connection.
pub struct ProxyConn {
    sender: SendRequest<ReplyBody>,
    driver: JoinHandle<()>,
}

impl ProxyConn {
    /// Connects to the proxy at `proxy`.
    pub async fn open(proxy: SocketAddr) -> ProxyConn {
        let stream = TcpStream::connect(proxy)
            .await
            .expect("connect to the proxy");
        ProxyConn::over(stream).await
    }

    /// An HTTP/1.1 client connection over `io`: a TCP connection to the proxy, or an
    /// intercepted tunnel's TLS stream (see [`intercept`]), where requests are in
    /// origin form.
    pub async fn over<S>(io: S) -> ProxyConn
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) = http1::handshake(TokioIo::new(io))
            .await
            .expect("HTTP/1.1 handshake");
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        ProxyConn { sender, driver }
    }

    /// Sends `request` and returns the response with its body still streaming.
    ///
    /// # Errors
    ///
    /// hyper's error when the connection fails.
    pub async fn send(&mut self, request: Request<ReplyBody>) -> hyper::Result<Response<Incoming>> {
        self.sender.ready().await?;
        self.sender.send_request(request).await
    }

    /// Sends `request` and reads the whole answer (panics on a broken answer).
    pub async fn fetch(&mut self, request: Request<ReplyBody>) -> Answer {
        let exchange = async {
            let response = self.send(request).await.expect("an answer from the proxy");
            collect(response).await.expect("a complete body")
        };
        tokio::time::timeout(ANSWER_TIMEOUT, exchange)
            .await
            .expect("an answer in time")
    }

    /// Sends `request` and reads the whole answer, or hyper's error if the connection
    /// or the body breaks off (a request cut by a shutdown, say).
    ///
    /// # Errors
    ///
    /// hyper's error when the exchange fails.
    pub async fn try_fetch(&mut self, request: Request<ReplyBody>) -> hyper::Result<Answer> {
        let response = self.send(request).await?;
        collect(response).await
    }

    /// Whether the connection is closed (hyper saw it end).
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

impl Drop for ProxyConn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Reads the whole body of `response`.
///
/// # Errors
///
/// hyper's error when the body breaks off.
pub async fn collect(response: Response<Incoming>) -> hyper::Result<Answer> {
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// Sends `request` on a new connection to the proxy and reads the whole answer.
pub async fn send(proxy: SocketAddr, request: Request<ReplyBody>) -> Answer {
    ProxyConn::open(proxy).await.fetch(request).await
}

/// `GET url` through the proxy on a new connection (see [`get_request`]).
pub async fn get(proxy: SocketAddr, url: &str) -> Answer {
    send(proxy, get_request(url)).await
}

/// Writes `bytes` to a new connection to the proxy and returns everything it answers until
/// it closes the connection (send `Connection: close` to make it), as lossy text.
///
/// Writing runs apart from reading and its errors are ignored: the proxy may answer and
/// close before it has read all of an oversize head, and that is fine. The write side is
/// kept open until the answer is read, since a half-close could end the exchange early.
pub async fn raw(proxy: SocketAddr, bytes: &[u8]) -> String {
    let exchange = async {
        let stream = TcpStream::connect(proxy)
            .await
            .expect("connect to the proxy");
        let (mut reader, mut writer) = stream.into_split();
        let bytes = bytes.to_vec();
        let write = tokio::spawn(async move {
            let _ = writer.write_all(&bytes).await;
            writer
        });
        let mut answer = Vec::new();
        // A reset after the answer (the proxy closing with unread input) still leaves the
        // answer read so far.
        let _ = reader.read_to_end(&mut answer).await;
        drop(write.await);
        String::from_utf8_lossy(&answer).into_owned()
    };
    tokio::time::timeout(ANSWER_TIMEOUT, exchange)
        .await
        .expect("the proxy answers and closes in time")
}

/// The status code of a raw answer (`HTTP/1.1 400 Bad Request...` -> 400), 0 if none.
pub fn raw_status(answer: &str) -> u16 {
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// The value of header `name` (any case) in the head of a raw answer, if present.
pub fn raw_header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer
        .split_once("\r\n\r\n")
        .map_or(answer, |(head, _)| head);
    head.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}

/// The body of a raw answer (everything after the blank line).
pub fn raw_body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

/// A non-zero `usize`, for config fields.
pub fn nonzero(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).expect("non-zero")
}

/// Sends `CONNECT target` with `extra` header lines (each ending in CRLF) and reads the
/// proxy's answer head, one byte at a time so nothing after it is consumed: the stream is
/// then the tunnel (on `200`). The head is what arrived before a close, if the proxy closed.
pub async fn connect_head(proxy: SocketAddr, target: &str, extra: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.expect("connect to proxy");
    let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .expect("send CONNECT");
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.expect("read CONNECT answer") == 0 {
            break;
        }
        answer.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&answer).into_owned())
}

/// A TLS client trusting only the PEM certificates in `root_pem`, offering `alpn`.
pub fn client_tls(root_pem: &[u8], alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &root_pem[..]) {
        roots.add(cert.expect("PEM cert")).expect("add root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A TLS handshake for `127.0.0.1` over `stream` (a tunnel), trusting `root_pem`.
pub async fn tls_handshake(
    stream: TcpStream,
    root_pem: &[u8],
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    client_tls(root_pem, alpn).connect(name, stream).await
}

/// An intercepted tunnel: `CONNECT target` (with `extra` header lines) must be answered
/// `200`, then a TLS handshake for `127.0.0.1` trusting the proxy's CA (the PEM file at
/// `ca_pem`), offering `alpn`.
pub async fn intercept(
    proxy: SocketAddr,
    target: &str,
    extra: &str,
    ca_pem: &std::path::Path,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let (stream, head) = connect_head(proxy, target, extra).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let ca = std::fs::read(ca_pem).expect("the proxy's CA");
    tls_handshake(stream, &ca, alpn)
        .await
        .expect("TLS with the proxy")
}

/// An HTTP/1.1 client over `io` (a tunnel or TLS stream), its connection driven by a task.
pub async fn h1_client<S>(io: S) -> SendRequest<Empty<Bytes>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(TokioIo::new(io))
        .await
        .expect("h1 handshake");
    tokio::spawn(conn);
    sender
}

/// An HTTP/2 client over `io` (an intercepted tunnel's TLS stream that negotiated `h2`),
/// its connection driven by a task.
pub async fn h2_client<S>(io: S) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(io),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    sender
}

/// The password of every user [`with_users_and_profiles`] makes.
pub const USER_PASSWORD: &str = "pw";

/// The test configuration with proxy users `users` (password
/// [`USER_PASSWORD`]), the `[[profile]]` tables of `profiles` (TOML), and
/// `f` applied.
pub fn with_users_and_profiles(
    users: &[&str],
    profiles: &str,
    f: impl FnOnce(&mut Config),
) -> Config {
    let mut users_toml = String::from("[auth.users]\n");
    for user in users {
        users_toml.push_str(&format!("{user} = \"{USER_PASSWORD}\"\n"));
    }
    let parsed = Config::from_toml(&format!("{users_toml}{profiles}"), "test profiles")
        .expect("valid profiles");
    config_with(|c| {
        c.auth.users = parsed.auth.users;
        c.profiles = parsed.profiles;
        f(c);
    })
}

/// `Proxy-Authorization: Basic` for `user` and [`USER_PASSWORD`].
pub fn basic_auth(user: &str) -> HeaderValue {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{USER_PASSWORD}"));
    HeaderValue::from_str(&format!("Basic {token}")).expect("ASCII")
}

/// A GET of absolute `url` as proxy user `user`.
pub fn get_as(user: &str, url: &str) -> Request<ReplyBody> {
    let mut request = get_request(url);
    request
        .headers_mut()
        .insert("proxy-authorization", basic_auth(user));
    request
}
