//! What the proxy must know of a request head before hyper hides it: whether
//! it carries both `Content-Length` and `Transfer-Encoding`.
//!
//! hyper reads such a request by `Transfer-Encoding` and drops the
//! `Content-Length` before the service sees the head (RFC 9112 §6.1 allows
//! that). A hardened proxy refuses it instead: an origin that read the length
//! the other way would see a second, smuggled request. So the connection's IO
//! ([`super::idle::IdleIo`]) feeds the bytes of each head it reads through
//! [`LengthFields`], and the target phase refuses the request when both were
//! there.
//!
//! Only heads read while no request is in the service are scanned: bytes that
//! arrive during a request may be its body, which is no head. A pipelined
//! head that arrived during the previous request is not scanned; hyper's own
//! reading (by `Transfer-Encoding`, then closing) still applies to it.

/// Scans a request head, as it arrives, for the two length fields.
#[derive(Debug, Clone)]
pub(crate) struct LengthFields {
    /// The first bytes of the current line (enough to recognise a field
    /// name), and how many there are.
    line: [u8; NAME_PREFIX],
    len: usize,
    /// A line with content was seen (the request line): an empty line after
    /// it ends the head, empty lines before it are ignored (RFC 9112 §2.2).
    started: bool,
    /// The head's end (an empty line) was seen: nothing more to scan.
    done: bool,
    content_length: bool,
    transfer_encoding: bool,
}

/// Longest prefix looked at: `transfer-encoding:` is 18 bytes.
const NAME_PREFIX: usize = 18;

/// Does `line` start with `name` (lower-case), in any letter case?
fn starts_with_name(line: &[u8], name: &[u8]) -> bool {
    line.len() >= name.len() && line[..name.len()].eq_ignore_ascii_case(name)
}

impl LengthFields {
    /// A scanner at the start of a head.
    pub(crate) fn new() -> LengthFields {
        LengthFields {
            line: [0; NAME_PREFIX],
            len: 0,
            started: false,
            done: false,
            content_length: false,
            transfer_encoding: false,
        }
    }

    /// Feeds the next bytes of the head. Only each line's first bytes are
    /// copied; the rest of a line is skipped in one search for its end.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !self.done && !bytes.is_empty() {
            let end = memchr::memchr(b'\n', bytes);
            let content = &bytes[..end.unwrap_or(bytes.len())];
            let take = content.len().min(NAME_PREFIX - self.len);
            self.line[self.len..self.len + take].copy_from_slice(&content[..take]);
            self.len += take;
            let Some(end) = end else {
                return;
            };
            self.end_line();
            bytes = &bytes[end + 1..];
        }
    }

    /// A line ended: note its field, or the head's end.
    fn end_line(&mut self) {
        let line = &self.line[..self.len];
        if line.is_empty() || line == b"\r" {
            self.done = self.started;
        } else {
            self.started = true;
            self.content_length |= starts_with_name(line, b"content-length:");
            self.transfer_encoding |= starts_with_name(line, b"transfer-encoding:");
        }
        self.len = 0;
    }

    /// Did the head carry both fields?
    pub(crate) fn ambiguous(&self) -> bool {
        self.content_length && self.transfer_encoding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(parts: &[&[u8]]) -> bool {
        let mut scan = LengthFields::new();
        for part in parts {
            scan.feed(part);
        }
        scan.ambiguous()
    }

    #[test]
    fn both_length_fields_are_found_in_any_order_case_and_split() {
        assert!(scanned(&[
            b"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        ]));
        assert!(scanned(&[
            b"POST / HTTP/1.1\r\ntransfer-ENCODING: chunked\r\nCONTENT-length: 4\r\n\r\n"
        ]));
        assert!(scanned(&[
            b"POST / HTTP/1.1\r\nContent-Len",
            b"gth: 4\r\nTransfer-Enc",
            b"oding: chunked\r\n\r\n"
        ]));
        assert!(scanned(&[
            b"POST / HTTP/1.1\nContent-Length: 4\nTransfer-Encoding: chunked\n\n"
        ]));
    }

    #[test]
    fn one_field_or_fields_after_the_head_are_not_ambiguous() {
        assert!(!scanned(&[b"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n"]));
        assert!(!scanned(&[
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        ]));
        // The body is no head.
        assert!(!scanned(&[
            b"POST / HTTP/1.1\r\nContent-Length: 40\r\n\r\nTransfer-Encoding: chunked\r\n"
        ]));
        // A value mentioning the other field is not the field.
        assert!(!scanned(&[
            b"GET / HTTP/1.1\r\nX-Note: Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        ]));
    }
}
