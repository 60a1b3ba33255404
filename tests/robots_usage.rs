//! AI-use preferences in robots.txt through the engine's public API: `Content-Signal`
//! lists and `Content-Usage` lines (with and without a path) read into the groups the
//! agent selects, judged for purposes by `AgentRules::usage`, listed by
//! `AgentRules::preferences`, and noted in the diagnostics. The lines never change a
//! group or an allow/disallow verdict; the last test checks that on the real files of
//! `tests/testdata/robots/`.

use std::path::PathBuf;

use robots_guard::robots::{
    Preference, PreferenceKind, Purpose, Purposes, RobotsTxt, Scope, UsageVerdict,
};

/// A purpose list as the command line takes it.
fn purposes(list: &str) -> Purposes {
    list.parse().expect("known purposes")
}

fn usage<'a>(robots: &'a RobotsTxt, agent: &str, path: &str, asked: &str) -> UsageVerdict<'a> {
    robots.for_agent(agent).usage(path, purposes(asked))
}

/// What refused, as `purpose kind: text (line L, group G)`, or `allowed`.
fn judged(body: &str, agent: &str, path: &str, asked: &str) -> String {
    let robots = RobotsTxt::parse(body.as_bytes());
    match usage(&robots, agent, path, asked).refusal {
        None => "allowed".to_owned(),
        Some(refusal) => format!(
            "{} {} (line {}, group {})",
            refusal.purpose,
            refusal.statement,
            refusal.statement.line,
            refusal.statement.group_line
        ),
    }
}

/// Runs `(agent, path, purposes, expected)` cases against one file.
fn table(body: &str, cases: &[(&str, &str, &str, &str)]) {
    for (agent, path, asked, want) in cases {
        assert_eq!(
            judged(body, agent, path, asked),
            *want,
            "agent {agent} path {path} purposes {asked}\n--- robots.txt ---\n{body}"
        );
    }
}

fn diagnostics(body: &str) -> Vec<String> {
    RobotsTxt::parse(body.as_bytes())
        .diagnostics()
        .map(|d| d.to_string())
        .collect()
}

#[test]
fn ext_content_signal_list() {
    let body = "User-agent: *\nContent-Signal: search=yes, ai-input=no, ai-train=no\n";
    table(
        body,
        &[
            ("FooBot", "/", "search", "allowed"),
            (
                "FooBot",
                "/a",
                "ai-train",
                "ai-train content-signal: ai-train=no (line 2, group 1)",
            ),
            (
                "FooBot",
                "/a",
                "ai-input",
                "ai-input content-signal: ai-input=no (line 2, group 1)",
            ),
            // The first refused purpose in search, ai-input, ai-train order.
            (
                "FooBot",
                "/a",
                "ai-train,search,ai-input",
                "ai-input content-signal: ai-input=no (line 2, group 1)",
            ),
            // No purpose asked: never refused.
            ("FooBot", "/a", "", "allowed"),
        ],
    );
    // Keys in any case, `y`/`n`, quoted values and booleans; a signal with no
    // path applies everywhere.
    let body =
        "user-agent: *\nCONTENT-SIGNAL: Search=Y, AI-Train=\"No\"\ncontent-signal: ai-input=?0\n";
    table(
        body,
        &[
            ("FooBot", "/any/path?q=1", "search", "allowed"),
            (
                "FooBot",
                "/any/path?q=1",
                "ai-train",
                "ai-train content-signal: AI-Train=\"No\" (line 2, group 1)",
            ),
            (
                "FooBot",
                "/",
                "ai-input",
                "ai-input content-signal: ai-input=?0 (line 3, group 1)",
            ),
        ],
    );
}

#[test]
fn ext_content_usage_with_and_without_path() {
    let body = "User-agent: *\nAllow: /\nContent-Usage: train-ai=n, search=y\n";
    table(
        body,
        &[
            (
                "FooBot",
                "/x",
                "ai-train",
                "ai-train content-usage: train-ai=n, search=y (line 3, group 1)",
            ),
            ("FooBot", "/x", "search", "allowed"),
            // A purpose the line says nothing about is not refused.
            ("FooBot", "/x", "ai-input", "allowed"),
        ],
    );
    let body = "User-agent: *\nContent-Usage: /news/ train-ai=n\n";
    table(
        body,
        &[
            (
                "FooBot",
                "/news/today.html?page=2",
                "ai-train",
                "ai-train content-usage: /news/ train-ai=n (line 2, group 1)",
            ),
            ("FooBot", "/news", "ai-train", "allowed"),
            ("FooBot", "/blog/", "ai-train", "allowed"),
            // A fragment is no part of the path.
            (
                "FooBot",
                "/news/a#top",
                "ai-train",
                "ai-train content-usage: /news/ train-ai=n (line 2, group 1)",
            ),
        ],
    );
}

#[test]
fn ext_content_usage_longest_path_decides() {
    // The example of draft-ietf-aipref-attach.
    let body = "User-Agent: *\nAllow: /\nDisallow: /never/\nContent-Usage: train-ai=n\n\
                Content-Usage: /ai-ok/ train-ai=y\n\nUser-Agent: ExampleBot\nAllow: /\n\
                Content-Usage: train-ai=y\n";
    table(
        body,
        &[
            (
                "FooBot",
                "/test",
                "ai-train",
                "ai-train content-usage: train-ai=n (line 4, group 1)",
            ),
            ("FooBot", "/ai-ok/test", "ai-train", "allowed"),
            ("ExampleBot", "/test", "ai-train", "allowed"),
        ],
    );
    let robots = RobotsTxt::parse(body.as_bytes());
    // The crawl verdict is the rules' own.
    assert!(!robots.check("FooBot", "/never/test").allowed);
    assert!(robots.check("FooBot", "/test").allowed);

    // The longest matching line decides even when it says nothing about the
    // purpose; `*`, a final `$` and percent-encoding as for rules.
    let body = "User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: /news/ search=y\n\
                Content-Usage: /*.pdf$ train-ai=n\nContent-Usage: /docs/ train-ai=y\n\
                Content-Usage: /café/ ai-use=n\n";
    table(
        body,
        &[
            ("FooBot", "/news/a", "ai-train", "allowed"),
            (
                "FooBot",
                "/docs/a.pdf",
                "ai-train",
                "ai-train content-usage: /*.pdf$ train-ai=n (line 4, group 1)",
            ),
            ("FooBot", "/docs/a.pdf?x", "ai-train", "allowed"),
            ("FooBot", "/docs/a.html", "ai-train", "allowed"),
            (
                "FooBot",
                "/caf%C3%A9/menu",
                "ai-input",
                "ai-input content-usage: /café/ ai-use=n (line 6, group 1)",
            ),
            (
                "FooBot",
                "/other",
                "ai-train",
                "ai-train content-usage: train-ai=n (line 2, group 1)",
            ),
        ],
    );
}

#[test]
fn ext_most_restrictive_statement_wins() {
    // Equal paths: any refusal counts (draft-ietf-aipref-attach).
    let body = "User-agent: *\nContent-Usage: /a/ train-ai=y\nContent-Usage: /a/ train-ai=n\n";
    table(
        body,
        &[(
            "FooBot",
            "/a/b",
            "ai-train",
            "ai-train content-usage: /a/ train-ai=n (line 3, group 1)",
        )],
    );
    // Content-Signal and Content-Usage are both statements: a signal has no
    // path, so a refusing signal applies under any Content-Usage path.
    let body = "User-agent: *\nContent-Signal: ai-train=yes, search=no\n\
                Content-Usage: /a/ train-ai=n, search=y\n";
    table(
        body,
        &[
            (
                "FooBot",
                "/a/b",
                "ai-train",
                "ai-train content-usage: /a/ train-ai=n, search=y (line 3, group 1)",
            ),
            ("FooBot", "/b", "ai-train", "allowed"),
            (
                "FooBot",
                "/a/b",
                "search",
                "search content-signal: search=no (line 2, group 1)",
            ),
        ],
    );
    // Several refusals: the first in file order is named.
    let body = "User-agent: *\nContent-Usage: ai=n\nContent-Signal: ai-train=no\n";
    table(
        body,
        &[(
            "FooBot",
            "/",
            "ai-train",
            "ai-train content-usage: ai=n (line 2, group 1)",
        )],
    );
}

#[test]
fn ext_group_selection_as_for_rules() {
    // A group naming the agent replaces the `*` groups.
    let body = "User-agent: *\nDisallow: /private\nContent-Usage: train-ai=n\n\n\
                User-agent: FooBot\nAllow: /\n";
    table(
        body,
        &[
            ("FooBot", "/", "ai-train", "allowed"),
            (
                "BarBot",
                "/",
                "ai-train",
                "ai-train content-usage: train-ai=n (line 3, group 1)",
            ),
        ],
    );
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(
        usage(&robots, "foobot", "/", "ai-train").scope,
        Scope::Specific
    );
    assert_eq!(
        usage(&robots, "BarBot", "/", "ai-train").scope,
        Scope::Global
    );
    let none = RobotsTxt::parse(b"User-agent: FooBot\nContent-Usage: train-ai=n\n");
    let verdict = usage(&none, "BarBot", "/", "ai-train");
    assert!(verdict.allowed());
    assert_eq!(verdict.scope, Scope::NoGroup);
}

#[test]
fn ext_groups_naming_the_agent_are_merged() {
    let body = "User-agent: FooBot\nDisallow: /private\nContent-Usage: train-ai=n\n\n\
                User-agent: *\nDisallow: /tmp\nContent-Signal: search=no\n\n\
                User-agent: FooBot\nContent-Usage: /news/ train-ai=y\nContent-Signal: ai-input=no\n";
    table(
        body,
        &[
            // The longest path is taken over both FooBot groups.
            ("FooBot", "/news/a", "ai-train", "allowed"),
            (
                "FooBot",
                "/a",
                "ai-train",
                "ai-train content-usage: train-ai=n (line 3, group 1)",
            ),
            (
                "FooBot",
                "/a",
                "ai-input",
                "ai-input content-signal: ai-input=no (line 11, group 9)",
            ),
            // The `*` group does not apply to FooBot.
            ("FooBot", "/a", "search", "allowed"),
            (
                "BarBot",
                "/a",
                "search",
                "search content-signal: search=no (line 7, group 5)",
            ),
        ],
    );
    let robots = RobotsTxt::parse(body.as_bytes());
    let listed: Vec<(u32, u32, String)> = robots
        .for_agent("FooBot")
        .preferences()
        .map(|p| (p.line, p.group_line, p.to_string()))
        .collect();
    assert_eq!(
        listed,
        [
            (3, 1, "content-usage: train-ai=n".to_owned()),
            (10, 9, "content-usage: /news/ train-ai=y".to_owned()),
            (11, 9, "content-signal: ai-input=no".to_owned()),
        ]
    );
}

#[test]
fn ext_preferences_list_what_each_line_states() {
    let body = "User-agent: *\nContent-Signal: search=yes, ai-train=no, use=reference\n\
                Content-Usage: /%7enews/ train-ai=y, bots=n\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    let listed: Vec<Preference<'_>> = robots.for_agent("FooBot").preferences().collect();
    let signal = Purposes::NONE.with(Purpose::Search);
    assert_eq!(
        listed,
        [
            Preference {
                kind: PreferenceKind::ContentSignal,
                text: "search=yes, ai-train=no, use=reference",
                path: None,
                allowed: signal,
                refused: Purposes::NONE.with(Purpose::AiTrain),
                line: 2,
                group_line: 1,
            },
            Preference {
                kind: PreferenceKind::ContentUsage,
                text: "/%7enews/ train-ai=y, bots=n",
                // Percent-normalised as a rule's pattern is.
                path: Some("/%7Enews/"),
                allowed: Purposes::NONE.with(Purpose::AiTrain),
                refused: Purposes::NONE.with(Purpose::Search).with(Purpose::AiInput),
                line: 3,
                group_line: 1,
            },
        ]
    );
    let bare = RobotsTxt::parse(b"User-agent: *\nContent-Usage: train-ai=n\n");
    let listed: Vec<Preference<'_>> = bare.for_agent("x").preferences().collect();
    assert_eq!(listed[0].path, Some("/"));
}

#[test]
fn ext_unknown_and_broken_members_are_noted() {
    let body = "User-agent: *\nContent-Signal: search=yes, use=reference, ai-train=maybe\n\
                Content-Usage: train-ai=n, fly=n, search, x y\nContent-Usage: /news/\n\
                Content-Signal:\nContent-Usage: train-ai=y, train-ai=n\n\
                Content-Signal: ai-train=no, ai-train=yes\nContent-Usage-Policy: none\n";
    assert_eq!(
        diagnostics(body),
        [
            "line 2: unknown content-signal name `use=reference` ignored",
            "line 2: content-signal member `ai-train=maybe` is not a name with a yes/no value; skipped",
            "line 3: unknown content-usage label `fly=n` ignored",
            "line 3: content-usage member `search` is not a label with a yes/no value; skipped",
            "line 3: content-usage member `x y` is not a label with a yes/no value; skipped",
            "line 4: invalid content-usage value `/news/` ignored",
            "line 5: invalid content-signal value `` ignored",
            "line 6: content-usage label `train-ai` given twice; the last value counts",
            "line 7: content-signal name `ai-train` given twice; the most restrictive value counts",
            "line 8: unknown key `Content-Usage-Policy` ignored",
        ]
    );
    // What could be read still counts.
    table(
        body,
        &[
            ("FooBot", "/", "search", "allowed"),
            (
                "FooBot",
                "/",
                "ai-train",
                "ai-train content-usage: train-ai=n, fly=n, search, x y (line 3, group 1)",
            ),
        ],
    );
    // The last value of a Content-Usage label counts; line 6 alone allows.
    let body = "User-agent: *\nContent-Usage: train-ai=y, train-ai=n\nContent-Usage: /a train-ai=n, train-ai=y\n";
    table(body, &[("FooBot", "/a", "ai-train", "allowed")]);
}

#[test]
fn ext_older_labels_are_read_and_noted() {
    let cases: &[(&str, &str, &str)] = &[
        // `ai=n` (draft-ietf-aipref-attach-00/-01) refuses AI training and AI input.
        (
            "ai=n",
            "ai-train",
            "ai-train content-usage: ai=n (line 2, group 1)",
        ),
        (
            "ai=n",
            "ai-input",
            "ai-input content-usage: ai=n (line 2, group 1)",
        ),
        ("ai=n", "search", "allowed"),
        ("ai=n, inference=y", "ai-input", "allowed"),
        (
            "genai=n",
            "ai-train",
            "ai-train content-usage: genai=n (line 2, group 1)",
        ),
        (
            "train-genai=n",
            "ai-train",
            "ai-train content-usage: train-genai=n (line 2, group 1)",
        ),
        (
            "ai-use=n",
            "ai-input",
            "ai-input content-usage: ai-use=n (line 2, group 1)",
        ),
        (
            "ai-output=n",
            "search",
            "search content-usage: ai-output=n (line 2, group 1)",
        ),
        ("tdm=n", "search", "allowed"),
        (
            "tdm=n",
            "ai-train",
            "ai-train content-usage: tdm=n (line 2, group 1)",
        ),
        ("bots=n, search=y", "search", "allowed"),
        (
            "all=n",
            "search",
            "search content-usage: all=n (line 2, group 1)",
        ),
    ];
    for (value, asked, want) in cases {
        let body = format!("User-agent: *\nContent-Usage: {value}\n");
        assert_eq!(
            judged(&body, "FooBot", "/", asked),
            *want,
            "{value} for {asked}"
        );
    }
    assert_eq!(
        diagnostics("User-agent: *\nContent-Usage: ai=n, train-genai=y, train-ai=y\n"),
        [
            "line 2: content-usage label `ai` is from an earlier AIPREF vocabulary draft; \
             read as ai-input, ai-train",
            "line 2: content-usage label `train-genai` is from an earlier AIPREF vocabulary \
             draft; read as ai-train",
        ]
    );
}

#[test]
fn ext_statements_before_any_user_agent_are_ignored() {
    let body =
        "Content-Usage: train-ai=n\nContent-Signal: search=no\nUser-agent: *\nDisallow: /x\n";
    table(
        body,
        &[
            ("FooBot", "/", "ai-train", "allowed"),
            ("FooBot", "/", "search", "allowed"),
        ],
    );
    assert_eq!(
        diagnostics(body),
        [
            "line 1: rule before any user-agent line; ignored",
            "line 2: rule before any user-agent line; ignored",
        ]
    );
}

#[test]
fn ext_statements_do_not_split_groups() {
    // Like Crawl-delay: a user-agent line after a statement joins the group.
    let body = "User-agent: FooBot\nContent-Usage: train-ai=n\nUser-agent: BarBot\nDisallow: /x\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.group_count(), 1);
    assert!(!robots.check("FooBot", "/x").allowed);
    table(
        body,
        &[(
            "BarBot",
            "/",
            "ai-train",
            "ai-train content-usage: train-ai=n (line 2, group 1)",
        )],
    );
    // Nor do blank lines: with no rule after `*`, FooBot's line joins its
    // group (as Google's reference reads it), and the statement with it.
    let body = "User-agent: *\nContent-Usage: train-ai=n\n\nUser-agent: FooBot\nAllow: /\n";
    assert_eq!(RobotsTxt::parse(body.as_bytes()).group_count(), 1);
    table(
        body,
        &[(
            "FooBot",
            "/",
            "ai-train",
            "ai-train content-usage: train-ai=n (line 2, group 1)",
        )],
    );
    // Between rules, a statement does not end the group either.
    let body = "User-agent: FooBot\nDisallow: /a\nContent-Signal: ai-train=no\nDisallow: /b\n\
                User-agent: BarBot\nDisallow: /c\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.group_count(), 2);
    let rule = robots.check("FooBot", "/b").rule.expect("a rule decides");
    assert_eq!((rule.line, rule.group_line), (4, 1));
    assert!(robots.check("FooBot", "/c").allowed);
    table(body, &[("BarBot", "/", "ai-train", "allowed")]);
    // A refusal by preference never changes the crawl verdict, and the
    // reverse: a disallowed path stays disallowed whatever the preferences.
    let body = "User-agent: *\nDisallow: /private\nContent-Usage: /private train-ai=y\n\
                Content-Signal: ai-train=no\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(!robots.check("FooBot", "/private/a").allowed);
    assert!(robots.check("FooBot", "/public").allowed);
    assert_eq!(robots.rule_count(), 1);
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/robots")
}

/// `body` with preference lines after every user-agent line and every fifth line.
fn with_statements(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 4);
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(line);
        let trimmed = line.trim_ascii_start();
        let user_agent = trimmed.len() >= 10 && trimmed[..10].eq_ignore_ascii_case(b"user-agent");
        if user_agent {
            out.extend_from_slice(b"\nContent-Usage: /a train-ai=n, search=y");
        }
        if i % 5 == 4 {
            out.extend_from_slice(b"\nContent-Signal: ai-train=no, ai-input=yes");
        }
    }
    out
}

#[test]
fn ext_real_files_keep_their_groups_and_verdicts() {
    let dir = corpus_dir();
    let mut files = 0;
    let mut with_preferences = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus directory") {
        let path = entry.expect("a corpus entry").path();
        if path.extension().is_none_or(|e| e != "txt") {
            continue;
        }
        let body = std::fs::read(&path).expect("a corpus file");
        let plain = RobotsTxt::parse(&body);
        let added = with_statements(&body);
        let robots = RobotsTxt::parse(&added);
        let name = path.display();
        files += 1;
        assert_eq!(robots.group_count(), plain.group_count(), "{name}");
        assert_eq!(robots.rule_count(), plain.rule_count(), "{name}");
        for agent in ["Googlebot", "FooBot", "GPTBot", ""] {
            let (before, after) = (plain.for_agent(agent), robots.for_agent(agent));
            assert_eq!(after.scope(), before.scope(), "{name} {agent}");
            for url in ["/", "/a/b", "/search?q=x", "/wp-admin/", "/index.html"] {
                let (b, a) = (before.check(url), after.check(url));
                assert_eq!(a.allowed, b.allowed, "{name} {agent} {url}");
                assert_eq!(
                    a.rule.map(|r| (r.kind, r.pattern)),
                    b.rule.map(|r| (r.kind, r.pattern)),
                    "{name} {agent} {url}"
                );
            }
            if after.preferences().next().is_some() {
                with_preferences += 1;
                // Every group the agent gets has a user-agent line, so the
                // Content-Usage after it applies under /a.
                let verdict = after.usage("/a/x", purposes("ai-train"));
                assert!(!verdict.allowed(), "{name} {agent}");
                assert!(after.usage("/a/x", purposes("search")).allowed(), "{name}");
            }
        }
    }
    assert_eq!(files, 150, "the corpus holds 150 files");
    assert!(
        with_preferences > 100,
        "{with_preferences} agents with preferences"
    );
}
