//! Per-host pacing shared by the fleet: one store round trip per admitted request.
//!
//! # Order and cost
//!
//! A request first takes its place in this process's own per-host queue (a [`Pacer`]
//! with no spacing of its own and the same `max_per_host`): that keeps first come, first
//! served within the process and never lets more requests of one process ask the store
//! than could be admitted. Then it runs [`scripts::ADMIT`] once: the script drops
//! expired leases and the finished ones the call carries, applies the host's pause and
//! extra delay, reserves the next start (`start = max(now, next, paused)`,
//! `next = start + delay + extra`) and takes a lease scored by its expiry, or answers "full" (all
//! `max_per_host` leases held: the request asks again when the first expires, polling at
//! most every [`FULL_POLL`]) or "reject" (the wait would pass `max_wait`: `429`). The
//! process then sleeps until its start. The clock is the store's.
//!
//! Requests told "full" wait in a queue in the store (`rg:{host}:waiting`, by first
//! ask), and a freed slot goes to the oldest of them: a process whose next request
//! carries back the lease it just finished cannot keep the slot while another process
//! waits, so no process starves. A waiter that stops asking is dropped after 1 s.
//!
//! # Giving leases back
//!
//! A finished request does not wait on the store: its lease id goes into the process's
//! list of finished leases, and the next admission to the same host from any worker
//! carries it (piggybacked on the one round trip that admission makes anyway). What no
//! admission takes is given back by a background batch, one script call per host, sent
//! together on the multiplexed connection: within [`FLUSH_AFTER`] when the lease was
//! the host's last free slot (someone may be waiting for it), else within
//! [`LAZY_FLUSH`] (slots were to spare, so the lease blocks nobody while it waits for the
//! next admission to carry it). A process that dies gives nothing back: its leases
//! expire after `fleet.lease_ttl`. A living process extends the leases of its long
//! requests every third of `lease_ttl` (`renew.lua`), so a long transfer keeps its slot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::scripts::{self, ms};
use super::store::{Store, StoreError};
use crate::config::OnStoreError;
use crate::policy::{
    BackoffCause, BackoffSettings, BackoffSink, Lease, PacePermit, PaceRejected, Pacer,
    PacingSettings,
};

/// How long a finished lease that took the host's last free slot waits for an
/// admission to the same host to carry it before a background batch gives it back.
pub const FLUSH_AFTER: Duration = Duration::from_millis(20);

/// The same for a lease taken while slots were to spare.
pub const LAZY_FLUSH: Duration = Duration::from_millis(250);

/// The longest a request waits before asking again when every slot is held.
pub const FULL_POLL: Duration = Duration::from_millis(50);

/// How long the store keeps a host's pause state past its end.
const IDLE_KEEP: Duration = Duration::from_secs(60);

/// Why the fleet did not admit a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetRefusal {
    /// The wait would be too long (`429 pacing` or `site-backoff`).
    Pace(PaceRejected),
    /// The store cannot be reached and `on_store_error = "refuse"` (`503`).
    StoreUnavailable,
}

/// The fleet's pacer.
pub struct FleetPacer {
    store: Arc<Store>,
    /// This process's FIFO per host in front of the store.
    queue: Pacer,
    lease_ttl: Duration,
    on_error: OnStoreError,
    /// Finished leases, for the whole process: any worker's next admission to the
    /// host carries them.
    finished: Arc<Finished>,
    /// Lease ids: this process's random prefix and a counter.
    prefix: String,
    next_lease: AtomicU64,
}

/// The process's finished leases, per host, waiting to be given back.
#[derive(Default)]
struct Finished {
    hosts: Mutex<HashMap<Arc<str>, Done>>,
    /// Leases held now: id -> (host, when taken), for renewal.
    held: Mutex<HashMap<String, (Arc<str>, Instant)>>,
    /// `first_delay` of the back-off settings in force, in ms: where a halved extra
    /// delay stops (the release script needs it as the admission script does).
    first_delay_ms: AtomicU64,
    wake: Notify,
    flusher: AtomicBool,
}

#[derive(Default)]
struct Done {
    ids: Vec<String>,
    successes: u32,
    /// One of the leases took the host's last free slot: give it back soon.
    urgent: bool,
    /// When the first of them was put here.
    since: Option<Instant>,
}

impl Finished {
    fn take(&self, host: &str) -> Done {
        self.hosts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(host)
            .unwrap_or_default()
    }

    fn put(&self, host: &Arc<str>, done: Done) {
        if done.ids.is_empty() && done.successes == 0 {
            return;
        }
        let first = {
            let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
            let first = hosts.is_empty();
            let pending = hosts.entry(host.clone()).or_default();
            pending.ids.extend(done.ids);
            pending.successes = pending.successes.saturating_add(done.successes);
            pending.urgent |= done.urgent;
            pending.since = pending.since.or(done.since).or(Some(Instant::now()));
            first
        };
        if first {
            self.wake.notify_one();
        }
    }

    fn is_empty(&self) -> bool {
        self.hosts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Takes the hosts whose leases are due: urgent ones, and those waiting longer
    /// than [`LAZY_FLUSH`].
    fn drain_due(&self, now: Instant) -> Vec<(Arc<str>, Done)> {
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        let due: Vec<Arc<str>> = hosts
            .iter()
            .filter(|(_, d)| {
                d.urgent || d.since.is_none_or(|t| now.duration_since(t) >= LAZY_FLUSH)
            })
            .map(|(host, _)| host.clone())
            .collect();
        due.into_iter()
            .filter_map(|host| hosts.remove_entry(&host))
            .collect()
    }
}

/// A lease held in the store, given back through the process's list.
struct SharedLease {
    finished: Arc<Finished>,
    host: Arc<str>,
    id: String,
    /// It took the host's last free slot.
    urgent: bool,
}

impl Lease for SharedLease {
    fn release(&mut self, succeeded: bool) {
        self.finished
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        let done = Done {
            ids: vec![std::mem::take(&mut self.id)],
            successes: u32::from(succeeded),
            urgent: self.urgent,
            since: None,
        };
        self.finished.put(&self.host, done);
    }
}

/// The local queue's settings: the process's pacing without its spacing or back-off
/// (the store applies those).
fn queue_settings(settings: &PacingSettings) -> PacingSettings {
    PacingSettings {
        default_delay: Duration::ZERO,
        backoff: BackoffSettings {
            on_errors: false,
            ..settings.backoff
        },
        ..settings.clone()
    }
}

impl FleetPacer {
    /// A pacer over `store`.
    pub fn new(
        store: Arc<Store>,
        settings: &PacingSettings,
        lease_ttl: Duration,
        on_error: OnStoreError,
    ) -> FleetPacer {
        FleetPacer {
            store,
            queue: Pacer::new(queue_settings(settings)),
            lease_ttl,
            on_error,
            finished: Arc::new(Finished::default()),
            prefix: format!("{:08x}", crate::random_id::rand_u32()),
            next_lease: AtomicU64::new(0),
        }
    }

    /// New pacing settings (a reload): the local queue follows.
    pub fn reconfigure(&self, settings: &PacingSettings) {
        self.queue.reconfigure(queue_settings(settings));
    }

    /// Waits for this request's turn at `host` across the fleet; `local` is the
    /// process's own pacer, whose settings apply and which paces alone when the store
    /// cannot be used (`on_store_error = "local"`).
    ///
    /// Cancel-safe: dropping the future gives up the local place, and a lease already
    /// taken is given back.
    ///
    /// # Errors
    ///
    /// [`FleetRefusal`]: the wait is too long, or the store is unavailable and the
    /// process refuses rather than pace alone.
    pub async fn admit(
        &self,
        local: &Pacer,
        host: &str,
        delay: Duration,
    ) -> Result<PacePermit, FleetRefusal> {
        if !self.store.is_up() {
            return self.fallback(local, host, delay, &StoreError::Down).await;
        }
        let settings = local.settings();
        let spacing = delay.max(settings.default_delay);
        let deadline = Instant::now() + settings.max_wait;
        let queued = self
            .queue
            .admit(host, Duration::ZERO)
            .await
            .map_err(FleetRefusal::Pace)?;
        let finished = self.finished_here();
        finished
            .first_delay_ms
            .store(ms(settings.backoff.first_delay), Ordering::Relaxed);
        let host_key: Arc<str> = Arc::from(host);
        let id = format!(
            "{}-{}",
            self.prefix,
            self.next_lease.fetch_add(1, Ordering::Relaxed)
        );
        loop {
            let mut done = finished.take(host);
            let now = Instant::now();
            let (returned, successes) = (std::mem::take(&mut done.ids), done.successes);
            let args = AdmitArgs {
                host,
                delay: spacing,
                max_per_host: settings.max_per_host.get(),
                lease_ttl: self.lease_ttl,
                max_wait: deadline.saturating_duration_since(now),
                id: &id,
                successes,
                backoff: &settings.backoff,
                idle: settings.idle_host_ttl,
                returned: returned.clone(),
            };
            let reply = self.store.call(|conn| args.invoke(conn)).await;
            let (verdict, wait_ms, cause, held) = match reply {
                Ok(reply) => reply,
                Err(error) => {
                    let back = Done {
                        ids: returned,
                        successes,
                        urgent: done.urgent,
                        since: done.since,
                    };
                    finished.put(&host_key, back);
                    drop(queued);
                    return self.fallback(local, host, delay, &error).await;
                }
            };
            let wait = Duration::from_millis(wait_ms);
            let cause = BackoffCause::from_word(&cause);
            match verdict.as_str() {
                "ok" => {
                    finished
                        .held
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(id.clone(), (host_key.clone(), Instant::now()));
                    let permit = queued.with_lease(Box::new(SharedLease {
                        finished: finished.clone(),
                        host: host_key,
                        id,
                        urgent: held >= settings.max_per_host.get() as u64,
                    }));
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    return Ok(permit);
                }
                "reject" => return Err(FleetRefusal::Pace(PaceRejected::after(wait, cause))),
                "full" => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(FleetRefusal::Pace(PaceRejected::after(
                            spacing.max(wait),
                            cause,
                        )));
                    }
                    tokio::time::sleep(wait.min(FULL_POLL).min(left)).await;
                }
                other => {
                    let error = StoreError::Reply(other.to_owned());
                    drop(queued);
                    return self.fallback(local, host, delay, &error).await;
                }
            }
        }
    }

    async fn fallback(
        &self,
        local: &Pacer,
        host: &str,
        delay: Duration,
        why: &StoreError,
    ) -> Result<PacePermit, FleetRefusal> {
        self.store.fell_back(why);
        match self.on_error {
            OnStoreError::Local => local.admit(host, delay).await.map_err(FleetRefusal::Pace),
            OnStoreError::Refuse => Err(FleetRefusal::StoreUnavailable),
        }
    }

    /// The list of finished leases, with its background flusher started (on the
    /// runtime of the first worker that admits a request).
    fn finished_here(&self) -> Arc<Finished> {
        let finished = &self.finished;
        if !finished.flusher.swap(true, Ordering::Relaxed) {
            tokio::spawn(flush(self.store.clone(), finished.clone()));
            tokio::spawn(renew(
                self.store.clone(),
                Arc::downgrade(finished),
                self.lease_ttl,
            ));
        }
        finished.clone()
    }
}

/// Gives back, in the background, the leases no admission carried in time (see the
/// module docs): one script call per host, sent together.
async fn flush(store: Arc<Store>, finished: Arc<Finished>) {
    loop {
        if finished.is_empty() {
            finished.wake.notified().await;
        }
        tokio::time::sleep(FLUSH_AFTER).await;
        let batch = finished.drain_due(Instant::now());
        if batch.is_empty() || !store.is_up() {
            // Down: the leases expire by themselves after lease_ttl.
            continue;
        }
        let first_delay = finished.first_delay_ms.load(Ordering::Relaxed);
        let mut calls = tokio::task::JoinSet::new();
        for (host, done) in batch {
            let store = store.clone();
            calls.spawn(async move {
                let _ = store
                    .call(|mut conn| async move {
                        let mut call = scripts::RELEASE.prepare_invoke();
                        call.key(scripts::pace_key(&host))
                            .key(scripts::leases_key(&host))
                            .arg(done.successes)
                            .arg(first_delay);
                        for id in &done.ids {
                            call.arg(id);
                        }
                        call.invoke_async::<i64>(&mut conn)
                            .await
                            .map_err(StoreError::from)
                    })
                    .await;
            });
        }
        while calls.join_next().await.is_some() {}
    }
}

/// Extends, every third of `lease_ttl`, the leases of requests that have run longer
/// than that: a long transfer keeps its slot as long as its process lives, and a dead
/// process's leases still expire within `lease_ttl`.
async fn renew(store: Arc<Store>, finished: std::sync::Weak<Finished>, lease_ttl: Duration) {
    let every = (lease_ttl / 3).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(every).await;
        let Some(finished) = finished.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut by_host: HashMap<Arc<str>, Vec<String>> = HashMap::new();
        for (id, (host, taken)) in finished
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            if now.duration_since(*taken) >= every {
                by_host.entry(host.clone()).or_default().push(id.clone());
            }
        }
        if by_host.is_empty() || !store.is_up() {
            continue;
        }
        let ttl = ms(lease_ttl);
        let mut calls = tokio::task::JoinSet::new();
        for (host, ids) in by_host {
            let store = store.clone();
            calls.spawn(async move {
                let _ = store
                    .call(|mut conn| async move {
                        let mut call = scripts::RENEW.prepare_invoke();
                        call.key(scripts::leases_key(&host)).arg(ttl);
                        for id in &ids {
                            call.arg(id);
                        }
                        call.invoke_async::<i64>(&mut conn)
                            .await
                            .map_err(StoreError::from)
                    })
                    .await;
            });
        }
        while calls.join_next().await.is_some() {}
    }
}

/// The arguments of one [`scripts::ADMIT`] call.
struct AdmitArgs<'a> {
    host: &'a str,
    delay: Duration,
    max_per_host: usize,
    lease_ttl: Duration,
    max_wait: Duration,
    id: &'a str,
    successes: u32,
    backoff: &'a BackoffSettings,
    idle: Duration,
    returned: Vec<String>,
}

impl AdmitArgs<'_> {
    async fn invoke(
        self,
        mut conn: super::store::StoreConn,
    ) -> Result<(String, u64, String, u64), StoreError> {
        let mut call = scripts::ADMIT.prepare_invoke();
        call.key(scripts::pace_key(self.host))
            .key(scripts::leases_key(self.host))
            .key(scripts::waiting_key(self.host))
            .key(scripts::seen_key(self.host))
            .arg(ms(self.delay))
            .arg(self.max_per_host)
            .arg(ms(self.lease_ttl))
            .arg(ms(self.max_wait))
            .arg(self.id)
            .arg(self.successes)
            .arg(ms(self.backoff.first_delay))
            .arg(ms(self.backoff.max_backoff))
            .arg(ms(self.idle));
        for id in &self.returned {
            call.arg(id);
        }
        Ok(call.invoke_async(&mut conn).await?)
    }
}

/// Reports the site's back-off to the store, in the background, so every process of
/// the fleet slows down.
pub struct SharedBackoff {
    store: Arc<Store>,
}

impl SharedBackoff {
    /// Reports to `store`.
    pub fn new(store: Arc<Store>) -> SharedBackoff {
        SharedBackoff { store }
    }

    fn send(
        &self,
        host: &str,
        kind: &'static str,
        wait: Duration,
        cause: BackoffCause,
        s: &BackoffSettings,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let host = host.to_owned();
        let (cap, first) = (ms(s.max_backoff), ms(s.first_delay));
        runtime.spawn(async move {
            let sent = store
                .call(|mut conn| async move {
                    scripts::BACKOFF
                        .key(scripts::pace_key(&host))
                        .arg(kind)
                        .arg(ms(wait))
                        .arg(cap)
                        .arg(first)
                        .arg(cause.word())
                        .arg(ms(IDLE_KEEP))
                        .invoke_async::<i64>(&mut conn)
                        .await
                        .map_err(StoreError::from)
                })
                .await;
            if let Err(error) = sent {
                tracing::debug!(%error, "the site's back-off could not be shared");
            }
        });
    }
}

impl BackoffSink for SharedBackoff {
    fn pause(&self, host: &str, wait: Duration, cause: BackoffCause, settings: &BackoffSettings) {
        self.send(host, "pause", wait, cause, settings);
    }

    fn failed(&self, host: &str, cause: BackoffCause, settings: &BackoffSettings) {
        self.send(host, "fail", Duration::ZERO, cause, settings);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(id: &str, urgent: bool) -> Done {
        Done {
            ids: vec![id.to_owned()],
            successes: 1,
            urgent,
            since: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn urgent_leases_are_due_at_once_and_spare_ones_after_the_lazy_wait() {
        let finished = Finished::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a.example"), Arc::from("b.example"));
        finished.put(&a, done("1", true));
        finished.put(&b, done("2", false));
        finished.put(&b, done("3", false));
        let due = finished.drain_due(Instant::now());
        assert_eq!(due.len(), 1);
        assert_eq!(&*due[0].0, "a.example");
        assert!(!finished.is_empty(), "b waits for an admission to carry it");

        tokio::time::advance(LAZY_FLUSH).await;
        let due = finished.drain_due(Instant::now());
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].1.ids, ["2", "3"]);
        assert_eq!(due[0].1.successes, 2);
        assert!(finished.is_empty());
    }

    #[test]
    fn an_admission_takes_what_finished_at_its_host_only() {
        let finished = Finished::default();
        let a: Arc<str> = Arc::from("a.example");
        finished.put(&a, done("1", false));
        assert!(finished.take("b.example").ids.is_empty());
        assert_eq!(finished.take("a.example").ids, ["1"]);
        assert!(finished.is_empty());
        // Nothing to give back is not kept.
        finished.put(&a, Done::default());
        assert!(finished.is_empty());
    }
}
