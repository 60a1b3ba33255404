//! Matching one rule pattern against a path (RFC 9309 §2.2.2, §2.2.3).
//!
//! `*` matches any run of bytes and `$` anchors the end, but only as the last
//! byte of the pattern; elsewhere `$` is literal (as in the reference). The
//! reference matcher keeps a set of candidate positions and costs
//! O(pattern × path) per rule. Here a pattern is compiled once, at parse
//! time, into its literal segments (the text between `*`s); a query finds
//! them leftmost-first. For a glob whose only wildcard is `*`, the leftmost
//! placement of each segment is always safe, so the worst case is linear in
//! the path per segment and hostile patterns (many `*` against a 16 KiB path)
//! stay cheap.
//!
//! Most rules of a file do not match a given path, so the compiled form is
//! built to say "no" fast: the first (up to) 8 literal bytes are kept as a
//! masked word compared against the path's first 8 bytes, loaded once per
//! query ([`Path`]), and a wildcard pattern knows the least path length it
//! can match.

use memchr::{memchr, memchr_iter, memmem};

use super::Span;

/// Segments up to this length are searched with `memchr` on their first
/// byte and a compare: no searcher set-up, which is what dominates for the
/// short segments of real files. Longer ones use `memmem`, so the worst case
/// stays linear in the path (at most this many compares per path byte).
const SHORT_SEGMENT: usize = 16;

/// A path to match, with its first bytes loaded once for [`Head`] checks.
#[derive(Debug, Clone, Copy)]
pub struct Path<'p> {
    bytes: &'p [u8],
    head: u64,
}

impl<'p> Path<'p> {
    /// Prepares `bytes` (path, params and query) for matching many rules.
    pub fn new(bytes: &'p [u8]) -> Self {
        Path {
            bytes,
            head: load_head(bytes),
        }
    }
}

/// The first 8 bytes of `bytes` as a little-endian word, zero-padded.
#[inline]
fn load_head(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(word)
}

/// The literal prefix every match starts with, as its first (up to) 8 bytes
/// and a mask over them: a necessary condition checked with one compare.
///
/// Sound whatever the path's length: if the pattern matches, the path holds
/// the whole literal prefix, so the masked bytes are real path bytes.
#[derive(Debug, Clone, Copy)]
struct Head {
    bytes: u64,
    mask: u64,
}

impl Head {
    fn of(literal: &[u8]) -> Head {
        let n = literal.len().min(8);
        let mask = if n == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * n)) - 1
        };
        Head {
            bytes: load_head(literal) & mask,
            mask,
        }
    }

    #[inline]
    fn admits(self, path: Path<'_>) -> bool {
        path.head & self.mask == self.bytes
    }
}

/// How a pattern must be compared, decided once at parse time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// No `*`, no final `$`: a plain prefix compare.
    Prefix,
    /// No `*`, final `$`: the path must equal the pattern minus the `$`.
    Exact,
    /// Contains `*`: segment search; the index of its [`Wildcard`].
    Wildcard(usize),
}

/// A normalised rule pattern, compiled for matching. Small (one rule fits
/// a cache line) because a query walks every rule of its groups.
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    /// The pattern text in [`super::RobotsTxt::text`].
    pub span: Span,
    head: Head,
    shape: Shape,
}

/// The literal segments of a pattern with `*`.
#[derive(Debug, Clone, Copy)]
struct Wildcard {
    /// Range of [`Wildcards::segments`]: the leading segment (maybe empty),
    /// the non-empty middle ones, and for an anchored pattern the final one
    /// (maybe empty).
    first: usize,
    end: usize,
    /// Sum of the segment lengths: no shorter path can match.
    min_len: usize,
    /// Ends with `$`.
    anchored: bool,
}

/// Side tables of the patterns with `*`, shared by all rules of a file.
#[derive(Debug, Clone, Default)]
pub struct Wildcards {
    patterns: Vec<Wildcard>,
    /// Spans of the pattern text.
    segments: Vec<Span>,
}

impl Wildcards {
    /// Room for `patterns` patterns of a few segments each.
    pub fn with_capacity(patterns: usize) -> Self {
        Wildcards {
            patterns: Vec::with_capacity(patterns),
            segments: Vec::with_capacity(3 * patterns),
        }
    }

    /// Splits `body` (a pattern stored at `at` of the text, without its
    /// final `$`) at its `*`s, the first of which is at `star`.
    fn add(&mut self, at: usize, body: &[u8], star: usize, anchored: bool) -> usize {
        let first = self.segments.len();
        let mut min_len = 0;
        let mut push = |start: usize, end: usize| {
            min_len += end - start;
            self.segments.push(Span {
                start: at + start,
                len: end - start,
            });
        };
        // The leading segment is kept even when empty: it is the anchor at
        // the path's start.
        push(0, star);
        let mut start = star + 1;
        let after_star = start;
        for next in memchr_iter(b'*', &body[after_star..]).map(|p| p + after_star) {
            if next > start {
                push(start, next);
            }
            start = next + 1;
        }
        // The final segment is kept even when empty if it must end the path.
        if anchored || body.len() > start {
            push(start, body.len());
        }
        self.patterns.push(Wildcard {
            first,
            end: self.segments.len(),
            min_len,
            anchored,
        });
        self.patterns.len() - 1
    }

    /// Frees unused capacity once parsing is done.
    pub fn shrink_to_fit(&mut self) {
        self.patterns.shrink_to_fit();
        self.segments.shrink_to_fit();
    }
}

impl Pattern {
    /// Compiles the pattern stored at `span` of `text`; a pattern with `*`
    /// gets an entry in `wildcards`.
    pub fn compile(text: &[u8], span: Span, wildcards: &mut Wildcards) -> Pattern {
        let pattern = &text[span.range()];
        let (body, anchored) = match pattern.split_last() {
            Some((b'$', body)) => (body, true),
            _ => (pattern, false),
        };
        let (literal, shape) = match memchr(b'*', body) {
            None if anchored => (body, Shape::Exact),
            None => (body, Shape::Prefix),
            Some(star) => (
                &body[..star],
                Shape::Wildcard(wildcards.add(span.start, body, star, anchored)),
            ),
        };
        Pattern {
            span,
            head: Head::of(literal),
            shape,
        }
    }

    /// The pattern's length, which is its priority (RFC 9309 §2.2.2).
    #[inline]
    pub fn len(&self) -> usize {
        self.span.len
    }

    /// A necessary condition for a match, one compare: most rules of a
    /// file fail it for a given path.
    #[inline]
    pub fn may_match(&self, path: Path<'_>) -> bool {
        self.head.admits(path)
    }

    /// Does the pattern match `path` from its start? `text` and `wildcards`
    /// are the tables the pattern was compiled into.
    #[inline]
    pub fn matches(&self, text: &[u8], wildcards: &Wildcards, path: Path<'_>) -> bool {
        self.may_match(path) && self.matches_admitted(text, wildcards, path.bytes)
    }

    #[inline(always)]
    fn matches_admitted(&self, text: &[u8], wildcards: &Wildcards, path: &[u8]) -> bool {
        match self.shape {
            // Up to 8 bytes, the head check already compared the whole
            // literal.
            Shape::Prefix => {
                let len = self.span.len;
                path.len() >= len && (len <= 8 || path.starts_with(&text[self.span.range()]))
            }
            Shape::Exact => {
                let len = self.span.len - 1;
                path.len() == len
                    && (len <= 8 || path == &text[self.span.start..self.span.start + len])
            }
            Shape::Wildcard(index) => {
                let wildcard = wildcards.patterns[index];
                path.len() >= wildcard.min_len
                    && matches_segments(
                        text,
                        &wildcards.segments[wildcard.first..wildcard.end],
                        wildcard.anchored,
                        path,
                    )
            }
        }
    }
}

/// Places each segment leftmost after the previous one. An anchored
/// pattern's final segment must end the path instead; it is checked first,
/// as it is the cheapest way to reject.
fn matches_segments(text: &[u8], segments: &[Span], anchored: bool, path: &[u8]) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return true;
    };
    if !path.starts_with(&text[first.range()]) {
        return false;
    }
    let (middle, last) = match rest.split_last() {
        Some((last, middle)) if anchored => (middle, Some(&text[last.range()])),
        _ => (rest, None),
    };
    if last.is_some_and(|last| !path.ends_with(last)) {
        return false;
    }
    let mut pos = first.len;
    for segment in middle {
        match find(&path[pos..], &text[segment.range()]) {
            Some(at) => pos += at + segment.len,
            None => return false,
        }
    }
    // After a `*`, the final segment only has to end the path and start at
    // or after where the earlier segments left off.
    last.is_none_or(|last| path.len() >= pos + last.len())
}

/// Leftmost occurrence of `needle` in `haystack` (see [`SHORT_SEGMENT`]).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, rest)) = needle.split_first() else {
        return Some(0);
    };
    if needle.len() > SHORT_SEGMENT {
        return memmem::find(haystack, needle);
    }
    let last_start = haystack.len().checked_sub(needle.len())?;
    let mut from = 0;
    while from <= last_start {
        let at = from + memchr(first, &haystack[from..=last_start])?;
        if haystack[at + 1..].starts_with(rest) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The reference algorithm, kept for differential tests and the fuzzer.
#[doc(hidden)]
pub fn matches_reference(path: &[u8], pattern: &[u8]) -> bool {
    let pathlen = path.len();
    let mut pos = vec![0usize; pathlen + 1];
    let mut numpos = 1;
    for (i, &pat) in pattern.iter().enumerate() {
        if pat == b'$' && i + 1 == pattern.len() {
            return pos[numpos - 1] == pathlen;
        }
        if pat == b'*' {
            numpos = pathlen - pos[0] + 1;
            for j in 1..numpos {
                pos[j] = pos[j - 1] + 1;
            }
        } else {
            let mut newnumpos = 0;
            for j in 0..numpos {
                if pos[j] < pathlen && path[pos[j]] == pat {
                    pos[newnumpos] = pos[j] + 1;
                    newnumpos += 1;
                }
            }
            numpos = newnumpos;
            if numpos == 0 {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles `pattern` into fresh tables and matches it against `path`.
    fn matches(pattern: &[u8], path: &[u8]) -> bool {
        let mut wildcards = Wildcards::default();
        let span = Span {
            start: 0,
            len: pattern.len(),
        };
        let compiled = Pattern::compile(pattern, span, &mut wildcards);
        compiled.matches(pattern, &wildcards, Path::new(path))
    }

    fn m(pattern: &str, path: &str) -> bool {
        let got = matches(pattern.as_bytes(), path.as_bytes());
        let want = matches_reference(path.as_bytes(), pattern.as_bytes());
        assert_eq!(
            got, want,
            "pattern {pattern:?} path {path:?} disagrees with the reference"
        );
        got
    }

    #[test]
    fn rfc_prefix_match_and_case_sensitivity() {
        assert!(m("/fish", "/fish"));
        assert!(m("/fish", "/fish.html"));
        assert!(m("/fish", "/fishheads/yummy.html"));
        assert!(!m("/fish", "/Fish.asp"));
        assert!(!m("/fish", "/catfish"));
        assert!(!m("fish", "/fish"));
        assert!(m("", "/anything"));
    }

    #[test]
    fn rfc_wildcard_star() {
        assert!(m("/fish*", "/fish"));
        assert!(m("/*.php", "/index.php"));
        assert!(m("/*.php", "/folder/filename.php?parameters"));
        assert!(m("/*.php", "/filename.php/"));
        assert!(!m("/*.php", "/windows.PHP"));
        assert!(m("/fish*.php", "/fishheads/catfish.php?parameters"));
        assert!(!m("/fish*.php", "/Fish.PHP"));
        assert!(m("*", "/"));
        assert!(m("/a*b*c", "/aXbYc"));
        assert!(!m("/a*b*c", "/aXcYb"));
        assert!(m("/a**b", "/ab"));
    }

    #[test]
    fn rfc_dollar_anchor_only_at_end() {
        assert!(m("/*.php$", "/filename.php"));
        assert!(m("/*.php$", "/folder/filename.php"));
        assert!(!m("/*.php$", "/filename.php?parameters"));
        assert!(!m("/*.php$", "/filename.php/"));
        assert!(!m("/*.php$", "/filename.php5"));
        assert!(m("/fish$", "/fish"));
        assert!(!m("/fish$", "/fish/"));
        assert!(m("/a$b", "/a$b"));
        assert!(!m("$", "/"));
        assert!(m("/*$", "/x"));
        assert!(m("/ab*b$", "/abb"));
        assert!(!m("/ab*b$", "/ab"));
        assert!(m("/x*$", "/x"));
        assert!(m("*$", "/"));
    }

    #[test]
    fn ext_hostile_pattern_is_bounded() {
        let pattern = format!("/{}x", "a*".repeat(50));
        let path = format!("/{}", "a".repeat(16 * 1024));
        let start = std::time::Instant::now();
        assert!(!matches(pattern.as_bytes(), path.as_bytes()));
        let anchored = format!("/{}b$", "*a".repeat(50));
        assert!(!matches(anchored.as_bytes(), path.as_bytes()));
        // Generous bound: the point is "not exponential", not a timing claim.
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn wildcard_agrees_with_reference_exhaustively_on_small_alphabet() {
        // Every pattern over {a, b, *, $} up to 5 bytes against every path over
        // {a, b, $} up to 5 bytes, all prefixed with "/".
        fn words(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
            let mut all = vec![Vec::new()];
            let mut frontier = vec![Vec::new()];
            for _ in 0..max {
                let mut next = Vec::new();
                for w in &frontier {
                    for &c in alphabet {
                        let mut n: Vec<u8> = w.clone();
                        n.push(c);
                        next.push(n);
                    }
                }
                all.extend(next.iter().cloned());
                frontier = next;
            }
            all
        }
        let patterns = words(b"ab*$", 5);
        let paths = words(b"ab$", 5);
        for p in &patterns {
            let mut pattern = b"/".to_vec();
            pattern.extend_from_slice(p);
            for q in &paths {
                let mut path = b"/".to_vec();
                path.extend_from_slice(q);
                assert_eq!(
                    matches(&pattern, &path),
                    matches_reference(&path, &pattern),
                    "pattern {:?} path {:?}",
                    String::from_utf8_lossy(&pattern),
                    String::from_utf8_lossy(&path)
                );
            }
        }
    }

    /// xorshift64*: a small deterministic generator, so failures replay.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
        }

        fn word(&mut self, alphabet: &[u8], max: usize) -> Vec<u8> {
            let len = self.below(max + 1);
            let mut word = b"/".to_vec();
            word.extend((0..len).map(|_| alphabet[self.below(alphabet.len())]));
            word
        }
    }

    #[test]
    fn compiled_matcher_agrees_with_reference_on_random_patterns() {
        // Longer words than the exhaustive test: segments past SHORT_SEGMENT
        // (memmem), many segments, and patterns stored at varying offsets of
        // one shared text, as the parser stores them.
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut text = Vec::new();
        let mut wildcards = Wildcards::default();
        let mut compiled = Vec::new();
        for _ in 0..400 {
            let max = [6, 12, 40][rng.below(3)];
            let mut pattern = rng.word(b"aab*$", max);
            if rng.below(3) == 0 {
                pattern.push(b'$');
            }
            let span = Span {
                start: text.len(),
                len: pattern.len(),
            };
            text.extend_from_slice(&pattern);
            compiled.push((Pattern::compile(&text, span, &mut wildcards), pattern));
        }
        for _ in 0..400 {
            let max = [4, 16, 64][rng.below(3)];
            let path = rng.word(b"aab$", max);
            for (pattern, source) in &compiled {
                assert_eq!(
                    pattern.matches(&text, &wildcards, Path::new(&path)),
                    matches_reference(&path, source),
                    "pattern {:?} path {:?}",
                    String::from_utf8_lossy(source),
                    String::from_utf8_lossy(&path)
                );
            }
        }
    }

    #[test]
    fn short_and_long_segments_are_found_leftmost() {
        let long = "x".repeat(SHORT_SEGMENT + 3);
        assert_eq!(find(b"abcabc", b"ca"), Some(2));
        assert_eq!(find(b"abc", b"abcd"), None);
        assert_eq!(find(b"abc", b""), Some(0));
        let hay = format!("ab{long}y{long}");
        assert_eq!(find(hay.as_bytes(), long.as_bytes()), Some(2));
        assert!(m(&format!("/*{long}$"), &format!("/q{long}")));
        assert!(!m(&format!("/*{long}*{long}"), &format!("/{long}")));
    }
}
