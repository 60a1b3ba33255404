//! From a URL to the part robots.txt rules are matched against
//! (RFC 9309 §2.2.2: path, params and query; the reference's
//! `GetPathParamsQuery`).

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
    let search_start = if url.starts_with(b"//") { 2 } else { 0 };
    let early_path = find_any(url, search_start, b"/?;");
    let mut protocol_end = find_sub(url, search_start, b"://");
    if early_path.lt_npos(protocol_end) {
        protocol_end = None;
    }
    let protocol_end = match protocol_end {
        Some(p) => p + 3,
        None => search_start,
    };
    let Some(path_start) = find_any(url, protocol_end, b"/?;") else {
        return Cow::Borrowed(b"/");
    };
    let hash = memchr::memchr(b'#', &url[search_start..]).map(|h| h + search_start);
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

/// First index at or after `from` holding one of `set`. `None` sorts after
/// every `Some`, like `npos` does in the reference.
fn find_any(s: &[u8], from: usize, set: &[u8]) -> Option<usize> {
    s.get(from..)?
        .iter()
        .position(|b| set.contains(b))
        .map(|p| p + from)
}

fn find_sub(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(s.get(from..)?, needle).map(|p| p + from)
}

/// `Option` ordering with `None` as "not found" = infinitely far.
trait NposOrd {
    fn lt_npos(self, other: Self) -> bool;
}

impl NposOrd for Option<usize> {
    fn lt_npos(self, other: Self) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a < b,
            (Some(_), None) => true,
            _ => false,
        }
    }
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
