//! The robots.txt cache shared by the fleet: one fetch per origin for all processes.
//!
//! Each process keeps its bounded LRU ([`crate::fetch::RobotsCache`]) as a near cache:
//! a fresh local entry never asks the store. On a miss, the process's one fetch task
//! runs [`scripts::ROBOTS_GET`]: a fresh stored entry is read (its expiry turned into
//! "this long from now" by the store's clock, so clocks need not agree); else the
//! caller takes the fetch lock (`SET NX PX`, a TTL so a dead fetcher frees it), or
//! learns that another process is fetching and asks again shortly. The fetcher stores
//! the entry with [`scripts::ROBOTS_PUT`], which frees the lock.
//!
//! An entry carries what a process needs to judge by it and to revalidate it: the bytes
//! (parsed again by each process), the kind and status, the validators, when it was
//! fetched, the failure count and its lifetime.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderValue, StatusCode};
use tokio::time::Instant;

use super::scripts::{self, ms};
use super::store::{Store, StoreError};
use crate::fetch::{
    RobotsEntry, RobotsFile, RobotsRules, SharedFuture, SharedLookup, SharedRobots, Validators,
};
use crate::origin::Origin;

/// How long a stored entry stays in the store after it stops being fresh.
const KEEP_AFTER_EXPIRY: Duration = Duration::from_secs(60);

/// The fleet's robots.txt store.
pub struct FleetRobots {
    store: Arc<Store>,
    /// How long a fetch lock lasts: the fetch's own timeout and a margin.
    lock_ttl: Duration,
    next_token: AtomicU64,
}

impl FleetRobots {
    /// Over `store`; a fetch lock lasts `lock_ttl`.
    pub fn new(store: Arc<Store>, lock_ttl: Duration) -> FleetRobots {
        FleetRobots {
            store,
            lock_ttl,
            next_token: AtomicU64::new(0),
        }
    }

    async fn lookup(&self, origin: &Origin) -> Result<SharedLookup, StoreError> {
        let key = origin.to_string();
        let token = format!(
            "{}-{}",
            std::process::id(),
            self.next_token.fetch_add(1, Ordering::Relaxed)
        );
        let lock_ttl = ms(self.lock_ttl);
        let (verdict, left, fields): (String, u64, HashMap<String, Vec<u8>>) = self
            .store
            .call(|mut conn| {
                let (key, token) = (key.clone(), token.clone());
                async move {
                    Ok(scripts::ROBOTS_GET
                        .key(scripts::robots_key(&key))
                        .key(scripts::robots_lock_key(&key))
                        .arg(token)
                        .arg(lock_ttl)
                        .invoke_async(&mut conn)
                        .await?)
                }
            })
            .await?;
        let left = Duration::from_millis(left);
        match verdict.as_str() {
            "entry" => decode(origin, &fields, left)
                .map(|entry| SharedLookup::Found(Box::new(entry)))
                .ok_or_else(|| StoreError::Reply("a robots.txt entry it cannot read".into())),
            "fetch" => Ok(SharedLookup::Fetch(token)),
            "wait" => Ok(SharedLookup::Wait(left)),
            other => Err(StoreError::Reply(other.to_owned())),
        }
    }

    async fn store_entry(
        &self,
        origin: &Origin,
        entry: &RobotsEntry,
        token: String,
    ) -> Result<(), StoreError> {
        let key = origin.to_string();
        let fresh = entry.expires_at.saturating_duration_since(Instant::now());
        let fields = encode(entry);
        self.store
            .call(|mut conn| async move {
                let mut call = scripts::ROBOTS_PUT.prepare_invoke();
                call.key(scripts::robots_key(&key))
                    .key(scripts::robots_lock_key(&key))
                    .arg(token)
                    .arg(ms(fresh))
                    .arg(ms(fresh + KEEP_AFTER_EXPIRY).max(1));
                for (name, value) in &fields {
                    call.arg(*name).arg(value.as_slice());
                }
                Ok(call.invoke_async::<i64>(&mut conn).await?)
            })
            .await
            .map(drop)
    }
}

impl SharedRobots for FleetRobots {
    fn begin<'a>(&'a self, origin: &'a Origin) -> SharedFuture<'a, SharedLookup> {
        Box::pin(async move {
            match self.lookup(origin).await {
                Ok(found) => found,
                Err(error) => {
                    self.store.fell_back(&error);
                    SharedLookup::Unavailable
                }
            }
        })
    }

    fn publish<'a>(
        &'a self,
        origin: &'a Origin,
        entry: &'a RobotsEntry,
        token: String,
    ) -> SharedFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.store_entry(origin, entry, token).await {
                tracing::debug!(%origin, %error, "robots.txt entry not shared");
            }
        })
    }
}

/// The fields a stored entry carries.
fn encode(entry: &RobotsEntry) -> Vec<(&'static str, Vec<u8>)> {
    let mut fields: Vec<(&'static str, Vec<u8>)> = vec![("kind", entry.rules.kind().into())];
    match &entry.rules {
        RobotsRules::Parsed(file) => fields.push(("body", file.body().to_vec())),
        RobotsRules::AllowAll { status } | RobotsRules::DisallowAll { status } => {
            fields.push(("status", status.as_u16().to_string().into_bytes()))
        }
        RobotsRules::Unreachable { reason } | RobotsRules::Certificate { reason } => {
            fields.push(("reason", reason.clone().into_bytes()))
        }
    }
    if let Some(etag) = &entry.validators.etag {
        fields.push(("etag", etag.as_bytes().to_vec()));
    }
    if let Some(lm) = &entry.validators.last_modified {
        fields.push(("last_modified", lm.as_bytes().to_vec()));
    }
    let fetched_on = entry.fetched_on.duration_since(UNIX_EPOCH).map_or(0, ms);
    fields.push(("fetched_on", fetched_on.to_string().into_bytes()));
    fields.push(("failures", entry.failures.to_string().into_bytes()));
    fields.push((
        "truncated",
        if entry.truncated {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        },
    ));
    if let Some(stale) = &entry.stale {
        fields.push(("stale", stale.clone().into_bytes()));
    }
    if let Some(retry) = entry.retry_after {
        fields.push(("retry_after", ms(retry).to_string().into_bytes()));
    }
    fields
}

/// The entry the stored `fields` describe, fresh for `left` more.
fn decode(
    origin: &Origin,
    fields: &HashMap<String, Vec<u8>>,
    left: Duration,
) -> Option<RobotsEntry> {
    let text = |name: &str| fields.get(name).and_then(|v| std::str::from_utf8(v).ok());
    let number = |name: &str| text(name).and_then(|t| t.parse::<u64>().ok());
    let status = || {
        number("status")
            .and_then(|s| u16::try_from(s).ok())
            .and_then(|s| StatusCode::from_u16(s).ok())
    };
    let reason = || text("reason").unwrap_or("").to_owned();
    let rules = match text("kind")? {
        "parsed" => RobotsRules::Parsed(Arc::new(RobotsFile::parse(fields.get("body")?.clone()))),
        "allow_all" => RobotsRules::AllowAll { status: status()? },
        "disallow_all" => RobotsRules::DisallowAll { status: status()? },
        "unreachable" => RobotsRules::Unreachable { reason: reason() },
        "certificate" => RobotsRules::Certificate { reason: reason() },
        _ => return None,
    };
    let header = |name: &str| {
        fields
            .get(name)
            .and_then(|v| HeaderValue::from_bytes(v).ok())
    };
    let fetched_on = UNIX_EPOCH + Duration::from_millis(number("fetched_on")?);
    let now = Instant::now();
    let age = SystemTime::now()
        .duration_since(fetched_on)
        .unwrap_or(Duration::ZERO);
    Some(RobotsEntry {
        origin: origin.clone(),
        robots_url: origin.robots_url(),
        rules,
        fetched_at: now.checked_sub(age).unwrap_or(now),
        fetched_on,
        checked_at: now,
        expires_at: now + left,
        stale: text("stale").map(str::to_owned),
        retry_after: number("retry_after").map(Duration::from_millis),
        validators: Validators {
            etag: header("etag"),
            last_modified: header("last_modified"),
        },
        failures: number("failures")
            .and_then(|f| u32::try_from(f).ok())
            .unwrap_or(0),
        truncated: text("truncated") == Some("1"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_survives_the_store() {
        let origin = Origin::from_uri(&"http://a.example/".parse().expect("uri")).expect("origin");
        let now = Instant::now();
        let entry = RobotsEntry {
            origin: origin.clone(),
            robots_url: origin.robots_url(),
            rules: RobotsRules::Parsed(Arc::new(RobotsFile::parse(
                &b"User-agent: *\nDisallow: /x\n"[..],
            ))),
            fetched_at: now,
            fetched_on: SystemTime::now(),
            checked_at: now,
            expires_at: now + Duration::from_secs(60),
            stale: None,
            retry_after: None,
            validators: Validators {
                etag: Some(HeaderValue::from_static("\"v1\"")),
                last_modified: None,
            },
            failures: 0,
            truncated: true,
        };
        let fields: HashMap<String, Vec<u8>> = encode(&entry)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let back = decode(&origin, &fields, Duration::from_secs(30)).expect("decoded");
        assert_eq!(back.rules.kind(), "parsed");
        assert_eq!(back.copy().sha256, entry.copy().sha256);
        assert_eq!(back.validators.etag, entry.validators.etag);
        assert!(back.truncated);
        assert!(back.is_fresh(Instant::now()));

        let denied = RobotsEntry {
            rules: RobotsRules::DisallowAll {
                status: StatusCode::FORBIDDEN,
            },
            ..entry
        };
        let fields: HashMap<String, Vec<u8>> = encode(&denied)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let back = decode(&origin, &fields, Duration::ZERO).expect("decoded");
        assert!(matches!(
            back.rules,
            RobotsRules::DisallowAll { status } if status == StatusCode::FORBIDDEN
        ));
    }
}
