//! The public key as a JSON Web Key (RFC 7517, with RFC 8037's `OKP` key
//! type for Ed25519) and its RFC 7638 thumbprint, which the Web Bot Auth
//! drafts make the signature's `keyid` and the directory entry's `kid`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// An Ed25519 public key as a JWK, with its thumbprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublicJwk {
    /// `x`: the public key, base64url without padding (RFC 8037 §2).
    x: String,
    /// The RFC 7638 thumbprint.
    thumbprint: String,
}

impl PublicJwk {
    /// The JWK of the Ed25519 public key `public`.
    pub(crate) fn new(public: &[u8; 32]) -> PublicJwk {
        let x = URL_SAFE_NO_PAD.encode(public);
        let thumbprint = thumbprint(&x);
        PublicJwk { x, thumbprint }
    }

    /// The RFC 7638 JWK SHA-256 thumbprint, base64url without padding: the
    /// `keyid` draft-ietf-webbotauth-httpsig-protocol-01 §5.2 requires ("as
    /// defined in Appendix A.3 of RFC 8037 for ed25519").
    pub(crate) fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The JWK as the directory lists it: `kty`, `crv`, `kid`, `x` and
    /// `use`, in the order of the draft's signed directory example (so that
    /// example's bytes can be reproduced). `kid` is the thumbprint, as the
    /// draft requires of a `kid` served at the well-known URI; `use` is
    /// `sig` (RFC 7517 §4.2). No `alg`: the draft restricts it to RFC 9421's
    /// algorithm names, which JOSE libraries would misread.
    pub(crate) fn to_json(&self) -> String {
        // Both values are base64url, which needs no JSON escaping.
        format!(
            r#"{{"kty":"OKP","crv":"Ed25519","kid":"{}","x":"{}","use":"sig"}}"#,
            self.thumbprint, self.x
        )
    }
}

/// RFC 7638 §3: SHA-256 over the required members of the key, in
/// lexicographic order, without whitespace; for an OKP key (RFC 8037 §2)
/// those are `crv`, `kty` and `x`.
fn thumbprint(x: &str) -> String {
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(x: &str) -> [u8; 32] {
        URL_SAFE_NO_PAD.decode(x).unwrap().try_into().unwrap()
    }

    #[test]
    fn rfc8037_appendix_a3_thumbprint() {
        // RFC 8037 A.2's public key and A.3's thumbprint of it.
        let jwk = PublicJwk::new(&decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"));
        assert_eq!(
            jwk.thumbprint(),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn rfc9421_test_key_thumbprint_as_the_draft_prints_it() {
        // RFC 9421 B.1.4's key; draft-ietf-webbotauth-httpsig-protocol-01
        // Appendix E.2 gives its keyid.
        let jwk = PublicJwk::new(&decode("JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"));
        assert_eq!(
            jwk.thumbprint(),
            "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
        );
        assert_eq!(
            jwk.to_json(),
            r#"{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&jwk.to_json()).unwrap();
        assert_eq!(parsed["x"], "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs");
    }
}
