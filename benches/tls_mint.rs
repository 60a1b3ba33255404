//! Leaf certificates: minting, cache hits, and a new host's first handshake
//! over loopback TCP (mint included). The goal is a first handshake under 2 ms.
//!
//! Reference numbers (release, `cargo bench --bench tls_mint`), 2026-11-21,
//! 2-vCPU Intel Xeon VM shared with other builds, rustc 1.95, TLS 1.3 + X25519,
//! so treat them as rough:
//!
//! ```text
//! mint new leaf                                 ~37 µs
//! cached leaf lookup                            ~0.10 µs
//! server_config per CONNECT                     ~0.34 µs
//! first handshake, new host (mint included)     ~0.74 ms
//! handshake, cached host                        ~0.74 ms
//! ```
//!
//! The handshake is dominated by TCP setup and the key exchange; minting
//! adds about one ECDSA signature, within the noise.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use robots_guard::tls::{CertificateAuthority, LeafMinter};
use rustls::client::Resumption;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn minter() -> Arc<LeafMinter> {
    let ca = CertificateAuthority::generate().expect("CA");
    // Small enough that minting a fresh host per iteration stays bounded in
    // memory; evictions are part of the real cost anyway.
    let capacity = NonZeroUsize::new(1024).expect("non-zero");
    Arc::new(LeafMinter::new(ca, capacity).expect("minter"))
}

/// A unique host name per call.
fn next_host(counter: &AtomicU64) -> String {
    format!("host{}.bench.test", counter.fetch_add(1, Ordering::Relaxed))
}

fn mint(c: &mut Criterion) {
    let minter = minter();
    let counter = AtomicU64::new(0);
    c.bench_function("mint new leaf", |b| {
        b.iter(|| minter.certified_key(&next_host(&counter)).expect("mint"))
    });

    minter.certified_key("cached.test").expect("mint");
    c.bench_function("cached leaf lookup", |b| {
        b.iter(|| minter.certified_key("cached.test").expect("hit"))
    });

    c.bench_function("server_config per CONNECT", |b| {
        b.iter(|| minter.server_config("example.test"))
    });
}

fn handshake(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let minter = minter();

    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server_minter = Arc::clone(&minter);
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let config = server_minter.server_config("127.0.0.1");
            tokio::spawn(async move {
                let _ = TlsAcceptor::from(config).accept(tcp).await;
            });
        }
    });

    let mut roots = RootCertStore::empty();
    roots.add(minter.ca().cert_der().clone()).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // Full handshakes only: a resumed session would skip the certificate.
    config.resumption = Resumption::disabled();
    let connector = TlsConnector::from(Arc::new(config));

    let connect = |host: String| {
        let connector = connector.clone();
        async move {
            let name = ServerName::try_from(host).expect("name");
            let tcp = TcpStream::connect(addr).await.expect("connect");
            tcp.set_nodelay(true).expect("nodelay");
            connector.connect(name, tcp).await.expect("handshake")
        }
    };

    let counter = AtomicU64::new(0);
    c.bench_function("first handshake, new host (mint included)", |b| {
        b.iter(|| rt.block_on(connect(next_host(&counter))))
    });
    c.bench_function("handshake, cached host", |b| {
        b.iter(|| rt.block_on(connect("cached.test".to_string())))
    });
}

criterion_group!(benches, mint, handshake);
criterion_main!(benches);
