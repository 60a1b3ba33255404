//! TLS interception: the proxy terminates the client's TLS with a leaf
//! certificate minted for the host (SNI is not needed: the CONNECT named it)
//! and serves the decrypted HTTP/1.1 or HTTP/2 requests through the pipeline.

use std::sync::Arc;

use http::uri::Authority;
use tokio::io::{AsyncRead, AsyncWrite};

use super::super::connection;
use super::super::exchange::Conn;

/// Terminates TLS on `io` and serves what it carries. Gives up (logging why)
/// when the handshake fails or takes longer than the head timeout.
pub(super) async fn serve_tls<T>(io: T, conn: Arc<Conn>, authority: &Authority)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let live = conn.scope.live();
    let Some(minter) = live.services().minter.current() else {
        tracing::warn!(client = %conn.client, "no interception CA in force; tunnel closed");
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(minter.server_config(authority.host()));
    let timeout = live.settings().timeouts.head;
    let tls = match tokio::time::timeout(timeout, acceptor.accept(io)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::warn!(
                client = %conn.client,
                host = authority.host(),
                %error,
                "TLS handshake with the client failed (does it trust the robots-guard CA?)"
            );
            return;
        }
        Err(_) => {
            tracing::warn!(client = %conn.client, host = authority.host(), "TLS handshake with the client timed out");
            return;
        }
    };
    // The client chose the protocol in the handshake (h2 and http/1.1 are
    // offered); no ALPN means HTTP/1.1 (RFC 9113 §3.2: h2 over TLS is
    // negotiated by ALPN only).
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    connection::serve_in_tunnel(tls, conn, http2).await;
}
