//! Web Bot Auth: `keys init` through the real binary, the `[signing]` section,
//! and signatures checked by an independent RFC 9421 implementation, the
//! Python `http-message-signatures` package (3.x, `pip install
//! http-message-signatures`; `.ci/run` installs it), driven through
//! `tests/signing_verify.py`: a request the signer signed (alone and beside
//! a client's own signature) and the directory the admin listener serves.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue};
use robots_guard::config::{Config, SigningConfig, TlsMode};
use robots_guard::signing::{Signer, DIRECTORY_MEDIA_TYPE, DIRECTORY_PATH};
use serde_json::{json, Value};

use support::origin::{TestCa, TestOrigin};
use support::proxy::{
    config_with, get_as, get_request, h1_client, intercept, raw, raw_body, raw_header, raw_status,
    send, with_users_and_profiles, TestProxy,
};
use support::{run_cli, temp_dir, ROBOTS};

const AGENT: &str = "https://bot.example/.well-known/http-message-signatures-directory";

/// Runs `tests/signing_verify.py` on `job`: its answer, or why it refused.
fn python(job: &Value) -> Result<Value, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/signing_verify.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (the independent verifier is a Python package)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(job.to_string().as_bytes())
            .expect("write the job");
    }
    let out = child.wait_with_output().expect("python3 finishes");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "the verifier needs `pip install http-message-signatures` (3.x): {stderr}"
    );
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("the verifier answers JSON"))
    } else {
        Err(stderr)
    }
}

/// A new signing key made by the real binary in a directory of its own.
fn new_key(prefix: &str) -> PathBuf {
    let dir = temp_dir(prefix);
    let (code, _, stderr) = run_cli(
        ["keys", "init", "--dir"]
            .map(str::to_owned)
            .into_iter()
            .chain([dir.display().to_string()]),
    );
    assert_eq!(code, 0, "{stderr}");
    dir.join("signing.key")
}

fn field_lines(headers: &HeaderMap) -> Value {
    headers
        .iter()
        .map(|(name, value)| json!([name.as_str(), value.to_str().expect("ASCII")]))
        .collect()
}

fn jwks(signer: &Signer) -> Value {
    let (_, body) = signer.directory("bot.example", SystemTime::now());
    serde_json::from_slice(&body).expect("a JWK Set")
}

/// Verifies every `web-bot-auth` signature of a GET of `url` with `headers`
/// against the keys of `jwks`; each must cover `@authority` and (the script
/// checks) its own `Signature-Agent` member, and with `label`, that label's.
fn verify_request(
    url: &str,
    headers: &HeaderMap,
    jwks: &Value,
    label: Option<&str>,
) -> Result<Value, String> {
    verify_request_with_skew(url, headers, jwks, label, None)
}

/// [`verify_request`], forgiving `clock_skew` seconds (the verifier's
/// default, 5 s, when `None`).
fn verify_request_with_skew(
    url: &str,
    headers: &HeaderMap,
    jwks: &Value,
    label: Option<&str>,
    clock_skew: Option<u64>,
) -> Result<Value, String> {
    let mut require = vec!["@authority".to_owned()];
    require.extend(label.map(|label| format!("\"signature-agent\";key=\"{label}\"")));
    python(&json!({
        "mode": "verify-request",
        "method": "GET",
        "url": url,
        "headers": field_lines(headers),
        "jwks": jwks,
        "tag": "web-bot-auth",
        "require": require,
        "clock_skew": clock_skew,
    }))
}

#[test]
fn keys_init_makes_a_private_key_and_keeps_it_unless_forced() {
    let dir = temp_dir("keys-init");
    let args = |force: bool| {
        let mut args = vec!["keys".to_owned(), "init".to_owned(), "--dir".to_owned()];
        args.push(dir.join("certs").display().to_string());
        if force {
            args.push("--force".to_owned());
        }
        args
    };
    let (code, stdout, stderr) = run_cli(args(false));
    assert_eq!(code, 0, "{stderr}");
    let path = dir.join("certs/signing.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private from the start");
    }
    let keyid = stdout
        .lines()
        .find_map(|line| line.strip_prefix("keyid: "))
        .expect("the keyid is printed")
        .to_owned();
    let signer = Signer::load(&path, AGENT, Duration::from_secs(300)).unwrap();
    assert_eq!(signer.keyid(), keyid);
    assert!(stdout.contains(&signer.public_jwk()), "{stdout}");
    assert!(stdout.contains(DIRECTORY_PATH), "{stdout}");

    let before = std::fs::read(&path).unwrap();
    let (code, stdout, stderr) = run_cli(args(false));
    assert_eq!(code, 2, "refused: {stdout}");
    assert!(
        stderr.contains("already exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "the key is kept");

    let (code, stdout, stderr) = run_cli(args(true));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains(&keyid), "a new key: {stdout}");
    assert_ne!(std::fs::read(&path).unwrap(), before);
    assert_ne!(
        Signer::load(&path, AGENT, Duration::from_secs(300))
            .unwrap()
            .keyid(),
        keyid
    );
}

#[test]
fn a_signed_request_verifies_with_an_independent_implementation() {
    let signer = Signer::load(&new_key("sign"), AGENT, Duration::from_secs(300)).unwrap();
    for (authority, url) in [
        ("example.com", "https://example.com/some/path?q=1"),
        ("Example.com:8443", "https://example.com:8443/"),
        ("[::1]:8080", "http://[::1]:8080/x"),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert("user-agent", HeaderValue::from_static("examplebot/1.0"));
        signer.sign(&mut headers, authority, SystemTime::now());
        let answer = verify_request(url, &headers, &jwks(&signer), Some("robots-guard"))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let verified = &answer["verified"][0];
        assert_eq!(verified["label"], "robots-guard");
        assert_eq!(verified["keyid"], signer.keyid());
        let params = &verified["parameters"];
        assert_eq!(params["tag"], "web-bot-auth");
        assert_eq!(params["alg"], "ed25519");
        assert_eq!(
            params["expires"].as_i64().unwrap() - params["created"].as_i64().unwrap(),
            300
        );
        assert_eq!(answer["agents"]["robots-guard"], AGENT);

        // The same fields on a request to another authority do not verify.
        let err = verify_request(
            "https://other.example/",
            &headers,
            &jwks(&signer),
            Some("robots-guard"),
        )
        .expect_err("another authority");
        assert!(err.contains("invalid signature"), "{err}");
    }
}

#[test]
fn a_kept_client_signature_and_the_proxys_both_verify() {
    let client_key = std::fs::read_to_string(new_key("client")).unwrap();
    let client = python(&json!({
        "mode": "sign-request",
        "method": "GET",
        "url": "https://example.com/page",
        "headers": [["User-Agent", "examplebot/1.0"]],
        "private_key_pem": client_key,
        "label": "sig1",
        "signature_agent": "https://client.example/jwks.json",
    }))
    .expect("the client signs");
    let client_headers = || {
        let mut headers = HeaderMap::new();
        for line in client["headers"].as_array().unwrap() {
            headers.append(
                HeaderName::from_bytes(line[0].as_str().unwrap().as_bytes()).unwrap(),
                HeaderValue::from_str(line[1].as_str().unwrap()).unwrap(),
            );
        }
        headers
    };
    let key = new_key("proxy");
    let mut keys = jwks(&Signer::load(&key, AGENT, Duration::from_secs(60)).unwrap());
    keys["keys"]
        .as_array_mut()
        .unwrap()
        .extend(client["jwks"]["keys"].as_array().unwrap().iter().cloned());

    let keeping = Signer::load(&key, AGENT, Duration::from_secs(60))
        .unwrap()
        .keep_client_signatures(true);
    let mut headers = client_headers();
    keeping.sign(&mut headers, "example.com", SystemTime::now());
    let answer =
        verify_request("https://example.com/page", &headers, &keys, None).expect("both verify");
    let mut labels: Vec<&str> = answer["verified"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap())
        .collect();
    labels.sort_unstable();
    assert_eq!(labels, ["robots-guard", "sig1"]);
    assert_eq!(answer["agents"]["sig1"], "https://client.example/jwks.json");
    assert_eq!(answer["agents"]["robots-guard"], AGENT);

    // By default the client's signature is gone and the proxy's alone verifies.
    let stripping = Signer::load(&key, AGENT, Duration::from_secs(60)).unwrap();
    let mut headers = client_headers();
    stripping.sign(&mut headers, "example.com", SystemTime::now());
    let answer = verify_request("https://example.com/page", &headers, &keys, None)
        .expect("the proxy's verifies");
    assert_eq!(answer["verified"].as_array().unwrap().len(), 1);
    assert_eq!(answer["verified"][0]["label"], "robots-guard");
    assert!(answer["agents"].get("sig1").is_none());
}

/// A config whose `[signing]` uses `key`; tunnel mode, so no CA is made.
fn signing_config(key: &Path) -> Config {
    config_with(|c| {
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
        c.tls.mode = TlsMode::Tunnel;
        c.signing = Some(SigningConfig {
            key: key.to_path_buf(),
            signature_agent: AGENT.to_owned(),
            expires_in: Duration::from_secs(300),
            keep_client_signatures: false,
        });
    })
}

/// GET the directory from the admin listener: the raw answer and the `Host` sent.
async fn fetch_directory(proxy: &TestProxy) -> (String, String) {
    let host = proxy.admin_addr().to_string();
    let request = format!(
        "GET {DIRECTORY_PATH} HTTP/1.1\r\nHost: {host}\r\n\
         Accept: {DIRECTORY_MEDIA_TYPE}\r\nConnection: close\r\n\r\n"
    );
    (raw(proxy.admin_addr(), request.as_bytes()).await, host)
}

/// The directory answer checked by the independent verifier: the keyids it
/// verified.
fn verify_directory(answer: &str, host: &str) -> Result<Vec<String>, String> {
    let head = answer
        .split_once("\r\n\r\n")
        .map_or(answer, |(head, _)| head);
    let fields: Vec<Value> = head
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| json!([name.trim(), value.trim()]))
        .collect();
    let answer = python(&json!({
        "mode": "verify-response",
        "status": raw_status(answer),
        "headers": fields,
        "body": raw_body(answer),
        "request": {
            "method": "GET",
            "url": format!("http://{host}{DIRECTORY_PATH}"),
            "headers": [["Host", host]],
        },
        "tag": "http-message-signatures-directory",
        "require": ["\"@authority\";req", "content-digest"],
    }))?;
    Ok(answer["verified"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["keyid"].as_str().unwrap().to_owned())
        .collect())
}

#[tokio::test]
async fn the_admin_listener_serves_the_signed_directory() {
    let key = new_key("admin");
    let keyid = Signer::load(&key, AGENT, Duration::from_secs(60))
        .unwrap()
        .keyid()
        .to_owned();
    let proxy = TestProxy::start_with_admin(signing_config(&key)).await;
    let (answer, host) = fetch_directory(&proxy).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    assert_eq!(
        raw_header(&answer, "content-type"),
        Some(DIRECTORY_MEDIA_TYPE)
    );
    let body: Value = serde_json::from_str(raw_body(&answer)).expect("JSON");
    assert_eq!(body["keys"][0]["kid"], keyid.as_str());
    assert_eq!(body["keys"][0]["kty"], "OKP");
    assert!(body["keys"][0].get("d").is_none(), "never the private key");
    assert_eq!(verify_directory(&answer, &host).unwrap(), [keyid]);

    // The proof names the authority it was served for: the same answer
    // fetched as another host's does not verify.
    let err = verify_directory(&answer, "other.example").expect_err("another authority");
    assert!(err.contains("invalid signature"), "{err}");
}

#[tokio::test]
async fn no_directory_without_signing() {
    let proxy = TestProxy::start_with_admin(config_with(|c| {
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
        c.tls.mode = TlsMode::Tunnel;
    }))
    .await;
    let (answer, _) = fetch_directory(&proxy).await;
    assert_eq!(raw_status(&answer), 404, "{answer}");
    assert!(raw_body(&answer).contains("[signing]"), "{answer}");
}

#[tokio::test]
async fn a_reload_reads_the_key_again_and_refuses_a_missing_one() {
    let key = new_key("reload");
    let config = signing_config(&key);
    let proxy = TestProxy::start_with_admin(config.clone()).await;
    let keyid = |answer: &str| {
        let body: Value = serde_json::from_str(raw_body(answer)).expect("JSON");
        body["keys"][0]["kid"].as_str().unwrap().to_owned()
    };
    let first = keyid(&fetch_directory(&proxy).await.0);

    let mut missing = config.clone();
    if let Some(signing) = &mut missing.signing {
        signing.key = key.with_file_name("missing.key");
    }
    let err = proxy.live().apply(missing).expect_err("refused");
    assert!(err.to_string().contains("keys init"), "{err}");
    assert_eq!(keyid(&fetch_directory(&proxy).await.0), first, "unchanged");

    let dir = key.parent().unwrap().display().to_string();
    let (code, _, stderr) = run_cli(["keys", "init", "--force", "--dir", &dir]);
    assert_eq!(code, 0, "{stderr}");
    proxy.live().apply(config.clone()).expect("reloaded");
    let (answer, host) = fetch_directory(&proxy).await;
    let second = keyid(&answer);
    assert_ne!(second, first, "the new key is served");
    assert_eq!(verify_directory(&answer, &host).unwrap(), [second]);

    let mut off = config;
    off.signing = None;
    proxy.live().apply(off).expect("reloaded");
    assert_eq!(raw_status(&fetch_directory(&proxy).await.0), 404);
}

#[test]
fn the_signing_section_parses_with_defaults_and_refuses_mistakes() {
    let config =
        Config::from_toml(&format!("[signing]\nsignature_agent = \"{AGENT}\"\n"), "t").unwrap();
    assert_eq!(
        config.signing,
        Some(SigningConfig {
            key: PathBuf::from("certs/signing.key"),
            signature_agent: AGENT.to_owned(),
            expires_in: Duration::from_secs(300),
            keep_client_signatures: false,
        })
    );
    assert_eq!(Config::from_toml("", "t").unwrap().signing, None);
    let full = Config::from_toml(
        "[signing]\nkey = \"/etc/rg/sign.key\"\nsignature_agent = \"http://127.0.0.1:9180/k\"\n\
         expires_in = \"90s\"\nkeep_client_signatures = true\n",
        "t",
    )
    .unwrap()
    .signing
    .unwrap();
    assert_eq!(full.key, PathBuf::from("/etc/rg/sign.key"));
    assert_eq!(full.expires_in, Duration::from_secs(90));
    assert!(full.keep_client_signatures);

    let error = |text: &str| Config::from_toml(text, "t.toml").unwrap_err().to_string();
    let msg = error("[signing]\nkey = \"k\"\n");
    assert!(msg.contains("signature_agent"), "{msg}");
    let msg = error(&format!(
        "[signing]\nsignature_agent = \"{AGENT}\"\nexpire_in = \"5m\"\n"
    ));
    assert!(
        msg.contains("unknown field") && msg.contains("expire_in"),
        "{msg}"
    );
    let msg = error("[signing]\nsignature_agent = \"ftp://bot.example/keys\"\n");
    assert!(msg.contains("line 2") && msg.contains("https://"), "{msg}");
    let msg = error("[signing]\nsignature_agent = \"bot.example\"\n");
    assert!(msg.contains("https://"), "{msg}");
    for bad in ["0s", "25h"] {
        let msg = error(&format!(
            "[signing]\nsignature_agent = \"{AGENT}\"\nexpires_in = \"{bad}\"\n"
        ));
        assert!(msg.contains("expires_in"), "{bad}: {msg}");
    }
}

#[test]
fn check_config_loads_the_signing_key() {
    let dir = temp_dir("check-config");
    let path = dir.join("config.toml");
    let write = |key: &Path| {
        std::fs::write(
            &path,
            format!(
                "[tls]\nmode = \"tunnel\"\n[signing]\nkey = \"{}\"\nsignature_agent = \"{AGENT}\"\n",
                key.display()
            ),
        )
        .unwrap();
    };
    write(&dir.join("missing.key"));
    let (code, _, stderr) = run_cli(["check-config", "--config", &path.display().to_string()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("keys init"), "{stderr}");
    write(&new_key("check-config-key"));
    let (code, stdout, stderr) = run_cli(["check-config", "--config", &path.display().to_string()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

/// The fields the origin received, as the verifier reads them.
fn received(origin: &TestOrigin) -> HeaderMap {
    origin.last_request().expect("forwarded").headers
}

/// The JWK Set the admin listener serves (every key in force).
async fn served_jwks(proxy: &TestProxy) -> Value {
    let (answer, _) = fetch_directory(proxy).await;
    assert_eq!(raw_status(&answer), 200, "{answer}");
    serde_json::from_str(raw_body(&answer)).expect("a JWK Set")
}

#[tokio::test]
async fn forwarded_requests_are_signed_plain_and_intercepted() {
    let key = new_key("through");
    let keyid = Signer::load(&key, AGENT, Duration::from_secs(60))
        .unwrap()
        .keyid()
        .to_owned();
    let ca = TestCa::new();
    let tls = ca.server_config(&["127.0.0.1"]);
    let https = TestOrigin::start_tls(
        tls,
        |req: http::Request<hyper::body::Incoming>| async move {
            match req.uri().path() {
                "/robots.txt" => support::origin::Reply::text(200, ROBOTS),
                _ => support::origin::Reply::text(200, "secure"),
            }
        },
    )
    .await;
    let plain = TestOrigin::site(ROBOTS).await;
    let (roots, port) = (ca.pem_file(), https.port());
    let proxy = TestProxy::start_with_admin(config_with(|c| {
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
        c.tls.extra_roots = vec![roots];
        c.tls.connect_ports = vec![port];
        c.signing = signing_config(&key).signing;
    }))
    .await;
    let jwks = served_jwks(&proxy).await;

    // Plain HTTP, with a signature of the client's own, which goes.
    let mut request = get_request(&plain.url("/page"));
    request
        .headers_mut()
        .insert("signature", HeaderValue::from_static("sig1=:AAAA:"));
    assert_eq!(send(proxy.addr(), request).await.status, 200);
    let headers = received(&plain);
    let answer = verify_request(&plain.url("/page"), &headers, &jwks, Some("robots-guard"))
        .expect("the plain request verifies");
    assert_eq!(answer["verified"][0]["keyid"], keyid.as_str());
    assert_eq!(headers.get_all("signature").iter().count(), 1);

    // Intercepted HTTPS.
    let target = format!("127.0.0.1:{port}");
    let tls = intercept(proxy.addr(), &target, "", proxy.ca_cert(), &[b"http/1.1"]).await;
    let mut sender = h1_client(tls).await;
    let request = http::Request::builder()
        .uri("/secret")
        .header("host", &target)
        .header("user-agent", support::TEST_USER_AGENT)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("answer");
    assert_eq!(response.status(), 200);
    let url = format!("https://{target}/secret");
    let answer = verify_request(&url, &received(&https), &jwks, Some("robots-guard"))
        .expect("the intercepted request verifies");
    assert_eq!(answer["verified"][0]["keyid"], keyid.as_str());
}

#[tokio::test]
async fn each_profile_signs_with_its_own_key_and_the_directory_lists_both() {
    let (company, pricing) = (new_key("company"), new_key("pricing"));
    let id = |key: &Path| {
        Signer::load(key, AGENT, Duration::from_secs(60))
            .unwrap()
            .keyid()
            .to_owned()
    };
    let (company_id, pricing_id) = (id(&company), id(&pricing));
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start_with_admin(with_users_and_profiles(
        &["alice", "bob"],
        &format!(
            "[[profile]]\nname = \"pricing\"\nusers = [\"alice\"]\nsigning_key = {:?}\n",
            pricing.display().to_string()
        ),
        |c| {
            c.admin.listen = "127.0.0.1:0".parse().expect("addr");
            c.tls.mode = TlsMode::Tunnel;
            c.signing = signing_config(&company).signing;
        },
    ))
    .await;
    let jwks = served_jwks(&proxy).await;
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, [company_id.as_str(), pricing_id.as_str()]);
    let (answer, host) = fetch_directory(&proxy).await;
    let mut proved = verify_directory(&answer, &host).expect("one proof per key");
    proved.sort();
    let mut expected = vec![company_id.clone(), pricing_id.clone()];
    expected.sort();
    assert_eq!(proved, expected);

    for (user, keyid) in [("alice", &pricing_id), ("bob", &company_id)] {
        let request = get_as(user, &origin.url("/page"));
        assert_eq!(send(proxy.addr(), request).await.status, 200);
        let answer = verify_request(
            &origin.url("/page"),
            &received(&origin),
            &jwks,
            Some("robots-guard"),
        )
        .expect("verifies");
        assert_eq!(answer["verified"][0]["keyid"], keyid.as_str(), "{user}");
    }
}

#[tokio::test]
async fn a_signature_past_its_expires_is_refused_by_the_verifier() {
    let key = new_key("expiry");
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start_with_admin(config_with(|c| {
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
        c.tls.mode = TlsMode::Tunnel;
        let mut signing = signing_config(&key).signing.expect("signing");
        signing.expires_in = Duration::from_secs(1);
        c.signing = Some(signing);
    }))
    .await;
    let jwks = served_jwks(&proxy).await;
    assert_eq!(
        send(proxy.addr(), get_request(&origin.url("/page")))
            .await
            .status,
        200
    );
    let headers = received(&origin);
    // Valid at once (the verifier's default 5 s of skew covers the time
    // python takes to start on a loaded machine).
    verify_request(&origin.url("/page"), &headers, &jwks, None).expect("valid at once");
    // `expires` is created + 1 s, in whole seconds: two seconds later it
    // has passed.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let err = verify_request_with_skew(&origin.url("/page"), &headers, &jwks, None, Some(0))
        .expect_err("expired");
    assert!(err.contains("expires"), "{err}");
}
