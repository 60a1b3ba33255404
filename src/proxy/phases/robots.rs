//! Robots: what the origin's robots.txt says about this request.
//!
//! The robots.txt of the origin (scheme, host, port) comes from the cache,
//! fetched on a miss (one fetch per origin at a time). The verdict is for the
//! robot's product token and the target in its RFC 3986 normal form, and for
//! every form a common server reads it as (`robots.equivalent_spellings`);
//! the most restrictive wins, and a refusal names the form that decided. The
//! group's `Crawl-delay` / `Request-rate` becomes the spacing the pace phase
//! keeps.
//!
//! A request the rules allow is then held against the group's usage
//! preferences (`Content-Signal`, `Content-Usage`) for the purposes it
//! declared: a refused purpose is `403 usage-preference`, naming the
//! statement. Its path is judged in normal form and in every form a server
//! reads it as, like the rules. A blind tunnel is refused only by a
//! `Content-Signal` refusal, which holds for every path of the site.
//!
//! `/robots.txt` itself is always allowed (RFC 9309 §2.2.2). A CONNECT in
//! intercept mode is not judged here (its requests are, one by one); in
//! tunnel mode the proxy cannot see paths, so the CONNECT is refused only
//! when the robot may fetch nothing on the origin.

use std::time::Duration;

use http::Request;

use super::super::exchange::Exchange;
use super::super::response::{Answer, Refusal, ServedAs};
use crate::config::TlsMode;
use crate::fetch::{RobotsEntry, RobotsRules};
use crate::origin::Origin;
use crate::robots::{
    judge, served_forms, AgentRules, PreferenceKind, Purposes, Spelling, Spellings, UsageRefusal,
};

/// Judges the request by the origin's robots.txt.
pub(crate) async fn robots<B>(
    ex: &mut Exchange,
    origin: &Origin,
    request: &Request<B>,
) -> Result<(), Refusal> {
    // A cheap clone (shared bytes), so the client's spelling can be named
    // while the exchange is filled in.
    let sent = ex.url.clone();
    let scope = if ex.connect {
        if ex.settings.tls_mode == TlsMode::Intercept {
            return Ok(());
        }
        Scope::Anything
    } else {
        let path = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
        if request.uri().path() == "/robots.txt" {
            return Ok(());
        }
        Scope::Path {
            path,
            sent: sent.path_and_query().map_or("/", |pq| pq.as_str()),
        }
    };
    let entry = ex.services.robots.lookup(origin).await;
    let judged = verdict(ex, &entry, origin, scope);
    ex.robots = Some(entry);
    match (scope, judged) {
        // A blind tunnel whose https robots.txt cannot be fetched: refused
        // if it carries TLS, judged request by request if plain HTTP. A
        // report-only profile's tunnel is marked now instead: once the
        // tunnel is open, nothing more is answered to the client.
        (Scope::Anything, Err(Refusal(answer)))
            if matches!(
                *answer,
                Answer::RobotsUnreachable { .. } | Answer::UpstreamCertificate { .. }
            ) =>
        {
            if ex.profile.enforce || !answer.reason().waivable() {
                ex.if_tls = Some(*answer);
                Ok(())
            } else {
                Err(Refusal(answer))
            }
        }
        (_, judged) => judged,
    }
}

/// What a verdict is about.
#[derive(Clone, Copy)]
enum Scope<'a> {
    /// One request's path and query, in normal form, and as the client sent
    /// them (for a refusal that names a server's reading of it).
    Path { path: &'a str, sent: &'a str },
    /// A whole blind tunnel: refused only when the agent may fetch nothing
    /// at all; the rule reported is the one for `/`.
    Anything,
}

/// The entry's rules applied to the exchange's agent and `scope`.
fn verdict(
    ex: &mut Exchange,
    entry: &RobotsEntry,
    origin: &Origin,
    scope: Scope<'_>,
) -> Result<(), Refusal> {
    let robots = match &entry.rules {
        RobotsRules::Parsed(robots) => robots,
        RobotsRules::AllowAll { .. } => return Ok(()),
        RobotsRules::DisallowAll { status } => {
            return Err(Answer::RobotsForbidden {
                origin: origin.to_string(),
                status: status.as_u16(),
                robots_url: entry.robots_url.clone(),
            }
            .into())
        }
        RobotsRules::Unreachable { reason } => {
            return Err(Answer::RobotsUnreachable {
                origin: origin.to_string(),
                robots_url: entry.robots_url.clone(),
                reason: reason.clone(),
                retry_after: entry.retry_after.unwrap_or(Duration::from_secs(60)),
            }
            .into())
        }
        RobotsRules::Certificate { reason } => {
            return Err(Answer::UpstreamCertificate {
                origin: origin.to_string(),
                problem: reason.clone(),
            }
            .into())
        }
    };
    let settings = &ex.settings;
    let rules = robots.for_agent(&ex.agent);
    let (judgment, refusable, sent) = match scope {
        Scope::Path { path, sent } => {
            let folded = settings
                .spellings
                .contains(Spelling::CaseInsensitive)
                .then(|| robots.case_folded().for_agent(&ex.agent));
            let judgment = judge(&rules, folded.as_ref(), path, settings.spellings);
            (judgment, true, sent)
        }
        Scope::Anything => (
            judge(&rules, None, "/", Spellings::NONE),
            rules.disallows_everything(),
            "/",
        ),
    };
    let verdict = judgment.verdict;
    ex.rule = verdict.rule.map(|rule| (rule.kind, rule.line));
    // Set before a refusal, which a report-only profile lets through: the
    // site's spacing applies to it all the same.
    if settings.honor_crawl_delay {
        ex.delay = rules
            .min_interval()
            .map_or(Duration::ZERO, |d| d.min(settings.max_crawl_delay));
    }
    if let (false, true, Some(rule)) = (verdict.allowed, refusable, verdict.rule) {
        return Err(Answer::RobotsDisallow {
            origin: origin.to_string(),
            agent: ex.agent.clone(),
            kind: rule.kind,
            pattern: rule.pattern.to_owned(),
            line: rule.line,
            robots_url: entry.robots_url.clone(),
            served_as: judgment.served_as.map(|form| ServedAs {
                sent: sent.to_owned(),
                form: form.target,
                spellings: form.spellings.to_string(),
            }),
        }
        .into());
    }
    if !ex.purposes.is_empty() {
        if let Some(refusal) = usage_refusal(&rules, scope, settings.spellings, ex.purposes) {
            return Err(Answer::UsagePreference {
                origin: origin.to_string(),
                agent: ex.agent.clone(),
                purpose: refusal.purpose,
                kind: refusal.statement.kind,
                statement: refusal.statement.text.to_owned(),
                line: refusal.statement.line,
                robots_url: entry.robots_url.clone(),
            }
            .into());
        }
    }
    Ok(())
}

/// The site's refusal of one of `purposes` for `scope`, if any: for a path,
/// in its normal form or any form a server reads it as; for a blind tunnel,
/// a `Content-Signal` refusal (it speaks for the whole site).
fn usage_refusal<'a>(
    rules: &AgentRules<'a>,
    scope: Scope<'_>,
    spellings: Spellings,
    purposes: Purposes,
) -> Option<UsageRefusal<'a>> {
    match scope {
        Scope::Path { path, .. } => rules.usage(path, purposes).refusal.or_else(|| {
            served_forms(path, spellings)
                .iter()
                .find_map(|form| rules.usage(&form.target, purposes).refusal)
        }),
        Scope::Anything => rules
            .usage("/", purposes)
            .refusal
            .filter(|r| r.statement.kind == PreferenceKind::ContentSignal),
    }
}
