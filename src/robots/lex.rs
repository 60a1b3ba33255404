//! Line scanner: turns robots.txt bytes into numbered `key: value` records.
//!
//! This reproduces the lexing of Google's reference parser (`robots.cc`,
//! `RobotsTxtParser::Parse` and `GetKeyAndValueFrom`) byte for byte, because
//! site owners test their files against that parser (RFC 9309 §2.2). The
//! conformance suite (`tests/robots_conformance.rs`) holds it to those verdicts.

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
    body: &'a [u8],
    /// Start of the next line.
    pos: usize,
    number: u32,
    done: bool,
    /// Where the next NUL and the next `#` are (at or after `pos`, or
    /// `body.len()`). Both are rare per line, so one search serves many
    /// lines instead of one search per line.
    nul: Cursor,
    hash: Cursor,
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
            body,
            pos: bom_len,
            number: 0,
            done: false,
            nul: Cursor::new(0, body, bom_len),
            hash: Cursor::new(b'#', body, bom_len),
        }
    }
}

/// The next occurrence of one byte, searched again only once passed.
struct Cursor {
    byte: u8,
    at: usize,
}

impl Cursor {
    fn new(byte: u8, body: &[u8], from: usize) -> Self {
        let mut cursor = Cursor { byte, at: 0 };
        cursor.search(body, from);
        cursor
    }

    fn search(&mut self, body: &[u8], from: usize) {
        self.at = memchr(self.byte, &body[from..]).map_or(body.len(), |i| from + i);
    }

    /// The first occurrence at or after `from`.
    #[inline]
    fn next_from(&mut self, body: &[u8], from: usize) -> usize {
        if self.at < from {
            self.search(body, from);
        }
        self.at
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        if self.done {
            return None;
        }
        let body = self.body;
        let start = self.pos;
        let end = match memchr2(b'\n', b'\r', &body[start..]) {
            Some(len) => {
                let end = start + len;
                // CRLF is one line ending; a lone CR or LF is one too.
                let crlf = body[end] == b'\r' && body.get(end + 1) == Some(&b'\n');
                self.pos = end + 1 + usize::from(crlf);
                end
            }
            None => {
                // The last line is emitted even without a newline (and even
                // when empty), as the reference does.
                self.done = true;
                self.pos = body.len();
                body.len()
            }
        };
        self.number += 1;
        let (kept_end, truncated) = if end - start > MAX_LINE_LEN {
            (start + MAX_LINE_LEN, end - start - MAX_LINE_LEN)
        } else {
            (end, 0)
        };
        // The reference handles a line as a C string: a NUL ends it.
        let nul = self.nul.next_from(body, start);
        let had_nul = nul < kept_end;
        let content_end = nul.min(kept_end);
        // A comment runs to the end of the line.
        let comment = self.hash.next_from(body, start);
        Some(Line {
            number: self.number,
            record: split_record(&body[start..comment.min(content_end)]),
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

/// Line `number` (1-based) of `body`, without its ending, as the lexer
/// numbers lines (LF, CR LF or a lone CR ends one): for quoting the statement
/// a verdict's line number points at.
pub fn nth_line(body: &[u8], number: u32) -> Option<&[u8]> {
    let mut start = 0;
    for _ in 1..number {
        let end = start + memchr2(b'\n', b'\r', body.get(start..)?)?;
        let crlf = body[end] == b'\r' && body.get(end + 1) == Some(&b'\n');
        start = end + 1 + usize::from(crlf);
    }
    if number == 0 || start > body.len() {
        return None;
    }
    let rest = &body[start..];
    Some(&rest[..memchr2(b'\n', b'\r', rest).unwrap_or(rest.len())])
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

/// Splits a line, its comment already removed, into key and value the way
/// `GetKeyAndValueFrom` does.
fn split_record(line: &[u8]) -> Record<'_> {
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
    fn comments_and_nuls_found_once_for_many_lines() {
        // The `#` and NUL searches are shared between lines: comments and
        // NULs on some lines only, a `#` after a NUL, a `#` past the cut.
        let mut body = b"a: 1 # c\nb: 2\nc: 3\0x # y\nd: #\n#\ne: 5\0\nf: 6".to_vec();
        body.extend_from_slice(b"\ng: ");
        body.extend(std::iter::repeat_n(b'x', MAX_LINE_LEN));
        body.extend_from_slice(b"#\0\nh: 8");
        let lines: Vec<Line<'_>> = Lines::new(&body).collect();
        let got: Vec<(Record<'_>, bool)> = lines.iter().map(|l| (l.record, l.had_nul)).collect();
        assert_eq!(
            got[..7].to_vec(),
            vec![
                (kv("a", "1"), false),
                (kv("b", "2"), false),
                (kv("c", "3"), true),
                (kv("d", ""), false),
                (Record::Empty, false),
                (kv("e", "5"), true),
                (kv("f", "6"), false),
            ]
        );
        assert!(!lines[7].had_nul);
        assert_eq!(lines[7].truncated, 5);
        assert_eq!(lines[8].record, kv("h", "8"));
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
