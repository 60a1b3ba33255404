//! The signer against the published test vectors (RFC 9421 Appendix B, the
//! Web Bot Auth draft's Appendix E), and what it does to a request's fields.

use std::path::PathBuf;

use super::*;

/// RFC 9421 B.1.4, `test-key-ed25519`: a PKCS#8 v1 key, as openssl writes
/// them. A published key: tests only (the draft's §6.8 asks verifiers to
/// reject it).
const TEST_KEY_ED25519: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----
";

/// Its `keyid` (the draft's Appendix E.2).
const TEST_KEYID: &str = "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";

const AGENT: &str = "https://bot.example/.well-known/http-message-signatures-directory";

/// A file holding `pem`, unique to the calling test.
fn key_file(name: &str, pem: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("robots-guard-signer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.key"));
    std::fs::write(&path, pem).unwrap();
    path
}

fn test_signer(name: &str) -> Signer {
    Signer::load(
        &key_file(name, TEST_KEY_ED25519),
        AGENT,
        Duration::from_secs(300),
    )
    .unwrap()
}

fn header(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[test]
fn loads_the_rfc9421_test_key_with_its_thumbprint() {
    let signer = test_signer("thumbprint");
    assert_eq!(signer.keyid(), TEST_KEYID);
    assert!(signer
        .public_jwk()
        .contains(r#""x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs""#));
    assert_eq!(signer.signature_agent(), AGENT);
    let debug = format!("{signer:?}");
    assert!(
        debug.contains(TEST_KEYID) && !debug.contains("MC4CAQ"),
        "{debug}"
    );
}

/// RFC 9421 B.2.6: the test request signed with `test-key-ed25519`
/// reproduces the published signature (Ed25519 is deterministic).
#[test]
fn rfc9421_b26_signature() {
    let signer = test_signer("b26");
    let components = [
        Component::plain("date", "Tue, 20 Apr 2021 02:07:55 GMT"),
        Component::plain("@method", "POST"),
        Component::plain("@path", "/foo"),
        Component::plain("@authority", "example.com"),
        Component::plain("content-type", "application/json"),
        Component::plain("content-length", "18"),
    ];
    let params = [Param::Created(1618884473), Param::KeyId("test-key-ed25519")];
    let prepared = base::prepare(&components, &params).unwrap();
    assert_eq!(
        STANDARD.encode(signer.key.sign(prepared.base.as_bytes())),
        "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw=="
    );
}

/// draft-ietf-webbotauth-httpsig-protocol-01 E.2.1: a Web Bot Auth request
/// signature over the dictionary `Signature-Agent` member.
#[test]
fn webbotauth_e21_request_signature() {
    let signer = test_signer("e21");
    let components = [
        Component::plain("@authority", "example.com"),
        Component {
            name: "signature-agent",
            key: Some("agent2"),
            req: false,
            value: "\"https://signature-agent.test\"",
        },
    ];
    let params = [
        Param::Created(1735689600),
        Param::KeyId(TEST_KEYID),
        Param::Alg("ed25519"),
        Param::Expires(4889289600),
        Param::Nonce(
            "n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==",
        ),
        Param::Tag("web-bot-auth"),
    ];
    let prepared = base::prepare(&components, &params).unwrap();
    assert_eq!(
        STANDARD.encode(signer.key.sign(prepared.base.as_bytes())),
        "RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg=="
    );
}

/// draft-ietf-webbotauth-httpsig-protocol-01 E.2.3: the signed directory
/// response, byte for byte: body, digest, input and signature.
#[test]
fn webbotauth_e23_signed_directory() {
    let signer = test_signer("e23");
    let (headers, body) = signer.directory_at("signature-agent.test", 1735689600, 4889289600);
    assert_eq!(
        body,
        r#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}"#
    );
    assert_eq!(
        header(&headers, "content-digest"),
        ["sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:"]
    );
    assert_eq!(
        header(&headers, "signature-input"),
        [concat!(
            r#"binding=("@authority";req "content-digest");created=1735689600"#,
            r#";expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U""#,
            r#";tag="http-message-signatures-directory""#
        )]
    );
    assert_eq!(
        header(&headers, "signature"),
        ["binding=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gpz7gOVBg==:"]
    );
    assert_eq!(header(&headers, "content-type"), [DIRECTORY_MEDIA_TYPE]);
    assert_eq!(header(&headers, "cache-control"), ["max-age=3600"]);
}

#[test]
fn directory_authority_is_normalised_and_expires_a_day_later() {
    let signer = test_signer("directory");
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let (headers, _) = signer.directory("Bot.Example:443", now);
    let (want, _) = signer.directory_at("bot.example", 1_700_000_000, 1_700_086_400);
    assert_eq!(headers, want);
}

/// The fields a request gets, and the signature's base as a verifier
/// rebuilds it from them.
#[test]
fn sign_adds_the_three_fields_for_the_authority() {
    let signer = test_signer("sign");
    let mut headers = HeaderMap::new();
    headers.insert("user-agent", HeaderValue::from_static("bot/1"));
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    signer.sign(&mut headers, "Example.COM:8443", now);

    assert_eq!(
        header(&headers, "signature-agent"),
        [format!(r#"robots-guard="{AGENT}""#)]
    );
    let input = format!(
        r#"("@authority" "signature-agent";key="robots-guard");created=1700000000;expires=1700000300;keyid="{TEST_KEYID}";alg="ed25519";tag="web-bot-auth""#
    );
    assert_eq!(
        header(&headers, "signature-input"),
        [format!("robots-guard={input}")]
    );
    let base = format!(
        "\"@authority\": example.com:8443\n\
         \"signature-agent\";key=\"robots-guard\": \"{AGENT}\"\n\
         \"@signature-params\": {input}"
    );
    let signature = header(&headers, "signature").remove(0);
    let signature = signature
        .strip_prefix("robots-guard=:")
        .and_then(|s| s.strip_suffix(':'))
        .unwrap();
    let public =
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, signer.key.public_key());
    public
        .verify(base.as_bytes(), &STANDARD.decode(signature).unwrap())
        .expect("the signature verifies over the base");
    assert_eq!(header(&headers, "user-agent"), ["bot/1"]);
}

#[test]
fn expires_is_created_plus_expires_in_rounded_up() {
    let path = key_file("expiry", TEST_KEY_ED25519);
    let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_900);
    for (expires_in, want) in [
        (
            Duration::from_secs(300),
            ";created=1700000000;expires=1700000300;",
        ),
        (
            Duration::from_millis(1500),
            ";created=1700000000;expires=1700000002;",
        ),
        (
            Duration::from_millis(1),
            ";created=1700000000;expires=1700000001;",
        ),
        (
            Duration::from_secs(86_400),
            ";created=1700000000;expires=1700086400;",
        ),
    ] {
        let signer = Signer::load(&path, AGENT, expires_in).unwrap();
        let mut headers = HeaderMap::new();
        signer.sign(&mut headers, "example.com", now);
        let input = header(&headers, "signature-input").remove(0);
        assert!(input.contains(want), "{expires_in:?}: {input}");
    }
    for bad in [Duration::ZERO, Duration::from_secs(86_401)] {
        assert!(matches!(
            Signer::load(&path, AGENT, bad),
            Err(SigningError::ExpiresIn)
        ));
    }
}

/// A client's own signature fields, under the label `sig1`.
fn client_signed() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "signature-agent",
        HeaderValue::from_static(r#"sig1="https://client.example/jwks.json""#),
    );
    headers.insert(
        "signature-input",
        HeaderValue::from_static(
            r#"sig1=("@authority" "signature-agent";key="sig1");created=1;keyid="k";tag="web-bot-auth""#,
        ),
    );
    headers.insert("signature", HeaderValue::from_static("sig1=:AAAA:"));
    headers
}

#[test]
fn client_signatures_are_removed_by_default() {
    let signer = test_signer("strip");
    let mut headers = client_signed();
    signer.sign(&mut headers, "example.com", SystemTime::now());
    for name in ["signature-agent", "signature-input", "signature"] {
        let values = header(&headers, name);
        assert_eq!(values.len(), 1, "{name}: {values:?}");
        assert!(values[0].starts_with("robots-guard="), "{name}: {values:?}");
        assert!(!values[0].contains("sig1"), "{name}: {values:?}");
    }
}

#[test]
fn client_signatures_can_be_kept_beside_the_proxys() {
    let signer = test_signer("keep").keep_client_signatures(true);
    let mut headers = client_signed();
    signer.sign(&mut headers, "example.com", SystemTime::now());
    for name in ["signature-agent", "signature-input", "signature"] {
        let values = header(&headers, name);
        assert_eq!(values.len(), 2, "{name}: {values:?}");
        assert!(values[0].starts_with("sig1="), "{name}: {values:?}");
        assert!(values[1].starts_with("robots-guard="), "{name}: {values:?}");
    }

    // A client already using the proxy's label: the proxy takes another.
    let mut headers = HeaderMap::new();
    headers.insert(
        "signature-agent",
        HeaderValue::from_static(r#"robots-guard="https://client.example/jwks.json""#),
    );
    signer.sign(&mut headers, "example.com", SystemTime::now());
    let agents = header(&headers, "signature-agent");
    assert_eq!(agents[1], format!(r#"robots-guard-2="{AGENT}""#));
    let input = header(&headers, "signature-input").remove(0);
    assert!(
        input
            .starts_with(r#"robots-guard-2=("@authority" "signature-agent";key="robots-guard-2")"#),
        "{input}"
    );
    assert!(header(&headers, "signature")[0].starts_with("robots-guard-2=:"));
}

#[test]
fn kept_fields_that_cannot_take_a_member_are_removed() {
    let signer = test_signer("legacy").keep_client_signatures(true);
    let mut headers = client_signed();
    // The draft's older bare-String form.
    headers.insert(
        "signature-agent",
        HeaderValue::from_static(r#""https://client.example""#),
    );
    signer.sign(&mut headers, "example.com", SystemTime::now());
    for name in ["signature-agent", "signature-input", "signature"] {
        let values = header(&headers, name);
        assert_eq!(values.len(), 1, "{name}: {values:?}");
        assert!(values[0].starts_with("robots-guard="), "{name}: {values:?}");
    }
}

#[test]
fn load_refuses_what_it_cannot_use() {
    let good = key_file("good", TEST_KEY_ED25519);
    let five = Duration::from_secs(300);
    for bad in [
        "ftp://bot.example/keys",
        "bot.example/keys",
        "https://",
        "https://bot.example/a b",
        "https://bot.example/\"",
    ] {
        let err = Signer::load(&good, bad, five).unwrap_err();
        assert!(
            matches!(err, SigningError::SignatureAgent { .. }),
            "{bad}: {err}"
        );
    }
    let missing = good.with_file_name("missing.key");
    let err = Signer::load(&missing, AGENT, five).unwrap_err();
    assert!(matches!(err, SigningError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("keys init"), "{err}");
    let not_a_key = key_file("garbage", "hello\n");
    let err = Signer::load(&not_a_key, AGENT, five).unwrap_err();
    assert!(matches!(err, SigningError::InvalidKey { .. }), "{err}");
    // Plain http is allowed, for tests.
    Signer::load(
        &good,
        "http://127.0.0.1:9180/.well-known/http-message-signatures-directory",
        five,
    )
    .unwrap();
}
