//! Target: which origin the request is for, and the URL it will be judged
//! and forwarded as.
//!
//! - A request on the listener must be absolute-form (`http://host/path`) or
//!   a CONNECT to `host:port` on one of `tls.connect_ports`.
//! - A request inside a CONNECT tunnel goes to the CONNECT's origin whatever
//!   its own target says, so the certificate the proxy minted, the origin it
//!   judged and the origin it reaches are one.
//! - Requests that would come back to this proxy are refused (`508`), as are
//!   over-long URLs (`414`), crawler-trap paths (`403`) and messages whose
//!   length is ambiguous (`400`).
//! - The host is read as resolvers read it (`127.1` is `127.0.0.1`) and the
//!   request goes out to that spelling; the path and query are brought to
//!   their RFC 3986 normal form ([`crate::robots::normalise`]), which is both
//!   what robots.txt judges and what the origin receives.

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::uri::PathAndQuery;
use http::{Method, Request, Uri};

use super::super::exchange::{Entry, Exchange};
use super::super::response::{Answer, Refusal};
use crate::origin::{Origin, OriginError, Scheme};

/// Reads the request's origin and rewrites its target into the form it is
/// judged and forwarded as.
pub(crate) fn target<B>(
    ex: &mut Exchange,
    request: &mut Request<B>,
) -> Result<Arc<Origin>, Refusal> {
    let origin = if ex.connect {
        connect_target(ex, request)?
    } else {
        request_target(ex, request)?
    };
    let origin = Arc::new(origin);
    ex.origin = Some(origin.clone());
    Ok(origin)
}

/// A CONNECT's `host:port`.
fn connect_target<B>(ex: &Exchange, request: &Request<B>) -> Result<Origin, Refusal> {
    let bad = |reason: String| Refusal::from(Answer::BadRequest { reason });
    let authority = request
        .uri()
        .authority()
        .ok_or_else(|| bad("CONNECT needs a host:port target".to_owned()))?;
    if authority.port_u16().is_none() {
        return Err(bad(format!("CONNECT {authority}: the target needs a port")));
    }
    let origin =
        Origin::from_authority(Scheme::Https, authority).map_err(|e| bad(e.to_string()))?;
    if !ex.settings.connect_ports.contains(&origin.port) {
        return Err(Answer::PortRefused { port: origin.port }.into());
    }
    if targets_listener(&origin, ex.services.listen) {
        return Err(Answer::Loop {
            target: origin.to_string(),
        }
        .into());
    }
    Ok(origin)
}

/// A request to forward: absolute-form on the listener, origin-form inside
/// a tunnel.
fn request_target<B>(ex: &Exchange, request: &mut Request<B>) -> Result<Origin, Refusal> {
    let settings = &ex.settings;
    if request.method() == Method::CONNECT {
        return Err(Answer::BadRequest {
            reason: "CONNECT inside a CONNECT tunnel is not supported".to_owned(),
        }
        .into());
    }
    unambiguous_length(ex, request)?;
    if let Entry::Tunnel { .. } = &ex.conn.entry {
        // The exchange's URL is the request's target at the tunnel's origin.
        *request.uri_mut() = ex.url.clone();
    }
    let uri = request.uri();
    // The length as sent, without formatting the URI into a new string.
    let length = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if length > settings.max_url_length {
        return Err(Answer::UriTooLong {
            limit: settings.max_url_length,
        }
        .into());
    }
    if ex.services.via.names(request.headers()) {
        return Err(Answer::Loop {
            target: uri.to_string(),
        }
        .into());
    }
    let origin = Origin::from_uri(uri).map_err(|e| {
        let reason = match e {
            OriginError::NoScheme => format!(
                "{e}. This is robots-guard, a forward proxy: set HTTP_PROXY=http://{} \
                 and request absolute URLs through it.",
                ex.services.listen
            ),
            other => other.to_string(),
        };
        Answer::BadRequest { reason }
    })?;
    if targets_listener(&origin, ex.services.listen) {
        return Err(Answer::Loop {
            target: origin.to_string(),
        }
        .into());
    }
    respell(request, &origin);
    normalise(request)?;
    if let Some(run) = repeated_segments(request.uri().path(), settings.max_path_repeats) {
        return Err(Answer::CrawlerTrap {
            run,
            limit: settings.max_path_repeats,
        }
        .into());
    }
    Ok(origin)
}

/// Refuses a request carrying both `Content-Length` and `Transfer-Encoding`:
/// a proxy and an origin that read its length differently could see two
/// requests where the other sees one (request smuggling). RFC 9112 §6.1
/// lets a server refuse it; hardened proxies (Envoy) do. The answer closes
/// the connection, and nothing is forwarded.
///
/// hyper drops the `Content-Length` of such a head before the service sees
/// it, so the connection's IO noted it as the head arrived.
fn unambiguous_length<B>(ex: &Exchange, request: &Request<B>) -> Result<(), Refusal> {
    let headers = request.headers();
    let both = headers.contains_key(CONTENT_LENGTH) && headers.contains_key(TRANSFER_ENCODING);
    if ex.conn.activity.take_ambiguous_length() || both {
        return Err(Answer::BadRequest {
            reason: "the request has both Content-Length and Transfer-Encoding, so its length \
                     is ambiguous; send one of them"
                .to_owned(),
        }
        .into());
    }
    Ok(())
}

/// Writes the origin's spelling of an address into the target (`127.1` →
/// `127.0.0.1`, see [`Origin::respelled`]); names are left as the client
/// wrote them. A `Host` field that then no longer names the target is
/// replaced when the request is forwarded.
fn respell<B>(request: &mut Request<B>, origin: &Origin) {
    let Some(authority) = request.uri().authority().and_then(|a| origin.respelled(a)) else {
        return;
    };
    let mut parts = request.uri().clone().into_parts();
    parts.authority = Some(authority);
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
}

/// Rewrites the path and query into their RFC 3986 normal form.
fn normalise<B>(request: &mut Request<B>) -> Result<(), Refusal> {
    let Some(path_and_query) = request.uri().path_and_query() else {
        return Ok(());
    };
    let Cow::Owned(normal) = crate::robots::normalise(path_and_query.as_str()) else {
        return Ok(());
    };
    let invalid = |e: &dyn std::fmt::Display| {
        Refusal::from(Answer::BadRequest {
            reason: format!("the request target cannot be normalised: {e}"),
        })
    };
    let mut parts = request.uri().clone().into_parts();
    parts.path_and_query = Some(PathAndQuery::try_from(normal).map_err(|e| invalid(&e))?);
    *request.uri_mut() = Uri::from_parts(parts).map_err(|e| invalid(&e))?;
    Ok(())
}

/// Would a request to `origin` come straight back to this listener?
fn targets_listener(origin: &Origin, listen: SocketAddr) -> bool {
    if origin.port != listen.port() {
        return false;
    }
    if origin.host == "localhost" {
        return true;
    }
    match origin.host.parse::<IpAddr>() {
        Ok(ip) => {
            let ours = listen.ip();
            let local = ip.is_loopback() || ip.is_unspecified();
            ip == ours || ((ours.is_unspecified() || ours.is_loopback()) && local)
        }
        Err(_) => false,
    }
}

/// The first run of path segments that repeats back to back more than
/// `limit` times, if any (`limit` 0: never): the endless link loops of
/// crawler traps (`/a/b/a/b/a/b/a/b`). Periods of up to 8 segments are
/// checked, which costs O(8 × segments).
pub fn repeated_segments(path: &str, limit: u32) -> Option<String> {
    // A trap needs more than `limit` segments: most paths are far shorter.
    if limit == 0 || memchr::memchr_iter(b'/', path.as_bytes()).count() <= limit as usize {
        return None;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let limit = limit as usize;
    for period in 1..=8.min(segments.len() / 2) {
        // `equal` counts consecutive positions i where segment i equals
        // segment i + period; a run of `period * limit` such positions means
        // limit + 1 back-to-back copies.
        let mut equal = 0;
        for i in 0..segments.len() - period {
            if segments[i] == segments[i + period] {
                equal += 1;
                if equal >= period * limit {
                    let start = i + 1 - equal;
                    return Some(format!("/{}", segments[start..start + period].join("/")));
                }
            } else {
                equal = 0;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::repeated_segments;

    #[test]
    fn crawler_trap_paths_are_found() {
        assert_eq!(
            repeated_segments("/a/b/a/b/a/b/a/b", 3),
            Some("/a/b".into())
        );
        assert_eq!(repeated_segments("/a/b/a/b/a/b", 3), None);
        assert_eq!(repeated_segments("/x/a/a/a/a/y", 3), Some("/a".into()));
        assert_eq!(repeated_segments("/x/a/a/a/y", 3), None);
        assert_eq!(
            repeated_segments("/c/1/2/3/1/2/3/1/2/3/1/2/3/d", 3),
            Some("/1/2/3".into())
        );
        assert_eq!(repeated_segments("/a/b/a/b/a/b/a/b", 0), None);
        assert_eq!(repeated_segments("/", 3), None);
        assert_eq!(repeated_segments("/images/2024/01/photo.jpg", 1), None);
        assert_eq!(repeated_segments("/a/a", 1), Some("/a".into()));
        // Long paths stay cheap: 4096 distinct segments.
        let long: String = (0..4096).map(|i| format!("/s{i}")).collect();
        assert_eq!(repeated_segments(&long, 3), None);
    }
}
