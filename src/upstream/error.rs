//! What can go wrong talking to an origin, tagged where it happens.
//!
//! Each step of an exchange knows what kind of failure it just met: the
//! destination policy knows a denial from a failed lookup, the connector a
//! refused connection from a slow one and a rejected certificate from any
//! other handshake failure, the exchange whether the client's own request
//! body broke. So each step returns its own variant of [`UpstreamError`],
//! and the callers (the pipeline's answer, the robots.txt fetch's outcome)
//! match on it. Nothing later takes an error apart to guess its kind.

use std::path::PathBuf;
use std::time::Duration;

use crate::policy::destination::{ConnectError, DestinationError};

/// Why a request could not be sent to its origin, or its answer not read.
///
/// The messages are for people: the pipeline puts them in its `502` page and
/// the robots.txt cache in its "unreachable" reason.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// Every address of the host is in `proxy.deny_destinations` (checked
    /// again at connect time, after the pipeline's own check, so a DNS answer
    /// that changed in between cannot slip a denied address in).
    #[error("destination {host} ({addresses}) is in proxy.deny_destinations")]
    Denied {
        /// The host asked for.
        host: String,
        /// Its addresses, comma-separated.
        addresses: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The host asked for.
        host: String,
        /// The resolver's error.
        reason: String,
    },
    /// Every allowed address refused the TCP connection or could not be
    /// reached. The message names the last address's error ("connection
    /// refused") because that is what a person needs to know.
    #[error("cannot connect to {host}:{port}: {source}")]
    Connect {
        /// The host asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// The error of the last address tried.
        #[source]
        source: std::io::Error,
    },
    /// No TCP connection, or no finished TLS handshake, within
    /// `proxy.upstream_connect_timeout`.
    #[error("no connection to {host}:{port} within {waited:?}")]
    ConnectTimeout {
        /// The host asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// The connect timeout.
        waited: Duration,
    },
    /// The origin's certificate failed verification: nothing was sent.
    #[error("the origin's TLS certificate failed verification: {reason}")]
    Certificate {
        /// rustls' verdict on the certificate.
        reason: String,
    },
    /// The TLS handshake failed for another reason (the origin closed the
    /// connection, answered in plaintext, or offered nothing in common).
    #[error("TLS handshake with the origin failed: {reason}")]
    Tls {
        /// What the handshake met.
        reason: String,
    },
    /// The exchange broke off, or the answer was not valid HTTP.
    #[error("the origin's answer broke off or was not valid HTTP: {0}")]
    Protocol(#[source] hyper::Error),
    /// The client's own request body failed while it was being sent (bad
    /// chunking, a connection cut mid-body): the client's fault, not the
    /// origin's, so the pipeline answers `400`, not `502`.
    #[error("the request body from the client broke off or was malformed")]
    ClientBody(#[source] hyper::Error),
    /// The request's URI is not an absolute `http` or `https` URI. The
    /// pipeline never sends one; a tool calling the pools might.
    #[error("{uri} is not an absolute http or https URI")]
    Target {
        /// The URI as given.
        uri: String,
    },
}

impl UpstreamError {
    /// Did the connection never open (denied, unresolvable, refused, slow,
    /// or its TLS handshake failed)? Then nothing of the request was sent.
    pub fn is_connect(&self) -> bool {
        matches!(
            self,
            UpstreamError::Denied { .. }
                | UpstreamError::Resolve { .. }
                | UpstreamError::Connect { .. }
                | UpstreamError::ConnectTimeout { .. }
                | UpstreamError::Certificate { .. }
                | UpstreamError::Tls { .. }
        )
    }
}

impl From<ConnectError> for UpstreamError {
    fn from(error: ConnectError) -> UpstreamError {
        match error {
            ConnectError::Destination(DestinationError::Denied { host, addresses }) => {
                UpstreamError::Denied { host, addresses }
            }
            ConnectError::Destination(DestinationError::Lookup { host, reason }) => {
                UpstreamError::Resolve { host, reason }
            }
            ConnectError::Io { host, port, error } => UpstreamError::Connect {
                host,
                port,
                source: error,
            },
            ConnectError::TimedOut { host, port, waited } => {
                UpstreamError::ConnectTimeout { host, port, waited }
            }
        }
    }
}

/// Why the upstream pools (or their TLS configuration) could not be built.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBuildError {
    /// An extra root file could not be read.
    #[error("cannot read tls.extra_roots file {}: {error}", path.display())]
    ReadRoots {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// An extra root file holds no usable certificate.
    #[error("tls.extra_roots file {} holds no valid PEM certificate{detail}", path.display())]
    BadRoots {
        /// The file.
        path: PathBuf,
        /// What went wrong, if known.
        detail: String,
    },
    /// rustls refused the configuration.
    #[error("TLS client configuration: {0}")]
    Tls(#[from] rustls::Error),
}
