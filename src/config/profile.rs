//! `[[profile]]` tables: one robot per team behind one proxy.
//!
//! A company's egress proxy serves many teams, and each team's crawler should
//! obey the robots.txt group written for it. A profile is selected by the
//! proxy-auth user (`users`) or the client's network (`clients`); the first
//! profile that matches wins, and a client no profile matches uses the
//! top-level settings. A profile may set its robot's identity, its declared
//! purposes, report-only rollout (`enforce = false`), a pacing floor and extra
//! denied destinations. Pacing itself stays per host across profiles: the
//! sites see one company.

use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use super::{de, IdentityMode};

/// The name of the settings a client no profile matches uses; no profile may
/// take it.
pub const DEFAULT_PROFILE: &str = "default";

/// One `[[profile]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// The profile's name, shown in logs, metrics and the status page.
    pub name: toml::Spanned<String>,
    /// Proxy-auth users this profile is for.
    #[serde(default)]
    pub users: Vec<toml::Spanned<String>>,
    /// Client networks this profile is for, as CIDRs.
    #[serde(default, deserialize_with = "de::ip_nets_maybe_empty")]
    pub clients: Vec<IpNet>,
    /// The product token matched against robots.txt groups (else the top level's
    /// `identity.robot_name`, else each request's `User-Agent` token).
    #[serde(default, deserialize_with = "de::product_token")]
    pub robot_name: Option<String>,
    /// `User-Agent` mode (else the top level's).
    #[serde(default)]
    pub user_agent: Option<IdentityMode>,
    /// `From` mode (else the top level's).
    #[serde(default)]
    pub from: Option<IdentityMode>,
    /// `User-Agent` added in `fill` mode (else the top level's).
    #[serde(default, deserialize_with = "opt_header_text")]
    pub default_user_agent: Option<String>,
    /// `From` added in `fill` mode (else the top level's).
    #[serde(default, deserialize_with = "opt_mailbox")]
    pub default_from: Option<String>,
    /// What this robot fetches for (else the top level's `identity.purposes`).
    #[serde(default, deserialize_with = "de::opt_purposes")]
    pub purposes: Option<crate::robots::Purposes>,
    /// `false`: report-only; refusals for robots, usage preferences, identity and
    /// pacing become `X-Robots-Guard-Would-Refuse` (else `proxy.enforce`).
    #[serde(default)]
    pub enforce: Option<bool>,
    /// A floor on the spacing between request starts at a host for this profile's
    /// requests, on top of the host's own pacing. Default 0.
    #[serde(default, deserialize_with = "opt_duration")]
    pub min_delay: Option<Duration>,
    /// Destination networks refused for this profile, besides
    /// `proxy.deny_destinations`.
    #[serde(default, deserialize_with = "de::ip_nets_maybe_empty")]
    pub deny_destinations: Vec<IpNet>,
    /// This profile's Web Bot Auth signing key (else `signing.key`).
    #[serde(default)]
    pub signing_key: Option<PathBuf>,
    /// The line of each of `users` in the file, for errors found once the
    /// proxy's user list is read (the htpasswd file).
    #[serde(skip)]
    pub user_lines: Vec<usize>,
}

fn opt_header_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    de::header_text(d).map(Some)
}

fn opt_mailbox<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    de::mailbox(d).map(Some)
}

fn opt_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de::duration(d).map(Some)
}

/// The longest profile name.
const MAX_NAME_LEN: usize = 64;

/// Names are short words: they go into metrics labels, response headers and
/// URLs as they are.
fn is_profile_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The 1-based line of byte offset `at` in `text`.
pub(super) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Checks what serde cannot: names unique and not the reserved one, and every
/// profile selecting something. Users are checked against the proxy's user
/// list when the settings are built (the htpasswd file is read then).
pub(super) fn check(profiles: &mut [ProfileConfig], text: &str) -> Result<(), String> {
    for profile in profiles.iter_mut() {
        profile.user_lines = profile
            .users
            .iter()
            .map(|user| line_of(text, user.span().start))
            .collect();
    }
    for (i, profile) in profiles.iter().enumerate() {
        let name = profile.name.get_ref();
        let line = line_of(text, profile.name.span().start);
        if name == DEFAULT_PROFILE {
            return Err(format!(
                "line {line}: profile name \"{DEFAULT_PROFILE}\" is taken by the top-level \
                 settings (the profile of clients no [[profile]] selects)"
            ));
        }
        if !is_profile_name(name) {
            return Err(format!(
                "line {line}: profile name {name:?} must be 1 to {MAX_NAME_LEN} letters, \
                 digits, '-', '_' or '.' (it becomes a metrics label, a header value and a \
                 status-page link)"
            ));
        }
        if let Some(first) = profiles[..i].iter().find(|p| p.name.get_ref() == name) {
            return Err(format!(
                "line {line}: a second profile named {name:?} (the first is on line {})",
                line_of(text, first.name.span().start)
            ));
        }
        if profile.users.is_empty() && profile.clients.is_empty() {
            return Err(format!(
                "line {line}: profile {name:?} selects no client; give it `users`, \
                 `clients` or both"
            ));
        }
    }
    Ok(())
}
