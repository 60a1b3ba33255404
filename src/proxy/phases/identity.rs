//! Identity: the robot must say who it is.
//!
//! `User-Agent` and `From` are each refused when missing or invalid
//! (`require`), filled in with the configured default (`fill`) or passed as
//! they are (`pass`), by the rules of the request's profile. The product
//! token robots.txt groups are matched for is then the profile's
//! `robot_name`, else the one in the `User-Agent` (see [`product_token`]).
//!
//! A CONNECT is not checked here: in intercept mode each request inside the
//! tunnel is (common clients, Python's requests among them, send CONNECT
//! without a `User-Agent`); in tunnel mode the proxy sees only the CONNECT,
//! whose own `User-Agent` (else the profile's identity) is the agent.

use http::header::USER_AGENT;
use http::Request;

use super::super::exchange::Exchange;
use super::super::response::{Answer, Refusal};
use crate::config::TlsMode;
use crate::robots::product_token;

/// Checks and completes the identity headers; sets the exchange's agent.
///
/// The agent is set even when the identity is refused: a report-only profile
/// lets the request go on, and robots.txt then judges it as whom it named.
pub(crate) fn identity<B>(ex: &mut Exchange, request: &mut Request<B>) -> Result<(), Refusal> {
    let profile = &ex.profile;
    if ex.connect {
        if ex.settings.tls_mode == TlsMode::Tunnel {
            let token = agent_token(profile.robot_name.as_deref(), request);
            ex.agent = if token.is_empty() {
                profile.default_agent.clone()
            } else {
                token.to_owned()
            };
        }
        return Ok(());
    }
    let checked = profile.identity.apply(request.headers_mut());
    ex.agent = agent_token(profile.robot_name.as_deref(), request).to_owned();
    checked.map_err(|e| {
        Answer::Identity {
            problem: e.to_string(),
            hint: e.hint().to_owned(),
        }
        .into()
    })
}

/// `robot_name`, else the product token of the request's `User-Agent`.
fn agent_token<'a, B>(robot_name: Option<&'a str>, request: &'a Request<B>) -> &'a str {
    if let Some(name) = robot_name {
        return name;
    }
    request
        .headers()
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(product_token)
        .unwrap_or_default()
}
