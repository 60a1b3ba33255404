//! The status page: server-rendered HTML, no scripts, reloaded by a
//! `<meta http-equiv="refresh">`. Everything that came from the network
//! (hosts, URLs, agents, reasons, rules) goes through [`escape`].
//!
//! `/?profile=NAME` narrows the totals, the chart, the hosts and the
//! refusals to one profile's requests; the profiles in force and the hosts
//! a site paused are shown either way (pacing is one per host, across
//! profiles).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::REFRESH_SECONDS;
use crate::config::TlsMode;
use crate::fetch::{RobotsEntry, RobotsRules};
use crate::metrics::{Denial, HostActivity};
use crate::origin::Origin;
use crate::policy::HostPaceStats;
use crate::proxy::Profile;
use crate::proxy::{Services, Settings};

/// Rows in the host table: the most recently active hosts, then hosts that
/// only have a cached robots.txt.
const MAX_HOST_ROWS: usize = 200;

/// Cache entries looked at for the robots.txt column.
const MAX_CACHE_ROWS: usize = 1000;

const STYLE: &str = r#"
:root { color-scheme: light dark; --fg: #1f2328; --muted: #656d76; --bg: #fff; --line: #d0d7de;
  --stripe: #f6f8fa; --ok: #1a7f37; --info: #0969da; --warn: #9a6700; --bad: #cf222e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #8d96a0; --bg: #0d1117;
  --line: #30363d; --stripe: #161b22; --ok: #3fb950; --info: #4493f8; --warn: #d29922; --bad: #f85149; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 80rem; padding: 1.5rem; font: 14px/1.45 system-ui, -apple-system,
  "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
h2 { font-size: 1.1rem; margin: 2rem 0 .5rem; }
.sub, .muted { color: var(--muted); }
.sub { margin: 0 0 1rem; }
dl.summary { display: grid; grid-template-columns: repeat(auto-fill, minmax(9rem, 1fr)); gap: .5rem; margin: 0; }
dl.summary div { border: 1px solid var(--line); border-radius: 6px; padding: .4rem .75rem; }
dl.summary dt { color: var(--muted); font-size: .8rem; }
dl.summary dd { margin: 0; font-size: 1.15rem; font-variant-numeric: tabular-nums; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; color: var(--muted); font-weight: 600; white-space: nowrap; }
tbody tr:nth-child(odd) { background: var(--stripe); }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; }
.url { word-break: break-all; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 1rem; font-size: .75rem; font-weight: 600;
  border: 1px solid currentColor; white-space: nowrap; }
.ok { color: var(--ok); } .info { color: var(--info); } .warn { color: var(--warn); } .bad { color: var(--bad); }
.zero { color: var(--muted); }
.nowrap { white-space: nowrap; }
.origin + .origin { margin-top: .25rem; }
.empty { color: var(--muted); padding: 1rem 0; }
footer { margin-top: 2rem; color: var(--muted); font-size: .8rem; }
nav.filter { margin: 0 0 .5rem; } nav.filter a, nav.filter strong { margin-right: .5rem; }
figure.chart { margin: 0; } figure.chart svg { width: 100%; height: auto; max-height: 18rem; }
svg .grid { stroke: var(--line); stroke-width: 1; } svg .axis { fill: var(--muted); font-size: 10px; }
ul.legend { list-style: none; padding: 0; margin: .25rem 0 0; display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
.swatch { display: inline-block; width: .75rem; height: .75rem; border-radius: 2px; margin-right: .3rem;
  vertical-align: -1px; }
"#;

/// The whole page for the proxy's state now, of every profile or of
/// `profile`.
pub fn render(settings: &Settings, services: &Services, profile: Option<&str>) -> String {
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut page = String::with_capacity(32 * 1024);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <link rel=\"icon\" href=\"data:,\">\
         <title>robots-guard status</title><style>{STYLE}</style></head><body>\n"
    );
    summary(&mut page, settings, services, profile);
    profiles(&mut page, settings, services, profile);
    let _ = writeln!(
        page,
        "<h2>Requests per minute <span class=\"muted\">(last hour, UTC, {})</span></h2>",
        profile.map_or_else(
            || "every profile".to_owned(),
            |p| format!("profile {}", escape(p))
        )
    );
    super::chart::render(
        &mut page,
        &services.metrics.last_hour(profile),
        profile.unwrap_or("every profile"),
    );
    backoffs(&mut page, services);
    hosts(&mut page, services, now, profile);
    denials(&mut page, &services.metrics.denials(profile), wall);
    let _ = write!(
        page,
        "<footer>Refreshes every {REFRESH_SECONDS} s · {} UTC · \
         <a href=\"/metrics\">/metrics</a> · <a href=\"/healthz\">/healthz</a></footer>\n\
         </body></html>\n",
        clock(wall)
    );
    page
}

fn summary(page: &mut String, settings: &Settings, services: &Services, profile: Option<&str>) {
    let metrics = &services.metrics;
    let totals = metrics.totals(profile);
    let cache = services.robots.stats();
    let sources = metrics.sources();
    let mode = match settings.tls_mode {
        TlsMode::Intercept => "HTTPS intercepted",
        TlsMode::Tunnel => "HTTPS tunnelled",
    };
    let _ = write!(
        page,
        "<h1>robots-guard</h1><p class=\"sub\">version {} · proxy on <span class=\"mono\">{}</span> · \
         {mode} · up {}</p>\n<dl class=\"summary\">",
        env!("CARGO_PKG_VERSION"),
        escape(&services.listen.to_string()),
        age(metrics.uptime()),
    );
    let minted = services.minter.current().map_or(0, |m| m.minted_count());
    let items: [(&str, String); 10] = [
        ("allowed", totals.allowed.to_string()),
        ("denied", totals.denied.to_string()),
        ("would refuse", totals.would_refuse.to_string()),
        ("429 (pacing)", totals.throttled.to_string()),
        ("upstream failed", totals.failed.to_string()),
        ("open connections", metrics.open_connections().to_string()),
        ("robots.txt cached", cache.entries.to_string()),
        (
            "cache hits / misses",
            format!("{} / {}", cache.hits, cache.misses),
        ),
        ("paced hosts", sources.pacer.tracked_hosts().to_string()),
        ("certificates minted", minted.to_string()),
    ];
    for (name, value) in items {
        let _ = write!(page, "<div><dt>{name}</dt><dd>{value}</dd></div>");
    }
    page.push_str("</dl>\n");
    if let Some(fleet) = &services.fleet {
        let stats = fleet.store.stats();
        let _ = writeln!(
            page,
            "<p class=\"sub\">fleet store <span class=\"mono\">{}</span>: <b>{}</b> · \
             round trips {} · errors {} · requests served alone {} · on store error: {:?}</p>",
            escape(&fleet.url),
            if stats.up {
                "up"
            } else {
                "down (falling back)"
            },
            stats.round_trips,
            stats.errors,
            stats.fallbacks,
            fleet.on_store_error,
        );
    }
}

/// The profiles in force, each a link that narrows the page to it.
fn profiles(page: &mut String, settings: &Settings, services: &Services, shown: Option<&str>) {
    let all: Vec<&Arc<Profile>> = settings
        .profiles
        .iter()
        .chain(std::iter::once(&settings.default_profile))
        .collect();
    let _ = writeln!(
        page,
        "<h2>Profiles in force <span class=\"muted\">({})</span></h2>",
        all.len()
    );
    page.push_str("<nav class=\"filter\">Show: ");
    let link = |page: &mut String, name: Option<&str>| {
        let label = name.unwrap_or("every profile");
        if name == shown {
            let _ = write!(page, "<strong>{}</strong> ", escape(label));
        } else {
            let href = name.map_or_else(|| "/".to_owned(), |n| format!("/?profile={n}"));
            let _ = write!(page, "<a href=\"{}\">{}</a> ", escape(&href), escape(label));
        }
    };
    link(page, None);
    for profile in &all {
        link(page, Some(&profile.name));
    }
    page.push_str("</nav>\n");
    if let Some(name) = shown {
        if !all.iter().any(|p| &*p.name == name) {
            let _ = writeln!(
                page,
                "<p class=\"empty\">No profile named {} is in force; its past requests, if \
                 any, are shown.</p>",
                escape(name)
            );
        }
    }
    page.push_str(
        "<div class=\"scroll\"><table id=\"profiles\"><thead><tr><th>Profile</th><th>Selected by</th>\
         <th>Robot name</th><th>Mode</th><th class=\"num\">Min delay</th><th>Extra denied</th>\
         <th class=\"num\">Allowed</th><th class=\"num\">Refused</th>\
         <th class=\"num\">Would refuse</th></tr></thead><tbody>\n",
    );
    for profile in all {
        let totals = services.metrics.totals(Some(&profile.name));
        let selected_by = if profile.users().is_empty() && profile.clients().is_empty() {
            "<span class=\"muted\">every other client</span>".to_owned()
        } else {
            let users = profile
                .users()
                .iter()
                .map(|u| format!("user {}", escape(u)));
            let nets = profile.clients().iter().map(|n| escape(&n.to_string()));
            users.chain(nets).collect::<Vec<_>>().join(", ")
        };
        let mode = if profile.enforce {
            "<span class=\"badge ok\">enforce</span>"
        } else {
            "<span class=\"badge info\">report-only</span>"
        };
        let denied = if profile.deny_destinations.is_empty() {
            "<span class=\"muted\">–</span>".to_owned()
        } else {
            profile
                .deny_destinations
                .iter()
                .map(|n| escape(&n.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = write!(
            page,
            "<tr><td class=\"mono\">{}</td><td class=\"mono\">{selected_by}</td><td class=\"mono\">{}</td>\
             <td>{mode}</td><td class=\"num\">{}</td><td class=\"mono\">{denied}</td>",
            escape(&profile.name),
            profile.robot_name.as_deref().map_or_else(
                || "<span class=\"muted\">User-Agent's token</span>".to_owned(),
                escape
            ),
            if profile.min_delay.is_zero() {
                "–".to_owned()
            } else {
                delay(profile.min_delay)
            },
        );
        count_cell(page, totals.allowed);
        count_cell(page, totals.denied + totals.throttled + totals.failed);
        count_cell(page, totals.would_refuse);
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody></table></div>\n");
}

/// One row of the host table.
struct HostRow {
    host: String,
    activity: Option<HostActivity>,
    origins: Vec<(Origin, Arc<RobotsEntry>)>,
    pace: Option<HostPaceStats>,
}

fn hosts(page: &mut String, services: &Services, now: Instant, profile: Option<&str>) {
    let mut rows: Vec<HostRow> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (host, activity) in services.metrics.hosts(MAX_HOST_ROWS, profile) {
        index.insert(host.clone(), rows.len());
        rows.push(HostRow {
            host,
            activity: Some(activity),
            origins: Vec::new(),
            pace: None,
        });
    }
    for (origin, entry) in services.robots.snapshot(MAX_CACHE_ROWS) {
        let at = match index.get(&origin.host) {
            Some(&at) => at,
            // A profile's view lists the hosts it sent requests to only.
            None if rows.len() < MAX_HOST_ROWS && profile.is_none() => {
                index.insert(origin.host.clone(), rows.len());
                rows.push(HostRow {
                    host: origin.host.clone(),
                    activity: None,
                    origins: Vec::new(),
                    pace: None,
                });
                rows.len() - 1
            }
            None => continue,
        };
        rows[at].origins.push((origin, entry));
    }
    for row in &mut rows {
        row.origins.sort_by(|a, b| a.0.cmp(&b.0));
        row.pace = services
            .pacer
            .host_snapshot(crate::origin::host_pacing_key(&row.host));
    }

    let _ = writeln!(
        page,
        "<h2>Hosts <span class=\"muted\">({})</span></h2>",
        rows.len()
    );
    if rows.is_empty() {
        page.push_str("<p class=\"empty\">No traffic yet.</p>\n");
        return;
    }
    page.push_str(
        "<div class=\"scroll\"><table id=\"hosts\"><thead><tr><th>Host</th><th>robots.txt</th>\
         <th class=\"num\">Allowed</th><th class=\"num\">Denied</th><th class=\"num\">429</th>\
         <th class=\"num\">Failed</th><th class=\"num\">Would refuse</th><th class=\"num\">Delay</th>\
         <th class=\"num\">In flight / queued</th><th>Last request</th></tr></thead><tbody>\n",
    );
    for row in &rows {
        let _ = write!(
            page,
            "<tr><td class=\"mono\">{}</td><td>",
            escape(&row.host)
        );
        if row.origins.is_empty() {
            page.push_str("<span class=\"muted\">not fetched</span>");
        }
        for (origin, entry) in &row.origins {
            robots_cell(page, origin, entry, now);
        }
        page.push_str("</td>");
        let a = row.activity.as_ref();
        let c = a.map(|a| a.counts).unwrap_or_default();
        for n in [c.allowed, c.denied, c.throttled, c.failed, c.would_refuse] {
            count_cell(page, n);
        }
        match row.pace {
            Some(p) => {
                let _ = write!(
                    page,
                    "<td class=\"num\">{}</td><td class=\"num\">{} / {}</td>",
                    delay(p.delay),
                    p.in_flight,
                    p.waiting
                );
            }
            None => {
                page.push_str("<td class=\"num muted\">idle</td><td class=\"num muted\">0 / 0</td>")
            }
        }
        match a {
            Some(a) => {
                let class = if a.last_status < 400 { "ok" } else { "bad" };
                let _ = write!(
                    page,
                    "<td class=\"nowrap\"><span class=\"{class}\">{} {}</span> <span class=\"muted\">{} ago</span></td>",
                    a.last_status,
                    a.last_outcome.word(),
                    since(a.last_seen),
                );
            }
            None => page.push_str("<td class=\"muted\">–</td>"),
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody></table></div>\n");
}

fn count_cell(page: &mut String, n: u64) {
    if n == 0 {
        page.push_str("<td class=\"num zero\">0</td>");
    } else {
        let _ = write!(page, "<td class=\"num\">{n}</td>");
    }
}

/// The state of one origin's robots.txt: kind, age, stale flag.
fn robots_cell(page: &mut String, origin: &Origin, entry: &RobotsEntry, now: Instant) {
    let (class, label, detail) = match &entry.rules {
        RobotsRules::Parsed(_) => ("ok", "parsed".to_string(), None),
        RobotsRules::AllowAll { status } => (
            "info",
            format!("allow-all ({})", status.as_u16()),
            Some("no robots.txt: everything allowed".to_string()),
        ),
        RobotsRules::DisallowAll { status } => (
            "bad",
            format!("disallow-all ({})", status.as_u16()),
            Some("robots.on_4xx = \"disallow\"".to_string()),
        ),
        RobotsRules::Unreachable { reason } => {
            ("warn", "unreachable".to_string(), Some(reason.clone()))
        }
        RobotsRules::Certificate { reason } => {
            ("bad", "certificate".to_string(), Some(reason.clone()))
        }
    };
    let fetched = now.saturating_duration_since(entry.fetched_at);
    let _ = write!(
        page,
        "<div class=\"origin\"><a class=\"mono\" href=\"{url}\" rel=\"noreferrer\">{scheme}:{port}</a> \
         <span class=\"badge {class}\">{label}</span> <span class=\"muted\">{} old",
        age(fetched),
        url = escape(&entry.robots_url),
        scheme = origin.scheme.as_str(),
        port = origin.port,
    );
    if !entry.is_fresh(now) {
        page.push_str(", expired");
    }
    if entry.truncated {
        page.push_str(", truncated");
    }
    if entry.failures > 0 {
        let _ = write!(page, ", {} failed fetches", entry.failures);
    }
    page.push_str("</span>");
    if let Some(reason) = &entry.stale {
        let _ = write!(
            page,
            " <span class=\"badge warn\" title=\"{r}\">stale</span> <span class=\"muted\">{r}</span>",
            r = escape(reason)
        );
    }
    if let Some(detail) = detail {
        let _ = write!(page, "<div class=\"muted\">{}</div>", escape(&detail));
    }
    page.push_str("</div>");
}

/// Hosts paused (a site's `Retry-After`) or slowed (errors) now: the site is
/// steering, and an operator should see it.
fn backoffs(page: &mut String, services: &Services) {
    let hosts = services.pacer.backoffs(MAX_HOST_ROWS);
    if hosts.is_empty() {
        return;
    }
    let _ = writeln!(
        page,
        "<h2>Hosts paused or slowed by the site <span class=\"muted\">({})</span></h2>",
        hosts.len()
    );
    page.push_str(
        "<div class=\"scroll\"><table id=\"backoffs\"><thead><tr><th>Host</th><th>Cause</th>\
         <th class=\"num\">Paused for</th><th class=\"num\">Extra delay</th></tr></thead><tbody>\n",
    );
    for (host, view) in hosts {
        let _ = writeln!(
            page,
            "<tr><td class=\"mono\">{}</td><td><span class=\"warn\">{}</span></td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&host),
            view.cause.map_or("–", |c| c.word()),
            view.paused_for.map_or_else(|| "–".to_owned(), age),
            if view.extra.is_zero() {
                "–".to_owned()
            } else {
                format!("{:.1} s", view.extra.as_secs_f64())
            },
        );
    }
    page.push_str("</tbody></table></div>\n");
}

fn denials(page: &mut String, denials: &[Denial], wall: SystemTime) {
    let _ = writeln!(
        page,
        "<h2>Recent refusals <span class=\"muted\">(and would-refuse; last {})</span></h2>",
        crate::metrics::DENIAL_CAPACITY
    );
    if denials.is_empty() {
        page.push_str("<p class=\"empty\">None yet.</p>\n");
        return;
    }
    page.push_str(
        "<div class=\"scroll\"><table id=\"denials\"><thead><tr><th>When</th><th>Client</th><th>Request</th>\
         <th>Profile</th><th>Agent</th><th class=\"num\">Status</th><th>Reason</th><th>Rule</th></tr></thead><tbody>\n",
    );
    for d in denials {
        let ago = wall.duration_since(d.at).unwrap_or(Duration::ZERO);
        let class = if d.waived {
            "info"
        } else if d.status == 429 || d.status == 503 {
            "warn"
        } else {
            "bad"
        };
        let reason = if d.waived {
            format!("would refuse: {}", d.reason.word())
        } else {
            d.reason.word().to_owned()
        };
        let _ = write!(
            page,
            "<tr><td title=\"{clock} UTC\">{} ago</td><td class=\"mono\">{}</td>\
             <td class=\"mono url\"><span class=\"muted\">{}</span> {}</td><td class=\"mono\">{}</td>\
             <td class=\"mono\">{}</td>\
             <td class=\"num\"><span class=\"{class}\">{}</span></td><td>{reason}</td><td class=\"mono\">",
            age(ago),
            escape(&d.client.ip().to_string()),
            escape(&d.method),
            escape(&d.url),
            escape(&d.profile),
            if d.agent.is_empty() {
                "<span class=\"muted\">–</span>".to_string()
            } else {
                escape(&d.agent)
            },
            d.status,
            clock = clock(d.at),
        );
        match (&d.rule, d.line) {
            (Some(rule), Some(line)) => {
                let _ = write!(
                    page,
                    "{} <span class=\"muted\">line {line}</span>",
                    escape(rule)
                );
            }
            (Some(rule), None) => page.push_str(&escape(rule)),
            (None, Some(line)) => {
                let _ = write!(page, "<span class=\"muted\">line {line}</span>");
            }
            (None, None) => page.push_str("<span class=\"muted\">–</span>"),
        }
        page.push_str("</td></tr>\n");
    }
    page.push_str("</tbody></table></div>\n");
}

/// `s` safe in HTML text and in double- or single-quoted attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A duration for people, to the largest unit: `4 s`, `12 min`, `3 h`, `2 d`.
fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", s / 60),
        3600..=86_399 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

/// The time since a wall-clock instant.
fn since(t: SystemTime) -> String {
    age(SystemTime::now()
        .duration_since(t)
        .unwrap_or(Duration::ZERO))
}

/// A pacing delay: milliseconds below a second, else seconds.
fn delay(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// `HH:MM:SS` (UTC) of a wall-clock instant.
fn clock(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralises_markup_and_attribute_quotes() {
        assert_eq!(
            escape(r#"/<script>alert("x")</script>?a=1&b='2'"#),
            "/&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;?a=1&amp;b=&#39;2&#39;"
        );
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(age(Duration::from_millis(300)), "0 s");
        assert_eq!(age(Duration::from_secs(59)), "59 s");
        assert_eq!(age(Duration::from_secs(125)), "2 min");
        assert_eq!(age(Duration::from_secs(7200)), "2 h");
        assert_eq!(age(Duration::from_secs(3 * 86_400)), "3 d");
        assert_eq!(delay(Duration::from_millis(250)), "250 ms");
        assert_eq!(delay(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(
            clock(UNIX_EPOCH + Duration::from_secs(86_400 + 3723)),
            "01:02:03"
        );
    }
}
