//! Lifecycle of a running proxy: graceful shutdown (the listener closes, in-flight
//! requests finish, idle connections close at once, all bounded by
//! `proxy.drain_timeout`) and configuration reload without dropping connections: a
//! reload applies to the next request on a connection already open, plain or
//! intercepted, a refused reload applies none of itself, and keys that need a restart
//! are named.
//!
//! How: the real proxy (`Server::bind` + `run`) on `127.0.0.1:0`, started from a config
//! file that the tests rewrite and reload through the proxy's reload handle (what SIGHUP
//! does; the signals themselves are tested through the binary in `cli_lifecycle.rs`),
//! scripted hyper origins on loopback (one over TLS), and hyper's HTTP/1.1 client,
//! directly or inside an intercepted tunnel.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Request;
use robots_guard::config::{Config, IdentityMode};
use robots_guard::proxy::{ReloadError, Reloaded};
use tokio::net::TcpStream;
use tokio::time::Instant;

use support::origin::{Reply, ReplyBody, TestCa, TestOrigin};
use support::proxy::{
    anonymous_get_request, assert_status, config, config_with, empty, get_request, intercept, send,
    ProxyConn, TestProxy,
};
use support::{ROBOTS, TEST_USER_AGENT};

/// A proxy started from a config file in a directory of its own, which a test rewrites
/// and reloads as an operator would before a SIGHUP.
struct FileProxy {
    proxy: TestProxy,
    dir: PathBuf,
}

impl FileProxy {
    fn config_path(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    /// Writes `extra` (TOML) after the common settings into the config file.
    fn write_config(&self, extra: &str) -> PathBuf {
        write_config(&self.dir, extra)
    }

    /// Reloads the config file.
    fn reload(&self) -> Result<Reloaded, ReloadError> {
        self.proxy.live().reload_from(&self.config_path())
    }

    /// Replaces `from` with `to` in the config file and reloads it.
    fn edit_and_reload(&self, from: &str, to: &str) -> Reloaded {
        let text = std::fs::read_to_string(self.config_path()).expect("config");
        assert!(text.contains(from), "{from:?} not in {text}");
        std::fs::write(self.config_path(), text.replace(from, to)).expect("write config");
        self.reload().expect("valid config reloads")
    }

    /// Writes `text` as the whole config file (for keys under `[proxy]`,
    /// which `write_config` cannot add) and reloads it, which must fail
    /// (`why`).
    fn refused_reload(&self, text: &str, why: &str) -> ReloadError {
        std::fs::write(self.config_path(), text).expect("write config");
        self.reload().expect_err(why)
    }
}

impl Drop for FileProxy {
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

/// A proxy started from [`write_config`] with `extra`.
async fn start_proxy(extra: &str) -> FileProxy {
    let dir = support::temp_dir("lifecycle");
    let path = write_config(&dir, extra);
    let config = Config::load(&path).expect("test config is valid");
    FileProxy {
        proxy: TestProxy::start(config).await,
        dir,
    }
}

/// The test configuration with `user_agent = "pass"`, and `f` applied.
fn passing(f: impl FnOnce(&mut Config)) -> Config {
    config_with(|c| {
        c.identity.user_agent = IdentityMode::Pass;
        f(c);
    })
}

/// An origin allowing everything but `/private`; `/slow` answers after `slow`.
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

// --- Shutdown --------------------------------------------------------------------------

#[tokio::test]
async fn drain_lets_an_in_flight_request_finish_before_run_returns() {
    let origin = origin(Duration::from_millis(600)).await;
    let mut proxy = TestProxy::start(passing(|_| {})).await;
    let addr = proxy.addr();
    let mut conn = ProxyConn::open(addr).await;
    let slow = origin.url("/slow");
    let request = tokio::spawn(async move {
        let answer = conn.try_fetch(get_request(&slow)).await;
        (answer, std::time::Instant::now())
    });
    wait_for_hits(&origin, "/slow", 1).await;
    let mut run = proxy.shutdown();
    // Still draining: the request is in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!run.is_finished(), "run returned before the drain");
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "new connections are refused while draining"
    );
    let (answer, answered_at) = request.await.expect("client task");
    let answer = answer.expect("the in-flight request completes");
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "slow done");
    tokio::time::timeout(Duration::from_secs(3), &mut run)
        .await
        .expect("run returns once the request is done")
        .expect("run does not panic");
    let returned_at = std::time::Instant::now();
    assert!(returned_at >= answered_at);
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed after run returns"
    );
}

#[tokio::test]
async fn shutdown_closes_idle_keep_alive_connections_without_waiting() {
    let origin = TestOrigin::site(ROBOTS).await;
    let mut proxy = TestProxy::start(config()).await;
    let mut idle = ProxyConn::open(proxy.addr()).await;
    assert_status(&idle.fetch(get_request(&origin.url("/a"))).await, 200);
    let _silent = TcpStream::connect(proxy.addr())
        .await
        .expect("connect without sending anything");
    tokio::time::sleep(Duration::from_millis(50)).await;

    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), proxy.shutdown())
        .await
        .expect("idle connections do not hold up the drain")
        .expect("run did not panic");
    assert!(started.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(idle.is_closed(), "the idle connection was closed");
}

#[tokio::test]
async fn drain_timeout_cuts_a_request_still_running() {
    let origin = origin(Duration::from_secs(30)).await;
    let drain = Duration::from_millis(300);
    let mut proxy = TestProxy::start(passing(|c| c.proxy.drain_timeout = drain)).await;
    shutdown_cuts_a_slow_request_after(&mut proxy, &origin, drain).await;
}

/// `drain_timeout` is read when the drain starts: a reload that shortened
/// it (from the 5 s of the file the proxy started with) is obeyed.
#[tokio::test]
async fn drain_timeout_changed_by_a_reload_is_obeyed() {
    let origin = origin(Duration::from_secs(30)).await;
    let mut proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    // A first answer shows `run` has started (and read what it reads at
    // start) before the reload.
    let answer = send(proxy.proxy.addr(), anonymous_get_request(&origin.url("/a"))).await;
    assert_status(&answer, 200);
    proxy.edit_and_reload("drain_timeout = \"5s\"", "drain_timeout = \"300ms\"");
    shutdown_cuts_a_slow_request_after(&mut proxy.proxy, &origin, Duration::from_millis(300)).await;
}

/// Starts a request that `origin` answers only after 30 s, shuts `proxy`
/// down, and checks that the drain gives up after `drain` (not before, and
/// within 3 s: well before the 5 s the config files start with) and cuts the
/// request.
async fn shutdown_cuts_a_slow_request_after(
    proxy: &mut TestProxy,
    origin: &TestOrigin,
    drain: Duration,
) {
    let mut conn = ProxyConn::open(proxy.addr()).await;
    let slow = origin.url("/slow");
    let request = tokio::spawn(async move { conn.try_fetch(get_request(&slow)).await });
    wait_for_hits(origin, "/slow", 1).await;
    let shutdown_at = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(3), proxy.shutdown())
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

// --- Reload ----------------------------------------------------------------------------

#[tokio::test]
async fn reload_applies_to_the_next_request_on_a_keep_alive_connection() {
    let origin = origin(Duration::ZERO).await;
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let mut conn = ProxyConn::open(proxy.proxy.addr()).await;
    // `pass`: a request without User-Agent is forwarded.
    let answer = conn
        .try_fetch(anonymous_get_request(&origin.url("/page")))
        .await
        .expect("before reload");
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "page /page");

    proxy.write_config("[identity]\nuser_agent = \"require\"\n");
    let reloaded = proxy.reload().expect("valid config reloads");
    assert!(reloaded.restart_needed.is_empty(), "{reloaded:?}");

    // Same connection (it would fail if it had been closed), new rule.
    let answer = conn
        .try_fetch(anonymous_get_request(&origin.url("/page")))
        .await
        .expect("the keep-alive connection survives the reload");
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("identity"));
    assert_eq!(origin.hits("/page"), 1);
    // With a User-Agent the same connection still gets through.
    let answer = conn
        .try_fetch(get_request(&origin.url("/page")))
        .await
        .expect("after reload");
    assert_status(&answer, 200);
    // The robots.txt cache was kept: fetched once in all.
    assert_eq!(origin.hits("/robots.txt"), 1);
}

#[tokio::test]
async fn bad_config_is_refused_and_the_old_one_kept() {
    let origin = origin(Duration::ZERO).await;
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    proxy.write_config("[identity]\nuser_agent = \"require\"\nuser_agnet = \"fill\"\n");
    let error = proxy.reload().expect_err("an unknown key is refused");
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
    let mut conn = ProxyConn::open(proxy.proxy.addr()).await;
    let answer = conn
        .fetch(anonymous_get_request(&origin.url("/page")))
        .await;
    assert_status(&answer, 200);

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
    let answer = conn
        .fetch(anonymous_get_request(&origin.url("/page")))
        .await;
    assert_eq!(answer.status, 200, "still the old configuration");
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
    let answer = send(
        proxy.proxy.addr(),
        anonymous_get_request(&origin.url("/page")),
    )
    .await;
    assert_status(&answer, 200);
    assert_eq!(origin.hits("/page"), 1);
}

#[tokio::test]
async fn reload_names_keys_that_need_a_restart() {
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    proxy.write_config(
        "[identity]\nuser_agent = \"fill\"\n[robots]\ndefault_ttl = \"1h\"\n[log]\nlevel = \"debug\"\n",
    );
    let reloaded = proxy.reload().expect("valid config reloads");
    // The robots.txt cache takes its new settings; only what the process
    // reads once (its sockets, threads, admin listener and logging) waits.
    assert_eq!(reloaded.restart_needed, ["log.level"]);
    assert_eq!(
        proxy.proxy.live().services().robots.settings().default_ttl,
        Duration::from_secs(3600)
    );
}

/// `proxy.upstream_connect_timeout` applies on reload: the pools (and the
/// tunnels, which use the same value) open new connections with it.
#[tokio::test]
async fn upstream_connect_timeout_applies_on_reload() {
    let proxy = start_proxy("[identity]\nuser_agent = \"pass\"\n").await;
    let current = || proxy.proxy.live().services().upstream.connect_timeout();
    let before = current();
    let reloaded =
        proxy.edit_and_reload("[proxy]\n", "[proxy]\nupstream_connect_timeout = \"1s\"\n");
    assert!(reloaded.restart_needed.is_empty(), "{reloaded:?}");
    assert_ne!(before, Duration::from_secs(1));
    assert_eq!(current(), Duration::from_secs(1));
}

/// A proxy in intercept mode trusting `ca` upstream, for an origin on `port`, started
/// from a config file.
async fn intercepting_proxy(ca: &TestCa, port: u16, user_agent: &str) -> FileProxy {
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
    FileProxy {
        proxy: TestProxy::start(config).await,
        dir,
    }
}

/// An origin-form `GET path` for `127.0.0.1`, without a `User-Agent`, as a client sends
/// it inside an intercepted tunnel.
fn tunnel_get(path: &str) -> Request<ReplyBody> {
    Request::builder()
        .uri(path)
        .header("host", "127.0.0.1")
        .body(empty())
        .expect("request")
}

#[tokio::test]
async fn intercepted_connections_see_reloads_and_are_drained() {
    let ca = TestCa::new();
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
    let target = format!("127.0.0.1:{}", origin.port());
    let p = &proxy.proxy;
    let tls = intercept(p.addr(), &target, "", p.ca_cert(), &[b"http/1.1"]).await;
    let mut conn = ProxyConn::over(tls).await;
    let answer = conn.try_fetch(tunnel_get("/a")).await.expect("before");
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "secure /a");

    // Reload: the next decrypted request on the same TLS connection sees it.
    let reloaded = proxy.edit_and_reload("user_agent = \"pass\"", "user_agent = \"require\"");
    assert!(reloaded.restart_needed.is_empty(), "{reloaded:?}");
    let answer = conn.try_fetch(tunnel_get("/a")).await.expect("after");
    assert_status(&answer, 403);
    assert_eq!(answer.reason(), Some("identity"));

    // Shutdown waits for a slow intercepted request.
    let slow = tokio::spawn(async move {
        let mut request = tunnel_get("/slow");
        request.headers_mut().insert(
            "user-agent",
            http::HeaderValue::from_static(TEST_USER_AGENT),
        );
        conn.try_fetch(request).await
    });
    wait_for_hits(&origin, "/slow", 1).await;
    let mut run = proxy.proxy.shutdown();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!run.is_finished(), "run returned before the drain");
    let answer = slow.await.expect("task").expect("slow request completes");
    assert_status(&answer, 200);
    assert_eq!(answer.text(), "slow done");
    tokio::time::timeout(Duration::from_secs(3), &mut run)
        .await
        .expect("run returns once the intercepted connection closed")
        .expect("run does not panic");
}
