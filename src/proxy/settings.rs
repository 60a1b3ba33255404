//! Settings: what the pipeline reads, built from the configuration.
//!
//! [`Settings`] holds values only (numbers, lists, policies), no state and no
//! connections. It is built anew from the file on every reload and swapped in
//! whole, so a request sees one consistent configuration from start to end.
//! The parts of the proxy that hold state ([`super::services::Services`])
//! are kept across reloads and take their new settings from here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http::HeaderValue;
use ipnet::IpNet;

use super::idle::Timeouts;
use crate::config::{Config, IdentityMode as ConfigIdentityMode, TlsMode};
use crate::fetch::{FetchError, FetchSettings};
use crate::policy::auth::{AuthConfigError, ProxyAuth};
use crate::policy::{IdentityMode, IdentityPolicy, PacingSettings};
use crate::robots::{product_token, Spellings};
use crate::upstream::{UpstreamBuildError, UpstreamSettings};

/// How long a pooled upstream connection may stay idle.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The configuration as the pipeline reads it.
#[derive(Debug)]
pub struct Settings {
    /// `User-Agent` / `From` checks.
    pub identity: IdentityPolicy,
    /// `identity.robot_name`: overrides the User-Agent's product token.
    pub robot_name: Option<String>,
    /// The configured identity's product token, for tunnel-mode CONNECTs
    /// that name no agent.
    pub default_agent: String,
    /// `robots.equivalent_spellings`.
    pub spellings: Spellings,
    /// `rate_limit.honor_crawl_delay`.
    pub honor_crawl_delay: bool,
    /// `rate_limit.max_crawl_delay`.
    pub max_crawl_delay: Duration,
    /// `proxy.upstream_timeout`.
    pub upstream_timeout: Duration,
    /// `proxy.max_url_length`.
    pub max_url_length: usize,
    /// `proxy.max_path_repeats`.
    pub max_path_repeats: u32,
    /// `proxy.max_header_bytes`, raised to hyper's 8 KiB minimum.
    pub max_header_bytes: usize,
    /// `tls.mode`.
    pub tls_mode: TlsMode,
    /// `tls.connect_ports`.
    pub connect_ports: Vec<u16>,
    /// `proxy.idle_timeout` and `proxy.header_read_timeout` (the latter also
    /// bounds a client's TLS handshake after CONNECT).
    pub timeouts: Timeouts,
    /// `proxy.drain_timeout`.
    pub drain_timeout: Duration,
    /// Proxy authentication, when users are configured.
    pub auth: Option<ProxyAuth>,
    /// `proxy.allow_clients`, checked when a connection is accepted.
    pub allow_clients: Vec<IpNet>,
    /// `proxy.deny_destinations`, for the destination policy.
    pub deny_destinations: Vec<IpNet>,
    /// `[robots]` and the identity robots.txt fetches send, for the cache.
    pub fetch: FetchSettings,
    /// `[rate_limit]`, for the pacer.
    pub pacing: PacingSettings,
    /// Connect timeout and trusted roots, for the upstream pools.
    pub upstream: UpstreamSettings,
    /// `tls.ca_cert` and `tls.ca_key` in intercept mode, for the leaf minter.
    pub ca_files: Option<(PathBuf, PathBuf)>,
    /// `[signing]`, for the request signer; `None`: requests are not signed.
    pub signing: Option<crate::config::SigningConfig>,
}

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A `tls.extra_roots` file is unusable.
    #[error(transparent)]
    Upstream(#[from] UpstreamBuildError),
    /// A configured identity default is not a valid header value.
    #[error("identity.{key} is not a valid header value")]
    BadDefault {
        /// The config key.
        key: &'static str,
    },
    /// The robots.txt fetch settings are unusable.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The proxy users could not be loaded.
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
}

impl Settings {
    /// The settings of `config`, with every file it names read (htpasswd,
    /// extra roots) and every value checked.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] for the first thing that cannot be used.
    pub fn from_config(config: &Config) -> Result<Settings, SettingsError> {
        let auth = ProxyAuth::new(
            &config.auth.users,
            config.auth.htpasswd.as_deref(),
            &config.auth.realm,
        )?;
        let header = |value: &str, key| {
            HeaderValue::from_str(value).map_err(|_| SettingsError::BadDefault { key })
        };
        let identity = IdentityPolicy {
            user_agent: mode(config.identity.user_agent),
            from: mode(config.identity.from),
            default_user_agent: header(&config.identity.default_user_agent, "default_user_agent")?,
            default_from: header(&config.identity.default_from, "default_from")?,
        };
        let upstream = UpstreamSettings {
            connect_timeout: config.proxy.upstream_connect_timeout,
            pool_idle_timeout: POOL_IDLE_TIMEOUT,
            extra_roots: config.tls.extra_roots.clone(),
        };
        // Read the roots now, so a bad file refuses the configuration.
        crate::upstream::client_tls_config(&upstream.extra_roots)?;
        let rate = &config.rate_limit;
        Ok(Settings {
            identity,
            robot_name: config.identity.robot_name.clone(),
            default_agent: config
                .identity
                .robot_name
                .clone()
                .unwrap_or_else(|| product_token(&config.identity.default_user_agent).to_owned()),
            spellings: config.robots.equivalent_spellings,
            honor_crawl_delay: rate.honor_crawl_delay,
            max_crawl_delay: rate.max_crawl_delay,
            upstream_timeout: config.proxy.upstream_timeout,
            max_url_length: config.proxy.max_url_length.get(),
            max_path_repeats: config.proxy.max_path_repeats,
            // hyper refuses buffers below 8 KiB.
            max_header_bytes: config.proxy.max_header_bytes.get().max(8192),
            tls_mode: config.tls.mode,
            connect_ports: config.tls.connect_ports.clone(),
            timeouts: Timeouts {
                idle: config.proxy.idle_timeout,
                head: config.proxy.header_read_timeout,
            },
            drain_timeout: config.proxy.drain_timeout,
            auth,
            allow_clients: config.proxy.allow_clients.clone(),
            deny_destinations: config.proxy.deny_destinations.clone(),
            fetch: FetchSettings::from_config(config)?,
            pacing: PacingSettings {
                default_delay: rate.default_delay,
                max_per_host: std::num::NonZeroUsize::new(rate.max_per_host.get() as usize)
                    .unwrap_or(std::num::NonZeroUsize::MIN),
                max_wait: rate.max_wait,
                idle_host_ttl: rate.idle_host_ttl,
                max_hosts: rate.max_hosts.get(),
            },
            upstream,
            ca_files: (config.tls.mode == TlsMode::Intercept)
                .then(|| (config.tls.ca_cert.clone(), config.tls.ca_key.clone())),
            signing: config.signing.clone(),
        })
    }

    /// Is `client` in `proxy.allow_clients`?
    pub fn client_allowed(&self, client: SocketAddr) -> bool {
        let ip = client.ip().to_canonical();
        self.allow_clients.iter().any(|net| net.contains(&ip))
    }
}

fn mode(m: ConfigIdentityMode) -> IdentityMode {
    match m {
        ConfigIdentityMode::Require => IdentityMode::Require,
        ConfigIdentityMode::Fill => IdentityMode::Fill,
        ConfigIdentityMode::Pass => IdentityMode::Pass,
    }
}
