//! The request pipeline: every request, in one order, to one outcome.
//!
//! A request goes through the same fixed phases whether it arrived as plain
//! HTTP, as a CONNECT, decrypted from an intercepted tunnel or as plain HTTP
//! inside one. Each phase is a small function in [`super::phases`] that
//! either lets the request go on or refuses it with an [`Answer`]; the ending
//! ([`super::endings`]) forwards it, opens a tunnel or intercepts. Then one
//! `finish` logs and counts it.
//!
//! | phase | what it decides |
//! |---|---|
//! | admit | proxy credentials (the client's address was checked at accept) |
//! | target | the origin and the normal form of the target; malformed → 400 |
//! | destination | denied networks after DNS → 403 |
//! | purposes | the uses declared: the profile's and `X-Robots-Guard-Purpose` (removed); unknown → 400 |
//! | identity | `User-Agent` / `From`: refuse, fill in or pass; the robot's token |
//! | robots | robots.txt for the origin: its rules, then its usage preferences for the purposes → 403 / 503 |
//! | pace | the host's spacing and slots: wait, or 429 |
//! | ending | forward, tunnel or intercept |
//!
//! A report-only profile (`enforce = false`) lets the politeness phases'
//! refusals through ([`Reason::waivable`]): the request goes on, and its
//! answer says what would have been refused (`X-Robots-Guard-Would-Refuse`).
//! The security phases (admit, target, destination) always refuse.
//!
//! To add a phase, write it beside the others (a function of the
//! [`Exchange`] that returns `Result<_, Refusal>`) and call it below, in its
//! place; ARCHITECTURE.md has the walk-through.

use std::sync::Arc;

use http::header::HeaderValue;
use http::{Request, Response};
use hyper::body::Incoming;

use super::endings;
use super::exchange::{Conn, Exchange};
use super::finish::finish;
use super::phases::{admit, destination, identity, pace, purposes, robots, target};
use super::response::{Answer, Refusal, PROFILE, WOULD_REFUSE};
use crate::outcome::Reason;
use crate::upstream::ProxyBody;

/// Runs one request through the phases, ends it, and logs and counts it.
pub(crate) async fn run(conn: Arc<Conn>, request: Request<Incoming>) -> Response<ProxyBody> {
    let mut ex = Exchange::new(conn, &request);
    match phases(&mut ex, request).await {
        Ok(mut response) => {
            finish(
                &ex,
                ex.reason,
                ex.waived_statement.as_deref(),
                response.status(),
            );
            if !ex.would_refuse.is_empty() {
                mark_would_refuse(&ex, &mut response);
            }
            response
        }
        Err(Refusal(answer)) => {
            finish(&ex, answer.reason(), Some(&answer), answer.status());
            answer.into_response_for(&ex.profile.name)
        }
    }
}

/// The phases, in order.
async fn phases(
    ex: &mut Exchange,
    mut request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Refusal> {
    admit(ex, &request)?;
    let origin = target(ex, &mut request)?;
    destination(ex, &origin).await?;
    purposes(ex, &mut request)?;
    let checked = identity(ex, &mut request);
    unless_report_only(ex, checked)?;
    let judged = robots(ex, &origin, &request).await;
    unless_report_only(ex, judged)?;
    let paced = pace(ex, &origin).await;
    let permit = unless_report_only(ex, paced)?;
    endings::end(ex, &origin, request, permit).await
}

/// A phase's refusal, or, when the profile is report-only and the refusal
/// is a waivable one, a note of it and the phase's "nothing to hand on" (no
/// pacing permit: the host's slot is not taken).
fn unless_report_only<T: Default>(
    ex: &mut Exchange,
    outcome: Result<T, Refusal>,
) -> Result<T, Refusal> {
    match outcome {
        Err(Refusal(answer)) if !ex.profile.enforce && answer.reason().waivable() => {
            ex.would_refuse.push(answer.reason());
            if matches!(
                *answer,
                Answer::RobotsDisallow { .. } | Answer::UsagePreference { .. }
            ) {
                ex.waived_statement = Some(answer);
            }
            Ok(T::default())
        }
        judged => judged,
    }
}

/// `X-Robots-Guard-Would-Refuse: robots-disallow, pacing` and the profile,
/// on the answer of a request a report-only profile let through.
fn mark_would_refuse(ex: &Exchange, response: &mut Response<ProxyBody>) {
    let words: Vec<&str> = ex.would_refuse.iter().map(|r| Reason::word(*r)).collect();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&words.join(", ")) {
        headers.insert(WOULD_REFUSE, value);
    }
    if let Ok(value) = HeaderValue::from_str(&ex.profile.name) {
        headers.insert(PROFILE, value);
    }
}
