//! Group selection and the longest-match verdict (RFC 9309 §2.2.1-§2.2.3;
//! the reference's `RobotsMatcher`).

use std::time::Duration;

use super::pattern::Path;
use super::url::path_params_query;
use super::usage::{self, Preference, Purposes, UsageVerdict};
use super::{Group, RequestRate, RobotsTxt, RuleKind};

/// Which groups decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One or more groups name the agent; `*` groups were ignored.
    Specific,
    /// No group names the agent; the merged `*` groups applied.
    Global,
    /// No group applies: everything is allowed.
    NoGroup,
    /// The URL is `/robots.txt` itself, which is always allowed.
    RobotsTxt,
}

/// The rule that decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedRule<'a> {
    /// Allow or disallow.
    pub kind: RuleKind,
    /// The pattern as matched (percent-normalised, so it may differ from
    /// the file's spelling).
    pub pattern: &'a str,
    /// 1-based line in the robots.txt.
    pub line: u32,
    /// Line of the first `User-agent:` of the group holding the rule.
    pub group_line: u32,
    /// The match came from the Google-specific `index.htm` rule: an
    /// `Allow: /dir/index.html` also allows `/dir/` itself.
    pub via_index_html: bool,
}

/// The answer for one URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<'a> {
    /// May the agent fetch the URL?
    pub allowed: bool,
    /// The deciding rule; `None` when no rule with an effect matched.
    pub rule: Option<MatchedRule<'a>>,
    /// Which groups applied.
    pub scope: Scope,
}

/// The groups that apply to one agent, selected once for many queries.
#[derive(Debug, Clone)]
pub struct AgentRules<'a> {
    robots: &'a RobotsTxt,
    groups: Vec<&'a Group>,
    scope: Scope,
}

impl<'a> AgentRules<'a> {
    pub(super) fn new(robots: &'a RobotsTxt, agent: &[u8]) -> Self {
        let (scope, groups) = applicable(robots, agent);
        let groups = groups.collect();
        AgentRules {
            robots,
            groups,
            scope,
        }
    }

    /// The verdict for `url` (absolute URL or path, percent-encoded).
    pub fn check(&self, url: &str) -> Verdict<'a> {
        let path = path_params_query(url.as_bytes());
        if &*path == b"/robots.txt" {
            return robots_txt_itself();
        }
        decide(self.robots, self.groups.iter().copied(), self.scope, &path)
    }

    /// The verdict for `path`, a path with its params and query as in an
    /// origin-form request target: unlike [`AgentRules::check`] it is not read
    /// as a URL, so a leading `//` is part of the path rather than the start
    /// of an authority. A `#fragment` is dropped.
    pub fn check_path(&self, path: &str) -> Verdict<'a> {
        let path = path.as_bytes();
        let path = &path[..memchr::memchr(b'#', path).unwrap_or(path.len())];
        if path == b"/robots.txt" {
            return robots_txt_itself();
        }
        decide(self.robots, self.groups.iter().copied(), self.scope, path)
    }

    /// Does the site refuse any of `purposes` for `path`? `path` is an
    /// origin-form path and query, as [`AgentRules::check_path`] takes it
    /// (a `#fragment` is dropped). The statements come from the groups the
    /// rules come from; see [`UsageVerdict`] for how they combine. An empty
    /// `purposes` never refuses.
    ///
    /// This answers the site's stated preferences only: whether the path may
    /// be fetched at all is [`AgentRules::check_path`]'s answer, which
    /// decides first (draft-ietf-aipref-attach: preferences apply to what
    /// can be crawled). `/robots.txt` is not exempt here: RFC 9309 §2.2.2
    /// lets a robot fetch it, which says nothing about its use.
    ///
    /// ```
    /// use robots_guard::robots::{Purpose, Purposes, RobotsTxt};
    ///
    /// let robots = RobotsTxt::parse(
    ///     b"User-agent: *\nContent-Signal: search=yes\nContent-Usage: /news/ train-ai=n\n",
    /// );
    /// let rules = robots.for_agent("FooBot");
    /// let train = Purposes::NONE.with(Purpose::AiTrain);
    /// let refusal = rules.usage("/news/a", train).refusal.expect("refused");
    /// assert_eq!(refusal.purpose, Purpose::AiTrain);
    /// assert_eq!(refusal.statement.to_string(), "content-usage: /news/ train-ai=n");
    /// assert_eq!((refusal.statement.line, refusal.statement.group_line), (3, 1));
    /// assert!(rules.usage("/blog/a", Purposes::ALL).allowed());
    /// ```
    pub fn usage(&self, path: &str, purposes: Purposes) -> UsageVerdict<'a> {
        let path = path.as_bytes();
        let path = &path[..memchr::memchr(b'#', path).unwrap_or(path.len())];
        usage::decide(self.robots, &self.groups, self.scope, path, purposes)
    }

    /// The `Content-Signal` and `Content-Usage` lines of the groups that
    /// apply, in file order: what the site states about AI use, for
    /// `check --explain`. Selected exactly as the rules are.
    pub fn preferences(&self) -> impl Iterator<Item = Preference<'a>> + '_ {
        usage::preferences(self.robots, &self.groups)
    }

    /// Which groups apply.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Is everything disallowed (a `Disallow: /` with nothing allowed)? The
    /// test tunnel mode uses: if the root path is refused, the agent may
    /// fetch nothing on this origin that it could ask for blind.
    pub fn disallows_everything(&self) -> bool {
        let verdict = decide(self.robots, self.groups.iter().copied(), self.scope, b"/");
        !verdict.allowed
            && !self.groups.iter().any(|g| {
                self.robots.rules[g.rules.clone()]
                    .iter()
                    .any(|r| r.kind == RuleKind::Allow && r.pattern.len() > 0)
            })
    }

    /// The largest `Crawl-delay` among the applicable groups.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.groups.iter().filter_map(|g| g.crawl_delay).max()
    }

    /// The strictest `Request-rate` among the applicable groups.
    pub fn request_rate(&self) -> Option<RequestRate> {
        self.groups
            .iter()
            .filter_map(|g| g.request_rate)
            .max_by_key(RequestRate::interval)
    }

    /// The spacing between request starts this file asks of the agent: the
    /// larger of `Crawl-delay` and the `Request-rate` interval.
    pub fn min_interval(&self) -> Option<Duration> {
        let rate = self.request_rate().map(|r| r.interval());
        match (self.crawl_delay(), rate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The allocation-free path behind [`RobotsTxt::check`].
pub(super) fn check<'a>(robots: &'a RobotsTxt, agent: &[u8], url: &[u8]) -> Verdict<'a> {
    let path = path_params_query(url);
    if &*path == b"/robots.txt" {
        return robots_txt_itself();
    }
    let (scope, groups) = applicable(robots, agent);
    decide(robots, groups, scope, &path)
}

/// Deviation: RFC 9309 §2.2.2 — "/robots.txt" is implicitly allowed; the
/// reference leaves this to the crawler.
fn robots_txt_itself<'a>() -> Verdict<'a> {
    Verdict {
        allowed: true,
        rule: None,
        scope: Scope::RobotsTxt,
    }
}

fn names_agent(robots: &RobotsTxt, group: &Group, agent: &[u8]) -> bool {
    robots.agents[group.agents.clone()]
        .iter()
        .any(|span| robots.bytes_at(*span).eq_ignore_ascii_case(agent))
}

/// The groups that apply to `agent` (RFC 9309 §2.2.1): those naming it if
/// any does, else the `*` groups. Each group's agents are compared once:
/// the search for the first naming group resumes where it stopped.
fn applicable<'a, 'b>(
    robots: &'a RobotsTxt,
    agent: &'b [u8],
) -> (Scope, impl Iterator<Item = &'a Group> + 'b)
where
    'a: 'b,
{
    let groups = &robots.groups;
    let (scope, first) = match groups.iter().position(|g| names_agent(robots, g, agent)) {
        Some(first) => (Scope::Specific, first),
        None => match groups.iter().position(|g| g.global) {
            Some(first) => (Scope::Global, first),
            None => (Scope::NoGroup, groups.len()),
        },
    };
    let (head, tail) = groups[first..].split_at(usize::from(first < groups.len()));
    let rest = tail.iter().filter(move |g| match scope {
        Scope::Specific => names_agent(robots, g, agent),
        _ => g.global,
    });
    (scope, head.iter().chain(rest))
}

/// Best match of one kind: highest priority, earliest line on ties.
#[derive(Clone, Copy)]
struct Best {
    priority: i64,
    rule: usize,
    group_line: u32,
}

const NO_MATCH: Best = Best {
    priority: -1,
    rule: 0,
    group_line: 0,
};

fn decide<'a, 'g>(
    robots: &'a RobotsTxt,
    groups: impl Iterator<Item = &'g Group>,
    scope: Scope,
    path: &[u8],
) -> Verdict<'a> {
    let path = Path::new(path);
    let (text, wildcards) = (&robots.text[..], &robots.wildcards);
    let mut best_allow = NO_MATCH;
    let mut best_disallow = NO_MATCH;
    for group in groups {
        let rules = &robots.rules[group.rules.clone()];
        for (index, rule) in group.rules.clone().zip(rules) {
            if !rule.pattern.may_match(path) {
                continue;
            }
            let best = match rule.kind {
                RuleKind::Allow => &mut best_allow,
                RuleKind::Disallow => &mut best_disallow,
            };
            // Only a strictly longer pattern can displace the best of its
            // kind (the first line at a priority keeps it), so most rules
            // are skipped without matching.
            let priority = rule.pattern.len() as i64;
            if priority <= best.priority || !rule.pattern.matches(text, wildcards, path) {
                continue;
            }
            *best = Best {
                priority,
                rule: index,
                group_line: group.line,
            };
        }
    }
    // An empty pattern matches with priority 0 and has no effect.
    let disallowed = (best_allow.priority > 0 || best_disallow.priority > 0)
        && best_disallow.priority > best_allow.priority;
    let winner = if disallowed {
        Some(best_disallow)
    } else if best_allow.priority > 0 {
        Some(best_allow)
    } else {
        None
    };
    Verdict {
        allowed: !disallowed,
        rule: winner.map(|best| {
            let rule = &robots.rules[best.rule];
            MatchedRule {
                kind: rule.kind,
                pattern: robots.str_at(rule.pattern.span),
                line: rule.line,
                group_line: best.group_line,
                via_index_html: rule.via_index_html,
            }
        }),
        scope,
    }
}
