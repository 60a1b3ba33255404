//! Identity: the robot must say who it is.
//!
//! `User-Agent` and `From` are each refused when missing or invalid
//! (`require`), filled in with the configured default (`fill`) or passed as
//! they are (`pass`). The product token robots.txt groups are matched for is
//! then `identity.robot_name`, else the one in the `User-Agent` (see
//! [`product_token`]).
//!
//! A CONNECT is not checked here: in intercept mode each request inside the
//! tunnel is (common clients, Python's requests among them, send CONNECT
//! without a `User-Agent`); in tunnel mode the proxy sees only the CONNECT,
//! whose own `User-Agent` (else the configured identity) is the agent.

use http::header::USER_AGENT;
use http::Request;

use super::super::exchange::Exchange;
use super::super::response::{Answer, Refusal};
use crate::config::TlsMode;
use crate::robots::product_token;

/// Checks and completes the identity headers; sets the exchange's agent.
pub(crate) fn identity<B>(ex: &mut Exchange, request: &mut Request<B>) -> Result<(), Refusal> {
    let settings = &ex.settings;
    if ex.connect {
        if settings.tls_mode == TlsMode::Tunnel {
            let token = agent_token(settings.robot_name.as_deref(), request);
            ex.agent = if token.is_empty() {
                settings.default_agent.clone()
            } else {
                token.to_owned()
            };
        }
        return Ok(());
    }
    settings
        .identity
        .apply(request.headers_mut())
        .map_err(|e| Answer::Identity {
            problem: e.to_string(),
            hint: e.hint().to_owned(),
        })?;
    ex.agent = agent_token(settings.robot_name.as_deref(), request).to_owned();
    Ok(())
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
