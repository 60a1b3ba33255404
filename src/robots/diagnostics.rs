//! Per-line notes about what the parser tolerated or ignored, so a site
//! owner (or `robots-guard check --explain`) can see why a line had no
//! effect. The parser never fails; this is where its complaints go
//! (the reference's `LineMetadata`).

use std::fmt;

use super::parse::Directive;
use super::{Purposes, RobotsTxt, Span};

/// What was odd about a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// A misspelling the reference accepts (`useragent`, `dissallow`, ...).
    AcceptedTypo {
        /// The directive it was taken for.
        meant: &'static str,
    },
    /// A key longer than the directive it starts with (`Disallowed`); the
    /// reference matches keys by prefix, so it counts.
    PrefixKey {
        /// The directive it was taken for.
        meant: &'static str,
    },
    /// A key this engine does not use (`Host`, `Noindex`, ...). Ignored.
    UnknownKey,
    /// `key value` with whitespace instead of a colon; accepted because the
    /// line has exactly two tokens.
    MissingColon,
    /// Text without a usable `key: value` shape. Ignored.
    NoSeparator,
    /// The line was longer than [`super::MAX_LINE_LEN`]; the rest was dropped.
    LineTooLong {
        /// How many bytes were dropped.
        dropped: usize,
    },
    /// A NUL byte ended the line's content early.
    NulByte,
    /// A rule (or crawl-delay, or preference) before any user-agent line.
    /// Ignored.
    RuleOutsideGroup,
    /// A `Crawl-delay` or `Request-rate` value that is not a number/rate, or
    /// a `Content-Signal` or `Content-Usage` line with no preference in it.
    InvalidValue {
        /// The directive whose value was rejected.
        key: &'static str,
    },
    /// A member of a `Content-Signal` or `Content-Usage` value that is not a
    /// name with a yes/no value (`search=maybe`, `train-ai`, `x y`). Skipped;
    /// the line's other members count.
    PreferenceSkipped {
        /// `content-signal` or `content-usage`.
        key: &'static str,
    },
    /// A `Content-Signal` name or `Content-Usage` label this engine does not
    /// know. Ignored, as draft-ietf-aipref-vocab asks of unknown labels.
    UnknownLabel {
        /// `content-signal` or `content-usage`.
        key: &'static str,
    },
    /// A name or label given twice on one line: for `content-usage` the last
    /// value counts (RFC 9651), for `content-signal` the most restrictive.
    DuplicateLabel {
        /// `content-signal` or `content-usage`.
        key: &'static str,
    },
    /// A `Content-Usage` label of an earlier draft-ietf-aipref-vocab
    /// revision (`ai`, `train-genai`, ...), read as the purposes it covers.
    OlderLabel {
        /// The purposes it is read as.
        covers: Purposes,
    },
}

/// What a preference line calls its keys.
fn label_word(key: &str) -> &'static str {
    if key == "content-signal" {
        "name"
    } else {
        "label"
    }
}

/// One note about one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Diagnostic<'a> {
    /// 1-based line number.
    pub line: u32,
    /// What was odd.
    pub kind: DiagnosticKind,
    /// The key or value concerned (empty when not relevant).
    pub text: &'a str,
}

impl fmt::Display for Diagnostic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        match self.kind {
            DiagnosticKind::AcceptedTypo { meant } => {
                write!(f, "`{}` accepted as a misspelling of `{meant}`", self.text)
            }
            DiagnosticKind::PrefixKey { meant } => {
                write!(
                    f,
                    "`{}` read as `{meant}` (keys match by prefix)",
                    self.text
                )
            }
            DiagnosticKind::UnknownKey => write!(f, "unknown key `{}` ignored", self.text),
            DiagnosticKind::MissingColon => {
                write!(
                    f,
                    "no colon after `{}`; whitespace accepted instead",
                    self.text
                )
            }
            DiagnosticKind::NoSeparator => write!(f, "no `key: value` on this line; ignored"),
            DiagnosticKind::LineTooLong { dropped } => write!(
                f,
                "line longer than {} bytes; the last {dropped} bytes were dropped",
                super::MAX_LINE_LEN
            ),
            DiagnosticKind::NulByte => write!(f, "NUL byte ends the line here"),
            DiagnosticKind::RuleOutsideGroup => {
                write!(f, "rule before any user-agent line; ignored")
            }
            DiagnosticKind::InvalidValue { key } => {
                write!(f, "invalid {key} value `{}` ignored", self.text)
            }
            DiagnosticKind::PreferenceSkipped { key } => write!(
                f,
                "{key} member `{}` is not a {} with a yes/no value; skipped",
                self.text,
                label_word(key)
            ),
            DiagnosticKind::UnknownLabel { key } => write!(
                f,
                "unknown {key} {} `{}` ignored",
                label_word(key),
                self.text
            ),
            DiagnosticKind::DuplicateLabel { key } => {
                let counts = if key == "content-signal" {
                    "the most restrictive value counts"
                } else {
                    "the last value counts"
                };
                write!(
                    f,
                    "{key} {} `{}` given twice; {counts}",
                    label_word(key),
                    self.text
                )
            }
            DiagnosticKind::OlderLabel { covers } => write!(
                f,
                "content-usage label `{}` is from an earlier AIPREF vocabulary draft; \
                 read as {covers}",
                self.text
            ),
        }
    }
}

/// Compact stored form of a [`Diagnostic`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Note {
    pub line: u32,
    pub kind: NoteKind,
    pub text: Span,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum NoteKind {
    AcceptedTypo(Directive),
    PrefixKey(Directive),
    UnknownKey,
    MissingColon,
    NoSeparator,
    LineTooLong { dropped: usize },
    NulByte,
    RuleOutsideGroup,
    InvalidValue(Directive),
    PreferenceSkipped(Directive),
    UnknownLabel(Directive),
    DuplicateLabel(Directive),
    OlderLabel(Purposes),
}

fn directive_name(d: Directive) -> &'static str {
    match d {
        Directive::UserAgent => "user-agent",
        Directive::Allow => "allow",
        Directive::Disallow => "disallow",
        Directive::Sitemap => "sitemap",
        Directive::CrawlDelay => "crawl-delay",
        Directive::RequestRate => "request-rate",
        Directive::ContentSignal => "content-signal",
        Directive::ContentUsage => "content-usage",
        Directive::Unknown => "unknown",
    }
}

impl Note {
    pub(super) fn view<'a>(&self, robots: &'a RobotsTxt) -> Diagnostic<'a> {
        let kind = match self.kind {
            NoteKind::AcceptedTypo(d) => DiagnosticKind::AcceptedTypo {
                meant: directive_name(d),
            },
            NoteKind::PrefixKey(d) => DiagnosticKind::PrefixKey {
                meant: directive_name(d),
            },
            NoteKind::UnknownKey => DiagnosticKind::UnknownKey,
            NoteKind::MissingColon => DiagnosticKind::MissingColon,
            NoteKind::NoSeparator => DiagnosticKind::NoSeparator,
            NoteKind::LineTooLong { dropped } => DiagnosticKind::LineTooLong { dropped },
            NoteKind::NulByte => DiagnosticKind::NulByte,
            NoteKind::RuleOutsideGroup => DiagnosticKind::RuleOutsideGroup,
            NoteKind::InvalidValue(d) => DiagnosticKind::InvalidValue {
                key: directive_name(d),
            },
            NoteKind::PreferenceSkipped(d) => DiagnosticKind::PreferenceSkipped {
                key: directive_name(d),
            },
            NoteKind::UnknownLabel(d) => DiagnosticKind::UnknownLabel {
                key: directive_name(d),
            },
            NoteKind::DuplicateLabel(d) => DiagnosticKind::DuplicateLabel {
                key: directive_name(d),
            },
            NoteKind::OlderLabel(covers) => DiagnosticKind::OlderLabel { covers },
        };
        Diagnostic {
            line: self.line,
            kind,
            text: robots.str_at(self.text),
        }
    }
}
