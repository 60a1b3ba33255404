//! HTTPS interception: the local certificate authority and the leaf
//! certificates minted from it on demand.
//!
//! In `intercept` mode the proxy answers a CONNECT by terminating TLS itself,
//! presenting a certificate for the requested host signed by a CA that lives in
//! `certs/` and that the user's clients were told to trust. [`ca`] creates and
//! loads that CA; [`leaf`] mints, caches and serves the per-host certificates
//! through a rustls [`ServerConfig`](rustls::ServerConfig).
//!
//! Nothing here weakens any TLS check: the client still verifies the chain
//! against the CA, and upstream verification is [`crate::upstream`]'s job.

pub mod ca;
pub mod leaf;

use std::path::PathBuf;

pub use ca::{init_ca, CaFiles, CertificateAuthority};
pub use leaf::LeafMinter;

/// Why the CA could not be created or loaded, or a leaf could not be minted.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `ca init` (or `load_or_create`) found files it would overwrite.
    #[error(
        "refusing to overwrite existing CA file(s) {}; pass --force to replace them \
         (clients that trust the old CA will then reject the proxy)",
        list(paths)
    )]
    Exists {
        /// The files that already exist.
        paths: Vec<PathBuf>,
    },
    /// Only one of the certificate and the key exists, so creating a new pair
    /// would orphan the other.
    #[error(
        "CA certificate and key must both exist or both be missing: {} exists but {} does not; \
         restore it, or run `robots-guard ca init --force` to create a new CA",
        present.display(),
        missing.display()
    )]
    Incomplete {
        /// The file that exists.
        present: PathBuf,
        /// The file that is missing.
        missing: PathBuf,
    },
    /// A CA file does not exist.
    #[error("{what} {} does not exist; run `robots-guard ca init` to create a CA", path.display())]
    Missing {
        /// "CA certificate" or "CA key".
        what: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// A CA file or its directory could not be read or written.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// What was being done: "read", "create", "write", "remove", "create directory".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A CA file is not what it should be: no PEM block, not a certificate,
    /// not a CA, expired.
    #[error("{}: {detail}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, for people.
        detail: String,
    },
    /// The key file holds a valid key, but not the one of the certificate.
    #[error(
        "CA key {} does not belong to CA certificate {} (their public keys differ)",
        key.display(),
        cert.display()
    )]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// A host name from a client (SNI or CONNECT authority) cannot go into a
    /// certificate.
    #[error("cannot mint a certificate for host {host:?}: {reason}")]
    InvalidHost {
        /// The host as received (truncated when very long).
        host: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// Generating a key or signing a certificate failed (internal).
    #[error("cannot {what}: {error}")]
    Generate {
        /// What was being generated.
        what: &'static str,
        /// rcgen's error.
        error: rcgen::Error,
    },
    /// rustls refused a key or a configuration (internal).
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fills `buf` from the ring provider's secure random source (serial numbers,
/// the CA name suffix), so no extra RNG crate is needed.
fn random_bytes(buf: &mut [u8]) -> Result<(), TlsError> {
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(buf)
        .map_err(|_| TlsError::Rustls(rustls::Error::FailedToGetRandomBytes))
}

/// A positive, non-zero 16-byte serial number (RFC 5280 §4.1.2.2 allows up
/// to 20 octets). Random because every leaf shares one key pair, and rcgen's
/// default serial is a hash of the public key: identical serials from one
/// issuer make browsers reject the certificates.
fn random_serial() -> Result<rcgen::SerialNumber, TlsError> {
    let mut bytes = [0u8; 16];
    random_bytes(&mut bytes)?;
    // Clear the sign bit and set the next one so the DER INTEGER is positive
    // and always 16 octets long.
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    Ok(rcgen::SerialNumber::from_slice(&bytes))
}
