//! The pools against TLS origins on loopback, with a certificate authority
//! made for each test.

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::super::{ProxyBody, UpstreamError, UpstreamPools, UpstreamSettings};
use crate::origin::Scheme;
use crate::policy::destination::DestinationPolicy;

/// A throwaway certificate authority (a new key each time, so no test
/// trusts another's).
struct TestCa {
    cert_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "robots-guard upstream test CA");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert_pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate in a PEM file of its own, for `extra_roots`;
    /// removed when the returned guard is dropped.
    fn pem_file(&self) -> PemFile {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "robots-guard-upstream-ca-{}-{}.pem",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, &self.cert_pem).expect("write the CA");
        PemFile(path)
    }

    /// A server configuration for `127.0.0.1` signed by this CA, offering
    /// `alpn`.
    fn server_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("leaf params");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .expect("server certificate");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

struct PemFile(PathBuf);

impl Drop for PemFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An HTTPS origin on `127.0.0.1` that answers every request with its
/// protocol version and path, speaking HTTP/2 when the client chose it.
struct TlsOrigin {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

async fn tls_origin(ca: &TestCa, alpn: &[&[u8]]) -> TlsOrigin {
    let acceptor = TlsAcceptor::from(ca.server_config(alpn));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let (accepted, served) = (connections.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::SeqCst);
            let (acceptor, served) = (acceptor.clone(), served.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let service = service_fn(move |request: Request<Incoming>| {
                    served.fetch_add(1, Ordering::SeqCst);
                    let text = format!("{:?} {}", request.version(), request.uri().path());
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text)))) }
                });
                let io = TokioIo::new(tls);
                let _ = if http2 {
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, service)
                        .await
                } else {
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await
                };
            });
        }
    });
    TlsOrigin {
        port,
        connections,
        requests,
    }
}

/// Pools trusting `roots` besides the Mozilla roots.
fn pools(roots: &[&PemFile]) -> UpstreamPools {
    let settings = UpstreamSettings {
        connect_timeout: Duration::from_secs(2),
        pool_idle_timeout: Duration::from_secs(30),
        extra_roots: roots.iter().map(|f| f.0.clone()).collect(),
        max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
    };
    UpstreamPools::build(&settings, DestinationPolicy::allow_all(), NonZeroUsize::MIN)
        .expect("pools")
}

fn get(port: u16, path: &str) -> Request<ProxyBody> {
    Request::get(format!("https://127.0.0.1:{port}{path}"))
        .body(super::super::empty_body())
        .expect("request")
}

/// Sends a GET of `path` and reads the answer: (version, body).
async fn fetch(pools: &UpstreamPools, port: u16, path: &str) -> (Version, String) {
    let response = pools.send(get(port, path)).await.expect("response");
    let version = response.version();
    let body = response.into_body().collect().await.expect("body");
    (
        version,
        String::from_utf8_lossy(&body.to_bytes()).into_owned(),
    )
}

#[tokio::test]
async fn an_untrusted_certificate_is_tagged_certificate_and_nothing_is_sent() {
    let origin = tls_origin(&TestCa::new(), &[b"h2", b"http/1.1"]).await;
    // Only the Mozilla roots are trusted: the origin's CA is unknown.
    let pools = pools(&[]);
    let error = pools
        .send(get(origin.port, "/page"))
        .await
        .expect_err("untrusted");
    assert!(
        matches!(&error, UpstreamError::Certificate { reason } if reason.contains("UnknownIssuer")),
        "{error:?}"
    );
    assert!(error.is_connect());
    assert!(error.to_string().contains("failed verification"), "{error}");
    assert_eq!(origin.connections.load(Ordering::SeqCst), 1);
    assert_eq!(origin.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_plaintext_answer_to_the_handshake_is_tagged_tls() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let mut hello = [0u8; 512];
            let _ = tcp.read(&mut hello).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let error = pools(&[]).send(get(port, "/")).await.expect_err("no TLS");
    assert!(matches!(error, UpstreamError::Tls { .. }), "{error:?}");
    assert!(error.to_string().contains("TLS"), "{error}");
}

#[tokio::test]
async fn an_http2_origin_carries_every_request_on_one_shared_connection() {
    let ca = TestCa::new();
    let roots = ca.pem_file();
    let origin = tls_origin(&ca, &[b"h2", b"http/1.1"]).await;
    let pools = pools(&[&roots]);
    for path in ["/a", "/b", "/c"] {
        let answer = fetch(&pools, origin.port, path).await;
        assert_eq!(answer, (Version::HTTP_2, format!("HTTP/2.0 {path}")));
    }
    // Requests at once share it too: one stream each.
    let mut at_once = tokio::task::JoinSet::new();
    for i in 0..5 {
        let pools = pools.clone();
        at_once.spawn(async move { fetch(&pools, origin.port, &format!("/{i}")).await });
    }
    while let Some(answer) = at_once.join_next().await {
        assert_eq!(answer.expect("task").0, Version::HTTP_2);
    }
    assert_eq!(origin.connections.load(Ordering::SeqCst), 1);
    assert_eq!(origin.requests.load(Ordering::SeqCst), 8);
    let authority = format!("127.0.0.1:{}", origin.port);
    let pool = pools.current();
    assert!(pool.has_http2(Scheme::Https, &authority));
    assert_eq!(pool.idle_count(Scheme::Https, &authority), 0);
    assert_eq!(pool.held(), 1);
}

#[tokio::test]
async fn an_http1_tls_origin_is_pooled_like_a_plain_one() {
    let ca = TestCa::new();
    let roots = ca.pem_file();
    let origin = tls_origin(&ca, &[b"http/1.1"]).await;
    let pools = pools(&[&roots]);
    for path in ["/a", "/b", "/c"] {
        let answer = fetch(&pools, origin.port, path).await;
        assert_eq!(answer, (Version::HTTP_11, format!("HTTP/1.1 {path}")));
    }
    assert_eq!(origin.connections.load(Ordering::SeqCst), 1);
    let authority = format!("127.0.0.1:{}", origin.port);
    assert_eq!(pools.current().idle_count(Scheme::Https, &authority), 1);
    assert_eq!(pools.current().idle_count(Scheme::Http, &authority), 0);
}

#[tokio::test]
async fn an_upgrade_offers_only_http1_and_gets_a_connection_of_its_own() {
    let ca = TestCa::new();
    let roots = ca.pem_file();
    let origin = tls_origin(&ca, &[b"h2", b"http/1.1"]).await;
    let pools = pools(&[&roots]);
    assert_eq!(fetch(&pools, origin.port, "/a").await.0, Version::HTTP_2);
    let response = pools
        .send_upgrade(get(origin.port, "/ws"))
        .await
        .expect("response");
    assert_eq!(response.version(), Version::HTTP_11);
    let body = response.into_body().collect().await.expect("body");
    assert_eq!(body.to_bytes(), "HTTP/1.1 /ws");
    assert_eq!(origin.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_handshake_that_never_finishes_is_a_connect_timeout() {
    // Accepts and keeps the connection, but never answers the ClientHello.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            open.push(tcp);
        }
    });
    let settings = UpstreamSettings {
        connect_timeout: Duration::from_millis(300),
        pool_idle_timeout: Duration::from_secs(30),
        extra_roots: Vec::new(),
        max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
    };
    let pools = UpstreamPools::build(&settings, DestinationPolicy::allow_all(), NonZeroUsize::MIN)
        .expect("pools");
    let started = tokio::time::Instant::now();
    let error = pools.send(get(port, "/")).await.expect_err("silent");
    assert!(
        matches!(error, UpstreamError::ConnectTimeout { waited, .. } if waited == settings.connect_timeout),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    held.abort();
}

#[tokio::test]
async fn a_reload_applies_new_roots_and_connect_timeout_to_new_connections() {
    let ca = TestCa::new();
    let roots = ca.pem_file();
    let origin = tls_origin(&ca, &[b"http/1.1"]).await;
    let pools = pools(&[]);
    let error = pools
        .send(get(origin.port, "/before"))
        .await
        .expect_err("the CA is not trusted yet");
    assert!(
        matches!(error, UpstreamError::Certificate { .. }),
        "{error:?}"
    );
    pools.reconfigure(&UpstreamSettings {
        connect_timeout: Duration::from_secs(1),
        pool_idle_timeout: Duration::from_secs(30),
        extra_roots: vec![roots.0.clone()],
        max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
    });
    assert_eq!(pools.connect_timeout(), Duration::from_secs(1));
    let answer = fetch(&pools, origin.port, "/after").await;
    assert_eq!(answer.1, "HTTP/1.1 /after");
    // Unreadable roots on reload: the previous ones stay, the timeout applies.
    pools.reconfigure(&UpstreamSettings {
        connect_timeout: Duration::from_secs(3),
        pool_idle_timeout: Duration::from_secs(30),
        extra_roots: vec![roots.0.with_extension("missing")],
        max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
    });
    assert_eq!(pools.connect_timeout(), Duration::from_secs(3));
    // A new connection (another origin of the same CA) is still verified.
    let other = tls_origin(&ca, &[b"http/1.1"]).await;
    assert_eq!(
        fetch(&pools, other.port, "/still").await.1,
        "HTTP/1.1 /still"
    );
    assert_eq!(other.connections.load(Ordering::SeqCst), 1);
}
