//! Matching one rule pattern against a path (RFC 9309 §2.2.2, §2.2.3).
//!
//! `*` matches any run of bytes and `$` anchors the end, but only as the last
//! byte of the pattern; elsewhere `$` is literal (as in the reference). The
//! reference matcher keeps a set of candidate positions and costs
//! O(pattern × path) per rule. Here a pattern is split at `*` into literal
//! segments that are found leftmost-first with `memmem`: for a glob whose only
//! wildcard is `*`, the leftmost placement of each segment is always safe, so
//! the worst case is linear in the path per segment and hostile patterns
//! (many `*` against a 16 KiB path) stay cheap.

use memchr::memmem;

/// How a pattern must be compared, decided once at parse time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// No `*`, no final `$`: a plain prefix compare.
    Prefix,
    /// No `*`, final `$`: the path must equal the pattern minus the `$`.
    Exact,
    /// Contains `*`: segment search.
    Wildcard,
}

impl Shape {
    /// Classifies a (normalised) pattern.
    pub fn of(pattern: &[u8]) -> Shape {
        if memchr::memchr(b'*', pattern).is_some() {
            Shape::Wildcard
        } else if pattern.last() == Some(&b'$') {
            Shape::Exact
        } else {
            Shape::Prefix
        }
    }
}

/// Does `pattern` (of the given shape) match `path` from its start?
#[inline]
pub fn matches(shape: Shape, pattern: &[u8], path: &[u8]) -> bool {
    match shape {
        Shape::Prefix => path.starts_with(pattern),
        Shape::Exact => path == &pattern[..pattern.len() - 1],
        Shape::Wildcard => matches_wildcard(pattern, path),
    }
}

fn matches_wildcard(pattern: &[u8], path: &[u8]) -> bool {
    let (body, anchored) = match pattern.split_last() {
        Some((b'$', body)) => (body, true),
        _ => (pattern, false),
    };
    let mut segments = body.split(|&b| b == b'*');
    // `split` always yields at least one (possibly empty) segment.
    let first = segments.next().unwrap_or_default();
    if !path.starts_with(first) {
        return false;
    }
    let mut pos = first.len();
    let mut last_segment_start = None;
    let mut segments = segments.peekable();
    while let Some(segment) = segments.next() {
        if anchored && segments.peek().is_none() {
            last_segment_start = Some(segment);
            break;
        }
        if segment.is_empty() {
            continue;
        }
        match memmem::find(&path[pos..], segment) {
            Some(found) => pos += found + segment.len(),
            None => return false,
        }
    }
    match last_segment_start {
        // After a `*`, the final segment only has to end the path and start
        // at or after where the earlier segments left off.
        Some(last) => path.len() >= pos + last.len() && path.ends_with(last),
        // Anchored with no `*` after the first segment cannot happen here
        // (that shape is `Exact`), but keep the rule total anyway.
        None if anchored => pos == path.len(),
        None => true,
    }
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

    fn m(pattern: &str, path: &str) -> bool {
        let got = matches(
            Shape::of(pattern.as_bytes()),
            pattern.as_bytes(),
            path.as_bytes(),
        );
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
        assert!(!matches(
            Shape::of(pattern.as_bytes()),
            pattern.as_bytes(),
            path.as_bytes()
        ));
        let anchored = format!("/{}b$", "*a".repeat(50));
        assert!(!matches(
            Shape::of(anchored.as_bytes()),
            anchored.as_bytes(),
            path.as_bytes()
        ));
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
                    matches(Shape::of(&pattern), &pattern, &path),
                    matches_reference(&path, &pattern),
                    "pattern {:?} path {:?}",
                    String::from_utf8_lossy(&pattern),
                    String::from_utf8_lossy(&path)
                );
            }
        }
    }
}
