//! From a URL to the part robots.txt rules are matched against
//! (RFC 9309 §2.2.2: path, params and query; the reference's
//! `GetPathParamsQuery`).

use memchr::{memchr, memchr3};

/// Returns the path, `;params` and `?query` of `url`, without scheme,
/// authority or `#fragment`; `/` when there is no path.
///
/// The URL is not normalised: callers send it percent-encoded, as clients do,
/// and it is matched byte for byte. The rules follow the reference exactly:
/// a leading `//` is skipped, a `://` after the first `/`, `?` or `;` is not
/// a scheme separator, a query with no path gets a `/` in front, and a `#`
/// before the path yields `/`.
pub fn path_params_query(url: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    // The proxy passes origin-form targets: already a path (not `//`), it
    // only loses its fragment.
    if url.first() == Some(&b'/') && url.get(1) != Some(&b'/') {
        return Cow::Borrowed(&url[..memchr(b'#', url).unwrap_or(url.len())]);
    }
    let search_start = if url.starts_with(b"//") { 2 } else { 0 };
    let early_path = find_path_char(url, search_start);
    // The reference takes the first `://` as the scheme's end unless a `/`,
    // `?` or `;` comes before it. Such a `://` starts one byte before the
    // first of those (its `/`), so there is nothing to search for.
    let protocol_end = early_path
        .filter(|&at| at > search_start && url[at - 1] == b':' && url[at..].starts_with(b"//"));
    let path_start = match protocol_end {
        Some(slashes) => find_path_char(url, slashes + 2),
        None => early_path,
    };
    let Some(path_start) = path_start else {
        return Cow::Borrowed(b"/");
    };
    let hash = memchr(b'#', &url[search_start..]).map(|h| h + search_start);
    if matches!(hash, Some(h) if h < path_start) {
        return Cow::Borrowed(b"/");
    }
    let path_end = hash.unwrap_or(url.len());
    let path = &url[path_start..path_end];
    if url[path_start] != b'/' {
        let mut owned = Vec::with_capacity(path.len() + 1);
        owned.push(b'/');
        owned.extend_from_slice(path);
        return Cow::Owned(owned);
    }
    Cow::Borrowed(path)
}

/// First index at or after `from` holding `/`, `?` or `;`.
fn find_path_char(s: &[u8], from: usize) -> Option<usize> {
    memchr3(b'/', b'?', b';', s.get(from..)?).map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_url_to_path_params_query() {
        let table: &[(&str, &str)] = &[
            ("", "/"),
            ("http://www.example.com", "/"),
            ("http://www.example.com/", "/"),
            ("http://www.example.com/a", "/a"),
            ("http://www.example.com/a/", "/a/"),
            (
                "http://www.example.com/a/b?c=http://d.e/",
                "/a/b?c=http://d.e/",
            ),
            (
                "http://www.example.com/a/b?c=d&e=f#fragment",
                "/a/b?c=d&e=f",
            ),
            ("example.com", "/"),
            ("example.com/", "/"),
            ("example.com/a", "/a"),
            ("example.com/a/", "/a/"),
            ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
            ("a", "/"),
            ("a/", "/"),
            ("/a", "/a"),
            ("a/b", "/b"),
            ("example.com?a", "/?a"),
            ("example.com/a;b#c", "/a;b"),
            ("//a/b/c", "/b/c"),
            ("http://example.com#frag/path", "/"),
            ("/a/b://c", "/a/b://c"),
            ("/foo/bar?baz=http://foo.bar", "/foo/bar?baz=http://foo.bar"),
            ("/a#b", "/a"),
            ("//a://b/c", "/c"),
            ("://a/b", "/b"),
            ("a:/b", "/b"),
            ("a;b://c/d", "/;b://c/d"),
            ("http://a?b#c", "/?b"),
            ("http:///x", "/x"),
            ("?a", "/?a"),
        ];
        for (url, want) in table {
            let got = path_params_query(url.as_bytes());
            assert_eq!(
                std::str::from_utf8(&got).expect("ascii"),
                *want,
                "url {url:?}"
            );
        }
    }
}
