//! Line scanner: turns robots.txt bytes into numbered `key: value` records.
//!
//! This reproduces the lexing of Google's reference parser (`robots.cc`,
//! `RobotsTxtParser::Parse` and `GetKeyAndValueFrom`) byte for byte, because
//! site owners test their files against that parser (RFC 9309 §2.2; see
//! `ROBOTS-BEHAVIOUR.md` §B and §C).

use memchr::{memchr, memchr2};

/// Longest line the reference keeps: 2083 * 8 - 1 bytes. The rest is dropped.
pub const MAX_LINE_LEN: usize = 2083 * 8 - 1;

const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One physical line after comment removal and trimming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// Nothing left after trimming (blank line or comment only).
    Empty,
    /// Some text, but no key/value separator could be found.
    NoSeparator,
    /// A key and its value, both trimmed. `missing_colon` marks the
    /// Google-specific `disallow /x` form.
    KeyValue {
        /// The key text as written.
        key: &'a [u8],
        /// The value text, trimmed, comment removed.
        value: &'a [u8],
        /// The line used whitespace instead of a colon.
        missing_colon: bool,
    },
}

/// A line of the file with the facts the diagnostics need.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// 1-based line number, counted as the reference counts them.
    pub number: u32,
    /// The parsed content of the line.
    pub record: Record<'a>,
    /// Bytes dropped past [`MAX_LINE_LEN`] (0 when the line fit).
    pub truncated: usize,
    /// The line held a NUL byte, which ended its content.
    pub had_nul: bool,
}

/// Iterator over the lines of a robots.txt body.
pub struct Lines<'a> {
    rest: &'a [u8],
    number: u32,
    done: bool,
}

impl<'a> Lines<'a> {
    /// Starts scanning `body`, skipping a UTF-8 byte order mark or any
    /// leading part of one (the reference does the same).
    pub fn new(body: &'a [u8]) -> Self {
        let bom_len = body
            .iter()
            .zip(UTF8_BOM.iter())
            .take_while(|(a, b)| a == b)
            .count();
        Lines {
            rest: &body[bom_len..],
            number: 0,
            done: false,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        if self.done {
            return None;
        }
        let (raw, rest) = match memchr2(b'\n', b'\r', self.rest) {
            Some(end) => {
                let raw = &self.rest[..end];
                // CRLF is one line ending; a lone CR or LF is one too.
                let skip = if self.rest[end] == b'\r' && self.rest.get(end + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                (raw, &self.rest[end + skip..])
            }
            None => {
                // The last line is emitted even without a newline (and even
                // when empty), as the reference does.
                self.done = true;
                (self.rest, &self.rest[self.rest.len()..])
            }
        };
        self.rest = rest;
        self.number += 1;
        let (kept, truncated) = if raw.len() > MAX_LINE_LEN {
            (&raw[..MAX_LINE_LEN], raw.len() - MAX_LINE_LEN)
        } else {
            (raw, 0)
        };
        // The reference handles a line as a C string: a NUL ends it.
        let (content, had_nul) = match memchr(0, kept) {
            Some(nul) => (&kept[..nul], true),
            None => (kept, false),
        };
        Some(Line {
            number: self.number,
            record: split_record(content),
            truncated,
            had_nul,
        })
    }
}

/// `absl::ascii_isspace`: space, tab, LF, VT, FF, CR. Non-ASCII spaces are
/// not whitespace.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Trims ASCII whitespace at both ends.
#[inline]
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_space(*first) {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if is_space(*last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Splits a line into key and value the way `GetKeyAndValueFrom` does.
fn split_record(line: &[u8]) -> Record<'_> {
    let line = match memchr(b'#', line) {
        Some(hash) => &line[..hash],
        None => line,
    };
    let line = trim(line);
    if line.is_empty() {
        return Record::Empty;
    }
    let (sep, missing_colon) = match memchr(b':', line) {
        Some(colon) => (colon, false),
        None => {
            // Google-specific: whitespace may stand in for the colon, but only
            // when the line is exactly two space/tab-separated tokens.
            let Some(ws) = line.iter().position(|&b| b == b' ' || b == b'\t') else {
                return Record::NoSeparator;
            };
            let value_start = ws
                + line[ws..]
                    .iter()
                    .take_while(|&&b| b == b' ' || b == b'\t')
                    .count();
            if line[value_start..].iter().any(|&b| b == b' ' || b == b'\t') {
                return Record::NoSeparator;
            }
            (ws, true)
        }
    };
    let key = trim(&line[..sep]);
    if key.is_empty() {
        return Record::NoSeparator;
    }
    Record::KeyValue {
        key,
        value: trim(&line[sep + 1..]),
        missing_colon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(body: &[u8]) -> Vec<(u32, Record<'_>)> {
        Lines::new(body).map(|l| (l.number, l.record)).collect()
    }

    fn kv<'a>(key: &'a str, value: &'a str) -> Record<'a> {
        Record::KeyValue {
            key: key.as_bytes(),
            value: value.as_bytes(),
            missing_colon: false,
        }
    }

    #[test]
    fn rfc_line_endings_lf_cr_crlf_mixed() {
        let got = records(b"a: 1\nb: 2\rc: 3\r\nd: 4");
        assert_eq!(
            got,
            vec![
                (1, kv("a", "1")),
                (2, kv("b", "2")),
                (3, kv("c", "3")),
                (4, kv("d", "4"))
            ]
        );
        // "\r\r\n" is a CR line ending then a CRLF one: an empty line between.
        let got = records(b"a: 1\r\r\nb: 2");
        assert_eq!(
            got,
            vec![(1, kv("a", "1")), (2, Record::Empty), (3, kv("b", "2"))]
        );
        // A trailing newline still yields a final (empty) line.
        assert_eq!(records(b"a: 1\n").len(), 2);
    }

    #[test]
    fn google_bom_prefix_is_skipped() {
        for body in [&b"\xEF\xBB\xBFa: 1"[..], b"\xEF\xBBa: 1", b"\xEFa: 1"] {
            assert_eq!(records(body), vec![(1, kv("a", "1"))]);
        }
        // A broken BOM leaves garbage on the first line.
        let got = records(b"\xEF\x11\xBFa: 1");
        match got[0].1 {
            Record::KeyValue { key, .. } => assert_eq!(key, b"\x11\xBFa"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn rfc_comments_and_whitespace() {
        assert_eq!(
            records(b"  Disallow :\t/x # c"),
            vec![(1, kv("Disallow", "/x"))]
        );
        assert_eq!(records(b"# only a comment"), vec![(1, Record::Empty)]);
        assert_eq!(
            records(b"Disallow: /a b"),
            vec![(1, kv("Disallow", "/a b"))]
        );
        assert_eq!(records(b"a: b: c"), vec![(1, kv("a", "b: c"))]);
        assert_eq!(records(b": /x"), vec![(1, Record::NoSeparator)]);
    }

    #[test]
    fn google_missing_colon_two_tokens_only() {
        assert_eq!(
            records(b"disallow /x"),
            vec![(
                1,
                Record::KeyValue {
                    key: b"disallow",
                    value: b"/x",
                    missing_colon: true
                }
            )]
        );
        assert_eq!(records(b"disallow /x /y"), vec![(1, Record::NoSeparator)]);
        assert_eq!(records(b"disallow"), vec![(1, Record::NoSeparator)]);
        // Vertical tab is whitespace for trimming but not a separator.
        assert_eq!(records(b"disallow\x0B/x"), vec![(1, Record::NoSeparator)]);
    }

    #[test]
    fn google_line_cut_and_nul() {
        let mut long = b"Disallow: /".to_vec();
        long.extend(std::iter::repeat_n(b'a', 20_000));
        let line = Lines::new(&long).next().expect("one line");
        assert_eq!(line.truncated, long.len() - MAX_LINE_LEN);
        match line.record {
            Record::KeyValue { value, .. } => assert_eq!(value.len(), MAX_LINE_LEN - 10),
            other => panic!("unexpected {other:?}"),
        }
        let line = Lines::new(b"Disallow: /a\0/b").next().expect("one line");
        assert!(line.had_nul);
        assert_eq!(line.record, kv("Disallow", "/a"));
    }
}
