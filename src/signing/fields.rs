//! The three fields of a Web Bot Auth signature as a client may already have
//! sent them: `Signature` and `Signature-Input` (RFC 9421 §4) and
//! `Signature-Agent` (draft-ietf-webbotauth-httpsig-protocol-01 §5.2.1), all
//! Structured Field Dictionaries keyed by signature label.

use std::collections::HashSet;

use http::header::{HeaderMap, HeaderName};

/// `Signature` (RFC 9421 §4.2).
pub(crate) const SIGNATURE: HeaderName = HeaderName::from_static("signature");
/// `Signature-Input` (RFC 9421 §4.1).
pub(crate) const SIGNATURE_INPUT: HeaderName = HeaderName::from_static("signature-input");
/// `Signature-Agent` (draft-ietf-webbotauth-httpsig-protocol-01 §5.2.1).
pub(crate) const SIGNATURE_AGENT: HeaderName = HeaderName::from_static("signature-agent");

/// The label the proxy signs under when it is free.
pub(crate) const LABEL: &str = "robots-guard";

/// Removes every `Signature`, `Signature-Input` and `Signature-Agent` field.
pub(crate) fn strip(headers: &mut HeaderMap) {
    for name in [SIGNATURE, SIGNATURE_INPUT, SIGNATURE_AGENT] {
        headers.remove(name);
    }
}

/// The labels the client's signature fields use, when the proxy can add its
/// own members beside them without changing a byte of theirs: each field
/// present parses as a Dictionary (RFC 9651 §3.2). `None` when one does not:
/// a `Signature-Agent` in the draft's older bare-String form, or a malformed
/// field, cannot take another member, and a signature over it could not be
/// kept verifiable next to the proxy's.
pub(crate) fn labels_in_use(headers: &HeaderMap) -> Option<HashSet<String>> {
    let mut labels = HashSet::new();
    for name in [SIGNATURE, SIGNATURE_INPUT, SIGNATURE_AGENT] {
        let mut lines = headers.get_all(&name).iter().peekable();
        if lines.peek().is_none() {
            continue;
        }
        // RFC 9651 §4.2: a field's lines are one value, joined by commas.
        let mut combined = Vec::new();
        for (i, line) in lines.enumerate() {
            if i > 0 {
                combined.extend_from_slice(b", ");
            }
            combined.extend_from_slice(line.as_bytes());
        }
        let dictionary: sfv::Dictionary = sfv::Parser::new(&combined).parse().ok()?;
        labels.extend(dictionary.keys().map(|key| key.as_str().to_owned()));
    }
    Some(labels)
}

/// [`LABEL`], or `robots-guard-2`, `-3`, ... when the client uses it.
pub(crate) fn free_label(in_use: &HashSet<String>) -> String {
    if !in_use.contains(LABEL) {
        return LABEL.to_owned();
    }
    (2..)
        .map(|n| format!("{LABEL}-{n}"))
        .find(|label| !in_use.contains(label))
        .unwrap_or_else(|| LABEL.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(fields: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in fields {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn labels_of_every_field_line_are_collected() {
        let map = headers(&[
            ("signature-input", r#"sig1=("@authority");created=1"#),
            ("signature-input", r#"robots-guard=("@method")"#),
            ("signature", "sig1=:AAAA:, other=:AAAA:"),
            ("signature-agent", r#"agent="https://a.example/jwks""#),
        ]);
        let labels = labels_in_use(&map).unwrap();
        let mut sorted: Vec<_> = labels.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        assert_eq!(sorted, ["agent", "other", "robots-guard", "sig1"]);
        assert_eq!(free_label(&labels), "robots-guard-2");
        assert_eq!(free_label(&HashSet::new()), "robots-guard");
    }

    #[test]
    fn fields_that_cannot_take_another_member_are_not_kept() {
        // The draft's legacy bare-String Signature-Agent.
        let legacy = headers(&[("signature-agent", r#""https://a.example""#)]);
        assert_eq!(labels_in_use(&legacy), None);
        let garbage = headers(&[("signature", "not a dictionary!")]);
        assert_eq!(labels_in_use(&garbage), None);
        assert_eq!(labels_in_use(&HeaderMap::new()), Some(HashSet::new()));
    }

    #[test]
    fn strip_removes_all_three_and_nothing_else() {
        let mut map = headers(&[
            ("signature", "a=:AAAA:"),
            ("signature-input", "a=()"),
            ("signature-agent", r#"a="https://a.example""#),
            ("user-agent", "bot/1"),
        ]);
        strip(&mut map);
        assert_eq!(map.len(), 1);
        assert!(map.contains_key("user-agent"));
    }
}
