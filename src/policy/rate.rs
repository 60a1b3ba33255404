//! Per-host pacing: at most `max_per_host` requests in flight per host, at
//! least a delay between request starts, waiters served first come first served, and a
//! `429` (via [`PaceRejected`]) rather than an unbounded wait.
//!
//! # How it works
//!
//! All state sits in one [`std::sync::Mutex`] around an LRU map from host to its state.
//! The lock is only held for short bookkeeping and never across an `.await` (as mini-redis'
//! `db.rs` argues, a std mutex is the right tool for that: cheaper than tokio's, and no
//! await can deadlock while it is held).
//!
//! Each host has a FIFO queue of waiters. Only the waiter at the head acts: it sleeps until
//! the next start is allowed, or until a permit is returned, then takes its turn and wakes
//! the new head. Every waiter owns a [`Notify`]; `notify_one` stores a wake-up when nobody is
//! listening yet, so a wake sent between releasing the lock and awaiting is never lost. A
//! waiter whose future is dropped (the client went away) removes itself from the queue in a
//! `Drop` guard and, if it was the head, wakes the next one, so cancellation neither blocks
//! the queue nor leaks a slot.
//!
//! # Spacing and rejection
//!
//! A request may start once its own delay (the `delay` it was admitted with, raised to
//! `default_delay`) has passed since the previous start at the host, whichever request that
//! was. When it arrives, the starts queued ahead of it give a lower bound for its wait; if
//! that alone exceeds `max_wait` it is rejected at once, with that wait as `Retry-After`.
//! The time in-flight requests still run cannot be predicted, so a request held up by them
//! is rejected when it has waited `max_wait`.
//!
//! # Memory
//!
//! A host's state is dropped once it is idle: nothing in flight, nobody waiting, and its
//! last start older than the larger of its delay and `idle_host_ttl` (older than its delay,
//! so forgetting it cannot let the next request start too early). Sweeps run from `admit`
//! at most once per `idle_host_ttl` (or second) and can also be run with [`Pacer::sweep`].
//!
//! On top of that the map never holds more than `max_hosts` hosts. A new host evicts the
//! least recently used idle one (forgetting its last start: the price of the bound, and
//! with a sensible `max_hosts` that host has long been quiet). When every tracked host is
//! busy, the new host's request is admitted *unpaced*, with a warning logged, rather than
//! growing the map; that takes `max_hosts` requests in flight or waiting at once, which the
//! connection limit is meant to prevent.

use std::collections::VecDeque;
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lru::LruCache;
use thiserror::Error;

use super::backoff::{Backoff, BackoffCause, BackoffSettings, BackoffView};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

/// The pacing knobs, from `[rate_limit]` in the config.
#[derive(Debug, Clone)]
pub struct PacingSettings {
    /// The least spacing between request starts to any host; a smaller `delay` passed to
    /// [`Pacer::admit`] is raised to this.
    pub default_delay: Duration,
    /// How many requests to one host may run at the same time.
    pub max_per_host: NonZeroUsize,
    /// The longest a request may wait for its turn before it is answered `429`.
    pub max_wait: Duration,
    /// How long the state of an idle host is kept after its last start.
    pub idle_host_ttl: Duration,
    /// The most hosts tracked at once (0 is treated as 1), so memory stays bounded however
    /// many hosts are visited.
    pub max_hosts: usize,
    /// What a site's "slow down" does (see [`super::backoff`]).
    pub backoff: BackoffSettings,
}

/// The per-host request pacer. Cloning is cheap (an `Arc`), and all clones share the state.
#[derive(Clone)]
pub struct Pacer {
    inner: Arc<Inner>,
}

/// Held while a paced request runs; dropping it frees the host's in-flight slot.
#[must_use = "the request is paced only while the permit is held"]
pub struct PacePermit {
    inner: Arc<Inner>,
    /// `None` for a request admitted unpaced because every tracked host was busy.
    host: Option<Arc<str>>,
    /// See [`PacePermit::succeeded`].
    succeeded: bool,
    /// A slot held somewhere else too (a fleet's shared store), given back with this
    /// permit. `None` for a process alone, which then pays nothing for it.
    lease: Option<Box<dyn Lease>>,
}

/// A slot held outside this pacer (a fleet's shared store): given back when the
/// [`PacePermit`] carrying it is dropped, told whether the origin answered normally.
pub trait Lease: Send + Sync {
    /// The request is over; `succeeded` as [`PacePermit::succeeded`] recorded.
    fn release(&mut self, succeeded: bool);
}

/// Where a host's back-off is also reported: a fleet's shared store, so the other
/// processes slow down too. Called after the local state changed; must not block.
pub trait BackoffSink: Send + Sync {
    /// The site asked for a pause of `wait` (already known to be honoured).
    fn pause(&self, host: &str, wait: Duration, cause: BackoffCause, settings: &BackoffSettings);
    /// The site failed in a way that slows it down.
    fn failed(&self, host: &str, cause: BackoffCause, settings: &BackoffSettings);
}

/// The request would wait too long for its turn: answer `429 Too Many Requests`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("too many requests to this host; retry after {} s", retry_after.as_secs())]
pub struct PaceRejected {
    /// When a retry has a fair chance, rounded up to whole seconds and at least one second,
    /// ready for a `Retry-After` header.
    pub retry_after: Duration,
    /// The host is paused or slowed because the site asked for it (or failed): the wait is
    /// the site's, not the queue's.
    pub site_backoff: Option<BackoffCause>,
}

/// A snapshot of one host's pacing state, for a status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPaceStats {
    /// Requests to the host running now.
    pub in_flight: usize,
    /// Requests queued for their turn.
    pub waiting: usize,
    /// The spacing applied after the last start (the effective delay of that request).
    pub delay: Duration,
    /// How long ago the last request started, if any has.
    pub last_start_age: Option<Duration>,
    /// A pause or extra delay in force.
    pub backoff: Option<BackoffView>,
}

struct Inner {
    /// Swapped whole by [`Pacer::reconfigure`]; each admission reads one copy.
    settings: arc_swap::ArcSwap<PacingSettings>,
    state: Mutex<State>,
    /// Pauses and slow-downs since start, per [`BackoffCause::index`].
    backoffs: [std::sync::atomic::AtomicU64; BackoffCause::ALL.len()],
    /// Where back-off is also reported (a fleet's store), if anywhere.
    sink: std::sync::OnceLock<Arc<dyn BackoffSink>>,
}

struct State {
    hosts: LruCache<Arc<str>, HostState>,
    next_waiter_id: u64,
    next_sweep: Instant,
}

#[derive(Default)]
struct HostState {
    in_flight: usize,
    waiters: VecDeque<Waiter>,
    last_start: Option<Instant>,
    /// The effective delay of the request that started last.
    delay: Duration,
    /// What the site asked for, or showed.
    backoff: Backoff,
}

struct Waiter {
    id: u64,
    delay: Duration,
    wake: Arc<Notify>,
}

/// What a queued waiter does next, decided under the lock and carried out without it.
enum Step {
    Admitted,
    Rejected(PaceRejected),
    /// Head of the queue with a free slot: sleep until the spacing allows a start.
    SleepUntil(Instant),
    /// Not at the head, or no free slot: wait to be woken.
    Wait,
}

impl HostState {
    /// The earliest a request with spacing `delay` may start, `None` if it may start now:
    /// its delay (plus any extra back-off) after the previous start, and not in a pause.
    fn ready_at(&self, now: Instant, delay: Duration) -> Option<Instant> {
        let spaced = self.last_start.map(|t| t + delay + self.backoff.extra());
        match (spaced, self.backoff.paused_until(now)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The back-off cause, when the host is paused or slowed at `now`.
    fn backoff_cause(&self, now: Instant) -> Option<BackoffCause> {
        self.backoff.view(now).and_then(|v| v.cause)
    }

    fn start(&mut self, now: Instant, delay: Duration) {
        self.in_flight += 1;
        self.last_start = Some(now);
        self.delay = delay;
    }

    fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.waiters.is_empty()
    }

    fn is_expired(&self, now: Instant, ttl: Duration) -> bool {
        // A host the site asked to pause or slow is remembered until that is over.
        self.is_idle()
            && !self.backoff.is_active(now)
            && self
                .last_start
                .is_none_or(|t| now.saturating_duration_since(t) >= self.delay.max(ttl))
    }

    /// A lower bound for when a request with spacing `delay`, queued behind `ahead`, starts:
    /// each start comes at least its own delay after the previous one. In-flight requests
    /// may delay it further; how long they run cannot be known.
    fn estimate_start<'a>(
        &self,
        now: Instant,
        ahead: impl Iterator<Item = &'a Waiter>,
        delay: Duration,
    ) -> Instant {
        let earliest = self.backoff.paused_until(now).unwrap_or(now).max(now);
        let extra = self.backoff.extra();
        let mut t = self.last_start;
        for d in ahead.map(|w| w.delay).chain(std::iter::once(delay)) {
            t = Some(t.map_or(earliest, |t| (t + d + extra).max(earliest)));
        }
        t.unwrap_or(earliest)
    }

    fn wake_head(&self) {
        if let Some(head) = self.waiters.front() {
            head.wake.notify_one();
        }
    }
}

impl Pacer {
    /// Creates a pacer with no hosts tracked yet.
    pub fn new(settings: PacingSettings) -> Self {
        let next_sweep = Instant::now() + settings.idle_host_ttl;
        Pacer {
            inner: Arc::new(Inner {
                settings: arc_swap::ArcSwap::from_pointee(settings),
                backoffs: Default::default(),
                sink: std::sync::OnceLock::new(),
                state: Mutex::new(State {
                    hosts: LruCache::unbounded(),
                    next_waiter_id: 0,
                    next_sweep,
                }),
            }),
        }
    }

    /// Reports every pause and slow-down to `sink` too, from now on (a fleet's store,
    /// so the other processes see them). Set once; a second call is ignored.
    pub fn report_backoff_to(&self, sink: Arc<dyn BackoffSink>) {
        let _ = self.inner.sink.set(sink);
    }

    /// The settings in force.
    pub fn settings(&self) -> Arc<PacingSettings> {
        self.inner.settings.load_full()
    }

    /// Applies new settings (a configuration reload) to the requests admitted
    /// from now on; every host's state is kept. A lower `max_hosts` takes
    /// effect as hosts go idle and are swept.
    pub fn reconfigure(&self, settings: PacingSettings) {
        self.inner.settings.store(Arc::new(settings));
    }

    /// Waits for this request's turn at `host` and returns the permit to hold while it runs.
    ///
    /// `host` is the key as given (the caller lowercases names); `delay` is the spacing this
    /// request wants after the previous start at the host (the robots.txt crawl delay for the
    /// agent, already capped), raised to `default_delay`. A request starts when it is first
    /// in the host's queue, fewer than `max_per_host` requests run, and its delay has passed
    /// since the previous start.
    ///
    /// Cancel-safe: dropping the future gives up the place in the queue.
    ///
    /// # Errors
    ///
    /// [`PaceRejected`] at once when the queue ahead alone means waiting longer than
    /// `max_wait`, or after `max_wait` of waiting (e.g. when the in-flight requests run long).
    pub async fn admit(&self, host: &str, delay: Duration) -> Result<PacePermit, PaceRejected> {
        let settings = self.inner.settings.load_full();
        let delay = delay.max(settings.default_delay);
        let now = Instant::now();
        let deadline = now + settings.max_wait;

        let (key, id, wake) = {
            let mut state = self.inner.lock();
            state.maybe_sweep(now, &settings);
            let Some((key, st)) = state.entry(host, &settings) else {
                tracing::warn!(
                    host,
                    max_hosts = settings.max_hosts,
                    "every tracked host is busy; admitting the request unpaced"
                );
                return Ok(self.permit(None));
            };
            if st.waiters.is_empty()
                && st.in_flight < settings.max_per_host.get()
                && st.ready_at(now, delay).is_none_or(|t| t <= now)
            {
                st.start(now, delay);
                return Ok(self.permit(Some(key)));
            }
            let start = st.estimate_start(now, st.waiters.iter(), delay);
            if start - now > settings.max_wait {
                let rejected = PaceRejected::after(start - now, st.backoff_cause(now));
                tracing::debug!(host, retry_after = ?rejected.retry_after, "pacing queue too long");
                return Err(rejected);
            }
            let wake = Arc::new(Notify::new());
            let id = state.next_waiter_id;
            state.next_waiter_id += 1;
            // `entry` put the host's state in the map; it is looked up again because `st`
            // borrowed `state` and `next_waiter_id` had to be taken in between.
            if let Some(st) = state.hosts.peek_mut(&*key) {
                st.waiters.push_back(Waiter {
                    id,
                    delay,
                    wake: wake.clone(),
                });
            }
            (key, id, wake)
        };

        let mut guard = QueueGuard {
            inner: &self.inner,
            host: &key,
            id,
            queued: true,
        };
        loop {
            match self.inner.step(&key, id, delay, deadline) {
                Step::Admitted => {
                    guard.queued = false;
                    return Ok(self.permit(Some(key.clone())));
                }
                Step::Rejected(rejected) => {
                    guard.queued = false;
                    tracing::debug!(host, retry_after = ?rejected.retry_after, "waited max_wait");
                    return Err(rejected);
                }
                Step::SleepUntil(t) => {
                    tokio::select! {
                        _ = wake.notified() => {}
                        _ = sleep_until(t.min(deadline)) => {}
                    }
                }
                Step::Wait => {
                    tokio::select! {
                        _ = wake.notified() => {}
                        _ = sleep_until(deadline) => {}
                    }
                }
            }
        }
    }

    /// Drops the state of every expired idle host (see the module docs). `admit` sweeps on
    /// its own now and then; a status page or a timer may call this too.
    pub fn sweep(&self) {
        let now = Instant::now();
        let mut state = self.inner.lock();
        state.sweep(now, &self.inner.settings.load());
    }

    /// How many hosts have pacing state now.
    pub fn tracked_hosts(&self) -> usize {
        self.inner.lock().hosts.len()
    }

    /// The pacing state of `host`, if it is tracked.
    pub fn host_snapshot(&self, host: &str) -> Option<HostPaceStats> {
        let now = Instant::now();
        let state = self.inner.lock();
        state.hosts.peek(host).map(|st| HostPaceStats {
            in_flight: st.in_flight,
            waiting: st.waiters.len(),
            delay: st.delay,
            last_start_age: st.last_start.map(|t| now.saturating_duration_since(t)),
            backoff: st.backoff.view(now),
        })
    }

    fn permit(&self, host: Option<Arc<str>>) -> PacePermit {
        PacePermit {
            inner: self.inner.clone(),
            host,
            succeeded: false,
            lease: None,
        }
    }

    /// The site asked for a pause (`429`/`503` with `Retry-After`): nothing starts at
    /// `host` for `wait` (capped by `max_backoff`). With `honor_retry_after` off this
    /// counts as a failure instead.
    pub fn pause(&self, host: &str, wait: Duration, cause: BackoffCause) {
        let settings = self.inner.settings.load().backoff;
        if !settings.honor_retry_after {
            let status = match cause {
                BackoffCause::RetryAfter(status) => BackoffCause::Status(status),
                other => other,
            };
            return self.failed(host, status);
        }
        let now = Instant::now();
        tracing::info!(host, ?wait, %cause, "the site asked for a pause");
        self.inner
            .adjust(host, cause, |b| b.pause(now, wait, cause, &settings));
        if let Some(sink) = self.inner.sink.get() {
            sink.pause(host, wait, cause, &settings);
        }
    }

    /// The site failed in a way that asks for slowing down: a `429`/`503` without
    /// `Retry-After` (always), or a connect error, reset or timeout (with
    /// `backoff_on_errors`). The host's extra delay starts or doubles.
    pub fn failed(&self, host: &str, cause: BackoffCause) {
        let settings = self.inner.settings.load().backoff;
        let status = matches!(cause, BackoffCause::Status(_) | BackoffCause::RetryAfter(_));
        if !status && !settings.on_errors {
            return;
        }
        tracing::debug!(host, %cause, "the site is slowed down");
        self.inner
            .adjust(host, cause, |b| b.failed(cause, &settings));
        if let Some(sink) = self.inner.sink.get() {
            sink.failed(host, cause, &settings);
        }
    }

    /// Pauses and slow-downs since start, per cause.
    pub fn backoff_counts(&self) -> Vec<(BackoffCause, u64)> {
        BackoffCause::ALL
            .iter()
            .map(|cause| {
                let n =
                    self.inner.backoffs[cause.index()].load(std::sync::atomic::Ordering::Relaxed);
                (*cause, n)
            })
            .collect()
    }

    /// Hosts paused or slowed now, most recently used first (at most `limit`).
    pub fn backoffs(&self, limit: usize) -> Vec<(String, BackoffView)> {
        let now = Instant::now();
        let state = self.inner.lock();
        state
            .hosts
            .iter()
            .filter_map(|(host, st)| st.backoff.view(now).map(|v| (host.to_string(), v)))
            .take(limit)
            .collect()
    }
}

impl fmt::Debug for Pacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacer")
            .field("settings", &*self.inner.settings.load())
            .field("tracked_hosts", &self.tracked_hosts())
            .finish()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock is held leaves counters at worst slightly off; pacing
        // should go on rather than take every later request down with it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One decision for the queued waiter `id`; on `Admitted` or `Rejected` the waiter has
    /// already left the queue.
    fn step(&self, host: &str, id: u64, delay: Duration, deadline: Instant) -> Step {
        let now = Instant::now();
        let mut state = self.lock();
        let Some(st) = state.hosts.get_mut(host) else {
            // Unreachable: a host with waiters is never swept or evicted. Should it happen,
            // the request goes ahead rather than hanging.
            return Step::Admitted;
        };
        let is_head = st.waiters.front().is_some_and(|w| w.id == id);
        let slot_free = st.in_flight < self.settings.load().max_per_host.get();
        if is_head && slot_free {
            match st.ready_at(now, delay) {
                Some(t) if t > now && now < deadline => return Step::SleepUntil(t),
                Some(t) if t > now => {}
                _ => {
                    st.waiters.pop_front();
                    st.start(now, delay);
                    st.wake_head();
                    return Step::Admitted;
                }
            }
        }
        if now < deadline {
            return Step::Wait;
        }
        let cause = st.backoff_cause(now);
        let Some(pos) = st.waiters.iter().position(|w| w.id == id) else {
            return Step::Rejected(PaceRejected::after(Duration::ZERO, cause));
        };
        let start = st.estimate_start(now, st.waiters.iter().take(pos), delay);
        st.waiters.remove(pos);
        if pos == 0 {
            st.wake_head();
        }
        // Blocked by long-running requests the estimate cannot see: suggest at least one
        // more delay.
        Step::Rejected(PaceRejected::after((start - now).max(delay), cause))
    }

    /// Takes a queued waiter out of the queue (its future was dropped).
    fn leave(&self, host: &str, id: u64) {
        let mut state = self.lock();
        if let Some(st) = state.hosts.peek_mut(host) {
            if let Some(pos) = st.waiters.iter().position(|w| w.id == id) {
                st.waiters.remove(pos);
                if pos == 0 {
                    st.wake_head();
                }
            }
        }
    }

    fn release(&self, host: &str, succeeded: bool) {
        let mut state = self.lock();
        if let Some(st) = state.hosts.peek_mut(host) {
            st.in_flight = st.in_flight.saturating_sub(1);
            if succeeded {
                st.backoff.succeeded(&self.settings.load().backoff);
            }
            st.wake_head();
        }
    }

    /// Applies `change` to `host`'s back-off (creating its state if new) and wakes its
    /// queue's head, which then sees the new start time.
    fn adjust(&self, host: &str, cause: BackoffCause, change: impl FnOnce(&mut Backoff)) {
        let settings = self.settings.load();
        let mut state = self.lock();
        let Some((_, st)) = state.entry(host, &settings) else {
            return;
        };
        change(&mut st.backoff);
        st.wake_head();
        self.backoffs[cause.index()].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl State {
    /// The host's state, created if new; `None` when the map is full of busy hosts.
    fn entry(
        &mut self,
        host: &str,
        settings: &PacingSettings,
    ) -> Option<(Arc<str>, &mut HostState)> {
        if !self.hosts.contains(host) {
            if self.hosts.len() >= settings.max_hosts.max(1) {
                // Least recently used first; busy hosts are skipped, never evicted.
                let victim = self
                    .hosts
                    .iter()
                    .rev()
                    .find(|(_, st)| st.is_idle())
                    .map(|(k, _)| k.clone())?;
                self.hosts.pop(&victim);
            }
            self.hosts.put(Arc::from(host), HostState::default());
        }
        // Promotes the host to most recently used, so eviction picks long-unused hosts.
        let (key, st) = self.hosts.get_key_value_mut(host)?;
        Some((key.clone(), st))
    }

    fn maybe_sweep(&mut self, now: Instant, settings: &PacingSettings) {
        if now >= self.next_sweep {
            self.sweep(now, settings);
        }
    }

    fn sweep(&mut self, now: Instant, settings: &PacingSettings) {
        let expired: Vec<Arc<str>> = self
            .hosts
            .iter()
            .filter(|(_, st)| st.is_expired(now, settings.idle_host_ttl))
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.hosts.pop(&*key);
        }
        // At most one full scan per second however small the TTL: sweeping is O(hosts).
        self.next_sweep = now + settings.idle_host_ttl.max(Duration::from_secs(1));
    }
}

impl PaceRejected {
    /// A rejection suggesting a retry after `wait`, rounded up to whole seconds, at least 1.
    pub fn after(wait: Duration, site_backoff: Option<BackoffCause>) -> Self {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        PaceRejected {
            retry_after: Duration::from_secs(secs.max(1)),
            site_backoff,
        }
    }
}

/// Removes a waiter from its queue if the `admit` future is dropped while it waits.
struct QueueGuard<'a> {
    inner: &'a Inner,
    host: &'a str,
    id: u64,
    queued: bool,
}

impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        if self.queued {
            self.inner.leave(self.host, self.id);
        }
    }
}

impl PacePermit {
    /// The origin answered this request normally: on release, the host's extra back-off
    /// delay (if any) halves. Recorded here so the success costs no lock of its own.
    pub fn succeeded(&mut self) {
        self.succeeded = true;
    }

    /// The permit also holds `lease`, given back when it is dropped.
    pub fn with_lease(mut self, lease: Box<dyn Lease>) -> PacePermit {
        self.lease = Some(lease);
        self
    }
}

impl Drop for PacePermit {
    fn drop(&mut self) {
        if let Some(lease) = &mut self.lease {
            lease.release(self.succeeded);
        }
        if let Some(host) = &self.host {
            self.inner.release(host, self.succeeded);
        }
    }
}

impl fmt::Debug for PacePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacePermit")
            .field("host", &self.host)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use tokio::task::JoinHandle;
    use tokio::time::{sleep, timeout};

    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn settings() -> PacingSettings {
        PacingSettings {
            default_delay: Duration::ZERO,
            max_per_host: NonZeroUsize::new(10).expect("non-zero"),
            max_wait: Duration::from_secs(60),
            idle_host_ttl: Duration::from_secs(60),
            max_hosts: 1000,
            backoff: Default::default(),
        }
    }

    fn pacer_with(f: impl FnOnce(&mut PacingSettings)) -> Pacer {
        let mut s = settings();
        f(&mut s);
        Pacer::new(s)
    }

    fn waiting(pacer: &Pacer, host: &str) -> usize {
        pacer.host_snapshot(host).map_or(0, |s| s.waiting)
    }

    /// Spawns `admit` and returns once it is queued, so waiters queue in spawn order.
    async fn spawn_queued<T: Send + 'static>(
        pacer: &Pacer,
        host: &'static str,
        delay: Duration,
        then: impl FnOnce(Result<PacePermit, PaceRejected>) -> T + Send + 'static,
    ) -> JoinHandle<T> {
        let before = waiting(pacer, host);
        let p = pacer.clone();
        let handle = tokio::spawn(async move { then(p.admit(host, delay).await) });
        while waiting(pacer, host) == before {
            tokio::task::yield_now().await;
        }
        handle
    }

    #[tokio::test(start_paused = true)]
    async fn starts_are_spaced_by_delay_in_order() {
        let pacer = pacer_with(|_| {});
        let t0 = Instant::now();
        let log = Arc::new(StdMutex::new(Vec::new()));
        let first = pacer
            .admit("a.example", SEC)
            .await
            .expect("first is admitted");
        log.lock().expect("log").push((0, Duration::ZERO));
        drop(first);
        let mut handles = Vec::new();
        for i in 1..5 {
            let log = log.clone();
            handles.push(
                spawn_queued(&pacer, "a.example", SEC, move |r| {
                    drop(r.expect("admitted"));
                    log.lock().expect("log").push((i, t0.elapsed()));
                })
                .await,
            );
        }
        for h in handles {
            h.await.expect("task");
        }
        let log = log.lock().expect("log").clone();
        let want: Vec<_> = (0..5).map(|i| (i, SEC * i)).collect();
        assert_eq!(log, want);
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_fifo() {
        let pacer = pacer_with(|s| s.max_per_host = NonZeroUsize::MIN);
        let held = pacer
            .admit("a.example", Duration::ZERO)
            .await
            .expect("admitted");
        let order = Arc::new(StdMutex::new(Vec::new()));
        let mut handles = Vec::new();
        for i in 0..6 {
            let order = order.clone();
            handles.push(
                spawn_queued(&pacer, "a.example", Duration::ZERO, move |r| {
                    let permit = r.expect("admitted");
                    order.lock().expect("order").push(i);
                    permit
                })
                .await,
            );
        }
        drop(held);
        for h in handles {
            // Each permit is dropped here, letting the next waiter in.
            drop(h.await.expect("task"));
        }
        assert_eq!(*order.lock().expect("order"), vec![0, 1, 2, 3, 4, 5]);
    }

    #[tokio::test(start_paused = true)]
    async fn max_per_host_caps_in_flight() {
        let pacer = pacer_with(|s| s.max_per_host = NonZeroUsize::new(2).expect("non-zero"));
        let p1 = pacer.admit("a.example", Duration::ZERO).await.expect("1st");
        let _p2 = pacer.admit("a.example", Duration::ZERO).await.expect("2nd");
        let third = spawn_queued(&pacer, "a.example", Duration::ZERO, |r| r).await;
        sleep(Duration::from_secs(10)).await;
        assert!(!third.is_finished(), "third must wait for a free slot");
        let snap = pacer.host_snapshot("a.example").expect("tracked");
        assert_eq!((snap.in_flight, snap.waiting), (2, 1));

        let t = Instant::now();
        drop(p1);
        let _p3 = third.await.expect("task").expect("3rd admitted");
        assert_eq!(t.elapsed(), Duration::ZERO);
        let snap = pacer.host_snapshot("a.example").expect("tracked");
        assert_eq!((snap.in_flight, snap.waiting), (2, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn predicted_long_wait_is_rejected_at_once() {
        let pacer = pacer_with(|s| s.max_wait = Duration::from_secs(3));
        let _p0 = pacer.admit("a.example", SEC).await.expect("t=0");
        // Starts at t=1, 2, 3: a wait of exactly max_wait is still accepted.
        let mut queued = Vec::new();
        for _ in 0..3 {
            queued.push(spawn_queued(&pacer, "a.example", SEC, |r| r.map(drop)).await);
        }
        let t = Instant::now();
        let rejected = pacer
            .admit("a.example", SEC)
            .await
            .expect_err("t=4 > max_wait");
        assert_eq!(t.elapsed(), Duration::ZERO, "rejected without waiting");
        assert_eq!(rejected.retry_after, Duration::from_secs(4));
        for h in queued {
            h.await.expect("task").expect("within max_wait");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waiter_is_rejected_after_max_wait() {
        let pacer = pacer_with(|s| {
            s.max_per_host = NonZeroUsize::MIN;
            s.max_wait = Duration::from_secs(5);
        });
        let _held = pacer.admit("a.example", SEC).await.expect("admitted");
        let t = Instant::now();
        let rejected = pacer
            .admit("a.example", SEC)
            .await
            .expect_err("slot never frees");
        assert_eq!(t.elapsed(), Duration::from_secs(5));
        assert!(rejected.retry_after >= SEC);
        assert_eq!(rejected.retry_after.subsec_nanos(), 0);
        assert_eq!(
            waiting(&pacer, "a.example"),
            0,
            "rejected waiter left the queue"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_waiter_frees_its_place() {
        let pacer = pacer_with(|s| s.max_per_host = NonZeroUsize::MIN);
        let held = pacer
            .admit("a.example", Duration::ZERO)
            .await
            .expect("admitted");
        // The first waiter gives up (its future is dropped by the timeout).
        let gave_up = timeout(SEC, pacer.admit("a.example", Duration::ZERO)).await;
        assert!(gave_up.is_err());
        assert_eq!(waiting(&pacer, "a.example"), 0);

        let next = spawn_queued(&pacer, "a.example", Duration::ZERO, |r| r).await;
        let aborted = spawn_queued(&pacer, "a.example", Duration::ZERO, |r| r).await;
        aborted.abort();
        assert!(aborted.await.expect_err("aborted").is_cancelled());
        drop(held);
        let permit = next.await.expect("task").expect("admitted");
        drop(permit);
        let snap = pacer.host_snapshot("a.example").expect("tracked");
        assert_eq!((snap.in_flight, snap.waiting), (0, 0), "no slot leaked");
        let _again = pacer
            .admit("a.example", Duration::ZERO)
            .await
            .expect("free");
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_head_wakes_the_next_waiter() {
        let pacer = pacer_with(|_| {});
        let t0 = Instant::now();
        drop(pacer.admit("a.example", SEC).await.expect("t=0"));
        let head = spawn_queued(&pacer, "a.example", SEC, |r| r.map(drop)).await;
        let next = spawn_queued(&pacer, "a.example", SEC, move |r| {
            r.map(|_permit| t0.elapsed())
        })
        .await;
        head.abort();
        // The next waiter takes the head's turn at t=1, not t=2.
        assert_eq!(next.await.expect("task").expect("admitted"), SEC);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_hosts_are_dropped_after_ttl() {
        let pacer = pacer_with(|s| s.idle_host_ttl = Duration::from_secs(10));
        drop(pacer.admit("a.example", SEC).await.expect("admitted"));
        drop(pacer.admit("b.example", SEC).await.expect("admitted"));
        let busy = pacer.admit("c.example", SEC).await.expect("admitted");
        assert_eq!(pacer.tracked_hosts(), 3);
        sleep(Duration::from_secs(5)).await;
        pacer.sweep();
        assert_eq!(pacer.tracked_hosts(), 3, "younger than the ttl");
        sleep(Duration::from_secs(5)).await;
        pacer.sweep();
        assert_eq!(pacer.tracked_hosts(), 1, "only the busy host is kept");
        drop(busy);
        pacer.sweep();
        assert_eq!(pacer.tracked_hosts(), 0);
        assert!(pacer.host_snapshot("a.example").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn admit_sweeps_on_its_own() {
        let pacer = pacer_with(|s| s.idle_host_ttl = Duration::from_secs(10));
        drop(pacer.admit("a.example", SEC).await.expect("admitted"));
        sleep(Duration::from_secs(11)).await;
        drop(pacer.admit("b.example", SEC).await.expect("admitted"));
        assert!(pacer.host_snapshot("a.example").is_none());
        assert_eq!(pacer.tracked_hosts(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_delay_outlives_the_ttl() {
        let pacer = pacer_with(|s| s.idle_host_ttl = SEC);
        drop(
            pacer
                .admit("a.example", Duration::from_secs(30))
                .await
                .expect("t=0"),
        );
        sleep(Duration::from_secs(5)).await;
        pacer.sweep();
        assert_eq!(
            pacer.tracked_hosts(),
            1,
            "forgetting it would allow an early start"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn max_hosts_evicts_idle_and_admits_unpaced_when_all_busy() {
        let pacer = pacer_with(|s| s.max_hosts = 2);
        let a = pacer.admit("a.example", SEC).await.expect("a");
        drop(pacer.admit("b.example", SEC).await.expect("b"));
        let c = pacer
            .admit("c.example", SEC)
            .await
            .expect("c evicts idle b");
        assert_eq!(pacer.tracked_hosts(), 2);
        assert!(pacer.host_snapshot("b.example").is_none());

        let d = pacer
            .admit("d.example", SEC)
            .await
            .expect("admitted unpaced");
        assert_eq!(pacer.tracked_hosts(), 2);
        assert!(pacer.host_snapshot("d.example").is_none());
        drop((a, c, d));
    }

    #[tokio::test(start_paused = true)]
    async fn hosts_do_not_wait_for_each_other() {
        let pacer = pacer_with(|s| s.max_per_host = NonZeroUsize::MIN);
        let t = Instant::now();
        let _a = pacer
            .admit("a.example", Duration::from_secs(10))
            .await
            .expect("a");
        let _b = pacer
            .admit("b.example", Duration::from_secs(10))
            .await
            .expect("b");
        let _ip = pacer
            .admit("192.0.2.1", Duration::from_secs(10))
            .await
            .expect("ip");
        assert_eq!(t.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn delay_below_default_is_raised() {
        let pacer = pacer_with(|s| s.default_delay = Duration::from_secs(2));
        let t = Instant::now();
        drop(pacer.admit("a.example", Duration::ZERO).await.expect("t=0"));
        drop(
            pacer
                .admit("a.example", Duration::from_millis(500))
                .await
                .expect("t=2"),
        );
        assert_eq!(t.elapsed(), Duration::from_secs(2));
        let snap = pacer.host_snapshot("a.example").expect("tracked");
        assert_eq!(snap.delay, Duration::from_secs(2));
        assert_eq!(snap.last_start_age, Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_is_whole_seconds_at_least_one() {
        let cases = [
            (Duration::ZERO, 1),
            (Duration::from_millis(1), 1),
            (Duration::from_secs(3), 3),
            (Duration::from_millis(3001), 4),
        ];
        for (wait, want) in cases {
            assert_eq!(
                PaceRejected::after(wait, None).retry_after,
                Duration::from_secs(want)
            );
        }
        assert_eq!(
            PaceRejected::after(Duration::from_secs(7), None).to_string(),
            "too many requests to this host; retry after 7 s"
        );
    }
}
