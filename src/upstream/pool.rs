//! One worker's connections to origins that are kept for the next request:
//! idle HTTP/1.1 connections, a list per origin, and one shared HTTP/2
//! connection per origin.
//!
//! An HTTP/1.1 connection carries one exchange at a time. It is lent out
//! for a request and comes back ([`Pool::check_in_http1`]) only when its
//! response was read to the end and the origin did not close it; a request
//! takes the newest one that is ready. An HTTP/2 connection carries any
//! number of exchanges at once, so it is never lent: every request to the
//! origin gets a clone of its `SendRequest`, and a closed one is replaced by
//! the next connection opened.
//!
//! Memory stays bounded however many origins are visited:
//! - at most [`MAX_IDLE_PER_ORIGIN`] idle connections wait per origin;
//! - at most `max_held` connections are held per worker in all, shared
//!   HTTP/2 ones included (`proxy.max_idle_upstream` split between the
//!   workers); past that, the one idle longest goes;
//! - a sweeping task closes connections idle for `idle_timeout` (an HTTP/2
//!   connection counts as idle from its last request or answer) and those
//!   the origin closed. It runs only while the pool holds any connection.
//!
//! Dropping a held connection's sender is what closes it: hyper's
//! connection task ends once nothing can send on it any more (for HTTP/2,
//! once the exchanges still under way are over too).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use hyper::client::conn::{http1, http2};
use tokio::time::Instant;

use super::body::OutgoingBody;
use crate::origin::Scheme;

/// Idle connections kept per origin.
pub const MAX_IDLE_PER_ORIGIN: usize = 64;

/// The sending half of an HTTP/1.1 connection.
pub(super) type Http1Sender = http1::SendRequest<OutgoingBody>;

/// The sending half of an HTTP/2 connection; clones share it.
pub(super) type Http2Sender = http2::SendRequest<OutgoingBody>;

/// One worker's pool. Cloning shares it.
#[derive(Clone)]
pub(super) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    idle_timeout: Duration,
    /// Connections held in all, idle HTTP/1.1 and shared HTTP/2: a crawl
    /// across many origins holds at most this many sockets (and their
    /// buffers) per worker, the ones idle longest closed first.
    max_held: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// hashbrown's map: `get_key_value_mut` hands a checkout the map's own
    /// key, and [`KeyRef`] looks a request's origin up without building a
    /// key (and allocating) for it.
    by_origin: hashbrown::HashMap<PoolKey, OriginConns>,
    /// Every held connection by its stamp, oldest first: which one goes
    /// when the worker holds `max_held`.
    ages: BTreeMap<u64, PoolKey>,
    /// The next stamp: stamps only grow, so their order is the order in
    /// which connections became idle (or an HTTP/2 one was last used).
    next_stamp: u64,
    /// A sweeping task is running (or about to): see [`reap`].
    reaping: bool,
}

/// One origin's held connections.
#[derive(Default)]
struct OriginConns {
    /// Oldest first: a request takes from the back, so the connections used
    /// least lately age out.
    http1: Vec<Idle>,
    http2: Option<Shared2>,
}

impl OriginConns {
    fn is_empty(&self) -> bool {
        self.http1.is_empty() && self.http2.is_none()
    }
}

struct Idle {
    sender: Http1Sender,
    since: Instant,
    stamp: u64,
}

struct Shared2 {
    sender: Http2Sender,
    /// Its last request began or answer ended.
    since: Instant,
    /// Its place in [`Held::ages`]; renewed with each use.
    stamp: u64,
    /// Which connection this is, for the bodies and requests that refer to
    /// it after the pool may have replaced it.
    id: u64,
}

/// What connections are pooled by: the scheme and the authority as written.
///
/// Its own copy of the authority, shared between the map and the
/// connections out on loan: a key cut from a request's URI would keep that
/// request's whole read buffer alive for as long as the map holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PoolKey {
    scheme: Scheme,
    authority: Arc<str>,
}

impl PoolKey {
    pub(super) fn new(scheme: Scheme, authority: &str) -> PoolKey {
        PoolKey {
            scheme,
            authority: Arc::from(authority),
        }
    }
}

/// A request's origin, borrowed, to look a [`PoolKey`] up with. Hashes as
/// `PoolKey` does: the derived `Hash` of both feeds the scheme, then the
/// authority's text.
#[derive(Hash)]
struct KeyRef<'a> {
    scheme: Scheme,
    authority: &'a str,
}

impl hashbrown::Equivalent<PoolKey> for KeyRef<'_> {
    fn equivalent(&self, key: &PoolKey) -> bool {
        self.scheme == key.scheme && self.authority == &*key.authority
    }
}

/// What the pool has for a request.
pub(super) enum Checkout {
    /// The origin's shared HTTP/2 connection.
    Http2 {
        key: PoolKey,
        sender: Http2Sender,
        id: u64,
    },
    /// An idle HTTP/1.1 connection, now on loan, idle since `since`.
    Http1 {
        key: PoolKey,
        sender: Http1Sender,
        since: Instant,
    },
    /// Nothing usable: a new connection is needed.
    Nothing { key: PoolKey },
}

impl Pool {
    /// An empty pool whose connections close after `idle_timeout` unused,
    /// holding at most `max_held` (at least one).
    pub(super) fn new(idle_timeout: Duration, max_held: usize) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                idle_timeout,
                max_held: max_held.max(1),
                held: Mutex::new(Held::default()),
            }),
        }
    }

    /// The connection for a request to `scheme://authority`: the shared
    /// HTTP/2 one, else the newest idle HTTP/1.1 one that can take a request
    /// now. Closed ones found on the way are dropped; busy ones (still
    /// sending an earlier request's body) stay.
    pub(super) fn checkout(&self, scheme: Scheme, authority: &str) -> Checkout {
        let mut guard = self.shared.lock();
        let Held {
            by_origin,
            ages,
            next_stamp,
            ..
        } = &mut *guard;
        let origin = KeyRef { scheme, authority };
        let Some((key, held)) = by_origin.get_key_value_mut(&origin) else {
            return Checkout::Nothing {
                key: PoolKey::new(scheme, authority),
            };
        };
        let key = key.clone();
        if let Some(shared) = &mut held.http2 {
            ages.remove(&shared.stamp);
            if shared.sender.is_closed() {
                held.http2 = None;
            } else {
                shared.stamp = stamp(next_stamp);
                shared.since = Instant::now();
                ages.insert(shared.stamp, key.clone());
                let (sender, id) = (shared.sender.clone(), shared.id);
                return Checkout::Http2 { key, sender, id };
            }
        }
        let mut found = None;
        let mut i = held.http1.len();
        while i > 0 {
            i -= 1;
            if held.http1[i].sender.is_ready() {
                found = Some(held.http1.remove(i));
                break;
            }
            if held.http1[i].sender.is_closed() {
                ages.remove(&held.http1.remove(i).stamp);
            }
        }
        if held.is_empty() {
            by_origin.remove(&origin);
        }
        match found {
            Some(idle) => {
                ages.remove(&idle.stamp);
                Checkout::Http1 {
                    key,
                    sender: idle.sender,
                    since: idle.since,
                }
            }
            None => Checkout::Nothing { key },
        }
    }

    /// Puts an HTTP/1.1 connection whose exchange ended back, unless the
    /// origin closed it.
    pub(super) fn check_in_http1(&self, key: PoolKey, sender: Http1Sender) {
        if sender.is_closed() {
            return;
        }
        let since = Instant::now();
        let mut guard = self.shared.lock();
        let held = &mut *guard;
        let stamp = stamp(&mut held.next_stamp);
        held.ages.insert(stamp, key.clone());
        let list = &mut held.by_origin.entry(key).or_default().http1;
        list.push(Idle {
            sender,
            since,
            stamp,
        });
        if list.len() > MAX_IDLE_PER_ORIGIN {
            held.ages.remove(&list.remove(0).stamp);
        }
        self.settle(guard);
    }

    /// Makes `sender`, a new HTTP/2 connection, the one `key`'s requests
    /// share (the one it replaces closes once its exchanges are over), and
    /// returns its id.
    pub(super) fn share_http2(&self, key: PoolKey, sender: Http2Sender) -> u64 {
        let mut guard = self.shared.lock();
        let held = &mut *guard;
        let id = stamp(&mut held.next_stamp);
        held.ages.insert(id, key.clone());
        let shared = Shared2 {
            sender,
            since: Instant::now(),
            stamp: id,
            id,
        };
        if let Some(replaced) = held.by_origin.entry(key).or_default().http2.replace(shared) {
            held.ages.remove(&replaced.stamp);
        }
        self.settle(guard);
        id
    }

    /// An answer on HTTP/2 connection `id` has ended: it counts as idle
    /// from now, not from its request.
    pub(super) fn touch_http2(&self, key: &PoolKey, id: u64) {
        let mut guard = self.shared.lock();
        let Held {
            by_origin,
            ages,
            next_stamp,
            ..
        } = &mut *guard;
        let Some(shared) = by_origin.get_mut(key).and_then(|h| h.http2.as_mut()) else {
            return;
        };
        if shared.id == id {
            ages.remove(&shared.stamp);
            shared.stamp = stamp(next_stamp);
            shared.since = Instant::now();
            ages.insert(shared.stamp, key.clone());
        }
    }

    /// HTTP/2 connection `id` turned a request away unsent (it is closing):
    /// stop sharing it, if it is still the shared one.
    pub(super) fn forget_http2(&self, key: &PoolKey, id: u64) {
        let mut guard = self.shared.lock();
        let Held {
            by_origin, ages, ..
        } = &mut *guard;
        let Some(held) = by_origin.get_mut(key) else {
            return;
        };
        if let Some(shared) = held.http2.take_if(|shared| shared.id == id) {
            ages.remove(&shared.stamp);
        }
        if held.is_empty() {
            by_origin.remove(key);
        }
    }

    /// After a connection was added: drops the ones idle longest past
    /// `max_held`, and starts the sweeper unless it runs.
    fn settle(&self, mut held: MutexGuard<'_, Held>) {
        while held.ages.len() > self.shared.max_held {
            let Some((stamp, key)) = held.ages.pop_first() else {
                break;
            };
            if let Some(origin) = held.by_origin.get_mut(&key) {
                if origin.http2.as_ref().is_some_and(|s| s.stamp == stamp) {
                    origin.http2 = None;
                } else if let Some(i) = origin.http1.iter().position(|c| c.stamp == stamp) {
                    origin.http1.remove(i);
                }
                if origin.is_empty() {
                    held.by_origin.remove(&key);
                }
            }
        }
        let runtime = if held.reaping {
            None
        } else {
            tokio::runtime::Handle::try_current().ok()
        };
        if runtime.is_some() {
            held.reaping = true;
        }
        drop(held);
        // Spawned without the lock: a runtime that is shutting down drops the
        // task at once, and its guard takes the lock.
        if let Some(runtime) = runtime {
            let guard = ReaperGuard {
                pool: Arc::downgrade(&self.shared),
                armed: true,
            };
            runtime.spawn(reap(guard, self.shared.idle_timeout));
        }
    }

    /// Idle HTTP/1.1 connections held for `scheme://authority`.
    #[cfg(test)]
    pub(super) fn idle_count(&self, scheme: Scheme, authority: &str) -> usize {
        self.shared
            .lock()
            .by_origin
            .get(&KeyRef { scheme, authority })
            .map_or(0, |held| held.http1.len())
    }

    /// Whether `scheme://authority` has a shared HTTP/2 connection.
    #[cfg(test)]
    pub(super) fn has_http2(&self, scheme: Scheme, authority: &str) -> bool {
        self.shared
            .lock()
            .by_origin
            .get(&KeyRef { scheme, authority })
            .is_some_and(|held| held.http2.is_some())
    }

    /// Connections held in all (every one has its stamp in `ages`).
    pub(super) fn held(&self) -> usize {
        self.shared.lock().ages.len()
    }

    /// [`Pool::held`], counted origin by origin too.
    #[cfg(test)]
    fn held_checked(&self) -> usize {
        let held = self.shared.lock();
        let counted: usize = held
            .by_origin
            .values()
            .map(|h| h.http1.len() + usize::from(h.http2.is_some()))
            .sum();
        assert_eq!(counted, held.ages.len(), "every held connection is aged");
        counted
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Held> {
        // The map stays consistent at every point a panic could unwind from.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn stamp(next: &mut u64) -> u64 {
    let stamp = *next;
    *next += 1;
    stamp
}

/// Closes connections idle for `idle_timeout`, and those the origin closed,
/// every half `idle_timeout`; ends when the pool is empty or gone.
async fn reap(mut guard: ReaperGuard, idle_timeout: Duration) {
    let period = (idle_timeout / 2).max(Duration::from_millis(10));
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    loop {
        ticks.tick().await;
        let Some(pool) = guard.pool.upgrade() else {
            return;
        };
        let now = Instant::now();
        let fresh = |since: Instant| now.saturating_duration_since(since) < idle_timeout;
        let mut held = pool.lock();
        let Held {
            by_origin, ages, ..
        } = &mut *held;
        by_origin.retain(|_, origin| {
            origin.http1.retain(|idle| {
                let keep = !idle.sender.is_closed() && fresh(idle.since);
                if !keep {
                    ages.remove(&idle.stamp);
                }
                keep
            });
            if let Some(shared) = origin
                .http2
                .take_if(|shared| shared.sender.is_closed() || !fresh(shared.since))
            {
                ages.remove(&shared.stamp);
            }
            !origin.is_empty()
        });
        if by_origin.is_empty() {
            held.reaping = false;
            guard.armed = false;
            return;
        }
    }
}

/// Clears the pool's `reaping` flag if the sweeping task is dropped early
/// (its runtime shut down), so the next check-in starts another.
struct ReaperGuard {
    pool: Weak<Shared>,
    armed: bool,
}

impl Drop for ReaperGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Some(pool) = self.pool.upgrade() {
                pool.lock().reaping = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cap of the pools these tests build.
    const MAX_HELD: usize = 1024;

    /// An HTTP/1.1 sender over an in-memory pipe, and the task driving its
    /// connection (it ends when the pool drops the sender).
    async fn new_sender() -> (Http1Sender, tokio::task::JoinHandle<()>) {
        let (ours, theirs) = tokio::io::duplex(64);
        let (mut sender, connection) = http1::handshake(hyper_util::rt::TokioIo::new(ours))
            .await
            .expect("handshake");
        let task = tokio::spawn(async move {
            let _ = connection.await;
            drop(theirs);
        });
        sender.ready().await.expect("ready for a request");
        (sender, task)
    }

    fn authority(i: usize) -> String {
        format!("origin-{i}.test")
    }

    #[tokio::test]
    async fn at_most_max_held_are_held_the_oldest_closed_first() {
        let pool = Pool::new(Duration::from_secs(30), MAX_HELD);
        let extra = 10;
        let mut tasks = Vec::new();
        for i in 0..MAX_HELD + extra {
            let (sender, task) = new_sender().await;
            pool.check_in_http1(PoolKey::new(Scheme::Http, &authority(i)), sender);
            tasks.push(task);
        }
        assert_eq!(pool.held_checked(), MAX_HELD);
        for i in 0..extra {
            assert_eq!(pool.idle_count(Scheme::Http, &authority(i)), 0, "{i}");
        }
        for i in extra..MAX_HELD + extra {
            assert_eq!(pool.idle_count(Scheme::Http, &authority(i)), 1, "{i}");
        }
        // Dropped from the pool means closed: their connections' tasks end.
        for task in tasks.drain(..extra) {
            tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("the dropped connection closes")
                .expect("task");
        }
        assert!(tasks.iter().all(|task| !task.is_finished()));

        // A connection taken and given back is the newest again: the next
        // one over the cap is the oldest of the others.
        let taken = authority(extra);
        let Checkout::Http1 { key, sender, .. } = pool.checkout(Scheme::Http, &taken) else {
            panic!("an idle connection for {taken}");
        };
        assert_eq!(pool.held_checked(), MAX_HELD - 1);
        pool.check_in_http1(key, sender);
        let (sender, _task) = new_sender().await;
        pool.check_in_http1(PoolKey::new(Scheme::Http, "one-more.test"), sender);
        assert_eq!(pool.held_checked(), MAX_HELD);
        assert_eq!(pool.idle_count(Scheme::Http, &taken), 1);
        assert_eq!(pool.idle_count(Scheme::Http, &authority(extra + 1)), 0);
    }

    #[tokio::test]
    async fn the_scheme_is_part_of_the_key() {
        let pool = Pool::new(Duration::from_secs(30), MAX_HELD);
        let (sender, _task) = new_sender().await;
        pool.check_in_http1(PoolKey::new(Scheme::Https, "example.test"), sender);
        assert!(matches!(
            pool.checkout(Scheme::Http, "example.test"),
            Checkout::Nothing { .. }
        ));
        assert!(matches!(
            pool.checkout(Scheme::Https, "example.test"),
            Checkout::Http1 { .. }
        ));
        assert_eq!(pool.held_checked(), 0);
    }
}
