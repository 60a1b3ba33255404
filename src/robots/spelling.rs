//! Spellings: judge the URL the origin will serve, not the spelling the
//! client sent.
//!
//! The matcher compares bytes, as Google's reference does: Google's crawler
//! canonicalises a URL before it asks the matcher. A proxy receives URLs as
//! clients spell them, and `/%70rivate/x`, `/./private/x` or `//private/x`
//! reach the same file on most servers as `/private/x`. Matching the bytes as
//! sent would let any of them walk around `Disallow: /private/`.
//!
//! Two steps close that gap, both pure functions of the target:
//!
//! 1. [`normalise`]: the RFC 3986 §6.2.2 normal form. Percent-encoded
//!    unreserved characters are decoded, the remaining escapes upper-cased,
//!    bytes outside ASCII percent-encoded (as the matcher already encodes
//!    them in patterns) and dot segments removed (`%2e` ones too, once
//!    decoded). These are equivalences (RFC 9309 §2.2.2 asks for the
//!    decoding), so the proxy forwards this form: the origin receives
//!    exactly what was judged.
//! 2. [`served_forms`]: the forms common servers resolve the normal form to,
//!    beyond the RFC: slashes merged (nginx, Apache), `%2F` decoded (nginx),
//!    `;params` stripped from each segment (Tomcat, Jetty), `\` read as `/`
//!    (IIS), and, opt-in, letter case ignored (servers on case-insensitive
//!    file systems). Each is a [`Spelling`]; [`judge`] checks the normal form
//!    and every served form and keeps the most restrictive verdict.
//!
//! The engine itself is untouched: [`crate::robots::RobotsTxt::check`] stays
//! Google-exact, for site owners testing their files.

use std::borrow::Cow;
use std::fmt;

use super::matcher::{AgentRules, Verdict};

/// A way servers read a path that the RFC 3986 normal form does not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Spelling {
    /// Runs of `/` read as one (nginx `merge_slashes`, Apache `MergeSlashes`).
    MergeSlashes,
    /// `%2F` read as `/` (nginx decodes it before mapping the path).
    DecodeSlash,
    /// `;params` cut from every segment (`/private;jsessionid=1/x` is
    /// `/private/x` to Tomcat and Jetty).
    StripPathParams,
    /// `\` and `%5C` read as `/` (IIS).
    Backslash,
    /// Letter case ignored (servers on case-insensitive file systems).
    /// Opt-in: on most servers `/Private` is another resource.
    CaseInsensitive,
}

impl Spelling {
    /// Every spelling, in the order they are applied to a path.
    pub const ALL: [Spelling; 5] = [
        Spelling::Backslash,
        Spelling::DecodeSlash,
        Spelling::StripPathParams,
        Spelling::MergeSlashes,
        Spelling::CaseInsensitive,
    ];

    /// The name used in `robots.equivalent_spellings` and in answers.
    pub fn name(self) -> &'static str {
        match self {
            Spelling::MergeSlashes => "merge-slashes",
            Spelling::DecodeSlash => "decode-slash",
            Spelling::StripPathParams => "strip-path-params",
            Spelling::Backslash => "backslash",
            Spelling::CaseInsensitive => "case-insensitive",
        }
    }

    /// The spelling called `name`, if any.
    pub fn from_name(name: &str) -> Option<Spelling> {
        Spelling::ALL.into_iter().find(|s| s.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Spelling`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Spellings(u8);

impl Spellings {
    /// No spelling beyond the RFC normal form.
    pub const NONE: Spellings = Spellings(0);

    /// The default of `robots.equivalent_spellings`: every spelling but
    /// `case-insensitive`, which would refuse URLs that differ only in case
    /// on the many servers where they are different resources.
    pub const DEFAULT: Spellings = Spellings(
        (1 << Spelling::MergeSlashes as u8)
            | (1 << Spelling::DecodeSlash as u8)
            | (1 << Spelling::StripPathParams as u8)
            | (1 << Spelling::Backslash as u8),
    );

    /// Is `spelling` in the set?
    pub fn contains(self, spelling: Spelling) -> bool {
        self.0 & spelling.bit() != 0
    }

    /// The set with `spelling` added.
    #[must_use]
    pub fn with(self, spelling: Spelling) -> Spellings {
        Spellings(self.0 | spelling.bit())
    }

    /// Is the set empty?
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The spellings in the set, in [`Spelling::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Spelling> {
        Spelling::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

impl FromIterator<Spelling> for Spellings {
    fn from_iter<I: IntoIterator<Item = Spelling>>(iter: I) -> Spellings {
        iter.into_iter().fold(Spellings::NONE, Spellings::with)
    }
}

impl fmt::Display for Spellings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, spelling) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(spelling.name())?;
        }
        Ok(())
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// RFC 3986 §2.3: ALPHA / DIGIT / `-` / `.` / `_` / `~`.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte a `%XY` escape at `at` stands for, if it is one.
fn escape_at(s: &[u8], at: usize) -> Option<u8> {
    if s.get(at) != Some(&b'%') {
        return None;
    }
    let high = hex_value(*s.get(at + 1)?)?;
    let low = hex_value(*s.get(at + 2)?)?;
    Some(high << 4 | low)
}

/// The RFC 3986 §6.2.2 normal form of a request target (path and query, as
/// in an origin-form request line): unreserved escapes decoded, other
/// escapes upper-cased, non-ASCII bytes percent-encoded, and dot segments
/// removed from the path (RFC 3986 §5.2.4). The query keeps its dots.
///
/// Borrowed when the target is already in normal form, which is the case
/// for almost every request: then this is one scan of the bytes.
///
/// ```
/// use robots_guard::robots::normalise;
///
/// assert_eq!(normalise("/%70rivate/./x%2fy?q=%7e"), "/private/x%2Fy?q=~");
/// assert_eq!(normalise("/public/%2e%2e/private/x"), "/private/x");
/// assert_eq!(normalise("/already/normal?q=1"), "/already/normal?q=1");
/// ```
pub fn normalise(target: &str) -> Cow<'_, str> {
    let bytes = target.as_bytes();
    let escapes_or_raw = bytes.iter().any(|&b| b == b'%' || b >= 0x80);
    let path_end = memchr::memchr(b'?', bytes).unwrap_or(bytes.len());
    if !escapes_or_raw && !has_dot_segment(&target[..path_end]) {
        return Cow::Borrowed(target);
    }
    let (path, query) = target.split_at(path_end);
    let path = normalise_escapes(path);
    let path = remove_dot_segments(&path);
    let query = normalise_escapes(query);
    let mut out = String::with_capacity(path.len() + query.len());
    out.push_str(&path);
    out.push_str(&query);
    if out == target {
        Cow::Borrowed(target)
    } else {
        Cow::Owned(out)
    }
}

/// Decodes unreserved escapes, upper-cases the rest, and encodes non-ASCII
/// bytes. The result is ASCII.
fn normalise_escapes(s: &str) -> Cow<'_, str> {
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| b == b'%' || b >= 0x80) {
        return Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(value) = escape_at(bytes, i) {
            if is_unreserved(value) {
                out.push(value);
            } else {
                out.extend_from_slice(&[
                    b'%',
                    HEX[usize::from(value >> 4)],
                    HEX[usize::from(value & 0xF)],
                ]);
            }
            i += 3;
        } else if b >= 0x80 {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]]);
            i += 1;
        } else {
            out.push(b);
            i += 1;
        }
    }
    // Only ASCII was pushed: every byte at or above 0x80 became an escape.
    Cow::Owned(String::from_utf8(out).unwrap_or_default())
}

/// Does the path hold a `.` or `..` segment?
fn has_dot_segment(path: &str) -> bool {
    path.split('/')
        .any(|segment| segment == "." || segment == "..")
}

/// RFC 3986 §5.2.4 for an absolute path: `.` segments go, `..` removes the
/// segment before it (never above the root), and a path ending in a dot
/// segment keeps its trailing `/`. A target that is no absolute path (`*`)
/// is left as it is.
fn remove_dot_segments(path: &str) -> Cow<'_, str> {
    let Some(rest) = path.strip_prefix('/') else {
        return Cow::Borrowed(path);
    };
    if !has_dot_segment(path) {
        return Cow::Borrowed(path);
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.into_iter().enumerate() {
        match segment {
            "." => {}
            ".." => {
                out.pop();
            }
            other => {
                out.push(other);
                continue;
            }
        }
        if i == last {
            out.push("");
        }
    }
    Cow::Owned(format!("/{}", out.join("/")))
}

/// A form a server may serve a target as, and the spellings that lead to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedForm {
    /// The path and query the server resolves the target to.
    pub target: String,
    /// The spellings applied, in [`Spelling::ALL`] order.
    pub spellings: Spellings,
}

/// Every form other than `target` itself that a server reading it with some
/// of the `enabled` spellings resolves it to. `target` must already be in
/// normal form ([`normalise`]). Only the path changes; the query is kept.
///
/// Each subset of the spellings that can apply is tried, in
/// [`Spelling::ALL`] order and with dot segments removed after them, because
/// each server does its own subset in its own order (nginx decodes `%2F`,
/// merges slashes and then resolves `..`; Tomcat cuts `;params` and then
/// resolves `..`, which makes `/..;/` a `..`). Duplicates are dropped, the
/// fewest spellings first. Empty for almost every target: a path without
/// `//`, `%2F`, `;`, `\` or `%5C` (and, for `case-insensitive`, without an
/// upper-case letter) has no other form.
pub fn served_forms(target: &str, enabled: Spellings) -> Vec<ServedForm> {
    let path_end = memchr::memchr(b'?', target.as_bytes()).unwrap_or(target.len());
    let (path, query) = target.split_at(path_end);
    let applicable = applicable(path, enabled);
    if applicable.is_empty() {
        return Vec::new();
    }
    let mut subsets: Vec<Spellings> = (1..=u8::MAX)
        .map(Spellings)
        .filter(|s| s.0 & !applicable.0 == 0)
        .collect();
    subsets.sort_by_key(|s| s.0.count_ones());
    let mut forms: Vec<ServedForm> = Vec::new();
    for subset in subsets {
        let mut form = apply(path, subset);
        form.push_str(query);
        if form != target && !forms.iter().any(|f| f.target == form) {
            forms.push(ServedForm {
                target: form,
                spellings: subset,
            });
        }
    }
    forms
}

/// The spellings of `enabled` that can change `path`: those whose trigger
/// is in it, and `merge-slashes` also when another spelling can make a `//`.
fn applicable(path: &str, enabled: Spellings) -> Spellings {
    let bytes = path.as_bytes();
    // Most paths hold none of the bytes any spelling starts from: settled
    // with two searches instead of one per spelling.
    let rare = memchr::memchr3(b'\\', b'%', b';', bytes).is_some();
    let doubled = memchr::memmem::find(bytes, b"//").is_some();
    if !rare && !doubled && !enabled.contains(Spelling::CaseInsensitive) {
        return Spellings::NONE;
    }
    let has = |needle: &str| memchr::memmem::find(bytes, needle.as_bytes()).is_some();
    let mut found = Spellings::NONE;
    if enabled.contains(Spelling::Backslash) && (has("\\") || has("%5C")) {
        found = found.with(Spelling::Backslash);
    }
    if enabled.contains(Spelling::DecodeSlash) && has("%2F") {
        found = found.with(Spelling::DecodeSlash);
    }
    if enabled.contains(Spelling::StripPathParams) && has(";") {
        found = found.with(Spelling::StripPathParams);
    }
    if enabled.contains(Spelling::MergeSlashes) && (has("//") || !found.is_empty()) {
        found = found.with(Spelling::MergeSlashes);
    }
    if enabled.contains(Spelling::CaseInsensitive) && fold_case(path) != path {
        found = found.with(Spelling::CaseInsensitive);
    }
    found
}

/// `path` as read with `spellings`, then with dot segments removed.
fn apply(path: &str, spellings: Spellings) -> String {
    let mut form = path.to_owned();
    if spellings.contains(Spelling::Backslash) {
        form = form.replace("%5C", "/").replace('\\', "/");
    }
    if spellings.contains(Spelling::DecodeSlash) {
        form = form.replace("%2F", "/");
    }
    if spellings.contains(Spelling::StripPathParams) {
        form = form
            .split('/')
            .map(|segment| segment.split(';').next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("/");
    }
    if spellings.contains(Spelling::MergeSlashes) {
        let mut merged = String::with_capacity(form.len());
        for c in form.chars() {
            if !(c == '/' && merged.ends_with('/')) {
                merged.push(c);
            }
        }
        form = merged;
    }
    let mut form = remove_dot_segments(&form).into_owned();
    if spellings.contains(Spelling::CaseInsensitive) {
        form = fold_case(&form);
    }
    form
}

/// `target` with ASCII letters lower-cased, except inside `%XY` escapes,
/// which stay upper-case as [`normalise`] and the pattern normaliser write
/// them. Rules are matched in this case against a robots.txt parsed from its
/// lower-cased bytes ([`crate::robots::RobotsTxt::parse_case_folded`]).
pub fn fold_case(target: &str) -> String {
    let bytes = target.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if escape_at(bytes, i).is_some() {
            out.push_str(&target[i..i + 3].to_ascii_uppercase());
            i += 3;
            continue;
        }
        // Char by char: `target` may hold non-ASCII text where it was not
        // normalised.
        let c = target[i..].chars().next().unwrap_or_default();
        out.push(c.to_ascii_lowercase());
        i += c.len_utf8().max(1);
    }
    out
}

/// The proxy's verdict on a target: the most restrictive of the normal
/// form's and its served forms'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgment<'a> {
    /// The deciding verdict: the normal form's, unless a served form is
    /// disallowed where the normal form is not.
    pub verdict: Verdict<'a>,
    /// The served form that decided, when one did.
    pub served_as: Option<ServedForm>,
}

/// Judges `target` (an origin-form path and query in normal form, see
/// [`normalise`]; [`AgentRules::check_path`]) with `rules`, and
/// every form it is served as under `enabled` ([`served_forms`]); the first
/// disallowed one decides. Forms read `case-insensitive` are judged with
/// `folded`, the same agent's rules from the case-folded file, and skipped
/// when it is `None`.
pub fn judge<'a>(
    rules: &AgentRules<'a>,
    folded: Option<&AgentRules<'a>>,
    target: &str,
    enabled: Spellings,
) -> Judgment<'a> {
    let verdict = rules.check_path(target);
    if !verdict.allowed {
        return Judgment {
            verdict,
            served_as: None,
        };
    }
    for form in served_forms(target, enabled) {
        let judged_by = if form.spellings.contains(Spelling::CaseInsensitive) {
            match folded {
                Some(folded) => folded,
                None => continue,
            }
        } else {
            rules
        };
        let served = judged_by.check_path(&form.target);
        if !served.allowed {
            return Judgment {
                verdict: served,
                served_as: Some(form),
            };
        }
    }
    Judgment {
        verdict,
        served_as: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robots::RobotsTxt;

    #[test]
    fn ext_normal_form_of_targets() {
        let table: &[(&str, &str)] = &[
            // Already normal: untouched.
            ("/", "/"),
            ("/private/secret.html", "/private/secret.html"),
            ("/a/b?c=d&e=%2F", "/a/b?c=d&e=%2F"),
            ("*", "*"),
            // Unreserved escapes decoded, in path and query.
            ("/%70rivate/secret.html", "/private/secret.html"),
            ("/privat%65/secret.html", "/private/secret.html"),
            ("/priv%61te/secret.html", "/private/secret.html"),
            ("/docs/a.s%65cret", "/docs/a.secret"),
            ("/%7Euser/%2D%5F%2E", "/~user/-_."),
            ("/search?q=%72obots", "/search?q=robots"),
            // Other escapes upper-cased, never decoded.
            ("/a%2fb", "/a%2Fb"),
            ("/a%3f?x=%26", "/a%3F?x=%26"),
            ("/%e3%83%84", "/%E3%83%84"),
            // Broken escapes are left as they are.
            ("/100%", "/100%"),
            ("/%zz/%4", "/%zz/%4"),
            // Raw non-ASCII bytes encoded, as patterns are.
            ("/ツ", "/%E3%83%84"),
            // Dot segments, encoded ones too.
            ("/./private/secret.html", "/private/secret.html"),
            ("/public/../private/secret.html", "/private/secret.html"),
            ("/public/%2e%2e/private/secret.html", "/private/secret.html"),
            ("/public/%2E%2E/private/secret.html", "/private/secret.html"),
            ("/public/.%2e/private/secret.html", "/private/secret.html"),
            ("/a/b/..", "/a/"),
            ("/a/b/.", "/a/b/"),
            ("/..", "/"),
            ("/../../x", "/x"),
            ("/a/..", "/"),
            // Doubled slashes are kept: RFC 3986 gives them no meaning,
            // so `..` removes the empty segment they make.
            ("//private/secret.html", "//private/secret.html"),
            (
                "/public//../private/secret.html",
                "/public/private/secret.html",
            ),
            // The query keeps its dots.
            ("/a?x=/../b", "/a?x=/../b"),
            // `..` glued to text is no dot segment.
            ("/a/..b/c", "/a/..b/c"),
        ];
        for (target, want) in table {
            assert_eq!(normalise(target), *want, "target {target:?}");
            // The normal form is its own normal form.
            assert_eq!(normalise(want), *want, "normal form {want:?}");
        }
    }

    #[test]
    fn ext_normal_form_borrows_what_is_already_normal() {
        assert!(matches!(normalise("/a/b.html?x=1"), Cow::Borrowed(_)));
        assert!(matches!(normalise("/a%2Fb"), Cow::Borrowed(_)));
        assert!(matches!(normalise("/a/./b"), Cow::Owned(_)));
    }

    fn forms(target: &str, enabled: Spellings) -> Vec<(String, String)> {
        served_forms(target, enabled)
            .into_iter()
            .map(|f| (f.target, f.spellings.to_string()))
            .collect()
    }

    fn pair(target: &str, spellings: &str) -> (String, String) {
        (target.to_owned(), spellings.to_owned())
    }

    #[test]
    fn ext_each_spelling_gives_the_form_its_servers_read() {
        let all = Spellings::DEFAULT.with(Spelling::CaseInsensitive);
        assert_eq!(forms("/private/secret.html?a=b", all), []);
        assert_eq!(
            forms("//private/secret.html", all),
            [pair("/private/secret.html", "merge-slashes")]
        );
        assert_eq!(
            forms("/private%2Fsecret.html", all),
            [pair("/private/secret.html", "decode-slash")]
        );
        assert_eq!(
            forms("/private;jsessionid=1/secret.html", all),
            [pair("/private/secret.html", "strip-path-params")]
        );
        assert_eq!(
            forms("/public/..;x=1/private/secret.html", all),
            [pair("/private/secret.html", "strip-path-params")]
        );
        assert_eq!(
            forms("/private\\secret.html", all),
            [pair("/private/secret.html", "backslash")]
        );
        assert_eq!(
            forms("/private%5Csecret.html", all),
            [pair("/private/secret.html", "backslash")]
        );
        assert_eq!(
            forms("/Private/Secret.html?Q=A", all),
            [pair("/private/secret.html?Q=A", "case-insensitive")]
        );
        // Escapes keep their case when folded.
        assert_eq!(
            forms("/A%2Fb", Spellings::NONE.with(Spelling::CaseInsensitive)),
            [pair("/a%2Fb", "case-insensitive")]
        );
    }

    #[test]
    fn ext_spellings_combine_in_each_servers_order() {
        // nginx: `%2F` decoded, then `..` resolved.
        assert!(forms("/public/..%2Fprivate/x", Spellings::DEFAULT)
            .contains(&pair("/private/x", "decode-slash")));
        // nginx: slashes merged before `..`, where the RFC form keeps
        // `/public/private/x`.
        let n = normalise("/public//../private/x");
        assert_eq!(n, "/public/private/x");
        assert!(forms("/public//../private/x", Spellings::DEFAULT)
            .contains(&pair("/private/x", "merge-slashes")));
        // A `//` made by decoding `%2F` is merged too.
        assert!(forms("/a/%2F/../private/x", Spellings::DEFAULT)
            .contains(&pair("/private/x", "decode-slash, merge-slashes")));
        // Only enabled spellings apply.
        assert_eq!(forms("//private/x", Spellings::NONE), []);
        let no_merge = Spellings::NONE.with(Spelling::DecodeSlash);
        assert_eq!(forms("//private/x", no_merge), []);
    }

    fn judged(body: &str, target: &str, enabled: Spellings) -> (bool, Option<String>) {
        let robots = RobotsTxt::parse(body.as_bytes());
        let folded = RobotsTxt::parse_case_folded(body.as_bytes());
        let rules = robots.for_agent("FooBot");
        let folded_rules = folded.for_agent("FooBot");
        let target = normalise(target);
        let judgment = judge(&rules, Some(&folded_rules), &target, enabled);
        (
            judgment.verdict.allowed,
            judgment
                .served_as
                .map(|f| format!("{} ({})", f.target, f.spellings)),
        )
    }

    const ROBOTS: &str =
        "User-agent: *\nDisallow: /private/\nDisallow: /*.secret$\nAllow: /private/open\n";

    #[test]
    fn ext_no_way_around_a_rule_by_respelling() {
        let d = Spellings::DEFAULT;
        for target in [
            "/private/secret.html",
            "/%70rivate/secret.html",
            "/privat%65/secret.html",
            "/priv%61te/secret.html",
            "/./private/secret.html",
            "/public/../private/secret.html",
            "/public/%2e%2e/private/secret.html",
            "/public/%2E%2E/private/secret.html",
            "//private/secret.html",
            "/private%2Fsecret.html",
            "/private%2fsecret.html",
            "/public/..%2Fprivate/secret.html",
            "/private;x=1/secret.html",
            "/public/..;/private/secret.html",
            "/private\\secret.html",
            "/private%5csecret.html",
            "/docs/a.secret",
            "/docs/a.s%65cret",
            "/docs//a.secret",
            "/docs/a.secret;v=2",
        ] {
            let (allowed, _) = judged(ROBOTS, target, d);
            assert!(!allowed, "{target} must be disallowed");
        }
        for target in [
            "/",
            "/public/index.html",
            "/private/open/x",
            "/docs/a.secret?x=1",
        ] {
            assert_eq!(judged(ROBOTS, target, d), (true, None), "{target}");
        }
        // The normal form is what is forwarded, and where the RFC and nginx
        // disagree it is a page that is not the private one.
        assert_eq!(
            normalise("/public//../private/secret.html"),
            "/public/private/secret.html"
        );
        assert!(judged(ROBOTS, "/public//../private/secret.html", d).0);
        // Case is opt-in.
        assert!(judged(ROBOTS, "/PRIVATE/secret.html", d).0);
        let ci = d.with(Spelling::CaseInsensitive);
        assert_eq!(
            judged(ROBOTS, "/PRIVATE/secret.html", ci),
            (
                false,
                Some("/private/secret.html (case-insensitive)".to_owned())
            )
        );
    }

    #[test]
    fn ext_the_deciding_form_is_named() {
        let d = Spellings::DEFAULT;
        assert_eq!(
            judged(ROBOTS, "//private/secret.html", d),
            (
                false,
                Some("/private/secret.html (merge-slashes)".to_owned())
            )
        );
        // The normal form decides alone when it is disallowed.
        assert_eq!(judged(ROBOTS, "/./private/x", d), (false, None));
    }

    #[test]
    fn ext_spelling_names_round_trip() {
        for spelling in Spelling::ALL {
            assert_eq!(Spelling::from_name(spelling.name()), Some(spelling));
        }
        assert_eq!(Spelling::from_name("merge"), None);
        assert_eq!(
            Spellings::DEFAULT.to_string(),
            "backslash, decode-slash, strip-path-params, merge-slashes"
        );
    }
}
