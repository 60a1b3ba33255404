//! The header fields a proxy rewrites between client and origin (RFC 9110
//! §7.6: hop-by-hop fields removed, `Via` added; RFC 9112 §3.2: `Host` is the
//! target's authority).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Version};

use crate::origin::{Origin, Scheme};
use crate::upstream::ProxyBody;

/// Header fields that describe one connection and must not be forwarded.
///
/// A `static`, not a `const`: a `const` array of `HeaderName`s is built and
/// dropped anew wherever it is named, which in the per-field loop below cost
/// a thousand instructions per message.
static HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Fields a `Connection` option cannot remove: the robot's identity, which the
/// pipeline has checked or filled in and must deliver. Naming
/// them would let a client pass the identity check and still reach the origin
/// anonymously; RFC 9110 §7.6.1 forbids listing end-to-end fields as
/// connection options anyway.
static IDENTITY: [HeaderName; 2] = [header::USER_AGENT, header::FROM];

/// Removes hop-by-hop fields, including those the `Connection` field names
/// (except [`IDENTITY`]). `Upgrade` goes too unless `keep_upgrade` (a WebSocket
/// handshake keeps `Connection: upgrade` and `Upgrade`).
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    // One pass over the (few) field names finds the fixed hop-by-hop ones, as
    // bits: most messages carry one or none of them, and a lookup per fixed
    // name would hash every one of them each time.
    let mut fixed: u16 = 0;
    for name in headers.keys() {
        if let Some(i) = fixed_hop_by_hop(name) {
            fixed |= 1 << i;
        }
    }
    // Options named in `Connection` that are not fixed hop-by-hop fields,
    // and are present. The usual options, `close`, `keep-alive` and
    // `upgrade`, are settled without a lookup: they are never a field to
    // remove by name (the fixed ones go above), and the lookup of a name
    // given as text costs more than the rest of this function.
    let mut named: Vec<HeaderName> = Vec::new();
    // Bit 0: `Connection` itself (the first of `HOP_BY_HOP`).
    if fixed & 1 != 0 {
        // Bytes, not `to_str` and `str::trim`: the value is checked and
        // trimmed as ASCII once, and names are tokens anyway.
        let options = headers
            .get_all(header::CONNECTION)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|option| {
                !option.is_empty()
                    && ![&b"close"[..], b"keep-alive", b"upgrade"]
                        .iter()
                        .any(|usual| option.eq_ignore_ascii_case(usual))
            })
            .filter_map(|option| std::str::from_utf8(option).ok())
            .filter(|option| headers.contains_key(*option))
            .filter_map(|option| HeaderName::from_bytes(option.as_bytes()).ok())
            .filter(|name| !IDENTITY.contains(name) && !HOP_BY_HOP.contains(name));
        named.extend(options);
    }
    if keep_upgrade {
        // `Connection: upgrade` is written anew below; `Upgrade` stays.
        fixed &= !(1 << HOP_BY_HOP.len());
    }
    for (i, name) in HOP_BY_HOP.iter().chain([&header::UPGRADE]).enumerate() {
        if fixed & (1 << i) != 0 {
            headers.remove(name);
        }
    }
    for name in &named {
        headers.remove(name);
    }
    if keep_upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// The index of `name` in [`HOP_BY_HOP`], or `HOP_BY_HOP.len()` for
/// `Upgrade`. A match on the (always lowercase) text is a length switch and
/// one comparison; comparing against each `HeaderName` of the list cost
/// about 60 comparisons for a usual response head.
fn fixed_hop_by_hop(name: &HeaderName) -> Option<usize> {
    Some(match name.as_str() {
        "connection" => 0,
        "keep-alive" => 1,
        "proxy-connection" => 2,
        "proxy-authenticate" => 3,
        "proxy-authorization" => 4,
        "te" => 5,
        "trailer" => 6,
        "transfer-encoding" => 7,
        "upgrade" => HOP_BY_HOP.len(),
        _ => return None,
    })
}

/// This proxy's `Via` entries (`1.1 <pseudonym>`), built once: one per
/// protocol version, so the common case copies a ready header value.
#[derive(Debug, Clone)]
pub struct Via {
    pseudonym: String,
    /// HTTP/1.0, HTTP/1.1, HTTP/2, HTTP/3.
    entries: [HeaderValue; 4],
}

impl Via {
    /// Entries for `pseudonym` (letters, digits and dashes).
    pub fn new(pseudonym: &str) -> Via {
        let entry = |protocol: &str| {
            HeaderValue::from_str(&format!("{protocol} {pseudonym}"))
                .unwrap_or_else(|_| HeaderValue::from_static("1.1 robots-guard"))
        };
        Via {
            pseudonym: pseudonym.to_string(),
            entries: [entry("1.0"), entry("1.1"), entry("2"), entry("3")],
        }
    }

    /// The pseudonym this proxy uses in `Via`.
    pub fn pseudonym(&self) -> &str {
        &self.pseudonym
    }

    fn entry(&self, version: Version) -> &HeaderValue {
        match version {
            Version::HTTP_10 => &self.entries[0],
            Version::HTTP_2 => &self.entries[2],
            Version::HTTP_3 => &self.entries[3],
            _ => &self.entries[1],
        }
    }

    /// Appends this proxy to `Via` (RFC 9110 §7.6.3).
    pub fn append(&self, headers: &mut HeaderMap, version: Version) {
        let entry = self.entry(version);
        // One lookup: `entry` hashes the name once for both cases.
        let mut existing = match headers.entry(header::VIA) {
            header::Entry::Vacant(vacant) => {
                vacant.insert(entry.clone());
                return;
            }
            header::Entry::Occupied(existing) => existing,
        };
        // Every earlier field line counts (RFC 9110 §5.3): they are joined
        // with this proxy's entry into one. A line that is not text is left
        // as it is, and the entry goes on a line of its own after it.
        let mut joined = String::new();
        for line in existing.iter() {
            let Ok(text) = line.to_str() else {
                existing.append(entry.clone());
                return;
            };
            joined.push_str(text);
            joined.push_str(", ");
        }
        joined.push_str(entry.to_str().unwrap_or_default());
        match HeaderValue::from_str(&joined) {
            Ok(value) => {
                existing.insert(value);
            }
            Err(_) => existing.append(entry.clone()),
        }
    }

    /// Does a `Via` field already name this proxy? Then the request looped.
    pub fn names(&self, headers: &HeaderMap) -> bool {
        via_names(headers, &self.pseudonym)
    }
}

/// Does a `Via` field already name this proxy? Then the request looped.
pub fn via_names(headers: &HeaderMap, pseudonym: &str) -> bool {
    // Bytes, not text: a line another hop folded obs-text into still counts.
    headers
        .get_all(header::VIA)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|entry| {
            entry
                .split(u8::is_ascii_whitespace)
                .filter(|word| !word.is_empty())
                .nth(1)
                == Some(pseudonym.as_bytes())
        })
}

/// Prepares a client request for the origin: hop-by-hop fields out, `Via`
/// in, `Host` the target's authority, HTTP version chosen by the upstream
/// connection.
pub fn prepare_request(
    request: &mut Request<ProxyBody>,
    origin: &Origin,
    via: &Via,
    keep_upgrade: bool,
) {
    let version = request.version();
    let host_is_target = origin.scheme == Scheme::Http
        && host_names_target(request.headers(), request.uri(), origin);
    let headers = request.headers_mut();
    strip_hop_by_hop(headers, keep_upgrade);
    // RFC 9112 §3.2.2: the target's authority, not what the client wrote.
    // Unless the client wrote exactly that, the field goes and the upstream
    // client sets it from the URI (and an HTTP/2 origin gets `:authority`
    // only). A plain-http origin is always HTTP/1.1, so a matching field
    // can stay: the same bytes, without formatting them for each request.
    if !host_is_target {
        headers.remove(header::HOST);
    }
    via.append(headers, version);
    *request.version_mut() = Version::HTTP_11;
}

/// Is there exactly one `Host` field, and does it say what the upstream
/// client would set from `uri` (whose origin is `origin`): the host as
/// written, with the port only when it is not the scheme's default?
fn host_names_target(headers: &HeaderMap, uri: &http::Uri, origin: &Origin) -> bool {
    let mut fields = headers.get_all(header::HOST).iter();
    let (Some(field), None) = (fields.next(), fields.next()) else {
        return false;
    };
    let Some(host) = uri.authority().map(crate::origin::written_host) else {
        return false;
    };
    let field = field.as_bytes();
    let port = Some(origin.port).filter(|port| *port != origin.scheme.default_port());
    match port {
        None => field == host.as_bytes(),
        Some(port) => {
            field
                .strip_prefix(host.as_bytes())
                .and_then(|rest| rest.strip_prefix(b":"))
                .filter(|digits| !digits.starts_with(b"0"))
                .and_then(|digits| std::str::from_utf8(digits).ok()?.parse::<u16>().ok())
                == Some(port)
        }
    }
}

/// Prepares an origin response for the client: hop-by-hop fields out, `Via`
/// in, and HTTP/1.1 towards the client whatever the origin spoke. An
/// HTTP/1.0 origin's version would otherwise reach the client's connection,
/// which hyper would then answer as HTTP/1.0 and close after every request.
pub fn prepare_response<B>(response: &mut Response<B>, via: &Via, keep_upgrade: bool) {
    let version = response.version();
    let headers = response.headers_mut();
    strip_hop_by_hop(headers, keep_upgrade);
    via.append(headers, version);
    *response.version_mut() = Version::HTTP_11;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_field_switch_matches_the_list() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(fixed_hop_by_hop(name), Some(i), "{name}");
        }
        assert_eq!(fixed_hop_by_hop(&header::UPGRADE), Some(HOP_BY_HOP.len()));
        for name in [
            header::HOST,
            header::VIA,
            header::CONTENT_LENGTH,
            header::USER_AGENT,
        ] {
            assert_eq!(fixed_hop_by_hop(&name), None, "{name}");
        }
    }

    #[test]
    fn hop_by_hop_fields_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            "proxy-authorization",
            HeaderValue::from_static("Basic eA=="),
        );
        h.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert("x-kept", HeaderValue::from_static("yes"));
        strip_hop_by_hop(&mut h, false);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, vec!["x-kept"]);
    }

    #[test]
    fn connection_options_cannot_remove_the_identity() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("user-agent, From, x-secret"),
        );
        h.insert(header::USER_AGENT, HeaderValue::from_static("FooBot/1.0"));
        h.insert(header::FROM, HeaderValue::from_static("a@example.com"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h, false);
        let mut names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, vec!["from", "user-agent"]);
    }

    #[test]
    fn upgrade_kept_for_websocket() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h[header::UPGRADE], "websocket");
        assert_eq!(h[header::CONNECTION], "upgrade");
    }

    #[test]
    fn host_kept_only_when_it_is_exactly_the_target() {
        let check = |uri: &str, hosts: &[&str]| {
            let mut h = HeaderMap::new();
            for host in hosts {
                h.append(header::HOST, HeaderValue::from_str(host).unwrap());
            }
            let uri: http::Uri = uri.parse().unwrap();
            host_names_target(&h, &uri, &Origin::from_uri(&uri).unwrap())
        };
        assert!(check("http://example.com/a", &["example.com"]));
        assert!(check("http://example.com:8080/a", &["example.com:8080"]));
        assert!(check("http://[::1]:8080/a", &["[::1]:8080"]));
        // The default port is left out, as the upstream client writes it.
        assert!(!check("http://example.com:80/a", &["example.com:80"]));
        assert!(check("http://example.com:80/a", &["example.com"]));
        assert!(!check("http://example.com/a", &["example.com:80"]));
        assert!(!check("http://example.com:8080/a", &["example.com:08080"]));
        assert!(!check("http://example.com:8080/a", &["example.com:808"]));
        assert!(!check("http://example.com:8080/a", &["example.com"]));
        assert!(!check("http://example.com/a", &["other.example"]));
        assert!(!check("http://example.com/a", &["Example.com"]));
        assert!(!check("http://example.com/a", &[]));
        assert!(!check(
            "http://example.com/a",
            &["example.com", "example.com"]
        ));
    }

    #[test]
    fn via_appended_and_loops_detected() {
        let via = Via::new("robots-guard-abc");
        let mut h = HeaderMap::new();
        h.insert(header::VIA, HeaderValue::from_static("1.0 fred"));
        via.append(&mut h, Version::HTTP_11);
        assert_eq!(h[header::VIA], "1.0 fred, 1.1 robots-guard-abc");
        assert!(via.names(&h));
        assert!(!via_names(&h, "robots-guard-abd"));
        let mut fresh = HeaderMap::new();
        via.append(&mut fresh, Version::HTTP_2);
        assert_eq!(fresh[header::VIA], "2 robots-guard-abc");
    }

    #[test]
    fn via_keeps_every_earlier_line() {
        let via = Via::new("robots-guard-abc");
        let mut h = HeaderMap::new();
        h.append(header::VIA, HeaderValue::from_static("1.0 fred"));
        h.append(header::VIA, HeaderValue::from_static("1.1 nowhere.example"));
        via.append(&mut h, Version::HTTP_11);
        let lines: Vec<_> = h.get_all(header::VIA).iter().collect();
        assert_eq!(
            lines,
            ["1.0 fred, 1.1 nowhere.example, 1.1 robots-guard-abc"]
        );

        // A line that is not text stays as it was; the entry follows it.
        let odd = HeaderValue::from_bytes(b"1.1 caf\xe9").expect("obs-text is a valid value");
        let mut h = HeaderMap::new();
        h.append(header::VIA, odd.clone());
        h.append(header::VIA, HeaderValue::from_static("1.0 fred"));
        via.append(&mut h, Version::HTTP_11);
        let lines: Vec<_> = h.get_all(header::VIA).iter().cloned().collect();
        assert_eq!(
            lines,
            [
                odd,
                HeaderValue::from_static("1.0 fred"),
                HeaderValue::from_static("1.1 robots-guard-abc")
            ]
        );
        assert!(via.names(&h));

        // This proxy's entry folded by a later hop into a line with obs-text.
        let mut folded = HeaderMap::new();
        folded.insert(
            header::VIA,
            HeaderValue::from_bytes(b"1.1 caf\xe9,1.1  robots-guard-abc (x)").expect("value"),
        );
        assert!(via.names(&folded));
        assert!(!via_names(&folded, "robots-guard-abd"));
    }
}
