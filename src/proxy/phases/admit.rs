//! Admit: who is asking, and so which robot the request is.
//!
//! The client's address was checked when its connection was accepted
//! (`proxy.allow_clients`). Here its proxy credentials: a request on the
//! listener carries its own `Proxy-Authorization`; a request inside a
//! CONNECT tunnel is covered by the user who opened the tunnel, because
//! clients send the credentials on the CONNECT only.
//!
//! The user and the client's address then select the request's profile
//! (`[[profile]]`, first match wins, else the top level's): the robot name,
//! identity rules, enforcement and limits every later phase reads.

use http::Request;

use super::super::exchange::{Entry, Exchange};
use super::super::response::{Answer, Refusal};

/// Admits the request or answers `407`; selects its profile.
pub(crate) fn admit<B>(ex: &mut Exchange, request: &Request<B>) -> Result<(), Refusal> {
    if let Entry::Tunnel { user, .. } = &ex.conn.entry {
        ex.user = user.clone();
    } else if let Some(auth) = &ex.settings.auth {
        let user = auth
            .check(request.headers())
            .map_err(|e| Answer::ProxyAuth {
                problem: e.to_string(),
                challenge: auth.challenge(),
            })?;
        ex.user = Some(user);
    }
    if !ex.settings.profiles.is_empty() {
        ex.profile = ex
            .settings
            .profile_for(ex.user.as_deref(), ex.conn.client.ip())
            .clone();
    }
    Ok(())
}
