//! The signature base of RFC 9421 §2.5, and the `@signature-params` value
//! (§2.3) that both ends it and is sent as the `Signature-Input` member.
//!
//! Built by hand rather than through an RFC 9421 crate: the proxy covers a
//! handful of components whose values it computes itself, and the crates
//! available bring their own copies of the cryptography *ring* already
//! provides. The identifiers and parameters are serialised with `sfv`, so
//! the `@signature-params` line and the `Signature-Input` member are the same
//! bytes by construction (§2.3: "the signature parameters component value is
//! the serialization of the signature parameters for this signature").

use sfv::{KeyRef, ListSerializer, StringRef};

/// A covered component: its identifier (RFC 9421 §2: a String, here with
/// the `key` and `req` parameters this module needs) and its value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Component<'a> {
    /// A lowercase field name or a derived component name (`@authority`).
    pub name: &'a str,
    /// §2.1.2: the member of a Dictionary field this component is.
    pub key: Option<&'a str>,
    /// §2.4: the component is taken from the request a response answers.
    pub req: bool,
    /// The component value (§2.1 for fields, §2.2 for derived components).
    pub value: &'a str,
}

impl<'a> Component<'a> {
    /// A component with neither `key` nor `req`.
    pub(crate) fn plain(name: &'a str, value: &'a str) -> Component<'a> {
        Component {
            name,
            key: None,
            req: false,
            value,
        }
    }
}

/// A signature parameter (RFC 9421 §2.3), serialised in the order given.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    /// `created`: seconds since the epoch.
    Created(u64),
    /// `expires`: seconds since the epoch.
    Expires(u64),
    /// `nonce`. The proxy sends none (the drafts leave replay protection to
    /// RFC 9421 §7.2.2 and the verifier); the drafts' test vectors do.
    #[cfg_attr(not(test), allow(dead_code))]
    Nonce(&'a str),
    /// `alg`, from the HTTP Signature Algorithms registry.
    Alg(&'a str),
    /// `keyid`.
    KeyId(&'a str),
    /// `tag`: the application the signature is for.
    Tag(&'a str),
}

/// What a signer needs: the `@signature-params` value (the inner list sent
/// as the `Signature-Input` member) and the signature base to sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prepared {
    /// The inner list with its parameters, e.g.
    /// `("@authority");created=1;keyid="k"`.
    pub signature_params: String,
    /// The bytes the signature is computed over (§2.5).
    pub base: String,
}

/// Why a base cannot be built: a name, key or value that an identifier,
/// parameter or base line cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BaseError {
    /// Structured Field serialisation refused a string or timestamp.
    #[error("{0}")]
    Serialize(String),
    /// A component value holds a line break, which would forge a base line
    /// (§2.5 fails the base for such a value).
    #[error("the value of {0} holds a line break")]
    LineBreak(String),
}

impl From<sfv::Error> for BaseError {
    fn from(error: sfv::Error) -> BaseError {
        BaseError::Serialize(error.to_string())
    }
}

/// Builds the signature base for `components`, in order, and `params`
/// (RFC 9421 §2.5): one line `identifier: value` per component, then the
/// `"@signature-params"` line, the lines joined by a single LF with none
/// after the last.
pub(crate) fn prepare(
    components: &[Component<'_>],
    params: &[Param<'_>],
) -> Result<Prepared, BaseError> {
    let signature_params = signature_params(components, params)?;
    let mut base = String::new();
    for component in components {
        let identifier = identifier(component)?;
        if component.value.contains(['\n', '\r']) {
            return Err(BaseError::LineBreak(identifier));
        }
        base.push_str(&identifier);
        base.push_str(": ");
        base.push_str(component.value);
        base.push('\n');
    }
    base.push_str("\"@signature-params\": ");
    base.push_str(&signature_params);
    Ok(Prepared {
        signature_params,
        base,
    })
}

/// The component identifier, serialised as a Structured Field Item (§2).
fn identifier(component: &Component<'_>) -> Result<String, BaseError> {
    let mut list = ListSerializer::new();
    with_parameters(
        component,
        list.bare_item(StringRef::from_str(component.name)?),
    )?;
    Ok(list.finish().unwrap_or_default())
}

/// §2.3: the inner list of the component identifiers with the signature
/// parameters as its parameters.
fn signature_params(
    components: &[Component<'_>],
    params: &[Param<'_>],
) -> Result<String, BaseError> {
    let mut list = ListSerializer::new();
    {
        let mut inner = list.inner_list();
        for component in components {
            with_parameters(
                component,
                inner.bare_item(StringRef::from_str(component.name)?),
            )?;
        }
        let mut out = inner.finish();
        for param in params {
            out = match *param {
                Param::Created(at) => out.parameter(KeyRef::constant("created"), integer(at)?),
                Param::Expires(at) => out.parameter(KeyRef::constant("expires"), integer(at)?),
                Param::Nonce(v) => {
                    out.parameter(KeyRef::constant("nonce"), StringRef::from_str(v)?)
                }
                Param::Alg(v) => out.parameter(KeyRef::constant("alg"), StringRef::from_str(v)?),
                Param::KeyId(v) => {
                    out.parameter(KeyRef::constant("keyid"), StringRef::from_str(v)?)
                }
                Param::Tag(v) => out.parameter(KeyRef::constant("tag"), StringRef::from_str(v)?),
            };
        }
    }
    // An inner list always serialises, even an empty one: `()`.
    Ok(list.finish().unwrap_or_default())
}

/// Adds the identifier's `key` and `req` parameters.
fn with_parameters<W: std::borrow::BorrowMut<String>>(
    component: &Component<'_>,
    mut out: sfv::ParameterSerializer<W>,
) -> Result<(), BaseError> {
    if let Some(key) = component.key {
        out = out.parameter(KeyRef::constant("key"), StringRef::from_str(key)?);
    }
    if component.req {
        out = out.parameter(KeyRef::constant("req"), true);
    }
    let _ = out.finish();
    Ok(())
}

/// A timestamp as a Structured Field Integer (at most 15 digits).
fn integer(at: u64) -> Result<sfv::Integer, BaseError> {
    i64::try_from(at)
        .ok()
        .and_then(|at| sfv::Integer::try_from(at).ok())
        .ok_or_else(|| BaseError::Serialize(format!("timestamp {at} is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9421 B.2.6, "Signing a Request Using ed25519": the base of the
    /// test request, byte for byte.
    #[test]
    fn rfc9421_b26_signature_base() {
        let components = [
            Component::plain("date", "Tue, 20 Apr 2021 02:07:55 GMT"),
            Component::plain("@method", "POST"),
            Component::plain("@path", "/foo"),
            Component::plain("@authority", "example.com"),
            Component::plain("content-type", "application/json"),
            Component::plain("content-length", "18"),
        ];
        let params = [Param::Created(1618884473), Param::KeyId("test-key-ed25519")];
        let prepared = prepare(&components, &params).unwrap();
        assert_eq!(
            prepared.signature_params,
            r#"("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519""#
        );
        assert_eq!(
            prepared.base,
            concat!(
                "\"date\": Tue, 20 Apr 2021 02:07:55 GMT\n",
                "\"@method\": POST\n",
                "\"@path\": /foo\n",
                "\"@authority\": example.com\n",
                "\"content-type\": application/json\n",
                "\"content-length\": 18\n",
                "\"@signature-params\": (\"date\" \"@method\" \"@path\" \"@authority\" ",
                "\"content-type\" \"content-length\");created=1618884473",
                ";keyid=\"test-key-ed25519\"",
            )
        );
    }

    #[test]
    fn key_and_req_parameters_are_part_of_the_identifier() {
        let components = [
            Component {
                name: "@authority",
                key: None,
                req: true,
                value: "example.com",
            },
            Component {
                name: "signature-agent",
                key: Some("sig1"),
                req: false,
                value: "\"https://a.example\"",
            },
        ];
        let prepared = prepare(&components, &[Param::Tag("t")]).unwrap();
        assert_eq!(
            prepared.base,
            "\"@authority\";req: example.com\n\
             \"signature-agent\";key=\"sig1\": \"https://a.example\"\n\
             \"@signature-params\": (\"@authority\";req \"signature-agent\";key=\"sig1\");tag=\"t\""
        );
    }

    #[test]
    fn values_that_would_forge_lines_are_refused() {
        let forged = [Component::plain(
            "@authority",
            "a.example\n\"@method\": GET",
        )];
        assert!(matches!(
            prepare(&forged, &[]),
            Err(BaseError::LineBreak(_))
        ));
        let bad_keyid = [Param::KeyId("caf\u{e9}")];
        assert!(matches!(
            prepare(&[], &bad_keyid),
            Err(BaseError::Serialize(_))
        ));
        assert_eq!(prepare(&[], &[]).unwrap().signature_params, "()");
    }
}
