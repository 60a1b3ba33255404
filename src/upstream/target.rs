//! Where a request goes and how its target is written on the wire, read
//! from its absolute-form URI.
//!
//! The pools take requests as a proxy receives them, `GET http://host/path`.
//! HTTP/1.1 to an origin wants the origin form, `GET /path` with `Host`
//! (RFC 9112 §3.2); HTTP/2 takes scheme, authority and path from the URI as
//! pseudo-header fields, so there the absolute URI is kept. Which of the two
//! a request gets is known only once a connection is chosen, so the target
//! keeps the absolute URI and writes either form on demand.

use http::header::HeaderValue;
use http::uri::{Parts, Uri};

use super::error::UpstreamError;
use crate::origin::Scheme;

/// A request's destination: its scheme and its absolute URI.
#[derive(Debug, Clone)]
pub(super) struct Target {
    scheme: Scheme,
    uri: Uri,
}

impl Target {
    /// The target of an absolute `http` or `https` URI.
    ///
    /// # Errors
    ///
    /// [`UpstreamError::Target`] for any other URI.
    pub(super) fn of(uri: &Uri) -> Result<Target, UpstreamError> {
        let scheme = match uri.scheme_str() {
            Some("http") => Scheme::Http,
            Some("https") => Scheme::Https,
            _ => return Err(not_absolute(uri)),
        };
        match uri.host() {
            Some(host) if !host.is_empty() => Ok(Target {
                scheme,
                uri: uri.clone(),
            }),
            _ => Err(not_absolute(uri)),
        }
    }

    /// `http` or `https`.
    pub(super) fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The URI as the request named it: what HTTP/2 sends.
    pub(super) fn absolute(&self) -> &Uri {
        &self.uri
    }

    /// The authority as written (`host[:port]`): with the scheme, what
    /// connections are pooled by. Two spellings of one host merely get
    /// separate lists.
    pub(super) fn authority(&self) -> &str {
        self.uri.authority().map_or("", |a| a.as_str())
    }

    /// The host as written; an IPv6 literal keeps its brackets, which the
    /// destination policy's resolver accepts.
    pub(super) fn host(&self) -> &str {
        self.uri.host().unwrap_or_default()
    }

    /// The host as a TLS server name: an IPv6 literal without brackets.
    pub(super) fn server_name(&self) -> &str {
        let host = self.host();
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }

    /// The port, the scheme's default when the URI names none.
    pub(super) fn port(&self) -> u16 {
        self.uri
            .port_u16()
            .unwrap_or_else(|| self.scheme.default_port())
    }

    /// The request target in origin form, `/path?query` (RFC 9112 §3.2.1):
    /// what HTTP/1.1 sends.
    pub(super) fn origin_form(&self) -> Uri {
        match self.uri.path_and_query() {
            Some(path) if path.as_str() != "/" => {
                let mut parts = Parts::default();
                parts.path_and_query = Some(path.clone());
                Uri::from_parts(parts).unwrap_or_default()
            }
            _ => Uri::default(),
        }
    }

    /// `Host` for HTTP/1.1: the host as written, and the port unless it is
    /// the scheme's default (RFC 9112 §3.2).
    pub(super) fn host_field(&self) -> Option<HeaderValue> {
        let host = self.host();
        match self.uri.port_u16() {
            Some(port) if port != self.scheme.default_port() => {
                HeaderValue::from_str(&format!("{host}:{port}")).ok()
            }
            _ => HeaderValue::from_str(host).ok(),
        }
    }
}

fn not_absolute(uri: &Uri) -> UpstreamError {
    UpstreamError::Target {
        uri: uri.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(uri: &str) -> Target {
        Target::of(&uri.parse().expect("uri")).expect("target")
    }

    #[test]
    fn both_forms_and_the_host_field_come_from_the_uri() {
        let t = target("http://example.com:8080/a/b?q=1");
        assert_eq!(t.origin_form(), "/a/b?q=1");
        assert_eq!(t.absolute(), "http://example.com:8080/a/b?q=1");
        assert_eq!(t.host_field().expect("host"), "example.com:8080");
        assert_eq!((t.authority(), t.port()), ("example.com:8080", 8080));

        let t = target("https://example.com:443");
        assert_eq!(t.origin_form(), "/");
        assert_eq!(t.host_field().expect("host"), "example.com");
        assert_eq!(t.port(), 443);

        let t = target("https://[::1]:8443/x");
        assert_eq!((t.host(), t.server_name()), ("[::1]", "::1"));
        assert_eq!(t.host_field().expect("host"), "[::1]:8443");
    }

    #[test]
    fn only_absolute_http_and_https_uris_are_targets() {
        for uri in ["/path", "ftp://example.com/f", "*"] {
            let error = Target::of(&uri.parse().expect("uri")).expect_err(uri);
            assert!(matches!(error, UpstreamError::Target { .. }), "{uri}");
        }
    }
}
