//! Upgraded connections (WebSocket and other `Upgrade`s): after the origin
//! answers `101`, the client and origin sides are joined byte for byte.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

/// Waits for both sides to finish upgrading, then copies bytes both ways
/// until either closes. `held` (the host's pacing slot) lives as long as
/// the pipe.
pub async fn pipe<T: Send>(client: OnUpgrade, origin: OnUpgrade, held: T) {
    let (client, origin) = match tokio::try_join!(client, origin) {
        Ok(pair) => pair,
        Err(error) => {
            tracing::debug!(%error, "upgrade did not complete");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut origin = TokioIo::new(origin);
    match tokio::io::copy_bidirectional(&mut client, &mut origin).await {
        Ok((up, down)) => tracing::debug!(up, down, "upgraded connection closed"),
        Err(error) => tracing::debug!(%error, "upgraded connection broke"),
    }
    drop(held);
}
