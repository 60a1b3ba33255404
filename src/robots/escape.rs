//! Percent-normalisation of rule patterns (`MaybeEscapePattern` in the
//! reference; RFC 9309 §2.2.2).
//!
//! Non-ASCII bytes are percent-encoded with upper-case hex and existing `%xx`
//! escapes are upper-cased, so a pattern written in raw UTF-8 matches the
//! encoded URL a client sends. Nothing is ever decoded: `%2F` stays distinct
//! from `/`, as in the reference.

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Appends the normalised form of `pattern` to `out`.
pub fn push_escaped(pattern: &[u8], out: &mut Vec<u8>) {
    if !needs_escaping(pattern) {
        out.extend_from_slice(pattern);
        return;
    }
    let mut i = 0;
    while i < pattern.len() {
        let b = pattern[i];
        if b == b'%' && is_escape_at(pattern, i) {
            out.push(b'%');
            out.push(pattern[i + 1].to_ascii_uppercase());
            out.push(pattern[i + 2].to_ascii_uppercase());
            i += 3;
        } else if b >= 0x80 {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]]);
            i += 1;
        } else {
            out.push(b);
            i += 1;
        }
    }
}

/// Most patterns are plain ASCII with no lower-case escapes: copy them as is.
/// The common case (ASCII, no `%` at all) is decided with two bulk scans.
fn needs_escaping(pattern: &[u8]) -> bool {
    if pattern.is_ascii() && memchr::memchr(b'%', pattern).is_none() {
        return false;
    }
    pattern.iter().enumerate().any(|(i, &b)| {
        b >= 0x80
            || (b == b'%'
                && is_escape_at(pattern, i)
                && (pattern[i + 1].is_ascii_lowercase() || pattern[i + 2].is_ascii_lowercase()))
    })
}

/// `%` followed by two hex digits.
fn is_escape_at(s: &[u8], i: usize) -> bool {
    s.len() > i + 2 && s[i + 1].is_ascii_hexdigit() && s[i + 2].is_ascii_hexdigit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &[u8]) -> String {
        let mut out = Vec::new();
        push_escaped(s, &mut out);
        String::from_utf8(out).expect("escaped output is ASCII")
    }

    #[test]
    fn rfc_percent_encoding_of_patterns() {
        let table: &[(&[u8], &str)] = &[
            (b"/foo/bar", "/foo/bar"),
            ("/foo/bar/ツ".as_bytes(), "/foo/bar/%E3%83%84"),
            (b"/foo/bar/%e3%83%84", "/foo/bar/%E3%83%84"),
            (b"/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
            (b"/a%2fb", "/a%2Fb"),
            (b"/100%", "/100%"),
            (b"/%zz%4", "/%zz%4"),
            (b"/%aa\xff", "/%AA%FF"),
        ];
        for (input, want) in table {
            assert_eq!(escaped(input), *want, "input {input:?}");
        }
    }
}
