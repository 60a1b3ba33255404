//! Pace: politeness per host.
//!
//! At most `max_per_host` requests in flight per host (the name or address,
//! whatever the scheme and port: politeness protects the machine), and at
//! least `default_delay` between request starts, raised to what robots.txt
//! asks for. Requests wait their turn in order; one whose wait would pass
//! `max_wait` is answered `429`. The permit is held until the answer's body
//! has been sent, so "in flight" lasts as long as the transfer.
//!
//! A site that asked for a pause (`Retry-After`) or is slowed after errors
//! (see [`crate::policy::backoff`]) holds its requests back the same way; one
//! that would wait past `max_wait` is answered `429 site-backoff`.
//!
//! A profile's `min_delay` raises the spacing its own requests keep; the
//! host's queue stays one for all profiles, so the site sees one company.
//!
//! A CONNECT in intercept mode takes no slot: its requests each take one. A
//! blind tunnel's start is paced like one request.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::super::exchange::Exchange;
use super::super::response::{Answer, Refusal};
use crate::config::TlsMode;
use crate::fleet::{Fleet, FleetRefusal};
use crate::origin::Origin;
use crate::policy::{PacePermit, PaceRejected};

/// Waits for the host's next slot, or refuses with `429`.
pub(crate) async fn pace(ex: &Exchange, origin: &Origin) -> Result<Option<PacePermit>, Refusal> {
    if ex.connect && ex.settings.tls_mode == TlsMode::Intercept {
        return Ok(None);
    }
    if let Some(fleet) = &ex.services.fleet {
        return pace_in_fleet(ex, origin, fleet).await.map(Some);
    }
    // The wait is timed only when there is one: most requests are admitted
    // on the first poll.
    let mut admit = std::pin::pin!(ex
        .services
        .pacer
        .admit(origin.pacing_key(), ex.delay.max(ex.profile.min_delay)));
    let mut waiting_since = None;
    let permit = std::future::poll_fn(|cx| {
        let polled = admit.as_mut().poll(cx);
        if polled.is_pending() && waiting_since.is_none() {
            waiting_since = Some(Instant::now());
        }
        polled
    })
    .await
    .map_err(|rejected| refusal(origin, rejected))?;
    ex.services
        .metrics
        .pacing_wait(waiting_since.map_or(Duration::ZERO, |since| since.elapsed()));
    Ok(Some(permit))
}

/// The `429` of a request that would wait too long.
fn refusal(origin: &Origin, rejected: PaceRejected) -> Answer {
    match rejected.site_backoff {
        Some(cause) => Answer::SiteBackoff {
            host: origin.host.clone(),
            cause,
            retry_after: rejected.retry_after,
        },
        None => Answer::Pacing {
            host: origin.host.clone(),
            retry_after: rejected.retry_after,
        },
    }
}

/// Fleet mode: the host's turn across every process sharing the store (see
/// [`crate::fleet::pacing`]); `503 fleet-store-unavailable` when the store cannot be
/// reached and the fleet is set to refuse rather than pace alone.
async fn pace_in_fleet(
    ex: &Exchange,
    origin: &Origin,
    fleet: &Fleet,
) -> Result<PacePermit, Refusal> {
    let since = Instant::now();
    let permit = fleet
        .pacer
        .admit(
            &ex.services.pacer,
            origin.pacing_key(),
            ex.delay.max(ex.profile.min_delay),
        )
        .await
        .map_err(|refused| match refused {
            FleetRefusal::Pace(rejected) => refusal(origin, rejected),
            FleetRefusal::StoreUnavailable => Answer::FleetStoreUnavailable {
                host: origin.host.clone(),
            },
        })?;
    ex.services.metrics.pacing_wait(since.elapsed());
    Ok(permit)
}
