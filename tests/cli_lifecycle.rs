//! The lifecycle through the real binary: `check-config`, and `serve` with
//! `log.format = "json"` and a JSON access log, reloaded with SIGHUP and
//! stopped with SIGTERM.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::origin::TestOrigin;
use support::proxy::{raw, raw_status};
use support::served::{message, Served};

const BIN: &str = env!("CARGO_BIN_EXE_robots-guard");

/// Runs `robots-guard check-config --config PATH`: (exit code, stdout, stderr).
fn check_config(path: &Path) -> (i32, String, String) {
    support::run_cli([
        std::ffi::OsStr::new("check-config"),
        std::ffi::OsStr::new("--config"),
        path.as_os_str(),
    ])
}

#[test]
fn check_config_accepts_a_good_file_and_creates_nothing() {
    let dir = support::temp_dir("cli-lifecycle");
    let path = dir.join("good.toml");
    let cert = dir.join("ca.pem");
    let key = dir.join("ca.key");
    std::fs::write(
        &path,
        format!(
            "[tls]\nca_cert = \"{}\"\nca_key = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let (code, out, err) = check_config(&path);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("config OK: {}\n", path.display())),
        "{out}"
    );
    assert!(out.contains("serve creates it on first start"), "{out}");
    assert!(
        !cert.exists() && !key.exists(),
        "check-config created the CA"
    );

    // With the CA present it is loaded and checked.
    let status = Command::new(BIN)
        .args(["ca", "init", "--dir"])
        .arg(&dir)
        .output()
        .expect("ca init");
    assert!(status.status.success());
    let (code, out, err) = check_config(&path);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("config OK: {}\n", path.display()));

    // The shipped config.toml is valid.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml");
    let (code, out, err) = check_config(&shipped);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("config OK: "), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_config_reports_file_line_key_and_accepted_values() {
    let dir = support::temp_dir("cli-lifecycle");
    let path = dir.join("bad.toml");
    std::fs::write(&path, "[identity]\n\nuser_agent = \"sometimes\"\n").unwrap();
    let (code, out, err) = check_config(&path);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    for part in [
        "bad.toml",
        "line 3",
        "user_agent",
        "sometimes",
        "`require`",
        "`fill`",
        "`pass`",
    ] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }

    std::fs::write(&path, "[robots]\ncache_capacty = 5\n").unwrap();
    let (code, _, err) = check_config(&path);
    assert_eq!(code, 2);
    assert!(
        err.contains("line 2") && err.contains("cache_capacty"),
        "{err}"
    );

    let (code, _, err) = check_config(&dir.join("missing.toml"));
    assert_eq!(code, 2);
    assert!(err.contains("cannot read config file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_config_loads_the_files_the_config_names() {
    let dir = support::temp_dir("cli-lifecycle");
    let path = dir.join("files.toml");
    // Writes `toml` as the config, runs check-config: it must exit 2; its stderr.
    let refused = |toml: String| {
        std::fs::write(&path, toml).unwrap();
        let (code, _, err) = check_config(&path);
        assert_eq!(code, 2, "{err}");
        err
    };
    let not_pem = dir.join("roots.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let err = refused(format!(
        "[tls]\nmode = \"tunnel\"\nextra_roots = [\"{}\"]\n",
        not_pem.display()
    ));
    assert!(err.contains("roots.pem"), "{err}");

    // Only half of a CA present: what `serve` would refuse.
    let cert = dir.join("ca.pem");
    std::fs::write(&cert, "x").unwrap();
    let err = refused(format!(
        "[tls]\nca_cert = \"{}\"\nca_key = \"{}\"\n",
        cert.display(),
        dir.join("ca.key").display()
    ));
    assert!(err.contains("ca.key"), "{err}");

    let err = refused(format!(
        "[tls]\nmode = \"tunnel\"\n[log]\naccess_log = \"{}\"\n",
        dir.join("no-such-dir/access.jsonl").display()
    ));
    assert!(err.contains("no-such-dir"), "{err}");

    // The htpasswd file `serve` reads: missing, then with a bad line.
    let htpasswd = dir.join("users.htpasswd");
    let config = format!(
        "[tls]\nmode = \"tunnel\"\n[auth]\nhtpasswd = \"{}\"\n",
        htpasswd.display()
    );
    let err = refused(config.clone());
    assert!(err.contains("users.htpasswd"), "{err}");
    std::fs::write(&htpasswd, "alice-without-a-hash\n").unwrap();
    let err = refused(config);
    assert!(err.contains("users.htpasswd line 1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// GET `url` through the proxy listening at `proxy` (a raw HTTP/1.1 exchange);
/// returns the status code (0 if the answer has none).
async fn get_through(proxy: &str, url: &str, user_agent: Option<&str>) -> u16 {
    let ua = user_agent
        .map(|ua| format!("User-Agent: {ua}\r\n"))
        .unwrap_or_default();
    let head = format!("GET {url} HTTP/1.1\r\nHost: x\r\n{ua}Connection: close\r\n\r\n");
    let proxy = proxy.parse().expect("the proxy's listen address");
    raw_status(&raw(proxy, head.as_bytes()).await)
}

/// robots.txt of the test site: `Disallow: /private` on line 2.
const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

#[tokio::test(flavor = "multi_thread")]
async fn serve_with_json_logs_reloads_on_sighup_and_drains_on_sigterm() {
    let origin = TestOrigin::site(ROBOTS).await;
    let dir = support::temp_dir("cli-lifecycle");
    let config = dir.join("config.toml");
    let access = dir.join("access.jsonl");
    let write = |identity: &str, extra: &str| {
        std::fs::write(
            &config,
            format!(
                "[proxy]\nlisten = \"127.0.0.1:0\"\n[identity]\nuser_agent = \"{identity}\"\n\
                 [rate_limit]\ndefault_delay = \"0s\"\n[tls]\nmode = \"tunnel\"\n\
                 [log]\nformat = \"json\"\naccess_log = \"{}\"\n{extra}",
                access.display()
            ),
        )
        .expect("write config");
    };
    write("pass", "");
    let mut served = Served::start(&config);
    let ready = served.wait_for("ready line", |v| message(v).contains("proxy ready"));
    let proxy = ready["listen"].as_str().expect("listen field").to_owned();
    assert_eq!(ready["level"], "INFO");

    assert_eq!(get_through(&proxy, &origin.url("/page"), None).await, 200);
    assert_eq!(
        get_through(&proxy, &origin.url("/private"), Some("Bot/1")).await,
        403
    );

    // A bad file on SIGHUP: refused, logged at error with toml's position.
    write("require", "bogus_key = 1\n");
    served.signal("HUP");
    let refused = served.wait_for("refused reload", |v| v["level"] == "ERROR");
    let text = message(&refused);
    assert!(
        text.contains("reload refused") && text.contains("bogus_key"),
        "{text}"
    );
    assert!(text.contains("line 12"), "{text}");
    assert_eq!(get_through(&proxy, &origin.url("/page"), None).await, 200);

    // A good one: applied to the next request.
    write("require", "");
    served.signal("HUP");
    served.wait_for("reloaded", |v| {
        message(v).contains("configuration reloaded")
    });
    assert_eq!(get_through(&proxy, &origin.url("/page"), None).await, 403);

    served.signal("TERM");
    served.wait_for("stopped", |v| message(v).contains("robots-guard stopped"));
    let status = served.child.wait().expect("wait for exit");
    assert!(status.success(), "{status:?}");
    // Every remaining stderr line is JSON too.
    while let Ok(line) = served.lines.recv_timeout(Duration::from_secs(2)) {
        serde_json::from_str::<serde_json::Value>(&line)
            .unwrap_or_else(|e| panic!("stderr line is not JSON ({e}): {line}"));
    }

    let log = std::fs::read_to_string(&access).expect("access log written");
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let summary: Vec<(u64, &str)> = records
        .iter()
        .map(|r| {
            (
                r["status"].as_u64().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (200, "allowed"),
            (403, "robots-disallow"),
            (200, "allowed"),
            (403, "identity")
        ]
    );
    let disallowed = &records[1];
    assert_eq!(disallowed["method"], "GET");
    assert_eq!(disallowed["url"], origin.url("/private"));
    assert_eq!(disallowed["agent"], "Bot");
    assert_eq!(disallowed["rule_line"], 2);
    assert!(disallowed["client"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert!(disallowed["ts"].as_str().unwrap().contains('T'));
    assert!(disallowed["duration_ms"].as_f64().is_some());
    assert!(records[0]["upstream_ms"].as_f64().is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The threads of process `pid` whose name starts with `prefix` (Linux).
#[cfg(target_os = "linux")]
fn threads_named(pid: u32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn serve_starts_the_configured_worker_threads_and_they_all_serve() {
    let origin = TestOrigin::site(ROBOTS).await;
    let dir = support::temp_dir("cli-workers");
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "[proxy]\nlisten = \"127.0.0.1:0\"\nworkers = 3\n[identity]\nuser_agent = \"pass\"\n\
         [rate_limit]\ndefault_delay = \"0s\"\n[tls]\nmode = \"tunnel\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\n",
    )
    .expect("write config");
    let mut served = Served::start(&config);
    let ready = served.wait_for("ready line", |v| message(v).contains("proxy ready"));
    let proxy = ready["listen"].as_str().expect("listen field").to_owned();
    assert_eq!(ready["workers"], 3);
    // Thread names are cut to 15 bytes: "robots-guard-wo". The workers start
    // just after the ready line (connections wait in the backlog till then).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut workers = threads_named(served.child.id(), "robots-guard-wo");
    while workers < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        workers = threads_named(served.child.id(), "robots-guard-wo");
    }
    assert_eq!(workers, 3);

    // Many clients at once, each on its own connection: whichever worker
    // takes a connection answers it, with the right verdicts.
    let requests = (0..48).map(|i| {
        let proxy = proxy.clone();
        let url = if i % 4 == 0 {
            origin.url("/private")
        } else {
            origin.url(&format!("/page{i}"))
        };
        tokio::spawn(async move { (i, get_through(&proxy, &url, Some("Bot/1")).await) })
    });
    for request in requests {
        let (i, status) = request.await.expect("request task");
        assert_eq!(status, if i % 4 == 0 { 403 } else { 200 }, "request {i}");
    }
    assert_eq!(
        origin.hits("/robots.txt"),
        1,
        "one robots.txt for all workers"
    );

    served.signal("TERM");
    served.wait_for("stopped", |v| message(v).contains("robots-guard stopped"));
    let status = served.child.wait().expect("wait for exit");
    assert!(status.success(), "{status:?}");
    std::fs::remove_dir_all(&dir).ok();
}
