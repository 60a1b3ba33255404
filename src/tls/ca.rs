//! The local certificate authority: created once by `robots-guard ca init`
//! (or by `serve` on first start), loaded on every start.
//!
//! The CA is ECDSA P-256 (small, fast to sign with, accepted everywhere) with
//! `pathLenConstraint = 0`, so even a stolen key can only sign leaves, never
//! another CA. Its common name carries a random suffix so that two installs
//! differ and a user can tell them apart in a trust store.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};

use super::{random_bytes, random_serial, TlsError};

/// File name of the CA certificate inside the CA directory.
pub const CERT_FILE: &str = "ca.pem";
/// File name of the CA private key inside the CA directory.
pub const KEY_FILE: &str = "ca.key";

/// About ten years: long enough that users install it once, and the
/// 398-day limit browsers apply is to leaves, not to private roots.
const CA_VALIDITY: Duration = Duration::days(3652);

/// The two files written by [`init_ca`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFiles {
    /// The CA certificate (PEM), to give to clients.
    pub cert: PathBuf,
    /// The CA private key (PKCS#8 PEM, mode 0600).
    pub key: PathBuf,
}

/// Creates a new CA in `dir` (`ca.pem` and `ca.key`), creating `dir` if
/// needed.
///
/// The key file is created with mode 0600 from the start, so it is never
/// readable by others, not even briefly.
///
/// # Errors
///
/// [`TlsError::Exists`] when either file exists and `force` is false (a new
/// CA silently replacing a trusted one would break every client);
/// [`TlsError::Io`] when the directory or files cannot be written.
pub fn init_ca(dir: &Path, force: bool) -> Result<CaFiles, TlsError> {
    let files = CaFiles {
        cert: dir.join(CERT_FILE),
        key: dir.join(KEY_FILE),
    };
    create_files(&files.cert, &files.key, force)?;
    Ok(files)
}

/// A CA that can sign leaf certificates: its certificate (for chains and for
/// clients to trust) and its key.
pub struct CertificateAuthority {
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertificateAuthority {
    /// Leaves the key out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert_der_len", &self.cert_der.len())
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Generates a new CA in memory, without writing anything. [`init_ca`]
    /// uses it; tests and benchmarks use it directly.
    ///
    /// # Errors
    ///
    /// [`TlsError::Generate`] if key generation or signing fails.
    pub fn generate() -> Result<Self, TlsError> {
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|error| TlsError::Generate {
                what: "generate the CA key",
                error,
            })?;
        let mut suffix = [0u8; 4];
        random_bytes(&mut suffix)?;
        let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();

        let mut name = DistinguishedName::new();
        name.push(
            DnType::CommonName,
            format!("robots-guard local CA {suffix}"),
        );
        name.push(DnType::OrganizationName, "robots-guard");

        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        // A day of slack for clients whose clock is behind.
        params.not_before = now - Duration::days(1);
        params.not_after = now + CA_VALIDITY;
        params.serial_number = Some(random_serial()?);

        let cert = params
            .self_signed(&key)
            .map_err(|error| TlsError::Generate {
                what: "self-sign the CA certificate",
                error,
            })?;
        Ok(CertificateAuthority {
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// Loads the CA from its certificate and key files.
    ///
    /// # Errors
    ///
    /// [`TlsError::Missing`] when a file does not exist, [`TlsError::Io`]
    /// when it cannot be read, [`TlsError::Invalid`] when the certificate is
    /// not a PEM certificate, not a CA or expired, or the key is not a PKCS#8
    /// PEM key, and [`TlsError::KeyMismatch`] when the key is not the
    /// certificate's.
    pub fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_pem = read(cert, "CA certificate")?;
        let key_pem = read(key, "CA key")?;
        let invalid = |detail: String| TlsError::Invalid {
            path: cert.to_path_buf(),
            detail,
        };

        let cert_der = rustls_pemfile::certs(&mut cert_pem.as_bytes())
            .next()
            .ok_or_else(|| {
                invalid(
                    "holds no PEM certificate (expected a -----BEGIN CERTIFICATE----- block)"
                        .into(),
                )
            })?
            .map_err(|e| invalid(format!("bad PEM certificate: {e}")))?;
        let (_, x509) = x509_parser::parse_x509_certificate(&cert_der)
            .map_err(|e| invalid(format!("cannot parse the certificate: {e}")))?;
        if !x509.is_ca() {
            return Err(invalid(
                "is not a CA certificate (basicConstraints CA is not set)".into(),
            ));
        }
        let not_after = x509.validity().not_after.to_datetime();
        if not_after < OffsetDateTime::now_utc() {
            return Err(invalid(format!(
                "the CA certificate expired on {not_after}; \
                 run `robots-guard ca init --force` and trust the new CA"
            )));
        }

        let key_pair = KeyPair::from_pem(&key_pem).map_err(|e| TlsError::Invalid {
            path: key.to_path_buf(),
            detail: format!(
                "not a PKCS#8 PEM private key (expected a -----BEGIN PRIVATE KEY----- block): {e}"
            ),
        })?;
        if key_pair.subject_public_key_info() != x509.public_key().raw {
            return Err(TlsError::KeyMismatch {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            });
        }

        // The issuer takes the subject name from the certificate as encoded,
        // so leaves name their issuer byte for byte as the CA names itself
        // (chain building compares these bytes).
        let issuer = Issuer::from_ca_cert_der(&cert_der, key_pair)
            .map_err(|e| invalid(format!("cannot use the certificate as an issuer: {e}")))?;
        Ok(CertificateAuthority {
            cert_der,
            cert_pem,
            issuer,
        })
    }

    /// Loads the CA, or creates it when neither file exists: what `serve`
    /// does on start. The flag is true when the CA was created, so the caller
    /// can tell the user to make clients trust it.
    ///
    /// # Errors
    ///
    /// [`TlsError::Incomplete`] when only one of the files exists (creating a
    /// new pair would overwrite or orphan the other), else the errors of
    /// [`CertificateAuthority::load`] and [`init_ca`].
    pub fn load_or_create(cert: &Path, key: &Path) -> Result<(Self, bool), TlsError> {
        match (exists(cert), exists(key)) {
            (true, true) => Ok((Self::load(cert, key)?, false)),
            (false, false) => Ok((create_files(cert, key, false)?, true)),
            (true, false) => Err(TlsError::Incomplete {
                present: cert.to_path_buf(),
                missing: key.to_path_buf(),
            }),
            (false, true) => Err(TlsError::Incomplete {
                present: key.to_path_buf(),
                missing: cert.to_path_buf(),
            }),
        }
    }

    /// The CA certificate, DER: the last link of every leaf's chain.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The CA certificate, PEM: what clients are told to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The signer for leaves.
    pub(super) fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }
}

/// Generates a CA and writes it to `cert` and `key`, creating their parent
/// directories.
fn create_files(cert: &Path, key: &Path, force: bool) -> Result<CertificateAuthority, TlsError> {
    let existing: Vec<PathBuf> = [cert, key]
        .into_iter()
        .filter(|p| exists(p))
        .map(Path::to_path_buf)
        .collect();
    if !existing.is_empty() && !force {
        return Err(TlsError::Exists { paths: existing });
    }
    for path in [cert, key] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|error| TlsError::Io {
                action: "create directory",
                path: dir.to_path_buf(),
                error,
            })?;
        }
    }

    let ca = CertificateAuthority::generate()?;
    // Remove rather than truncate: the mode below only applies to a file
    // being created, and an old key file may have looser permissions.
    for path in &existing {
        fs::remove_file(path).map_err(|error| TlsError::Io {
            action: "remove",
            path: path.clone(),
            error,
        })?;
    }
    write_new(key, ca.issuer.key().serialize_pem().as_bytes(), 0o600)?;
    if let Err(e) = write_new(cert, ca.cert_pem.as_bytes(), 0o644) {
        // Do not leave a key without its certificate behind: the next start
        // would report an incomplete CA instead of creating one.
        let _ = fs::remove_file(key);
        return Err(e);
    }
    Ok(ca)
}

/// Creates `path` (failing if it exists, even as a dangling symlink) with
/// `mode` on Unix, and writes `contents`.
fn write_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), TlsError> {
    crate::new_file::create_new(path, contents, mode).map_err(|e| {
        let (action, error) = e.parts();
        TlsError::Io {
            action,
            path: path.to_path_buf(),
            error,
        }
    })
}

fn read(path: &Path, what: &'static str) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|error| match error.kind() {
        io::ErrorKind::NotFound => TlsError::Missing {
            what,
            path: path.to_path_buf(),
        },
        _ => TlsError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        },
    })
}

/// True when something (even a dangling symlink) is at `path`.
fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}
