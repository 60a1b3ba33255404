//! `robots-guard check`: test a robots.txt from the shell (DESIGN.md §8).
//!
//! One line per URL, starting with `allowed` or `disallowed`, then the URL,
//! then the deciding rule and its line when a rule decided. Fields are
//! separated by tabs so scripts can `cut -f1`.

use std::io::{self, Write};

use crate::robots::{product_token, RobotsTxt, Scope};

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckRequest<'a> {
    /// The robots.txt body.
    pub robots: &'a [u8],
    /// The product token to match groups against.
    pub agent: &'a str,
    /// URLs (absolute or paths), percent-encoded as a client would send them.
    pub urls: &'a [String],
    /// Also print the parse diagnostics and what applies to the agent.
    pub explain: bool,
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
/// Only the errors of writing to `out`.
pub fn run(request: &CheckRequest<'_>, out: &mut impl Write) -> io::Result<bool> {
    let robots = RobotsTxt::parse(request.robots);
    let rules = robots.for_agent(request.agent);
    let mut any_disallowed = false;
    for url in request.urls {
        let verdict = rules.check(url);
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
                    "{word}\t{url}\t{}: {}\tline {}{via}",
                    rule.kind.as_str(),
                    rule.pattern,
                    rule.line
                )?;
            }
            (None, Scope::RobotsTxt) => {
                writeln!(out, "{word}\t{url}\t/robots.txt is always allowed")?
            }
            (None, _) => writeln!(out, "{word}\t{url}")?,
        }
    }
    if request.explain {
        explain(&robots, request.agent, out)?;
    }
    Ok(any_disallowed)
}

fn explain(robots: &RobotsTxt, agent: &str, out: &mut impl Write) -> io::Result<()> {
    let rules = robots.for_agent(agent);
    let scope = match rules.scope() {
        Scope::Specific => format!("groups naming `{agent}`"),
        Scope::Global => "the `*` groups (none names the agent)".to_string(),
        Scope::NoGroup | Scope::RobotsTxt => "no group: everything is allowed".to_string(),
    };
    writeln!(
        out,
        "# {} lines, {} groups, {} rules; `{agent}` gets {scope}",
        robots.line_count(),
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
    for diagnostic in robots.diagnostics() {
        writeln!(out, "# {diagnostic}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(lines[3].starts_with("# 5 lines, 1 groups, 1 rules"));
        assert_eq!(lines[4], "# pacing: at least 2.000s between requests");
        assert_eq!(lines[5], "# line 4: no `key: value` on this line; ignored");
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
