//! The PROXY protocol (HAProxy's, version 1 text and version 2 binary) on
//! the listener, for a proxy behind a TCP load balancer.
//!
//! With `proxy.proxy_protocol` on, every connection must start with a
//! header naming the client the load balancer accepted; that address then
//! stands for the client everywhere (`allow_clients`, profiles, logs, the
//! access log). The header is read before anything else, within
//! `header_read_timeout`; a connection without a valid one is closed
//! unanswered (there is no client to answer: the peer is the balancer),
//! logged at debug, counted in `robots_guard_proxy_protocol_rejected_total`,
//! and a warning says so at most once a minute, so a misconfigured balancer
//! or a scan cannot flood the log.
//!
//! A v2 `LOCAL` header (the balancer's own health check), a v1 `UNKNOWN`
//! one and a v2 header without an IP address family carry no client: the
//! socket's peer is the client, as the specification asks.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use ppp::{v1, v2, HeaderResult, PartialResult};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::rewind::Rewind;

/// Largest header accepted, in bytes. A v1 header is at most 107 bytes; a
/// v2 header is 16 bytes, the addresses (at most 216, for UNIX sockets) and
/// the balancer's TLVs, which in practice (AWS, GCP, Azure, HAProxy) take a
/// few hundred bytes at most.
const MAX_HEADER: usize = 4096;

/// What the first read is given room for: a header and, usually, the
/// request that follows it in the same segment.
const FIRST_READ: usize = 1024;

/// The first bytes of a v2 header.
const V2_SIGNATURE: &[u8] = v2::PROTOCOL_PREFIX;

/// The first bytes of a v1 header.
const V1_SIGNATURE: &[u8] = b"PROXY ";

/// Why a connection's header was refused; the connection is closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Rejected {
    /// The connection started with something else (an HTTP request, TLS).
    #[error("no PROXY protocol header: the connection starts with other bytes")]
    Missing,
    /// A header that does not parse, or is longer than [`MAX_HEADER`].
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(String),
    /// The peer closed the connection (or it failed) before the header was
    /// complete.
    #[error("the connection ended before its PROXY protocol header was complete")]
    Truncated,
    /// No complete header within `header_read_timeout`.
    #[error("no complete PROXY protocol header within {0:?}")]
    Timeout(Duration),
}

impl Rejected {
    /// The `reason` label of the rejection metric.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Rejected::Missing => "missing",
            Rejected::Malformed(_) => "malformed",
            Rejected::Truncated => "truncated",
            Rejected::Timeout(_) => "timeout",
        }
    }
}

/// Reads the header at the start of `io` (whose peer is `peer`) within
/// `timeout`. Returns the client it names (or `peer`, when it names none)
/// and the connection, with whatever was read past the header put back.
///
/// # Errors
///
/// [`Rejected`], saying why the connection must be closed.
pub(crate) async fn read_header<T: AsyncRead + Unpin>(
    mut io: T,
    peer: SocketAddr,
    timeout: Duration,
) -> Result<(SocketAddr, Rewind<T>), Rejected> {
    let mut buf = BytesMut::with_capacity(FIRST_READ);
    let read = async {
        loop {
            match io.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return Err(Rejected::Truncated),
                Ok(_) => {}
            }
            if let Some(found) = parse(&buf, peer)? {
                return Ok(found);
            }
            if buf.len() >= MAX_HEADER {
                return Err(Rejected::Malformed(format!(
                    "longer than {MAX_HEADER} bytes"
                )));
            }
            buf.reserve(FIRST_READ.min(MAX_HEADER - buf.len()));
        }
    };
    let (client, consumed) = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| Rejected::Timeout(timeout))??;
    buf.advance(consumed);
    Ok((client, Rewind::with_prefix(io, buf.freeze())))
}

/// The client a complete header in `bytes` names, and the header's length;
/// `None` while the header may still be complete with more bytes.
fn parse(bytes: &[u8], peer: SocketAddr) -> Result<Option<(SocketAddr, usize)>, Rejected> {
    let starts = |signature: &[u8]| {
        let n = bytes.len().min(signature.len());
        bytes[..n] == signature[..n]
    };
    if !starts(V2_SIGNATURE) && !starts(V1_SIGNATURE) {
        return Err(Rejected::Missing);
    }
    if let (true, Some(length)) = (bytes.starts_with(V2_SIGNATURE), bytes.get(14..16)) {
        // Refused before it is read: a v2 header says its length up front.
        let total = 16 + usize::from(u16::from_be_bytes([length[0], length[1]]));
        if total > MAX_HEADER {
            return Err(Rejected::Malformed(format!(
                "a v2 header of {total} bytes, longer than {MAX_HEADER}"
            )));
        }
    }
    let header = HeaderResult::parse(bytes);
    if header.is_incomplete() {
        return Ok(None);
    }
    match header {
        HeaderResult::V1(Ok(header)) => {
            let client = match header.addresses {
                v1::Addresses::Tcp4(a) => SocketAddr::from((a.source_address, a.source_port)),
                v1::Addresses::Tcp6(a) => SocketAddr::from((a.source_address, a.source_port)),
                v1::Addresses::Unknown => peer,
            };
            Ok(Some((client, header.header.len())))
        }
        HeaderResult::V2(Ok(header)) => {
            let client = match (header.command, header.addresses) {
                (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                    SocketAddr::from((a.source_address, a.source_port))
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                    SocketAddr::from((a.source_address, a.source_port))
                }
                // LOCAL (a health check), and families without an IP.
                _ => peer,
            };
            Ok(Some((client, header.len())))
        }
        HeaderResult::V1(Err(error)) => Err(Rejected::Malformed(error.to_string())),
        HeaderResult::V2(Err(error)) => Err(Rejected::Malformed(error.to_string())),
    }
}

/// Logs rejected connections: each at debug, and a warning with the count
/// at most once per [`Rejections::WARN_EVERY`].
#[derive(Debug)]
pub(crate) struct Rejections {
    started: Instant,
    /// When the next warning may be written, in seconds after `started`.
    next_warning: AtomicU64,
    /// Rejections since the last warning.
    unreported: AtomicU64,
}

impl Rejections {
    /// The shortest time between two warnings.
    const WARN_EVERY: Duration = Duration::from_secs(60);

    pub(crate) fn new() -> Rejections {
        Rejections {
            started: Instant::now(),
            next_warning: AtomicU64::new(0),
            unreported: AtomicU64::new(0),
        }
    }

    /// Logs that `peer`'s connection was closed for `why`.
    pub(crate) fn note(&self, peer: SocketAddr, why: &Rejected) {
        tracing::debug!(%peer, reason = why.word(), error = %why, "connection closed: PROXY protocol");
        self.unreported.fetch_add(1, Ordering::Relaxed);
        let now = self.started.elapsed().as_secs();
        let due = self.next_warning.load(Ordering::Relaxed);
        if now < due {
            return;
        }
        let next = now + Self::WARN_EVERY.as_secs();
        if self
            .next_warning
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let count = self.unreported.swap(0, Ordering::Relaxed);
            tracing::warn!(
                %peer,
                error = %why,
                rejected = count,
                "connections closed without a valid PROXY protocol header (is the load \
                 balancer sending one? at most one such warning a minute; each is logged at debug)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 40000))
    }

    fn client(bytes: &[u8]) -> Result<Option<(SocketAddr, usize)>, Rejected> {
        parse(bytes, peer())
    }

    #[test]
    fn v1_tcp4_and_tcp6_name_the_client() {
        let header = b"PROXY TCP4 10.1.2.3 192.0.2.1 5555 3128\r\nGET";
        let (addr, len) = client(header).unwrap().unwrap();
        assert_eq!(addr, "10.1.2.3:5555".parse().unwrap());
        assert_eq!(&header[len..], b"GET");
        let header = b"PROXY TCP6 2001:db8::7 2001:db8::1 6000 3128\r\n";
        let (addr, len) = client(header).unwrap().unwrap();
        assert_eq!(addr, "[2001:db8::7]:6000".parse().unwrap());
        assert_eq!(len, header.len());
    }

    #[test]
    fn v1_unknown_means_the_peer() {
        let (addr, len) = client(b"PROXY UNKNOWN\r\n").unwrap().unwrap();
        assert_eq!((addr, len), (peer(), 15));
    }

    #[test]
    fn v2_proxy_names_the_client_and_local_means_the_peer() {
        let src: SocketAddr = "10.9.8.7:1234".parse().unwrap();
        let dst: SocketAddr = "10.0.0.1:3128".parse().unwrap();
        let header = v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Proxy,
            v2::Protocol::Stream,
            (src, dst),
        )
        .build()
        .unwrap();
        let mut bytes = header.clone();
        bytes.extend_from_slice(b"GET");
        assert_eq!(client(&bytes).unwrap(), Some((src, header.len())));

        let local = v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Local,
            v2::Protocol::Unspecified,
            v2::Addresses::Unspecified,
        )
        .build()
        .unwrap();
        assert_eq!(client(&local).unwrap(), Some((peer(), local.len())));
    }

    #[test]
    fn a_partial_header_waits_for_more() {
        assert!(client(b"PROXY TCP4 10.1").unwrap().is_none());
        assert!(client(b"PRO").unwrap().is_none());
        assert!(client(&V2_SIGNATURE[..5]).unwrap().is_none());
        let mut v2 = V2_SIGNATURE.to_vec();
        v2.extend_from_slice(&[0x21, 0x11, 0, 12, 10, 0]);
        assert!(client(&v2).unwrap().is_none());
    }

    #[test]
    fn other_bytes_are_missing_and_broken_headers_malformed() {
        assert!(matches!(
            client(b"GET http://a/ HTTP/1.1\r\n"),
            Err(Rejected::Missing)
        ));
        assert!(matches!(client(b"\x16\x03\x01"), Err(Rejected::Missing)));
        assert!(matches!(
            client(b"PROXY TCP4 999.1.1.1 10.0.0.1 1 2\r\n"),
            Err(Rejected::Malformed(_))
        ));
        assert!(matches!(
            client(b"PROXY TCP9 x\r\n"),
            Err(Rejected::Malformed(_))
        ));
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert!(matches!(client(&huge), Err(Rejected::Malformed(_))));
    }
}
