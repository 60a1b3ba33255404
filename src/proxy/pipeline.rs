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
//! | identity | `User-Agent` / `From`: refuse, fill in or pass; the robot's token |
//! | robots | robots.txt for the origin and its verdict → 403 / 503 |
//! | pace | the host's spacing and slots: wait, or 429 |
//! | ending | forward, tunnel or intercept |
//!
//! To add a phase, write it beside the others (a function of the
//! [`Exchange`] that returns `Result<_, Refusal>`) and call it below, in its
//! place; ARCHITECTURE.md has the walk-through.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;

use super::endings;
use super::exchange::{Conn, Exchange};
use super::finish::finish;
use super::phases::{admit, destination, identity, pace, robots, target};
use super::response::Refusal;
use crate::upstream::ProxyBody;

/// Runs one request through the phases, ends it, and logs and counts it.
pub(crate) async fn run(conn: Arc<Conn>, request: Request<Incoming>) -> Response<ProxyBody> {
    let mut ex = Exchange::new(conn, &request);
    match phases(&mut ex, request).await {
        Ok(response) => {
            finish(&ex, ex.reason, None, response.status());
            response
        }
        Err(Refusal(answer)) => {
            finish(&ex, answer.reason(), Some(&answer), answer.status());
            answer.into_response()
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
    identity(ex, &mut request)?;
    robots(ex, &origin, &request).await?;
    let permit = pace(ex, &origin).await?;
    endings::end(ex, &origin, request, permit).await
}
