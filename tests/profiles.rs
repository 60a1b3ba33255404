//! Profiles: one proxy, one robot per team. A `[[profile]]` is selected by the
//! proxy-auth user or the client's network (first match wins, else the top
//! level's `default`), and sets the robot's name, identity rules, pacing
//! floor and extra denied destinations; answers, metrics and the status page
//! name it; a reload changes profiles; config mistakes name their line.
//!
//! How: the real proxy on `127.0.0.1:0`, scripted loopback origins, and real
//! clients (hyper's HTTP/1.1 client) sending absolute-form requests with
//! `Proxy-Authorization`.

mod support;

use std::time::Duration;

use robots_guard::config::{Config, IdentityMode, TlsMode};
use robots_guard::proxy::Settings;
use support::origin::TestOrigin;
use support::proxy::{
    anonymous_get_request, assert_status, basic_auth, get_as, raw, raw_body, send,
    with_users_and_profiles, TestProxy,
};
use support::{temp_dir, TEST_FROM};

/// One robots.txt with a group for each team's robot.
const TEAM_ROBOTS: &str = "User-agent: PriceBot\nDisallow: /prices\n\n\
                           User-agent: ResearchBot\nDisallow: /papers\n\n\
                           User-agent: *\nDisallow: /private\n";

/// The test configuration with users alice, bob and carol and the profiles
/// of `toml`.
fn with_users(toml: &str, f: impl FnOnce(&mut Config)) -> Config {
    with_users_and_profiles(&["alice", "bob", "carol"], toml, f)
}

const TWO_TEAMS: &str = "[[profile]]\nname = \"pricing\"\nusers = [\"alice\"]\nrobot_name = \"PriceBot\"\n\
                         [[profile]]\nname = \"research\"\nusers = [\"bob\"]\nrobot_name = \"ResearchBot\"\n";

#[tokio::test]
async fn two_users_with_different_robot_names_get_different_verdicts_from_one_robots_txt() {
    let origin = TestOrigin::site(TEAM_ROBOTS).await;
    let proxy = TestProxy::start(with_users(TWO_TEAMS, |_| {})).await;
    let fetch = |user: &'static str, path: &'static str| {
        let url = origin.url(path);
        let addr = proxy.addr();
        async move { send(addr, get_as(user, &url)).await }
    };

    let refused = fetch("alice", "/prices/today").await;
    assert_status(&refused, 403);
    assert_eq!(refused.reason(), Some("robots-disallow"));
    assert_eq!(refused.header("x-robots-guard-agent"), Some("PriceBot"));
    assert_eq!(refused.header("x-robots-guard-profile"), Some("pricing"));
    assert!(
        refused.text().contains("Profile: pricing"),
        "{}",
        refused.text()
    );
    assert_status(&fetch("alice", "/papers/1").await, 200);

    let refused = fetch("bob", "/papers/1").await;
    assert_status(&refused, 403);
    assert_eq!(refused.header("x-robots-guard-agent"), Some("ResearchBot"));
    assert_eq!(refused.header("x-robots-guard-profile"), Some("research"));
    assert_status(&fetch("bob", "/prices/today").await, 200);

    // Carol has no profile: the top level's robot (the User-Agent's token),
    // whom the `*` group binds.
    let carol = fetch("carol", "/prices/today").await;
    assert_status(&carol, 200);
    let refused = fetch("carol", "/private/x").await;
    assert_status(&refused, 403);
    assert_eq!(refused.header("x-robots-guard-profile"), Some("default"));
}

#[tokio::test]
async fn a_client_network_selects_a_profile_and_the_first_match_wins() {
    let origin = TestOrigin::site(TEAM_ROBOTS).await;
    // Alice's profile comes first; everyone on loopback matches the second.
    let proxy = TestProxy::start(with_users(
        "[[profile]]\nname = \"elsewhere\"\nclients = [\"10.0.0.0/8\"]\nrobot_name = \"ResearchBot\"\n\
         [[profile]]\nname = \"pricing\"\nusers = [\"alice\"]\nrobot_name = \"PriceBot\"\n\
         [[profile]]\nname = \"loopback\"\nclients = [\"127.0.0.0/8\", \"::1/128\"]\nrobot_name = \"ResearchBot\"\n",
        |_| {},
    ))
    .await;
    let bob = send(proxy.addr(), get_as("bob", &origin.url("/papers/1"))).await;
    assert_status(&bob, 403);
    assert_eq!(bob.header("x-robots-guard-profile"), Some("loopback"));
    assert_eq!(bob.header("x-robots-guard-agent"), Some("ResearchBot"));
    let alice = send(proxy.addr(), get_as("alice", &origin.url("/prices/x"))).await;
    assert_status(&alice, 403);
    assert_eq!(alice.header("x-robots-guard-profile"), Some("pricing"));
}

#[tokio::test]
async fn a_profiles_require_holds_against_the_global_fill() {
    let origin = TestOrigin::site(TEAM_ROBOTS).await;
    let proxy = TestProxy::start(with_users(
        "[[profile]]\nname = \"strict\"\nusers = [\"alice\"]\nuser_agent = \"require\"\nfrom = \"require\"\n",
        |c| {
            c.identity.user_agent = IdentityMode::Fill;
            c.identity.from = IdentityMode::Fill;
        },
    ))
    .await;
    let as_user = |user: &str| {
        let mut request = anonymous_get_request(&origin.url("/page"));
        request
            .headers_mut()
            .insert("proxy-authorization", basic_auth(user));
        request
    };
    let refused = send(proxy.addr(), as_user("alice")).await;
    assert_status(&refused, 403);
    assert_eq!(refused.reason(), Some("identity"));
    assert!(refused.text().contains("add a User-Agent header"));
    assert!(refused.text().contains("Profile: strict"));
    assert!(origin.requests().is_empty(), "nothing fetched for alice");

    // Bob is the top level's robot: both headers filled in.
    assert_status(&send(proxy.addr(), as_user("bob")).await, 200);
    let seen = origin.last_request().expect("bob's request");
    assert_eq!(seen.header("user-agent"), Some(support::TEST_USER_AGENT));
    assert_eq!(seen.header("from"), Some(TEST_FROM));
}

#[tokio::test]
async fn a_profiles_min_delay_spaces_its_requests() {
    let origin = TestOrigin::site("User-agent: *\nAllow: /\n").await;
    let proxy = TestProxy::start(with_users(
        "[[profile]]\nname = \"gentle\"\nusers = [\"alice\"]\nmin_delay = \"400ms\"\n",
        |_| {},
    ))
    .await;
    for i in 0..3 {
        let url = origin.url(&format!("/gentle/{i}"));
        assert_status(&send(proxy.addr(), get_as("alice", &url)).await, 200);
    }
    let starts: Vec<_> = origin
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/gentle/"))
        .map(|r| r.at)
        .collect();
    assert_eq!(starts.len(), 3);
    for pair in starts.windows(2) {
        let gap = pair[1].duration_since(pair[0]);
        assert!(gap >= Duration::from_millis(390), "spaced {gap:?}");
    }
    // Bob's profile (the top level's) has no floor: right away.
    let started = tokio::time::Instant::now();
    for i in 0..3 {
        let url = origin.url(&format!("/quick/{i}"));
        assert_status(&send(proxy.addr(), get_as("bob", &url)).await, 200);
    }
    assert!(started.elapsed() < Duration::from_millis(390 * 2));
}

#[tokio::test]
async fn a_profiles_deny_destinations_refuse_only_its_requests() {
    let origin = TestOrigin::site(TEAM_ROBOTS).await;
    let proxy = TestProxy::start(with_users(
        "[[profile]]\nname = \"outside-only\"\nusers = [\"alice\"]\ndeny_destinations = [\"127.0.0.0/8\"]\n",
        |_| {},
    ))
    .await;
    let refused = send(proxy.addr(), get_as("alice", &origin.url("/page"))).await;
    assert_status(&refused, 403);
    assert_eq!(refused.reason(), Some("destination-denied"));
    assert_eq!(
        refused.header("x-robots-guard-profile"),
        Some("outside-only")
    );
    // A name resolving to a denied address is refused too.
    let by_name = format!("http://localhost:{}/page", origin.port());
    let refused = send(proxy.addr(), get_as("alice", &by_name)).await;
    assert_eq!(refused.reason(), Some("destination-denied"));
    assert!(origin.requests().is_empty());
    assert_status(
        &send(proxy.addr(), get_as("bob", &origin.url("/page"))).await,
        200,
    );
}

#[test]
fn profile_mistakes_name_their_line() {
    let error = |toml: &str| match Config::from_toml(toml, "profiles.toml") {
        Err(e) => e.to_string(),
        Ok(config) => Settings::from_config(&config)
            .expect_err("a mistake")
            .to_string(),
    };
    let unknown_key = error("[[profile]]\nname = \"a\"\nusers = [\"x\"]\nrobot = \"A\"\n");
    assert!(unknown_key.contains("line 4"), "{unknown_key}");
    assert!(unknown_key.contains("robot"), "{unknown_key}");

    let twice = error(
        "[auth.users]\nx = \"pw\"\n\n[[profile]]\nname = \"a\"\nusers = [\"x\"]\n\n\
         [[profile]]\nname = \"a\"\nclients = [\"10.0.0.0/8\"]\n",
    );
    assert!(twice.contains("line 9"), "{twice}");
    assert!(twice.contains("line 5"), "names the first too: {twice}");

    let unknown_user = error(
        "[auth.users]\nx = \"pw\"\n\n[[profile]]\nname = \"a\"\n\
         users = [\"x\",\n  \"nobody\"]\n",
    );
    assert!(unknown_user.contains("line 7"), "{unknown_user}");
    assert!(unknown_user.contains("\"nobody\""), "{unknown_user}");

    let selects_nothing = error("[[profile]]\nname = \"a\"\nrobot_name = \"A\"\n");
    assert!(selects_nothing.contains("line 2"), "{selects_nothing}");
    let reserved = error("[[profile]]\nname = \"default\"\nclients = [\"10.0.0.0/8\"]\n");
    assert!(reserved.contains("line 2"), "{reserved}");
    let bad_name = error("[[profile]]\nname = \"a b\"\nclients = [\"10.0.0.0/8\"]\n");
    assert!(bad_name.contains("letters, digits"), "{bad_name}");
    let no_signing =
        error("[[profile]]\nname = \"a\"\nclients = [\"10.0.0.0/8\"]\nsigning_key = \"k.pem\"\n");
    assert!(no_signing.contains("[signing]"), "{no_signing}");
}

/// A config file with users alice and bob and `profiles`, tunnel mode.
fn write_config(dir: &std::path::Path, profiles: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\n\
         [identity]\nuser_agent = \"fill\"\n\
         [rate_limit]\ndefault_delay = \"0s\"\n\
         [tls]\nmode = \"tunnel\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\
         [auth.users]\nalice = \"pw\"\nbob = \"pw\"\n\
         {profiles}"
    );
    std::fs::write(&path, text).expect("write config");
    path
}

#[tokio::test]
async fn a_reload_changes_profiles_and_a_bad_one_changes_nothing() {
    let origin = TestOrigin::site(TEAM_ROBOTS).await;
    let dir = temp_dir("profiles-reload");
    let path = write_config(
        &dir,
        "[[profile]]\nname = \"team\"\nusers = [\"alice\"]\nrobot_name = \"PriceBot\"\n",
    );
    let config = Config::load(&path).expect("valid");
    assert_eq!(config.tls.mode, TlsMode::Tunnel);
    let proxy = TestProxy::start_with_admin(config).await;
    let alice = |path: &'static str| {
        let url = origin.url(path);
        let addr = proxy.addr();
        async move { send(addr, get_as("alice", &url)).await }
    };
    assert_status(&alice("/prices/1").await, 403);
    assert_status(&alice("/papers/1").await, 200);

    // The team's robot is renamed, and bob joins another profile.
    write_config(
        &dir,
        "[[profile]]\nname = \"team\"\nusers = [\"alice\"]\nrobot_name = \"ResearchBot\"\n\
         [[profile]]\nname = \"other\"\nusers = [\"bob\"]\nrobot_name = \"PriceBot\"\n",
    );
    proxy.live().reload_from(&path).expect("reloads");
    assert_status(&alice("/prices/1").await, 200);
    assert_status(&alice("/papers/1").await, 403);
    let bob = send(proxy.addr(), get_as("bob", &origin.url("/prices/1"))).await;
    assert_eq!(bob.header("x-robots-guard-profile"), Some("other"));

    // A profile naming a user the proxy does not know: refused, naming the
    // line; the running profiles stay.
    write_config(
        &dir,
        "[[profile]]\nname = \"team\"\nusers = [\"alice\", \"mallory\"]\nrobot_name = \"PriceBot\"\n",
    );
    let error = proxy.live().reload_from(&path).expect_err("unknown user");
    assert!(error.to_string().contains("mallory"), "{error}");
    let text = std::fs::read_to_string(&path).expect("config");
    let line = 1 + text
        .lines()
        .position(|l| l.contains("mallory"))
        .expect("there");
    assert!(
        error.to_string().contains(&format!("line {line}:")),
        "{error}"
    );
    assert_status(&alice("/papers/1").await, 403);

    // The status page lists the profiles in force and filters by one.
    let page = |query: &str| {
        let request = format!("GET /{query} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
        let admin = proxy.admin_addr();
        async move { raw_body(&raw(admin, request.as_bytes()).await).to_owned() }
    };
    let all = page("").await;
    assert!(all.contains("<table id=\"profiles\">"), "{all}");
    assert!(all.contains("<td class=\"mono\">team</td>"), "{all}");
    assert!(all.contains("<td class=\"mono\">other</td>"), "{all}");
    assert!(all.contains("href=\"/?profile=team\""), "{all}");
    let team = page("?profile=team").await;
    assert!(team.contains("<strong>team</strong>"), "{team}");
    assert!(team.contains("profile team"), "{team}");
    // Bob's refusal is under `other`, not in team's view.
    let denials = |html: &str| {
        html.split("<table id=\"denials\">")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    assert!(denials(&all).contains("<td class=\"mono\">other</td>"));
    assert!(!denials(&team).contains("<td class=\"mono\">other</td>"));
    assert!(denials(&team).contains("<td class=\"mono\">team</td>"));
}
