//! Purposes: what the request fetches for.
//!
//! A robot declares its uses (`search`, `ai-input`, `ai-train`) in its
//! profile (`purposes`, else `identity.purposes`); the robots phase holds
//! them against the site's `Content-Signal` / `Content-Usage` statements. A
//! client may add uses for one request with `X-Robots-Guard-Purpose:
//! ai-train, search`, or for a whole tunnel on its CONNECT; it cannot remove
//! the profile's. The header is for the proxy: it is removed here, so it is
//! never forwarded. A name the proxy does not know is a malformed request
//! (`400`): guessing what the client meant could let a refused use through.

use http::header::HeaderName;
use http::Request;

use super::super::exchange::{Entry, Exchange};
use super::super::response::{Answer, Refusal};
use crate::robots::Purposes;

/// `X-Robots-Guard-Purpose`, the request header that adds purposes.
pub const PURPOSE_HEADER: HeaderName = HeaderName::from_static("x-robots-guard-purpose");

/// Sets the exchange's purposes: the profile's, the tunnel's, and the
/// request's own header (which is removed).
pub(crate) fn purposes<B>(ex: &mut Exchange, request: &mut Request<B>) -> Result<(), Refusal> {
    let mut purposes = ex.profile.purposes;
    if let Entry::Tunnel {
        purposes: tunnel, ..
    } = &ex.conn.entry
    {
        purposes = purposes.union(*tunnel);
    }
    purposes = purposes.union(requested(request)?);
    ex.purposes = purposes;
    Ok(())
}

/// The purposes a request's `X-Robots-Guard-Purpose` fields add, the fields
/// removed.
fn requested<B>(request: &mut Request<B>) -> Result<Purposes, Refusal> {
    let headers = request.headers_mut();
    if !headers.contains_key(&PURPOSE_HEADER) {
        return Ok(Purposes::NONE);
    }
    let mut added = Purposes::NONE;
    let mut problem = None;
    for value in headers.get_all(&PURPOSE_HEADER) {
        match value.to_str().map(str::parse::<Purposes>) {
            Ok(Ok(listed)) => added = added.union(listed),
            Ok(Err(unknown)) => problem = Some(unknown.to_string()),
            Err(_) => problem = Some("it is not text".to_owned()),
        }
    }
    if let Some(problem) = problem {
        return Err(Answer::BadRequest {
            reason: format!("X-Robots-Guard-Purpose cannot be read: {problem}"),
        }
        .into());
    }
    headers.remove(&PURPOSE_HEADER);
    Ok(added)
}
