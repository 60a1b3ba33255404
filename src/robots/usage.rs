//! AI-use preferences: what a site says its content may be used for.
//!
//! Sites state preferences about AI use in robots.txt with two extension
//! lines, read inside a group like `Crawl-delay`:
//!
//! - `Content-Signal: search=yes, ai-input=no, ai-train=no` (the Content
//!   Signals vocabulary, draft-romm-aipref-contentsignals): a comma-separated
//!   list of `name=yes|no` for the whole group.
//! - `Content-Usage: [path] train-ai=n, search=y` (draft-ietf-aipref-attach
//!   for the line, draft-ietf-aipref-vocab for the labels): an optional path,
//!   then an RFC 9651 dictionary of `label=y|n`. The path matches like an
//!   `Allow`/`Disallow` pattern (`*`, a final `$`, percent-normalised, the
//!   longest match wins); no path means `/`.
//!
//! Both map onto one set of [`Purpose`]s, so a robot declares what it will do
//! (`ai-train`) and the engine answers from whichever vocabulary the site
//! used ([`crate::robots::AgentRules::usage`]).
//!
//! # Group structure is untouched
//!
//! Neither line starts or ends a group, and neither changes a verdict of
//! `Allow`/`Disallow`: Google's reference ignores both keys, and the
//! engine's crawl verdicts stay Google's. They apply to the groups the agent
//! selects, exactly as the rules do (a group naming the agent replaces the
//! `*` groups; all groups naming it are merged). A line before any
//! user-agent line is noted and ignored, as a rule there is.
//!
//! # Keys
//!
//! `Content-Signal` and `Content-Usage` are recognised with ASCII case
//! ignored and blanks trimmed, like every key, but by their whole name:
//! unlike Google's keys they do not match by prefix. Prefix matching is a
//! tolerance the reference keeps for old files (`Disallowed`); these keys
//! are new, and reading `Content-Usage-Policy` (or any future key that
//! starts with one of them) as a refusal would turn an unrelated line into
//! one. A longer key stays an unknown key, noted as such.
//!
//! # Values
//!
//! Both forms are read member by member, comma-separated (commas inside a
//! quoted string do not separate), and a member that cannot be read is
//! skipped with a diagnostic instead of failing the line; RFC 9651 would
//! fail the whole dictionary, which would drop the members the site did
//! write correctly. A member is a key, `=`, and a value, then optional RFC
//! 9651 parameters, which are ignored (draft-ietf-aipref-vocab: unknown
//! parameters MUST be ignored). Tolerated beyond RFC 9651, because a site
//! that writes them means the same thing:
//!
//! - keys and values in any ASCII case (`Train-AI=N`), blanks around `=`;
//! - `yes`/`no` and `y`/`n` in both forms (Content Signals writes the
//!   words, AIPREF the letters);
//! - a value as a bare token (`n`) or a quoted string (`"n"`), and the RFC
//!   9651 booleans `?1` (yes) and `?0` (no). draft-ietf-aipref-vocab reads
//!   only the tokens `y` and `n` and leaves anything else unknown, but a site
//!   that quotes its `n` or writes `?0` still means no, and a proxy that
//!   enforces preferences should not let it through. A bare key, which RFC
//!   9651 reads as `?1`, states nothing: it is noted and skipped.
//!
//! `Content-Signal` has no path: it speaks for the whole group, and a value
//! that starts with one is a member that cannot be read.
//!
//! A `Content-Usage` label given twice counts once, with its last value
//! (RFC 9651 §4.2.2; draft-ietf-aipref-vocab, "Multiple Preferences"). A
//! `Content-Signal` name given twice counts with its most restrictive
//! value, as separate statements do. Both are noted.
//!
//! # Labels
//!
//! `Content-Signal` names are the purposes themselves: `search`,
//! `ai-input`, `ai-train`. `Content-Usage` labels changed between drafts
//! of draft-ietf-aipref-vocab, and files written against each are in use,
//! so every label a draft defined is read, older ones with a note:
//!
//! | label | defined in draft-ietf-aipref-vocab | names | also covers (when not named on the line) |
//! |---|---|---|---|
//! | `train-ai` | -02 to now | ai-train | |
//! | `search` | -01 to now | search | |
//! | `ai-use` | -02 (AI Use: input to a model as it runs) | ai-input | |
//! | `ai-output` | -04 (AI Output; Search is part of it) | ai-input | search |
//! | `train-genai` | -02, -03 (part of AI Training) | ai-train | |
//! | `genai` | -01 (part of AI Training) | ai-train | |
//! | `inference` | -01 (AI Inference) | ai-input | |
//! | `ai` | -01 (AI Training); the `ai=n` examples of draft-ietf-aipref-attach-00 and -01 | ai-train | ai-input |
//! | `tdm` | -01 (Text and Data Mining) | | ai-train, ai-input |
//! | `all` | -02 (Automated Processing) | | search, ai-input, ai-train |
//! | `bots` | -03, -04 (Automated Processing) | | search, ai-input, ai-train |
//!
//! "Names" is the purpose the label is about; "also covers" is what the
//! drafts made a broader category of: it decides a purpose only when no
//! label on the same line names that purpose (the drafts' "if the category
//! is a proper subset of another, use that one's preference"), so
//! `bots=n, search=y` refuses AI training and allows search. Why:
//!
//! - `ai` is read as AI use in general, not only training: -01 defined it as
//!   AI Training, but the attachment drafts of the time used `ai=n` as their
//!   example of a site saying no to AI, which is how sites copied it; a site
//!   that meant training only can add `inference=y` (or `ai-use=y`).
//! - `tdm` does not cover search: -00 and -01 say a statement in this
//!   vocabulary shall not be read as restricting search.
//! - `ai-output` covers search: -04 made Search a part of AI Output.
//! - `train-genai` and `genai` name a part of AI training; a robot that
//!   declares `ai-train` cannot say which part, so either refuses it.
//!
//! Labels no draft defined are ignored and noted (draft-ietf-aipref-vocab:
//! unknown labels MUST be ignored); so are unknown `Content-Signal` names
//! (Cloudflare writes `use=...` beside the three signals).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use super::diagnostics::NoteKind;
use super::lex::trim;
use super::matcher::Scope;
use super::parse::Directive;
use super::pattern::{Path, Pattern};
use super::{Group, RobotsTxt, Statement};

/// A use a robot may declare for what it fetches. The names are those of
/// the Content Signals vocabulary (draft-romm-aipref-contentsignals); the
/// AIPREF labels (draft-ietf-aipref-vocab) map onto them, by the table in
/// the documentation of `src/robots/usage.rs`, which also says how both
/// lines are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// `search`: building a search index and showing results that link to
    /// the content.
    Search,
    /// `ai-input`: giving the content to an AI model as it answers
    /// (retrieval-augmented generation, grounding).
    AiInput,
    /// `ai-train`: training or fine-tuning an AI model.
    AiTrain,
}

impl Purpose {
    /// Every purpose, in the order sets list them.
    pub const ALL: [Purpose; 3] = [Purpose::Search, Purpose::AiInput, Purpose::AiTrain];

    /// The name as written in `Content-Signal` and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Search => "search",
            Purpose::AiInput => "ai-input",
            Purpose::AiTrain => "ai-train",
        }
    }

    /// The purpose called `name` (ASCII case ignored), if any.
    pub fn from_name(name: &str) -> Option<Purpose> {
        Purpose::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Purpose`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Purposes(u8);

impl Purposes {
    /// No purpose: a usage check with it never refuses.
    pub const NONE: Purposes = Purposes(0);

    /// Every purpose.
    pub const ALL: Purposes = Purposes(0b111);

    /// Is `purpose` in the set?
    pub fn contains(self, purpose: Purpose) -> bool {
        self.0 & purpose.bit() != 0
    }

    /// The set with `purpose` added.
    #[must_use]
    pub fn with(self, purpose: Purpose) -> Purposes {
        Purposes(self.0 | purpose.bit())
    }

    /// The purposes in either set.
    #[must_use]
    pub fn union(self, other: Purposes) -> Purposes {
        Purposes(self.0 | other.0)
    }

    /// The purposes in both sets.
    #[must_use]
    pub fn intersection(self, other: Purposes) -> Purposes {
        Purposes(self.0 & other.0)
    }

    /// Is the set empty?
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The purposes in the set, in [`Purpose::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Purpose> {
        Purpose::ALL.into_iter().filter(move |p| self.contains(*p))
    }
}

impl FromIterator<Purpose> for Purposes {
    fn from_iter<I: IntoIterator<Item = Purpose>>(iter: I) -> Purposes {
        iter.into_iter().fold(Purposes::NONE, Purposes::with)
    }
}

impl fmt::Display for Purposes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, purpose) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(purpose.name())?;
        }
        Ok(())
    }
}

/// A name in a purpose list that is no [`Purpose`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPurpose {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for UnknownPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown purpose `{}`; expected any of {}",
            self.name,
            Purposes::ALL
        )
    }
}

impl std::error::Error for UnknownPurpose {}

impl FromStr for Purposes {
    type Err = UnknownPurpose;

    /// Reads a comma-separated list (`ai-train, ai-input`); blanks around
    /// names and empty items are skipped, so `""` is [`Purposes::NONE`].
    fn from_str(list: &str) -> Result<Purposes, UnknownPurpose> {
        list.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| {
                Purpose::from_name(name).ok_or_else(|| UnknownPurpose {
                    name: name.to_owned(),
                })
            })
            .collect()
    }
}

/// Which line a preference came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreferenceKind {
    /// `Content-Signal:` (draft-romm-aipref-contentsignals).
    ContentSignal,
    /// `Content-Usage:` (draft-ietf-aipref-attach).
    ContentUsage,
}

impl PreferenceKind {
    /// The key as written in robots.txt, lower-cased.
    pub fn as_str(self) -> &'static str {
        match self {
            PreferenceKind::ContentSignal => "content-signal",
            PreferenceKind::ContentUsage => "content-usage",
        }
    }

    pub(super) fn directive(self) -> Directive {
        match self {
            PreferenceKind::ContentSignal => Directive::ContentSignal,
            PreferenceKind::ContentUsage => Directive::ContentUsage,
        }
    }
}

impl fmt::Display for PreferenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `Content-Signal` or `Content-Usage` line of a group that applies to
/// the agent ([`crate::robots::AgentRules::preferences`]), for listing what
/// the site states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preference<'a> {
    /// Which line it is.
    pub kind: PreferenceKind,
    /// The value as written: `search=yes, ai-train=no`, `/news/ train-ai=n`.
    pub text: &'a str,
    /// `Content-Usage`: the path pattern it applies under, percent-normalised
    /// as it is matched (`/` when the line has none). `None` for
    /// `Content-Signal`, which applies to the whole group.
    pub path: Option<&'a str>,
    /// The purposes the line allows.
    pub allowed: Purposes,
    /// The purposes the line refuses.
    pub refused: Purposes,
    /// 1-based line in the robots.txt.
    pub line: u32,
    /// Line of the first `User-agent:` of the group holding it.
    pub group_line: u32,
}

impl fmt::Display for Preference<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.text)
    }
}

impl Statement {
    fn view<'a>(&self, robots: &'a RobotsTxt, group_line: u32) -> Preference<'a> {
        Preference {
            kind: self.kind,
            text: robots.str_at(self.text),
            path: self.pattern.map(|p| robots.str_at(p.span)),
            allowed: self.allowed,
            refused: self.refused,
            line: self.line,
            group_line,
        }
    }
}

/// The statements of `groups`, in file order, for listing.
pub(super) fn preferences<'a, 'g>(
    robots: &'a RobotsTxt,
    groups: &'g [&'a Group],
) -> impl Iterator<Item = Preference<'a>> + 'g
where
    'a: 'g,
{
    groups.iter().flat_map(move |group| {
        robots.statements[group.statements.clone()]
            .iter()
            .map(move |statement| statement.view(robots, group.line))
    })
}

/// The statement that decided a [`UsageVerdict`], named as a
/// [`crate::robots::MatchedRule`] names an allow/disallow line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedPreference<'a> {
    /// Which line it is on.
    pub kind: PreferenceKind,
    /// The statement as written: for `Content-Usage` the whole value
    /// (`/news/ train-ai=n`), for `Content-Signal` the member that refused
    /// (`ai-train=no`).
    pub text: &'a str,
    /// 1-based line in the robots.txt.
    pub line: u32,
    /// Line of the first `User-agent:` of the group holding it.
    pub group_line: u32,
}

impl fmt::Display for MatchedPreference<'_> {
    /// `content-usage: /news/ train-ai=n`, as `check` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.text)
    }
}

/// A purpose the site refuses, and the statement that refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageRefusal<'a> {
    /// The refused purpose (the first in [`Purpose::ALL`] order when several
    /// asked purposes are refused).
    pub purpose: Purpose,
    /// The deciding statement.
    pub statement: MatchedPreference<'a>,
}

/// The answer of [`crate::robots::AgentRules::usage`] for one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageVerdict<'a> {
    /// `Some` when the site refuses an asked purpose for the path.
    pub refusal: Option<UsageRefusal<'a>>,
    /// Which groups applied (as for the allow/disallow verdict).
    pub scope: Scope,
}

impl UsageVerdict<'_> {
    /// Does the site refuse none of the asked purposes? A purpose the site
    /// says nothing about is not refused.
    pub fn allowed(&self) -> bool {
        self.refusal.is_none()
    }
}

/// The usage verdict for `path` with the statements of `groups`: for each
/// asked purpose, the statements that apply are every `Content-Signal` of
/// the groups and the `Content-Usage` lines with the longest matching path
/// (draft-ietf-aipref-attach: the same longest-prefix rule as Allow and
/// Disallow, over all the groups, as for rules); any of them refusing the
/// purpose refuses it (draft-ietf-aipref-vocab, "Combining Preferences":
/// the most restrictive applies). The first refusing statement in file
/// order is named.
pub(super) fn decide<'a>(
    robots: &'a RobotsTxt,
    groups: &[&'a Group],
    scope: Scope,
    path: &[u8],
    purposes: Purposes,
) -> UsageVerdict<'a> {
    let allowed = UsageVerdict {
        refusal: None,
        scope,
    };
    let statements = |group: &'a Group| &robots.statements[group.statements.clone()];
    if purposes.is_empty() || groups.iter().all(|g| statements(g).is_empty()) {
        return allowed;
    }
    let path = Path::new(path);
    let (text, wildcards) = (&robots.text[..], &robots.wildcards);
    let matches = |pattern: &Pattern| pattern.matches(text, wildcards, path);
    let mut longest = None;
    for group in groups {
        for pattern in statements(group).iter().filter_map(|s| s.pattern.as_ref()) {
            if longest.is_none_or(|len| pattern.len() > len) && matches(pattern) {
                longest = Some(pattern.len());
            }
        }
    }
    let applies = |statement: &Statement| match &statement.pattern {
        None => true,
        Some(pattern) => Some(pattern.len()) == longest && matches(pattern),
    };
    for (slot, purpose) in Purpose::ALL.into_iter().enumerate() {
        if !purposes.contains(purpose) {
            continue;
        }
        for group in groups {
            let refusing = statements(group)
                .iter()
                .find(|s| s.refused.contains(purpose) && applies(s));
            if let Some(statement) = refusing {
                return UsageVerdict {
                    refusal: Some(UsageRefusal {
                        purpose,
                        statement: MatchedPreference {
                            kind: statement.kind,
                            text: robots.str_at(statement.members[slot]),
                            line: statement.line,
                            group_line: group.line,
                        },
                    }),
                    scope,
                };
            }
        }
    }
    allowed
}

/// A name a preference line may state, and the purposes it decides.
struct Label {
    name: &'static str,
    /// The purposes the label is about.
    names: Purposes,
    /// The purposes it is a broader category of: decided by it only when
    /// no label on the line names them.
    covers: Purposes,
    /// Defined only by drafts that are no longer current.
    older: bool,
}

const fn purposes(list: &[Purpose]) -> Purposes {
    let mut bits = 0;
    let mut i = 0;
    while i < list.len() {
        bits |= 1 << (list[i] as u8);
        i += 1;
    }
    Purposes(bits)
}

const fn label(name: &'static str, names: &[Purpose], covers: &[Purpose], older: bool) -> Label {
    Label {
        name,
        names: purposes(names),
        covers: purposes(covers),
        older,
    }
}

use Purpose::{AiInput, AiTrain, Search};

/// `Content-Signal` names (draft-romm-aipref-contentsignals).
const SIGNAL_NAMES: [Label; 3] = [
    label("search", &[Search], &[], false),
    label("ai-input", &[AiInput], &[], false),
    label("ai-train", &[AiTrain], &[], false),
];

/// `Content-Usage` labels of every draft-ietf-aipref-vocab revision; see
/// the module documentation for the table and its reasons.
const USAGE_LABELS: [Label; 11] = [
    label("train-ai", &[AiTrain], &[], false),
    label("search", &[Search], &[], false),
    label("ai-use", &[AiInput], &[], true),
    label("ai-output", &[AiInput], &[Search], true),
    label("train-genai", &[AiTrain], &[], true),
    label("genai", &[AiTrain], &[], true),
    label("inference", &[AiInput], &[], true),
    label("ai", &[AiTrain], &[AiInput], true),
    label("tdm", &[], &[AiTrain, AiInput], true),
    label("all", &[], &[Search, AiInput, AiTrain], true),
    label("bots", &[], &[Search, AiInput, AiTrain], true),
];

/// What one preference line states, with byte ranges into its value.
#[derive(Debug, Default)]
pub(super) struct Reading {
    /// `Content-Usage`: where the path is, when one was written.
    pub path: Option<Range<usize>>,
    /// Purposes stated as allowed (and not refused).
    pub allowed: Purposes,
    /// Purposes stated as refused.
    pub refused: Purposes,
    /// `Content-Signal`: for each purpose (in [`Purpose::ALL`] order), the
    /// member that decided it. `Content-Usage` lines decide as a whole.
    pub members: [Option<Range<usize>>; 3],
    /// What to note about the line, with the text each note is about.
    pub notes: Vec<(NoteKind, Range<usize>)>,
    /// There was no preference to read (an empty value, or a path alone).
    pub empty: bool,
}

/// The members of a `Content-Usage` response header (draft-ietf-aipref-attach:
/// an RFC 9651 dictionary of the same labels as the robots.txt line, no
/// path) that refuse one of `purposes`, as the origin wrote them; empty when
/// it refuses none. The header as a whole decides what is refused (a
/// broader label gives way to a narrower one on the same line, as on the
/// robots.txt line); the members named are those that refuse it alone.
pub fn refusing_members(header: &str, purposes: Purposes) -> Vec<&str> {
    let value = header.as_bytes();
    let refused = read(PreferenceKind::ContentUsage, value, 0..value.len())
        .refused
        .intersection(purposes);
    if refused.is_empty() {
        return Vec::new();
    }
    split_members(value, 0..value.len())
        .into_iter()
        .filter(|member| {
            !read(PreferenceKind::ContentUsage, value, member.clone())
                .refused
                .intersection(refused)
                .is_empty()
        })
        .filter_map(|member| header.get(member).map(str::trim))
        .collect()
}

/// Reads a `Content-Signal` value (no path; names are the purposes).
pub(super) fn read_signal(value: &[u8]) -> Reading {
    read(PreferenceKind::ContentSignal, value, 0..value.len())
}

/// Reads a `Content-Usage` value: a path if it starts with one, then the
/// dictionary (draft-ietf-aipref-attach, "Processing Content-Usage Rules").
pub(super) fn read_usage(value: &[u8]) -> Reading {
    let (path, rest) = split_path(value);
    let mut reading = read(PreferenceKind::ContentUsage, value, rest);
    reading.path = path;
    reading
}

/// Splits a `Content-Usage` value into its path, if any, and the rest. A
/// path starts with `/` (draft-ietf-aipref-attach) or, as Google's patterns
/// may, with `*` when that first word cannot be a dictionary member (no
/// `=`, `,` or `;`); it ends at the first space or tab.
pub(super) fn split_path(value: &[u8]) -> (Option<Range<usize>>, Range<usize>) {
    let end = value
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(value.len());
    let is_path = match value.first() {
        Some(b'/') => true,
        Some(b'*') => end < value.len() && !value[..end].iter().any(|b| b"=,;".contains(b)),
        _ => false,
    };
    if is_path {
        (Some(0..end), end..value.len())
    } else {
        (None, 0..value.len())
    }
}

/// One member's stated value, as kept while a line is read.
#[derive(Clone)]
struct Stated {
    allowed: bool,
    member: Range<usize>,
}

fn read(kind: PreferenceKind, value: &[u8], within: Range<usize>) -> Reading {
    let directive = kind.directive();
    let labels: &[Label] = match kind {
        PreferenceKind::ContentSignal => &SIGNAL_NAMES,
        PreferenceKind::ContentUsage => &USAGE_LABELS,
    };
    let mut reading = Reading::default();
    // Per label: the value that counts and the member that gave it.
    let mut stated: Vec<Option<Stated>> = vec![None; labels.len()];
    let mut members = 0;
    for member in split_members(value, within) {
        members += 1;
        let (key, allowed) = read_member(&value[member.clone()]);
        let Some(key) = key else {
            reading
                .notes
                .push((NoteKind::PreferenceSkipped(directive), member));
            continue;
        };
        let Some(index) = labels
            .iter()
            .position(|l| l.name.as_bytes().eq_ignore_ascii_case(key))
        else {
            reading
                .notes
                .push((NoteKind::UnknownLabel(directive), member));
            continue;
        };
        let Some(allowed) = allowed else {
            reading
                .notes
                .push((NoteKind::PreferenceSkipped(directive), member));
            continue;
        };
        let key_range = member.start..member.start + key.len();
        if labels[index].older {
            let label = &labels[index];
            let covers = label.names.union(label.covers);
            reading
                .notes
                .push((NoteKind::OlderLabel(covers), key_range.clone()));
        }
        let slot = &mut stated[index];
        if let Some(earlier) = slot {
            reading
                .notes
                .push((NoteKind::DuplicateLabel(directive), key_range));
            // Content-Usage: the last value counts (RFC 9651). Content-Signal:
            // a `no` given anywhere counts.
            if kind == PreferenceKind::ContentSignal && !earlier.allowed {
                continue;
            }
        }
        *slot = Some(Stated { allowed, member });
    }
    if members == 0 {
        reading.empty = true;
        return reading;
    }
    for (slot, purpose) in Purpose::ALL.into_iter().enumerate() {
        let decided = |by: fn(&Label) -> Purposes| {
            let mut decided: Option<&Stated> = None;
            for (label, value) in labels.iter().zip(&stated) {
                let Some(value) = value else { continue };
                if !by(label).contains(purpose) {
                    continue;
                }
                // Most restrictive among the labels that decide it; the first
                // refusing member names the refusal.
                if decided.is_none_or(|d| d.allowed && !value.allowed) {
                    decided = Some(value);
                }
            }
            decided
        };
        let Some(decided) = decided(|l| l.names).or_else(|| decided(|l| l.covers)) else {
            continue;
        };
        if decided.allowed {
            reading.allowed = reading.allowed.with(purpose);
        } else {
            reading.refused = reading.refused.with(purpose);
        }
        reading.members[slot] = Some(decided.member.clone());
    }
    reading
}

/// The non-empty members of `value[within]`: split at commas outside
/// quoted strings, blanks trimmed.
fn split_members(value: &[u8], within: Range<usize>) -> Vec<Range<usize>> {
    let mut members = Vec::new();
    let mut start = within.start;
    let mut quoted = false;
    let mut escaped = false;
    let mut push = |start: usize, end: usize| {
        let raw = &value[start..end];
        let trimmed = trim(raw);
        if !trimmed.is_empty() {
            let lead = raw.len() - trim_start(raw).len();
            members.push(start + lead..start + lead + trimmed.len());
        }
    };
    for at in within.clone() {
        let b = value[at];
        if quoted {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => quoted = false,
                _ => {}
            }
        } else if b == b'"' {
            quoted = true;
        } else if b == b',' {
            push(start, at);
            start = at + 1;
        }
    }
    push(start, within.end);
    members
}

fn trim_start(s: &[u8]) -> &[u8] {
    let blanks = s.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[blanks..]
}

/// A dictionary key's bytes (RFC 9651 §3.2, any case).
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'*')
}

/// A token's bytes (RFC 9651 §3.3.4: `tchar`, `:` and `/`).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b)
}

/// `yes`, `y` (true) or `no`, `n` (false), any case.
fn yes_no(word: &[u8]) -> Option<bool> {
    match word.len() {
        1 | 3 if word.eq_ignore_ascii_case(b"y") || word.eq_ignore_ascii_case(b"yes") => Some(true),
        1 | 2 if word.eq_ignore_ascii_case(b"n") || word.eq_ignore_ascii_case(b"no") => Some(false),
        _ => None,
    }
}

/// Reads one member: its key (`None` when it has no readable key) and its
/// yes/no value (`None` when it has none that can be read).
fn read_member(member: &[u8]) -> (Option<&[u8]>, Option<bool>) {
    let key_len = member.iter().take_while(|&&b| is_key_byte(b)).count();
    let key = &member[..key_len];
    if !key
        .first()
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'*')
    {
        return (None, None);
    }
    let rest = trim_start(&member[key_len..]);
    let Some(rest) = rest.strip_prefix(b"=") else {
        // A bare key (RFC 9651's `?1`) states nothing; anything else
        // after a key is no member at all.
        let bare = rest.is_empty() || rest[0] == b';';
        return (bare.then_some(key), None);
    };
    let rest = trim_start(rest);
    let (value, after) = match rest.first() {
        Some(b'"') => read_string(&rest[1..]),
        Some(b'?') => match rest.get(1) {
            Some(b'1') => (Some(true), &rest[2..]),
            Some(b'0') => (Some(false), &rest[2..]),
            _ => (None, rest),
        },
        _ => {
            let len = rest.iter().take_while(|&&b| is_token_byte(b)).count();
            (yes_no(&rest[..len]), &rest[len..])
        }
    };
    // Only parameters (ignored) may follow the value.
    let after = trim_start(after);
    let clean = after.is_empty() || after[0] == b';';
    (Some(key), value.filter(|_| clean))
}

/// A quoted string's yes/no value and what follows its closing quote;
/// `rest` starts after the opening quote.
fn read_string(rest: &[u8]) -> (Option<bool>, &[u8]) {
    let mut content = Vec::new();
    let mut escaped = false;
    for (at, &b) in rest.iter().enumerate() {
        match (escaped, b) {
            (true, _) => {
                content.push(b);
                escaped = false;
            }
            (false, b'\\') => escaped = true,
            (false, b'"') => return (yes_no(&content), &rest[at + 1..]),
            (false, _) => content.push(b),
        }
    }
    // Unterminated: nothing to read.
    (None, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_purpose_names_round_trip() {
        for purpose in Purpose::ALL {
            assert_eq!(Purpose::from_name(purpose.name()), Some(purpose));
        }
        assert_eq!(Purpose::from_name("AI-Train"), Some(Purpose::AiTrain));
        assert_eq!(Purpose::from_name("train-ai"), None);
    }

    #[test]
    fn ext_purpose_sets() {
        let set = Purposes::NONE.with(Purpose::AiTrain).with(Purpose::Search);
        assert!(set.contains(Purpose::Search) && !set.contains(Purpose::AiInput));
        assert_eq!(set.to_string(), "search, ai-train");
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Purpose::Search, Purpose::AiTrain]
        );
        assert_eq!(
            Purpose::ALL.into_iter().collect::<Purposes>(),
            Purposes::ALL
        );
        assert_eq!(Purposes::ALL.to_string(), "search, ai-input, ai-train");
        assert!(Purposes::NONE.is_empty() && Purposes::NONE.to_string().is_empty());
        assert_eq!(
            set.union(Purposes::NONE.with(Purpose::AiInput)),
            Purposes::ALL
        );
    }

    /// The reading of a line as (allowed, refused, notes with their text).
    fn read_line(kind: PreferenceKind, value: &str) -> (String, String, Vec<String>) {
        let reading = match kind {
            PreferenceKind::ContentSignal => read_signal(value.as_bytes()),
            PreferenceKind::ContentUsage => read_usage(value.as_bytes()),
        };
        let notes = reading
            .notes
            .iter()
            .map(|(kind, range)| format!("{kind:?} {}", &value[range.clone()]))
            .collect();
        (
            reading.allowed.to_string(),
            reading.refused.to_string(),
            notes,
        )
    }

    fn stated(kind: PreferenceKind, value: &str) -> (String, String) {
        let (allowed, refused, _) = read_line(kind, value);
        (allowed, refused)
    }

    fn pair(allowed: &str, refused: &str) -> (String, String) {
        (allowed.to_owned(), refused.to_owned())
    }

    #[test]
    fn ext_signal_values_tolerated() {
        let signal = |v| stated(PreferenceKind::ContentSignal, v);
        let table: &[(&str, (&str, &str))] = &[
            (
                "search=yes, ai-input=no, ai-train=no",
                ("search", "ai-input, ai-train"),
            ),
            ("search=yes,ai-train=no", ("search", "ai-train")),
            ("Search=YES , AI-Train = No", ("search", "ai-train")),
            ("ai-train=n, ai-input=y", ("ai-input", "ai-train")),
            ("ai-train=\"no\"", ("", "ai-train")),
            ("ai-train=?0, search=?1", ("search", "ai-train")),
            (
                "ai-train=no;reason=\"x, y\", search=yes",
                ("search", "ai-train"),
            ),
            // Unknown names, broken members and values are skipped.
            ("search=yes, use=reference", ("search", "")),
            ("ai-train=maybe, search", ("", "")),
            ("ai-train=no x, search=yes", ("search", "")),
            ("ai-train=\"no", ("", "")),
            // A name given twice: any `no` counts.
            ("ai-train=no, ai-train=yes", ("", "ai-train")),
            ("ai-train=yes, ai-train=no", ("", "ai-train")),
        ];
        for (value, want) in table {
            assert_eq!(signal(value), pair(want.0, want.1), "{value:?}");
        }
    }

    #[test]
    fn ext_usage_values_and_paths() {
        let usage = |v| stated(PreferenceKind::ContentUsage, v);
        let table: &[(&str, (&str, &str))] = &[
            ("train-ai=n", ("", "ai-train")),
            ("train-ai=n, search=y", ("search", "ai-train")),
            ("/news/ train-ai=n", ("", "ai-train")),
            ("/news/\t train-ai=y ,search=n", ("ai-train", "search")),
            ("*.pdf train-ai=n", ("", "ai-train")),
            ("train-ai=N;p=1", ("", "ai-train")),
            ("train-ai=yes", ("ai-train", "")),
            // RFC 9651: the last value of a key counts.
            ("train-ai=n, train-ai=y", ("ai-train", "")),
            // Older labels; a named purpose beats a broader category.
            ("ai=n", ("", "ai-input, ai-train")),
            ("ai=n, inference=y", ("ai-input", "ai-train")),
            ("genai=n", ("", "ai-train")),
            ("train-genai=n, train-ai=y", ("", "ai-train")),
            ("ai-use=n", ("", "ai-input")),
            ("ai-output=n", ("", "search, ai-input")),
            ("ai-output=n, search=y", ("search", "ai-input")),
            ("tdm=n", ("", "ai-input, ai-train")),
            ("bots=n, search=y", ("search", "ai-input, ai-train")),
            ("all=y, train-ai=n", ("search, ai-input", "ai-train")),
            // Unknown labels are ignored.
            ("unknown=n", ("", "")),
            ("ai-train=n", ("", "")),
        ];
        for (value, want) in table {
            assert_eq!(usage(value), pair(want.0, want.1), "{value:?}");
        }
    }

    #[test]
    fn ext_notes_name_the_member() {
        let (_, _, notes) = read_line(
            PreferenceKind::ContentUsage,
            "/x train-ai=n, foo=y, search, ai=n, train-ai=y, x y",
        );
        assert_eq!(
            notes,
            [
                "UnknownLabel(ContentUsage) foo=y",
                "PreferenceSkipped(ContentUsage) search",
                "OlderLabel(Purposes(6)) ai",
                "DuplicateLabel(ContentUsage) train-ai",
                "PreferenceSkipped(ContentUsage) x y",
            ]
        );
        let empty = |kind, v: &str| match kind {
            PreferenceKind::ContentSignal => read_signal(v.as_bytes()).empty,
            PreferenceKind::ContentUsage => read_usage(v.as_bytes()).empty,
        };
        assert!(empty(PreferenceKind::ContentUsage, "/news/"));
        assert!(empty(PreferenceKind::ContentUsage, ""));
        assert!(empty(PreferenceKind::ContentSignal, " , "));
        assert!(!empty(PreferenceKind::ContentSignal, "x"));
    }

    #[test]
    fn ext_paths_split_where_the_draft_says() {
        fn split(v: &str) -> (Option<&str>, &str) {
            let (path, rest) = split_path(v.as_bytes());
            (path.map(|p| &v[p]), v[rest].trim())
        }
        assert_eq!(split("/news/ train-ai=n"), (Some("/news/"), "train-ai=n"));
        assert_eq!(split("/ train-ai=n"), (Some("/"), "train-ai=n"));
        assert_eq!(split("/news/"), (Some("/news/"), ""));
        assert_eq!(split("train-ai=n"), (None, "train-ai=n"));
        assert_eq!(split("*/a$ search=y"), (Some("*/a$"), "search=y"));
        // `*` that can be a dictionary key is not a path.
        assert_eq!(split("*x=y"), (None, "*x=y"));
        assert_eq!(split("*"), (None, "*"));
    }

    #[test]
    fn ext_purpose_lists_parse() {
        assert_eq!("".parse(), Ok(Purposes::NONE));
        assert_eq!(
            " ai-train , ai-input,".parse(),
            Ok(Purposes::NONE.with(Purpose::AiTrain).with(Purpose::AiInput))
        );
        let error = "search,train-ai".parse::<Purposes>().unwrap_err();
        assert_eq!(error.name, "train-ai");
        assert_eq!(
            error.to_string(),
            "unknown purpose `train-ai`; expected any of search, ai-input, ai-train"
        );
    }

    #[test]
    fn a_content_usage_header_names_the_members_that_refuse() {
        let train = Purposes::NONE.with(Purpose::AiTrain);
        assert_eq!(
            refusing_members("search=y, train-ai=n", train),
            ["train-ai=n"]
        );
        assert!(
            refusing_members("search=y, train-ai=n", Purposes::NONE.with(Purpose::Search))
                .is_empty()
        );
        // The narrower label on the line decides: `search=y` keeps search
        // allowed, `bots=n` refuses the rest.
        assert_eq!(refusing_members("bots=n, search=y", train), ["bots=n"]);
        assert!(
            refusing_members("bots=n, search=y", Purposes::NONE.with(Purpose::Search)).is_empty()
        );
        assert!(refusing_members("", train).is_empty());
        assert_eq!(
            refusing_members("Train-AI=\"n\";x=1", train),
            ["Train-AI=\"n\";x=1"]
        );
    }
}
