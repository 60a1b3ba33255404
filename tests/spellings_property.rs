//! Property: for random robots.txt rules and paths, every equivalent spelling
//! of a disallowed path is disallowed by the proxy's judgment.
//!
//! A spelling is made from a canonical path by any mix of the rewrites a
//! server undoes: percent-encoding unreserved characters (upper or lower hex),
//! `.` and `x/..` segments (plain or `%2e`-encoded), doubled slashes, `%2F`
//! and `\` for `/`, and `;params` on segments. The proxy forwards the
//! spelling's RFC 3986 normal form, so what a server serves is that form as
//! the server reads it. Each common server's reading is modelled here on its
//! own (not with the proxy's code): whenever one of them reads the forwarded
//! form as a path the Google-exact engine disallows, the proxy's judgment
//! (default spellings) must disallow it too.

use proptest::prelude::*;
use robots_guard::robots::{judge, normalise, RobotsTxt, Spellings};

/// Path segments: letters, digits and the unreserved marks, no dot segments.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("private".to_owned()),
        Just("public".to_owned()),
        Just("a.secret".to_owned()),
        Just("x~y".to_owned()),
        "[a-c][a-c0-9_~.-]{0,3}".prop_filter("no dot segment", |s| s != "." && s != ".."),
    ]
}

fn canonical_path() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 1..5).prop_map(|segments| format!("/{}", segments.join("/")))
}

/// A rule: a prefix of some path, maybe with `*` and `$`.
fn rule() -> impl Strategy<Value = String> {
    (
        canonical_path(),
        0usize..8,
        prop::bool::ANY,
        prop::bool::ANY,
        prop::bool::ANY,
    )
        .prop_map(|(path, cut, star, dollar, allow)| {
            let keep = path.len().saturating_sub(cut).max(1);
            let mut pattern = path[..keep].to_owned();
            if star && pattern.len() > 2 {
                pattern.insert(pattern.len() / 2 + 1, '*');
            }
            if dollar {
                pattern.push('$');
            }
            format!("{}: {pattern}", if allow { "Allow" } else { "Disallow" })
        })
}

/// A path and a robots.txt with random rules plus one that disallows a
/// prefix of the path (so most cases test a disallowed path; the others
/// rules may still allow it, and such cases are skipped).
fn path_and_robots() -> impl Strategy<Value = (String, String)> {
    (
        canonical_path(),
        prop::collection::vec(rule(), 0..5),
        0usize..6,
        prop::bool::ANY,
    )
        .prop_map(|(path, mut rules, cut, exact)| {
            let keep = path.len().saturating_sub(cut).max(1);
            let dollar = if exact && cut == 0 { "$" } else { "" };
            rules.push(format!("Disallow: {}{dollar}", &path[..keep]));
            (path, format!("User-agent: *\n{}\n", rules.join("\n")))
        })
}

/// One rewrite of the spelling, chosen by `kind`, at a position chosen by `at`.
fn respell(path: &str, kind: u8, at: usize) -> String {
    let bytes: Vec<char> = path.chars().collect();
    let slashes: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] == '/').collect();
    let slash = slashes[at % slashes.len()];
    let inner: Vec<usize> = slashes.iter().copied().filter(|&i| i > 0).collect();
    // Unreserved characters that are not the hex digits of an escape.
    let in_escape = |i: usize| (1..=2).any(|back| i >= back && bytes[i - back] == '%');
    let unreserved: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_alphanumeric() || "-._~".contains(bytes[i]))
        .filter(|&i| !in_escape(i))
        .collect();
    let (head, tail) = path.split_at(slash + 1);
    match kind % 9 {
        0 | 1 if unreserved.is_empty() => path.to_owned(),
        // A percent-encoded unreserved character, upper or lower hex.
        0 | 1 => {
            let i = unreserved[at % unreserved.len()];
            let escape = format!("%{:02X}", bytes[i] as u32);
            let escape = if kind % 9 == 1 {
                escape.to_lowercase()
            } else {
                escape
            };
            format!("{}{escape}{}", &path[..i], &path[i + 1..])
        }
        // `.` segments, plain or encoded.
        2 => format!("{head}./{tail}"),
        3 => format!("{head}%2e/{tail}"),
        // `x/..` detours, plain or encoded.
        4 => format!("{head}zz/../{tail}"),
        5 => format!("{head}zz/%2E%2e/{tail}"),
        // A doubled slash (merge-slashes).
        6 => format!("{head}/{tail}"),
        7 if inner.is_empty() => path.to_owned(),
        // `%2F` or `\` for an inner slash (decode-slash, backslash).
        7 => {
            let i = inner[at % inner.len()];
            let with = if at % 2 == 0 { "%2F" } else { "\\" };
            format!("{}{with}{}", &path[..i], &path[i + 1..])
        }
        // `;params` after a segment (strip-path-params).
        _ => {
            let end = path[slash + 1..]
                .find('/')
                .map_or(path.len(), |e| slash + 1 + e);
            format!("{};v=1{}", &path[..end], &path[end..])
        }
    }
}

/// RFC 3986 §5.2.4, written out again for the models.
fn without_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path[1..].split('/').collect();
    let mut out: Vec<&str> = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." | ".." => {
                if *segment == ".." {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            other => out.push(other),
        }
    }
    format!("/{}", out.join("/"))
}

fn merged(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// How common servers read a forwarded path (no query in these paths).
fn server_readings(forwarded: &str) -> [(&'static str, String); 4] {
    let nginx = without_dot_segments(&merged(&forwarded.replace("%2F", "/")));
    let apache = without_dot_segments(&merged(forwarded));
    let tomcat = without_dot_segments(
        &forwarded
            .split('/')
            .map(|s| s.split(';').next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("/"),
    );
    let iis = without_dot_segments(&merged(&forwarded.replace("%5C", "/").replace('\\', "/")));
    [
        ("nginx", nginx),
        ("apache", apache),
        ("tomcat", tomcat),
        ("iis", iis),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_spelling_of_a_disallowed_path_is_disallowed(
        (path, body) in path_and_robots(),
        rewrites in prop::collection::vec((any::<u8>(), any::<usize>()), 0..5),
    ) {
        let robots = RobotsTxt::parse(body.as_bytes());
        let rules = robots.for_agent("FooBot");
        prop_assume!(!rules.check_path(&path).allowed);
        let mut spelling = path.clone();
        for (kind, at) in rewrites {
            spelling = respell(&spelling, kind, at);
        }
        let normal = normalise(&spelling);
        let judged = judge(&rules, None, &normal, Spellings::DEFAULT);
        for (server, read) in server_readings(&normal) {
            if !rules.check_path(&read).allowed {
                prop_assert!(
                    !judged.verdict.allowed,
                    "{spelling} is forwarded as {normal}, which {server} serves as the \
                     disallowed {read}, but the proxy allows it\n{body}"
                );
            }
        }
    }

    #[test]
    fn the_normal_form_is_a_fixed_point(
        path in canonical_path(),
        rewrites in prop::collection::vec((0u8..6, any::<usize>()), 0..5),
    ) {
        // The RFC-only rewrites (escapes, dot segments) lead back to the
        // canonical path itself.
        let mut spelling = path.clone();
        for (kind, at) in rewrites {
            spelling = respell(&spelling, kind, at);
        }
        let normal = normalise(&spelling);
        prop_assert_eq!(&*normal, path.as_str(), "spelling {}", spelling);
        prop_assert_eq!(normalise(&normal), normal.clone());
    }
}
