//! The TLS client configuration for origins: which certificates are trusted,
//! and which protocols are offered by ALPN.
//!
//! Upstream certificates are verified against the Mozilla roots
//! (webpki-roots) plus the PEM files of `tls.extra_roots`, with rustls'
//! own verifier. Nothing here, or anywhere in the proxy, can turn that
//! verification off: a robot that fetches through the proxy must get what
//! the origin served, or an error saying it could not be checked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::UpstreamBuildError;

/// ALPN for ordinary requests: the origin may choose HTTP/2, which then
/// carries every request to it over one connection.
pub(super) const HTTP2_OR_HTTP1: &[&[u8]] = &[b"h2", b"http/1.1"];

/// ALPN for protocol upgrades (WebSocket): an upgrade takes over an
/// HTTP/1.1 connection, which HTTP/2 has no way to do (RFC 9113 §8.6).
pub(super) const HTTP1_ONLY: &[&[u8]] = &[b"http/1.1"];

/// Builds the rustls client configuration: Mozilla roots plus `extra_roots`,
/// no ALPN (the connector adds it).
///
/// Also what a reload and `check` call to refuse a bad `tls.extra_roots`
/// before anything uses it.
///
/// # Errors
///
/// [`UpstreamBuildError`] when a root file is unreadable or holds no
/// certificate.
pub fn client_tls_config(
    extra_roots: &[PathBuf],
) -> Result<rustls::ClientConfig, UpstreamBuildError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for path in extra_roots {
        add_pem_roots(&mut roots, path)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// `config` offering `protocols` by ALPN, ready for a connector.
pub(super) fn offering(
    config: &rustls::ClientConfig,
    protocols: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
    let mut config = config.clone();
    config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn add_pem_roots(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), UpstreamBuildError> {
    let pem = std::fs::read(path).map_err(|error| UpstreamBuildError::ReadRoots {
        path: path.to_path_buf(),
        error,
    })?;
    let mut added = 0;
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| UpstreamBuildError::BadRoots {
            path: path.to_path_buf(),
            detail: format!(": {e}"),
        })?;
        roots.add(cert).map_err(|e| UpstreamBuildError::BadRoots {
            path: path.to_path_buf(),
            detail: format!(": {e}"),
        })?;
        added += 1;
    }
    if added == 0 {
        return Err(UpstreamBuildError::BadRoots {
            path: path.to_path_buf(),
            detail: String::new(),
        });
    }
    Ok(())
}
