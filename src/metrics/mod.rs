//! Counters for `/metrics` (Prometheus) and the recent activity the admin
//! status page shows.
//!
//! Two kinds of numbers live here:
//!
//! - **Counted by the pipeline**: requests by outcome and status, upstream
//!   latency, pacing waits and `429`s, open connections. The pipeline's one
//!   `finish` calls [`Metrics::record`] with the [`Finished`] record it also
//!   logs (so nothing here parses an answer to learn what happened),
//!   [`Metrics::pacing_wait`] after a pacing slot was granted, and
//!   [`Metrics::connection_opened`] when a connection starts.
//! - **Read at scrape time** from the parts that already count for
//!   themselves: the robots.txt cache ([`RobotsCache::stats`]), the pacer
//!   ([`Pacer::tracked_hosts`]), the upstream pools
//!   ([`UpstreamPools::held`]) and the leaf minter
//!   ([`LeafMinter::minted_count`]). A [`Collector`] copies them into the
//!   exposition, so there is one source of truth and nothing to keep in sync.
//!
//! Every label has a bounded set of values: outcomes are the [`Reason`]
//! words, status codes are folded into their class when not
//! registered, connection kinds are an enum. Hosts and URLs never become
//! labels (one series per visited host would grow without end); they go to
//! the status page's bounded per-host map and denial ring instead.

pub mod timeline;

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use http::StatusCode;
use lru::LruCache;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::fetch::RobotsCache;
use crate::outcome::{Class, Finished, Reason};
use crate::policy::Pacer;
use crate::tls::LeafMinter;
use crate::upstream::UpstreamPools;
use timeline::{MinuteCounts, Series, Timeline};

/// Hosts remembered for the status page; the least recently active is
/// forgotten first, so memory stays bounded however many hosts are visited.
pub const HOST_CAPACITY: usize = 1000;

/// Denials kept for the status page, newest first.
pub const DENIAL_CAPACITY: usize = 50;

/// Longest URL or agent kept in a denial (bytes); longer ones are cut so
/// the ring stays small whatever clients send.
const MAX_FIELD_LEN: usize = 512;

/// Upstream time to the response head: a few milliseconds (loopback, pooled)
/// to a minute (a slow origin near `upstream_timeout`).
const LATENCY_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Time waiting for a pacing slot: zero for an idle host, up to `max_wait`
/// (30 s by default) for a busy one with a long `Crawl-delay`.
const PACING_BUCKETS: [f64; 12] = [
    0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

/// What the scrape-time collector reads: the parts of the proxy that count
/// for themselves.
#[derive(Clone)]
pub struct ScrapeSources {
    /// The robots.txt cache (hits, misses, fetches, evictions, entries).
    pub robots: RobotsCache,
    /// The pacer (hosts with pacing state).
    pub pacer: Pacer,
    /// The upstream pools (connections held for reuse).
    pub upstream: UpstreamPools,
    /// The leaf minter in force, in intercept mode (certificates minted and
    /// cached); shared with the services, which swap it when a reload names
    /// another CA or mode.
    pub minter: Arc<ArcSwapOption<LeafMinter>>,
    /// The fleet's store, in fleet mode (its health and round trips).
    pub fleet: Option<Arc<crate::fleet::Store>>,
}

/// The kind of connection counted by [`Metrics::connection_opened`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionKind {
    /// A client connection to the proxy listener, while it speaks HTTP.
    Client,
    /// A CONNECT whose TLS the proxy terminates, after the `200`.
    Intercepted,
    /// A blind CONNECT tunnel (tunnel mode).
    Tunnel,
}

impl ConnectionKind {
    fn as_str(self) -> &'static str {
        match self {
            ConnectionKind::Client => "client",
            ConnectionKind::Intercepted => "intercepted",
            ConnectionKind::Tunnel => "tunnel",
        }
    }
}

impl EncodeLabelValue for ConnectionKind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RejectedLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ConnectionLabels {
    kind: ConnectionKind,
}

/// A status code as a label value: the code when it is registered (at most
/// a few dozen values), else its class (`2xx`), because an origin may answer
/// any number from 100 to 999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StatusLabel(u16);

impl StatusLabel {
    fn new(status: u16) -> Self {
        let registered = StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .is_some();
        // Unregistered codes keep only their class digit; 0 marks the class.
        StatusLabel(if registered { status } else { status / 100 })
    }
}

impl EncodeLabelValue for StatusLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        if self.0 < 10 {
            write!(encoder, "{}xx", self.0)
        } else {
            write!(encoder, "{}", self.0)
        }
    }
}

/// A profile's name as a label value: one of the profiles in the file (or
/// `default`), so the values are as few as the profiles.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProfileLabel(Arc<str>);

impl EncodeLabelValue for ProfileLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        encoder.write_str(&self.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    outcome: &'static str,
    status: StatusLabel,
    profile: ProfileLabel,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProfileLabels {
    profile: ProfileLabel,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WouldRefuseLabels {
    reason: &'static str,
    profile: ProfileLabel,
}

/// Requests of each class, for a host or a profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// Requests forwarded to the host.
    pub allowed: u64,
    /// Requests refused by policy (robots.txt, identity, ...).
    pub denied: u64,
    /// Requests answered `429` by the pacer.
    pub throttled: u64,
    /// Requests whose upstream failed (timeout, error, certificate).
    pub failed: u64,
    /// Requests a report-only profile let through that would have been
    /// refused.
    pub would_refuse: u64,
}

impl ClassCounts {
    fn add(&mut self, class: Class, would_refuse: bool) {
        match class {
            Class::Allowed => self.allowed += 1,
            Class::Denied => self.denied += 1,
            Class::Throttled => self.throttled += 1,
            Class::Failed => self.failed += 1,
            Class::Session => {}
        }
        self.would_refuse += u64::from(would_refuse);
    }
}

/// One host's recent activity, for the status page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostActivity {
    /// Requests of every profile.
    pub counts: ClassCounts,
    /// Requests per profile (as many entries as profiles sent any).
    pub by_profile: Vec<(Arc<str>, ClassCounts)>,
    /// How the latest request ended.
    pub last_outcome: Reason,
    /// The status of the latest request.
    pub last_status: u16,
    /// When the latest request finished.
    pub last_seen: SystemTime,
}

/// A request the proxy refused, for the status page's recent denials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// When it was answered.
    pub at: SystemTime,
    /// The client's address.
    pub client: SocketAddr,
    /// The request method.
    pub method: String,
    /// The request target as sent (cut to a bounded length).
    pub url: String,
    /// The agent matched against robots.txt (empty when not known yet).
    pub agent: String,
    /// Why it was refused.
    pub reason: Reason,
    /// The status sent to the client.
    pub status: u16,
    /// The deciding robots.txt rule (`disallow: /private`), if any.
    pub rule: Option<String>,
    /// The rule's line in robots.txt, if any.
    pub line: Option<u32>,
    /// The profile the request ran under.
    pub profile: Arc<str>,
    /// A report-only profile let it through: `reason` is what would have
    /// refused it.
    pub waived: bool,
}

/// The proxy's metrics and recent activity. Lives in `ProxyState`; every
/// method takes `&self` and is cheap enough for the request path (a few
/// atomic adds and one short lock).
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    upstream_latency: Histogram,
    pacing_wait: Histogram,
    pacing_rejected: Counter,
    would_refuse: Family<WouldRefuseLabels, Counter>,
    usage_refused: Family<ProfileLabels, Counter>,
    open_connections: Family<ConnectionLabels, Gauge>,
    connections: Family<ConnectionLabels, Counter>,
    proxy_protocol_rejected: Family<RejectedLabels, Counter>,
    activity: Mutex<Activity>,
    started: Instant,
    sources: ScrapeSources,
}

struct Activity {
    hosts: LruCache<String, HostActivity>,
    denials: VecDeque<Denial>,
    /// Since start, per profile (as many as the profiles that sent any).
    totals: Vec<(Arc<str>, ClassCounts)>,
    timeline: Timeline,
}

/// `profile`'s counts in `list`, added if missing.
fn counts_of<'a>(
    list: &'a mut Vec<(Arc<str>, ClassCounts)>,
    profile: &Arc<str>,
) -> &'a mut ClassCounts {
    let at = match list.iter().position(|(name, _)| **name == **profile) {
        Some(at) => at,
        None => {
            list.push((profile.clone(), ClassCounts::default()));
            list.len() - 1
        }
    };
    &mut list[at].1
}

/// The sum of `list`, or its entry for `profile`.
fn counts_for(list: &[(Arc<str>, ClassCounts)], profile: Option<&str>) -> ClassCounts {
    let mut sum = ClassCounts::default();
    for (name, counts) in list {
        if profile.is_some_and(|p| p != &**name) {
            continue;
        }
        sum.allowed += counts.allowed;
        sum.denied += counts.denied;
        sum.throttled += counts.throttled;
        sum.failed += counts.failed;
        sum.would_refuse += counts.would_refuse;
    }
    sum
}

impl Metrics {
    /// Builds the registry; `sources` are read on each scrape.
    pub fn new(sources: ScrapeSources) -> Metrics {
        let mut registry = Registry::with_prefix("robots_guard");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by pipeline verdict and status sent to the client",
            requests.clone(),
        );
        let upstream_latency = Histogram::new(LATENCY_BUCKETS);
        registry.register_with_unit(
            "upstream_latency",
            "Time from forwarding a request to the origin's response head (or failure)",
            Unit::Seconds,
            upstream_latency.clone(),
        );
        let pacing_wait = Histogram::new(PACING_BUCKETS);
        registry.register_with_unit(
            "pacing_wait",
            "Time requests waited for their host's pacing slot",
            Unit::Seconds,
            pacing_wait.clone(),
        );
        let pacing_rejected = Counter::default();
        registry.register(
            "pacing_rejected",
            "Requests answered 429 because the pacing wait would exceed max_wait",
            pacing_rejected.clone(),
        );
        let would_refuse = Family::<WouldRefuseLabels, Counter>::default();
        registry.register(
            "would_refuse",
            "Requests a report-only profile (enforce = false) forwarded that would have been \
             refused, by the reason they would have been refused for",
            would_refuse.clone(),
        );
        let usage_refused = Family::<ProfileLabels, Counter>::default();
        registry.register(
            "usage_refused_answers",
            "Answers passed to the client although their Content-Usage header refuses a purpose \
             the request declared (marked X-Robots-Guard-Usage)",
            usage_refused.clone(),
        );
        let open_connections = Family::<ConnectionLabels, Gauge>::default();
        registry.register(
            "open_connections",
            "Connections open now: client (HTTP to the listener), intercepted (decrypted \
             CONNECT), tunnel (blind CONNECT)",
            open_connections.clone(),
        );
        let connections = Family::<ConnectionLabels, Counter>::default();
        registry.register(
            "connections",
            "Connections opened since start, by kind",
            connections.clone(),
        );
        // Show every kind from the start, so dashboards see 0 rather than
        // a missing series.
        for kind in [
            ConnectionKind::Client,
            ConnectionKind::Intercepted,
            ConnectionKind::Tunnel,
        ] {
            let labels = ConnectionLabels { kind };
            let _ = open_connections.get_or_create_owned(&labels);
            let _ = connections.get_or_create_owned(&labels);
        }
        let proxy_protocol_rejected = Family::<RejectedLabels, Counter>::default();
        registry.register(
            "proxy_protocol_rejected",
            "Connections closed because they did not start with a valid PROXY protocol \
             header (proxy.proxy_protocol), by reason: missing, malformed, truncated, timeout",
            proxy_protocol_rejected.clone(),
        );
        registry.register_collector(Box::new(SourceCollector(sources.clone())));
        Metrics {
            registry,
            requests,
            upstream_latency,
            pacing_wait,
            pacing_rejected,
            would_refuse,
            usage_refused,
            open_connections,
            connections,
            proxy_protocol_rejected,
            activity: Mutex::new(Activity {
                hosts: LruCache::new(NonZeroUsize::new(HOST_CAPACITY).unwrap_or(NonZeroUsize::MIN)),
                denials: VecDeque::with_capacity(DENIAL_CAPACITY),
                totals: Vec::new(),
                timeline: Timeline::default(),
            }),
            started: Instant::now(),
            sources,
        }
    }

    /// Counts one finished request: called with the record its log line is
    /// written from.
    pub fn record(&self, r: &Finished<'_>) {
        let profile = ProfileLabel(r.profile.clone());
        self.requests
            .get_or_create(&RequestLabels {
                outcome: r.reason.word(),
                status: StatusLabel::new(r.status),
                profile,
            })
            .inc();
        for reason in r.would_refuse {
            self.would_refuse
                .get_or_create(&WouldRefuseLabels {
                    reason: reason.word(),
                    profile: ProfileLabel(r.profile.clone()),
                })
                .inc();
        }
        if r.usage_refused.is_some() {
            self.usage_refused
                .get_or_create(&ProfileLabels {
                    profile: ProfileLabel(r.profile.clone()),
                })
                .inc();
        }
        if let Some(latency) = r.upstream {
            self.upstream_latency.observe(latency.as_secs_f64());
        }
        if r.reason == Reason::Pacing {
            self.pacing_rejected.inc();
        }
        let class = r.reason.class();
        if class == Class::Session {
            // The CONNECT of an intercepted session is not a request: the
            // requests read inside it are counted one by one.
            return;
        }
        let waived = !r.would_refuse.is_empty();
        let now = SystemTime::now();
        let denial = (class != Class::Allowed || waived).then(|| Denial {
            at: now,
            client: r.client,
            method: cut(r.method),
            url: cut(&r.url.to_string()),
            agent: cut(r.agent),
            reason: if class == Class::Allowed {
                r.would_refuse[0]
            } else {
                r.reason
            },
            status: r.status,
            rule: r.rule.and_then(|rule| {
                rule.pattern
                    .map(|pattern| cut(&format!("{}: {pattern}", rule.kind)))
            }),
            line: r.rule.map(|rule| rule.line),
            profile: r.profile.clone(),
            waived,
        });
        let minute = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 60);
        let mut activity = self.lock();
        counts_of(&mut activity.totals, r.profile).add(class, waived);
        // Each request once: a request a report-only profile let through
        // counts as what it would have been refused for.
        let series = match r.would_refuse.first() {
            Some(waived) => Series::WouldRefuse(*waived),
            None => Series::Outcome(r.reason),
        };
        activity.timeline.count(minute, r.profile, series);
        if let Some(host) = r.host {
            let entry = activity.hosts.get_or_insert_mut_ref(host, || HostActivity {
                counts: ClassCounts::default(),
                by_profile: Vec::new(),
                last_outcome: r.reason,
                last_status: r.status,
                last_seen: now,
            });
            entry.counts.add(class, waived);
            counts_of(&mut entry.by_profile, r.profile).add(class, waived);
            entry.last_outcome = r.reason;
            entry.last_status = r.status;
            entry.last_seen = now;
        }
        if let Some(denial) = denial {
            if activity.denials.len() == DENIAL_CAPACITY {
                activity.denials.pop_back();
            }
            activity.denials.push_front(denial);
        }
    }

    /// Counts the time a request waited for its pacing slot.
    pub fn pacing_wait(&self, waited: Duration) {
        self.pacing_wait.observe(waited.as_secs_f64());
    }

    /// Counts a connection closed for want of a valid PROXY protocol header;
    /// `reason` is one of a few fixed words.
    pub fn proxy_protocol_rejected(&self, reason: &'static str) {
        self.proxy_protocol_rejected
            .get_or_create(&RejectedLabels { reason })
            .inc();
    }

    /// Counts a connection as open until the returned guard is dropped.
    #[must_use = "the connection counts as open only while the guard lives"]
    pub fn connection_opened(&self, kind: ConnectionKind) -> OpenConnection {
        let labels = ConnectionLabels { kind };
        self.connections.get_or_create(&labels).inc();
        let gauge = self.open_connections.get_or_create_owned(&labels);
        gauge.inc();
        OpenConnection { gauge }
    }

    /// The Prometheus exposition: OpenMetrics text, which Prometheus also
    /// reads as its classic text format (`# EOF` is a comment there).
    ///
    /// # Errors
    ///
    /// Only if a collector fails to format (it never does for a `String`).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// Up to `limit` hosts, most recently active first; with `profile`, only
    /// the hosts it sent requests to, with its counts.
    pub fn hosts(&self, limit: usize, profile: Option<&str>) -> Vec<(String, HostActivity)> {
        let activity = self.lock();
        let mut hosts = Vec::new();
        for (host, seen) in activity.hosts.iter() {
            if hosts.len() == limit {
                break;
            }
            let mut seen = seen.clone();
            if let Some(profile) = profile {
                match seen.by_profile.iter().find(|(name, _)| &**name == profile) {
                    Some((_, counts)) => seen.counts = *counts,
                    None => continue,
                }
            }
            hosts.push((host.clone(), seen));
        }
        hosts
    }

    /// The recent refusals (and would-refuse), newest first; with
    /// `profile`, only its.
    pub fn denials(&self, profile: Option<&str>) -> Vec<Denial> {
        self.lock()
            .denials
            .iter()
            .filter(|d| profile.is_none_or(|p| p == &*d.profile))
            .cloned()
            .collect()
    }

    /// Requests per class since start, of every profile or of `profile`.
    pub fn totals(&self, profile: Option<&str>) -> ClassCounts {
        counts_for(&self.lock().totals, profile)
    }

    /// Requests per minute over the last hour, by outcome, of every profile
    /// or of `profile`; oldest minute first.
    pub fn last_hour(&self, profile: Option<&str>) -> Vec<MinuteCounts> {
        let minute = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 60);
        self.lock().timeline.last_hour(minute, profile)
    }

    /// The profiles that have sent requests since start.
    pub fn profiles_seen(&self) -> Vec<Arc<str>> {
        self.lock()
            .totals
            .iter()
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Connections open now, all kinds together.
    pub fn open_connections(&self) -> i64 {
        [
            ConnectionKind::Client,
            ConnectionKind::Intercepted,
            ConnectionKind::Tunnel,
        ]
        .into_iter()
        .map(|kind| {
            self.open_connections
                .get_or_create(&ConnectionLabels { kind })
                .get()
        })
        .sum()
    }

    /// How long since the metrics (and so the proxy) started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The sources read at scrape time, for the status page.
    pub fn sources(&self) -> &ScrapeSources {
        &self.sources
    }

    fn lock(&self) -> MutexGuard<'_, Activity> {
        // Every critical section leaves the map and ring consistent (single
        // inserts and pops), so a panic elsewhere cannot leave them broken.
        self.activity.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Keeps one connection counted in `open_connections` while it lives.
#[derive(Debug)]
pub struct OpenConnection {
    gauge: Gauge,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// `s`, cut to [`MAX_FIELD_LEN`] bytes at a character boundary.
fn cut(s: &str) -> String {
    if s.len() <= MAX_FIELD_LEN {
        return s.to_owned();
    }
    let mut end = MAX_FIELD_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Reads the cache, pacer and minter counters at scrape time.
struct SourceCollector(ScrapeSources);

impl fmt::Debug for SourceCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceCollector").finish_non_exhaustive()
    }
}

impl Collector for SourceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let stats = self.0.robots.stats();
        counter(
            &mut encoder,
            "robots_cache_hits",
            "robots.txt lookups answered by a fresh cached entry",
            stats.hits,
        )?;
        counter(
            &mut encoder,
            "robots_cache_misses",
            "robots.txt lookups that started or joined a fetch",
            stats.misses,
        )?;
        counter(
            &mut encoder,
            "robots_cache_evictions",
            "robots.txt entries pushed out of the cache by newer origins",
            stats.evictions,
        )?;
        gauge(
            &mut encoder,
            "robots_cache_entries",
            "Origins in the robots.txt cache now",
            stats.entries,
        )?;
        gauge(
            &mut encoder,
            "robots_fetches_in_flight",
            "robots.txt fetches running now",
            stats.in_flight,
        )?;
        let mut family = encoder.encode_descriptor(
            "robots_fetches",
            "robots.txt fetches by outcome: ok (2xx, parsed), not_modified (304), \
             unavailable (4xx: no restrictions), unreachable (429, 5xx, network: disallow all), \
             certificate (upstream TLS verification failed)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, value) in [
            ("ok", stats.fetches_ok),
            ("not_modified", stats.fetches_not_modified),
            ("unavailable", stats.fetches_unavailable),
            ("unreachable", stats.fetches_unreachable),
            ("certificate", stats.fetches_certificate),
        ] {
            let labels = [("outcome", outcome)];
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
        gauge(
            &mut encoder,
            "paced_hosts",
            "Hosts with pacing state now (idle ones are dropped)",
            self.0.pacer.tracked_hosts(),
        )?;
        let mut family = encoder.encode_descriptor(
            "site_backoffs",
            "Times a site paused (429/503 with Retry-After) or slowed (429/503 without it, \
             connect errors, resets, timeouts) its host, by cause",
            None,
            MetricType::Counter,
        )?;
        for (cause, value) in self.0.pacer.backoff_counts() {
            let labels = [("cause", cause.word())];
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
        gauge(
            &mut encoder,
            "upstream_idle_connections",
            "Upstream connections held for reuse now, idle HTTP/1.1 and shared HTTP/2, in all \
             workers (at most proxy.max_idle_upstream)",
            self.0.upstream.held(),
        )?;
        let (minted, cached) = self
            .0
            .minter
            .load()
            .as_ref()
            .map_or((0, 0), |m| (m.minted_count(), m.cached_count()));
        if let Some(store) = &self.0.fleet {
            let stats = store.stats();
            gauge(
                &mut encoder,
                "fleet_store_up",
                "1 while the fleet's shared store answers, 0 while requests fall back",
                usize::from(stats.up),
            )?;
            counter(
                &mut encoder,
                "fleet_store_round_trips",
                "Calls sent to the fleet's store (scripts and pings), one round trip each",
                stats.round_trips,
            )?;
            counter(
                &mut encoder,
                "fleet_store_errors",
                "Fleet store calls that failed or timed out",
                stats.errors,
            )?;
            counter(
                &mut encoder,
                "fleet_store_fallbacks",
                "Requests paced or robots.txt lookups served by this process alone because \
                 the fleet's store could not be used",
                stats.fallbacks,
            )?;
        }
        counter(
            &mut encoder,
            "tls_leaf_certificates_minted",
            "Leaf certificates minted for intercepted hosts since start",
            minted,
        )?;
        gauge(
            &mut encoder,
            "tls_leaf_certificates_cached",
            "Leaf certificates in the cache now",
            cached,
        )
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: usize,
) -> Result<(), fmt::Error> {
    let metric = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_label_keeps_registered_codes_and_folds_the_rest() {
        let text = |status| {
            let mut registry = Registry::default();
            let family = Family::<RequestLabels, Counter>::default();
            registry.register("r", "h", family.clone());
            family
                .get_or_create(&RequestLabels {
                    outcome: "allowed",
                    status: StatusLabel::new(status),
                    profile: ProfileLabel(Arc::from("default")),
                })
                .inc();
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
            out
        };
        assert!(text(404).contains(r#"status="404""#));
        assert!(text(299).contains(r#"status="2xx""#));
        assert!(text(999).contains(r#"status="9xx""#));
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        let long = "é".repeat(MAX_FIELD_LEN);
        let out = cut(&long);
        assert!(out.len() <= MAX_FIELD_LEN + '…'.len_utf8());
        assert!(out.ends_with('…'));
        assert_eq!(cut("short"), "short");
    }

    fn metrics() -> Metrics {
        let config = crate::config::Config::default();
        let client = crate::upstream::build_client(&crate::upstream::UpstreamSettings {
            connect_timeout: Duration::from_secs(1),
            pool_idle_timeout: Duration::from_secs(1),
            extra_roots: Vec::new(),
            max_idle: std::num::NonZeroUsize::new(1024).expect("non-zero"),
        })
        .expect("client");
        let pacer = Pacer::new(crate::policy::PacingSettings {
            default_delay: Duration::ZERO,
            max_per_host: NonZeroUsize::MIN,
            max_wait: Duration::ZERO,
            idle_host_ttl: Duration::from_secs(1),
            max_hosts: 1,
            backoff: Default::default(),
        });
        let settings = crate::fetch::FetchSettings::from_config(&config).expect("settings");
        let robots = RobotsCache::new(crate::fetch::RobotsFetcher::new(
            client.clone(),
            pacer.clone(),
            settings,
        ));
        Metrics::new(ScrapeSources {
            robots,
            pacer,
            upstream: client,
            minter: Arc::new(ArcSwapOption::empty()),
            fleet: None,
        })
    }

    fn record(m: &Metrics, url: &str, host: &str, reason: Reason, status: u16) {
        record_as(m, url, host, reason, status, "default", &[]);
    }

    fn record_as(
        m: &Metrics,
        url: &str,
        host: &str,
        reason: Reason,
        status: u16,
        profile: &str,
        would_refuse: &[Reason],
    ) {
        m.record(&Finished {
            profile: &Arc::from(profile),
            would_refuse,
            robots: None,
            purposes: crate::robots::Purposes::NONE,
            usage_refused: None,
            client: "127.0.0.1:5000".parse().expect("addr"),
            host: Some(host),
            user: None,
            method: "GET",
            url: &url.parse().expect("url"),
            agent: "TestBot",
            reason,
            rule: None,
            status,
            upstream: None,
            duration: std::time::Duration::ZERO,
        });
    }

    #[tokio::test]
    async fn denials_keep_the_newest_and_hosts_count_by_class() {
        let m = metrics();
        for i in 0..DENIAL_CAPACITY + 5 {
            record(
                &m,
                &format!("http://a.example/private/{i}"),
                "a.example",
                Reason::RobotsDisallow,
                403,
            );
        }
        record(&m, "http://b.example/", "b.example", Reason::Allowed, 200);
        record(&m, "http://b.example/", "b.example", Reason::Pacing, 429);
        record(&m, "b.example:443", "b.example", Reason::Intercept, 200);
        let denials = m.denials(None);
        assert_eq!(denials.len(), DENIAL_CAPACITY);
        assert_eq!(denials[0].url, "http://b.example/");
        assert_eq!(denials[0].reason, Reason::Pacing);
        assert_eq!(
            denials[DENIAL_CAPACITY - 1].url,
            "http://a.example/private/6"
        );
        let hosts = m.hosts(10, None);
        assert_eq!(hosts[0].0, "b.example");
        assert_eq!(
            (hosts[0].1.counts.allowed, hosts[0].1.counts.throttled),
            (1, 1)
        );
        assert_eq!(hosts[1].1.counts.denied, DENIAL_CAPACITY as u64 + 5);
        let totals = m.totals(None);
        assert_eq!((totals.allowed, totals.throttled), (1, 1));
        let text = m.encode().expect("encode");
        assert!(
            text.contains("robots_guard_pacing_rejected_total 1"),
            "{text}"
        );
        assert!(text.contains(
            r#"robots_guard_requests_total{outcome="intercept",status="200",profile="default"} 1"#
        ));
        assert!(text
            .contains(r#"robots_guard_requests_total{outcome="robots-disallow",status="403",profile="default"} 55"#));
    }

    #[tokio::test]
    async fn profiles_are_counted_apart_and_would_refuse_by_reason() {
        let m = metrics();
        let url = "http://a.example/x";
        record_as(&m, url, "a.example", Reason::Allowed, 200, "team-a", &[]);
        record_as(
            &m,
            url,
            "a.example",
            Reason::Allowed,
            200,
            "team-b",
            &[Reason::Identity, Reason::RobotsDisallow],
        );
        record_as(
            &m,
            url,
            "b.example",
            Reason::RobotsDisallow,
            403,
            "team-a",
            &[],
        );
        let a = m.totals(Some("team-a"));
        assert_eq!((a.allowed, a.denied, a.would_refuse), (1, 1, 0));
        let b = m.totals(Some("team-b"));
        assert_eq!((b.allowed, b.would_refuse), (1, 1));
        assert_eq!(m.totals(None).allowed, 2);
        // Team b's view: only the host it used, with its counts.
        let hosts = m.hosts(10, Some("team-b"));
        assert_eq!(hosts.len(), 1);
        assert_eq!(hosts[0].0, "a.example");
        assert_eq!(
            (hosts[0].1.counts.allowed, hosts[0].1.counts.would_refuse),
            (1, 1)
        );
        // The waived request is among the refusals, marked, under its first reason.
        let denials = m.denials(Some("team-b"));
        assert_eq!(denials.len(), 1);
        assert!(denials[0].waived);
        assert_eq!(denials[0].reason, Reason::Identity);
        // The chart counts it once, as would-refuse.
        let hour = m.last_hour(Some("team-b"));
        let now = &hour[hour.len() - 1].counts;
        assert_eq!(
            now,
            &vec![(timeline::Series::WouldRefuse(Reason::Identity), 1)]
        );
        let text = m.encode().expect("encode");
        for line in [
            r#"robots_guard_would_refuse_total{reason="identity",profile="team-b"} 1"#,
            r#"robots_guard_would_refuse_total{reason="robots-disallow",profile="team-b"} 1"#,
            r#"robots_guard_requests_total{outcome="allowed",status="200",profile="team-a"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
