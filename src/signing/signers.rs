//! The signers in force: `[signing]`'s key, and each profile's own
//! (`[[profile]] signing_key`), so each team's robot signs as itself.
//!
//! Every key signs with the same `signature_agent` (one directory URL for the
//! company), so the one key directory lists them all, each with its own
//! possession proof.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderMap;

use super::signer::{directory_of, Signer, DIRECTORY_SIGNATURE_LIFETIME};

/// The top level's signer and the profiles' own.
#[derive(Debug, Default)]
pub struct Signers {
    default: Option<Arc<Signer>>,
    by_profile: Vec<(Arc<str>, Arc<Signer>)>,
}

impl Signers {
    /// No signing.
    pub fn none() -> Signers {
        Signers::default()
    }

    /// `default` (`[signing] key`) for every profile but those in
    /// `by_profile`, which sign with their own key.
    pub fn new(default: Option<Arc<Signer>>, by_profile: Vec<(Arc<str>, Arc<Signer>)>) -> Signers {
        Signers {
            default,
            by_profile,
        }
    }

    /// The signer of `profile`'s requests: its own key, else `[signing]`'s;
    /// none when signing is off.
    pub fn for_profile(&self, profile: &str) -> Option<&Arc<Signer>> {
        self.by_profile
            .iter()
            .find(|(name, _)| &**name == profile)
            .map(|(_, signer)| signer)
            .or(self.default.as_ref())
    }

    /// Is anything signed?
    pub fn is_empty(&self) -> bool {
        self.default.is_none() && self.by_profile.is_empty()
    }

    /// Every key, the top level's first, for listing.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Signer>> {
        self.default
            .iter()
            .chain(self.by_profile.iter().map(|(_, signer)| signer))
    }

    /// The key directory of every key in force, for a request to
    /// `authority` at `now`; `None` when signing is off.
    pub fn directory(&self, authority: &str, now: SystemTime) -> Option<(HeaderMap, Bytes)> {
        let keys: Vec<&Signer> = self.all().map(|s| &**s).collect();
        if keys.is_empty() {
            return None;
        }
        let created = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Some(directory_of(
            &keys,
            authority,
            created,
            created + DIRECTORY_SIGNATURE_LIFETIME,
        ))
    }
}
