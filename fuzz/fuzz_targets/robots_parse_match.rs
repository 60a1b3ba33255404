//! Fuzzes `RobotsTxt::parse` and both query paths, and cross-checks the fast
//! pattern matcher against the reference algorithm.
//!
//! Input layout, split at the byte 0xFF (never valid in UTF-8, so robots.txt
//! bodies can still hold NUL and other raw bytes):
//!
//! `agent byte | robots.txt | 0xFF | url | 0xFF | pattern | 0xFF | path`
//!
//! Missing parts default to `/`. The agent byte picks from `AGENTS`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_guard::robots::{
    path_params_query, pattern_matches_reference, refusing_members, Purpose, Purposes, RobotsTxt,
    RuleKind,
};

const AGENTS: [&str; 8] = [
    "Googlebot",
    "FooBot",
    "googlebot",
    "Googlebot-Image",
    "*",
    "",
    "bingbot",
    "a",
];
const SEP: u8 = 0xFF;

fuzz_target!(|data: &[u8]| {
    let Some((&agent_byte, rest)) = data.split_first() else {
        return;
    };
    let agent = AGENTS[usize::from(agent_byte) % AGENTS.len()];
    let mut parts = rest.splitn(4, |&b| b == SEP);
    let body = parts.next().unwrap_or_default();
    let url = String::from_utf8_lossy(parts.next().unwrap_or(b"/"));
    let pattern = parts.next();
    let path = parts.next();

    let robots = RobotsTxt::parse(body);
    let line_count = robots.line_count();
    for d in robots.diagnostics() {
        let shown = d.to_string();
        assert!(!shown.is_empty());
        assert!(
            d.line >= 1 && d.line <= line_count,
            "{shown}: line out of range"
        );
    }
    for sitemap in robots.sitemaps() {
        std::hint::black_box(sitemap);
    }
    let _ = robots.named_agents().count();

    let verdict = robots.check(agent, &url);
    let selected = robots.for_agent(agent);
    let via_selected = selected.check(&url);
    assert_eq!(verdict, via_selected, "check and for_agent().check differ");
    assert_eq!(verdict.scope, selected.scope());
    match verdict.rule {
        Some(rule) => {
            assert!(
                rule.line >= 1 && rule.line <= line_count,
                "rule line {}",
                rule.line
            );
            assert!(rule.group_line <= rule.line, "group after its rule");
            match rule.kind {
                RuleKind::Disallow => assert!(!verdict.allowed, "disallow rule but allowed"),
                RuleKind::Allow => assert!(verdict.allowed, "allow rule but disallowed"),
            }
        }
        None => assert!(verdict.allowed, "disallowed without a rule"),
    }
    let _ = (selected.crawl_delay(), selected.min_interval());
    let _ = selected.disallows_everything();

    // Usage preferences: a refusal names a purpose that was asked and a
    // statement on a line of the file; no purpose asked, nothing refused.
    for preference in selected.preferences() {
        assert!(preference.line >= 1 && preference.line <= line_count);
    }
    assert!(selected.usage(&url, Purposes::NONE).allowed());
    for asked in [
        Purposes::ALL,
        Purposes::NONE.with(Purpose::AiTrain),
        Purposes::NONE.with(Purpose::Search),
    ] {
        if let Some(refusal) = selected.usage(&url, asked).refusal {
            assert!(asked.contains(refusal.purpose), "refused what was not asked");
            let line = refusal.statement.line;
            assert!(line >= 1 && line <= line_count, "statement line {line}");
        }
        // The URL part read as a `Content-Usage` response header: the
        // members named are the header's own text.
        for member in refusing_members(&url, asked) {
            assert!(url.contains(member), "{member:?} not in {url:?}");
        }
    }

    if let (Some(pattern), Some(path)) = (pattern, path) {
        cross_check(pattern, path);
    }
});

/// The fast matcher, reached through a one-rule file, against the reference
/// algorithm, for patterns the parser keeps byte for byte.
fn cross_check(pattern: &[u8], path: &[u8]) {
    // Short enough that `Disallow: <pattern>` is not cut at MAX_LINE_LEN.
    let pattern_ok = pattern.first() == Some(&b'/')
        && pattern.len() <= 4096
        && pattern
            .iter()
            .all(|&b| b.is_ascii_graphic() && b != b'#' && b != b'%');
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    if !pattern_ok || !path.starts_with('/') || path.contains('#') {
        return;
    }
    // The engine matches what `path_params_query` extracts: a path starting
    // with `//` is a network-path reference whose path may be just `/`.
    let matched = path_params_query(path.as_bytes());
    if &*matched == b"/robots.txt" {
        return;
    }
    let mut body = b"User-agent: *\nDisallow: ".to_vec();
    body.extend_from_slice(pattern);
    body.push(b'\n');
    let robots = RobotsTxt::parse(&body);
    let disallowed = !robots.check("FooBot", path).allowed;
    let reference = pattern_matches_reference(&matched, pattern);
    assert_eq!(
        disallowed,
        reference,
        "pattern {:?} path {:?}: engine disallows={disallowed}, reference matches={reference}",
        String::from_utf8_lossy(pattern),
        String::from_utf8_lossy(&matched)
    );
}
