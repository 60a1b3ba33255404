//! Opening a transport to an origin: DNS through the destination policy,
//! TCP with Happy Eyeballs, then TLS for `https`.
//!
//! The name is resolved once, by [`DestinationPolicy::connect`], and exactly
//! that answer's allowed addresses are connected to: a second lookup by the
//! socket layer could reach whatever a rebinding DNS server says the second
//! time. The addresses are raced RFC 8305 style ([`crate::policy::eyeballs`]),
//! so one that never answers does not use up the time of the others.
//!
//! TLS is tokio-rustls with the configuration of [`super::tls`]. Each
//! failure is tagged here, where it is still plain what it was: the
//! destination policy's errors become [`UpstreamError::Denied`],
//! [`UpstreamError::Resolve`], [`UpstreamError::Connect`] or
//! [`UpstreamError::ConnectTimeout`]; a handshake that fails is a
//! [`UpstreamError::Certificate`] when rustls rejected the certificate, a
//! [`UpstreamError::Tls`] otherwise. TCP and TLS together must finish within
//! the connect timeout.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::error::UpstreamError;
use super::target::Target;
use super::tls;
use crate::origin::Scheme;
use crate::policy::destination::DestinationPolicy;

/// Which protocols to offer an `https` origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offer {
    /// HTTP/2 or HTTP/1.1, as the origin prefers.
    Http2OrHttp1,
    /// HTTP/1.1 only: for protocol upgrades.
    Http1,
}

/// Opens transports to origins. Shared by every worker's pool.
#[derive(Clone)]
pub(super) struct Connector {
    destinations: Arc<DestinationPolicy>,
    timeout: Duration,
    http2_or_http1: TlsConnector,
    http1: TlsConnector,
}

/// An open transport, and whether the origin chose HTTP/2 for it.
pub(super) struct Connected {
    /// The transport, ready for hyper.
    pub(super) io: TokioIo<Stream>,
    /// The origin chose `h2` by ALPN.
    pub(super) http2: bool,
}

impl Connector {
    /// A connector resolving through `destinations`, verifying certificates
    /// with `tls` (which has no ALPN yet), allowing `timeout` for TCP and TLS.
    pub(super) fn new(
        tls: &rustls::ClientConfig,
        destinations: Arc<DestinationPolicy>,
        timeout: Duration,
    ) -> Connector {
        Connector {
            destinations,
            timeout,
            http2_or_http1: TlsConnector::from(tls::offering(tls, tls::HTTP2_OR_HTTP1)),
            http1: TlsConnector::from(tls::offering(tls, tls::HTTP1_ONLY)),
        }
    }

    /// The time allowed to open a connection, TLS included.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The destination policy it resolves through.
    pub(super) fn destinations(&self) -> &Arc<DestinationPolicy> {
        &self.destinations
    }

    /// This connector with another connect timeout.
    pub(super) fn with_timeout(&self, timeout: Duration) -> Connector {
        Connector {
            timeout,
            ..self.clone()
        }
    }

    /// Opens a transport to `target`'s origin: TCP, and for `https` a
    /// verified TLS session offering `offer`.
    ///
    /// # Errors
    ///
    /// The connect variants of [`UpstreamError`] (see
    /// [`UpstreamError::is_connect`]).
    pub(super) async fn connect(
        &self,
        target: &Target,
        offer: Offer,
    ) -> Result<Connected, UpstreamError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let (host, port) = (target.host(), target.port());
        let tcp = self.destinations.connect(host, port, self.timeout).await?;
        // Requests are small writes that wait for an answer: Nagle's
        // algorithm would only hold them back.
        let _ = tcp.set_nodelay(true);
        if target.scheme() == Scheme::Http {
            return Ok(Connected {
                io: TokioIo::new(Stream::Tcp(tcp)),
                http2: false,
            });
        }
        let name = ServerName::try_from(target.server_name().to_owned()).map_err(|e| {
            UpstreamError::Tls {
                reason: format!("{host} cannot be a TLS server name: {e}"),
            }
        })?;
        let tls = match offer {
            Offer::Http2OrHttp1 => &self.http2_or_http1,
            Offer::Http1 => &self.http1,
        };
        let stream = match tokio::time::timeout_at(deadline, tls.connect(name, tcp)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(handshake_failure(&error)),
            Err(_) => {
                return Err(UpstreamError::ConnectTimeout {
                    host: host.to_string(),
                    port,
                    waited: self.timeout,
                })
            }
        };
        let http2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok(Connected {
            io: TokioIo::new(Stream::Tls(Box::new(stream))),
            http2,
        })
    }
}

/// Tags a failed TLS handshake. tokio-rustls hands rustls' own error back
/// inside the `io::Error` it returns: here, right after the handshake, that
/// one error is all there is to look at.
fn handshake_failure(error: &io::Error) -> UpstreamError {
    match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(why)) => UpstreamError::Certificate {
            reason: why.to_string(),
        },
        Some(tls) => UpstreamError::Tls {
            reason: tls.to_string(),
        },
        None => UpstreamError::Tls {
            reason: error.to_string(),
        },
    }
}

/// A connection to an origin: plain TCP, or TLS over TCP.
pub(super) enum Stream {
    /// `http`.
    Tcp(TcpStream),
    /// `https`. Boxed: a TLS session is about a kilobyte, a TCP stream a
    /// few words.
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_shutdown(cx),
        }
    }
}
