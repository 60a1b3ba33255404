//! Admit: who is asking.
//!
//! The client's address was checked when its connection was accepted
//! (`proxy.allow_clients`). Here its proxy credentials: a request on the
//! listener carries its own `Proxy-Authorization`; a request inside a
//! CONNECT tunnel is covered by the user who opened the tunnel, because
//! clients send the credentials on the CONNECT only.

use http::Request;

use super::super::exchange::{Entry, Exchange};
use super::super::response::{Answer, Refusal};

/// Admits the request or answers `407`.
pub(crate) fn admit<B>(ex: &mut Exchange, request: &Request<B>) -> Result<(), Refusal> {
    if let Entry::Tunnel { user, .. } = &ex.conn.entry {
        ex.user = user.clone();
        return Ok(());
    }
    let Some(auth) = &ex.settings.auth else {
        return Ok(());
    };
    let user = auth
        .check(request.headers())
        .map_err(|e| Answer::ProxyAuth {
            problem: e.to_string(),
            challenge: auth.challenge(),
        })?;
    ex.user = Some(user);
    Ok(())
}
