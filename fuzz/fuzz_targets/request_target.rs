//! Fuzzes what the proxy does with a request target before any network I/O:
//! `http` parses it (`Uri` for absolute-form, `Authority` for CONNECT), then
//! `Origin::from_uri` / `Origin::from_authority` turn it into an origin, the
//! robots engine extracts the path it matches (`path_params_query`), the
//! product token is cut from a `User-Agent`, and the crawler-trap check
//! (`repeated_segments`) looks at the path.
//!
//! The whole input is used for every parser (as bytes, or as a lossy string
//! where a `&str` is wanted). Invariants checked on every origin:
//!
//! - the host is lowercase, not empty and carries no brackets;
//! - `authority()` parses as an `Authority` and gives back the same origin,
//!   and `robots_url()` / `Display` parse as absolute `Uri`s;
//! - a port written in the target is the port of the origin (`host:99999`
//!   or `host:abc` must be refused, not read as the default port);
//! - a bracketed host is an IPv6 literal (`[example.com]` is refused).
//!
//! And: `path_params_query` always yields a path starting with `/`;
//! `product_token` yields `[A-Za-z_-]*`; `repeated_segments` returns a run
//! made of the path's own segments.
#![no_main]

use http::uri::{Authority, Uri};
use libfuzzer_sys::fuzz_target;
use robots_guard::origin::{Origin, Scheme};
use robots_guard::proxy::repeated_segments;
use robots_guard::robots::{path_params_query, product_token};

fuzz_target!(|data: &[u8]| {
    if let Ok(uri) = Uri::try_from(data) {
        if let Ok(origin) = Origin::from_uri(&uri) {
            let authority = uri.authority().expect("an origin needs an authority");
            check_origin(&origin, authority);
            // Display and robots_url are absolute URIs of the same origin.
            let shown: Uri = origin.to_string().parse().expect("Display parses");
            assert_eq!(Origin::from_uri(&shown).as_ref(), Ok(&origin));
            let robots: Uri = origin.robots_url().parse().expect("robots_url parses");
            assert_eq!(robots.path(), "/robots.txt");
            assert_eq!(Origin::from_uri(&robots).as_ref(), Ok(&origin));
        }
        check_path(uri.path());
    }
    if let Ok(authority) = Authority::try_from(data) {
        for scheme in [Scheme::Http, Scheme::Https] {
            if let Ok(origin) = Origin::from_authority(scheme, &authority) {
                assert_eq!(origin.scheme, scheme);
                check_origin(&origin, &authority);
            }
        }
    }

    let text = String::from_utf8_lossy(data);
    let extracted = path_params_query(data);
    assert_eq!(extracted.first(), Some(&b'/'), "path must start with /");
    assert!(extracted.len() <= data.len() + 1);
    let token = product_token(&text);
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_'),
        "product token {token:?}"
    );
    check_path(&text);
});

/// Invariants of an origin built from `authority`.
fn check_origin(origin: &Origin, authority: &Authority) {
    let host = &origin.host;
    assert!(!host.is_empty());
    assert_eq!(*host, host.to_ascii_lowercase(), "host not lowercase");
    assert!(!host.contains(['[', ']']), "brackets kept in {host:?}");
    if authority.host().starts_with('[') {
        assert!(
            host.parse::<std::net::Ipv6Addr>().is_ok(),
            "bracketed host {:?} accepted but is not IPv6",
            authority.host()
        );
    }
    // The port the target wrote, if any (after the host; an empty port
    // means the default, RFC 3986 §3.2.3).
    let after_host = authority
        .as_str()
        .rsplit('@')
        .next()
        .unwrap_or_default()
        .get(authority.host().len()..)
        .unwrap_or_default();
    if let Some(written) = after_host.strip_prefix(':').filter(|p| !p.is_empty()) {
        assert_eq!(
            written.parse::<u16>().ok(),
            Some(origin.port),
            "port {written:?} read as {}",
            origin.port
        );
    }
    let again = Authority::try_from(origin.authority().as_str()).expect("authority() parses");
    assert_eq!(
        Origin::from_authority(origin.scheme, &again).as_ref(),
        Ok(origin),
        "authority() {:?} does not give back the origin",
        origin.authority()
    );
    assert_eq!(origin.pacing_key(), host);
}

/// The crawler-trap check never panics and reports a run of real segments.
fn check_path(path: &str) {
    for limit in [0, 1, 3] {
        if let Some(run) = repeated_segments(path, limit) {
            assert!(limit > 0);
            assert!(run.starts_with('/'));
            for segment in run.split('/').filter(|s| !s.is_empty()) {
                assert!(path.split('/').any(|s| s == segment), "{run:?} not in path");
            }
        }
    }
}
