//! The local CA on disk and leaf certificates in real TLS handshakes over
//! loopback TCP, with clients that trust only that CA. Keys are written to fresh
//! directories under the target's temporary directory (`support::temp_dir`), never into
//! the repository.

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use robots_guard::tls::{init_ca, CertificateAuthority, LeafMinter, TlsError};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use x509_parser::extensions::GeneralName;

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

fn ca_on_disk(tag: &str) -> (PathBuf, CertificateAuthority) {
    let dir = support::temp_dir(&format!("tls-{tag}"));
    let files = init_ca(&dir, false).expect("init_ca");
    // Load it back rather than keep the generated one, so the handshakes
    // below exercise the path `serve` takes.
    let ca = CertificateAuthority::load(&files.cert, &files.key).expect("load");
    (dir, ca)
}

fn minter(ca: CertificateAuthority) -> Arc<LeafMinter> {
    let capacity = NonZeroUsize::new(64).expect("non-zero");
    Arc::new(LeafMinter::new(ca, capacity).expect("minter"))
}

/// A TLS client trusting only the CA certificate in the PEM file `trusted_pem`.
fn client_trusting(trusted_pem: &Path, alpn: &[&[u8]]) -> TlsConnector {
    let pem = std::fs::read(trusted_pem).expect("read CA");
    support::proxy::client_tls(&pem, alpn)
}

/// What each side saw of one handshake.
struct Outcome {
    client: Result<ClientSide, std::io::Error>,
    server: Result<(), std::io::Error>,
}

struct ClientSide {
    chain: Vec<CertificateDer<'static>>,
    alpn: Option<Vec<u8>>,
}

async fn handshake(
    server: Arc<ServerConfig>,
    client: TlsConnector,
    name: ServerName<'static>,
) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server_side = async move {
        let (tcp, _) = listener.accept().await?;
        TlsAcceptor::from(server).accept(tcp).await.map(drop)
    };
    let client_side = async move {
        let tcp = TcpStream::connect(addr).await?;
        let tls = client.connect(name, tcp).await?;
        let (_, conn) = tls.get_ref();
        Ok(ClientSide {
            chain: conn
                .peer_certificates()
                .map(|c| c.to_vec())
                .unwrap_or_default(),
            alpn: conn.alpn_protocol().map(|p| p.to_vec()),
        })
        // The stream drops here, after the client's Finished was flushed.
    };
    let (client, server) = tokio::join!(client_side, server_side);
    Outcome { client, server }
}

fn sans(leaf: &CertificateDer<'_>) -> Vec<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).expect("parse leaf");
    let san = cert
        .subject_alternative_name()
        .expect("SAN parses")
        .expect("SAN present");
    san.value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::DNSName(dns) => format!("dns:{dns}"),
            GeneralName::IPAddress(ip) => format!("ip:{ip:?}"),
            other => format!("other:{other:?}"),
        })
        .collect()
}

#[cfg(unix)]
#[test]
fn init_ca_creates_a_ca_and_a_private_key() {
    let dir = support::temp_dir("tls-init");
    let nested = dir.join("certs");
    let files = init_ca(&nested, false).expect("init_ca");
    assert_eq!(files.cert, nested.join("ca.pem"));
    assert_eq!(files.key, nested.join("ca.key"));
    assert_eq!(mode(&files.key), 0o600);

    let pem = std::fs::read(&files.cert).expect("read cert");
    let der = rustls_pemfile::certs(&mut pem.as_slice())
        .next()
        .expect("one cert")
        .expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("parse");
    assert!(cert.is_ca());
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .expect("CN");
    assert!(cn.starts_with("robots-guard local CA "), "{cn}");
    let usage = cert.key_usage().expect("ok").expect("key usage").value;
    assert!(usage.key_cert_sign() && usage.crl_sign());
    let v = cert.validity();
    let years = (v.not_after.to_datetime() - v.not_before.to_datetime()).whole_days() / 365;
    assert_eq!(years, 10);
    let key = std::fs::read_to_string(&files.key).expect("read key");
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");
}

#[cfg(unix)]
#[test]
fn init_ca_refuses_to_overwrite_without_force() {
    use std::os::unix::fs::PermissionsExt;

    let dir = support::temp_dir("tls-force");
    let files = init_ca(&dir, false).expect("first");
    let before = std::fs::read(&files.cert).expect("read");

    let err = init_ca(&dir, false).expect_err("second must refuse");
    assert!(matches!(err, TlsError::Exists { ref paths } if paths.len() == 2));
    let message = err.to_string();
    assert!(message.contains("--force"), "{message}");
    assert!(
        message.contains("ca.pem") && message.contains("ca.key"),
        "{message}"
    );
    assert_eq!(std::fs::read(&files.cert).expect("read"), before);

    // A loosened key file is replaced by a fresh 0600 one, not reused.
    std::fs::set_permissions(&files.key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    init_ca(&dir, true).expect("force");
    assert_ne!(std::fs::read(&files.cert).expect("read"), before);
    assert_eq!(mode(&files.key), 0o600);
}

#[test]
fn two_installs_have_different_ca_names() {
    let subject = |ca: &CertificateAuthority| {
        let (_, cert) = x509_parser::parse_x509_certificate(ca.cert_der()).expect("parse");
        cert.subject().to_string()
    };
    let a = CertificateAuthority::generate().expect("a");
    let b = CertificateAuthority::generate().expect("b");
    assert_ne!(subject(&a), subject(&b));
}

#[test]
fn load_or_create_creates_once_then_loads() {
    let dir = support::temp_dir("tls-loc");
    let cert = dir.join("certs/ca.pem");
    let key = dir.join("certs/ca.key");
    let (first, created) = CertificateAuthority::load_or_create(&cert, &key).expect("create");
    assert!(created);
    let (second, created) = CertificateAuthority::load_or_create(&cert, &key).expect("load");
    assert!(!created);
    assert_eq!(first.cert_der(), second.cert_der());

    std::fs::remove_file(&key).expect("rm key");
    let err = CertificateAuthority::load_or_create(&cert, &key).expect_err("incomplete");
    assert!(matches!(err, TlsError::Incomplete { .. }), "{err}");
    assert!(cert.exists(), "the certificate is left alone");
}

#[test]
fn load_errors_say_what_is_wrong() {
    let dir = support::temp_dir("tls-errors");
    let files = init_ca(&dir.join("a"), false).expect("a");
    let other = init_ca(&dir.join("b"), false).expect("b");

    let missing = dir.join("nope.pem");
    let err = CertificateAuthority::load(&missing, &files.key).expect_err("missing");
    assert!(matches!(err, TlsError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("nope.pem") && err.to_string().contains("ca init"));

    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "hello\n").expect("write");
    let err = CertificateAuthority::load(&garbage, &files.key).expect_err("bad pem");
    assert!(
        matches!(err, TlsError::Invalid { ref path, .. } if *path == garbage),
        "{err}"
    );
    assert!(err.to_string().contains("BEGIN CERTIFICATE"), "{err}");

    // The certificate where the key should be.
    let err = CertificateAuthority::load(&files.cert, &files.cert).expect_err("bad key");
    assert!(
        matches!(err, TlsError::Invalid { ref path, .. } if *path == files.cert),
        "{err}"
    );
    assert!(err.to_string().contains("PRIVATE KEY"), "{err}");

    let err = CertificateAuthority::load(&files.cert, &other.key).expect_err("mismatch");
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
    assert!(err.to_string().contains("does not belong"), "{err}");

    // A leaf is not a CA.
    let key = rcgen::KeyPair::generate().expect("key");
    let leaf = rcgen::CertificateParams::new(vec!["leaf.test".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("self-signed");
    let (leaf_cert, leaf_key) = (dir.join("leaf.pem"), dir.join("leaf.key"));
    std::fs::write(&leaf_cert, leaf.pem()).expect("write");
    std::fs::write(&leaf_key, key.serialize_pem()).expect("write");
    let err = CertificateAuthority::load(&leaf_cert, &leaf_key).expect_err("not a CA");
    assert!(err.to_string().contains("not a CA"), "{err}");
}

#[tokio::test]
async fn sni_name_gets_a_leaf_the_client_verifies() {
    let (dir, ca) = ca_on_disk("sni");
    let minter = minter(ca);
    let client = client_trusting(&dir.join("ca.pem"), &[]);
    let name = ServerName::try_from("example.test").expect("name");
    let outcome = handshake(minter.server_config("127.0.0.1"), client, name).await;
    let client = outcome.client.expect("client handshake");
    outcome.server.expect("server handshake");
    assert_eq!(client.chain.len(), 2, "leaf and CA");
    assert_eq!(sans(&client.chain[0]), ["dns:example.test"]);
    assert_eq!(client.alpn, None);
}

#[tokio::test]
async fn ip_literal_without_sni_gets_an_ip_san() {
    let (dir, ca) = ca_on_disk("ip");
    let minter = minter(ca);
    let client = client_trusting(&dir.join("ca.pem"), &[]);
    // rustls sends no SNI for an IP address, so the fallback host is used.
    let name = ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into());
    let outcome = handshake(minter.server_config("127.0.0.1"), client, name).await;
    let client = outcome.client.expect("client handshake");
    outcome.server.expect("server handshake");
    assert_eq!(sans(&client.chain[0]), ["ip:[127, 0, 0, 1]"]);
}

#[tokio::test]
async fn alpn_prefers_h2() {
    let (dir, ca) = ca_on_disk("alpn");
    let minter = minter(ca);
    let pem = dir.join("ca.pem");
    let name = ServerName::try_from("example.test").expect("name");

    let client = client_trusting(&pem, &[b"http/1.1", b"h2"]);
    let outcome = handshake(minter.server_config("example.test"), client, name.clone()).await;
    assert_eq!(
        outcome.client.expect("client").alpn.as_deref(),
        Some(&b"h2"[..])
    );

    let client = client_trusting(&pem, &[b"http/1.1"]);
    let outcome = handshake(minter.server_config("example.test"), client, name).await;
    assert_eq!(
        outcome.client.expect("client").alpn.as_deref(),
        Some(&b"http/1.1"[..])
    );
}

#[tokio::test]
async fn client_that_does_not_trust_the_ca_fails() {
    let (_dir, ca) = ca_on_disk("trusted");
    let (other_dir, _) = ca_on_disk("untrusted");
    let minter = minter(ca);
    let client = client_trusting(&other_dir.join("ca.pem"), &[]);
    let name = ServerName::try_from("example.test").expect("name");
    let outcome = handshake(minter.server_config("example.test"), client, name).await;
    let err = outcome.client.err().expect("client must reject the leaf");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    assert!(outcome.server.is_err(), "server sees the alert");
}

#[tokio::test]
async fn unusable_fallback_host_fails_the_handshake_only() {
    let (dir, ca) = ca_on_disk("badhost");
    let minter = minter(ca);
    let client = client_trusting(&dir.join("ca.pem"), &[]);
    let name = ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into());
    let outcome = handshake(minter.server_config("not a host!"), client, name).await;
    assert!(outcome.client.is_err());
    assert!(outcome.server.is_err());
    assert_eq!(minter.minted_count(), 0);
}

#[tokio::test]
async fn second_handshake_for_a_host_reuses_the_leaf() {
    let (dir, ca) = ca_on_disk("reuse");
    let minter = minter(ca);
    let pem = dir.join("ca.pem");
    let name = ServerName::try_from("example.test").expect("name");
    for _ in 0..2 {
        let client = client_trusting(&pem, &[]);
        let outcome = handshake(minter.server_config("127.0.0.1"), client, name.clone()).await;
        outcome.client.expect("client");
    }
    assert_eq!(minter.minted_count(), 1);
    assert_eq!(minter.cached_count(), 1);
}

/// Not a benchmark (see `benches/tls_mint.rs`); prints a rough figure only.
#[test]
fn minting_time_is_reported() {
    let minter = minter(CertificateAuthority::generate().expect("CA"));
    let n = 50;
    let start = Instant::now();
    for i in 0..n {
        minter
            .certified_key(&format!("host{i}.test"))
            .expect("mint");
    }
    eprintln!(
        "minted {n} leaves, {:?} each (debug build)",
        start.elapsed() / n
    );
    assert_eq!(minter.minted_count(), u64::from(n));
}
