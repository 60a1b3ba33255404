//! Destination: the networks the proxy never reaches.
//!
//! `proxy.deny_destinations` is checked after DNS resolution, so a public
//! name that resolves to a private address is refused too. A name that does
//! not resolve passes here and fails where it is fetched (as an unreachable
//! robots.txt, or a `502`). The connectors resolve through the same policy,
//! so an answer that changes between this check and the connect cannot slip
//! through.

use super::super::exchange::Exchange;
use super::super::response::{Answer, Refusal};
use crate::origin::Origin;

/// Refuses origins whose every address is denied.
pub(crate) async fn destination(ex: &Exchange, origin: &Origin) -> Result<(), Refusal> {
    if ex.services.destinations.denies(&origin.host).await {
        return Err(Answer::DestinationDenied {
            host: origin.host.clone(),
        }
        .into());
    }
    Ok(())
}
