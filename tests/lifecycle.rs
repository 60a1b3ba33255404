//! Lifecycle of a running proxy: graceful drain on shutdown (bounded by
//! `proxy.drain_timeout`) and configuration reload without dropping
//! connections. A real in-process proxy, a loopback origin, real clients.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use robots_guard::config::Config;
use robots_guard::proxy::{Live, ReloadError, Server};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use support::origin::{Reply, TestOrigin};

/// A proxy started from a config file, with a shutdown trigger.
struct Proxy {
    addr: std::net::SocketAddr,
    reload: Live,
    stop: Option<oneshot::Sender<()>>,
    run: JoinHandle<()>,
    dir: PathBuf,
}

impl Proxy {
    fn config_path(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    /// Writes `extra` (TOML) after the common settings into the config file.
    fn write_config(&self, extra: &str) -> PathBuf {
        write_config(&self.dir, extra)
    }

    /// Replaces `from` with `to` in the config file and reloads it.
    fn edit_and_reload(&self, from: &str, to: &str) -> robots_guard::proxy::Reloaded {
        let text = std::fs::read_to_string(self.config_path()).expect("config");
        assert!(text.contains(from), "{from:?} not in {text}");
        std::fs::write(self.config_path(), text.replace(from, to)).expect("write config");
        self.reload
            .reload_from(&self.config_path())
            .expect("valid config reloads")
    }

    /// Writes `text` as the whole config file (for keys under `[proxy]`,
    /// which `write_config` cannot add) and reloads it, which must fail
    /// (`why`).
    fn refused_reload(&self, text: &str, why: &str) -> ReloadError {
        std::fs::write(self.config_path(), text).expect("write config");
        self.reload.reload_from(&self.config_path()).expect_err(why)
    }

    /// Fires the shutdown future given to `run`.
    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A config file for tests: loopback port 0, no pacing delay, tunnel mode
/// (no CA needed), and `extra` sections. `[identity]` is left to `extra`.
fn write_config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"5s\"\n\
         [rate_limit]\ndefault_delay = \"0s\"\n\
         [tls]\nmode = \"tunnel\"\n\
         {extra}"
    );
    std::fs::write(&path, text).expect("write config");
    path
}

async fn start_proxy(extra: &str) -> Proxy {
    let dir = support::temp_dir("lifecycle");
    let path = write_config(&dir, extra);
    let config = Config::load(&path).expect("test config is valid");
    start_with(config, dir).await
}

async fn start_with(config: Config, dir: PathBuf) -> Proxy {
    let server = Server::bind(&config).await.expect("proxy binds");
    let addr = server.local_addr();
    let reload = server.live();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        let stop = async move {
            let _ = stopped.await;
        };
        server.run(stop).await.expect("the proxy runs and drains");
    });
    Proxy {
        addr,
        reload,
        stop: Some(stop),
        run,
        dir,
    }
}

/// An origin allowing everything; `/slow` answers after `slow`.
async fn origin(slow: Duration) -> TestOrigin {
    TestOrigin::start(move |req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nDisallow: /private\n"),
            "/slow" => {
                tokio::time::sleep(slow).await;
                Reply::text(200, "slow done")
            }
            path => Reply::text(200, format!("page {path}")),
        }
    })
    .await
}

/// One keep-alive HTTP/1.1 client connection to the proxy.
async fn client(proxy: std::net::SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(proxy).await.expect("connect to proxy");
    support::proxy::h1_client(stream).await
}

fn get(url: &str, user_agent: Option<&str>) -> Request<Empty<Bytes>> {
    let mut builder = Request::builder().uri(url);
    if let Some(ua) = user_agent {
        builder = builder.header("user-agent", ua);
    }
    builder.body(Empty::new()).expect("request")
}

/// Sends `request` and returns status, `X-Robots-Guard-Reason` and body.
async fn send(
    sender: &mut SendRequest<Empty<Bytes>>,
    request: Request<Empty<Bytes>>,
) -> hyper::Result<(StatusCode, Option<String>, String)> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let reason = response
        .headers()
        .get("x-robots-guard-reason")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, reason, String::from_utf8_lossy(&body).into_owned()))
}

/// Waits until the origin has seen `n` requests for `path`.
async fn wait_for_hits(origin: &TestOrigin, path: &str, n: usize) {
    for _ in 0..500 {
        if origin.hits(path) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the origin never saw {path}");
}

#[tokio::test]
async fn drain_lets_an_in_flight_request_finish_before_run_returns() {
    let origin = origin(Duration::from_millis(600)).await;
    let mut proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let mut sender = client(proxy.addr).await;
    let slow = origin.url("/slow");
    let request = tokio::spawn(async move {
        let answer = send(&mut sender, get(&slow, Some("DrainBot/1.0"))).await;
        (answer, std::time::Instant::now())
    });
    wait_for_hits(&origin, "/slow", 1).await;
    proxy.shut_down();
    // Still draining: the request is in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!proxy.run.is_finished(), "run returned before the drain");
    assert!(
        TcpStream::connect(proxy.addr).await.is_err(),
        "new connections are refused while draining"
    );
    let (answer, answered_at) = request.await.expect("client task");
    let (status, _, body) = answer.expect("the in-flight request completes");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "slow done");
    tokio::time::timeout(Duration::from_secs(3), &mut proxy.run)
        .await
        .expect("run returns once the request is done")
        .expect("run does not panic");
    let returned_at = std::time::Instant::now();
    assert!(returned_at >= answered_at);
}

#[tokio::test]
async fn drain_closes_idle_keep_alive_connections_at_once() {
    let origin = origin(Duration::ZERO).await;
    let mut proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let mut sender = client(proxy.addr).await;
    let (status, _, _) = send(&mut sender, get(&origin.url("/a"), Some("IdleBot")))
        .await
        .expect("first request");
    assert_eq!(status, StatusCode::OK);
    // The connection is idle now; shutdown must not wait for its timeout.
    proxy.shut_down();
    tokio::time::timeout(Duration::from_secs(2), &mut proxy.run)
        .await
        .expect("run returns without waiting for idle connections")
        .expect("run does not panic");
}

#[tokio::test]
async fn drain_timeout_cuts_a_request_still_running() {
    let origin = origin(Duration::from_secs(30)).await;
    let dir = support::temp_dir("lifecycle");
    let mut config =
        Config::load(&write_config(&dir, "[identity]\nuser_agent = \"pass\"\n")).expect("config");
    config.proxy.drain_timeout = Duration::from_millis(300);
    let mut proxy = start_with(config, dir).await;
    shutdown_cuts_a_slow_request_after(&mut proxy, &origin, Duration::from_millis(300)).await;
}

/// `drain_timeout` is read when the drain starts: a reload that shortened
/// it (from the 5 s of the file the proxy started with) is obeyed.
#[tokio::test]
async fn drain_timeout_changed_by_a_reload_is_obeyed() {
    let origin = origin(Duration::from_secs(30)).await;
    let mut proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    // A first answer shows `run` has started (and read what it reads at
    // start) before the reload.
    let (status, _, _) = send(&mut client(proxy.addr).await, get(&origin.url("/a"), None))
        .await
        .expect("request");
    assert_eq!(status, StatusCode::OK);
    proxy.edit_and_reload("drain_timeout = \"5s\"", "drain_timeout = \"300ms\"");
    shutdown_cuts_a_slow_request_after(&mut proxy, &origin, Duration::from_millis(300)).await;
}

/// Starts a request that `origin` answers only after 30 s, shuts `proxy`
/// down, and checks that the drain gives up after `drain` (not before, and
/// well before the 5 s the test files start with) and cuts the request.
async fn shutdown_cuts_a_slow_request_after(
    proxy: &mut Proxy,
    origin: &TestOrigin,
    drain: Duration,
) {
    let mut sender = client(proxy.addr).await;
    let slow = origin.url("/slow");
    let request =
        tokio::spawn(async move { send(&mut sender, get(&slow, Some("SlowBot/1.0"))).await });
    wait_for_hits(origin, "/slow", 1).await;
    let shutdown_at = std::time::Instant::now();
    proxy.shut_down();
    tokio::time::timeout(Duration::from_secs(3), &mut proxy.run)
        .await
        .expect("run returns after the drain timeout")
        .expect("run does not panic");
    let waited = shutdown_at.elapsed();
    assert!(waited >= drain, "returned after {waited:?}");
    let answer = tokio::time::timeout(Duration::from_secs(2), request)
        .await
        .expect("the client sees the connection close")
        .expect("client task");
    assert!(answer.is_err(), "the cut request got an answer: {answer:?}");
}

#[tokio::test]
async fn reload_applies_to_the_next_request_on_a_keep_alive_connection() {
    let origin = origin(Duration::ZERO).await;
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let mut sender = client(proxy.addr).await;
    // `pass`: a request without User-Agent is forwarded.
    let (status, _, body) = send(&mut sender, get(&origin.url("/page"), None))
        .await
        .expect("before reload");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "page /page");

    let path = proxy.write_config("[identity]\nuser_agent = \"require\"\n");
    let reloaded = proxy
        .reload
        .reload_from(&path)
        .expect("valid config reloads");
    assert!(reloaded.restart_needed.is_empty(), "{reloaded:?}");

    // Same connection (the sender would fail if it had been closed), new rule.
    let (status, reason, body) = send(&mut sender, get(&origin.url("/page"), None))
        .await
        .expect("the keep-alive connection survives the reload");
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(reason.as_deref(), Some("identity"));
    assert_eq!(origin.hits("/page"), 1);
    // With a User-Agent the same connection still gets through.
    let (status, _, _) = send(&mut sender, get(&origin.url("/page"), Some("ReloadBot/2")))
        .await
        .expect("after reload");
    assert_eq!(status, StatusCode::OK);
    // The robots.txt cache was kept: fetched once in all.
    assert_eq!(origin.hits("/robots.txt"), 1);
}

#[tokio::test]
async fn bad_config_is_refused_and_the_old_one_kept() {
    let origin = origin(Duration::ZERO).await;
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let path = proxy.write_config("[identity]\nuser_agent = \"require\"\nuser_agnet = \"fill\"\n");
    let error = proxy
        .reload
        .reload_from(&path)
        .expect_err("an unknown key is refused");
    assert!(matches!(error, ReloadError::Config(_)), "{error:?}");
    let message = error.to_string();
    for part in [
        "config.toml",
        "line 10",
        "user_agnet",
        "unknown field",
        "`user_agent`",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    // The old configuration (`pass`) still holds, on a new connection too.
    let mut sender = client(proxy.addr).await;
    let (status, _, _) = send(&mut sender, get(&origin.url("/page"), None))
        .await
        .expect("request");
    assert_eq!(status, StatusCode::OK);

    // A file that parses but cannot be used (missing extra root) is refused too.
    let error = proxy.refused_reload(
        &format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n[identity]\nuser_agent = \"require\"\n\
             [tls]\nmode = \"tunnel\"\nextra_roots = [\"{}\"]\n",
            proxy.dir.join("missing.pem").display()
        ),
        "an unusable config is refused",
    );
    assert!(matches!(error, ReloadError::Unusable { .. }), "{error:?}");
    assert!(error.to_string().contains("missing.pem"), "{error}");
    let (status, _, _) = send(&mut sender, get(&origin.url("/page"), None))
        .await
        .expect("request");
    assert_eq!(status, StatusCode::OK, "still the old configuration");
}

/// A reload refused by a late check (an htpasswd file that cannot be read,
/// checked after the deny list is read) must not have applied part of
/// itself: the deny list of the refused file, which denies the origin,
/// must not be in force.
#[tokio::test]
async fn a_refused_reload_applies_none_of_its_deny_list() {
    let origin = origin(Duration::ZERO).await;
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let error = proxy.refused_reload(
        &format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\ndeny_destinations = [\"127.0.0.0/8\"]\n\
             [identity]\nuser_agent = \"pass\"\n\
             [rate_limit]\ndefault_delay = \"0s\"\n\
             [tls]\nmode = \"tunnel\"\n\
             [auth]\nhtpasswd = \"{}\"\n",
            proxy.dir.join("missing.htpasswd").display()
        ),
        "an unreadable htpasswd file is refused",
    );
    assert!(error.to_string().contains("missing.htpasswd"), "{error}");
    let mut sender = client(proxy.addr).await;
    let (status, reason, body) = send(&mut sender, get(&origin.url("/page"), None))
        .await
        .expect("request");
    assert_eq!(status, StatusCode::OK, "{reason:?}: {body}");
    assert_eq!(origin.hits("/page"), 1);
}

#[tokio::test]
async fn reload_names_keys_that_need_a_restart() {
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let path = proxy.write_config(
        "[identity]\nuser_agent = \"fill\"\n[robots]\ndefault_ttl = \"1h\"\n[log]\nlevel = \"debug\"\n",
    );
    let reloaded = proxy
        .reload
        .reload_from(&path)
        .expect("valid config reloads");
    // The robots.txt cache takes its new settings; only what the process
    // reads once (its sockets, threads, admin listener and logging) waits.
    assert_eq!(reloaded.restart_needed, ["log.level"]);
    assert_eq!(
        proxy.reload.services().robots.settings().default_ttl,
        Duration::from_secs(3600)
    );
}

/// `proxy.upstream_connect_timeout` applies on reload: the pools (and the
/// tunnels, which use the same value) open new connections with it.
#[tokio::test]
async fn upstream_connect_timeout_applies_on_reload() {
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let before = proxy.reload.services().upstream.connect_timeout();
    let reloaded =
        proxy.edit_and_reload("[proxy]\n", "[proxy]\nupstream_connect_timeout = \"1s\"\n");
    assert!(reloaded.restart_needed.is_empty(), "{reloaded:?}");
    assert_ne!(before, Duration::from_secs(1));
    assert_eq!(
        proxy.reload.services().upstream.connect_timeout(),
        Duration::from_secs(1)
    );
}

/// An intercepted (CONNECT + TLS with the proxy's CA) HTTP/1.1 connection
/// to a TLS origin on 127.0.0.1.
async fn intercepted(proxy: &Proxy, port: u16) -> SendRequest<Empty<Bytes>> {
    let target = format!("127.0.0.1:{port}");
    let ca = proxy.dir.join("ca.pem");
    let stream = support::proxy::intercept(proxy.addr, &target, "", &ca, &[b"http/1.1"]).await;
    support::proxy::h1_client(stream).await
}

/// A proxy in intercept mode trusting `ca` upstream, for an origin on `port`.
async fn intercepting_proxy(ca: &support::origin::TestCa, port: u16, user_agent: &str) -> Proxy {
    let dir = support::temp_dir("lifecycle");
    let roots = ca.pem_file();
    let settings = format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\n[identity]\nuser_agent = \"{user_agent}\"\n\
         [rate_limit]\ndefault_delay = \"0s\"\n\
         [tls]\nca_cert = \"{}\"\nca_key = \"{}\"\nextra_roots = [\"{}\"]\nconnect_ports = [{port}]\n",
        dir.join("ca.pem").display(),
        dir.join("ca.key").display(),
        roots.display()
    );
    std::fs::write(dir.join("config.toml"), settings).expect("write config");
    let config = Config::load(&dir.join("config.toml")).expect("config");
    start_with(config, dir).await
}

#[tokio::test]
async fn intercepted_connections_see_reloads_and_are_drained() {
    let ca = support::origin::TestCa::new();
    let tls = ca.server_config(&["127.0.0.1"]);
    let origin = TestOrigin::start_tls(tls, |req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            "/slow" => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Reply::text(200, "slow done")
            }
            path => Reply::text(200, format!("secure {path}")),
        }
    })
    .await;
    let mut proxy = intercepting_proxy(&ca, origin.port(), "pass").await;
    let mut sender = intercepted(&proxy, origin.port()).await;
    let page = |path: &str| {
        Request::builder()
            .uri(path)
            .header("host", "127.0.0.1")
            .body(Empty::<Bytes>::new())
            .expect("request")
    };
    let (status, _, body) = send(&mut sender, page("/a")).await.expect("before");
    assert_eq!((status, body.as_str()), (StatusCode::OK, "secure /a"));

    // Reload: the next decrypted request on the same TLS connection sees it.
    let reloaded = proxy.edit_and_reload("user_agent = \"pass\"", "user_agent = \"require\"");
    assert!(reloaded.restart_needed.is_empty(), "{reloaded:?}");
    let (status, reason, _) = send(&mut sender, page("/a")).await.expect("after");
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(reason.as_deref(), Some("identity"));

    // Shutdown waits for a slow intercepted request.
    let slow = tokio::spawn(async move {
        let mut request = page("/slow");
        request
            .headers_mut()
            .insert("user-agent", http::HeaderValue::from_static("SlowBot/1"));
        send(&mut sender, request).await
    });
    wait_for_hits(&origin, "/slow", 1).await;
    proxy.shut_down();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!proxy.run.is_finished(), "run returned before the drain");
    let (status, _, body) = slow.await.expect("task").expect("slow request completes");
    assert_eq!((status, body.as_str()), (StatusCode::OK, "slow done"));
    tokio::time::timeout(Duration::from_secs(3), &mut proxy.run)
        .await
        .expect("run returns once the intercepted connection closed")
        .expect("run does not panic");
}
