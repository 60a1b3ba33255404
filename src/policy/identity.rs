//! Robot identity: the `User-Agent` and `From` request headers.
//!
//! A site owner who sees unusual traffic needs two things: which robot it is (so robots.txt
//! can name it) and whom to write to. RFC 9110 §10.1.5 defines `User-Agent`; §10.1.2 says a
//! robot SHOULD send `From` with a mailbox. Each header has its own [`IdentityMode`].
//!
//! Decisions, in one place:
//! - A header that is present but blank (empty or only whitespace) counts as missing.
//! - A `User-Agent` with no ASCII letter or digit (`-`, `()`) names nothing a robots.txt group
//!   could match, so it counts as missing too.
//! - Under [`IdentityMode::Fill`] a missing (or blank) header is replaced by the default, but
//!   a `From` that is present and is not a mailbox is an error, not silently replaced: a robot
//!   that gives a wrong contact should be told, or its operator never learns the site owner
//!   cannot reach them.
//! - Only the first `User-Agent` value is looked at (it is what the agent is taken from);
//!   every `From` value must be a mailbox.

use http::header::{FROM, USER_AGENT};
use http::{HeaderMap, HeaderValue};
use thiserror::Error;

/// What to do about one identity header when a request arrives.
///
/// The config module maps its own (serde) enum to this one, so the policy code does not
/// depend on how the setting is spelled in TOML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityMode {
    /// Missing or invalid -> the request is refused with a hint saying what to add.
    Require,
    /// Missing -> the configured default is added; present -> kept (a `From` must still be
    /// a mailbox).
    Fill,
    /// Left exactly as the client sent it; nothing is checked.
    Pass,
}

/// How to treat `User-Agent` and `From` on every request, with the values used to fill them.
#[derive(Debug, Clone)]
pub struct IdentityPolicy {
    /// Mode for the `User-Agent` header.
    pub user_agent: IdentityMode,
    /// Mode for the `From` header.
    pub from: IdentityMode,
    /// Added as `User-Agent` under [`IdentityMode::Fill`] when the client sent none.
    pub default_user_agent: HeaderValue,
    /// Added as `From` under [`IdentityMode::Fill`] when the client sent none. The config
    /// should check it with [`is_mailbox`]; `apply` does not re-check its own default.
    pub default_from: HeaderValue,
}

/// Why a request's identity was refused. Each variant is the client's fault (a `403`), and
/// [`IdentityError::hint`] says what the client should add.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IdentityError {
    /// No usable `User-Agent` (absent, blank, or naming nothing) under `require`.
    #[error("the request has no User-Agent header naming the robot")]
    MissingUserAgent,
    /// No `From` (absent or blank) under `require`.
    #[error("the request has no From header with a contact mailbox")]
    MissingFrom,
    /// A `From` header is present but is not a mailbox (`require` or `fill`).
    #[error("the From header {value:?} is not a mailbox")]
    InvalidFrom {
        /// The offending value, lossily decoded and cut to [`MAX_ECHOED_VALUE`] bytes so an
        /// answer that echoes it stays short.
        value: String,
    },
}

/// The longest header value echoed back in an [`IdentityError::InvalidFrom`].
pub const MAX_ECHOED_VALUE: usize = 128;

impl IdentityError {
    /// What the client must add or change, for the body of the `403` answer.
    pub fn hint(&self) -> &'static str {
        match self {
            IdentityError::MissingUserAgent => {
                "add a User-Agent header naming your robot, e.g. \
                 `User-Agent: ExampleBot/1.0 (+https://example.com/bot)`"
            }
            IdentityError::MissingFrom => {
                "add a From header with a contact mailbox, e.g. `From: bot-admin@example.com`"
            }
            IdentityError::InvalidFrom { .. } => {
                "make the From header a contact mailbox (local@domain), \
                 e.g. `From: bot-admin@example.com`"
            }
        }
    }
}

impl IdentityPolicy {
    /// Checks and completes the identity headers of one request, in place.
    ///
    /// `User-Agent` is handled first, so a request missing both under `require` is told
    /// about `User-Agent` (the header the robots.txt verdict depends on).
    ///
    /// # Errors
    ///
    /// [`IdentityError::MissingUserAgent`] / [`IdentityError::MissingFrom`] when a header
    /// under `require` is missing or blank; [`IdentityError::InvalidFrom`] when a `From` under
    /// `require` or `fill` is not a mailbox. On error the other header has still been
    /// filled in where its mode says so.
    pub fn apply(&self, headers: &mut HeaderMap) -> Result<(), IdentityError> {
        // Both headers are checked and filled whatever the first's verdict:
        // a report-only profile forwards a refused request, and what `fill`
        // adds must be on it then too. The first problem is the one reported.
        let agent = self.apply_user_agent(headers);
        let from = self.apply_from(headers);
        agent.and(from)
    }

    fn apply_user_agent(&self, headers: &mut HeaderMap) -> Result<(), IdentityError> {
        if self.user_agent == IdentityMode::Pass
            || headers.get(USER_AGENT).is_some_and(names_a_robot)
        {
            return Ok(());
        }
        if self.user_agent == IdentityMode::Require {
            return Err(IdentityError::MissingUserAgent);
        }
        // `insert` replaces a blank value too: a blank header is as good as none.
        headers.insert(USER_AGENT, self.default_user_agent.clone());
        Ok(())
    }

    fn apply_from(&self, headers: &mut HeaderMap) -> Result<(), IdentityError> {
        if self.from == IdentityMode::Pass {
            return Ok(());
        }
        let mut any = false;
        for value in headers.get_all(FROM) {
            if is_blank(value.as_bytes()) {
                continue;
            }
            any = true;
            // A From that is not UTF-8 cannot be a mailbox we could tell anyone about.
            let ok = std::str::from_utf8(value.as_bytes()).is_ok_and(is_mailbox);
            if !ok {
                return Err(IdentityError::InvalidFrom {
                    value: echo(value.as_bytes()),
                });
            }
        }
        if any {
            return Ok(());
        }
        if self.from == IdentityMode::Require {
            return Err(IdentityError::MissingFrom);
        }
        headers.insert(FROM, self.default_from.clone());
        Ok(())
    }
}

/// True when a `User-Agent` value names something: not blank and with at least one ASCII
/// letter or digit, from which a product token (RFC 9110 §10.1.5) can be taken.
fn names_a_robot(value: &HeaderValue) -> bool {
    value.as_bytes().iter().any(u8::is_ascii_alphanumeric)
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| matches!(b, b' ' | b'\t'))
}

/// Lossy text of a header value, cut (on a char boundary) to [`MAX_ECHOED_VALUE`] bytes.
fn echo(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut end = text.len().min(MAX_ECHOED_VALUE);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// True when `s` is a single mailbox, as a `From` header must be (RFC 9110 §10.1.2, which
/// takes `mailbox` from RFC 5322 §3.4).
///
/// Accepted, after trimming outer whitespace:
/// - `local@domain`, or `Display Name <local@domain>` (the name may be empty or quoted but
///   may not contain `<` or `>`; nothing may follow `>`).
/// - local part: 1-64 bytes of RFC 5322 `atext` (letters, digits, ``!#$%&'*+-/=?^_`{|}~``,
///   and non-ASCII letters for RFC 6531 addresses) in dot-separated runs: no leading,
///   trailing or doubled dot.
/// - domain: either at least two dot-separated labels of letters, digits and `-` (1-63 each,
///   no leading or trailing `-`, last label not all digits so a bare IP is refused, no
///   trailing dot, 253 bytes at most), or an RFC 5321 §4.1.3 address literal: `[192.0.2.1]`
///   or `[IPv6:2001:db8::1]`.
/// - the whole address is at most 254 bytes and contains no whitespace.
///
/// Refused on purpose, although RFC 5322 allows them: quoted local parts
/// (`"john doe"@example.com`), comments, and lists of several addresses. A robot's contact
/// address has no need for them, and refusing keeps the check simple and predictable.
pub fn is_mailbox(s: &str) -> bool {
    let s = s.trim();
    let addr = match s.find('<') {
        None => s,
        Some(open) => {
            let Some(inner) = s[open + 1..].strip_suffix('>') else {
                return false;
            };
            let name = &s[..open];
            if name.contains('>') || name.chars().any(char::is_control) {
                return false;
            }
            inner
        }
    };
    if addr.is_empty() || addr.len() > 254 {
        return false;
    }
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    is_local_part(local) && is_domain(domain)
}

fn is_local_part(local: &str) -> bool {
    let atext = |c: char| {
        c.is_ascii_alphanumeric()
            || "!#$%&'*+-/=?^_`{|}~".contains(c)
            || (!c.is_ascii() && c.is_alphanumeric())
    };
    !local.is_empty()
        && local.len() <= 64
        && local
            .split('.')
            .all(|run| !run.is_empty() && run.chars().all(atext))
}

fn is_domain(domain: &str) -> bool {
    if let Some(literal) = domain.strip_prefix('[') {
        let Some(literal) = literal.strip_suffix(']') else {
            return false;
        };
        return match literal.strip_prefix("IPv6:") {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => literal.parse::<std::net::Ipv4Addr>().is_ok(),
        };
    }
    if domain.is_empty() || domain.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    let label_ok = |l: &&str| {
        let bytes = l.as_bytes();
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| {
                c.is_ascii_alphanumeric() || c == '-' || (!c.is_ascii() && c.is_alphanumeric())
            })
            && bytes.first() != Some(&b'-')
            && bytes.last() != Some(&b'-')
    };
    labels.len() >= 2
        && labels.iter().all(label_ok)
        && labels
            .last()
            .is_some_and(|tld| !tld.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(user_agent: IdentityMode, from: IdentityMode) -> IdentityPolicy {
        IdentityPolicy {
            user_agent,
            from,
            default_user_agent: HeaderValue::from_static("robots-guard/0.1"),
            default_from: HeaderValue::from_static("robots-admin@example.invalid"),
        }
    }

    fn headers(pairs: &[(&http::HeaderName, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                (*name).clone(),
                HeaderValue::from_bytes(value).expect("test values are valid header bytes"),
            );
        }
        map
    }

    #[test]
    fn mailbox_table() {
        let cases: &[(&str, bool)] = &[
            ("bot-admin@example.com", true),
            ("  bot-admin@example.com  ", true),
            ("a@b.co", true),
            ("first.last+tag@mail.example.org", true),
            ("o'brien@example.ie", true),
            ("x!#$%&'*+-/=?^_`{|}~@example.com", true),
            ("Bot Admin <bot-admin@example.com>", true),
            ("\"Admin, Bot\" <bot-admin@example.com>", true),
            ("<bot-admin@example.com>", true),
            ("admin@[192.0.2.1]", true),
            ("admin@[IPv6:2001:db8::1]", true),
            ("admin@xn--bcher-kva.example", true),
            ("admin@bücher.example", true),
            ("jürgen@example.de", true),
            ("robots-admin@example.invalid", true),
            ("", false),
            ("   ", false),
            ("bot-admin", false),
            ("@example.com", false),
            ("bot-admin@", false),
            ("bot-admin@localhost", false),
            ("bot-admin@example.com.", false),
            ("bot-admin@.example.com", false),
            ("bot-admin@exa..mple.com", false),
            ("bot-admin@-example.com", false),
            ("bot-admin@example-.com", false),
            ("bot-admin@exa_mple.com", false),
            ("bot-admin@192.0.2.1", false),
            ("admin@[192.0.2]", false),
            ("admin@[2001:db8::1]", false),
            ("admin@[IPv6:nope]", false),
            ("admin@[192.0.2.1", false),
            (".bot@example.com", false),
            ("bot.@example.com", false),
            ("b..ot@example.com", false),
            ("bot admin@example.com", false),
            ("\"bot admin\"@example.com", false),
            ("bot@exam ple.com", false),
            ("a@example.com, b@example.com", false),
            ("Bot <bot@example.com> trailing", false),
            ("Bot <bot@example.com", false),
            ("Bot <<bot@example.com>>", false),
            ("Bot <>", false),
            ("Bot > x <bot@example.com>", false),
            ("bot@example.com (the bot)", false),
            ("a@b@example.com", false),
            ("https://example.com/bot", false),
        ];
        for (input, want) in cases {
            assert_eq!(is_mailbox(input), *want, "is_mailbox({input:?})");
        }
    }

    #[test]
    fn mailbox_length_limits() {
        let local64 = "a".repeat(64);
        assert!(is_mailbox(&format!("{local64}@example.com")));
        assert!(!is_mailbox(&format!("a{local64}@example.com")));
        let label63 = "b".repeat(63);
        assert!(is_mailbox(&format!("a@{label63}.com")));
        assert!(!is_mailbox(&format!("a@b{label63}.com")));
        let long_domain = format!("{0}.{0}.{0}.{0}.com", "c".repeat(62)); // 255 bytes
        assert!(!is_mailbox(&format!("a@{long_domain}")));
    }

    #[test]
    fn require_refuses_missing_blank_and_nameless_user_agent() {
        let p = policy(IdentityMode::Require, IdentityMode::Pass);
        for value in [None, Some(&b""[..]), Some(b"   "), Some(b"-"), Some(b"()")] {
            let mut h = match value {
                Some(v) => headers(&[(&USER_AGENT, v)]),
                None => HeaderMap::new(),
            };
            assert_eq!(
                p.apply(&mut h),
                Err(IdentityError::MissingUserAgent),
                "{value:?}"
            );
        }
        let mut h = headers(&[(&USER_AGENT, b"FooBot/1.0")]);
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h[USER_AGENT], "FooBot/1.0");
    }

    #[test]
    fn fill_adds_default_user_agent_only_when_missing() {
        let p = policy(IdentityMode::Fill, IdentityMode::Pass);
        let mut h = HeaderMap::new();
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h[USER_AGENT], "robots-guard/0.1");

        let mut h = headers(&[(&USER_AGENT, b"  ")]);
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h.get_all(USER_AGENT).iter().count(), 1);
        assert_eq!(h[USER_AGENT], "robots-guard/0.1");

        let mut h = headers(&[(&USER_AGENT, b"FooBot/1.0")]);
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h[USER_AGENT], "FooBot/1.0");
    }

    #[test]
    fn require_from_missing_and_invalid() {
        let p = policy(IdentityMode::Pass, IdentityMode::Require);
        let mut h = HeaderMap::new();
        assert_eq!(p.apply(&mut h), Err(IdentityError::MissingFrom));
        let mut h = headers(&[(&FROM, b" ")]);
        assert_eq!(p.apply(&mut h), Err(IdentityError::MissingFrom));
        let mut h = headers(&[(&FROM, b"nobody")]);
        assert_eq!(
            p.apply(&mut h),
            Err(IdentityError::InvalidFrom {
                value: "nobody".into()
            })
        );
        let mut h = headers(&[(&FROM, b"Bot Admin <bot-admin@example.com>")]);
        assert_eq!(p.apply(&mut h), Ok(()));
    }

    #[test]
    fn every_from_value_must_be_a_mailbox() {
        let p = policy(IdentityMode::Pass, IdentityMode::Require);
        let mut h = headers(&[(&FROM, b"ok@example.com"), (&FROM, b"liar")]);
        assert!(matches!(
            p.apply(&mut h),
            Err(IdentityError::InvalidFrom { .. })
        ));
    }

    #[test]
    fn fill_from_adds_default_but_refuses_invalid() {
        let p = policy(IdentityMode::Pass, IdentityMode::Fill);
        let mut h = HeaderMap::new();
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h[FROM], "robots-admin@example.invalid");

        let mut h = headers(&[(&FROM, b"")]);
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h[FROM], "robots-admin@example.invalid");

        let mut h = headers(&[(&FROM, b"me@example.org")]);
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h[FROM], "me@example.org");

        let mut h = headers(&[(&FROM, b"not a mailbox")]);
        assert!(matches!(
            p.apply(&mut h),
            Err(IdentityError::InvalidFrom { .. })
        ));
    }

    #[test]
    fn invalid_from_echo_is_bounded_and_lossy() {
        let p = policy(IdentityMode::Pass, IdentityMode::Require);
        let long = "x".repeat(1000);
        let mut h = headers(&[(&FROM, long.as_bytes())]);
        match p.apply(&mut h) {
            Err(IdentityError::InvalidFrom { value }) => assert_eq!(value.len(), MAX_ECHOED_VALUE),
            other => panic!("expected InvalidFrom, got {other:?}"),
        }
        let mut h = headers(&[(&FROM, b"\xff@example.com")]);
        match p.apply(&mut h) {
            Err(IdentityError::InvalidFrom { value }) => assert_eq!(value, "\u{fffd}@example.com"),
            other => panic!("expected InvalidFrom, got {other:?}"),
        }
    }

    #[test]
    fn pass_leaves_headers_alone() {
        let p = policy(IdentityMode::Pass, IdentityMode::Pass);
        let mut h = headers(&[(&FROM, b"garbage")]);
        assert_eq!(p.apply(&mut h), Ok(()));
        assert_eq!(h.len(), 1);
        assert_eq!(h[FROM], "garbage");
        assert!(h.get(USER_AGENT).is_none());
    }

    #[test]
    fn user_agent_is_reported_before_from() {
        let p = policy(IdentityMode::Require, IdentityMode::Require);
        assert_eq!(
            p.apply(&mut HeaderMap::new()),
            Err(IdentityError::MissingUserAgent)
        );
    }

    #[test]
    fn hints_say_what_to_add() {
        assert!(IdentityError::MissingUserAgent
            .hint()
            .contains("User-Agent: ExampleBot/1.0"));
        assert!(IdentityError::MissingFrom
            .hint()
            .contains("From: bot-admin@example.com"));
        let invalid = IdentityError::InvalidFrom { value: "x".into() };
        assert!(invalid.hint().contains("mailbox"));
        assert_eq!(
            invalid.to_string(),
            "the From header \"x\" is not a mailbox"
        );
    }
}
