//! An origin: (scheme, host, port), the unit robots.txt applies to
//! (RFC 9309 §2.3: rules apply to the scheme, host and port they were
//! fetched from).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::uri::{Authority, Scheme as UriScheme, Uri};

/// `http` or `https`: the two are different origins for robots.txt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// The scheme's name as in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port used when a URL names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Why a request target does not name an origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// No scheme: an origin-form request (`GET /path`) sent to a proxy.
    #[error(
        "the request target has no scheme; a proxy needs an absolute URL like http://host/path"
    )]
    NoScheme,
    /// A scheme other than http or https.
    #[error("unsupported scheme `{0}`; only http and https can be proxied")]
    UnsupportedScheme(String),
    /// No host in the URL or authority.
    #[error("the request target has no host")]
    NoHost,
    /// The host is not a valid DNS name or IP literal.
    #[error("invalid host `{0}`")]
    InvalidHost(String),
    /// The port is not a number from 0 to 65535.
    #[error("invalid port `{0}`")]
    InvalidPort(String),
}

/// A normalised origin: lowercase host (IPv6 without brackets), explicit
/// port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// http or https.
    pub scheme: Scheme,
    /// Lowercase DNS name or IP literal (IPv6 without brackets).
    pub host: String,
    /// Port, defaults filled in.
    pub port: u16,
}

impl Origin {
    /// The origin of an absolute-form request target.
    ///
    /// # Errors
    ///
    /// [`OriginError`] when the URI has no scheme, an unsupported one, or no
    /// valid host.
    pub fn from_uri(uri: &Uri) -> Result<Origin, OriginError> {
        let scheme = match uri.scheme() {
            None => return Err(OriginError::NoScheme),
            Some(s) if *s == UriScheme::HTTP => Scheme::Http,
            Some(s) if *s == UriScheme::HTTPS => Scheme::Https,
            Some(s) => return Err(OriginError::UnsupportedScheme(s.as_str().to_string())),
        };
        let authority = uri.authority().ok_or(OriginError::NoHost)?;
        Origin::from_authority(scheme, authority)
    }

    /// The origin for `scheme` and an authority (`host[:port]`), as in a
    /// CONNECT request.
    ///
    /// # Errors
    ///
    /// [`OriginError::NoHost`], [`OriginError::InvalidHost`] (also for a
    /// bracketed host that is not an IPv6 literal) or
    /// [`OriginError::InvalidPort`].
    pub fn from_authority(scheme: Scheme, authority: &Authority) -> Result<Origin, OriginError> {
        let (written, after_host) = split_authority(authority.as_str());
        let bracketed = bracket_inside(written);
        let host = bracketed.unwrap_or(written);
        if host.is_empty() {
            return Err(OriginError::NoHost);
        }
        let invalid = || OriginError::InvalidHost(written.to_string());
        // One spelling per address, so that robots.txt, pacing and the loop
        // check see `127.1`, `0x7f.0.0.1` and `127.0.0.1` (or `[0:0::1]` and
        // `[::1]`) as the one host they are.
        let host = match bracketed {
            // RFC 3986 §3.2.2: brackets hold an IP-literal, never a name.
            // An IPv4-mapped address is that IPv4 address.
            Some(inner) => IpAddr::V6(inner.parse::<Ipv6Addr>().map_err(|_| invalid())?)
                .to_canonical()
                .to_string(),
            None if !valid_host(host) => return Err(invalid()),
            None => match numeric_host(host) {
                Numeric::Name => host.to_ascii_lowercase(),
                Numeric::Address {
                    canonical: true, ..
                } => host.to_string(),
                Numeric::Address { ip, .. } => ip.to_string(),
                Numeric::Invalid => return Err(invalid()),
            },
        };
        Ok(Origin {
            scheme,
            host,
            port: port(after_host)?.unwrap_or(scheme.default_port()),
        })
    }

    /// `authority` with this origin's host in it, when the two name the same
    /// address differently (`127.1`, `0x7f.0.0.1`, `127.0.0.1.` or
    /// `[::ffff:7f00:1]` for `127.0.0.1`), so that the address robots.txt
    /// and pacing were decided for is the one connected to, under a name
    /// every resolver and TLS library reads. `None` when the authority
    /// already says it, or names a host by name (its letter case and
    /// trailing dot are the client's). Any userinfo is left out.
    pub fn respelled(&self, authority: &Authority) -> Option<Authority> {
        // The usual case, settled without splitting: written as held.
        if let Some(rest) = authority.as_str().strip_prefix(self.host.as_str()) {
            if rest.is_empty() || rest.starts_with(':') {
                return None;
            }
        }
        let (written, after_host) = split_authority(authority.as_str());
        let bare = bracket_inside(written).unwrap_or(written);
        if bare == self.host || self.host.parse::<IpAddr>().is_err() {
            return None;
        }
        format!("{}{after_host}", self.bracketed_host())
            .parse()
            .ok()
    }

    /// `host:port` with IPv6 hosts bracketed, for connecting and `Host`
    /// headers; the port is left out when it is the scheme's default.
    pub fn authority(&self) -> String {
        let host = self.bracketed_host();
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The host with IPv6 literals in brackets.
    pub fn bracketed_host(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }

    /// `scheme://authority/robots.txt`.
    pub fn robots_url(&self) -> String {
        format!("{}://{}/robots.txt", self.scheme.as_str(), self.authority())
    }

    /// The key pacing uses: politeness protects the machine, so it is the
    /// host alone, whatever the scheme and port.
    /// A fully qualified name's trailing dot is left out here: `example.com.`
    /// is the same machine as `example.com` (the origins stay apart, as URLs
    /// keep them), and a client must not double its rate by switching.
    pub fn pacing_key(&self) -> &str {
        host_pacing_key(&self.host)
    }
}

/// The pacing key of a host as an [`Origin`] holds it (see
/// [`Origin::pacing_key`]), for callers that have only the host.
pub fn host_pacing_key(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.authority())
    }
}

/// The host of `authority` as written (brackets kept), as
/// `Authority::host` gives it, from one pass over the bytes.
pub(crate) fn written_host(authority: &Authority) -> &str {
    split_authority(authority.as_str()).0
}

/// What is inside a bracketed host (`[::1]` gives `::1`); `None` for a
/// host written without brackets.
fn bracket_inside(written: &str) -> Option<&str> {
    written.strip_prefix('[').and_then(|h| h.strip_suffix(']'))
}

/// Splits an authority `http` has already parsed into the host as written
/// (brackets kept) and what follows it (`:port`, or nothing), after any
/// userinfo `@`. One pass over the bytes: `Authority::host` walks the
/// string again for every call, and this runs for every request.
fn split_authority(authority: &str) -> (&str, &str) {
    let host_port = match authority.bytes().rposition(|b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let bytes = host_port.as_bytes();
    let end = if host_port.starts_with('[') {
        memchr::memchr(b']', bytes).map_or(bytes.len(), |close| close + 1)
    } else {
        memchr::memchr(b':', bytes).unwrap_or(bytes.len())
    };
    host_port.split_at(end)
}

/// The port in what follows the host (`:port`), `None` when there is none
/// or it is empty (`host:` means the default, RFC 3986 §3.2.3). `http`
/// accepts any characters there and `Authority::port_u16` then answers
/// `None`, which would silently turn `host:99999` or `host:abc` into the
/// default port.
fn port(after_host: &str) -> Result<Option<u16>, OriginError> {
    match after_host.strip_prefix(':') {
        None | Some("") => Ok(None),
        Some(written) => match written.parse::<u16>() {
            Ok(port) if written.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(port)),
            _ => Err(OriginError::InvalidPort(written.to_string())),
        },
    }
}

/// DNS names of letters, digits, `-`, `_` and dots. IPv4 literals are
/// dotted digits, so they pass as they are; IPv6 literals come bracketed
/// and are checked apart.
fn valid_host(host: &str) -> bool {
    // One pass. A dot stands before the first byte, so a leading dot is an
    // empty label like `..`; a substring search for `..` cost more than the
    // rest of the origin's parsing.
    let mut previous = b'.';
    host.len() <= 253
        && host.bytes().all(|b| {
            let allowed = b.is_ascii_alphanumeric()
                || b == b'-'
                || b == b'_'
                || (b == b'.' && previous != b'.');
            previous = b;
            allowed
        })
}

/// What a host that passed [`valid_host`] is, by the WHATWG URL
/// standard's IPv4 rule: a host whose last label is a number is an IPv4
/// address, in one to four parts, each decimal, octal (a leading `0`) or
/// hex (`0x`). Browsers and `inet_aton` read `127.1` and `2130706433` as
/// `127.0.0.1`, and so does the resolver the proxy connects through.
enum Numeric {
    /// A DNS name.
    Name,
    /// An IPv4 address; `canonical` when written as four plain decimal
    /// parts (then the text is kept as it is).
    Address { ip: Ipv4Addr, canonical: bool },
    /// Ends in a number but is no address (`1.2.3.4.5`, `256.1.1.1`,
    /// `example.123`).
    Invalid,
}

fn numeric_host(host: &str) -> Numeric {
    // One trailing dot is allowed, as in a fully qualified name. Bytes, not
    // `str::split`: this runs for every request.
    let trimmed = host.strip_suffix('.').unwrap_or(host).as_bytes();
    // Most names end in a letter that no number has (`.com`): settled here.
    // (`0x` alone is a number: zero.)
    let could_end_a_number = |b: &u8| b.is_ascii_hexdigit() || b.eq_ignore_ascii_case(&b'x');
    if !trimmed.last().is_some_and(could_end_a_number) {
        return Numeric::Name;
    }
    let last = match trimmed.iter().rposition(|&b| b == b'.') {
        Some(dot) => &trimmed[dot + 1..],
        None => trimmed,
    };
    if !looks_numeric(last) {
        return Numeric::Name;
    }
    let mut parts = [0u64; 4];
    let mut count = 0;
    let mut canonical = trimmed.len() == host.len();
    for part in trimmed.split(|&b| b == b'.') {
        let (Some(slot), Some((value, plain))) = (parts.get_mut(count), number_part(part)) else {
            return Numeric::Invalid;
        };
        *slot = value;
        canonical &= plain;
        count += 1;
    }
    canonical &= count == 4;
    let Some((last, leading)) = parts[..count].split_last() else {
        return Numeric::Invalid;
    };
    // The last part fills the bytes the others leave: 127.1 is 127.0.0.1.
    let last_bytes = 4 - leading.len() as u32;
    if leading.iter().any(|part| *part > 255) || *last >= 1u64 << (8 * last_bytes) {
        return Numeric::Invalid;
    }
    let mut address = *last;
    for (i, part) in leading.iter().enumerate() {
        address |= part << (8 * (3 - i));
    }
    match u32::try_from(address) {
        Ok(bits) => Numeric::Address {
            ip: Ipv4Addr::from(bits),
            canonical,
        },
        Err(_) => Numeric::Invalid,
    }
}

/// Digits only, or `0x` and hex digits: a number, whether or not its value
/// fits (an overflowing last label makes the host invalid, not a name).
fn looks_numeric(label: &[u8]) -> bool {
    match label {
        [] => false,
        [b'0', b'x' | b'X', hex @ ..] => hex.iter().all(u8::is_ascii_hexdigit),
        digits => digits.iter().all(u8::is_ascii_digit),
    }
}

/// A part of a numeric host: its value, and whether it is plain decimal
/// (no leading zero, no `0x`). `None` when it is not a number.
fn number_part(part: &[u8]) -> Option<(u64, bool)> {
    let (digits, radix, plain) = match part {
        [] => return None,
        [b'0', b'x' | b'X', hex @ ..] => (hex, 16, false),
        [b'0', octal @ ..] if !octal.is_empty() => (octal, 8, false),
        decimal => (decimal, 10, true),
    };
    // `0x` alone is zero; too many digits for a u64 is no number.
    digits.iter().try_fold((0u64, plain), |(value, plain), &b| {
        let digit = if b.is_ascii_digit() {
            u32::from(b - b'0')
        } else {
            char::from(b).to_digit(radix)?
        };
        if digit >= radix {
            return None;
        }
        let value = value
            .checked_mul(u64::from(radix))?
            .checked_add(u64::from(digit))?;
        Some((value, plain))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(uri: &str) -> Result<Origin, OriginError> {
        Origin::from_uri(&uri.parse::<Uri>().expect("valid uri"))
    }

    #[test]
    fn origin_normalises_scheme_host_port() {
        let o = origin("http://Example.COM/path").expect("origin");
        assert_eq!(
            (o.scheme, o.host.as_str(), o.port),
            (Scheme::Http, "example.com", 80)
        );
        assert_eq!(o.robots_url(), "http://example.com/robots.txt");
        let o = origin("https://example.com:8443/").expect("origin");
        assert_eq!(o.to_string(), "https://example.com:8443");
        let o = origin("http://[::1]:8080/x").expect("origin");
        assert_eq!(
            (o.host.as_str(), o.authority()),
            ("::1", "[::1]:8080".to_string())
        );
        assert_eq!(
            origin("https://example.com:443/")
                .expect("origin")
                .authority(),
            "example.com"
        );
    }

    #[test]
    fn origin_rejects_what_a_proxy_cannot_serve() {
        assert_eq!(origin("/just/a/path"), Err(OriginError::NoScheme));
        assert_eq!(
            origin("ftp://example.com/"),
            Err(OriginError::UnsupportedScheme("ftp".into()))
        );
        assert!(origin("http://exa$mple.com/").is_err());
        for bad in ["http://.example.com/", "http://example..com/", "http://../"] {
            assert!(
                matches!(origin(bad), Err(OriginError::InvalidHost(_))),
                "{bad}"
            );
        }
        let dotted = origin("http://Example.com./").expect("a trailing dot is allowed");
        assert_eq!(dotted.host, "example.com.");
        assert_eq!(
            dotted.pacing_key(),
            origin("http://example.com/").expect("origin").pacing_key()
        );
    }

    #[test]
    fn origin_rejects_malformed_ports_and_brackets() {
        assert_eq!(
            origin("http://example.com:99999/"),
            Err(OriginError::InvalidPort("99999".into()))
        );
        assert_eq!(
            origin("http://example.com:8o/"),
            Err(OriginError::InvalidPort("8o".into()))
        );
        assert_eq!(
            origin("http://example.com:+80/"),
            Err(OriginError::InvalidPort("+80".into()))
        );
        assert_eq!(
            origin("http://[example.com]/"),
            Err(OriginError::InvalidHost("[example.com]".into()))
        );
        assert_eq!(
            origin("http://[127.0.0.1]:8080/"),
            Err(OriginError::InvalidHost("[127.0.0.1]".into()))
        );
        assert_eq!(origin("http://example.com:/").map(|o| o.port), Ok(80));
        assert_eq!(origin("http://u:p@example.com:81/").map(|o| o.port), Ok(81));
        assert_eq!(origin("https://[::1]:0/").map(|o| o.port), Ok(0));
    }

    #[test]
    fn the_host_split_agrees_with_http_on_every_authority_shape() {
        for written in [
            "example.com",
            "example.com:8080",
            "example.com:",
            "u:p@example.com:81",
            "u@x@example.com",
            "[::1]",
            "[::1]:8443",
            "u:p@[2001:db8::1]:80",
            "127.0.0.1:3128",
        ] {
            let authority: Authority = written.parse().expect("authority");
            let (host, rest) = split_authority(authority.as_str());
            assert_eq!(host, authority.host(), "{written}");
            assert_eq!(port(rest).ok().flatten(), authority.port_u16(), "{written}");
        }
    }

    #[test]
    fn numeric_hosts_get_one_spelling() {
        for (written, host) in [
            ("http://127.0.0.1/", "127.0.0.1"),
            ("http://127.1/", "127.0.0.1"),
            ("http://127.0.1/", "127.0.0.1"),
            ("http://2130706433/", "127.0.0.1"),
            ("http://0x7f.0.0.1/", "127.0.0.1"),
            ("http://0X7F.1/", "127.0.0.1"),
            ("http://0177.0.0.01/", "127.0.0.1"),
            ("http://127.0.0.1./", "127.0.0.1"),
            ("http://0x/", "0.0.0.0"),
            ("http://10.0.0.255/", "10.0.0.255"),
            ("http://[0:0::1]/", "::1"),
            ("http://[::FFFF:7F00:1]/", "127.0.0.1"),
            ("http://[2001:DB8::0:1]/", "2001:db8::1"),
            ("http://123.example/", "123.example"),
            ("http://0x.example/", "0x.example"),
        ] {
            assert_eq!(
                origin(written).map(|o| o.host),
                Ok(host.to_string()),
                "{written}"
            );
        }
        for written in [
            "http://1.2.3.4.5/",
            "http://256.0.0.1/",
            "http://1.16777216/",
            "http://4294967296/",
            "http://example.123/",
            "http://08.0.0.1/",
            "http://0xg.1/",
            "http://99999999999999999999999/",
        ] {
            assert!(
                matches!(origin(written), Err(OriginError::InvalidHost(_))),
                "{written}: {:?}",
                origin(written)
            );
        }
    }

    #[test]
    fn authorities_are_respelled_only_for_other_spellings_of_an_address() {
        let respelled = |uri: &str| {
            let uri: Uri = uri.parse().expect("uri");
            let origin = Origin::from_uri(&uri).expect("origin");
            uri.authority()
                .and_then(|a| origin.respelled(a))
                .map(|a| a.to_string())
        };
        assert_eq!(
            respelled("http://127.1:8080/"),
            Some("127.0.0.1:8080".into())
        );
        assert_eq!(respelled("http://u:p@0x7f.1/"), Some("127.0.0.1".into()));
        assert_eq!(respelled("http://127.0.0.1./"), Some("127.0.0.1".into()));
        assert_eq!(
            respelled("https://[::ffff:7f00:1]:443/"),
            Some("127.0.0.1:443".into())
        );
        assert_eq!(respelled("http://[0:0::1]:81/"), Some("[::1]:81".into()));
        for unchanged in [
            "http://127.0.0.1:8080/",
            "http://[::1]/",
            "http://Example.COM/",
            "http://example.com./",
        ] {
            assert_eq!(respelled(unchanged), None, "{unchanged}");
        }
    }

    #[test]
    fn http_and_https_are_different_origins_but_one_pacing_key() {
        let a = origin("http://example.com/").expect("origin");
        let b = origin("https://example.com/").expect("origin");
        assert_ne!(a, b);
        assert_eq!(a.pacing_key(), b.pacing_key());
    }
}
