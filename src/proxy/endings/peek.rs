//! What a CONNECT tunnel carries, read from its first bytes.
//!
//! A client that sends CONNECT usually speaks TLS inside the tunnel, but not
//! always: Node's undici (and so Node's `fetch` with a proxy) tunnels plain
//! `http://` requests too. The first bytes tell them apart: a TLS record
//! starts with the handshake content type (22), an HTTP request with a method
//! token and a space. Anything else is closed. The bytes read to decide are
//! handed back through [`Prefixed`], so the TLS acceptor or the HTTP server
//! sees the stream whole.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// What the tunnel's first bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Carried {
    /// A TLS handshake.
    Tls,
    /// A plain HTTP/1.x request.
    Http,
    /// Something else (or nothing before the client closed or the time ran
    /// out).
    Other,
}

/// Enough bytes to tell: the longest common method (`OPTIONS`) and a space.
const DECIDING_BYTES: usize = 8;

/// The TLS record type of a handshake (RFC 8446 §5.1).
const TLS_HANDSHAKE: u8 = 22;

/// Reads the first bytes of `io` (waiting at most `limit`) and says what they
/// are; returns them too, to be replayed.
pub(super) async fn peek<T: AsyncRead + Unpin>(io: &mut T, limit: Duration) -> (Carried, Bytes) {
    let mut seen = BytesMut::with_capacity(64);
    let reading = async {
        loop {
            match classify(&seen) {
                Some(carried) => return carried,
                None if seen.len() >= DECIDING_BYTES => return Carried::Other,
                None => {}
            }
            match io.read_buf(&mut seen).await {
                Ok(0) | Err(_) => return Carried::Other,
                Ok(_) => {}
            }
        }
    };
    let carried = tokio::time::timeout(limit, reading)
        .await
        .unwrap_or(Carried::Other);
    (carried, seen.freeze())
}

/// `Some` once the bytes decide.
fn classify(bytes: &[u8]) -> Option<Carried> {
    let first = *bytes.first()?;
    if first == TLS_HANDSHAKE {
        return Some(Carried::Tls);
    }
    // A method token (RFC 9110 §9: a token; in practice upper-case letters)
    // followed by a space.
    for (i, &b) in bytes.iter().enumerate().take(DECIDING_BYTES) {
        if b == b' ' {
            return Some(if i > 0 { Carried::Http } else { Carried::Other });
        }
        if !b.is_ascii_uppercase() {
            return Some(Carried::Other);
        }
    }
    None
}

/// A stream whose first bytes were already read: it yields them again before
/// reading on. Writes go straight through.
pub(super) struct Prefixed<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Prefixed<T> {
    /// `inner`, with `prefix` read back first.
    pub(super) fn new(prefix: Bytes, inner: T) -> Prefixed<T> {
        Prefixed { prefix, inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn first_bytes_say_what_a_tunnel_carries() {
        assert_eq!(classify(b""), None);
        assert_eq!(classify(&[22, 3, 1]), Some(Carried::Tls));
        assert_eq!(classify(b"GET / HTTP/1.1\r\n"), Some(Carried::Http));
        assert_eq!(classify(b"OPTIONS * HTTP/1.1"), Some(Carried::Http));
        assert_eq!(classify(b"GE"), None, "not enough to tell");
        assert_eq!(classify(b"SSH-2.0-OpenSSH"), Some(Carried::Other));
        assert_eq!(classify(b" GET"), Some(Carried::Other));
        assert_eq!(classify(b"get / HTTP/1.1"), Some(Carried::Other));
        assert_eq!(
            classify(b"ABCDEFGHIJ"),
            None,
            "decided by the length cap in peek"
        );
    }

    #[tokio::test]
    async fn the_peeked_bytes_are_read_again() {
        let (mut client, server) = tokio::io::duplex(64);
        client
            .write_all(b"GET /x HTTP/1.1\r\n\r\n")
            .await
            .expect("write");
        let mut server = server;
        let (carried, prefix) = peek(&mut server, Duration::from_secs(1)).await;
        assert_eq!(carried, Carried::Http);
        let mut whole = Vec::new();
        drop(client);
        Prefixed::new(prefix, server)
            .read_to_end(&mut whole)
            .await
            .expect("read");
        assert_eq!(whole, b"GET /x HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn silence_and_garbage_are_other() {
        let (_client, mut server) = tokio::io::duplex(64);
        let (carried, _) = peek(&mut server, Duration::from_millis(20)).await;
        assert_eq!(carried, Carried::Other);
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(b"ABCDEFGHIJKL").await.expect("write");
        let (carried, prefix) = peek(&mut server, Duration::from_secs(1)).await;
        assert_eq!(carried, Carried::Other);
        assert!(prefix.len() >= DECIDING_BYTES);
    }
}
