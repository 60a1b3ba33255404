//! Fleet mode through the real binary: three `robots-guard serve` processes share one
//! real `redis-server` (started here on a free loopback port, no persistence), and the
//! origins see one polite robot.
//!
//! Every origin is on 127.0.0.1, so within one test all of them are one host to pace;
//! each test has its own store, so tests do not pace each other.
//!
//! Without `redis-server` on the machine the tests say so and pass, except under CI
//! (`CI` set), where they fail: `.ci/run` installs it.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::origin::{Reply, TestOrigin};
use support::proxy::{raw, raw_header, raw_status};
use support::served::{message, Served};
use support::temp_dir;
use tokio::time::Instant;

const REDIS: &str = "redis-server";

/// Whether the tests can run: `redis-server` is there, or (outside CI) skip.
fn have_redis() -> bool {
    let found = Command::new(REDIS)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-server is required in CI (.ci/run installs it)"
        );
        eprintln!("SKIPPED: redis-server is not installed (apt-get install redis-server)");
    }
    found
}

/// A `redis-server` child on a loopback port; killed when dropped.
struct Redis {
    port: u16,
    child: Option<Child>,
}

impl Redis {
    async fn start() -> Redis {
        let port = free_port();
        let mut redis = Redis { port, child: None };
        redis.restart().await;
        redis
    }

    /// Starts the server (again) on its port and waits until it answers.
    async fn restart(&mut self) {
        let child = Command::new(REDIS)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.info("server").await.is_none() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    async fn info(&self, section: &str) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("INFO")
            .arg(section)
            .query_async::<String>(&mut conn)
            .await
            .ok()
    }

    /// Commands the clients sent so far, and `EVALSHA`s among them, from `INFO
    /// commandstats`. Redis counts the commands a script runs there too; the proxy
    /// never sends those on their own, so they (and this test's own `INFO`) are left out.
    async fn commands(&self) -> (u64, u64) {
        const IN_SCRIPTS: [&str; 16] = [
            "time",
            "zrem",
            "zremrangebyscore",
            "hmget",
            "hset",
            "hget",
            "zcard",
            "zrange",
            "zadd",
            "pexpire",
            "pttl",
            "hgetall",
            "set",
            "get",
            "del",
            "info",
        ];
        let text = self.info("commandstats").await.expect("INFO commandstats");
        let (mut all, mut evalsha) = (0, 0);
        for line in text.lines() {
            let Some((name, stats)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let calls: u64 = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if !IN_SCRIPTS.contains(&name) {
                all += calls;
            }
            if name == "evalsha" {
                evalsha += calls;
            }
        }
        (all, evalsha)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fleet member: `robots-guard serve` with its own config file.
struct Member {
    served: Served,
    proxy: String,
    admin: String,
}

impl Member {
    /// Starts a process on `store` with `fleet_extra` in `[fleet]` and `rate_extra` in
    /// `[rate_limit]`.
    fn start(store: &str, fleet_extra: &str, rate_extra: &str) -> Member {
        let dir = temp_dir("fleet");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[proxy]\nlisten = \"127.0.0.1:0\"\nworkers = 1\n\
                 [rate_limit]\ndefault_delay = \"0s\"\n{rate_extra}\n\
                 [tls]\nmode = \"tunnel\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
                 [log]\nformat = \"json\"\nlevel = \"info\"\n\
                 [fleet]\nstore = \"{store}\"\n{fleet_extra}\n"
            ),
        )
        .expect("write config");
        Member::serve(config)
    }

    fn serve(config: PathBuf) -> Member {
        let mut served = Served::start(&config);
        let ready = served.wait_for("ready line", |v| message(v).contains("proxy ready"));
        Member {
            proxy: ready["listen"].as_str().expect("listen").to_owned(),
            admin: ready["admin"].as_str().expect("admin").to_owned(),
            served,
        }
    }

    /// GET `url` through this process: status, reason header, and the whole answer.
    fn get(
        &self,
        url: &str,
    ) -> impl std::future::Future<Output = (u16, Option<String>)> + Send + 'static {
        let head = format!(
            "GET {url} HTTP/1.1\r\nHost: x\r\nUser-Agent: FleetBot/1.0\r\nConnection: close\r\n\r\n"
        );
        let proxy = self.proxy.parse().expect("addr");
        async move {
            let answer = raw(proxy, head.as_bytes()).await;
            (
                raw_status(&answer),
                raw_header(&answer, "x-robots-guard-reason").map(str::to_owned),
            )
        }
    }

    async fn metrics(&self) -> String {
        self.admin_get("/metrics").await
    }

    async fn admin_get(&self, path: &str) -> String {
        let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        raw(self.admin.parse().expect("addr"), head.as_bytes()).await
    }
}

/// Three members on `redis` with the same settings.
/// A free loopback port (bound, read, released) for a server the test starts.
fn free_port() -> u16 {
    let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
    probe.local_addr().expect("addr").port()
}

/// Waits until something accepts connections on `127.0.0.1:port` (10 s at most).
async fn listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A site that allows everything and answers `slow_path` only after `delay`.
async fn site_with_slow(slow_path: &'static str, delay: Duration) -> TestOrigin {
    TestOrigin::start(move |req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            path if path == slow_path => {
                tokio::time::sleep(delay).await;
                Reply::text(200, "slow")
            }
            _ => Reply::text(200, "fast"),
        }
    })
    .await
}

fn fleet(redis: &Redis, fleet_extra: &str, rate_extra: &str) -> Vec<Member> {
    (0..3)
        .map(|_| Member::start(&redis.url(), fleet_extra, rate_extra))
        .collect()
}

/// When the origin saw each request for a path other than `/robots.txt`, in order.
fn starts(origin: &TestOrigin) -> Vec<Instant> {
    let mut at: Vec<Instant> = origin
        .requests()
        .iter()
        .filter(|r| r.path != "/robots.txt")
        .map(|r| r.at)
        .collect();
    at.sort();
    at
}

#[tokio::test(flavor = "multi_thread")]
async fn crawl_delay_spaces_request_starts_across_the_fleet() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = TestOrigin::site("User-agent: *\nCrawl-delay: 1\n").await;
    let members = fleet(&redis, "", "");
    // Two requests through each process, all at once.
    let mut asks = Vec::new();
    for (i, member) in members.iter().chain(members.iter()).enumerate() {
        asks.push(member.get(&origin.url(&format!("/page/{i}"))));
    }
    let answers = futures_join_all(asks).await;
    for (status, reason) in &answers {
        assert_eq!(*status, 200, "{reason:?}");
    }
    let at = starts(&origin);
    assert_eq!(at.len(), 6);
    // The store spaces the reserved starts exactly 1 s apart on its clock; the origin
    // sees arrivals, each later than its start by the proxy's way to the origin
    // (connect, send, head parsing): 1-2 ms on a quiet loopback, tens of ms while this
    // machine runs the other tests' proxies and stores too. Hence 50 ms of slack per
    // gap. Starts are absolute slots, so lags do not add up: the whole span is 5 s.
    let slack = Duration::from_millis(50);
    assert!(
        at[5] - at[0] + slack >= Duration::from_secs(5),
        "six starts span {:?}",
        at[5] - at[0]
    );
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap + slack >= Duration::from_secs(1),
            "starts only {gap:?} apart: {at:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_requests_over_three_processes_fetch_robots_txt_once() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = TestOrigin::site("User-agent: *\nDisallow: /private\n").await;
    let members = fleet(&redis, "", "max_per_host = 200");
    let asks: Vec<_> = (0..100)
        .map(|i| members[i % 3].get(&origin.url(&format!("/p/{i}"))))
        .collect();
    let answers = futures_join_all(asks).await;
    assert!(answers.iter().all(|(s, _)| *s == 200), "{answers:?}");
    assert_eq!(
        origin.hits("/robots.txt"),
        1,
        "one fetch for the whole fleet"
    );
    // And the shared entry is what each process judges by.
    for member in &members {
        let (status, reason) = member.get(&origin.url("/private/x")).await;
        assert_eq!(status, 403);
        assert_eq!(reason.as_deref(), Some("robots-disallow"));
    }
    assert_eq!(origin.hits("/robots.txt"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_process_leases_expire_and_the_others_proceed() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = site_with_slow("/slow", Duration::from_secs(20)).await;
    let mut members = fleet(&redis, "lease_ttl = \"2s\"", "max_per_host = 1");
    // Fetch robots.txt first, so the slow request's lease is the only slot held.
    assert_eq!(members[1].get(&origin.url("/warm")).await.0, 200);
    let slow = {
        let proxy = members[0].proxy.clone();
        let url = origin.url("/slow");
        tokio::spawn(async move {
            let head = format!(
                "GET {url} HTTP/1.1\r\nHost: x\r\nUser-Agent: FleetBot/1.0\r\nConnection: close\r\n\r\n"
            );
            let _ = tokio::time::timeout(
                Duration::from_secs(25),
                raw(proxy.parse().expect("addr"), head.as_bytes()),
            )
            .await;
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.hits("/slow") == 0 {
        assert!(
            Instant::now() < deadline,
            "the slow request reached the origin"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let held_since = Instant::now();
    members[0].served.child.kill().expect("SIGKILL");
    let _ = members[0].served.child.wait();
    slow.abort();
    let (status, reason) = members[1].get(&origin.url("/after")).await;
    assert_eq!(status, 200, "{reason:?}");
    let waited = held_since.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "the dead process's slot held until its lease expired (waited {waited:?})"
    );
    assert!(
        waited < Duration::from_secs(6),
        "then freed: waited {waited:?}"
    );
    assert_eq!(members[2].get(&origin.url("/again")).await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_request_keeps_its_slot_past_lease_ttl() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = site_with_slow("/long", Duration::from_millis(2500)).await;
    let members = fleet(&redis, "lease_ttl = \"1s\"", "max_per_host = 1");
    assert_eq!(members[1].get(&origin.url("/warm")).await.0, 200);
    let long = tokio::spawn(members[0].get(&origin.url("/long")));
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.hits("/long") == 0 {
        assert!(
            Instant::now() < deadline,
            "the long request reached the origin"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, _) = members[1].get(&origin.url("/next")).await;
    assert_eq!(status, 200);
    assert_eq!(long.await.expect("task").0, 200);
    let at = |path: &str| {
        origin
            .requests()
            .iter()
            .find(|r| r.path == path)
            .map(|r| r.at)
            .expect("seen")
    };
    let gap = at("/next") - at("/long");
    assert!(
        gap >= Duration::from_millis(2400),
        "the living process renewed its lease: the next request came {gap:?} after"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_process_does_not_starve_another() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            _ => {
                tokio::time::sleep(Duration::from_millis(150)).await;
                Reply::text(200, "ok")
            }
        }
    })
    .await;
    let members = fleet(&redis, "", "max_per_host = 1");
    assert_eq!(members[0].get(&origin.url("/warm")).await.0, 200);
    assert_eq!(members[1].get(&origin.url("/warm")).await.0, 200);
    // Process 0 has a backlog of ten; each of its requests could carry back the lease
    // the one before held and take the slot again at once.
    let busy: Vec<_> = (0..10)
        .map(|i| tokio::spawn(members[0].get(&origin.url(&format!("/busy/{i}")))))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, _) = members[1].get(&origin.url("/other")).await;
    assert_eq!(status, 200);
    for handle in busy {
        assert_eq!(handle.await.expect("task").0, 200);
    }
    let order: Vec<String> = origin
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/busy") || r.path == "/other")
        .map(|r| r.path.clone())
        .collect();
    let other = order.iter().position(|p| p == "/other").expect("served");
    assert!(
        other <= 4,
        "the other process waited its turn, not the whole backlog: {order:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_one_process_saw_holds_for_the_others() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            "/busy" => Reply::text(429, "slow down").header("retry-after", "30"),
            _ => Reply::text(200, "ok"),
        }
    })
    .await;
    let members = fleet(&redis, "", "max_wait = \"5s\"");
    assert_eq!(members[0].get(&origin.url("/busy")).await.0, 429);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, reason) = members[1].get(&origin.url("/page")).await;
        if status == 429 && reason.as_deref() == Some("site-backoff") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other process saw the pause: {status} {reason:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, reason) = members[2].get(&origin.url("/page")).await;
    assert_eq!((status, reason.as_deref()), (429, Some("site-backoff")));
    assert_eq!(origin.hits("/page"), 0, "nothing reached the paused host");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_that_dies_is_survived_and_rejoined() {
    if !have_redis() {
        return;
    }
    let mut redis = Redis::start().await;
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, "User-agent: *\nAllow: /\n"),
            "/busy" => Reply::text(429, "slow down").header("retry-after", "30"),
            _ => Reply::text(200, "ok"),
        }
    })
    .await;
    let local = Member::start(&redis.url(), "", "max_wait = \"5s\"");
    let other = Member::start(&redis.url(), "", "max_wait = \"5s\"");
    let refuse = Member::start(
        &redis.url(),
        "on_store_error = \"refuse\"",
        "max_wait = \"5s\"",
    );
    for member in [&local, &other, &refuse] {
        assert_eq!(member.get(&origin.url("/before")).await.0, 200);
    }

    redis.kill();
    // store_timeout is 250 ms: no request waits longer on the store; the rest of the
    // bound is the exchange with the origin on loopback.
    let bound = Duration::from_millis(250 + 500);
    for i in 0..5 {
        let t = Instant::now();
        let (status, reason) = local.get(&origin.url(&format!("/down/{i}"))).await;
        assert_eq!(status, 200, "local mode serves: {reason:?}");
        assert!(t.elapsed() < bound, "{:?}", t.elapsed());
        let t = Instant::now();
        let (status, reason) = refuse.get(&origin.url(&format!("/down/r{i}"))).await;
        assert_eq!(
            (status, reason.as_deref()),
            (503, Some("fleet-store-unavailable"))
        );
        assert!(t.elapsed() < bound, "{:?}", t.elapsed());
    }
    let metrics = local.metrics().await;
    assert!(
        metrics.contains("robots_guard_fleet_store_up 0"),
        "{metrics}"
    );
    assert!(metrics.contains("robots_guard_fleet_store_fallbacks_total"));
    assert_eq!(raw_status(&local.admin_get("/healthz").await), 200);
    let page = local.admin_get("/").await;
    assert!(page.contains("down (falling back)"), "{page}");

    redis.restart().await;
    // Back to shared state: the refusing process serves again, and a pause seen by one
    // process holds for another (the store is empty after the restart, so this pause is
    // shared state made after it).
    let deadline = Instant::now() + Duration::from_secs(10);
    while refuse.get(&origin.url("/back")).await.0 != 200 {
        assert!(Instant::now() < deadline, "the refusing process rejoined");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // `local` must be using the store again for its pause to reach `other`.
        let _ = local.get(&origin.url("/busy")).await;
        let (status, reason) = other.get(&origin.url("/shared")).await;
        if status == 429 && reason.as_deref() == Some("site-backoff") {
            break;
        }
        assert!(Instant::now() < deadline, "shared state came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(local
        .metrics()
        .await
        .contains("robots_guard_fleet_store_up 1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cached_paced_request_costs_one_store_round_trip() {
    if !have_redis() {
        return;
    }
    let redis = Redis::start().await;
    let origin = TestOrigin::site("User-agent: *\nAllow: /\n").await;
    let member = Member::start(&redis.url(), "", "");
    assert_eq!(member.get(&origin.url("/warm")).await.0, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (all_before, evalsha_before) = redis.commands().await;
    let sent_before = round_trips(&member.metrics().await);
    const N: u64 = 100;
    for i in 0..N {
        assert_eq!(member.get(&origin.url(&format!("/n/{i}"))).await.0, 200);
    }
    // The last request's lease goes back in a background batch.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (all_after, evalsha_after) = redis.commands().await;
    let commands = all_after - all_before;
    let evalsha = evalsha_after - evalsha_before;
    let sent = round_trips(&member.metrics().await) - sent_before;
    eprintln!(
        "{N} cached paced requests: {commands} client commands at the store \
         ({evalsha} EVALSHA), {sent} round trips counted by the proxy"
    );
    assert!(sent <= N + N / 10, "{sent} round trips for {N} requests");
    assert!(evalsha >= N, "every admission asked the store: {evalsha}");
    // One per request, plus a few background releases: any lease whose next request
    // came too late to carry it (after 20 ms for a lease that took the host's last free
    // slot, 250 ms otherwise: fleet::pacing), as happens on a busy machine running the
    // other tests at the same time.
    assert!(
        commands <= N + N / 10,
        "{commands} commands for {N} requests"
    );
}

/// `robots_guard_fleet_store_round_trips_total` in a `/metrics` answer.
fn round_trips(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("robots_guard_fleet_store_round_trips_total "))
        .and_then(|n| n.trim().parse().ok())
        .expect("round trips metric")
}

/// Awaits every future (in order of the input), concurrently.
async fn futures_join_all<F: std::future::Future + Send + 'static>(asks: Vec<F>) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = asks.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}

/// A store reached over TLS (`rediss://`): a redis-server with only a TLS port, its
/// certificate from a CA made here. With `store_ca` naming that CA the process shares
/// state through it; without, the certificate is not trusted, the store counts as down
/// and the process paces alone (the request is still served).
#[tokio::test(flavor = "multi_thread")]
async fn a_tls_store_is_used_only_when_its_certificate_is_trusted() {
    if !have_redis() {
        return;
    }
    let ca = support::origin::TestCa::new();
    let dir = temp_dir("fleet-tls");
    let (cert, key) = ca.leaf_pem(&["127.0.0.1", "localhost"]);
    std::fs::write(dir.join("store.pem"), cert).expect("write cert");
    std::fs::write(dir.join("store.key"), key).expect("write key");
    let ca_file = ca.pem_file();
    let port = free_port();
    let mut child = Command::new(REDIS)
        .args(["--port", "0", "--tls-port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--tls-cert-file")
        .arg(dir.join("store.pem"))
        .arg("--tls-key-file")
        .arg(dir.join("store.key"))
        .arg("--tls-ca-cert-file")
        .arg(&ca_file)
        .args(["--tls-auth-clients", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server with TLS");
    listening(port).await;
    let store = format!("rediss://127.0.0.1:{port}/0");
    let origin = TestOrigin::site("User-agent: *\nAllow: /\n").await;

    let trusting = Member::start(
        &store,
        &format!("store_ca = {:?}", ca_file.display().to_string()),
        "",
    );
    for i in 0..3 {
        assert_eq!(trusting.get(&origin.url(&format!("/t/{i}"))).await.0, 200);
    }
    let metrics = trusting.metrics().await;
    assert!(
        metrics.contains("robots_guard_fleet_store_up 1"),
        "{metrics}"
    );
    assert!(round_trips(&metrics) >= 3, "{metrics}");

    let untrusting = Member::start(&store, "", "");
    assert_eq!(untrusting.get(&origin.url("/u")).await.0, 200);
    let metrics = untrusting.metrics().await;
    assert!(
        metrics.contains("robots_guard_fleet_store_up 0"),
        "{metrics}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A Redis Cluster of three shards: two processes given one node (`cluster = true`)
/// find the others, pace one host as one (Crawl-delay 1 across both), fetch a fresh
/// origin's robots.txt once, and the hosts' state spreads over the shards by hash tag.
#[tokio::test(flavor = "multi_thread")]
async fn a_redis_cluster_shares_state_and_spreads_hosts_over_its_shards() {
    if !have_redis() {
        return;
    }
    let dir = temp_dir("fleet-cluster");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<Child> = Vec::new();
    for port in &ports {
        let node_dir = dir.join(port.to_string());
        std::fs::create_dir_all(&node_dir).expect("node dir");
        nodes.push(
            Command::new(REDIS)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(&node_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a cluster node"),
        );
    }
    for port in &ports {
        listening(*port).await;
    }
    let created = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(ports.iter().map(|p| format!("127.0.0.1:{p}")))
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("redis-cli runs");
    assert!(created.success(), "redis-cli --cluster create");
    let node = |port: u16| format!("redis://127.0.0.1:{port}/0");
    let cluster_ok = |port: u16| async move {
        let client = redis::Client::open(node(port)).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut conn)
            .await
            .ok()?;
        Some(info.contains("cluster_state:ok"))
    };
    let keys_on = |port: u16| async move {
        let client = redis::Client::open(node(port)).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("DBSIZE")
            .query_async::<i64>(&mut conn)
            .await
            .ok()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster_ok(ports[0]).await != Some(true) {
        assert!(Instant::now() < deadline, "the cluster did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let members: Vec<Member> = (0..2)
        .map(|i| Member::start(&node(ports[i]), "cluster = true", ""))
        .collect();

    // One host, Crawl-delay 1, two requests through each process at once.
    let origin = TestOrigin::site("User-agent: *\nCrawl-delay: 1\n").await;
    let mut asks = Vec::new();
    for (i, member) in members.iter().chain(members.iter()).enumerate() {
        asks.push(member.get(&origin.url(&format!("/page/{i}"))));
    }
    for (status, reason) in futures_join_all(asks).await {
        assert_eq!(status, 200, "{reason:?}");
    }
    assert_eq!(origin.hits("/robots.txt"), 1, "one fetch for the fleet");
    let at = starts(&origin);
    assert_eq!(at.len(), 4);
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(950),
            "starts {:?} apart",
            pair[1] - pair[0]
        );
    }

    // Twenty hosts: their keys land on more than one shard.
    let origins = support::wide::LoopbackOrigins::start().await;
    for n in 0..20 {
        let member = &members[n % 2];
        assert_eq!(member.get(&origins.url(n, "/x")).await.0, 200);
    }
    let mut shards_used = 0;
    for port in &ports {
        if keys_on(*port).await.unwrap_or(0) > 0 {
            shards_used += 1;
        }
    }
    assert!(shards_used >= 2, "hosts spread over {shards_used} shard(s)");
    for member in &members {
        let metrics = member.metrics().await;
        assert!(
            metrics.contains("robots_guard_fleet_store_up 1"),
            "{metrics}"
        );
    }
    for mut node in nodes {
        let _ = node.kill();
        let _ = node.wait();
    }
}
