//! One table-driven test per behaviour of the robots.txt engine (parse and match): the
//! rules of RFC 9309, the tolerances of Google's reference parser (google/robotstxt) that
//! it reproduces, and its own additions. Names say the rule: `rfc_` for RFC 9309,
//! `google_` for the reference's own tolerances, `ext_` for our deliberate additions and
//! deviations.

use robots_guard::robots::{RobotsTxt, RuleKind, Scope};

/// (robots.txt, agent, url, allowed?)
type Case<'a> = (&'a [u8], &'a str, &'a str, bool);

fn run(cases: &[Case<'_>]) {
    for (i, (body, agent, url, want)) in cases.iter().enumerate() {
        let robots = RobotsTxt::parse(body);
        let got = robots.check(agent, url);
        assert_eq!(
            got.allowed,
            *want,
            "case {i}: agent {agent:?} url {url:?}\n--- robots.txt ---\n{}\n--- verdict: {got:?}",
            String::from_utf8_lossy(body)
        );
        // The agent-bound path must agree with the one-shot path.
        assert_eq!(robots.for_agent(agent).check(url), got, "case {i}");
    }
}

fn line_of(body: &[u8], agent: &str, url: &str) -> Option<u32> {
    RobotsTxt::parse(body)
        .check(agent, url)
        .rule
        .map(|r| r.line)
}

#[test]
fn google_degenerate_inputs() {
    let foo = b"user-agent: FooBot\ndisallow: /\n";
    run(&[
        (b"", "FooBot", "", true),
        (foo, "", "", true),
        (foo, "FooBot", "", false),
        (b"", "", "", true),
    ]);
}

#[test]
fn google_url_to_path_params_query() {
    let robots = b"user-agent: FooBot\ndisallow: /a/b\nallow: /?\ndisallow: /x;p\n";
    run(&[
        (robots, "FooBot", "http://foo.bar/a/b", false),
        (robots, "FooBot", "http://foo.bar/a/b#frag", false),
        (robots, "FooBot", "http://foo.bar/a#/b", true),
        (robots, "FooBot", "foo.bar/a/b?q=1", false),
        (robots, "FooBot", "//foo.bar/a/b", false),
        (robots, "FooBot", "http://foo.bar/x;p=1", false),
        (robots, "FooBot", "/a/b", false),
        (robots, "FooBot", "http://foo.bar?q", true),
    ]);
}

#[test]
fn google_urls_are_not_normalised() {
    let robots = "user-agent: FooBot\ndisallow: /foo/bar/ツ\ndisallow: /a%2fb\n".as_bytes();
    run(&[
        // The pattern is encoded; the URL must be too.
        (robots, "FooBot", "http://foo.bar/foo/bar/%E3%83%84", false),
        (robots, "FooBot", "http://foo.bar/foo/bar/ツ", true),
        // Lower-case escapes in a URL stay lower-case; patterns are upper-cased.
        (robots, "FooBot", "http://foo.bar/foo/bar/%e3%83%84", true),
        (robots, "FooBot", "http://foo.bar/a%2Fb", false),
        (robots, "FooBot", "http://foo.bar/a/b", true),
    ]);
}

#[test]
fn rfc_line_endings_lf_cr_crlf_mixed() {
    for body in [
        &b"user-agent: FooBot\ndisallow: /\n"[..],
        b"user-agent: FooBot\r\ndisallow: /\r\n",
        b"user-agent: FooBot\rdisallow: /\r",
        b"user-agent: FooBot\r\ndisallow: /x\ndisallow: /\r",
        b"user-agent: FooBot\ndisallow: /",
    ] {
        run(&[(body, "FooBot", "/page", false)]);
    }
    // Line numbers: CRLF is one ending; a lone CR is one too.
    assert_eq!(
        line_of(b"user-agent: a\r\n\r\ndisallow: /", "a", "/"),
        Some(3)
    );
    assert_eq!(line_of(b"user-agent: a\r\rdisallow: /", "a", "/"), Some(3));
    assert_eq!(line_of(b"user-agent: a\n\rdisallow: /", "a", "/"), Some(3));
}

#[test]
fn google_utf8_bom_and_its_prefixes_skipped() {
    run(&[
        (
            b"\xEF\xBB\xBFuser-agent: FooBot\ndisallow: /\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"\xEF\xBBuser-agent: FooBot\ndisallow: /\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"\xEFuser-agent: FooBot\ndisallow: /\n",
            "FooBot",
            "/x",
            false,
        ),
        // A broken BOM makes the first line garbage: no group, all allowed.
        (
            b"\xEF\x11\xBFuser-agent: FooBot\ndisallow: /\n",
            "FooBot",
            "/x",
            true,
        ),
        // A BOM later in the file is garbage on that line.
        (
            b"user-agent: FooBot\n\xEF\xBB\xBFdisallow: /\n",
            "FooBot",
            "/x",
            true,
        ),
    ]);
}

#[test]
fn rfc_comments_anywhere() {
    run(&[
        (
            b"# c\nuser-agent: FooBot # c\ndisallow: /x#y\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /x#y\n",
            "FooBot",
            "/xz",
            false,
        ),
        (b"user-agent: FooBot\n# disallow: /\n", "FooBot", "/x", true),
        (
            b"user-agent: FooBot\ndisallow: # /x\n",
            "FooBot",
            "/x",
            true,
        ),
    ]);
}

#[test]
fn rfc_whitespace_trimmed_inside_kept() {
    run(&[
        (
            b" \tuser-agent \t: \tFooBot \t\n\x0B disallow\x0C:  /x  \n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /a b\n",
            "FooBot",
            "/a%20b",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /a b\n",
            "FooBot",
            "/a b",
            false,
        ),
        // A non-ASCII space is not whitespace: the pattern keeps it (escaped).
        (
            "user-agent: FooBot\ndisallow:\u{a0}/x\n".as_bytes(),
            "FooBot",
            "/x",
            true,
        ),
    ]);
}

#[test]
fn google_line_cut_at_16663_bytes() {
    const MAX: usize = 16_663;
    let prefix = "disallow: /";
    let mut body = b"user-agent: FooBot\n".to_vec();
    let long_path = format!("/{}", "x".repeat(MAX));
    body.extend_from_slice(prefix.as_bytes());
    body.extend_from_slice(&long_path.as_bytes()[1..]);
    body.extend_from_slice(b"\n");
    // The kept pattern is the first MAX - len("disallow: ") bytes of the value.
    let kept = MAX - "disallow: ".len();
    let robots = RobotsTxt::parse(&body);
    assert!(!robots.check("FooBot", &long_path[..kept]).allowed);
    assert!(robots.check("FooBot", &long_path[..kept - 1]).allowed);
    assert!(robots.diagnostics().any(|d| matches!(
        d.kind,
        robots_guard::robots::DiagnosticKind::LineTooLong { .. }
    )));
    // A long line does not swallow the next one.
    body.extend_from_slice(b"allow: /y\n");
    assert_eq!(line_of(&body, "FooBot", "/y"), Some(3));
}

#[test]
fn google_no_size_cap_in_the_engine() {
    let mut body = b"user-agent: FooBot\n".to_vec();
    while body.len() < 600 * 1024 {
        body.extend_from_slice(b"allow: /some/long/path/that/is/allowed\n");
    }
    body.extend_from_slice(b"disallow: /late\n");
    run(&[(&body, "FooBot", "/late", false)]);
}

#[test]
fn google_nul_byte_ends_the_line() {
    run(&[
        (
            b"user-agent: FooBot\ndisallow: /a\0/b\n",
            "FooBot",
            "/a",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /a\0/b\n",
            "FooBot",
            "/",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow\0: /a\n",
            "FooBot",
            "/a",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /a\0\ndisallow: /b\n",
            "FooBot",
            "/b",
            false,
        ),
    ]);
}

#[test]
fn rfc_key_value_split_at_first_colon() {
    run(&[
        (
            b"user-agent: FooBot\ndisallow: /a:b\n",
            "FooBot",
            "/a:b",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /a:b\n",
            "FooBot",
            "/a",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow : /a\n",
            "FooBot",
            "/a",
            false,
        ),
        (b"user-agent: FooBot\n: /a\n", "FooBot", "/a", true),
    ]);
}

#[test]
fn google_missing_colon_only_with_two_tokens() {
    run(&[
        (b"user-agent FooBot\ndisallow /\n", "FooBot", "/x", false),
        (
            b"user-agent: FooBot\ndisallow /x /y\n",
            "FooBot",
            "/x",
            true,
        ),
        (b"user-agent: FooBot\ndisallow\t/x\n", "FooBot", "/x", false),
        (
            b"foo bar baz\nuser-agent: FooBot\ndisallow: /\n",
            "FooBot",
            "/x",
            false,
        ),
    ]);
}

#[test]
fn rfc_keys_case_insensitive() {
    run(&[
        (
            b"USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
            "FooBot",
            "/x/y",
            true,
        ),
        (
            b"uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
            "FooBot",
            "/y",
            false,
        ),
    ]);
}

#[test]
fn google_keys_match_by_prefix() {
    run(&[
        (
            b"user-agent: FooBot\nDisallowed: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"User-agents: FooBot\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /\nAllow-all: /x\n",
            "FooBot",
            "/x",
            true,
        ),
        (
            b"user-agent: FooBot\nSitemaps: http://x/s.xml\ndisallow: /\n",
            "FooBot",
            "/x",
            false,
        ),
    ]);
    let robots = RobotsTxt::parse(b"Sitemaps: http://x/s.xml\n");
    assert_eq!(
        robots.sitemaps().collect::<Vec<_>>(),
        vec!["http://x/s.xml"]
    );
}

#[test]
fn google_accepted_typos() {
    for (ua_key, rule_key) in [
        ("useragent", "disallow"),
        ("user agent", "disallow"),
        ("user-agent", "dissallow"),
        ("user-agent", "dissalow"),
        ("user-agent", "disalow"),
        ("user-agent", "diasllow"),
        ("user-agent", "disallaw"),
    ] {
        let body = format!("{ua_key}: FooBot\n{rule_key}: /x\n");
        run(&[(body.as_bytes(), "FooBot", "/x", false)]);
    }
    // No typos for allow.
    run(&[(
        b"user-agent: FooBot\ndisallow: /\nalow: /x\n",
        "FooBot",
        "/x",
        false,
    )]);
    let robots = RobotsTxt::parse(b"site-map: http://x/s.xml\n");
    assert_eq!(robots.sitemaps().count(), 1);
}

#[test]
fn google_other_records_do_not_end_a_group() {
    run(&[
        (
            b"user-agent: FooBot\nsitemap: http://x/s\nuser-agent: BarBot\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: FooBot\ncrawl-delay: 5\nuser-agent: BarBot\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: FooBot\nhost: x\nuser-agent: BarBot\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: FooBot\n\n\nuser-agent: BarBot\n\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
    ]);
}

#[test]
fn rfc_group_ends_at_user_agent_after_rule() {
    let body = b"user-agent: FooBot\ndisallow: /a\nuser-agent: BarBot\ndisallow: /b\n";
    run(&[
        (body, "FooBot", "/a", false),
        (body, "FooBot", "/b", true),
        (body, "BarBot", "/a", true),
        (body, "BarBot", "/b", false),
    ]);
}

#[test]
fn rfc_rules_before_any_user_agent_ignored() {
    run(&[
        (
            b"disallow: /\nuser-agent: FooBot\ndisallow: /x\n",
            "FooBot",
            "/y",
            true,
        ),
        (b"disallow: /\n", "FooBot", "/y", true),
        (
            b"allow: /\nuser-agent: *\ndisallow: /\n",
            "FooBot",
            "/y",
            false,
        ),
    ]);
}

#[test]
fn rfc_groups_for_one_agent_merge() {
    let body = b"user-agent: FooBot\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nuser-agent: FooBot\ndisallow: /\n";
    run(&[
        (body, "FooBot", "/x/a", true),
        (body, "FooBot", "/y", false),
    ]);
    let globals = b"user-agent: *\nallow: /x/\nuser-agent: BarBot\ndisallow: /x\nuser-agent: *\ndisallow: /\n";
    run(&[
        (globals, "FooBot", "/x/a", true),
        (globals, "FooBot", "/y", false),
    ]);
}

#[test]
fn rfc_user_agent_value_case_insensitive() {
    for ua in ["FooBot", "foobot", "FOOBOT", "fOoBoT"] {
        let body = format!("user-agent: {ua}\ndisallow: /\n");
        run(&[
            (body.as_bytes(), "FooBot", "/x", false),
            (body.as_bytes(), "FOOBOT", "/x", false),
        ]);
    }
}

#[test]
fn google_user_agent_value_cut_to_product_token() {
    for value in [
        "FooBot/1.0",
        "FooBot 2",
        "FooBot;x",
        "FooBot2",
        "FooBot (a bot)",
    ] {
        let body = format!("user-agent: {value}\ndisallow: /\n");
        run(&[(body.as_bytes(), "FooBot", "/x", false)]);
    }
    run(&[
        (b"user-agent: Foo Bar\ndisallow: /\n", "Foo", "/x", false),
        (b"user-agent: Foo Bar\ndisallow: /\n", "Bar", "/x", true),
    ]);
}

#[test]
fn google_queried_agent_compared_whole() {
    run(&[
        (b"user-agent: Foo Bar\ndisallow: /\n", "Foo Bar", "/x", true),
        (b"user-agent: FooBot2\ndisallow: /\n", "FooBot2", "/x", true),
        (
            b"user-agent: FooBot\ndisallow: /\n",
            "FooBot/1.0",
            "/x",
            true,
        ),
    ]);
}

#[test]
fn google_global_group_star_with_trailing_text() {
    run(&[
        (b"user-agent: *\ndisallow: /\n", "FooBot", "/x", false),
        (b"user-agent: * foo\ndisallow: /\n", "FooBot", "/x", false),
        (b"user-agent: *\tfoo\ndisallow: /\n", "FooBot", "/x", false),
        (b"user-agent: *Bot\ndisallow: /\n", "FooBot", "/x", true),
        (b"user-agent: */1.0\ndisallow: /\n", "FooBot", "/x", true),
    ]);
}

#[test]
fn rfc_specific_group_beats_global() {
    let cases: &[Case<'_>] = &[
        // Specific group with rules that do not match: global ignored.
        (
            b"user-agent: *\ndisallow: /\nuser-agent: FooBot\ndisallow: /private\n",
            "FooBot",
            "/x",
            true,
        ),
        // Specific group with no rules at all (at EOF).
        (
            b"user-agent: *\ndisallow: /\nuser-agent: FooBot\n",
            "FooBot",
            "/x",
            true,
        ),
        // Specific group with only an empty disallow.
        (
            b"user-agent: FooBot\ndisallow:\nuser-agent: *\ndisallow: /\n",
            "FooBot",
            "/x",
            true,
        ),
        // Specific group with only an empty allow.
        (
            b"user-agent: FooBot\nallow:\nuser-agent: *\ndisallow: /\n",
            "FooBot",
            "/x",
            true,
        ),
        // Other agents get the global group.
        (
            b"user-agent: *\ndisallow: /\nuser-agent: FooBot\ndisallow: /private\n",
            "BarBot",
            "/x",
            false,
        ),
    ];
    run(cases);
    let robots = RobotsTxt::parse(cases[0].0);
    assert_eq!(robots.check("FooBot", "/x").scope, Scope::Specific);
    assert_eq!(robots.check("BarBot", "/x").scope, Scope::Global);
}

#[test]
fn rfc_fallback_to_global_then_allow_all() {
    run(&[
        (
            b"user-agent: BarBot\ndisallow: /\nuser-agent: *\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (
            b"user-agent: BarBot\ndisallow: /\nuser-agent: *\ndisallow: /x\n",
            "FooBot",
            "/y",
            true,
        ),
        (b"user-agent: BarBot\ndisallow: /\n", "FooBot", "/x", true),
    ]);
    let robots = RobotsTxt::parse(b"user-agent: BarBot\ndisallow: /\n");
    assert_eq!(robots.check("FooBot", "/x").scope, Scope::NoGroup);
}

#[test]
fn rfc_path_match_case_sensitive() {
    run(&[
        (
            b"user-agent: FooBot\ndisallow: /x/\n",
            "FooBot",
            "/x/page",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /x/\n",
            "FooBot",
            "/X/page",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /X/\n",
            "FooBot",
            "/x/page",
            true,
        ),
    ]);
}

#[test]
fn rfc_prefix_match_from_the_start() {
    run(&[
        (
            b"user-agent: FooBot\ndisallow: /fish\n",
            "FooBot",
            "/fish.html",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /fish\n",
            "FooBot",
            "/fishheads/yummy.html",
            false,
        ),
        (
            b"user-agent: FooBot\ndisallow: /fish\n",
            "FooBot",
            "/catfish",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /fish/\n",
            "FooBot",
            "/fish",
            true,
        ),
        // A pattern that starts with neither "/" nor "*" never matches.
        (
            b"user-agent: FooBot\ndisallow: fish\n",
            "FooBot",
            "/fish",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: *fish\n",
            "FooBot",
            "/catfish",
            false,
        ),
    ]);
}

#[test]
fn rfc_longest_match_wins() {
    run(&[
        (
            b"user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
            "FooBot",
            "/x/page.html",
            true,
        ),
        (
            b"user-agent: FooBot\nallow: /x/\ndisallow: /x/page.html\n",
            "FooBot",
            "/x/page.html",
            false,
        ),
        (
            b"user-agent: FooBot\nallow: /x/\ndisallow: /x/page.html\n",
            "FooBot",
            "/x/other",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /\nallow: /*.css\n",
            "FooBot",
            "/a.css",
            true,
        ),
        // Length counts the escaped form and the wildcards: "/a%3C" (5) beats "/a<" ... both escape-equal here.
        (
            b"user-agent: FooBot\nallow: /page\ndisallow: /*page\n",
            "FooBot",
            "/page",
            false,
        ),
        (
            b"user-agent: FooBot\nallow: /page$\ndisallow: /page\n",
            "FooBot",
            "/page",
            true,
        ),
    ]);
    // Non-ASCII patterns count with their percent-encoded length (3 bytes per byte).
    let body = "user-agent: FooBot\nallow: /é\ndisallow: /%C3%A9x\n".as_bytes();
    // allow "/%C3%A9" is 7 long, disallow "/%C3%A9x" is 8 long.
    run(&[
        (body, "FooBot", "/%C3%A9x", false),
        (body, "FooBot", "/%C3%A9", true),
    ]);
}

#[test]
fn rfc_ties_go_to_allow() {
    run(&[
        (
            b"user-agent: FooBot\nallow: /page\ndisallow: /page\n",
            "FooBot",
            "/page",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /page\nallow: /page\n",
            "FooBot",
            "/page",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /*a\nallow: /b*\n",
            "FooBot",
            "/ba",
            true,
        ),
    ]);
    // On a tie within one kind, the first line keeps the match.
    assert_eq!(
        line_of(
            b"user-agent: FooBot\ndisallow: /ab\ndisallow: /a*\n",
            "FooBot",
            "/abc"
        ),
        Some(2)
    );
}

#[test]
fn rfc_empty_pattern_has_no_effect() {
    run(&[
        (b"user-agent: FooBot\ndisallow:\n", "FooBot", "/x", true),
        (
            b"user-agent: FooBot\nallow:\ndisallow: /x\n",
            "FooBot",
            "/x",
            false,
        ),
        (b"user-agent: *\ndisallow:\n", "FooBot", "/x", true),
    ]);
    let robots = RobotsTxt::parse(b"user-agent: FooBot\ndisallow:\n");
    assert_eq!(robots.check("FooBot", "/x").rule, None);
}

#[test]
fn rfc_star_wildcard() {
    let body =
        b"user-agent: FooBot\ndisallow: /fish*.php\ndisallow: /*/private/\ndisallow: /a**b\n";
    run(&[
        (body, "FooBot", "/fish.php", false),
        (body, "FooBot", "/fishheads/catfish.php?parameters", false),
        (body, "FooBot", "/Fish.PHP", true),
        (body, "FooBot", "/users/private/x", false),
        (body, "FooBot", "/users/public/x", true),
        (body, "FooBot", "/ab", false),
        (body, "FooBot", "/a?x=b", false),
    ]);
    // A trailing "*" is redundant but counts for length.
    run(&[(
        b"user-agent: FooBot\nallow: /x*\ndisallow: /x\n",
        "FooBot",
        "/x",
        true,
    )]);
}

#[test]
fn rfc_dollar_anchor_only_at_end() {
    let body = b"user-agent: FooBot\ndisallow: /*.php$\ndisallow: /a$b\ndisallow: $\n";
    run(&[
        (body, "FooBot", "/filename.php", false),
        (body, "FooBot", "/folder/filename.php", false),
        (body, "FooBot", "/filename.php?parameters", true),
        (body, "FooBot", "/filename.php/", true),
        (body, "FooBot", "/filename.php5", true),
        (body, "FooBot", "/a$b", false),
        (body, "FooBot", "/ab", true),
        // "$" alone never matches: paths start with "/".
        (body, "FooBot", "/", true),
    ]);
}

#[test]
fn rfc_percent_encoding_normalised_in_patterns() {
    let body = "user-agent: FooBot\ndisallow: /foo/bar?baz=http://foo.bar\ndisallow: /%e3%83%84\ndisallow: /ツツ\ndisallow: /%2F\ndisallow: /%x\n".as_bytes();
    run(&[
        (body, "FooBot", "/foo/bar?baz=http://foo.bar", false),
        (body, "FooBot", "/%E3%83%84", false),
        (body, "FooBot", "/%E3%83%84%E3%83%84", false),
        // Escaped ASCII is never decoded.
        (body, "FooBot", "/%2F", false),
        (body, "FooBot", "//", true),
        // "%" without two hex digits is left alone.
        (body, "FooBot", "/%x", false),
    ]);
    let robots = RobotsTxt::parse(body);
    let rule = robots
        .check("FooBot", "/%E3%83%84")
        .rule
        .expect("a rule decides");
    assert_eq!(rule.pattern, "/%E3%83%84");
    // User-agent and sitemap values are not escaped.
    let robots = RobotsTxt::parse("sitemap: http://x/ツ.xml\n".as_bytes());
    assert_eq!(robots.sitemaps().next(), Some("http://x/ツ.xml"));
}

#[test]
fn rfc_query_is_part_of_the_path() {
    let body =
        b"user-agent: FooBot\ndisallow: /*?sort=\ndisallow: /search?\nallow: /search?q=ok&\n";
    run(&[
        (body, "FooBot", "/list?sort=asc", false),
        (body, "FooBot", "/list?page=2", true),
        (body, "FooBot", "/search?q=x", false),
        (body, "FooBot", "/search?q=ok&page=2", true),
        (body, "FooBot", "/search", true),
    ]);
}

#[test]
fn google_index_html_allows_its_directory() {
    let body = b"user-agent: FooBot\ndisallow: /\nallow: /allowed-slash/index.html\n";
    run(&[
        (body, "FooBot", "/allowed-slash/", true),
        (body, "FooBot", "/allowed-slash/index.html", true),
        // The directory exactly, not below it.
        (body, "FooBot", "/allowed-slash/index.htm", false),
        (body, "FooBot", "/allowed-slash/other", false),
        (body, "FooBot", "/anyother-url", false),
    ]);
    run(&[
        (
            b"user-agent: FooBot\ndisallow: /\nallow: /d/index.htm\n",
            "FooBot",
            "/d/",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /\nallow: /d/index.htmlx\n",
            "FooBot",
            "/d/",
            true,
        ),
        // Disallow gets no such companion.
        (
            b"user-agent: FooBot\ndisallow: /d/index.html\n",
            "FooBot",
            "/d/",
            true,
        ),
        (
            b"user-agent: FooBot\ndisallow: /\nallow: /d/index.php\n",
            "FooBot",
            "/d/",
            false,
        ),
    ]);
    let robots = RobotsTxt::parse(body);
    let rule = robots
        .check("FooBot", "/allowed-slash/")
        .rule
        .expect("allow decides");
    assert!(rule.via_index_html);
    assert_eq!(
        (rule.kind, rule.pattern, rule.line),
        (RuleKind::Allow, "/allowed-slash/$", 3)
    );
}

#[test]
fn ext_robots_txt_itself_always_allowed() {
    let body = b"user-agent: *\ndisallow: /\n";
    run(&[
        (body, "FooBot", "/robots.txt", true),
        (body, "FooBot", "http://example.com/robots.txt", true),
        (body, "FooBot", "/robots.txt?x=1", false),
        (body, "FooBot", "/robots.txt.bak", false),
    ]);
    assert_eq!(
        RobotsTxt::parse(body).check("FooBot", "/robots.txt").scope,
        Scope::RobotsTxt
    );
}

#[test]
fn ext_verdict_names_the_deciding_rule() {
    let body = b"user-agent: *\ndisallow: /x\n\nuser-agent: FooBot\nallow: /x/ok\ndisallow: /x\n";
    let robots = RobotsTxt::parse(body);
    let v = robots.check("FooBot", "/x/no");
    let rule = v.rule.expect("disallow decides");
    assert_eq!(
        (rule.kind, rule.pattern, rule.line, rule.group_line),
        (RuleKind::Disallow, "/x", 6, 4)
    );
    let rule = robots.check("FooBot", "/x/ok").rule.expect("allow decides");
    assert_eq!((rule.kind, rule.line), (RuleKind::Allow, 5));
    assert_eq!(robots.check("FooBot", "/y").rule, None);
}

#[test]
fn ext_crawl_delay_request_rate_and_sitemaps() {
    let body =
        b"sitemap: https://e.com/a.xml\nuser-agent: *\ncrawl-delay: 2.5\nuser-agent: FooBot\n\
        request-rate: 1/10s\ndisallow: /x\nuser-agent: BarBot\ncrawl-delay: 1\nrequest-rate: 3/3\n\
        user-agent: BarBot\ncrawl-delay: 4\nSitemap: https://e.com/b.xml\n";
    let robots = RobotsTxt::parse(body);
    let global = robots.for_agent("Other");
    // The first two user-agent lines form one group (no rule between them),
    // so crawl-delay 2.5 and request-rate 1/10s belong to both * and FooBot.
    assert_eq!(
        global.crawl_delay(),
        Some(std::time::Duration::from_millis(2500))
    );
    let foo = robots.for_agent("foobot");
    assert_eq!(
        foo.crawl_delay(),
        Some(std::time::Duration::from_millis(2500))
    );
    assert_eq!(foo.min_interval(), Some(std::time::Duration::from_secs(10)));
    let bar = robots.for_agent("BarBot");
    assert_eq!(bar.crawl_delay(), Some(std::time::Duration::from_secs(4)));
    assert_eq!(
        bar.request_rate().map(|r| r.interval()),
        Some(std::time::Duration::from_secs(1))
    );
    assert_eq!(
        robots.sitemaps().collect::<Vec<_>>(),
        vec!["https://e.com/a.xml", "https://e.com/b.xml"]
    );
    assert_eq!(
        robots.for_agent("None").crawl_delay(),
        Some(std::time::Duration::from_millis(2500))
    );
    let none = RobotsTxt::parse(b"user-agent: BarBot\ncrawl-delay: 9\n");
    assert_eq!(none.for_agent("FooBot").crawl_delay(), None);
}

#[test]
fn ext_diagnostics_explain_tolerated_lines() {
    let body =
        b"disallow: /early\nuseragent: FooBot\nDisallowed: /a\ndisallow /b\nhost: example.com\n\
        crawl-delay: soon\nthis line has no colon\n";
    let robots = RobotsTxt::parse(body);
    let notes: Vec<String> = robots.diagnostics().map(|d| d.to_string()).collect();
    let expect = [
        "line 1: rule before any user-agent line; ignored",
        "line 2: `useragent` accepted as a misspelling of `user-agent`",
        "line 3: `Disallowed` read as `disallow` (keys match by prefix)",
        "line 4: no colon after `disallow`; whitespace accepted instead",
        "line 5: unknown key `host` ignored",
        "line 6: invalid crawl-delay value `soon` ignored",
        "line 7: no `key: value` on this line; ignored",
    ];
    assert_eq!(notes, expect);
}

#[test]
fn ext_disallows_everything_for_tunnel_mode() {
    let all = RobotsTxt::parse(b"user-agent: *\ndisallow: /\n");
    assert!(all.for_agent("FooBot").disallows_everything());
    let some = RobotsTxt::parse(b"user-agent: *\ndisallow: /\nallow: /public\n");
    assert!(!some.for_agent("FooBot").disallows_everything());
    let other = RobotsTxt::parse(b"user-agent: BarBot\ndisallow: /\n");
    assert!(!other.for_agent("FooBot").disallows_everything());
    assert!(other.for_agent("BarBot").disallows_everything());
}
