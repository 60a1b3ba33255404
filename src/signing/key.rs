//! The Ed25519 signing key: read from its PKCS#8 PEM file, or generated.
//!
//! Ed25519 (RFC 8032) is the algorithm the Web Bot Auth drafts show in every
//! example and the one RFC 9421 §3.3.6 registers as `ed25519`: small keys,
//! deterministic signatures (so RFC 9421's test vectors can be reproduced
//! byte for byte) and fast verification for the sites that check them.

use std::fmt;
use std::path::Path;

use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair};

use super::SigningError;

/// The PEM label of a PKCS#8 private key (RFC 7468 §10).
const PEM_LABEL: &str = "PRIVATE KEY";

/// RFC 8410 §7: a PKCS#8 v1 `OneAsymmetricKey` for Ed25519 up to the
/// 32-byte seed (SEQUENCE { version 0, AlgorithmIdentifier { 1.3.101.112 },
/// OCTET STRING { OCTET STRING (32 bytes) } }).
const PKCS8_V1_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// An Ed25519 key pair.
pub(crate) struct SigningKey {
    pair: Ed25519KeyPair,
}

impl fmt::Debug for SigningKey {
    /// Shows the public half only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("public", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Reads the key at `path`: one `-----BEGIN PRIVATE KEY-----` block
    /// holding an Ed25519 PKCS#8 key, v1 (as `keys init` and `openssl
    /// genpkey -algorithm ed25519` write it) or v2 (with the public key,
    /// checked against the private key).
    ///
    /// # Errors
    ///
    /// [`SigningError::Missing`] when there is no file, [`SigningError::Io`]
    /// when it cannot be read, [`SigningError::InvalidKey`] when it is not
    /// such a key.
    pub(crate) fn load(path: &Path) -> Result<SigningKey, SigningError> {
        let pem = std::fs::read(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => SigningError::Missing {
                path: path.to_path_buf(),
            },
            _ => SigningError::Io {
                action: "read",
                path: path.to_path_buf(),
                error,
            },
        })?;
        let invalid = |detail: String| SigningError::InvalidKey {
            path: path.to_path_buf(),
            detail,
        };
        let der = pkcs8_der(&pem).map_err(invalid)?;
        SigningKey::from_pkcs8(&der).map_err(invalid)
    }

    /// The key of a PKCS#8 document (DER).
    pub(crate) fn from_pkcs8(der: &[u8]) -> Result<SigningKey, String> {
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map(|pair| SigningKey { pair })
            .map_err(|e| format!("not an Ed25519 PKCS#8 private key ({e})"))
    }

    /// A new key, as a PKCS#8 document (DER) and the key itself.
    ///
    /// The document is PKCS#8 v1, the form RFC 8410 §7 shows and `openssl
    /// genpkey` writes: the 32-byte seed alone. *ring*'s own v2 documents
    /// (with the public key) are refused by OpenSSL 3 and by Python's
    /// `cryptography`, and an operator may want to use the key with either.
    pub(crate) fn generate() -> Result<(Vec<u8>, SigningKey), SigningError> {
        use ring::rand::SecureRandom;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| SigningError::Generate)?;
        let mut der = PKCS8_V1_ED25519_PREFIX.to_vec();
        der.extend_from_slice(&seed);
        let key = SigningKey::from_pkcs8(&der).map_err(|_| SigningError::Generate)?;
        Ok((der, key))
    }

    /// The 32-byte public key (RFC 8032 §5.1.5), the JWK's `x`.
    pub(crate) fn public_key(&self) -> [u8; 32] {
        let mut public = [0u8; 32];
        public.copy_from_slice(self.pair.public_key().as_ref());
        public
    }

    /// The 64-byte Ed25519 signature of `message` (RFC 9421 §3.3.6: the
    /// signature base as it is, no prehash).
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        let mut signature = [0u8; 64];
        signature.copy_from_slice(self.pair.sign(message).as_ref());
        signature
    }
}

/// `der` as a PEM document (RFC 7468 §2: base64 in lines of 64 characters).
pub(crate) fn pem(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {PEM_LABEL}-----\n");
    for line in body.as_bytes().chunks(64) {
        // Base64 output is ASCII, so every chunk is valid UTF-8.
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {PEM_LABEL}-----\n"));
    out
}

/// The DER of the one PKCS#8 private key in `pem`.
fn pkcs8_der(pem: &[u8]) -> Result<Vec<u8>, String> {
    let mut reader = pem;
    let mut found = None;
    for item in rustls_pemfile::read_all(&mut reader) {
        match item {
            Ok(rustls_pemfile::Item::Pkcs8Key(key)) if found.is_none() => {
                found = Some(key.secret_pkcs8_der().to_vec());
            }
            Ok(rustls_pemfile::Item::Pkcs8Key(_)) => {
                return Err("holds more than one private key".into());
            }
            Ok(_) => {}
            Err(e) => return Err(format!("is not valid PEM ({e})")),
        }
    }
    match found {
        Some(der) => Ok(der),
        None => Err(format!(
            "holds no PKCS#8 private key (expected a -----BEGIN {PEM_LABEL}----- block, \
             as `robots-guard keys init` writes)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_round_trips_through_the_reader() {
        let (der, key) = SigningKey::generate().unwrap();
        let text = pem(&der);
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        assert!(text.ends_with("-----END PRIVATE KEY-----\n"));
        assert!(text.lines().all(|line| line.len() <= 64));
        let again = SigningKey::from_pkcs8(&pkcs8_der(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(again.public_key(), key.public_key());
    }

    #[test]
    fn generated_keys_are_rfc8410_pkcs8_v1_and_v2_keys_load_too() {
        let (der, _) = SigningKey::generate().unwrap();
        assert_eq!(der.len(), 48);
        assert_eq!(der[..16], PKCS8_V1_ED25519_PREFIX);
        let rng = ring::rand::SystemRandom::new();
        let v2 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        SigningKey::from_pkcs8(v2.as_ref()).unwrap();
    }

    #[test]
    fn rfc8037_a1_key_has_a2_public_key() {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        // RFC 8037 A.1's private key `d`, as a v1 document; A.2's `x`.
        let mut der = PKCS8_V1_ED25519_PREFIX.to_vec();
        der.extend(
            URL_SAFE_NO_PAD
                .decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
                .unwrap(),
        );
        let key = SigningKey::from_pkcs8(&der).unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.encode(key.public_key()),
            "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
        );
    }

    #[test]
    fn other_pem_is_refused_with_a_reason() {
        let err = pkcs8_der(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            .unwrap_err();
        assert!(err.contains("no PKCS#8 private key"), "{err}");
        assert!(pkcs8_der(b"").is_err());
        // A P-256 key (the CA's kind) is PKCS#8 but not Ed25519.
        let rng = ring::rand::SystemRandom::new();
        let p256 = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &rng,
        )
        .unwrap();
        let err = SigningKey::from_pkcs8(p256.as_ref()).unwrap_err();
        assert!(err.contains("not an Ed25519"), "{err}");
    }

    #[test]
    fn signatures_verify_with_the_public_key() {
        let (_, key) = SigningKey::generate().unwrap();
        let signature = key.sign(b"message");
        let public =
            ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key.public_key());
        public.verify(b"message", &signature).unwrap();
        assert!(public.verify(b"other", &signature).is_err());
    }
}
