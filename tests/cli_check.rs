//! The `robots-guard check` contract, through the real binary: one line per URL
//! (`allowed` or `disallowed`, the URL, then the deciding rule and its line), exit 0 if
//! all are allowed, 1 if any is disallowed, 2 on error; `--explain` adds diagnostics.

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
