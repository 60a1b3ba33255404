//! Destination: the networks the proxy never reaches.
//!
//! `proxy.deny_destinations` is checked after DNS resolution, so a public
//! name that resolves to a private address is refused too. A name that does
//! not resolve passes here and fails where it is fetched (as an unreachable
//! robots.txt, or a `502`). The connectors resolve through the same policy,
//! so an answer that changes between this check and the connect cannot slip
//! through.
//!
//! A profile's own `deny_destinations` is stricter: its request is refused
//! when *any* address of the host is in them, because the connector, which
//! serves every profile, may pick any address the global rules allow. The
//! check and the connect read the same cached answer (kept 30 s), so a
//! resolver cannot swap addresses in between.

use super::super::exchange::Exchange;
use super::super::response::{Answer, Refusal};
use crate::origin::Origin;
use crate::policy::DestinationError;

/// Refuses origins whose every address is denied, or any of whose addresses
/// the request's profile denies.
pub(crate) async fn destination(ex: &Exchange, origin: &Origin) -> Result<(), Refusal> {
    let denied = || Answer::DestinationDenied {
        host: origin.host.clone(),
    };
    let profile_nets = &ex.profile.deny_destinations;
    if profile_nets.is_empty() {
        if ex.services.destinations.denies(&origin.host).await {
            return Err(denied().into());
        }
        return Ok(());
    }
    match ex.services.destinations.resolve(&origin.host).await {
        Ok(addresses) => {
            let in_profile_nets = addresses.iter().any(|ip| {
                let ip = ip.to_canonical();
                profile_nets.iter().any(|net| net.contains(&ip))
            });
            if in_profile_nets {
                return Err(denied().into());
            }
            Ok(())
        }
        Err(DestinationError::Denied { .. }) => Err(denied().into()),
        // Fails where it is fetched, as for every profile.
        Err(DestinationError::Lookup { .. }) => Ok(()),
    }
}
