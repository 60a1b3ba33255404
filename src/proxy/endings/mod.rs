//! How a request that passed every phase ends: forwarded to its origin, or,
//! for a CONNECT, a tunnel whose first bytes decide what is done with it
//! (intercepted TLS, plain HTTP through the pipeline, or a blind tunnel).

mod connect;
mod forward;
mod intercept;
mod peek;
mod tunnel;
mod upgrade;

use http::{Request, Response};
use hyper::body::Incoming;

use super::exchange::Exchange;
use super::response::Refusal;
use crate::origin::Origin;
use crate::policy::PacePermit;
use crate::upstream::ProxyBody;

/// Ends the request: a CONNECT opens its tunnel, anything else is forwarded.
/// `permit` is the host's pacing slot, held for as long as the exchange runs.
pub(crate) async fn end(
    ex: &mut Exchange,
    origin: &Origin,
    request: Request<Incoming>,
    permit: Option<PacePermit>,
) -> Result<Response<ProxyBody>, Refusal> {
    if ex.connect {
        // Boxed: a CONNECT's future (tunnel set-up) is large, and inline it
        // would size the future of every forwarded request too.
        Box::pin(connect::open(ex, origin, request, permit)).await
    } else {
        forward::forward(ex, origin, request, permit).await
    }
}
