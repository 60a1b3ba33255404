//! The admin listener: `/metrics` counts what went through the proxy,
//! `/healthz` answers, and the status page shows hosts and denials with
//! everything from the network escaped. A real proxy and admin listener on
//! loopback, a scripted origin, raw HTTP/1.1 clients.

mod support;

use std::time::Duration;

use robots_guard::config::{Config, TlsMode};
use tokio::net::TcpStream;

use support::origin::TestOrigin;
use support::proxy::{config_with, intercept, raw, raw_body, raw_header, raw_status, TestProxy};

const UA: &str = "TestBot/1.0 (+https://example.invalid/bot)";

/// robots.txt of the test site: `Disallow: /private` on line 2.
const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// A proxy (`configure`d after the test defaults) with its admin listener.
async fn start_proxy(configure: impl FnOnce(&mut Config)) -> TestProxy {
    TestProxy::start_with_admin(config_with(|c| {
        c.admin.listen = "127.0.0.1:0".parse().expect("addr");
        configure(c);
    }))
    .await
}

/// A GET of `url` through the proxy, raw, so targets the `http` crate would refuse to
/// build can be sent as a hostile client would; the raw answer.
async fn via_proxy(proxy: &TestProxy, url: &str) -> String {
    let request =
        format!("GET {url} HTTP/1.1\r\nHost: x\r\nUser-Agent: {UA}\r\nConnection: close\r\n\r\n");
    raw(proxy.addr(), request.as_bytes()).await
}

/// A request to the admin listener (`extra`: header lines, each ending in CRLF); the raw
/// answer.
async fn admin(proxy: &TestProxy, method: &str, path: &str, extra: &str) -> String {
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: admin\r\n{extra}Connection: close\r\n\r\n");
    raw(proxy.admin_addr(), request.as_bytes()).await
}

async fn scrape(proxy: &TestProxy) -> String {
    let answer = admin(proxy, "GET", "/metrics", "").await;
    assert_eq!(raw_status(&answer), 200);
    raw_body(&answer).to_owned()
}

/// The value of the sample `series` (name and labels exactly as exposed).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// Scrapes until `series` has `want` (connections close asynchronously).
async fn wait_for_sample(proxy: &TestProxy, series: &str, want: f64) {
    let mut last = None;
    for _ in 0..100 {
        last = sample(&scrape(proxy).await, series);
        if last == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{series} stayed {last:?}, wanted {want}");
}

#[tokio::test]
async fn metrics_count_requests_fetches_cache_latency_and_connections() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = start_proxy(|_| {}).await;

    assert_eq!(
        raw_status(&via_proxy(&proxy, &origin.url("/page")).await),
        200
    );
    assert_eq!(
        raw_status(&via_proxy(&proxy, &origin.url("/other")).await),
        200
    );
    assert_eq!(
        raw_status(&via_proxy(&proxy, &origin.url("/private/x")).await),
        403
    );
    assert_eq!(
        raw_status(&via_proxy(&proxy, &origin.url("/private/y")).await),
        403
    );

    let answer = admin(&proxy, "GET", "/metrics", "").await;
    assert_eq!(raw_status(&answer), 200);
    assert_eq!(
        raw_header(&answer, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let m = raw_body(&answer);
    let expect = |series: &str, want: f64| {
        assert_eq!(sample(m, series), Some(want), "{series} in\n{m}");
    };
    expect(
        r#"robots_guard_requests_total{outcome="allowed",status="200",profile="default"}"#,
        2.0,
    );
    expect(
        r#"robots_guard_requests_total{outcome="robots-disallow",status="403",profile="default"}"#,
        2.0,
    );
    expect(r#"robots_guard_robots_fetches_total{outcome="ok"}"#, 1.0);
    expect(
        r#"robots_guard_robots_fetches_total{outcome="unreachable"}"#,
        0.0,
    );
    expect("robots_guard_robots_cache_misses_total", 1.0);
    expect("robots_guard_robots_cache_hits_total", 3.0);
    expect("robots_guard_robots_cache_entries", 1.0);
    expect("robots_guard_robots_cache_evictions_total", 0.0);
    expect("robots_guard_upstream_latency_seconds_count", 2.0);
    expect(
        r#"robots_guard_upstream_latency_seconds_bucket{le="+Inf"}"#,
        2.0,
    );
    assert!(m.contains("# TYPE robots_guard_upstream_latency_seconds histogram"));
    expect("robots_guard_pacing_wait_seconds_count", 2.0);
    expect("robots_guard_pacing_rejected_total", 0.0);
    expect("robots_guard_paced_hosts", 1.0);
    expect(r#"robots_guard_connections_total{kind="client"}"#, 4.0);
    expect("robots_guard_tls_leaf_certificates_minted_total", 0.0);
    // The classic text format: counters typed by their `_total` name, no
    // OpenMetrics-only lines.
    assert!(
        m.contains("# TYPE robots_guard_requests_total counter\n"),
        "{m}"
    );
    assert!(!m.contains("# EOF") && !m.contains("# UNIT"), "{m}");

    // An idle keep-alive connection is open until the client leaves.
    let open = r#"robots_guard_open_connections{kind="client"}"#;
    let idle = TcpStream::connect(proxy.addr()).await.expect("connect");
    wait_for_sample(&proxy, open, 1.0).await;
    drop(idle);
    wait_for_sample(&proxy, open, 0.0).await;

    // Scrapers that ask for OpenMetrics are told that is what they get.
    let answer = admin(
        &proxy,
        "GET",
        "/metrics",
        "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n",
    )
    .await;
    assert_eq!(
        raw_header(&answer, "content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let body = support::proxy::raw_body(&answer);
    assert!(
        body.contains("# TYPE robots_guard_requests counter\n"),
        "{body}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
}

#[tokio::test]
async fn pacing_rejections_are_counted() {
    let origin = TestOrigin::site(ROBOTS).await;
    // Every start must be 60 s apart, and no one may wait: the second
    // start on the host (the robots.txt fetch was the first) is a 429.
    let proxy = start_proxy(|config| {
        config.rate_limit.default_delay = Duration::from_secs(60);
        config.rate_limit.max_wait = Duration::ZERO;
    })
    .await;
    let mut rejected = 0;
    for path in ["/a", "/b"] {
        if raw_status(&via_proxy(&proxy, &origin.url(path)).await) == 429 {
            rejected += 1;
        }
    }
    assert!(rejected >= 1, "expected a 429");
    let m = scrape(&proxy).await;
    assert_eq!(
        sample(&m, "robots_guard_pacing_rejected_total"),
        Some(f64::from(rejected))
    );
    assert_eq!(
        sample(
            &m,
            r#"robots_guard_requests_total{outcome="pacing",status="429",profile="default"}"#
        ),
        Some(f64::from(rejected))
    );
}

#[tokio::test]
async fn healthz_answers_ok_and_unknown_paths_are_404() {
    let proxy = start_proxy(|_| {}).await;
    let answer = admin(&proxy, "GET", "/healthz", "").await;
    assert_eq!((raw_status(&answer), raw_body(&answer)), (200, "ok\n"));
    assert_eq!(raw_status(&admin(&proxy, "GET", "/nope", "").await), 404);
    let answer = admin(&proxy, "POST", "/healthz", "Content-Length: 0\r\n").await;
    assert_eq!(raw_status(&answer), 405);
    assert_eq!(raw_header(&answer, "allow"), Some("GET, HEAD"));
}

#[tokio::test]
async fn status_page_shows_hosts_and_denials_escaped() {
    let origin = TestOrigin::site(ROBOTS).await;
    let proxy = start_proxy(|_| {}).await;

    let empty = admin(&proxy, "GET", "/", "").await;
    assert_eq!(raw_status(&empty), 200);
    assert!(raw_body(&empty).contains("No traffic yet."));

    assert_eq!(
        raw_status(&via_proxy(&proxy, &origin.url("/page")).await),
        200
    );
    assert_eq!(
        raw_status(&via_proxy(&proxy, &origin.url("/private/report")).await),
        403
    );
    // Quotes and ampersands reach the pipeline (and so the page) as sent.
    let hostile = origin.url(r#"/private/"onmouseover='alert(1)'&x={y}"#);
    assert_eq!(raw_status(&via_proxy(&proxy, &hostile).await), 403);
    // `<` and `>` never get that far: hyper refuses such a target with a
    // 400 of its own, so the page cannot show them at all.
    let script = format!("http://{}/<script>alert(1)</script>", origin.addr());
    assert_eq!(raw_status(&via_proxy(&proxy, &script).await), 400);

    let page = admin(&proxy, "GET", "/", "").await;
    assert_eq!(raw_status(&page), 200);
    assert_eq!(
        raw_header(&page, "content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = raw_header(&page, "content-security-policy").unwrap_or_default();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let html = raw_body(&page);
    assert!(html.contains("<meta http-equiv=\"refresh\""));

    // The host row: robots.txt parsed, one allowed, two denied.
    let hosts = section(html, "id=\"hosts\"");
    assert!(
        hosts.contains("<td class=\"mono\">127.0.0.1</td>"),
        "{hosts}"
    );
    assert!(hosts.contains("parsed"), "{hosts}");
    assert!(hosts.contains("<td class=\"num\">1</td><td class=\"num\">2</td>"));

    // The denials, newest first, with reason, rule and line.
    let denials = section(html, "id=\"denials\"");
    assert!(denials.contains("/private/report"), "{denials}");
    assert!(denials.contains("robots-disallow"), "{denials}");
    assert!(denials.contains("disallow: /private"), "{denials}");
    assert!(denials.contains("line 2"), "{denials}");
    assert!(denials.contains("TestBot"), "{denials}");
    assert!(
        denials.contains("/private/&quot;onmouseover=&#39;alert(1)&#39;&amp;x={y}"),
        "{denials}"
    );
    assert!(
        !html.contains("onmouseover='"),
        "unescaped quote in\n{html}"
    );
    assert!(!html.contains("<script"), "script tag in\n{html}");
}

/// The HTML from the element carrying `marker` to the end of its table.
fn section<'a>(html: &'a str, marker: &str) -> &'a str {
    let start = html.find(marker).expect("section present");
    let rest = &html[start..];
    &rest[..rest.find("</table>").unwrap_or(rest.len())]
}

/// The admin listener follows reloads: after switching from tunnel to
/// intercept mode, the page says so and the scrape counts the new minter's
/// certificates (it read the startup state before).
#[tokio::test]
async fn status_page_and_metrics_follow_a_reload() {
    let proxy = start_proxy(|c| c.tls.mode = TlsMode::Tunnel).await;
    let page = admin(&proxy, "GET", "/", "").await;
    assert!(
        raw_body(&page).contains("HTTPS tunnelled"),
        "{}",
        raw_body(&page)
    );

    let dir = support::temp_dir("admin-reload");
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             [rate_limit]\ndefault_delay = \"0s\"\n\
             [tls]\nmode = \"intercept\"\nca_cert = \"{}\"\nca_key = \"{}\"\n",
            dir.join("ca.pem").display(),
            dir.join("ca.key").display()
        ),
    )
    .expect("write config");
    proxy.live().reload_from(&path).expect("reload");
    let page = admin(&proxy, "GET", "/", "").await;
    assert!(
        raw_body(&page).contains("HTTPS intercepted"),
        "{}",
        raw_body(&page)
    );

    // One intercepted handshake mints one leaf certificate.
    let ca = dir.join("ca.pem");
    intercept(proxy.addr(), "127.0.0.1:443", "", &ca, &[b"http/1.1"]).await;
    let metrics = scrape(&proxy).await;
    assert_eq!(
        sample(&metrics, "robots_guard_tls_leaf_certificates_minted_total"),
        Some(1.0),
        "{metrics}"
    );
}
