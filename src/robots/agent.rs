//! Product tokens: the robot's name as robots.txt groups know it.
//!
//! Two directions meet here. A `User-agent:` line in a robots.txt is cut to
//! its leading `[A-Za-z_-]+` run (the reference's `ExtractUserAgent`; RFC 9309
//! §2.2.1). A client's full `User-Agent` header is reduced to one product
//! token by [`product_token`] (our rule, since the reference leaves it to the
//! crawler).

/// The product token of a robots.txt `User-agent:` value: its leading run of
/// letters, `-` and `_`. So `FooBot/1.0`, `FooBot 2` and `FooBot2` all give
/// `FooBot` (the reference does the same).
pub fn robots_value_token(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .position(|&b| !is_token_byte(b))
        .unwrap_or(value.len());
    &value[..end]
}

/// Is this `User-agent:` value the global group? `*` alone, or `*` followed
/// by whitespace and anything (Google-specific tolerance). `*Bot` is not.
pub fn is_global_agent(value: &[u8]) -> bool {
    match value {
        [b'*'] => true,
        [b'*', next, ..] => matches!(next, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r'),
        _ => false,
    }
}

#[inline]
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'-' || b == b'_'
}

/// Reduces a client's `User-Agent` header to the product token used to pick
/// a robots.txt group.
///
/// The rule, in order:
/// 1. If a comment holds `compatible;` (as in
///    `Mozilla/5.0 (compatible; FooBot/2.1; +http://x)`), the product named
///    right after it: `FooBot`. Robots that dress up as browsers say who
///    they are there.
/// 2. Otherwise the first product of the header: `curl/8.5.0` gives `curl`,
///    `python-requests/2.31` gives `python-requests`.
///
/// The name (before any `/version`) is then cut to its leading
/// `[A-Za-z_-]+` run, exactly as robots.txt `User-agent:` values are cut, so
/// that both sides compare like with like (`FooBot2/1.0` gives `FooBot`). A
/// header with no such run gives the empty token, which matches only the
/// global `*` group in practice. A configured `robot_name` overrides all of
/// this; that choice belongs to the caller.
pub fn product_token(user_agent: &str) -> &str {
    // The first product's name ends at `/`, `(` or whitespace, none of
    // which is a token byte: cutting the trimmed header to its token run
    // gives the same name without a search of its own.
    let name = compatible_product(user_agent).unwrap_or_else(|| user_agent.trim_start());
    let token = robots_value_token(name.as_bytes());
    // The token is a run of ASCII bytes at the start of `name`, so this slice
    // is on a char boundary.
    &name[..token.len()]
}

fn compatible_product(user_agent: &str) -> Option<&str> {
    const MARKER: &[u8] = b"compatible";
    let bytes = user_agent.as_bytes();
    // Case-insensitive search without lower-casing a copy of the header.
    let mut at = 0;
    while let Some(found) = memchr::memchr2(b'c', b'C', &bytes[at..]) {
        let start = at + found;
        at = start + 1;
        let Some(candidate) = bytes.get(start..start + MARKER.len()) else {
            break;
        };
        if !candidate.eq_ignore_ascii_case(MARKER) {
            continue;
        }
        // `compatible` must open a comment item: after `(` or `;`.
        let before = user_agent[..start].trim_end();
        if !(before.ends_with('(') || before.ends_with(';')) {
            continue;
        }
        let after = user_agent[start + MARKER.len()..].trim_start();
        let Some(item) = after.strip_prefix(';') else {
            continue;
        };
        let item = item.trim_start();
        let end = item
            .find(|c: char| c == ';' || c == ')' || c == '/' || c.is_whitespace())
            .unwrap_or(item.len());
        if end > 0 {
            return Some(&item[..end]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_robots_value_cut_to_product_token() {
        let table: &[(&str, &str)] = &[
            ("FooBot", "FooBot"),
            ("FooBot/1.0", "FooBot"),
            ("FooBot 2", "FooBot"),
            ("FooBot;x", "FooBot"),
            ("FooBot2", "FooBot"),
            ("Foo Bar", "Foo"),
            ("Googlebot-Image/1.0", "Googlebot-Image"),
            ("under_score", "under_score"),
            ("*", ""),
            ("", ""),
        ];
        for (value, want) in table {
            assert_eq!(
                robots_value_token(value.as_bytes()),
                want.as_bytes(),
                "{value:?}"
            );
        }
    }

    #[test]
    fn google_global_agent_star_with_trailing_text() {
        assert!(is_global_agent(b"*"));
        assert!(is_global_agent(b"* foo"));
        assert!(is_global_agent(b"*\tfoo"));
        assert!(!is_global_agent(b"*Bot"));
        assert!(!is_global_agent(b"*/1.0"));
        assert!(!is_global_agent(b""));
        assert!(!is_global_agent(b"Foo *"));
    }

    #[test]
    fn ext_product_token_from_user_agent_header() {
        let table: &[(&str, &str)] = &[
            ("Mozilla/5.0 (compatible; FooBot/2.1; +http://x)", "FooBot"),
            ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Googlebot"),
            ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36", "bingbot"),
            ("Mozilla/5.0 (COMPATIBLE;  Baz_Bot ; x)", "Baz_Bot"),
            ("curl/8.5.0", "curl"),
            ("Wget/1.21.3", "Wget"),
            ("python-requests/2.31.0", "python-requests"),
            ("Scrapy/2.11.0 (+https://scrapy.org)", "Scrapy"),
            ("  ExampleBot", "ExampleBot"),
            ("FooBot2/1.0", "FooBot"),
            ("Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0", "Mozilla"),
            ("Mozilla/5.0 (incompatible; X/1)", "Mozilla"),
            ("123bot/1", ""),
            ("", ""),
        ];
        for (header, want) in table {
            assert_eq!(product_token(header), *want, "{header:?}");
        }
    }
}
