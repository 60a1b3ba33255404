//! A scripted origin server on `127.0.0.1:0` for integration tests.
//!
//! Each test gives [`TestOrigin::start`] an async handler from request to [`Reply`]; the
//! server runs hyper 1 (HTTP/1.1 and HTTP/2, as the client picks), optionally behind TLS
//! ([`TestOrigin::start_tls`] with a [`TestCa`]), records every request it sees, and can
//! misbehave on purpose: [`Reply::Raw`] writes bytes verbatim (broken chunking, a body
//! shorter than its `Content-Length`, ...) and closes the connection; [`Reply::Reset`]
//! closes it without answering. A handler delays by sleeping before it returns.
//! Ready-made scripts: [`TestOrigin::serving`] (one answer for every path) and
//! [`TestOrigin::site`] / [`TestOrigin::site_with`] (a robots.txt and `ok <path>`).
//!
//! ```ignore
//! let origin = TestOrigin::start(|req| async move {
//!     match req.uri().path() {
//!         "/robots.txt" => Reply::text(200, "User-agent: *\nDisallow: /private\n"),
//!         _ => Reply::empty(404),
//!     }
//! })
//! .await;
//! assert_eq!(origin.hits("/robots.txt"), 0);
//! ```

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use robots_guard::origin::{Origin, Scheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// Errors of reply bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a [`Reply::Http`].
pub type ReplyBody = BoxBody<Bytes, BoxError>;

/// What the origin does with one request.
pub enum Reply {
    /// Answer normally with this response.
    Http(Response<ReplyBody>),
    /// Write these bytes verbatim instead of an answer, then close the connection: for
    /// answers hyper would refuse to produce (bad chunking, truncated bodies, garbage).
    /// HTTP/1.1 only.
    Raw(Bytes),
    /// Close the connection without answering. HTTP/1.1 only.
    Reset,
}

impl Reply {
    /// A `text/plain` answer with `status`.
    pub fn text(status: u16, body: impl Into<Bytes>) -> Reply {
        let mut response = Response::new(Full::new(body.into()).map_err(BoxError::from).boxed());
        *response.status_mut() = status_code(status);
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain"),
        );
        Reply::Http(response)
    }

    /// An answer with `status` and no body.
    pub fn empty(status: u16) -> Reply {
        let mut response = Response::new(Full::new(Bytes::new()).map_err(BoxError::from).boxed());
        *response.status_mut() = status_code(status);
        Reply::Http(response)
    }

    /// A redirect with `status` (301, 302, 307, 308) to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::empty(status).header("location", location)
    }

    /// Adds a header to an [`Reply::Http`] (appending to any of the same name); other
    /// replies are returned unchanged.
    ///
    /// # Panics
    ///
    /// If `name` or `value` is not a valid header: a mistake in the test.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Http(response) = &mut self {
            response.headers_mut().append(
                HeaderName::from_bytes(name.as_bytes()).expect("test header name"),
                HeaderValue::from_str(value).expect("test header value"),
            );
        }
        self
    }

    /// A `200` that announces `declared` body bytes, sends `body` (fewer), then closes the
    /// connection: the origin died mid-body.
    pub fn truncated(body: &[u8], declared: usize) -> Reply {
        let mut raw = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {declared}\r\n\r\n"
        )
        .into_bytes();
        raw.extend_from_slice(body);
        Reply::Raw(raw.into())
    }

    /// A chunked `200` whose first chunk is valid and whose second chunk size is not hex.
    pub fn bad_chunking(first_chunk: &[u8]) -> Reply {
        let mut raw = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n",
            first_chunk.len()
        )
        .into_bytes();
        raw.extend_from_slice(first_chunk);
        raw.extend_from_slice(b"\r\nzz-not-hex\r\ngarbage\r\n");
        Reply::Raw(raw.into())
    }
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).expect("test status code")
}

/// A request the origin received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The method.
    pub method: Method,
    /// Path and query, as sent.
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// When the request head arrived.
    pub at: tokio::time::Instant,
}

impl Recorded {
    /// The value of header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

type Handler =
    Arc<dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

struct Shared {
    handler: Handler,
    requests: Mutex<Vec<Recorded>>,
    connections: AtomicUsize,
}

/// A running scripted origin; stops accepting when dropped.
pub struct TestOrigin {
    addr: SocketAddr,
    scheme: Scheme,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl TestOrigin {
    /// Starts a plain-HTTP origin on `127.0.0.1:0` answering with `handler`.
    pub async fn start<F, Fut>(handler: F) -> TestOrigin
    where
        F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        TestOrigin::spawn(handler, None).await
    }

    /// Starts an HTTPS origin on `127.0.0.1:0` presenting `tls` (see
    /// [`TestCa::server_config`]).
    pub async fn start_tls<F, Fut>(tls: Arc<rustls::ServerConfig>, handler: F) -> TestOrigin
    where
        F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        TestOrigin::spawn(handler, Some(TlsAcceptor::from(tls))).await
    }

    /// An origin that answers every path with `status` and `body`.
    pub async fn serving(status: u16, body: &'static str) -> TestOrigin {
        TestOrigin::start(move |_| async move { Reply::text(status, body) }).await
    }

    /// A site: `robots` at `/robots.txt` and `ok <path?query>` (text, 200) everywhere
    /// else.
    pub async fn site(robots: &'static str) -> TestOrigin {
        TestOrigin::site_with(move || Reply::text(200, robots)).await
    }

    /// A site whose `/robots.txt` is answered with `robots()` and every other path with
    /// `ok <path?query>` (text, 200).
    pub async fn site_with<F>(robots: F) -> TestOrigin
    where
        F: Fn() -> Reply + Send + Sync + 'static,
    {
        TestOrigin::start(move |req| {
            let reply = match req.uri().path() {
                "/robots.txt" => robots(),
                _ => Reply::text(200, format!("ok {}", req.uri())),
            };
            async move { reply }
        })
        .await
    }

    async fn spawn<F, Fut>(handler: F, tls: Option<TlsAcceptor>) -> TestOrigin
    where
        F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let handler: Handler = Arc::new(move |req| Box::pin(handler(req)));
        let shared = Arc::new(Shared {
            handler,
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
        });
        let scheme = if tls.is_some() {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let accept = tokio::spawn(accept_loop(listener, shared.clone(), tls));
        TestOrigin {
            addr,
            scheme,
            shared,
            accept,
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The origin as the proxy sees it: (scheme, `127.0.0.1`, port).
    pub fn origin(&self) -> Origin {
        Origin {
            scheme: self.scheme,
            host: "127.0.0.1".to_owned(),
            port: self.port(),
        }
    }

    /// An absolute URL of `path` on this origin.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme.as_str(), self.addr)
    }

    /// How many requests for `path` (path only, query ignored) arrived so far.
    pub fn hits(&self, path: &str) -> usize {
        self.lock_requests()
            .iter()
            .filter(|r| r.path.split('?').next() == Some(path))
            .count()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock_requests().clone()
    }

    /// The most recent request, if any.
    pub fn last_request(&self) -> Option<Recorded> {
        self.lock_requests().last().cloned()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    fn lock_requests(&self) -> std::sync::MutexGuard<'_, Vec<Recorded>> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tls: Option<TlsAcceptor>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve(stream, shared).await,
                Some(acceptor) => {
                    // A client that refuses our certificate ends here, as it should.
                    if let Ok(stream) = acceptor.accept(stream).await {
                        serve(stream, shared).await;
                    }
                }
            }
        });
    }
}

async fn serve<S>(stream: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let takeover = Arc::new(Mutex::new(None));
    let io = Hijack {
        inner: stream,
        takeover: takeover.clone(),
        state: HijackState::Normal,
    };
    let service = service_fn(move |req: Request<Incoming>| {
        let shared = shared.clone();
        let takeover = takeover.clone();
        async move {
            shared
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Recorded {
                    method: req.method().clone(),
                    path: req
                        .uri()
                        .path_and_query()
                        .map_or_else(|| "/".to_owned(), |p| p.to_string()),
                    headers: req.headers().clone(),
                    at: tokio::time::Instant::now(),
                });
            let response = match (shared.handler)(req).await {
                Reply::Http(response) => response,
                other => {
                    // Set before hyper writes anything of this answer, so the first
                    // write sees it and replaces the answer.
                    *takeover.lock().unwrap_or_else(|e| e.into_inner()) = Some(other);
                    Response::new(Full::new(Bytes::new()).map_err(BoxError::from).boxed())
                }
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    // Errors here are the client going away or our own takeover: nothing to report.
    // Upgrades are on so a handler can answer 101 and take the connection over.
    let _ = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(TokioIo::new(io), service)
        .await;
}

/// The connection's IO, which a [`Reply::Raw`] or [`Reply::Reset`] takes over at the
/// next write: hyper's answer is replaced by the raw bytes (or nothing), the connection
/// is shut down, and hyper gets an error so it stops using it.
struct Hijack<S> {
    inner: S,
    takeover: Arc<Mutex<Option<Reply>>>,
    state: HijackState,
}

enum HijackState {
    Normal,
    Writing(Bytes),
    Flushing,
    Closing,
    Closed,
}

impl<S: AsyncRead + Unpin> AsyncRead for Hijack<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if matches!(self.state, HijackState::Normal) {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        } else {
            Poll::Ready(Ok(()))
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Hijack<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                HijackState::Normal => {
                    let taken = this
                        .takeover
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    match taken {
                        None => return Pin::new(&mut this.inner).poll_write(cx, buf),
                        Some(Reply::Raw(bytes)) => this.state = HijackState::Writing(bytes),
                        Some(_) => this.state = HijackState::Closing,
                    }
                }
                HijackState::Writing(bytes) => {
                    while !bytes.is_empty() {
                        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, bytes))?;
                        if n == 0 {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                        }
                        let _ = bytes.split_to(n);
                    }
                    this.state = HijackState::Flushing;
                }
                HijackState::Flushing => {
                    ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
                    this.state = HijackState::Closing;
                }
                HijackState::Closing => {
                    // The peer may be gone already; closing is best effort.
                    let _ = ready!(Pin::new(&mut this.inner).poll_shutdown(cx));
                    this.state = HijackState::Closed;
                }
                HijackState::Closed => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the test origin took over the connection",
                    )))
                }
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.state {
            HijackState::Normal => Pin::new(&mut self.inner).poll_flush(cx),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.state {
            HijackState::Normal => Pin::new(&mut self.inner).poll_shutdown(cx),
            _ => Poll::Ready(Ok(())),
        }
    }
}

/// A throwaway certificate authority for HTTPS test origins.
pub struct TestCa {
    cert_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A fresh CA (a new key every time, so no test trusts another test's CA).
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "robots-guard test CA");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert_pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate as PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Writes the CA certificate to a unique file under the target's temporary directory
    /// (for `tls.extra_roots`) and returns its path.
    pub fn pem_file(&self) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("test-ca-{}-{n}.pem", std::process::id()));
        std::fs::write(&path, &self.cert_pem).expect("write the test CA");
        path
    }

    /// A leaf certificate for `names` signed by this CA and its key, both as PEM, for
    /// servers that read their certificate from files (redis-server's TLS port).
    pub fn leaf_pem(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = rcgen::CertificateParams::new(names).expect("leaf params");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// A rustls server configuration with a leaf certificate for `names` (DNS names or
    /// IP literals) signed by this CA, offering ALPN `h2` and `http/1.1`.
    pub fn server_config(&self, names: &[&str]) -> Arc<rustls::ServerConfig> {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "robots-guard test origin");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key_der)
            .expect("server certificate");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A loopback port with nothing listening on it: connecting is refused.
pub async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let port = listener.local_addr().expect("local address").port();
    drop(listener);
    port
}
