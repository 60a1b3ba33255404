//! Web Bot Auth: the robot signs every forwarded request with HTTP Message
//! Signatures (RFC 9421), so a site can verify that a request naming the
//! robot really comes from it, and publishes the public key where sites look
//! for it.
//!
//! Followed: draft-ietf-webbotauth-httpsig-protocol-01 (Web Bot Auth WG,
//! October 2026), which folded the key directory draft
//! (draft-meunier-http-message-signatures-directory, later
//! draft-meunier-webbotauth-httpsig-directory) into itself. In short:
//!
//! - a request carries `Signature-Agent`, a Dictionary whose member (keyed
//!   by the signature's label) is the URL of the robot's JWK Set, and a
//!   signature covering at least `@authority` and that member, with
//!   `created`, `expires`, `keyid` (the key's RFC 7638 thumbprint) and
//!   `tag="web-bot-auth"` (§5.2);
//! - the JWK Set is served at `/.well-known/http-message-signatures-directory`
//!   as `application/http-message-signatures-directory+json`, each key
//!   optionally proving possession by signing the response over
//!   `@authority;req` and its `Content-Digest` with
//!   `tag="http-message-signatures-directory"` (§5.5.1, Appendix B.1).
//!
//! The module: [`Signer`] (`signer.rs`) loads the key (`key.rs`), knows its
//! JWK and thumbprint (`jwk.rs`), builds RFC 9421 signature bases
//! (`base.rs`) over the normalised `@authority` (`authority.rs`), and reads
//! what a client already sent (`fields.rs`); `key_file.rs` makes new keys
//! for `robots-guard keys init`; [`Signers`] (`signers.rs`) holds the
//! signers in force, the top level's and each profile's.

mod authority;
mod base;
mod error;
mod fields;
mod jwk;
mod key;
mod key_file;
mod signer;
mod signers;

pub use error::SigningError;
pub use key_file::{init_key, NewKey, KEY_FILE};
pub use signer::{Signer, DIRECTORY_TAG, REQUEST_TAG};
pub use signers::Signers;

/// The well-known path of the key directory
/// (draft-ietf-webbotauth-httpsig-protocol-01 §8.1, RFC 8615).
pub const DIRECTORY_PATH: &str = "/.well-known/http-message-signatures-directory";

/// The directory's media type (draft-ietf-webbotauth-httpsig-protocol-01
/// §8.2).
pub const DIRECTORY_MEDIA_TYPE: &str = "application/http-message-signatures-directory+json";
