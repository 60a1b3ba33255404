//! [`SigningError`]: why a signing key or its settings cannot be used.

use std::path::PathBuf;

/// Why the signing key could not be created or loaded, or the signing
/// settings cannot be used. Signing itself cannot fail once a
/// [`super::Signer`] exists: everything that could is checked when it is
/// built.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The key file does not exist.
    #[error(
        "signing key {} does not exist; create it with `robots-guard keys init` \
         (or set signing.key)",
        path.display()
    )]
    Missing {
        /// The configured key file.
        path: PathBuf,
    },
    /// `keys init` without `--force` found a key already there: replacing it
    /// would make every site that learned the old key stop recognising the
    /// robot until the directory is fetched again.
    #[error(
        "{} already exists; keeping it (pass --force to replace it, then publish \
         the new key before signing with it)",
        path.display()
    )]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// A file or directory could not be read, created or written.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// What was being done (`read`, `create`, `write`, ...).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The key file holds something other than an Ed25519 private key in
    /// PKCS#8 PEM.
    #[error("signing key {}: {detail}", path.display())]
    InvalidKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// `signing.signature_agent` is not a URL the `Signature-Agent` field
    /// can carry.
    #[error("signing.signature_agent {value:?}: {reason}")]
    SignatureAgent {
        /// The configured value.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// `signing.expires_in` is zero, or longer than the 24 hours the draft
    /// recommends at most.
    #[error("signing.expires_in must be greater than zero and at most 24h")]
    ExpiresIn,
    /// The system's random number generator failed while making a key.
    #[error("cannot generate a signing key: the system random number generator failed")]
    Generate,
}
