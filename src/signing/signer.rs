//! [`Signer`]: the key, its identity, and the two things made with it, a
//! request's signature and the signed key directory.

use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};

use super::authority;
use super::base::{self, Component, Param};
use super::fields::{self, SIGNATURE, SIGNATURE_AGENT, SIGNATURE_INPUT};
use super::jwk::PublicJwk;
use super::key::SigningKey;
use super::{SigningError, DIRECTORY_MEDIA_TYPE};
use crate::config::SigningConfig;

/// draft-ietf-webbotauth-httpsig-protocol-01 §5.2: a request signature's
/// `tag`.
pub const REQUEST_TAG: &str = "web-bot-auth";

/// draft-ietf-webbotauth-httpsig-protocol-01 Appendix B.1: a directory
/// response signature's `tag`.
pub const DIRECTORY_TAG: &str = "http-message-signatures-directory";

/// RFC 9421 §3.3.6: the `alg` of Ed25519 signatures. The drafts do not
/// require `alg`, and their Ed25519 examples carry it; sending it lets a
/// verifier refuse an algorithm confusion before it tries the key.
const ALG: &str = "ed25519";

/// The label of the directory's signature, as in the draft's example
/// (Appendix E.2.3). One key, one signature.
const DIRECTORY_LABEL: &str = "binding";

/// How long a directory response signature stays valid. Appendix C.8 of the
/// draft asks for lifetimes well beyond how often a redistributed key list is
/// republished, since a verifier that fetched the directory itself needs no
/// proof at all; a day.
pub(super) const DIRECTORY_SIGNATURE_LIFETIME: u64 = 24 * 3600;

/// `Cache-Control` of the directory: verifiers refetch it within the hour,
/// so a key replaced by `keys init --force` and a reload reaches them soon
/// (a verifier meeting an unknown `keyid` may also refetch at once).
const DIRECTORY_CACHE_CONTROL: &str = "max-age=3600";

/// Signs requests as the robot, and serves the robot's key directory.
///
/// Built from the `[signing]` settings; cheap to share (`Arc`) and used from
/// every worker at once.
pub struct Signer {
    key: SigningKey,
    jwk: PublicJwk,
    /// The configured directory URL.
    signature_agent: String,
    /// It as a Structured Field String (`"https://..."`): the value of the
    /// covered `Signature-Agent` member (RFC 9421 §2.1.2).
    agent_item: String,
    /// `robots-guard="https://..."`: the field under the usual label.
    agent_field: HeaderValue,
    /// `expires` - `created`, whole seconds.
    expires_in: u64,
    keep_client_signatures: bool,
}

impl fmt::Debug for Signer {
    /// The key's identity, never the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("keyid", &self.keyid())
            .field("signature_agent", &self.signature_agent)
            .field("expires_in", &self.expires_in)
            .field("keep_client_signatures", &self.keep_client_signatures)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// Loads the Ed25519 key at `key_path` (PKCS#8 PEM, as `keys init`
    /// writes it) to sign as the robot whose key directory is at
    /// `signature_agent`, each signature valid for `expires_in` (rounded up
    /// to whole seconds). Client signatures are removed from the requests
    /// it signs unless [`Signer::keep_client_signatures`] says otherwise.
    ///
    /// # Errors
    ///
    /// The key's errors ([`SigningError::Missing`], [`SigningError::Io`],
    /// [`SigningError::InvalidKey`]), [`SigningError::SignatureAgent`] for a
    /// URL `Signature-Agent` cannot carry, [`SigningError::ExpiresIn`] for a
    /// zero lifetime or one longer than 24 h.
    pub fn load(
        key_path: &Path,
        signature_agent: &str,
        expires_in: Duration,
    ) -> Result<Signer, SigningError> {
        SigningConfig::check_signature_agent(signature_agent).map_err(|reason| {
            SigningError::SignatureAgent {
                value: signature_agent.to_owned(),
                reason,
            }
        })?;
        if expires_in.is_zero() || expires_in > SigningConfig::MAX_EXPIRES_IN {
            return Err(SigningError::ExpiresIn);
        }
        let expires_in = expires_in.as_secs() + u64::from(expires_in.subsec_nanos() > 0);
        let key = SigningKey::load(key_path)?;
        if signature_agent.starts_with("http://") {
            tracing::warn!(
                signature_agent,
                "signing.signature_agent is not https; verifiers following the Web Bot Auth \
                 draft will not fetch it (use http:// for tests only)"
            );
        }
        let agent = |reason| SigningError::SignatureAgent {
            value: signature_agent.to_owned(),
            reason,
        };
        let agent_item = sfv::ItemSerializer::new()
            .bare_item(
                sfv::StringRef::from_str(signature_agent)
                    .map_err(|_| agent("is not a Structured Field String"))?,
            )
            .finish();
        let agent_field = HeaderValue::from_str(&format!("{}={agent_item}", fields::LABEL))
            .map_err(|_| agent("is not a header value"))?;
        let jwk = PublicJwk::new(&key.public_key());
        Ok(Signer {
            key,
            jwk,
            signature_agent: signature_agent.to_owned(),
            agent_item,
            agent_field,
            expires_in,
            keep_client_signatures: false,
        })
    }

    /// [`Signer::load`] with the `[signing]` settings, client signatures
    /// kept as `keep_client_signatures` says.
    ///
    /// # Errors
    ///
    /// As [`Signer::load`].
    pub fn from_config(config: &SigningConfig) -> Result<Signer, SigningError> {
        Ok(
            Signer::load(&config.key, &config.signature_agent, config.expires_in)?
                .keep_client_signatures(config.keep_client_signatures),
        )
    }

    /// Whether [`Signer::sign`] keeps the signatures a client sent (adding
    /// its own under a label of its own) instead of removing them.
    #[must_use]
    pub fn keep_client_signatures(mut self, keep: bool) -> Signer {
        self.keep_client_signatures = keep;
        self
    }

    /// The key's `keyid`: the RFC 7638 JWK thumbprint of its public key,
    /// base64url without padding.
    pub fn keyid(&self) -> &str {
        self.jwk.thumbprint()
    }

    /// The public key as a JWK (RFC 8037 `OKP`), as the directory lists it.
    pub fn public_jwk(&self) -> String {
        self.jwk.to_json()
    }

    /// The directory URL sent in `Signature-Agent`.
    pub fn signature_agent(&self) -> &str {
        &self.signature_agent
    }

    /// Signs a request about to be forwarded, as
    /// draft-ietf-webbotauth-httpsig-protocol-01 §5.2 asks:
    ///
    /// - the client's `Signature`, `Signature-Input` and `Signature-Agent`
    ///   are removed, so the site sees only signatures the robot stands
    ///   behind; unless client signatures are kept, when the proxy's are
    ///   added beside them under a label the client does not use, and both
    ///   verify (a client `Signature-Agent` in the draft's older bare-String
    ///   form, or fields that are not Dictionaries, cannot take another
    ///   member and are removed after all);
    /// - `Signature-Agent` gets a member, keyed by the label, whose value is
    ///   the directory URL as a Structured Field String (§5.2.1);
    /// - `Signature-Input` covers `("@authority" "signature-agent";key=LABEL)`
    ///   with `created` (`now`), `expires` (`now` + `expires_in`), `keyid`,
    ///   `alg="ed25519"` and `tag="web-bot-auth"`;
    /// - `Signature` is the Ed25519 signature of the RFC 9421 §2.5 base.
    ///
    /// `authority` is the request target's `host[:port]` as the upstream
    /// request names it: the host is lowercased here (RFC 9421 §2.2.3), and
    /// the caller leaves the port out when it is the scheme's default, as
    /// `Origin::authority` does (an authority alone does not say which port
    /// is the default).
    ///
    /// Only the draft's required minimum is covered, since the signer is
    /// given the fields and the authority alone: such a signature verifies
    /// for any method and path on that authority until it expires (§5.2
    /// says so, and asks signers that can to cover `@method` and `@path`
    /// too), so `expires_in` is what bounds a replay.
    pub fn sign(&self, headers: &mut HeaderMap, authority: &str, now: SystemTime) {
        let created = unix_seconds(now);
        self.sign_at(headers, authority, created, created + self.expires_in);
    }

    fn sign_at(&self, headers: &mut HeaderMap, authority: &str, created: u64, expires: u64) {
        let in_use = if self.keep_client_signatures {
            fields::labels_in_use(headers)
        } else {
            None
        };
        let label = match &in_use {
            Some(labels) => fields::free_label(labels),
            None => {
                fields::strip(headers);
                fields::LABEL.to_owned()
            }
        };
        let authority = authority::normalize(authority, &[]);
        let components = [
            Component::plain("@authority", &authority),
            Component {
                name: "signature-agent",
                key: Some(&label),
                req: false,
                value: &self.agent_item,
            },
        ];
        let params = [
            Param::Created(created),
            Param::Expires(expires),
            Param::KeyId(self.keyid()),
            Param::Alg(ALG),
            Param::Tag(REQUEST_TAG),
        ];
        let prepared = match base::prepare(&components, &params) {
            Ok(prepared) => prepared,
            Err(error) => {
                // Only an authority with a line break gets here; a parsed
                // one cannot hold one.
                tracing::warn!(%error, "request not signed");
                return;
            }
        };
        let signature = self.key.sign(prepared.base.as_bytes());
        let agent_field = if label == fields::LABEL {
            Some(self.agent_field.clone())
        } else {
            HeaderValue::from_str(&format!("{label}={}", self.agent_item)).ok()
        };
        let input = HeaderValue::from_str(&format!("{label}={}", prepared.signature_params));
        let value = HeaderValue::from_str(&format!("{label}=:{}:", STANDARD.encode(signature)));
        if let (Some(agent), Ok(input), Ok(value)) = (agent_field, input, value) {
            // Appended: a kept client's fields keep their bytes, and each
            // field's lines read as one Dictionary (RFC 9651 §4.2).
            headers.append(SIGNATURE_AGENT, agent);
            headers.append(SIGNATURE_INPUT, input);
            headers.append(SIGNATURE, value);
        }
    }

    /// The key directory (draft-ietf-webbotauth-httpsig-protocol-01 §5.5.1):
    /// the JWK Set `{"keys":[JWK]}` and the response fields to serve it
    /// with, for a request to `authority` (its `Host`) at `now`.
    ///
    /// The fields are `Content-Type: application/http-message-signatures-directory+json`,
    /// a `Cache-Control` lifetime, and the possession proof of Appendix B.1:
    /// one signature per key (here one), labelled `binding`, covering
    /// `("@authority";req "content-digest")` with `created`, `expires` (a
    /// day later), `keyid` and `tag="http-message-signatures-directory"`,
    /// over the `Content-Digest` (RFC 9530, sha-256) of the body.
    /// `authority` is normalised as RFC 9421 §2.2.3 says, ports 80 and 443
    /// dropped (a directory is reached over https, or plain http in tests).
    pub fn directory(&self, authority: &str, now: SystemTime) -> (HeaderMap, Bytes) {
        let created = unix_seconds(now);
        self.directory_at(authority, created, created + DIRECTORY_SIGNATURE_LIFETIME)
    }

    fn directory_at(&self, authority: &str, created: u64, expires: u64) -> (HeaderMap, Bytes) {
        directory_of(&[self], authority, created, expires)
    }
}

/// The key directory listing every key of `signers` (once each, by
/// `keyid`), each proving possession with a signature of its own: labelled
/// `binding` for the first key, `binding-2`, `binding-3`, ... for the next
/// (draft-ietf-webbotauth-httpsig-protocol-01 Appendix B.1: one signature
/// per key in the directory).
pub(super) fn directory_of(
    signers: &[&Signer],
    authority: &str,
    created: u64,
    expires: u64,
) -> (HeaderMap, Bytes) {
    let mut keys: Vec<&Signer> = Vec::with_capacity(signers.len());
    for signer in signers {
        if !keys.iter().any(|k| k.keyid() == signer.keyid()) {
            keys.push(signer);
        }
    }
    let jwks: Vec<String> = keys.iter().map(|k| k.jwk.to_json()).collect();
    let body = format!(r#"{{"keys":[{}]}}"#, jwks.join(","));
    let digest = ring::digest::digest(&ring::digest::SHA256, body.as_bytes());
    let content_digest = format!("sha-256=:{}:", STANDARD.encode(digest));
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(DIRECTORY_MEDIA_TYPE));
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static(DIRECTORY_CACHE_CONTROL),
    );
    let Ok(digest_field) = HeaderValue::from_str(&content_digest) else {
        return (headers, Bytes::from(body));
    };
    let authority = authority::normalize(authority, &["80", "443"]);
    let components = [
        Component {
            name: "@authority",
            key: None,
            req: true,
            value: &authority,
        },
        Component::plain("content-digest", &content_digest),
    ];
    let mut proofs = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let label = if i == 0 {
            DIRECTORY_LABEL.to_owned()
        } else {
            format!("{DIRECTORY_LABEL}-{}", i + 1)
        };
        let params = [
            Param::Created(created),
            Param::Expires(expires),
            Param::KeyId(key.keyid()),
            Param::Tag(DIRECTORY_TAG),
        ];
        let signed = base::prepare(&components, &params)
            .ok()
            .and_then(|prepared| {
                let signature = key.key.sign(prepared.base.as_bytes());
                let input =
                    HeaderValue::from_str(&format!("{label}={}", prepared.signature_params));
                let value =
                    HeaderValue::from_str(&format!("{label}=:{}:", STANDARD.encode(signature)));
                Some((input.ok()?, value.ok()?))
            });
        // Unsigned (an authority with a line break, which a parsed `Host`
        // cannot hold) the directory still serves: the proof is optional.
        let Some(proof) = signed else {
            return (headers, Bytes::from(body));
        };
        proofs.push(proof);
    }
    headers.insert(
        http::HeaderName::from_static("content-digest"),
        digest_field,
    );
    // One field line per key: the lines read as one Dictionary (RFC 9651 §4.2).
    for (input, value) in proofs {
        headers.append(SIGNATURE_INPUT, input);
        headers.append(SIGNATURE, value);
    }
    (headers, Bytes::from(body))
}

/// Seconds since the epoch (0 for a clock set before it).
fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
