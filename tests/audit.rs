//! The audit trail through the real binary: each access-log record names the
//! profile, the purposes, the deciding statement as the site wrote it and the
//! robots.txt copy it was judged by (fetched-at time, `ETag`,
//! `Last-Modified`, a SHA-256 prefix); `robots-guard audit ORIGIN` shows
//! that copy, bytes and all, from the admin listener's `/audit`.
//!
//! How: `robots-guard serve` as a child process with a JSON access log, a
//! scripted loopback origin whose robots.txt carries validators, raw HTTP/1.1
//! requests through the proxy, and the `audit` command as a second process.

mod support;

use support::origin::{Reply, TestOrigin};
use support::proxy::{raw, raw_status};
use support::served::{message, Served};
use support::{run_cli, temp_dir};

const ROBOTS: &str = "# the shop's rules\nUser-agent: *\nDisallow: /basket  # no carts\n\
                      Content-Signal: ai-train=no\n";

/// The first 12 hex digits of the SHA-256 of `bytes`.
fn short_sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn get_through(proxy: &str, url: &str, extra: &str) -> u16 {
    let head = format!(
        "GET {url} HTTP/1.1\r\nHost: x\r\nUser-Agent: ShopBot/2.0\r\n{extra}Connection: close\r\n\r\n"
    );
    raw_status(&raw(proxy.parse().expect("addr"), head.as_bytes()).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_access_log_and_audit_name_the_copy_a_request_was_judged_by() {
    let origin = TestOrigin::start(|req| async move {
        match req.uri().path() {
            "/robots.txt" => Reply::text(200, ROBOTS)
                .header("etag", "\"rules-v7\"")
                .header("last-modified", "Tue, 24 Nov 2026 09:00:00 GMT"),
            _ => Reply::text(200, "ok"),
        }
    })
    .await;
    let dir = temp_dir("audit");
    let config = dir.join("config.toml");
    let access = dir.join("access.jsonl");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n[rate_limit]\ndefault_delay = \"0s\"\n\
             [tls]\nmode = \"tunnel\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             [log]\nformat = \"json\"\naccess_log = \"{}\"\n\
             [[profile]]\nname = \"shop\"\nclients = [\"127.0.0.0/8\"]\npurposes = [\"search\"]\n",
            access.display()
        ),
    )
    .expect("write config");
    let mut served = Served::start(&config);
    let ready = served.wait_for("ready line", |v| message(v).contains("proxy ready"));
    let proxy = ready["listen"].as_str().expect("listen").to_owned();

    assert_eq!(get_through(&proxy, &origin.url("/basket/1"), "").await, 403);
    assert_eq!(get_through(&proxy, &origin.url("/shelf"), "").await, 200);
    let ai = "X-Robots-Guard-Purpose: ai-train\r\n";
    assert_eq!(get_through(&proxy, &origin.url("/shelf"), ai).await, 403);

    served.signal("TERM");
    served.wait_for("stopped", |v| message(v).contains("robots-guard stopped"));
    let log = std::fs::read_to_string(&access).expect("access log");
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(records.len(), 3, "{log}");
    let hash = short_sha256(ROBOTS.as_bytes());
    for record in &records {
        assert_eq!(record["profile"], "shop");
        let copy = &record["robots"];
        assert_eq!(copy["url"], origin.url("/robots.txt"));
        assert_eq!(copy["kind"], "parsed");
        assert_eq!(copy["etag"], "\"rules-v7\"");
        assert_eq!(copy["last_modified"], "Tue, 24 Nov 2026 09:00:00 GMT");
        assert_eq!(copy["sha256"], hash.as_str());
        assert!(copy["fetched_at"].as_str().expect("time").ends_with('Z'));
    }
    let refused = &records[0];
    assert_eq!(refused["outcome"], "robots-disallow");
    assert_eq!(refused["purposes"], "search");
    assert_eq!(refused["rule_line"], 3);
    assert_eq!(refused["statement"], "Disallow: /basket  # no carts");
    let by_usage = &records[2];
    assert_eq!(by_usage["outcome"], "usage-preference");
    assert_eq!(by_usage["purposes"], "search, ai-train");
    assert_eq!(by_usage["statement"], "Content-Signal: ai-train=no");
    drop(served);

    // `audit` asks a running proxy for its copy.
    let mut served = Served::start(&config);
    let ready = served.wait_for("ready line", |v| message(v).contains("proxy ready"));
    let proxy = ready["listen"].as_str().expect("listen").to_owned();
    let admin = ready["admin"].as_str().expect("admin").to_owned();
    let audit = |args: Vec<String>| tokio::task::spawn_blocking(move || run_cli(args));
    let args = |origin: &str, json: bool| {
        let mut args = vec![
            "audit".to_owned(),
            origin.to_owned(),
            "--admin".to_owned(),
            admin.clone(),
        ];
        if json {
            args.push("--json".to_owned());
        }
        args
    };
    let site = origin.url("");
    let (code, _, stderr) = audit(args(&site, false)).await.expect("ran");
    assert_eq!(code, 1, "nothing cached yet: {stderr}");
    assert!(stderr.contains("no robots.txt"), "{stderr}");

    assert_eq!(get_through(&proxy, &origin.url("/shelf"), "").await, 200);
    let (code, stdout, stderr) = audit(args(&site, false)).await.expect("ran");
    assert_eq!(code, 0, "{stderr}");
    for expected in [
        format!("sha256         {hash}"),
        "etag           \"rules-v7\"".to_owned(),
        "last-modified  Tue, 24 Nov 2026 09:00:00 GMT".to_owned(),
        "kind           parsed".to_owned(),
        format!("--- robots.txt as fetched ---\n{ROBOTS}"),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} in\n{stdout}");
    }
    // A URL stands for its origin; --json gives the endpoint's record.
    let (code, stdout, _) = audit(args(&origin.url("/any/page"), true))
        .await
        .expect("ran");
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(json["sha256"], hash.as_str());
    assert_eq!(json["body"], ROBOTS);
    let fetched = json["fetched_at"].as_str().expect("time");
    let fetched =
        time::OffsetDateTime::parse(fetched, &time::format_description::well_known::Rfc3339)
            .expect("RFC 3339");
    let age = time::OffsetDateTime::now_utc() - fetched;
    assert!(age < time::Duration::seconds(60), "{age}");

    let (code, _, stderr) = audit(args("not an origin", false)).await.expect("ran");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not an origin"), "{stderr}");
}
