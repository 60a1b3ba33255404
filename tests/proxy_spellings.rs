//! No way around a rule: the robots phase judges the URL the origin will
//! serve. Through the real proxy, over plain HTTP, intercepted HTTP/1.1 and
//! intercepted HTTP/2: every respelling of a disallowed URL is refused, the
//! refusal names the server reading that decided, and an allowed URL reaches
//! the origin in its RFC 3986 normal form, the form that was judged.

mod support;

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper::body::Incoming;
use robots_guard::robots::{Spelling, Spellings};

use support::origin::{Reply, TestCa, TestOrigin};
use support::proxy::{
    collect, config, config_with, h1_client, h2_client, intercept, raw, raw_body, raw_header,
    raw_status, TestProxy,
};

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\nDisallow: /*.secret$\n";

/// Sends `GET http://origin{target}` exactly as written and returns the raw answer.
async fn get_raw(proxy: &TestProxy, origin: &TestOrigin, target: &str) -> String {
    let request = format!(
        "GET http://127.0.0.1:{port}{target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         User-Agent: SpellBot/1.0\r\nConnection: close\r\n\r\n",
        port = origin.port()
    );
    raw(proxy.addr(), request.as_bytes()).await
}

/// Each respelling of a disallowed URL, and the server reading that decides
/// it (`None`: its normal form is disallowed as it is).
const REFUSED: &[(&str, Option<(&str, &str)>)] = &[
    ("/private/secret.html", None),
    ("/%70rivate/secret.html", None),
    ("/privat%65/secret.html", None),
    ("/priv%61te/secret.html", None),
    ("/./private/secret.html", None),
    ("/public/../private/secret.html", None),
    ("/public/%2e%2e/private/secret.html", None),
    ("/public/%2E%2E/private/secret.html", None),
    ("/docs/a.s%65cret", None),
    (
        "//private/secret.html",
        Some(("/private/secret.html", "merge-slashes")),
    ),
    (
        "/public/..//private/secret.html",
        Some(("/private/secret.html", "merge-slashes")),
    ),
    (
        "/private%2Fsecret.html",
        Some(("/private/secret.html", "decode-slash")),
    ),
    (
        "/public/..%2fprivate/secret.html",
        Some(("/private/secret.html", "decode-slash")),
    ),
    (
        "/private;jsessionid=1/secret.html",
        Some(("/private/secret.html", "strip-path-params")),
    ),
    (
        "/public/..;/private/secret.html",
        Some(("/private/secret.html", "strip-path-params")),
    ),
    (
        "/private\\secret.html",
        Some(("/private/secret.html", "backslash")),
    ),
    (
        "/private%5Csecret.html",
        Some(("/private/secret.html", "backslash")),
    ),
    (
        "/docs/a.secret;v=2",
        Some(("/docs/a.secret", "strip-path-params")),
    ),
];

#[tokio::test]
async fn every_respelling_of_a_disallowed_url_is_refused_naming_the_reading() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    for (target, served_as) in REFUSED {
        let answer = get_raw(&proxy, &origin, target).await;
        assert_eq!(raw_status(&answer), 403, "{target}: {answer}");
        assert_eq!(
            raw_header(&answer, "x-robots-guard-reason"),
            Some("robots-disallow")
        );
        assert_eq!(
            raw_header(&answer, "x-robots-guard-served-as"),
            served_as.map(|(form, _)| form),
            "{target}"
        );
        assert_eq!(
            raw_header(&answer, "x-robots-guard-spelling"),
            served_as.map(|(_, spelling)| spelling),
            "{target}"
        );
        if let Some((form, spelling)) = served_as {
            let named = format!("`{target}` is served as `{form}` ({spelling}): disallow:");
            assert!(raw_body(&answer).contains(&named), "{target}: {answer}");
        }
    }
    // Nothing refused reached the origin: it saw the robots.txt fetch only.
    assert_eq!(origin.requests().len(), 1, "{:?}", origin.requests());
}

#[tokio::test]
async fn allowed_urls_reach_the_origin_in_their_normal_form() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = TestProxy::start(config()).await;
    for (sent, received) in [
        ("/public/index.html?q=1", "/public/index.html?q=1"),
        ("/%70ublic/./a%2fb?q=%7e&r=%2f", "/public/a%2Fb?q=~&r=%2F"),
        // The RFC form removes the empty segment: a page that is not the
        // private one, whatever nginx would make of the spelling sent.
        (
            "/public//../private/secret.html",
            "/public/private/secret.html",
        ),
        ("/docs/a.secret?x=1", "/docs/a.secret?x=1"),
        ("/%72obots.txt", "/robots.txt"),
    ] {
        let answer = get_raw(&proxy, &origin, sent).await;
        assert_eq!(raw_status(&answer), 200, "{sent}: {answer}");
        if received != "/robots.txt" {
            assert_eq!(raw_body(&answer), format!("ok {received}"), "{sent}");
        }
        let last = origin.last_request().expect("forwarded");
        assert_eq!(last.path, received, "{sent}");
    }
}

#[tokio::test]
async fn spellings_are_configurable_and_case_is_opt_in() {
    let origin = TestOrigin::site(ROBOTS).await;
    let none = TestProxy::start(config_with(|c| {
        c.robots.equivalent_spellings = Spellings::NONE
    }))
    .await;
    // Without merge-slashes, `//private/...` is judged as written (and
    // forwarded so); the RFC normal form is always judged.
    assert_eq!(
        raw_status(&get_raw(&none, &origin, "//private/x").await),
        200
    );
    assert_eq!(
        raw_status(&get_raw(&none, &origin, "/%70rivate/x").await),
        403
    );
    // Case differences pass unless `case-insensitive` is on.
    assert_eq!(
        raw_status(&get_raw(&none, &origin, "/PRIVATE/x").await),
        200
    );
    let ci = TestProxy::start(config_with(|c| {
        c.robots.equivalent_spellings = Spellings::DEFAULT.with(Spelling::CaseInsensitive)
    }))
    .await;
    let answer = get_raw(&ci, &origin, "/Private/Secret.html").await;
    assert_eq!(raw_status(&answer), 403, "{answer}");
    assert_eq!(
        raw_header(&answer, "x-robots-guard-spelling"),
        Some("case-insensitive")
    );
    assert_eq!(raw_status(&get_raw(&ci, &origin, "/Public/x").await), 200);
}

/// An HTTPS origin with [`ROBOTS`], echoing what it received.
async fn tls_site(ca: &TestCa) -> TestOrigin {
    let tls = ca.server_config(&["127.0.0.1"]);
    TestOrigin::start_tls(tls, |req: Request<Incoming>| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, ROBOTS),
            _ => Reply::text(
                200,
                format!(
                    "ok {}",
                    req.uri().path_and_query().map_or("", |p| p.as_str())
                ),
            ),
        }
    })
    .await
}

fn https_get(port: u16, target: &str) -> Request<Empty<Bytes>> {
    Request::builder()
        .uri(format!("https://127.0.0.1:{port}{target}"))
        .header("user-agent", "SpellBot/1.0")
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::new())
        .expect("request")
}

async fn status_and_body(response: http::Response<Incoming>) -> (u16, String) {
    let answer = collect(response).await.expect("a complete body");
    (answer.status.as_u16(), answer.text())
}

#[tokio::test]
async fn intercepted_http1_and_http2_requests_are_judged_and_forwarded_alike() {
    let ca = TestCa::new();
    let origin = tls_site(&ca).await;
    let roots = ca.pem_file();
    let port = origin.port();
    let proxy = TestProxy::start(config_with(|c| {
        c.tls.extra_roots = vec![roots];
        c.tls.connect_ports = vec![port];
    }))
    .await;
    let target = format!("127.0.0.1:{port}");

    let ca_pem = proxy.ca_cert();
    let tls = intercept(proxy.addr(), &target, "", ca_pem, &[b"http/1.1"]).await;
    let mut h1 = h1_client(tls).await;
    let tls = intercept(proxy.addr(), &target, "", ca_pem, &[b"h2"]).await;
    let mut h2 = h2_client(tls).await;

    for (sent, want) in [
        ("/%70rivate/secret.html", (403, None)),
        ("//private/secret.html", (403, None)),
        ("/docs/a.s%65cret", (403, None)),
        ("/p%75blic/./x", (200, Some("ok /public/x"))),
    ] {
        let answer =
            status_and_body(h1.send_request(https_get(port, sent)).await.expect("h1")).await;
        assert_eq!(answer.0, want.0, "h1 {sent}: {}", answer.1);
        if let Some(body) = want.1 {
            assert_eq!(answer.1, body, "h1 {sent}");
        }
        let mut request = https_get(port, sent);
        request.headers_mut().remove("host");
        let answer = status_and_body(h2.send_request(request).await.expect("h2")).await;
        assert_eq!(answer.0, want.0, "h2 {sent}: {}", answer.1);
        if let Some(body) = want.1 {
            assert_eq!(answer.1, body, "h2 {sent}");
        }
    }
}
