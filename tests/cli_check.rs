//! The `robots-guard check` contract, through the real binary: one line per URL
//! (`allowed` or `disallowed`, the URL, then the deciding rule and its line), exit 0 if
//! all are allowed, 1 if any is disallowed, 2 on error; `--explain` adds diagnostics;
//! `--purpose` also refuses what the site's AI-use preferences refuse.

mod support;

/// Writes `body` to a fresh robots.txt under the target's temp directory.
fn robots_file(body: &str) -> std::path::PathBuf {
    let path = support::temp_dir("cli-check").join("robots.txt");
    std::fs::write(&path, body).expect("write temp robots.txt");
    path
}

fn check(args: &[&str]) -> (i32, String, String) {
    support::run_cli(std::iter::once("check").chain(args.iter().copied()))
}

#[test]
fn cli_exit_codes_and_lines() {
    let file = robots_file(
        "User-agent: *\nDisallow: /private\n\nUser-agent: FooBot\nDisallow: /foo-only\n",
    );
    let path = file.to_str().expect("utf-8 temp path");

    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "BarBot",
        "/public",
        "https://e.com/x",
    ]);
    assert_eq!(code, 0);
    assert_eq!(out, "allowed\t/public\nallowed\thttps://e.com/x\n");

    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "BarBot",
        "/public",
        "/private/a",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "allowed\t/public\ndisallowed\t/private/a\tdisallow: /private\tline 2\n"
    );

    // A specific group replaces the global one.
    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "foobot",
        "/private/a",
        "/foo-only",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "allowed\t/private/a\ndisallowed\t/foo-only\tdisallow: /foo-only\tline 5\n"
    );

    // A full User-Agent header is reduced to its product token.
    let (code, _, _) = check(&[
        "--robots",
        path,
        "--user-agent",
        "Mozilla/5.0 (compatible; FooBot/2.1; +http://x)",
        "/foo-only",
    ]);
    assert_eq!(code, 1);
}

#[test]
fn cli_errors_exit_2() {
    let (code, _, err) = check(&["--robots", "/nonexistent/robots.txt", "--agent", "X", "/"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read /nonexistent/robots.txt"), "{err}");
    let (code, _, _) = check(&["--agent", "X", "/"]);
    assert_eq!(code, 2, "missing --robots is a usage error");
}

#[test]
fn cli_explain_prints_diagnostics() {
    let file = robots_file("User-agent: *\nDisalow: /x\nCrawl-delay: 3\nnonsense here too\n");
    let path = file.to_str().expect("utf-8 temp path");
    let (code, out, _) = check(&["--robots", path, "--agent", "X", "--explain", "/x"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("disallowed\t/x\tdisallow: /x\tline 2\n"),
        "{out}"
    );
    assert!(
        out.contains("# line 2: `Disalow` accepted as a misspelling of `disallow`"),
        "{out}"
    );
    assert!(
        out.contains("# pacing: at least 3.000s between requests"),
        "{out}"
    );
    assert!(
        out.contains("# line 4: no `key: value` on this line; ignored"),
        "{out}"
    );
}

#[test]
fn cli_purpose_refusals_name_the_statement() {
    let file = robots_file(
        "User-agent: *\nDisallow: /private\nContent-Signal: search=yes, ai-input=no\n\
         Content-Usage: /news/ train-ai=n\n\nUser-agent: FooBot\nAllow: /\n",
    );
    let path = file.to_str().expect("utf-8 temp path");

    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "BarBot",
        "--purpose",
        "ai-train",
        "/news/today",
        "https://e.com/blog/",
        "/private/news/",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "disallowed\t/news/today\tcontent-usage: /news/ train-ai=n\tline 4\n\
         allowed\thttps://e.com/blog/\n\
         disallowed\t/private/news/\tdisallow: /private\tline 2\n"
    );

    // Repeatable and comma-separated; the first refused purpose is named.
    for args in [
        &["--purpose", "search", "--purpose", "ai-input"][..],
        &["--purpose", "search,ai-input"][..],
    ] {
        let mut all = vec!["--robots", path, "--agent", "BarBot"];
        all.extend_from_slice(args);
        all.push("/blog/");
        let (code, out, _) = check(&all);
        assert_eq!(code, 1, "{args:?}");
        assert_eq!(
            out, "disallowed\t/blog/\tcontent-signal: ai-input=no\tline 3\n",
            "{args:?}"
        );
    }

    // A group naming the agent replaces the `*` group and its preferences.
    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "FooBot",
        "--purpose",
        "ai-train,ai-input",
        "/news/today",
    ]);
    assert_eq!(code, 0);
    assert_eq!(out, "allowed\t/news/today\tallow: /\tline 7\n");

    // --as-proxy judges the normal form.
    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "BarBot",
        "--as-proxy",
        "--purpose",
        "ai-train",
        "/%6Eews/./today",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "disallowed\t/%6Eews/./today\tcontent-usage: /news/ train-ai=n\tline 4\t\
         forwarded as /news/today\n"
    );
}

#[test]
fn cli_purpose_errors_and_explain() {
    let file =
        robots_file("User-agent: *\nContent-Usage: ai=n, fly=n\nContent-Signal: search=yes\n");
    let path = file.to_str().expect("utf-8 temp path");
    let (code, _, err) = check(&[
        "--robots",
        path,
        "--agent",
        "X",
        "--purpose",
        "train-ai",
        "/",
    ]);
    assert_eq!(code, 2, "an unknown purpose is a usage error");
    assert!(
        err.contains("unknown purpose `train-ai`; expected any of search, ai-input, ai-train"),
        "{err}"
    );

    let (code, out, _) = check(&[
        "--robots",
        path,
        "--agent",
        "X",
        "--explain",
        "--purpose",
        "ai-input",
        "/a",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("disallowed\t/a\tcontent-usage: ai=n, fly=n\tline 2\n"),
        "{out}"
    );
    for line in [
        "# preference: content-usage: ai=n, fly=n (line 2: refuses ai-input, ai-train)",
        "# preference: content-signal: search=yes (line 3: allows search)",
        "# line 2: content-usage label `ai` is from an earlier AIPREF vocabulary draft; \
         read as ai-input, ai-train",
        "# line 2: unknown content-usage label `fly=n` ignored",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
}
