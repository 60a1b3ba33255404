//! Everything the pipeline shares across requests, built from the
//! configuration: once at start, and again on each reload (SIGHUP), when the
//! parts that carry state (robots.txt cache, pacer, upstream pools, leaf
//! certificates) are carried over instead of rebuilt.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request};
use ipnet::IpNet;

use crate::config::{Config, IdentityMode as ConfigIdentityMode, TlsMode};
use crate::fetch::{FetchError, FetchSettings, RobotsCache, RobotsFetcher};
use crate::metrics::{Metrics, ScrapeSources};
use crate::policy::auth::{AuthConfigError, ProxyAuth};
use crate::policy::destination::DestinationPolicy;
use crate::policy::{IdentityMode, IdentityPolicy, Pacer, PacingSettings};
use crate::robots::product_token;
use crate::tls::{CertificateAuthority, LeafMinter, TlsError};
use crate::upstream::{UpstreamError, UpstreamPools, UpstreamSettings};

/// Shared state of one running proxy.
pub struct ProxyState {
    /// The address the proxy listens on (for loop detection and messages).
    pub listen: SocketAddr,
    /// This instance's `Via` entries, built from its pseudonym; seeing the
    /// pseudonym on an incoming request means the request looped.
    pub via: super::forward::Via,
    /// User-Agent / From checks.
    pub identity: IdentityPolicy,
    /// `identity.robot_name`: overrides the User-Agent's product token.
    pub robot_name: Option<String>,
    /// robots.txt per origin.
    pub robots: RobotsCache,
    /// Per-host pacing.
    pub pacer: Pacer,
    /// Pooled upstream clients, one per worker.
    pub client: UpstreamPools,
    /// HTTP/1.1-only clients for upgrade requests: a WebSocket handshake
    /// cannot ride an HTTP/2 connection.
    pub upgrade_client: UpstreamPools,
    /// `robots.equivalent_spellings`: the server readings judged beside the
    /// normal form.
    pub spellings: crate::robots::Spellings,
    /// `rate_limit.honor_crawl_delay`.
    pub honor_crawl_delay: bool,
    /// `rate_limit.max_crawl_delay`.
    pub max_crawl_delay: Duration,
    /// `proxy.upstream_timeout`.
    pub upstream_timeout: Duration,
    /// `proxy.max_url_length`.
    pub max_url_length: usize,
    /// `tls.mode`: intercept or tunnel CONNECTs.
    pub tls_mode: TlsMode,
    /// `tls.connect_ports`: the only ports CONNECT may reach.
    pub connect_ports: Vec<u16>,
    /// Leaf certificates for interception (intercept mode only).
    pub minter: Option<Arc<LeafMinter>>,
    /// `proxy.idle_timeout` and `proxy.header_read_timeout` (the latter also
    /// bounds a client's TLS handshake after CONNECT).
    pub timeouts: super::idle::Timeouts,
    /// The configured identity's product token, for tunnel-mode CONNECTs
    /// that name no agent.
    pub default_agent: String,
    /// Proxy authentication, when users are configured.
    pub auth: Option<ProxyAuth>,
    /// `proxy.deny_destinations`, with its DNS cache; shared with the
    /// upstream connector and kept (its list replaced) across reloads.
    pub destinations: Arc<DestinationPolicy>,
    /// `proxy.max_path_repeats`.
    pub max_path_repeats: u32,
    /// Counters for `/metrics` and the admin status page; kept across
    /// reloads so counters do not restart.
    pub metrics: Arc<Metrics>,
    /// `proxy.allow_clients`, checked when a connection is accepted.
    pub allow_clients: Vec<IpNet>,
    /// `proxy.max_header_bytes`, raised to hyper's 8 KiB minimum.
    pub max_header_bytes: usize,
    /// `proxy.drain_timeout`: how long shutdown waits for in-flight requests.
    pub drain_timeout: Duration,
    /// `tls.ca_cert` and `tls.ca_key` the minter was loaded from, so a
    /// reload knows whether it can keep it.
    ca_files: (PathBuf, PathBuf),
}

/// How long a DNS answer is trusted for destination checks. Short, so a
/// changed record is seen soon; long enough to spare a lookup per request.
const DNS_CACHE_TTL: Duration = Duration::from_secs(30);

/// How many names the destination check remembers.
const DNS_CACHE_CAPACITY: std::num::NonZeroUsize = match std::num::NonZeroUsize::new(4096) {
    Some(n) => n,
    None => std::num::NonZeroUsize::MIN,
};

/// How many leaf certificates stay cached (one per intercepted host).
const LEAF_CACHE_CAPACITY: usize = 4096;

/// Why the proxy could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The upstream client could not be built (bad extra roots).
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// A configured identity default is not a valid header value.
    #[error("identity.{key} is not a valid header value")]
    BadDefault {
        /// The config key.
        key: &'static str,
    },
    /// The robots.txt fetcher could not be set up.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The proxy users could not be loaded.
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
    /// The interception CA could not be loaded or created.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

fn mode(m: ConfigIdentityMode) -> IdentityMode {
    match m {
        ConfigIdentityMode::Require => IdentityMode::Require,
        ConfigIdentityMode::Fill => IdentityMode::Fill,
        ConfigIdentityMode::Pass => IdentityMode::Pass,
    }
}

impl ProxyState {
    /// Builds the state for a proxy listening on `listen`.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the upstream TLS roots or identity defaults are
    /// unusable.
    pub fn new(config: &Config, listen: SocketAddr) -> Result<ProxyState, StateError> {
        ProxyState::build(config, listen, None)
    }

    /// Builds the state for a reloaded `config`, carrying over this state's
    /// robots.txt cache, pacer and upstream clients (rebuilding them would
    /// refetch every robots.txt, forget every host's pacing and drop the
    /// connection pools), and its leaf minter when the CA files are the
    /// same. The keys those parts were built from therefore keep their old
    /// values until a restart: [`super::reload::restart_keys`] names them.
    ///
    /// # Errors
    ///
    /// As [`ProxyState::new`]; `self` is untouched when refused. On success
    /// the parts shared with `self` (the deny list, the minter the metrics
    /// read) already follow the new configuration.
    pub fn reconfigure(&self, config: &Config) -> Result<ProxyState, StateError> {
        ProxyState::build(config, self.listen, Some(self))
    }

    fn build(
        config: &Config,
        listen: SocketAddr,
        previous: Option<&ProxyState>,
    ) -> Result<ProxyState, StateError> {
        let (client, upgrade_client, destinations) = match previous {
            Some(p) => {
                // The running clients are kept, but a bad `extra_roots`
                // must not pass for good until the next restart.
                crate::upstream::client_tls_config(&config.tls.extra_roots)?;
                // The deny list is updated in place below, once nothing
                // can refuse the reload any more.
                (
                    p.client.clone(),
                    p.upgrade_client.clone(),
                    p.destinations.clone(),
                )
            }
            None => {
                let destinations = Arc::new(DestinationPolicy::new(
                    config.proxy.deny_destinations.clone(),
                    DNS_CACHE_TTL,
                    DNS_CACHE_CAPACITY,
                ));
                let settings = UpstreamSettings {
                    connect_timeout: config.proxy.upstream_connect_timeout,
                    pool_idle_timeout: Duration::from_secs(90),
                    extra_roots: config.tls.extra_roots.clone(),
                    upgrades: false,
                };
                let workers = crate::worker::count(config.proxy.workers);
                let client = UpstreamPools::build(&settings, destinations.clone(), workers)?;
                let upgrade_client = UpstreamPools::build(
                    &UpstreamSettings {
                        upgrades: true,
                        ..settings
                    },
                    destinations.clone(),
                    workers,
                )?;
                (client, upgrade_client, destinations)
            }
        };
        let auth = ProxyAuth::new(
            &config.auth.users,
            config.auth.htpasswd.as_deref(),
            &config.auth.realm,
        )?;
        let identity = IdentityPolicy {
            user_agent: mode(config.identity.user_agent),
            from: mode(config.identity.from),
            default_user_agent: HeaderValue::from_str(&config.identity.default_user_agent)
                .map_err(|_| StateError::BadDefault {
                    key: "default_user_agent",
                })?,
            default_from: HeaderValue::from_str(&config.identity.default_from).map_err(|_| {
                StateError::BadDefault {
                    key: "default_from",
                }
            })?,
        };
        let rate = &config.rate_limit;
        // Checked on reload too, though the fetcher keeps its old settings:
        // a bad value must not pass for good until the next restart.
        let fetch_settings = Arc::new(FetchSettings::from_config(config)?);
        let (pacer, robots) = match previous {
            Some(p) => (p.pacer.clone(), p.robots.clone()),
            None => {
                let pacer = Pacer::new(PacingSettings {
                    default_delay: rate.default_delay,
                    max_per_host: std::num::NonZeroUsize::new(rate.max_per_host.get() as usize)
                        .unwrap_or(std::num::NonZeroUsize::MIN),
                    max_wait: rate.max_wait,
                    idle_host_ttl: rate.idle_host_ttl,
                    max_hosts: rate.max_hosts.get(),
                });
                let robots = RobotsCache::new(RobotsFetcher::new(
                    client.clone(),
                    pacer.clone(),
                    fetch_settings,
                ));
                (pacer, robots)
            }
        };
        let minter = match config.tls.mode {
            TlsMode::Intercept => match previous.and_then(|p| p.minter.as_ref()) {
                // Same CA files: keep the minter and its cached leaves.
                Some(minter) if previous.is_some_and(|p| p.ca_files == ca_files(config)) => {
                    Some(minter.clone())
                }
                _ => Some(Arc::new(load_minter(config)?)),
            },
            TlsMode::Tunnel => None,
        };
        let default_agent = config
            .identity
            .robot_name
            .clone()
            .unwrap_or_else(|| product_token(&config.identity.default_user_agent).to_string());
        let metrics = match previous {
            Some(p) => p.metrics.clone(),
            None => Arc::new(Metrics::new(ScrapeSources::new(
                robots.clone(),
                pacer.clone(),
                minter.clone(),
            ))),
        };
        // Every fallible step is behind us: apply what the reused parts
        // share with the running state. The connectors resolve through this
        // policy, so the new deny list applies at once; a refused reload
        // must leave both untouched.
        if previous.is_some() {
            destinations.set_deny(config.proxy.deny_destinations.clone());
            metrics.follow_minter(minter.clone());
        }
        // One name for the process's life, so a request that left before a
        // reload is still recognised if it loops back after it.
        let via = previous.map_or_else(
            || super::forward::Via::new(&format!("robots-guard-{:08x}", rand_u32())),
            |p| p.via.clone(),
        );
        Ok(ProxyState {
            listen,
            via,
            identity,
            robot_name: config.identity.robot_name.clone(),
            robots,
            pacer,
            client,
            upgrade_client,
            spellings: config.robots.equivalent_spellings,
            honor_crawl_delay: rate.honor_crawl_delay,
            max_crawl_delay: rate.max_crawl_delay,
            upstream_timeout: config.proxy.upstream_timeout,
            max_url_length: config.proxy.max_url_length.get(),
            tls_mode: config.tls.mode,
            connect_ports: config.tls.connect_ports.clone(),
            minter,
            timeouts: super::idle::Timeouts {
                idle: config.proxy.idle_timeout,
                head: config.proxy.header_read_timeout,
            },
            default_agent,
            auth,
            destinations,
            max_path_repeats: config.proxy.max_path_repeats,
            metrics,
            allow_clients: config.proxy.allow_clients.clone(),
            // hyper refuses buffers below 8 KiB.
            max_header_bytes: config.proxy.max_header_bytes.get().max(8192),
            drain_timeout: config.proxy.drain_timeout,
            ca_files: ca_files(config),
        })
    }

    /// Is `client` in `proxy.allow_clients`?
    pub fn client_allowed(&self, client: SocketAddr) -> bool {
        let ip = client.ip().to_canonical();
        self.allow_clients.iter().any(|net| net.contains(&ip))
    }

    /// The agent of a tunnel-mode CONNECT: its own `User-Agent`'s token,
    /// else `robot_name`, else the configured default identity's token.
    pub fn tunnel_agent<B>(&self, request: &Request<B>) -> String {
        let token = self.agent_token(request);
        if token.is_empty() {
            self.default_agent.clone()
        } else {
            token.to_string()
        }
    }

    /// The product token of a request: `identity.robot_name`, else the one
    /// in its `User-Agent` (see [`product_token`]).
    pub fn agent_token<'a, B>(&'a self, request: &'a Request<B>) -> &'a str {
        if let Some(name) = &self.robot_name {
            return name;
        }
        request
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(product_token)
            .unwrap_or_default()
    }
}

fn ca_files(config: &Config) -> (PathBuf, PathBuf) {
    (config.tls.ca_cert.clone(), config.tls.ca_key.clone())
}

/// Loads the CA of `tls.ca_cert`/`tls.ca_key`, creating it on first start,
/// and says where it is and how to trust it.
fn load_minter(config: &Config) -> Result<LeafMinter, StateError> {
    let (cert, key) = (&config.tls.ca_cert, &config.tls.ca_key);
    let (ca, created) = CertificateAuthority::load_or_create(cert, key)?;
    if created {
        tracing::warn!(
            cert = %cert.display(),
            key = %key.display(),
            "created a new local CA for HTTPS interception; clients must trust {} \
             (curl --cacert, REQUESTS_CA_BUNDLE, SSL_CERT_FILE or the system store; see README)",
            cert.display()
        );
    } else {
        tracing::info!(cert = %cert.display(), "HTTPS interception CA loaded");
    }
    let capacity =
        std::num::NonZeroUsize::new(LEAF_CACHE_CAPACITY).unwrap_or(std::num::NonZeroUsize::MIN);
    Ok(LeafMinter::new(ca, capacity)?)
}

/// A random-enough instance id without another dependency: the hash of the
/// process id and the time, through std's randomly keyed hasher.
fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish() as u32
}

/// What [`preflight`] found out about the interception CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaStatus {
    /// `tls.mode = "tunnel"`: no CA is used.
    NotUsed,
    /// Both files exist and hold a usable CA.
    Loaded,
    /// Neither file exists: `serve` will create the CA on start.
    WillBeCreated,
}

/// Checks what a configuration refers to without starting anything: the
/// `tls.extra_roots` PEM files, the `auth` users and htpasswd file, the
/// identity defaults, and (in intercept mode) the CA files when they exist. Creates nothing, unlike
/// [`ProxyState::new`], which creates a missing CA.
///
/// # Errors
///
/// The [`StateError`] that starting the proxy with `config` would meet.
pub fn preflight(config: &Config) -> Result<CaStatus, StateError> {
    crate::upstream::client_tls_config(&config.tls.extra_roots)?;
    ProxyAuth::new(
        &config.auth.users,
        config.auth.htpasswd.as_deref(),
        &config.auth.realm,
    )?;
    FetchSettings::from_config(config)?;
    if config.tls.mode == TlsMode::Tunnel {
        return Ok(CaStatus::NotUsed);
    }
    let (cert, key) = (&config.tls.ca_cert, &config.tls.ca_key);
    let absent = |path: &std::path::Path| std::fs::symlink_metadata(path).is_err();
    if absent(cert) && absent(key) {
        return Ok(CaStatus::WillBeCreated);
    }
    // Only one of the two present is an error, as on start.
    CertificateAuthority::load_or_create(cert, key)?;
    Ok(CaStatus::Loaded)
}
