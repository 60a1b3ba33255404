//! From lexed lines to groups and rules (RFC 9309 §2.1, §2.2; the
//! reference's `ParseAndEmitLine` and `RobotsMatcher` group handling).

use std::time::Duration;

use super::agent::{is_global_agent, robots_value_token};
use super::diagnostics::{Note, NoteKind};
use super::escape::push_escaped;
use super::lex::{Line, Lines, Record};
use super::pattern::{Pattern, Wildcards};
use super::usage::{read_signal, read_usage, split_path, PreferenceKind};
use super::{Group, RequestRate, RobotsTxt, Rule, RuleKind, Span, Statement};

/// What a key means, after the reference's prefix and typo rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Directive {
    UserAgent,
    Allow,
    Disallow,
    Sitemap,
    CrawlDelay,
    RequestRate,
    ContentSignal,
    ContentUsage,
    Unknown,
}

/// How the key was recognised, for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyMatch {
    Exact,
    /// Longer than the directive name, e.g. `Disallowed`.
    Prefix,
    /// One of the accepted misspellings.
    Typo,
}

fn starts_with_ci(key: &[u8], name: &[u8]) -> bool {
    key.len() >= name.len() && key[..name.len()].eq_ignore_ascii_case(name)
}

fn classify_against(key: &[u8], name: &[u8], typos: &[&[u8]]) -> Option<KeyMatch> {
    if starts_with_ci(key, name) {
        return Some(if key.len() == name.len() {
            KeyMatch::Exact
        } else {
            KeyMatch::Prefix
        });
    }
    typos
        .iter()
        .any(|typo| starts_with_ci(key, typo))
        .then_some(KeyMatch::Typo)
}

/// Classifies a key in the reference's order: user-agent, allow, disallow,
/// sitemap; then our extensions crawl-delay and request-rate, and the AI-use
/// preferences content-signal and content-usage, which match by their whole
/// name only (see `usage.rs`).
fn classify(key: &[u8]) -> (Directive, KeyMatch) {
    /// A directive, its name and the misspellings accepted for it.
    type KeySpec = (Directive, &'static [u8], &'static [&'static [u8]]);
    const TABLE: &[KeySpec] = &[
        (
            Directive::UserAgent,
            b"user-agent",
            &[b"useragent", b"user agent"],
        ),
        (Directive::Allow, b"allow", &[]),
        (
            Directive::Disallow,
            b"disallow",
            &[
                b"dissallow",
                b"dissalow",
                b"disalow",
                b"diasllow",
                b"disallaw",
            ],
        ),
        (Directive::Sitemap, b"sitemap", &[b"site-map"]),
        (
            Directive::CrawlDelay,
            b"crawl-delay",
            &[b"crawldelay", b"crawl_delay"],
        ),
        (
            Directive::RequestRate,
            b"request-rate",
            &[b"requestrate", b"request_rate"],
        ),
        (Directive::ContentSignal, b"content-signal", &[]),
        (Directive::ContentUsage, b"content-usage", &[]),
    ];
    // Cheap dispatch on the first byte keeps the common case to one compare.
    let first = key.first().map(u8::to_ascii_lowercase);
    for (directive, name, typos) in TABLE {
        let could = match directive {
            Directive::UserAgent => first == Some(b'u'),
            Directive::Allow => first == Some(b'a'),
            Directive::Disallow => first == Some(b'd'),
            Directive::Sitemap => first == Some(b's'),
            Directive::CrawlDelay | Directive::ContentSignal | Directive::ContentUsage => {
                first == Some(b'c')
            }
            Directive::RequestRate => first == Some(b'r'),
            Directive::Unknown => false,
        };
        if !could {
            continue;
        }
        if matches!(
            directive,
            Directive::ContentSignal | Directive::ContentUsage
        ) {
            if key.eq_ignore_ascii_case(name) {
                return (*directive, KeyMatch::Exact);
            }
        } else if let Some(how) = classify_against(key, name, typos) {
            return (*directive, how);
        }
    }
    (Directive::Unknown, KeyMatch::Exact)
}

struct Builder {
    out: RobotsTxt,
    /// The group being filled, and whether it has had a rule yet (a
    /// user-agent line after a rule starts a new group).
    open: Option<(usize, bool)>,
}

pub(super) fn parse(body: &[u8]) -> RobotsTxt {
    let mut builder = Builder {
        out: RobotsTxt {
            text: Vec::with_capacity(body.len() / 2),
            // Real files hold about one rule per 50 bytes: reserving for
            // one per 32 avoids most regrowth (each one copies every rule).
            rules: Vec::with_capacity(body.len() / RULE_BYTES_ESTIMATE),
            wildcards: Wildcards::with_capacity(body.len() / (4 * RULE_BYTES_ESTIMATE)),
            ..RobotsTxt::default()
        },
        open: None,
    };
    for line in Lines::new(body) {
        builder.line(line);
    }
    let mut out = builder.out;
    // Shrinking in place is cheap; the parsed file may be kept for long.
    out.text.shrink_to_fit();
    out.rules.shrink_to_fit();
    out.wildcards.shrink_to_fit();
    out.groups.shrink_to_fit();
    out.agents.shrink_to_fit();
    out.statements.shrink_to_fit();
    out.sitemaps.shrink_to_fit();
    out.diagnostics.shrink_to_fit();
    out
}

/// Body bytes per rule assumed when reserving (see [`parse`]); about a
/// quarter of the rules have a `*`.
const RULE_BYTES_ESTIMATE: usize = 32;

impl Builder {
    fn line(&mut self, line: Line<'_>) {
        self.out.line_count = line.number;
        if line.truncated > 0 {
            self.note(
                line.number,
                NoteKind::LineTooLong {
                    dropped: line.truncated,
                },
                b"",
            );
        }
        if line.had_nul {
            self.note(line.number, NoteKind::NulByte, b"");
        }
        let (key, value, missing_colon) = match line.record {
            Record::Empty => return,
            Record::NoSeparator => {
                self.note(line.number, NoteKind::NoSeparator, b"");
                return;
            }
            Record::KeyValue {
                key,
                value,
                missing_colon,
            } => (key, value, missing_colon),
        };
        if missing_colon {
            self.note(line.number, NoteKind::MissingColon, key);
        }
        let (directive, how) = classify(key);
        match how {
            KeyMatch::Exact => {}
            KeyMatch::Prefix => self.note(line.number, NoteKind::PrefixKey(directive), key),
            KeyMatch::Typo => self.note(line.number, NoteKind::AcceptedTypo(directive), key),
        }
        match directive {
            Directive::UserAgent => self.user_agent(line.number, value),
            Directive::Allow => self.rule(line.number, RuleKind::Allow, value),
            Directive::Disallow => self.rule(line.number, RuleKind::Disallow, value),
            Directive::Sitemap => {
                let span = self.push_lossy(value);
                self.out.sitemaps.push(span);
            }
            Directive::CrawlDelay => self.crawl_delay(line.number, value),
            Directive::RequestRate => self.request_rate(line.number, value),
            Directive::ContentSignal => {
                self.preference(line.number, PreferenceKind::ContentSignal, value)
            }
            Directive::ContentUsage => {
                self.preference(line.number, PreferenceKind::ContentUsage, value)
            }
            Directive::Unknown => self.note(line.number, NoteKind::UnknownKey, key),
        }
    }

    fn user_agent(&mut self, line: u32, value: &[u8]) {
        let group = match self.open {
            Some((index, false)) => index,
            _ => {
                let agents_at = self.out.agents.len();
                let rules_at = self.out.rules.len();
                self.out.groups.push(Group {
                    agents: agents_at..agents_at,
                    rules: rules_at..rules_at,
                    statements: self.out.statements.len()..self.out.statements.len(),
                    global: false,
                    line,
                    crawl_delay: None,
                    request_rate: None,
                });
                let index = self.out.groups.len() - 1;
                self.open = Some((index, false));
                index
            }
        };
        if is_global_agent(value) {
            self.out.groups[group].global = true;
        } else {
            let token = robots_value_token(value);
            let span = self.push(token);
            self.out.agents.push(span);
            self.out.groups[group].agents.end = self.out.agents.len();
        }
    }

    fn rule(&mut self, line: u32, kind: RuleKind, value: &[u8]) {
        let Some((group, _)) = self.open else {
            // RFC 9309 §2.1: rules must follow a user-agent line.
            self.note(line, NoteKind::RuleOutsideGroup, b"");
            return;
        };
        let start = self.out.text.len();
        push_escaped(value, &mut self.out.text);
        let pattern = Span {
            start,
            len: self.out.text.len() - start,
        };
        let index_alt = match kind {
            RuleKind::Allow => self.index_alternative(pattern),
            RuleKind::Disallow => None,
        };
        let pattern = self.compile(pattern);
        self.out.rules.push(Rule {
            kind,
            via_index_html: false,
            line,
            pattern,
        });
        // Right after its rule and on its line, so ties between rules of
        // equal length break in file order as they would for the rule.
        if let Some(alt) = index_alt {
            self.out.rules.push(Rule {
                kind: RuleKind::Allow,
                via_index_html: true,
                line,
                pattern: alt,
            });
        }
        self.out.groups[group].rules.end = self.out.rules.len();
        self.open = Some((group, true));
    }

    /// Google-specific: `Allow: /dir/index.htm...` also allows `/dir/`
    /// exactly, as if `Allow: /dir/$` were written too: the companion
    /// pattern, emitted as a rule of its own.
    fn index_alternative(&mut self, pattern: Span) -> Option<Pattern> {
        let bytes = self.out.bytes_at(pattern);
        let slash = memchr::memrchr(b'/', bytes)?;
        if !bytes[slash..].starts_with(b"/index.htm") {
            return None;
        }
        let start = self.out.text.len();
        self.out
            .text
            .extend_from_within(pattern.start..pattern.start + slash + 1);
        self.out.text.push(b'$');
        let span = Span {
            start,
            len: slash + 2,
        };
        Some(self.compile(span))
    }

    fn compile(&mut self, pattern: Span) -> Pattern {
        Pattern::compile(&self.out.text, pattern, &mut self.out.wildcards)
    }

    fn crawl_delay(&mut self, line: u32, value: &[u8]) {
        let parsed = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok());
        match (parsed, self.open) {
            (None, _) => self.note(line, NoteKind::InvalidValue(Directive::CrawlDelay), value),
            (Some(_), None) => self.note(line, NoteKind::RuleOutsideGroup, b""),
            (Some(delay), Some((group, _))) => {
                let slot = &mut self.out.groups[group].crawl_delay;
                *slot = Some(slot.map_or(delay, |d| d.max(delay)));
            }
        }
    }

    fn request_rate(&mut self, line: u32, value: &[u8]) {
        match (parse_request_rate(value), self.open) {
            (None, _) => self.note(line, NoteKind::InvalidValue(Directive::RequestRate), value),
            (Some(_), None) => self.note(line, NoteKind::RuleOutsideGroup, b""),
            (Some(rate), Some((group, _))) => {
                let slot = &mut self.out.groups[group].request_rate;
                let stricter = slot.is_none_or(|old| rate.interval() > old.interval());
                if stricter {
                    *slot = Some(rate);
                }
            }
        }
    }

    /// A `Content-Signal` or `Content-Usage` line: a statement of the open
    /// group. Like `Crawl-delay`, it neither starts nor ends a group.
    fn preference(&mut self, line: u32, kind: PreferenceKind, value: &[u8]) {
        let directive = kind.directive();
        let Some((group, _)) = self.open else {
            self.note(line, NoteKind::RuleOutsideGroup, b"");
            return;
        };
        // Read as shown: ranges in the reading are ranges of the stored text.
        let shown = String::from_utf8_lossy(value);
        let shown = shown.as_bytes();
        let reading = match kind {
            PreferenceKind::ContentSignal => read_signal(shown),
            PreferenceKind::ContentUsage => read_usage(shown),
        };
        for (note, range) in &reading.notes {
            self.note(line, *note, &shown[range.clone()]);
        }
        if reading.empty {
            self.note(line, NoteKind::InvalidValue(directive), value);
            return;
        }
        let text = self.push(shown);
        let pattern = match kind {
            PreferenceKind::ContentSignal => None,
            PreferenceKind::ContentUsage => {
                // The path from the bytes as written, escaped as a rule's is.
                let path = match split_path(value) {
                    (Some(path), _) => &value[path],
                    (None, _) => b"/",
                };
                let start = self.out.text.len();
                push_escaped(path, &mut self.out.text);
                let span = Span {
                    start,
                    len: self.out.text.len() - start,
                };
                Some(self.compile(span))
            }
        };
        let members = reading.members.map(|member| match member {
            Some(member) if kind == PreferenceKind::ContentSignal => Span {
                start: text.start + member.start,
                len: member.len(),
            },
            _ => text,
        });
        self.out.statements.push(Statement {
            kind,
            line,
            text,
            pattern,
            allowed: reading.allowed,
            refused: reading.refused,
            members,
        });
        self.out.groups[group].statements.end = self.out.statements.len();
    }

    fn push(&mut self, bytes: &[u8]) -> Span {
        let start = self.out.text.len();
        self.out.text.extend_from_slice(bytes);
        Span {
            start,
            len: bytes.len(),
        }
    }

    /// Stores text meant to be shown as `&str` (sitemaps, noted keys).
    fn push_lossy(&mut self, bytes: &[u8]) -> Span {
        match String::from_utf8_lossy(bytes) {
            std::borrow::Cow::Borrowed(s) => self.push(s.as_bytes()),
            std::borrow::Cow::Owned(s) => self.push(s.as_bytes()),
        }
    }

    fn note(&mut self, line: u32, kind: NoteKind, text: &[u8]) {
        let text = self.push_lossy(text);
        self.out.diagnostics.push(Note { line, kind, text });
    }
}

/// `Request-rate: n/secs`, where secs may carry an `s`, `m` or `h` unit and
/// a time-of-day window may follow (`1/10s 0600-0845`); the window is
/// ignored.
fn parse_request_rate(value: &[u8]) -> Option<RequestRate> {
    let text = std::str::from_utf8(value).ok()?;
    let first = text.split_whitespace().next()?;
    let (n, per) = first.split_once('/')?;
    let requests: u32 = n.trim().parse().ok().filter(|&n| n > 0)?;
    let per = per.trim();
    let (number, unit) = match per.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((at, _)) => (&per[..at], &per[at..]),
        None => (per, "s"),
    };
    let scale = match unit.to_ascii_lowercase().as_str() {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let secs: f64 = number.parse().ok()?;
    let per = Duration::try_from_secs_f64(secs * scale).ok()?;
    Some(RequestRate { requests, per })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_key_prefix_and_typos() {
        let table: &[(&str, Directive, KeyMatch)] = &[
            ("user-agent", Directive::UserAgent, KeyMatch::Exact),
            ("User-Agent", Directive::UserAgent, KeyMatch::Exact),
            ("useragent", Directive::UserAgent, KeyMatch::Typo),
            ("user agent", Directive::UserAgent, KeyMatch::Typo),
            ("User-agents", Directive::UserAgent, KeyMatch::Prefix),
            ("allow", Directive::Allow, KeyMatch::Exact),
            ("Allow-all", Directive::Allow, KeyMatch::Prefix),
            ("alow", Directive::Unknown, KeyMatch::Exact),
            ("DISALLOW", Directive::Disallow, KeyMatch::Exact),
            ("Disallowed", Directive::Disallow, KeyMatch::Prefix),
            ("dissallow", Directive::Disallow, KeyMatch::Typo),
            ("dissalow", Directive::Disallow, KeyMatch::Typo),
            ("disalow", Directive::Disallow, KeyMatch::Typo),
            ("diasllow", Directive::Disallow, KeyMatch::Typo),
            ("disallaw", Directive::Disallow, KeyMatch::Typo),
            ("sitemap", Directive::Sitemap, KeyMatch::Exact),
            ("site-map", Directive::Sitemap, KeyMatch::Typo),
            ("Crawl-delay", Directive::CrawlDelay, KeyMatch::Exact),
            ("request-rate", Directive::RequestRate, KeyMatch::Exact),
            ("host", Directive::Unknown, KeyMatch::Exact),
            ("", Directive::Unknown, KeyMatch::Exact),
        ];
        for (key, directive, how) in table {
            assert_eq!(classify(key.as_bytes()), (*directive, *how), "{key:?}");
        }
    }

    #[test]
    fn ext_preference_keys_match_whole_names() {
        let table: &[(&str, Directive)] = &[
            ("Content-Signal", Directive::ContentSignal),
            ("content-signal", Directive::ContentSignal),
            ("CONTENT-USAGE", Directive::ContentUsage),
            ("Content-Usage", Directive::ContentUsage),
            // No prefix matching, no misspellings: another key stays unknown.
            ("Content-Usage-Policy", Directive::Unknown),
            ("Content-Signals", Directive::Unknown),
            ("content_usage", Directive::Unknown),
            ("content", Directive::Unknown),
            // The older `c` keys are unchanged.
            ("crawl-delay", Directive::CrawlDelay),
            ("crawl-delays", Directive::CrawlDelay),
            ("crawldelay", Directive::CrawlDelay),
        ];
        for (key, directive) in table {
            let (got, how) = classify(key.as_bytes());
            assert_eq!(got, *directive, "{key:?}");
            if matches!(got, Directive::ContentSignal | Directive::ContentUsage) {
                assert_eq!(how, KeyMatch::Exact, "{key:?}");
            }
        }
    }

    #[test]
    fn ext_request_rate_forms() {
        let rate = |s: &str| parse_request_rate(s.as_bytes()).map(|r| r.interval());
        assert_eq!(rate("1/5"), Some(Duration::from_secs(5)));
        assert_eq!(rate("1/10s 0600-0845"), Some(Duration::from_secs(10)));
        assert_eq!(rate("2/1m"), Some(Duration::from_secs(30)));
        assert_eq!(rate("1/1h"), Some(Duration::from_secs(3600)));
        assert_eq!(rate("0/5"), None);
        assert_eq!(rate("five"), None);
        assert_eq!(rate("1/5x"), None);
    }
}
