//! The robots.txt engine: bytes in, verdicts out.
//!
//! Pure code: no I/O, no async, no clock. [`RobotsTxt::parse`] never fails;
//! it keeps what it could not use as [`Diagnostic`]s. A [`Verdict`] names the
//! rule that decided it. The parse and match semantics are those of Google's
//! reference parser (the RFC 9309 reference implementation), with one
//! deliberate deviation: `/robots.txt` itself is always allowed
//! (RFC 9309 §2.2.2 leaves it implicit; the reference leaves it to the
//! crawler).
//!
//! Beside the rules, the engine reads what a site states about AI use
//! (`Content-Signal`, `Content-Usage`; see [`Purpose`] and
//! [`AgentRules::usage`]). Those lines never change a group or a
//! [`Verdict`]: the crawl verdict stays Google's.
//!
//! ```
//! use robots_guard::robots::RobotsTxt;
//!
//! let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
//! let verdict = robots.check("FooBot", "https://example.com/private/x");
//! assert!(!verdict.allowed);
//! assert_eq!(verdict.rule.map(|r| r.line), Some(2));
//! ```

mod agent;
mod diagnostics;
mod escape;
mod lex;
mod matcher;
mod parse;
mod pattern;
mod spelling;
mod url;
mod usage;

pub use agent::{is_global_agent, product_token, robots_value_token};
pub use diagnostics::{Diagnostic, DiagnosticKind};
pub use lex::{nth_line, MAX_LINE_LEN};
pub use matcher::{AgentRules, MatchedRule, Scope, Verdict};
pub use pattern::matches_reference as pattern_matches_reference;
pub use spelling::{
    fold_case, judge, normalise, served_forms, Judgment, ServedForm, Spelling, Spellings,
};
pub use url::path_params_query;
pub use usage::{
    refusing_members, MatchedPreference, Preference, PreferenceKind, Purpose, Purposes,
    UnknownPurpose, UsageRefusal, UsageVerdict,
};

use std::ops::Range;
use std::time::Duration;

use pattern::{Pattern, Wildcards};

/// A parsed robots.txt file, ready to answer many queries.
#[derive(Debug, Clone, Default)]
pub struct RobotsTxt {
    /// Storage for every pattern, agent token, sitemap and noted key.
    text: Vec<u8>,
    groups: Vec<Group>,
    rules: Vec<Rule>,
    /// Literal segments of the patterns with `*`.
    wildcards: Wildcards,
    agents: Vec<Span>,
    /// `Content-Signal` and `Content-Usage` lines inside groups.
    statements: Vec<Statement>,
    sitemaps: Vec<Span>,
    diagnostics: Vec<diagnostics::Note>,
    line_count: u32,
}

/// Whether a rule allows or disallows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// `Allow:`
    Allow,
    /// `Disallow:`
    Disallow,
}

impl RuleKind {
    /// The directive name as written in robots.txt.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Disallow => "disallow",
        }
    }
}

/// `Request-rate: n/secs` of a group: at most `requests` per `per`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRate {
    /// Number of requests allowed in each period.
    pub requests: u32,
    /// Length of the period.
    pub per: Duration,
}

impl RequestRate {
    /// The spacing between request starts this rate implies.
    pub fn interval(&self) -> Duration {
        self.per / self.requests.max(1)
    }
}

/// A byte range of [`RobotsTxt::text`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: usize,
    len: usize,
}

impl Span {
    fn range(self) -> Range<usize> {
        self.start..self.start + self.len
    }
}

/// One group: a run of user-agent lines and the rules after them.
#[derive(Debug, Clone)]
struct Group {
    /// Indices into `RobotsTxt::agents` of the named (non-`*`) agents.
    agents: Range<usize>,
    /// Indices into `RobotsTxt::rules`.
    rules: Range<usize>,
    /// Indices into `RobotsTxt::statements`.
    statements: Range<usize>,
    /// A `*` line is part of the run.
    global: bool,
    /// Line of the first user-agent line.
    line: u32,
    crawl_delay: Option<Duration>,
    request_rate: Option<RequestRate>,
}

#[derive(Debug, Clone, Copy)]
struct Rule {
    kind: RuleKind,
    /// Not written in the file: the Google-specific companion (`<dir>/$`)
    /// of the `Allow: <dir>/index.htm...` rule just before it, on the same
    /// line. It matches like any rule; only counts and reports tell it apart.
    via_index_html: bool,
    line: u32,
    pattern: Pattern,
}

/// One `Content-Signal` or `Content-Usage` line of a group.
#[derive(Debug, Clone)]
struct Statement {
    kind: PreferenceKind,
    line: u32,
    /// The value as written (comment and surrounding blanks removed).
    text: Span,
    /// `Content-Usage`: the path pattern, `/` when none was written.
    pattern: Option<Pattern>,
    allowed: Purposes,
    refused: Purposes,
    /// `Content-Signal`: the member that decided each purpose, in
    /// [`Purpose::ALL`] order (a `Content-Usage` line decides as a whole).
    members: [Span; 3],
}

impl RobotsTxt {
    /// Parses a robots.txt body. Never fails: lines it cannot use are kept
    /// as diagnostics. Every byte is parsed; size caps belong to the fetcher.
    pub fn parse(body: &[u8]) -> RobotsTxt {
        parse::parse(body)
    }

    /// Parses `body` with its ASCII letters lower-cased, for judging paths
    /// folded by [`fold_case`] (the opt-in `case-insensitive` spelling).
    /// Lines, groups and rules are the file's own; the pattern normaliser
    /// upper-cases the escapes again, as [`fold_case`] leaves them.
    pub fn parse_case_folded(body: &[u8]) -> RobotsTxt {
        parse::parse(&body.to_ascii_lowercase())
    }

    /// Shortcut for `self.for_agent(agent).check(url)`, without allocating.
    ///
    /// `agent` is a product token (see [`product_token`]); `url` is an
    /// absolute URL or a path, already percent-encoded as clients send it.
    pub fn check(&self, agent: &str, url: &str) -> Verdict<'_> {
        matcher::check(self, agent.as_bytes(), url.as_bytes())
    }

    /// Selects the groups that apply to `agent` once, for many queries.
    pub fn for_agent(&self, agent: &str) -> AgentRules<'_> {
        AgentRules::new(self, agent.as_bytes())
    }

    /// `Sitemap:` URLs, in file order.
    pub fn sitemaps(&self) -> impl Iterator<Item = &str> {
        self.sitemaps.iter().map(|s| self.str_at(*s))
    }

    /// What the parser noted about lines it tolerated or ignored.
    pub fn diagnostics(&self) -> impl Iterator<Item = Diagnostic<'_>> {
        self.diagnostics.iter().map(|n| n.view(self))
    }

    /// Number of groups (runs of user-agent lines with their rules).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Number of allow/disallow rules inside groups, as written (the
    /// `index.htm` companions are not counted).
    pub fn rule_count(&self) -> usize {
        self.rules.iter().filter(|r| !r.via_index_html).count()
    }

    /// Number of lines, counted as the reference counts them.
    pub fn line_count(&self) -> u32 {
        self.line_count
    }

    /// Agent tokens named by some group (not `*`), in file order, repeated
    /// as often as they appear.
    pub fn named_agents(&self) -> impl Iterator<Item = &str> {
        self.agents.iter().map(|s| self.str_at(*s))
    }

    fn bytes_at(&self, span: Span) -> &[u8] {
        &self.text[span.range()]
    }

    /// Text stored by the parser is valid UTF-8 except for raw bytes in
    /// user-agent, sitemap and diagnostic text; those are shown lossily.
    fn str_at(&self, span: Span) -> &str {
        std::str::from_utf8(self.bytes_at(span)).unwrap_or("\u{FFFD}")
    }
}
