//! `robots-guard keys init`: a new signing key written to `signing.key`,
//! mode 0600 from the moment the file exists, as the CA key is
//! (`tls::ca`).

use std::fs;
use std::path::{Path, PathBuf};

use super::jwk::PublicJwk;
use super::key::{pem, SigningKey};
use super::SigningError;

/// The key file's name inside the directory `keys init` writes to; with
/// the default `--dir certs` it is `signing.key`'s default path.
pub const KEY_FILE: &str = "signing.key";

/// What [`init_key`] made: where the private key is, and the public half to
/// publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    /// The private key file (PKCS#8 PEM, mode 0600).
    pub path: PathBuf,
    /// The key's `keyid`: its RFC 7638 JWK thumbprint.
    pub keyid: String,
    /// The public key as a JWK (RFC 8037), as the directory serves it.
    pub jwk: String,
}

/// Creates a new Ed25519 signing key in `dir` ([`KEY_FILE`]), creating
/// `dir` if needed.
///
/// # Errors
///
/// [`SigningError::Exists`] when the file exists and `force` is false,
/// [`SigningError::Io`] when the directory or file cannot be written,
/// [`SigningError::Generate`] when no key can be generated.
pub fn init_key(dir: &Path, force: bool) -> Result<NewKey, SigningError> {
    let path = dir.join(KEY_FILE);
    // Even a dangling symlink counts: writing through it would put the key
    // wherever it points.
    let exists = fs::symlink_metadata(&path).is_ok();
    if exists && !force {
        return Err(SigningError::Exists { path });
    }
    if !dir.as_os_str().is_empty() {
        fs::create_dir_all(dir).map_err(|error| SigningError::Io {
            action: "create directory",
            path: dir.to_path_buf(),
            error,
        })?;
    }
    let (der, key) = SigningKey::generate()?;
    if exists {
        // Remove rather than truncate: the mode below only applies to a file
        // being created, and the old one may have looser permissions.
        fs::remove_file(&path).map_err(|error| SigningError::Io {
            action: "remove",
            path: path.clone(),
            error,
        })?;
    }
    write_private(&path, pem(&der).as_bytes())?;
    let jwk = PublicJwk::new(&key.public_key());
    Ok(NewKey {
        path,
        keyid: jwk.thumbprint().to_owned(),
        jwk: jwk.to_json(),
    })
}

/// Creates `path` (failing if anything is there) readable by its owner only,
/// and writes `contents`.
fn write_private(path: &Path, contents: &[u8]) -> Result<(), SigningError> {
    crate::new_file::create_new(path, contents, 0o600).map_err(|e| {
        let (action, error) = e.parts();
        SigningError::Io {
            action,
            path: path.to_path_buf(),
            error,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "robots-guard-signing-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn creates_a_private_key_and_refuses_to_overwrite_it() {
        let dir = temp_dir("init");
        let first = init_key(&dir.join("nested"), false).unwrap();
        assert_eq!(first.path, dir.join("nested").join(KEY_FILE));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&first.path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let loaded = SigningKey::load(&first.path).unwrap();
        assert_eq!(
            PublicJwk::new(&loaded.public_key()).thumbprint(),
            first.keyid
        );

        let before = fs::read(&first.path).unwrap();
        let err = init_key(&dir.join("nested"), false).unwrap_err();
        assert!(matches!(err, SigningError::Exists { .. }), "{err}");
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(fs::read(&first.path).unwrap(), before, "left as it was");

        let second = init_key(&dir.join("nested"), true).unwrap();
        assert_ne!(second.keyid, first.keyid);
        assert_ne!(fs::read(&first.path).unwrap(), before);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn force_replaces_a_loose_file_with_a_private_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("loose");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(KEY_FILE);
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        init_key(&dir, true).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }
}
