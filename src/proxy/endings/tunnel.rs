//! A blind tunnel: bytes both ways until either side closes.

use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::super::ConnectionScope;

/// Copies between the client's tunnel and the origin until either closes.
/// A blind tunnel cannot be wound down gracefully: it runs until it ends or
/// the server's drain times out.
pub(super) async fn relay<T>(
    client: SocketAddr,
    mut tunnel: T,
    mut upstream: TcpStream,
    scope: &ConnectionScope,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    tokio::select! {
        copied = tokio::io::copy_bidirectional(&mut tunnel, &mut upstream) => match copied {
            Ok((up, down)) => tracing::debug!(%client, up, down, "tunnel closed"),
            Err(error) => tracing::debug!(%client, %error, "tunnel broke"),
        },
        () = scope.closing() => {}
    }
}
