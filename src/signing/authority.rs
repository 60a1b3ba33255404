//! The `@authority` component value (RFC 9421 §2.2.3): the target's
//! authority normalised as RFC 9110 §4.2.3 says, so the signer and a
//! verifier that computes it from the request it received agree.

/// `authority` (`host[:port]`, an IPv6 host in brackets) normalised:
/// the host in lowercase (hosts are case-insensitive, RFC 3986 §3.2.2), an
/// empty port dropped, and the port dropped when it is one of
/// `default_ports`, the scheme's default.
///
/// A forwarded request's authority comes from the proxy's normalised origin,
/// which already leaves out its scheme's default port; the directory's comes
/// from a `Host` field whose scheme the admin listener cannot see, and there
/// 80 and 443 are both defaults for the scheme they can arrive under.
pub(crate) fn normalize(authority: &str, default_ports: &[&str]) -> String {
    let (host, port) = split(authority);
    let mut out = host.to_ascii_lowercase();
    if let Some(port) = port.filter(|p| !p.is_empty() && !default_ports.contains(p)) {
        out.push(':');
        out.push_str(port);
    }
    out
}

/// Splits `host[:port]`; the colons inside a bracketed IPv6 host are not
/// port separators.
fn split(authority: &str) -> (&str, Option<&str>) {
    let after_host = match authority.find(']') {
        Some(end) if authority.starts_with('[') => end + 1,
        _ => 0,
    };
    match authority[after_host..].rfind(':') {
        Some(colon) => {
            let colon = after_host + colon;
            (&authority[..colon], Some(&authority[colon + 1..]))
        }
        None => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lowercased_and_default_or_empty_port_dropped() {
        let table = [
            ("Example.COM", &[][..], "example.com"),
            ("example.com:8080", &[], "example.com:8080"),
            ("example.com:", &[], "example.com"),
            ("example.com:443", &["80", "443"], "example.com"),
            ("example.com:80", &["80", "443"], "example.com"),
            ("example.com:443", &[], "example.com:443"),
            ("[::1]:8080", &[], "[::1]:8080"),
            ("[::1]", &["80", "443"], "[::1]"),
            ("[FE80::1]:443", &["443"], "[fe80::1]"),
            ("127.0.0.1:9180", &["80", "443"], "127.0.0.1:9180"),
        ];
        for (input, defaults, want) in table {
            assert_eq!(normalize(input, defaults), want, "{input}");
        }
    }
}
