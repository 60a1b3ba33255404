//! Leaf certificates minted on demand for intercepted hosts, and the rustls
//! server configuration that presents them.
//!
//! Every leaf shares one ECDSA P-256 key pair generated at startup: minting a
//! leaf is then a single ECDSA signature by the CA (tens of microseconds), not
//! a key generation, so a new host's first handshake stays cheap. The key
//! never leaves the process, and each leaf is bound to one host by its SAN,
//! so sharing it gives a client nothing it could not get from the CA anyway.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lru::LruCache;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, ResolvesServerCertUsingSni};
use rustls::sign::{CertifiedKey, SigningKey};
use rustls::ServerConfig;
use time::{Duration, OffsetDateTime};

use super::{random_serial, CertificateAuthority, TlsError};

/// A year. Browsers reject leaves valid for more than 398 days, and some
/// clients warn well before that, so stay clearly under it.
const LEAF_VALIDITY: Duration = Duration::days(365);

/// Longest host name accepted (RFC 1035 §2.3.4, without the trailing dot).
const MAX_NAME_LEN: usize = 253;

/// Longest label (RFC 1035 §2.3.4).
const MAX_LABEL_LEN: usize = 63;

/// X.520 upper bound for a common name; longer names go in the SAN only.
const MAX_COMMON_NAME_LEN: usize = 64;

/// Mints leaf certificates signed by the local CA and caches them (LRU).
pub struct LeafMinter {
    ca: CertificateAuthority,
    /// The public half of the shared leaf key, for rcgen.
    key: KeyPair,
    /// The same key as rustls signs with.
    signer: Arc<dyn SigningKey>,
    cache: Mutex<LruCache<String, Arc<CertifiedKey>>>,
    minted: AtomicU64,
    /// Cloned per CONNECT with its resolver replaced, so every connection
    /// shares the provider and the session cache (resumption works across
    /// CONNECTs), and a per-CONNECT config costs a clone, not a build.
    base: ServerConfig,
}

impl std::fmt::Debug for LeafMinter {
    /// Leaves out the keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafMinter")
            .field("minted", &self.minted_count())
            .finish_non_exhaustive()
    }
}

impl LeafMinter {
    /// Generates the shared leaf key and prepares an empty cache holding up
    /// to `capacity` leaves.
    ///
    /// # Errors
    ///
    /// [`TlsError::Generate`] or [`TlsError::Rustls`] if the key cannot be
    /// generated or loaded (internal failures).
    pub fn new(ca: CertificateAuthority, capacity: NonZeroUsize) -> Result<Self, TlsError> {
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|error| TlsError::Generate {
                what: "generate the leaf key",
                error,
            })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let signer = provider
            .key_provider
            .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                key.serialize_der(),
            )))?;
        let mut base = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            // Replaced in every `server_config`; it never resolves anything.
            .with_cert_resolver(Arc::new(ResolvesServerCertUsingSni::new()));
        base.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(LeafMinter {
            ca,
            key,
            signer,
            cache: Mutex::new(LruCache::new(capacity)),
            minted: AtomicU64::new(0),
            base,
        })
    }

    /// The CA the leaves are signed by.
    pub fn ca(&self) -> &CertificateAuthority {
        &self.ca
    }

    /// The certificate chain and key for `host`, from the cache or minted now.
    ///
    /// `host` is a DNS name (any case, optional trailing dot) or an IP
    /// literal (IPv6 with or without brackets); IP literals get an IP SAN.
    /// Both spellings of one host share a cache entry.
    ///
    /// # Errors
    ///
    /// [`TlsError::InvalidHost`] when `host` cannot be a certificate name
    /// (it comes from the client, so this is the client's fault);
    /// [`TlsError::Generate`] if signing fails.
    pub fn certified_key(&self, host: &str) -> Result<Arc<CertifiedKey>, TlsError> {
        let (name, san) = parse_host(host)?;
        if let Some(hit) = self.lock().get(name.as_ref()) {
            return Ok(Arc::clone(hit));
        }
        // Minted without the lock so other hosts' handshakes do not wait.
        let minted = Arc::new(self.mint(&name, san)?);
        self.minted.fetch_add(1, Ordering::Relaxed);
        // Another handshake for the same host may have minted meanwhile:
        // keep the first one so every caller shares one Arc.
        Ok(Arc::clone(
            self.lock().get_or_insert(name.into_owned(), || minted),
        ))
    }

    /// How many leaves were minted since startup (a metric).
    pub fn minted_count(&self) -> u64 {
        self.minted.load(Ordering::Relaxed)
    }

    /// How many leaves are cached now (a metric).
    pub fn cached_count(&self) -> usize {
        self.lock().len()
    }

    /// A rustls server configuration for one CONNECT: the certificate is
    /// chosen by the ClientHello's SNI, else by `fallback_host` (the CONNECT
    /// authority's host; clients send no SNI for IP literals). ALPN offers
    /// `h2`, then `http/1.1`.
    ///
    /// If no certificate can be minted, the handshake fails (rustls reports
    /// that no certificate was resolved; the reason is logged here).
    pub fn server_config(self: &Arc<Self>, fallback_host: &str) -> Arc<ServerConfig> {
        let mut config = self.base.clone();
        config.cert_resolver = Arc::new(HostResolver {
            minter: Arc::clone(self),
            fallback: fallback_host.into(),
        });
        Arc::new(config)
    }

    fn mint(&self, name: &str, san: SanType) -> Result<CertifiedKey, TlsError> {
        let generate = |error| TlsError::Generate {
            what: "sign a leaf certificate",
            error,
        };
        let now = OffsetDateTime::now_utc();
        let mut subject = DistinguishedName::new();
        // Clients match the SAN only; the CN is for people reading the
        // certificate. With an empty subject rcgen marks the SAN critical,
        // as RFC 5280 §4.2.1.6 requires.
        if name.len() <= MAX_COMMON_NAME_LEN {
            subject.push(DnType::CommonName, name);
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = subject;
        params.subject_alt_names = vec![san];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        // A day of slack for clients whose clock is behind.
        params.not_before = now - Duration::days(1);
        params.not_after = now + LEAF_VALIDITY;
        params.serial_number = Some(random_serial()?);
        let cert = params
            .signed_by(&self.key, self.ca.issuer())
            .map_err(generate)?;
        Ok(CertifiedKey::new(
            vec![cert.into(), self.ca.cert_der().clone()],
            Arc::clone(&self.signer),
        ))
    }

    /// The cache, even if a thread panicked while holding it: the LRU is
    /// never left half-updated by our code (no panics inside the lock), so
    /// its contents stay valid.
    fn lock(&self) -> MutexGuard<'_, LruCache<String, Arc<CertifiedKey>>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Picks the leaf for one connection.
#[derive(Debug)]
struct HostResolver {
    minter: Arc<LeafMinter>,
    fallback: Box<str>,
}

impl ResolvesServerCert for HostResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let host = hello.server_name().unwrap_or(&self.fallback);
        match self.minter.certified_key(host) {
            Ok(key) => Some(key),
            Err(error) => {
                tracing::warn!(%error, "no certificate for the TLS handshake");
                None
            }
        }
    }
}

/// Normalises and validates a host from the client: the cache key (lower
/// case, no trailing dot, canonical IP text) and the SAN to put in the leaf.
fn parse_host(host: &str) -> Result<(Cow<'_, str>, SanType), TlsError> {
    let invalid = |reason| TlsError::InvalidHost {
        host: host.chars().take(80).collect(),
        reason,
    };
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        let ip: Ipv6Addr = inner
            .parse()
            .map_err(|_| invalid("brackets hold no IPv6 address"))?;
        return Ok((Cow::Owned(ip.to_string()), SanType::IpAddress(ip.into())));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok((Cow::Owned(ip.to_string()), SanType::IpAddress(ip)));
    }

    let trimmed = host.strip_suffix('.').unwrap_or(host);
    check_dns_name(trimmed).map_err(invalid)?;
    let name = if trimmed.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(trimmed.to_ascii_lowercase())
    } else {
        Cow::Borrowed(trimmed)
    };
    // Last word to webpki's own rules, so we never mint a name no client
    // could match.
    rustls::pki_types::DnsName::try_from(name.as_ref())
        .map_err(|_| invalid("not a valid DNS name"))?;
    let san = SanType::DnsName(
        name.as_ref()
            .try_into()
            .map_err(|_| invalid("not an ASCII name"))?,
    );
    Ok((name, san))
}

/// Host-name syntax (RFC 1035 §2.3.1, plus `_`, which real hosts use).
/// Wildcards are refused: a client never needs to ask for one.
fn check_dns_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty host name");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label");
        }
        if label.len() > MAX_LABEL_LEN {
            return Err("a label is longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err("only letters, digits, '-', '_' and '.' are allowed");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a label starts or ends with '-'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minter(capacity: usize) -> Arc<LeafMinter> {
        let ca = CertificateAuthority::generate().expect("CA");
        let capacity = NonZeroUsize::new(capacity).expect("non-zero");
        Arc::new(LeafMinter::new(ca, capacity).expect("minter"))
    }

    #[test]
    fn host_names_are_normalised() {
        let cases = [
            ("Example.TEST", "example.test"),
            ("example.test.", "example.test"),
            ("a_b.example", "a_b.example"),
            ("127.0.0.1", "127.0.0.1"),
            ("[::1]", "::1"),
            ("::1", "::1"),
            ("[2001:DB8::1]", "2001:db8::1"),
        ];
        for (host, want) in cases {
            let (name, _) = parse_host(host).expect(host);
            assert_eq!(name, want, "{host}");
        }
    }

    #[test]
    fn ip_literals_get_ip_sans() {
        for host in ["127.0.0.1", "[::1]", "::1"] {
            let (_, san) = parse_host(host).expect(host);
            assert!(matches!(san, SanType::IpAddress(_)), "{host}: {san:?}");
        }
        let (_, san) = parse_host("example.test").expect("dns");
        assert!(matches!(san, SanType::DnsName(_)));
    }

    #[test]
    fn bad_hosts_are_refused_without_panic() {
        let long_label = format!("{}.test", "a".repeat(64));
        let long_name = vec!["abcdefghi"; 30].join(".");
        let bad = [
            "",
            ".",
            "a..b",
            "exa mple.test",
            "*.example.test",
            "-a.test",
            "a-.test",
            "ex\u{e4}mple.test",
            "a/b",
            "[example.test]",
            "[::1",
            "fe80::1%eth0",
            "a\0b",
            &long_label,
            &long_name,
        ];
        for host in bad {
            let err = parse_host(host).expect_err(host);
            assert!(matches!(err, TlsError::InvalidHost { .. }), "{host}: {err}");
        }
    }

    #[test]
    fn second_mint_for_same_host_is_a_cache_hit() {
        let minter = minter(8);
        let first = minter.certified_key("example.test").expect("mint");
        assert_eq!(minter.minted_count(), 1);
        let second = minter.certified_key("EXAMPLE.test.").expect("hit");
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(minter.minted_count(), 1);
        assert_eq!(minter.cached_count(), 1);
    }

    #[test]
    fn cache_is_bounded() {
        let minter = minter(2);
        for host in ["a.test", "b.test", "c.test"] {
            minter.certified_key(host).expect("mint");
        }
        assert_eq!(minter.cached_count(), 2);
        assert_eq!(minter.minted_count(), 3);
        // The oldest was evicted, so asking again mints.
        minter.certified_key("a.test").expect("mint");
        assert_eq!(minter.minted_count(), 4);
    }

    #[test]
    fn leaves_have_distinct_serials_and_short_validity() {
        let minter = minter(8);
        let a = minter.certified_key("a.test").expect("mint");
        let b = minter.certified_key("b.test").expect("mint");
        let parse = |key: &CertifiedKey| {
            let der = key.cert[0].to_vec();
            let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("parse");
            let v = cert.validity();
            let days = (v.not_after.to_datetime() - v.not_before.to_datetime()).whole_days();
            (cert.raw_serial().to_vec(), days, cert.is_ca())
        };
        let (serial_a, days, is_ca) = parse(&a);
        let (serial_b, _, _) = parse(&b);
        assert_ne!(serial_a, serial_b);
        assert!(days <= 397, "{days} days");
        assert!(!is_ca);
        assert_eq!(a.cert.len(), 2, "chain is [leaf, CA]");
        assert_eq!(&a.cert[1], minter.ca().cert_der());
    }
}
