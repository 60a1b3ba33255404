//! Helpers shared by the integration tests: a scripted origin server ([`origin`]), the
//! real proxy and clients that talk through it ([`proxy`]), bodies generated on the fly
//! ([`body`]), the test identity and a robots.txt for test sites ([`TEST_USER_AGENT`],
//! [`ROBOTS`], ...), and ready-made settings, clients and caches that talk to origins
//! over loopback.
//!
//! Every test binary compiles this module on its own and uses a different part of it,
//! hence the module-wide `dead_code` allowance.
#![allow(dead_code)]

pub mod body;
pub mod origin;
pub mod proxy;
pub mod served;
pub mod wide;

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use robots_guard::config::Config;
use robots_guard::fetch::{FetchSettings, RobotsCache, RobotsFetcher};
use robots_guard::policy::{Pacer, PacingSettings};
use robots_guard::upstream::{build_client, UpstreamPools, UpstreamSettings};

/// Runs the robots-guard binary with `args` to completion: (exit code,
/// stdout, stderr); -1 when it was killed by a signal.
pub fn run_cli<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_robots-guard"))
        .args(args)
        .output()
        .expect("run robots-guard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `User-Agent` the test settings send.
pub const TEST_USER_AGENT: &str = "robots-guard-test/1.0";

/// The product token of [`TEST_USER_AGENT`]: the agent robots.txt groups are matched
/// against.
pub const TEST_AGENT: &str = "robots-guard-test";

/// The `From` the test settings send.
pub const TEST_FROM: &str = "tests@example.invalid";

/// A robots.txt with its `Disallow: /private` on line 3 (after a comment), for
/// [`origin::TestOrigin::site`].
pub const ROBOTS: &str = "# test rules\nUser-agent: *\nDisallow: /private\n";

/// [`FetchSettings`] from the default [`Config`], with a test identity and durations
/// short enough for tests: `fetch_timeout` 2 s, `min_ttl` 10 ms, `failure_ttl` 100 ms
/// (doubling up to 1 s). `default_ttl` (24 h), `max_size`, `max_redirects`, `on_4xx` and
/// `stale_for` keep their defaults.
pub fn fetch_settings() -> FetchSettings {
    let mut config = Config::default();
    config.identity.default_user_agent = TEST_USER_AGENT.to_owned();
    config.identity.default_from = TEST_FROM.to_owned();
    let mut settings = FetchSettings::from_config(&config).expect("test identity is valid");
    settings.fetch_timeout = Duration::from_secs(2);
    settings.min_ttl = Duration::from_millis(10);
    settings.failure_ttl = Duration::from_millis(100);
    settings.max_failure_ttl = Duration::from_secs(1);
    settings
}

/// The same, with `f` applied.
pub fn fetch_settings_with(f: impl FnOnce(&mut FetchSettings)) -> FetchSettings {
    let mut settings = fetch_settings();
    f(&mut settings);
    settings
}

/// The upstream client as the proxy builds it, trusting the Mozilla roots plus
/// `extra_roots`.
pub fn client(extra_roots: &[PathBuf]) -> UpstreamPools {
    build_client(&UpstreamSettings {
        connect_timeout: Duration::from_secs(2),
        pool_idle_timeout: Duration::from_secs(30),
        extra_roots: extra_roots.to_vec(),
        max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
    })
    .expect("upstream client")
}

/// A pacer that never delays: every test origin is on host `127.0.0.1`, so real pacing
/// would serialise unrelated tests' fetches.
pub fn unpaced() -> Pacer {
    Pacer::new(PacingSettings {
        default_delay: Duration::ZERO,
        max_per_host: NonZeroUsize::new(1000).expect("non-zero"),
        max_wait: Duration::from_secs(60),
        idle_host_ttl: Duration::from_secs(60),
        max_hosts: 1000,
        backoff: Default::default(),
    })
}

/// A fetcher with `settings`, the default client and no pacing.
pub fn fetcher(settings: FetchSettings) -> RobotsFetcher {
    RobotsFetcher::new(client(&[]), unpaced(), settings)
}

/// A cache with `settings`, the default client and no pacing.
pub fn cache(settings: FetchSettings) -> RobotsCache {
    RobotsCache::new(fetcher(settings))
}

/// A fresh, empty directory under the target's temporary directory, unique
/// per process and call (`prefix-PID-N`), for one test's files.
pub fn temp_dir(prefix: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a test directory");
    dir
}
