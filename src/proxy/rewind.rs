//! A client connection's IO with bytes already read put back in front.
//!
//! Reading a PROXY protocol header takes whatever the socket holds, which
//! may include the start of the first request: those bytes are handed back
//! to hyper before anything else is read. Without a header (the listener's
//! default) nothing is put back and every read goes straight through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, read after `prefix`.
#[derive(Debug)]
pub(crate) struct Rewind<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Rewind<T> {
    /// `inner` as it is: nothing to put back.
    pub(crate) fn new(inner: T) -> Rewind<T> {
        Rewind::with_prefix(inner, Bytes::new())
    }

    /// `inner`, whose next reads return `prefix` first.
    pub(crate) fn with_prefix(inner: T, prefix: Bytes) -> Rewind<T> {
        Rewind { prefix, inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            if self.prefix.is_empty() {
                // Lets go of the header's read buffer.
                self.prefix = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_prefix_comes_first_then_the_stream() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut io = Rewind::with_prefix(ours, Bytes::from_static(b"GET / HT"));
        theirs.write_all(b"TP/1.1\r\n").await.unwrap();
        drop(theirs);
        let mut read = Vec::new();
        io.read_to_end(&mut read).await.unwrap();
        assert_eq!(read, b"GET / HTTP/1.1\r\n");
    }

    #[tokio::test]
    async fn a_small_read_takes_the_prefix_in_parts() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut io = Rewind::with_prefix(ours, Bytes::from_static(b"abcdef"));
        let mut part = [0u8; 4];
        assert_eq!(io.read(&mut part).await.unwrap(), 4);
        assert_eq!(&part, b"abcd");
        assert_eq!(io.read(&mut part).await.unwrap(), 2);
        assert_eq!(&part[..2], b"ef");
    }
}
