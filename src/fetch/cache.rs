//! The per-origin robots.txt cache: bounded storage, one fetch per origin at a time,
//! lifetimes, failure backoff and the last good copy.
//!
//! # Single flight
//!
//! A lookup that finds no fresh entry either joins the fetch already running for the
//! origin or starts one. The fetch runs in its own task and publishes its entry through a
//! `watch` channel, so every waiter gets the same `Arc`, and a client that goes away (its
//! request future dropped) does not cancel the fetch the others wait for. The task stores
//! the entry *before* it leaves the in-flight map, and a lookup that starts a fetch
//! re-reads the store under the in-flight lock, so no lookup can start a second fetch for
//! an entry that was just stored.
//!
//! # Locks
//!
//! Two std mutexes (the in-flight map here, the LRU in [`MemoryStore`]), each held for a
//! few map operations and never across an `.await`: a std mutex is cheaper than tokio's
//! for that and cannot deadlock on an await (the argument of mini-redis' `db.rs`). The
//! store's lock may be taken while the in-flight lock is held, never the other way round.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::StatusCode;
use lru::LruCache;
use tokio::sync::watch;
use tokio::time::Instant;

use super::client::{FetchOutcome, RobotsFetcher};
use super::{FetchSettings, RobotsEntry, RobotsRules, Validators};
use crate::config::On4xx;
use crate::origin::Origin;

/// Where cache entries live. One process keeps them in memory ([`MemoryStore`]); a fleet
/// of proxies can share them through a distributed store by implementing
/// this trait. Single flight stays in [`RobotsCache`], over any store.
///
/// Implementations must bound their size themselves.
pub trait RobotsStore: Send + Sync {
    /// The entry for `origin`, fresh or not.
    fn get(&self, origin: &Origin) -> Option<Arc<RobotsEntry>>;

    /// Stores `entry` for `origin`, replacing any older one. Returns the origin whose
    /// entry was pushed out to make room, if the store knows (for metrics).
    fn put(&self, origin: Origin, entry: Arc<RobotsEntry>) -> Option<Origin>;

    /// How many origins have an entry.
    fn len(&self) -> usize;

    /// No origin has an entry.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `limit` entries, most recently used first, for a status page.
    fn snapshot(&self, limit: usize) -> Vec<(Origin, Arc<RobotsEntry>)>;

    /// Holds at most `capacity` origins from now on (a reload changed
    /// `robots.cache_capacity`); a smaller store drops its least recently
    /// used entries.
    fn set_capacity(&self, capacity: NonZeroUsize);
}

/// What a store shared with other processes (a fleet's) says about an origin's
/// robots.txt, asked by the one fetch task of this process before it fetches.
#[derive(Debug)]
pub enum SharedLookup {
    /// A fresh entry stored by some process (its expiry already on this clock).
    Found(Box<RobotsEntry>),
    /// No fresh entry: this process holds the fetch lock (the token frees it).
    Fetch(String),
    /// Another process is fetching; ask again within this long.
    Wait(Duration),
    /// The shared store cannot be used: fetch alone.
    Unavailable,
}

/// A boxed future, for the object-safe [`SharedRobots`].
pub type SharedFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A robots.txt store shared by a fleet of processes: one fetch per origin for the
/// whole fleet. The local LRU stays in front of it as a near cache (entries keep the
/// shared expiry), so a cached lookup never asks it.
pub trait SharedRobots: Send + Sync {
    /// The shared entry, or the fetch lock, or "wait".
    fn begin<'a>(&'a self, origin: &'a Origin) -> SharedFuture<'a, SharedLookup>;

    /// Stores `entry`, fetched under the lock `token`, for every process.
    fn publish<'a>(
        &'a self,
        origin: &'a Origin,
        entry: &'a RobotsEntry,
        token: String,
    ) -> SharedFuture<'a, ()>;
}

/// How often a process waiting for another's fetch asks the shared store again.
const SHARED_POLL: Duration = Duration::from_millis(25);

/// The in-memory store: an LRU of at most `capacity` origins.
pub struct MemoryStore {
    entries: Mutex<LruCache<Origin, Arc<RobotsEntry>>>,
}

impl MemoryStore {
    /// An empty store holding at most `capacity` origins.
    pub fn new(capacity: NonZeroUsize) -> Self {
        MemoryStore {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<Origin, Arc<RobotsEntry>>> {
        // The map is consistent after any panic (every operation is a single LRU call),
        // so a poisoned lock is still safe to use.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RobotsStore for MemoryStore {
    fn get(&self, origin: &Origin) -> Option<Arc<RobotsEntry>> {
        self.lock().get(origin).cloned()
    }

    fn put(&self, origin: Origin, entry: Arc<RobotsEntry>) -> Option<Origin> {
        let mut entries = self.lock();
        // `push` also returns the old value of a replaced key; only a different key is an
        // eviction.
        match entries.push(origin.clone(), entry) {
            Some((old, _)) if old != origin => Some(old),
            _ => None,
        }
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn snapshot(&self, limit: usize) -> Vec<(Origin, Arc<RobotsEntry>)> {
        self.lock()
            .iter()
            .take(limit)
            .map(|(origin, entry)| (origin.clone(), entry.clone()))
            .collect()
    }

    fn set_capacity(&self, capacity: NonZeroUsize) {
        self.lock().resize(capacity);
    }
}

/// Counters of the cache, for metrics. Monotonic except `entries` and `in_flight`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered by a fresh entry.
    pub hits: u64,
    /// Lookups that started or joined a fetch.
    pub misses: u64,
    /// Fetches that got a 2xx and parsed it.
    pub fetches_ok: u64,
    /// Revalidations answered `304`.
    pub fetches_not_modified: u64,
    /// Fetches that found the file unavailable (4xx, broken redirects).
    pub fetches_unavailable: u64,
    /// Fetches that failed as unreachable (429, 5xx, network).
    pub fetches_unreachable: u64,
    /// Fetches refused by a failed certificate verification.
    pub fetches_certificate: u64,
    /// Entries pushed out of the store by newer ones.
    pub evictions: u64,
    /// Origins in the store now.
    pub entries: usize,
    /// Fetches running now.
    pub in_flight: usize,
}

/// The robots.txt cache. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct RobotsCache {
    inner: Arc<Inner>,
}

type Pending = watch::Receiver<Option<Arc<RobotsEntry>>>;

struct Inner {
    fetcher: RobotsFetcher,
    store: Arc<dyn RobotsStore>,
    /// The fleet's shared store, asked before fetching (see [`SharedRobots`]).
    shared: std::sync::OnceLock<Arc<dyn SharedRobots>>,
    in_flight: Mutex<HashMap<Origin, Pending>>,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    ok: AtomicU64,
    not_modified: AtomicU64,
    unavailable: AtomicU64,
    unreachable: AtomicU64,
    certificate: AtomicU64,
    evictions: AtomicU64,
}

impl RobotsCache {
    /// A cache over an in-memory LRU of `cache_capacity` origins.
    pub fn new(fetcher: RobotsFetcher) -> Self {
        let store = Arc::new(MemoryStore::new(fetcher.settings().cache_capacity));
        RobotsCache::with_store(fetcher, store)
    }

    /// A cache over any store.
    pub fn with_store(fetcher: RobotsFetcher, store: Arc<dyn RobotsStore>) -> Self {
        RobotsCache {
            inner: Arc::new(Inner {
                fetcher,
                store,
                shared: std::sync::OnceLock::new(),
                in_flight: Mutex::new(HashMap::new()),
                counters: Counters::default(),
            }),
        }
    }

    /// The robots.txt entry for `origin`: the cached one while fresh, else the result of
    /// a fetch (a revalidation when the cached file has validators), shared with every
    /// other lookup of the origin waiting at the same time.
    ///
    /// Never fails: failures are entries too ([`RobotsRules::Unreachable`],
    /// [`RobotsRules::Certificate`]). Cancel-safe: dropping the future leaves the fetch
    /// running for the others and for the cache.
    pub async fn lookup(&self, origin: &Origin) -> Arc<RobotsEntry> {
        let inner = &self.inner;
        if let Some(entry) = inner.fresh(origin) {
            inner.counters.hits.fetch_add(1, Ordering::Relaxed);
            return entry;
        }
        let mut pending = {
            let mut in_flight = inner.lock_in_flight();
            match in_flight.get(origin) {
                Some(pending) => pending.clone(),
                None => {
                    // A fetch may have finished since the first look: it stored its entry
                    // before leaving `in_flight`, so this second look sees it.
                    let previous = inner.store.get(origin);
                    if let Some(entry) = previous.as_ref().filter(|e| e.is_fresh(Instant::now())) {
                        inner.counters.hits.fetch_add(1, Ordering::Relaxed);
                        return entry.clone();
                    }
                    let (tx, rx) = watch::channel(None);
                    in_flight.insert(origin.clone(), rx.clone());
                    tokio::spawn(refresh(inner.clone(), origin.clone(), previous, tx));
                    rx
                }
            }
        };
        inner.counters.misses.fetch_add(1, Ordering::Relaxed);
        let published = pending
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|entry| entry.clone());
        published.unwrap_or_else(|| {
            // The fetch task ended without publishing: it panicked. Answer this request
            // as unreachable without caching it, so the next lookup tries again.
            tracing::error!(%origin, "robots.txt fetch task failed");
            let now = Instant::now();
            Arc::new(RobotsEntry {
                origin: origin.clone(),
                robots_url: origin.robots_url(),
                rules: RobotsRules::Unreachable {
                    reason: "internal error: the robots.txt fetch failed".to_owned(),
                },
                fetched_at: now,
                fetched_on: std::time::SystemTime::now(),
                checked_at: now,
                expires_at: now,
                stale: None,
                retry_after: Some(Duration::from_secs(1)),
                validators: Validators::default(),
                failures: 1,
                truncated: false,
            })
        })
    }

    /// Asks `shared` (a fleet's store) before every fetch from now on, and publishes
    /// what this process fetches there. Set once; a second call is ignored.
    pub fn share_through(&self, shared: Arc<dyn SharedRobots>) {
        let _ = self.inner.shared.set(shared);
    }

    /// The cached entry for `origin`, fresh or not, without fetching.
    pub fn peek(&self, origin: &Origin) -> Option<Arc<RobotsEntry>> {
        self.inner.store.get(origin)
    }

    /// The counters, for metrics.
    pub fn stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        CacheStats {
            hits: load(&c.hits),
            misses: load(&c.misses),
            fetches_ok: load(&c.ok),
            fetches_not_modified: load(&c.not_modified),
            fetches_unavailable: load(&c.unavailable),
            fetches_unreachable: load(&c.unreachable),
            fetches_certificate: load(&c.certificate),
            evictions: load(&c.evictions),
            entries: self.inner.store.len(),
            in_flight: self.inner.lock_in_flight().len(),
        }
    }

    /// The fetch settings in force.
    pub fn settings(&self) -> Arc<FetchSettings> {
        self.inner.fetcher.settings()
    }

    /// Applies new settings (a configuration reload): fetches started from now
    /// on use them, and the store takes the new capacity. Cached entries keep
    /// the lifetimes they were given.
    pub fn reconfigure(&self, settings: FetchSettings) {
        self.inner.store.set_capacity(settings.cache_capacity);
        self.inner.fetcher.reconfigure(settings);
    }

    /// Up to `limit` cached entries, most recently used first, for a status page.
    pub fn snapshot(&self, limit: usize) -> Vec<(Origin, Arc<RobotsEntry>)> {
        self.inner.store.snapshot(limit)
    }
}

impl Inner {
    fn fresh(&self, origin: &Origin) -> Option<Arc<RobotsEntry>> {
        self.store
            .get(origin)
            .filter(|entry| entry.is_fresh(Instant::now()))
    }

    fn lock_in_flight(&self) -> MutexGuard<'_, HashMap<Origin, Pending>> {
        // Each critical section is one map operation, so the map is consistent even if a
        // holder panicked.
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, outcome: &FetchOutcome) {
        let c = &self.counters;
        let counter = match outcome {
            FetchOutcome::Parsed { .. } => &c.ok,
            FetchOutcome::NotModified { .. } => &c.not_modified,
            FetchOutcome::Unavailable { .. } => &c.unavailable,
            FetchOutcome::Unreachable { .. } => &c.unreachable,
            FetchOutcome::Certificate { .. } => &c.certificate,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The fetch task: fetch, build the entry, store it, publish it, leave the in-flight map.
async fn refresh(
    inner: Arc<Inner>,
    origin: Origin,
    previous: Option<Arc<RobotsEntry>>,
    tx: watch::Sender<Option<Arc<RobotsEntry>>>,
) {
    // Dropped last, also when the fetch panics, so the origin never stays "in flight".
    let _leave = LeaveInFlight {
        inner: &inner,
        origin: &origin,
    };
    let entry = Arc::new(match inner.shared.get() {
        Some(shared) => shared_entry(&inner, shared.as_ref(), &origin, previous.as_deref()).await,
        None => fetch_entry(&inner, &origin, previous.as_deref()).await,
    });
    tracing::debug!(
        %origin,
        rules = entry.rules.kind(),
        stale = entry.stale.is_some(),
        ttl = ?entry.expires_at.saturating_duration_since(entry.checked_at),
        "robots.txt entry stored"
    );
    if let Some(evicted) = inner.store.put(origin.clone(), entry.clone()) {
        inner.counters.evictions.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%evicted, "robots.txt entry evicted");
    }
    tx.send_replace(Some(entry));
}

/// Fetches `origin`'s robots.txt (a revalidation of `previous` when it can be) and
/// builds its entry.
async fn fetch_entry(
    inner: &Inner,
    origin: &Origin,
    previous: Option<&RobotsEntry>,
) -> RobotsEntry {
    // Only a parsed file is worth revalidating: a 304 can only confirm what was parsed.
    let validators = previous
        .filter(|p| matches!(p.rules, RobotsRules::Parsed(_)))
        .map(|p| &p.validators);
    let outcome = inner.fetcher.fetch(origin, validators).await;
    inner.count(&outcome);
    entry_for(
        &inner.fetcher.settings(),
        origin,
        previous,
        outcome,
        Instant::now(),
    )
}

/// The entry through the fleet's store: the one stored there, or this process fetches
/// it under the fleet's lock and stores it, or waits while another process does. A
/// fetch lock that outlives its holder expires, and someone else fetches; a wait longer
/// than two fetch timeouts, or a store that cannot be used, means fetching alone.
async fn shared_entry(
    inner: &Inner,
    shared: &dyn SharedRobots,
    origin: &Origin,
    previous: Option<&RobotsEntry>,
) -> RobotsEntry {
    let deadline = Instant::now() + inner.fetcher.settings().fetch_timeout * 2;
    loop {
        match shared.begin(origin).await {
            SharedLookup::Found(entry) => return *entry,
            SharedLookup::Fetch(token) => {
                let entry = fetch_entry(inner, origin, previous).await;
                shared.publish(origin, &entry, token).await;
                return entry;
            }
            SharedLookup::Wait(left) if Instant::now() < deadline => {
                tokio::time::sleep(left.min(SHARED_POLL)).await;
            }
            SharedLookup::Wait(_) | SharedLookup::Unavailable => {
                return fetch_entry(inner, origin, previous).await
            }
        }
    }
}

struct LeaveInFlight<'a> {
    inner: &'a Inner,
    origin: &'a Origin,
}

impl Drop for LeaveInFlight<'_> {
    fn drop(&mut self) {
        self.inner.lock_in_flight().remove(self.origin);
    }
}

/// The entry a fetch outcome makes, given the entry it replaces.
fn entry_for(
    settings: &FetchSettings,
    origin: &Origin,
    previous: Option<&RobotsEntry>,
    outcome: FetchOutcome,
    now: Instant,
) -> RobotsEntry {
    let fresh = |rules: RobotsRules, ttl: Duration| RobotsEntry {
        origin: origin.clone(),
        robots_url: origin.robots_url(),
        rules,
        fetched_at: now,
        fetched_on: std::time::SystemTime::now(),
        checked_at: now,
        expires_at: later(now, ttl),
        stale: None,
        retry_after: None,
        validators: Validators::default(),
        failures: 0,
        truncated: false,
    };
    let unavailable = |status: StatusCode| match settings.on_4xx {
        On4xx::Allow => RobotsRules::AllowAll { status },
        On4xx::Disallow => RobotsRules::DisallowAll { status },
    };
    match outcome {
        FetchOutcome::Parsed {
            robots,
            ttl,
            validators,
            truncated,
        } => RobotsEntry {
            validators,
            truncated,
            ..fresh(RobotsRules::Parsed(robots), ttl)
        },
        FetchOutcome::NotModified { ttl, validators } => match previous {
            Some(
                p @ RobotsEntry {
                    rules: RobotsRules::Parsed(_),
                    ..
                },
            ) => RobotsEntry {
                validators: p.validators.updated_by(validators),
                truncated: p.truncated,
                ..fresh(p.rules.clone(), ttl)
            },
            // Conditional fetches are only made for parsed files, so this cannot happen;
            // a 304 with nothing to confirm is read as any other unusable 3xx.
            _ => fresh(unavailable(StatusCode::NOT_MODIFIED), ttl),
        },
        FetchOutcome::Unavailable { status, ttl } => fresh(unavailable(status), ttl),
        FetchOutcome::Unreachable {
            reason,
            retry_after,
        } => failed(
            settings,
            origin,
            previous,
            RobotsRules::Unreachable { reason },
            retry_after,
            now,
        ),
        FetchOutcome::Certificate { reason } => failed(
            settings,
            origin,
            previous,
            RobotsRules::Certificate { reason },
            None,
            now,
        ),
    }
}

/// The entry after a failed fetch: the last good copy marked stale while it is younger
/// than `stale_for` (RFC 9309 §2.4 allows a cached copy beyond 24 h while the file is
/// unreachable), else the failure itself. Either way the next attempt comes after the
/// doubling failure interval.
///
/// A certificate failure gets no stand-in: the origin cannot be reached safely at all,
/// and forwarding to it would fail on the same certificate.
fn failed(
    settings: &FetchSettings,
    origin: &Origin,
    previous: Option<&RobotsEntry>,
    rules: RobotsRules,
    server_retry_after: Option<Duration>,
    now: Instant,
) -> RobotsEntry {
    let failures = previous.map_or(0, |p| p.failures).saturating_add(1);
    let interval = settings.failure_interval(failures, server_retry_after);
    let stand_in = match &rules {
        RobotsRules::Unreachable { reason } => previous
            .filter(|p| {
                p.rules.is_good()
                    && now.saturating_duration_since(p.fetched_at) < settings.stale_for
            })
            .map(|p| (p, reason.clone())),
        _ => None,
    };
    match stand_in {
        Some((p, reason)) => RobotsEntry {
            checked_at: now,
            // Never past the copy's own age limit: then the failure shows.
            expires_at: later(now, interval).min(later(p.fetched_at, settings.stale_for)),
            stale: Some(reason),
            retry_after: Some(interval),
            failures,
            ..p.clone()
        },
        None => RobotsEntry {
            origin: origin.clone(),
            robots_url: origin.robots_url(),
            rules,
            fetched_at: now,
            fetched_on: std::time::SystemTime::now(),
            checked_at: now,
            expires_at: later(now, interval),
            stale: None,
            retry_after: Some(interval),
            validators: Validators::default(),
            failures,
            truncated: false,
        },
    }
}

/// `at + d`, saturating at a far future instead of panicking on absurd durations.
fn later(at: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);
    at.checked_add(d.min(FAR)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::fetch::RobotsFile;
    use crate::origin::Scheme;

    const SEC: Duration = Duration::from_secs(1);

    fn settings() -> FetchSettings {
        let mut s = FetchSettings::from_config(&Config::default()).expect("default identity");
        s.failure_ttl = 10 * SEC;
        s.max_failure_ttl = 100 * SEC;
        s.stale_for = 1000 * SEC;
        s
    }

    fn origin(scheme: Scheme, host: &str, port: u16) -> Origin {
        Origin {
            scheme,
            host: host.to_owned(),
            port,
        }
    }

    fn parsed(ttl: Duration) -> FetchOutcome {
        FetchOutcome::Parsed {
            robots: Arc::new(RobotsFile::parse(&b"User-agent: *\nDisallow: /x\n"[..])),
            ttl,
            validators: Validators {
                etag: Some(http::HeaderValue::from_static("\"v1\"")),
                last_modified: None,
            },
            truncated: false,
        }
    }

    fn unreachable() -> FetchOutcome {
        FetchOutcome::Unreachable {
            reason: "503".to_owned(),
            retry_after: None,
        }
    }

    #[test]
    fn http_and_https_of_one_host_are_different_entries() {
        let store = MemoryStore::new(NonZeroUsize::new(10).expect("non-zero"));
        let s = settings();
        let now = Instant::now();
        let http = origin(Scheme::Http, "example.com", 80);
        let https = origin(Scheme::Https, "example.com", 443);
        let entry = entry_for(&s, &http, None, parsed(SEC), now);
        store.put(http.clone(), Arc::new(entry));
        assert!(store.get(&http).is_some());
        assert!(store.get(&https).is_none());
        assert!(store
            .get(&origin(Scheme::Http, "example.com", 8080))
            .is_none());
    }

    #[test]
    fn the_store_evicts_the_least_recently_used_and_says_which() {
        let store = MemoryStore::new(NonZeroUsize::new(2).expect("non-zero"));
        let s = settings();
        let now = Instant::now();
        let o = |n: u16| origin(Scheme::Http, "example.com", n);
        let e = |n: u16| Arc::new(entry_for(&s, &o(n), None, parsed(SEC), now));
        assert_eq!(store.put(o(1), e(1)), None);
        assert_eq!(store.put(o(2), e(2)), None);
        assert_eq!(store.put(o(2), e(2)), None, "replacing is not evicting");
        assert!(store.get(&o(1)).is_some()); // 1 is now the most recently used
        assert_eq!(store.put(o(3), e(3)), Some(o(2)));
        assert_eq!(store.len(), 2);
        let order: Vec<u16> = store.snapshot(10).iter().map(|(o, _)| o.port).collect();
        assert_eq!(order, [3, 1]);
        assert_eq!(store.snapshot(1).len(), 1);
    }

    #[test]
    fn a_failure_after_a_good_file_keeps_the_copy_marked_stale() {
        let s = settings();
        let o = origin(Scheme::Http, "example.com", 80);
        let t0 = Instant::now();
        let good = entry_for(&s, &o, None, parsed(60 * SEC), t0);
        let t1 = t0 + 100 * SEC;
        let stale = entry_for(&s, &o, Some(&good), unreachable(), t1);
        assert!(matches!(stale.rules, RobotsRules::Parsed(_)));
        assert_eq!(stale.stale.as_deref(), Some("503"));
        assert_eq!(stale.fetched_at, t0);
        assert_eq!(stale.expires_at, t1 + 10 * SEC);
        assert_eq!(stale.failures, 1);
        assert_eq!(stale.validators, good.validators, "kept for revalidation");

        // Near the end of stale_for, the next attempt comes no later than the limit.
        let t2 = t0 + 995 * SEC;
        let again = entry_for(&s, &o, Some(&stale), unreachable(), t2);
        assert_eq!(again.expires_at, t0 + 1000 * SEC);
        assert_eq!(again.failures, 2);

        // Past stale_for the failure shows.
        let t3 = t0 + 1000 * SEC;
        let gone = entry_for(&s, &o, Some(&again), unreachable(), t3);
        assert!(matches!(gone.rules, RobotsRules::Unreachable { .. }));
        assert_eq!(gone.stale, None);
        assert_eq!(gone.failures, 3);
        assert_eq!(gone.retry_after, Some(40 * SEC));
    }

    #[test]
    fn a_certificate_failure_gets_no_stale_copy() {
        let s = settings();
        let o = origin(Scheme::Https, "example.com", 443);
        let t0 = Instant::now();
        let good = entry_for(&s, &o, None, parsed(60 * SEC), t0);
        let cert = FetchOutcome::Certificate {
            reason: "UnknownIssuer".to_owned(),
        };
        let entry = entry_for(&s, &o, Some(&good), cert, t0 + 100 * SEC);
        assert!(matches!(entry.rules, RobotsRules::Certificate { .. }));
        assert_eq!(entry.retry_after, Some(10 * SEC));
        let cert = FetchOutcome::Certificate {
            reason: "UnknownIssuer".to_owned(),
        };
        let again = entry_for(&s, &o, Some(&entry), cert, t0 + 200 * SEC);
        assert_eq!(
            again.retry_after,
            Some(20 * SEC),
            "backs off like other failures"
        );
    }

    #[test]
    fn a_304_keeps_the_rules_and_refreshes_the_lifetime() {
        let s = settings();
        let o = origin(Scheme::Http, "example.com", 80);
        let t0 = Instant::now();
        let good = entry_for(&s, &o, None, parsed(60 * SEC), t0);
        let t1 = t0 + 120 * SEC;
        let outcome = FetchOutcome::NotModified {
            ttl: 60 * SEC,
            validators: Validators::default(),
        };
        let entry = entry_for(&s, &o, Some(&good), outcome, t1);
        match (&entry.rules, &good.rules) {
            (RobotsRules::Parsed(a), RobotsRules::Parsed(b)) => assert!(Arc::ptr_eq(a, b)),
            other => panic!("expected parsed rules, got {other:?}"),
        }
        assert_eq!((entry.fetched_at, entry.expires_at), (t1, t1 + 60 * SEC));
        assert_eq!(entry.validators, good.validators);
    }

    #[test]
    fn a_4xx_follows_on_4xx() {
        let mut s = settings();
        let o = origin(Scheme::Http, "example.com", 80);
        let outcome = || FetchOutcome::Unavailable {
            status: StatusCode::FORBIDDEN,
            ttl: SEC,
        };
        let now = Instant::now();
        let entry = entry_for(&s, &o, None, outcome(), now);
        assert!(matches!(entry.rules, RobotsRules::AllowAll { status } if status == 403));
        s.on_4xx = On4xx::Disallow;
        let entry = entry_for(&s, &o, None, outcome(), now);
        assert!(matches!(entry.rules, RobotsRules::DisallowAll { status } if status == 403));
    }
}
