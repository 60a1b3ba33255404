//! `robots-guard check`: test a robots.txt from the shell.
//!
//! One line per URL, starting with `allowed` or `disallowed`, then the URL,
//! then the deciding rule and its line when a rule decided. Fields are
//! separated by tabs so scripts can `cut -f1`.
//!
//! Two views: by default Google's verdict for the URL exactly as written,
//! which is what site owners test their files against; with `--as-proxy`
//! the proxy's, which judges the RFC 3986 normal form and the forms servers
//! read it as ([`crate::robots::judge`]) and names the one that decided.
//!
//! With purposes (`--purpose ai-train`), a URL the rules allow is also
//! judged against the site's AI-use preferences (`Content-Signal`,
//! `Content-Usage`; [`crate::robots::AgentRules::usage`]): one that refuses
//! a declared purpose makes it `disallowed`, naming the statement and its
//! line where a rule would be named. A rule that disallows decides first.
//! The exact view judges the URL's path as written, the proxy view its
//! normal form.

use std::io::{self, Write};

use crate::origin::Origin;
use crate::robots::{
    judge, normalise, path_params_query, product_token, Preference, Purposes, RobotsTxt, Scope,
    Spelling, Spellings,
};

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckRequest<'a> {
    /// The robots.txt body.
    pub robots: &'a [u8],
    /// The product token to match groups against.
    pub agent: &'a str,
    /// URLs (absolute http(s) URLs, or paths starting with `/`),
    /// percent-encoded as a client would send them.
    pub urls: &'a [String],
    /// Also print the parse diagnostics and what applies to the agent.
    pub explain: bool,
    /// `Some(spellings)`: judge as the proxy does, with these spellings;
    /// `None`: Google's verdict for the URL as written.
    pub as_proxy: Option<Spellings>,
    /// The purposes the robot declares: a URL whose preferences refuse one
    /// of them is disallowed. [`Purposes::NONE`] judges the rules only.
    pub purposes: Purposes,
}

/// Why `check` could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A URL is neither an http(s) URL nor a path.
    #[error("`{url}` is not something the proxy could fetch: {why}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// Writing the answer failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The agent token to use: `--agent` as given, or the product token of a
/// full `--user-agent` header (see [`product_token`]).
pub fn agent_token<'a>(agent: Option<&'a str>, user_agent: Option<&'a str>) -> Option<&'a str> {
    agent.or_else(|| user_agent.map(product_token))
}

/// Writes the verdicts (and, with `explain`, the diagnostics) to `out`.
/// Returns whether any URL was disallowed.
///
/// # Errors
///
/// [`CheckError::Url`] before anything is written when a URL is not an
/// http(s) URL or a path (`ftp://x/y`, `http://exa mple.com/`, `x/y`);
/// [`CheckError::Io`] when writing to `out` fails.
pub fn run(request: &CheckRequest<'_>, out: &mut impl Write) -> Result<bool, CheckError> {
    let targets = request
        .urls
        .iter()
        .map(|url| request_target(url))
        .collect::<Result<Vec<_>, _>>()?;
    let robots = RobotsTxt::parse(request.robots);
    let folded = RobotsTxt::parse_case_folded(request.robots);
    let rules = robots.for_agent(request.agent);
    let folded_rules = folded.for_agent(request.agent);
    let mut any_disallowed = false;
    for (url, target) in request.urls.iter().zip(&targets) {
        // The path the preferences are judged for: as the rules judge it.
        let (verdict, note, path) = match request.as_proxy {
            None => {
                let path = String::from_utf8_lossy(&path_params_query(url.as_bytes())).into_owned();
                (rules.check(url), String::new(), path)
            }
            Some(spellings) => {
                let normal = normalise(target);
                let judgment = judge(&rules, Some(&folded_rules), &normal, spellings);
                let note = match &judgment.served_as {
                    Some(form) => format!("\tserved as {} ({})", form.target, form.spellings),
                    None if normal != *target => format!("\tforwarded as {normal}"),
                    None => String::new(),
                };
                (judgment.verdict, note, normal.into_owned())
            }
        };
        if verdict.allowed {
            let usage = rules.usage(&path, request.purposes);
            if let Some(refusal) = usage.refusal {
                any_disallowed = true;
                writeln!(
                    out,
                    "disallowed\t{url}\t{}\tline {}{note}",
                    refusal.statement, refusal.statement.line
                )?;
                continue;
            }
        }
        any_disallowed |= !verdict.allowed;
        let word = if verdict.allowed {
            "allowed"
        } else {
            "disallowed"
        };
        match (verdict.rule, verdict.scope) {
            (Some(rule), _) => {
                let via = if rule.via_index_html {
                    " (index.html rule)"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "{word}\t{url}\t{}: {}\tline {}{via}{note}",
                    rule.kind.as_str(),
                    rule.pattern,
                    rule.line
                )?;
            }
            (None, Scope::RobotsTxt) => {
                writeln!(out, "{word}\t{url}\t/robots.txt is always allowed{note}")?
            }
            (None, _) => writeln!(out, "{word}\t{url}{note}")?,
        }
    }
    if request.explain {
        explain(&robots, request.robots, request.agent, out)?;
    }
    Ok(any_disallowed)
}

/// The origin-form target (path and query) of `url`: a path as given, or
/// the path and query of an absolute http(s) URL with a valid host.
fn request_target(url: &str) -> Result<String, CheckError> {
    let bad = |why: &str| CheckError::Url {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    if url.starts_with('/') {
        return http::uri::PathAndQuery::try_from(url)
            .map(|pq| pq.as_str().to_owned())
            .map_err(|e| bad(&format!("not a valid path ({e})")));
    }
    if !url.contains("://") {
        return Err(bad(
            "expected an http(s) URL such as https://example.com/x, or a path starting with /",
        ));
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| bad(&format!("not a valid URL ({e})")))?;
    Origin::from_uri(&uri).map_err(|e| bad(&e.to_string()))?;
    Ok(uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned()))
}

/// The spellings named in a comma-separated list (`--spellings`).
///
/// # Errors
///
/// The unknown name, with the accepted ones.
pub fn parse_spellings(list: &str) -> Result<Spellings, String> {
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            Spelling::from_name(name).ok_or_else(|| {
                let accepted: Vec<&str> = Spelling::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown spelling `{name}`; expected any of {}",
                    accepted.join(", ")
                )
            })
        })
        .collect()
}

/// Lines as a person counts them: one per line ending (CRLF is one), plus
/// an unterminated last line. The parser's own count includes the empty
/// line after a final line ending, as the reference's does.
fn lines_in(body: &[u8]) -> usize {
    let mut lines = 0;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\r' if body.get(i + 1) == Some(&b'\n') => {
                lines += 1;
                i += 1;
            }
            b'\r' | b'\n' => lines += 1,
            _ => {}
        }
        i += 1;
    }
    let unterminated = body.last().is_some_and(|&b| b != b'\n' && b != b'\r');
    lines + usize::from(unterminated)
}

fn explain(robots: &RobotsTxt, body: &[u8], agent: &str, out: &mut impl Write) -> io::Result<()> {
    let rules = robots.for_agent(agent);
    let scope = match rules.scope() {
        Scope::Specific => format!("groups naming `{agent}`"),
        Scope::Global => "the `*` groups (none names the agent)".to_string(),
        Scope::NoGroup | Scope::RobotsTxt => "no group: everything is allowed".to_string(),
    };
    writeln!(
        out,
        "# {} lines, {} groups, {} rules; `{agent}` gets {scope}",
        lines_in(body),
        robots.group_count(),
        robots.rule_count()
    )?;
    if let Some(delay) = rules.min_interval() {
        writeln!(
            out,
            "# pacing: at least {:.3}s between requests",
            delay.as_secs_f64()
        )?;
    }
    for sitemap in robots.sitemaps() {
        writeln!(out, "# sitemap: {sitemap}")?;
    }
    for preference in rules.preferences() {
        writeln!(
            out,
            "# preference: {preference} (line {}: {})",
            preference.line,
            states(&preference)
        )?;
    }
    for diagnostic in robots.diagnostics() {
        writeln!(out, "# {diagnostic}")?;
    }
    Ok(())
}

/// What a preference line states: `allows search; refuses ai-train`.
fn states(preference: &Preference<'_>) -> String {
    let mut parts = Vec::new();
    if !preference.allowed.is_empty() {
        parts.push(format!("allows {}", preference.allowed));
    }
    if !preference.refused.is_empty() {
        parts.push(format!("refuses {}", preference.refused));
    }
    if parts.is_empty() {
        "states no known preference".to_owned()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(robots: &[u8], urls: &[&str], as_proxy: Option<Spellings>) -> (bool, String) {
        checked_for(robots, urls, as_proxy, "")
    }

    fn checked_for(
        robots: &[u8],
        urls: &[&str],
        as_proxy: Option<Spellings>,
        purposes: &str,
    ) -> (bool, String) {
        let urls: Vec<String> = urls.iter().map(|u| (*u).to_owned()).collect();
        let request = CheckRequest {
            robots,
            agent: "FooBot",
            urls: &urls,
            explain: false,
            as_proxy,
            purposes: purposes.parse().expect("known purposes"),
        };
        let mut out = Vec::new();
        let disallowed = run(&request, &mut out).expect("valid URLs");
        (disallowed, String::from_utf8(out).expect("utf-8"))
    }

    #[test]
    fn prints_one_line_per_url_with_rule_and_line() {
        let urls = vec![
            "https://e.com/private/x".to_string(),
            "/public".to_string(),
            "/robots.txt".to_string(),
        ];
        let request = CheckRequest {
            robots: b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\nfoo bar baz\n",
            agent: "FooBot",
            urls: &urls,
            explain: true,
            as_proxy: None,
            purposes: Purposes::NONE,
        };
        let mut out = Vec::new();
        assert!(run(&request, &mut out).expect("writes to a Vec"));
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "disallowed\thttps://e.com/private/x\tdisallow: /private\tline 2"
        );
        assert_eq!(lines[1], "allowed\t/public");
        assert_eq!(
            lines[2],
            "allowed\t/robots.txt\t/robots.txt is always allowed"
        );
        assert!(
            lines[3].starts_with("# 4 lines, 1 groups, 1 rules"),
            "{}",
            lines[3]
        );
        assert_eq!(lines[4], "# pacing: at least 2.000s between requests");
        assert_eq!(lines[5], "# line 4: no `key: value` on this line; ignored");
    }

    #[test]
    fn lines_are_counted_as_a_person_counts_them() {
        assert_eq!(lines_in(b""), 0);
        assert_eq!(lines_in(b"a"), 1);
        assert_eq!(lines_in(b"a\n"), 1);
        assert_eq!(lines_in(b"a\r\nb\rc\n"), 3);
        assert_eq!(lines_in(b"a\n\nb"), 3);
    }

    #[test]
    fn the_exact_view_is_googles_and_the_proxy_view_names_the_spelling() {
        let robots = b"User-agent: *\nDisallow: /private/\n";
        let urls = [
            "/%70rivate/x",
            "http://e.com//private/x",
            "/public//../private/x",
        ];
        let (any, exact) = checked(robots, &urls, None);
        assert!(!any, "Google's verdict for the URLs as written: {exact}");
        let (any, proxy) = checked(robots, &urls, Some(Spellings::DEFAULT));
        assert!(any);
        let lines: Vec<&str> = proxy.lines().collect();
        assert_eq!(
            lines[0],
            "disallowed\t/%70rivate/x\tdisallow: /private/\tline 2\tforwarded as /private/x"
        );
        assert_eq!(
            lines[1],
            "disallowed\thttp://e.com//private/x\tdisallow: /private/\tline 2\t\
             served as /private/x (merge-slashes)"
        );
        assert_eq!(
            lines[2],
            "allowed\t/public//../private/x\tforwarded as /public/private/x"
        );
    }

    #[test]
    fn purposes_the_site_refuses_disallow_after_the_rules() {
        let robots = b"User-agent: *\nDisallow: /private\nContent-Signal: search=yes\n\
                       Content-Usage: /news/ train-ai=n\n";
        let urls = [
            "/news/a",
            "https://e.com/news/b?x=1",
            "/private/news/",
            "/blog/",
        ];
        let (any, out) = checked_for(robots, &urls, None, "ai-train,search");
        assert!(any);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "disallowed\t/news/a\tcontent-usage: /news/ train-ai=n\tline 4",
                "disallowed\thttps://e.com/news/b?x=1\tcontent-usage: /news/ train-ai=n\tline 4",
                "disallowed\t/private/news/\tdisallow: /private\tline 2",
                "allowed\t/blog/",
            ]
        );
        // Without purposes, only the rules.
        let (_, out) = checked_for(robots, &urls[..1], None, "");
        assert_eq!(out, "allowed\t/news/a\n");
        // The proxy view judges the normal form.
        let (any, out) = checked_for(robots, &["/%6Eews/a"], Some(Spellings::DEFAULT), "ai-train");
        assert!(any);
        assert_eq!(
            out,
            "disallowed\t/%6Eews/a\tcontent-usage: /news/ train-ai=n\tline 4\tforwarded as /news/a\n"
        );
        let (any, _) = checked_for(robots, &["/%6Eews/a"], None, "ai-train");
        assert!(!any, "the exact view judges the path as written");
    }

    #[test]
    fn explain_lists_the_preferences_of_the_selected_groups() {
        let urls = vec!["/".to_owned()];
        let request = CheckRequest {
            robots: b"User-agent: *\nDisallow: /x\nContent-Signal: search=yes, ai-train=no\n\
                      Content-Usage: /a fly=n\n\nUser-agent: BarBot\nContent-Usage: train-ai=n\n",
            agent: "FooBot",
            urls: &urls,
            explain: true,
            as_proxy: None,
            purposes: Purposes::NONE,
        };
        let mut out = Vec::new();
        run(&request, &mut out).expect("writes to a Vec");
        let text = String::from_utf8(out).expect("utf-8");
        let listed: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("# preference"))
            .collect();
        assert_eq!(
            listed,
            [
                "# preference: content-signal: search=yes, ai-train=no \
                 (line 3: allows search; refuses ai-train)",
                "# preference: content-usage: /a fly=n (line 4: states no known preference)",
            ]
        );
    }

    #[test]
    fn urls_the_proxy_could_not_fetch_are_errors() {
        for url in [
            "ftp://x/y",
            "http://exa mple.com/x",
            "example.com/a",
            "/a b",
            "http:///x",
        ] {
            let urls = vec![url.to_owned()];
            let request = CheckRequest {
                robots: b"",
                agent: "FooBot",
                urls: &urls,
                explain: false,
                as_proxy: None,
                purposes: Purposes::NONE,
            };
            let mut out = Vec::new();
            let error = run(&request, &mut out).expect_err(url);
            assert!(matches!(error, CheckError::Url { .. }), "{url}: {error}");
            assert!(out.is_empty(), "nothing printed before the error");
        }
    }

    #[test]
    fn spelling_lists_parse() {
        assert_eq!(parse_spellings(""), Ok(Spellings::NONE));
        assert_eq!(
            parse_spellings("merge-slashes, case-insensitive"),
            Ok(Spellings::NONE
                .with(Spelling::MergeSlashes)
                .with(Spelling::CaseInsensitive))
        );
        assert!(parse_spellings("merge")
            .unwrap_err()
            .contains("merge-slashes"));
    }

    #[test]
    fn agent_token_prefers_agent_then_header_token() {
        assert_eq!(agent_token(Some("X"), Some("curl/8")), Some("X"));
        assert_eq!(
            agent_token(None, Some("Mozilla/5.0 (compatible; FooBot/1)")),
            Some("FooBot")
        );
        assert_eq!(agent_token(None, None), None);
    }
}
