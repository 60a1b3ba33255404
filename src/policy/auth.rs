//! Proxy authentication (RFC 9110 §11.7.1 `Proxy-Authorization`, Basic
//! scheme, RFC 7617): who may use the proxy, when it is not enough to know
//! their address.
//!
//! Credentials come from `[auth] users` in the config and/or an
//! htpasswd-style file (`user:hash` lines). Hashes may be bcrypt
//! (`htpasswd -B`) or `{SHA}` (`htpasswd -s`); config passwords may also be
//! plain text (keep the config file private). Verifying bcrypt costs tens of
//! milliseconds, so successful checks are remembered (keyed by a SHA-256 of
//! the header, never the header itself) in a small LRU.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine;
use http::HeaderMap;
use lru::LruCache;

/// How one user's password is stored.
#[derive(Clone, PartialEq, Eq)]
enum Secret {
    Plain(String),
    Bcrypt(String),
    /// `{SHA}` + base64 of the SHA-1 digest (Apache's legacy format).
    Sha1(Vec<u8>),
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets, even hashed.
        f.write_str(match self {
            Secret::Plain(_) => "Plain(..)",
            Secret::Bcrypt(_) => "Bcrypt(..)",
            Secret::Sha1(_) => "Sha1(..)",
        })
    }
}

impl Secret {
    fn parse(value: &str, allow_plain: bool) -> Result<Secret, String> {
        if value.starts_with("$2a$") || value.starts_with("$2b$") || value.starts_with("$2y$") {
            return Ok(Secret::Bcrypt(value.to_string()));
        }
        if let Some(digest) = value.strip_prefix("{SHA}") {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(digest)
                .map_err(|_| "invalid {SHA} hash".to_string())?;
            return Ok(Secret::Sha1(bytes));
        }
        if value.starts_with("$apr1$") || value.starts_with("$1$") {
            return Err("MD5 (apr1) hashes are not supported; use `htpasswd -B` (bcrypt)".into());
        }
        if allow_plain {
            Ok(Secret::Plain(value.to_string()))
        } else {
            Err("unknown hash format; use `htpasswd -B` (bcrypt) or `htpasswd -s` ({SHA})".into())
        }
    }

    fn verify(&self, password: &str) -> bool {
        match self {
            Secret::Plain(expected) => constant_time_eq(expected.as_bytes(), password.as_bytes()),
            Secret::Bcrypt(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            Secret::Sha1(expected) => {
                let digest = ring::digest::digest(
                    &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
                    password.as_bytes(),
                );
                constant_time_eq(expected, digest.as_ref())
            }
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why the credential store could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// The htpasswd file could not be read.
    #[error("cannot read auth.htpasswd file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A line of the htpasswd file (or a config entry) is unusable.
    #[error("{source_name}: {detail}")]
    Entry {
        /// File and line, or `auth.users.NAME`.
        source_name: String,
        /// What is wrong.
        detail: String,
    },
}

/// Why a request was refused with `407`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Proxy-Authorization` header.
    #[error("this proxy requires authentication (Proxy-Authorization: Basic)")]
    Missing,
    /// A scheme other than Basic, or undecodable credentials.
    #[error("unsupported or malformed Proxy-Authorization; use the Basic scheme")]
    Malformed,
    /// Unknown user or wrong password.
    #[error("wrong user name or password")]
    Rejected,
}

/// The users allowed to use the proxy.
pub struct ProxyAuth {
    users: HashMap<String, Secret>,
    realm: String,
    verified: Mutex<LruCache<[u8; 32], String>>,
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyAuth")
            .field("users", &self.users.len())
            .field("realm", &self.realm)
            .finish()
    }
}

impl ProxyAuth {
    /// Builds the store from config users (`name → password or hash`) and an
    /// optional htpasswd file. Returns `None` when there are no users at all
    /// (authentication off).
    ///
    /// # Errors
    ///
    /// [`AuthConfigError`] when the file cannot be read or an entry is bad.
    pub fn new(
        users: &std::collections::BTreeMap<String, String>,
        htpasswd: Option<&Path>,
        realm: &str,
    ) -> Result<Option<ProxyAuth>, AuthConfigError> {
        let mut all = HashMap::new();
        for (name, value) in users {
            let secret = Secret::parse(value, true).map_err(|detail| AuthConfigError::Entry {
                source_name: format!("auth.users.{name}"),
                detail,
            })?;
            all.insert(name.clone(), secret);
        }
        if let Some(path) = htpasswd {
            let text = std::fs::read_to_string(path).map_err(|error| AuthConfigError::Read {
                path: path.to_path_buf(),
                error,
            })?;
            for (number, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let entry = |detail: String| AuthConfigError::Entry {
                    source_name: format!("{} line {}", path.display(), number + 1),
                    detail,
                };
                let (name, hash) = line
                    .split_once(':')
                    .ok_or_else(|| entry("expected `user:hash`".into()))?;
                all.insert(name.to_string(), Secret::parse(hash, false).map_err(entry)?);
            }
        }
        if all.is_empty() {
            return Ok(None);
        }
        Ok(Some(ProxyAuth {
            users: all,
            realm: realm.to_string(),
            verified: Mutex::new(LruCache::new(
                NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
            )),
        }))
    }

    /// Is `name` one of the users?
    pub fn has_user(&self, name: &str) -> bool {
        self.users.contains_key(name)
    }

    /// The `Proxy-Authenticate` challenge.
    pub fn challenge(&self) -> String {
        format!(
            "Basic realm=\"{}\", charset=\"UTF-8\"",
            self.realm.replace('"', "'")
        )
    }

    /// Checks a request's `Proxy-Authorization`; returns the user name.
    ///
    /// # Errors
    ///
    /// [`AuthError`] when it is missing, malformed or wrong.
    pub fn check(&self, headers: &HeaderMap) -> Result<String, AuthError> {
        let value = headers
            .get(http::header::PROXY_AUTHORIZATION)
            .ok_or(AuthError::Missing)?
            .as_bytes();
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, value)
            .as_ref()
            .try_into()
            .map_err(|_| AuthError::Malformed)?;
        if let Some(user) = self.lock().get(&key) {
            return Ok(user.clone());
        }
        let (user, password) = decode_basic(value).ok_or(AuthError::Malformed)?;
        let secret = self.users.get(&user).ok_or(AuthError::Rejected)?;
        if !secret.verify(&password) {
            return Err(AuthError::Rejected);
        }
        self.lock().put(key, user.clone());
        Ok(user)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<[u8; 32], String>> {
        // A poisoned cache only holds verified results; keep using it.
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `Basic base64(user:password)`, scheme case-insensitive.
fn decode_basic(value: &[u8]) -> Option<(String, String)> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn header(user: &str, password: &str) -> HeaderMap {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::PROXY_AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {token}")).expect("header"),
        );
        headers
    }

    fn users(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(u, p)| (u.to_string(), p.to_string()))
            .collect()
    }

    #[test]
    fn no_users_means_no_authentication() {
        assert!(ProxyAuth::new(&users(&[]), None, "r")
            .expect("builds")
            .is_none());
    }

    #[test]
    fn plain_bcrypt_and_sha_secrets_verify() {
        let bcrypt_hash = bcrypt::hash("b-secret", 4).expect("hash");
        let auth = ProxyAuth::new(
            &users(&[
                ("alice", "a-secret"),
                ("bob", &bcrypt_hash),
                ("carol", "{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M="),
            ]),
            None,
            "robots-guard",
        )
        .expect("builds")
        .expect("enabled");
        assert_eq!(auth.check(&header("alice", "a-secret")), Ok("alice".into()));
        assert_eq!(auth.check(&header("bob", "b-secret")), Ok("bob".into()));
        // {SHA} of "test".
        assert_eq!(auth.check(&header("carol", "test")), Ok("carol".into()));
        assert_eq!(
            auth.check(&header("alice", "wrong")),
            Err(AuthError::Rejected)
        );
        assert_eq!(
            auth.check(&header("mallory", "a-secret")),
            Err(AuthError::Rejected)
        );
        assert_eq!(auth.check(&HeaderMap::new()), Err(AuthError::Missing));
        let mut bearer = HeaderMap::new();
        bearer.insert(
            http::header::PROXY_AUTHORIZATION,
            HeaderValue::from_static("Bearer x"),
        );
        assert_eq!(auth.check(&bearer), Err(AuthError::Malformed));
        // A second check of the same header is answered from the cache.
        assert_eq!(auth.check(&header("bob", "b-secret")), Ok("bob".into()));
        assert_eq!(
            auth.challenge(),
            "Basic realm=\"robots-guard\", charset=\"UTF-8\""
        );
    }

    #[test]
    fn htpasswd_file_lines_and_errors() {
        let dir = std::env::temp_dir().join(format!("rg-htpasswd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let good = dir.join("good");
        let hash = bcrypt::hash("pw", 4).expect("hash");
        std::fs::write(&good, format!("# comment\n\ndave:{hash}\n")).expect("write");
        let auth = ProxyAuth::new(&users(&[]), Some(&good), "r")
            .expect("builds")
            .expect("enabled");
        assert_eq!(auth.check(&header("dave", "pw")), Ok("dave".into()));
        let bad = dir.join("bad");
        std::fs::write(&bad, "erin:$apr1$abc$def\n").expect("write");
        let err = ProxyAuth::new(&users(&[]), Some(&bad), "r").expect_err("apr1 refused");
        assert!(
            err.to_string().contains("line 1") && err.to_string().contains("htpasswd -B"),
            "{err}"
        );
        let plain = dir.join("plain");
        std::fs::write(&plain, "frank:plaintext\n").expect("write");
        assert!(ProxyAuth::new(&users(&[]), Some(&plain), "r").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
