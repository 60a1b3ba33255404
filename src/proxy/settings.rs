//! Settings: what the pipeline reads, built from the configuration.
//!
//! [`Settings`] holds values only (numbers, lists, policies), no state and no
//! connections. It is built anew from the file on every reload and swapped in
//! whole, so a request sees one consistent configuration from start to end.
//! The parts of the proxy that hold state ([`super::services::Services`])
//! are kept across reloads and take their new settings from here.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use ipnet::IpNet;

use super::idle::Timeouts;
use crate::config::{
    Config, IdentityMode as ConfigIdentityMode, ProfileConfig, TlsMode, DEFAULT_PROFILE,
};
use crate::fetch::{FetchError, FetchSettings};
use crate::policy::auth::{AuthConfigError, ProxyAuth};
use crate::policy::{BackoffSettings, IdentityMode, IdentityPolicy, PacingSettings};
use crate::robots::{product_token, Purposes, Spellings};
use crate::upstream::{UpstreamBuildError, UpstreamSettings};

/// How long a pooled upstream connection may stay idle.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A robot: a team's (`[[profile]]`), or the top level's for clients no
/// profile matches (named `default`). What the phases read per client.
#[derive(Debug)]
pub struct Profile {
    /// The profile's name, for logs, metrics and answers (shared: every
    /// request's record and metrics labels carry it).
    pub name: Arc<str>,
    /// Proxy-auth users it is for.
    users: Vec<String>,
    /// Client networks it is for.
    clients: Vec<IpNet>,
    /// `User-Agent` / `From` checks.
    pub identity: IdentityPolicy,
    /// `robot_name`: overrides the User-Agent's product token.
    pub robot_name: Option<String>,
    /// The configured identity's product token, for tunnel-mode CONNECTs
    /// that name no agent.
    pub default_agent: String,
    /// `purposes`: what it fetches for, checked against the site's
    /// `Content-Signal` / `Content-Usage`.
    pub purposes: Purposes,
    /// `enforce`: false is report-only.
    pub enforce: bool,
    /// `min_delay`: a floor on the spacing of this profile's requests at a host.
    pub min_delay: Duration,
    /// `deny_destinations` beyond the global ones.
    pub deny_destinations: Vec<IpNet>,
    /// `signing_key`: its own Web Bot Auth key (else `[signing] key`).
    pub signing_key: Option<PathBuf>,
}

impl Profile {
    /// The proxy-auth users it is for.
    pub fn users(&self) -> &[String] {
        &self.users
    }

    /// The client networks it is for.
    pub fn clients(&self) -> &[IpNet] {
        &self.clients
    }

    /// Does this profile select a request from `client` by `user`?
    fn selects(&self, user: Option<&str>, client: IpAddr) -> bool {
        user.is_some_and(|user| self.users.iter().any(|u| u == user))
            || self.clients.iter().any(|net| net.contains(&client))
    }
}

/// The configuration as the pipeline reads it.
#[derive(Debug)]
pub struct Settings {
    /// The top-level robot, for clients no profile matches.
    pub default_profile: Arc<Profile>,
    /// `[[profile]]`, in file order: the first that matches wins.
    pub profiles: Vec<Arc<Profile>>,
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
    /// `[fleet]`: read once, when the services start (a reload cannot change it).
    pub fleet: Option<crate::config::FleetConfig>,
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
    /// A profile has a signing key but nothing says where its directory is.
    #[error("profile {profile:?} sets signing_key, but there is no [signing] section (it names the signature_agent every key signs with)")]
    SigningKeyWithoutSigning {
        /// The profile.
        profile: String,
    },
    /// A profile names a user the proxy does not have.
    #[error("line {line}: profile {profile:?} names user {user:?}, whom proxy authentication does not know (auth.users, auth.htpasswd)")]
    UnknownUser {
        /// The profile.
        profile: String,
        /// The user.
        user: String,
        /// Its line in the file.
        line: usize,
    },
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
        let default_profile = Arc::new(top_level_profile(config)?);
        let profiles = config
            .profiles
            .iter()
            .map(|p| team_profile(p, &default_profile, auth.as_ref()).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        if config.signing.is_none() {
            if let Some(p) = profiles.iter().find(|p| p.signing_key.is_some()) {
                return Err(SettingsError::SigningKeyWithoutSigning {
                    profile: p.name.to_string(),
                });
            }
        }
        let upstream = UpstreamSettings {
            connect_timeout: config.proxy.upstream_connect_timeout,
            pool_idle_timeout: POOL_IDLE_TIMEOUT,
            extra_roots: config.tls.extra_roots.clone(),
            max_idle: config.proxy.max_idle_upstream,
        };
        // Read the roots now, so a bad file refuses the configuration.
        crate::upstream::client_tls_config(&upstream.extra_roots)?;
        let rate = &config.rate_limit;
        Ok(Settings {
            default_profile,
            profiles,
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
                backoff: BackoffSettings {
                    honor_retry_after: rate.honor_retry_after,
                    max_backoff: rate.max_backoff,
                    on_errors: rate.backoff_on_errors,
                    first_delay: rate.default_delay.max(Duration::from_secs(1)),
                },
            },
            upstream,
            ca_files: (config.tls.mode == TlsMode::Intercept)
                .then(|| (config.tls.ca_cert.clone(), config.tls.ca_key.clone())),
            signing: config.signing.clone(),
            fleet: config.fleet.clone(),
        })
    }

    /// The profile of a request from `client` by `user`: the first that selects
    /// it, else the top level's.
    pub fn profile_for(&self, user: Option<&str>, client: IpAddr) -> &Arc<Profile> {
        let client = client.to_canonical();
        self.profiles
            .iter()
            .find(|p| p.selects(user, client))
            .unwrap_or(&self.default_profile)
    }

    /// Is `client` in `proxy.allow_clients`?
    pub fn client_allowed(&self, client: SocketAddr) -> bool {
        let ip = client.ip().to_canonical();
        self.allow_clients.iter().any(|net| net.contains(&ip))
    }
}

/// The top level's robot.
fn top_level_profile(config: &Config) -> Result<Profile, SettingsError> {
    let id = &config.identity;
    Ok(Profile {
        name: Arc::from(DEFAULT_PROFILE),
        users: Vec::new(),
        clients: Vec::new(),
        identity: IdentityPolicy {
            user_agent: mode(id.user_agent),
            from: mode(id.from),
            default_user_agent: header(&id.default_user_agent, "default_user_agent")?,
            default_from: header(&id.default_from, "default_from")?,
        },
        robot_name: id.robot_name.clone(),
        default_agent: id
            .robot_name
            .clone()
            .unwrap_or_else(|| product_token(&id.default_user_agent).to_owned()),
        purposes: id.purposes,
        enforce: config.proxy.enforce,
        min_delay: Duration::ZERO,
        deny_destinations: Vec::new(),
        signing_key: None,
    })
}

/// A `[[profile]]`: what it sets, else the top level's.
fn team_profile(
    p: &ProfileConfig,
    top: &Profile,
    auth: Option<&ProxyAuth>,
) -> Result<Profile, SettingsError> {
    let name = p.name.get_ref().clone();
    for (user, line) in p.users.iter().zip(&p.user_lines) {
        if !auth.is_some_and(|a| a.has_user(user.get_ref())) {
            return Err(SettingsError::UnknownUser {
                profile: name,
                user: user.get_ref().clone(),
                line: *line,
            });
        }
    }
    let identity = IdentityPolicy {
        user_agent: p.user_agent.map_or(top.identity.user_agent, mode),
        from: p.from.map_or(top.identity.from, mode),
        default_user_agent: match &p.default_user_agent {
            Some(value) => header(value, "default_user_agent")?,
            None => top.identity.default_user_agent.clone(),
        },
        default_from: match &p.default_from {
            Some(value) => header(value, "default_from")?,
            None => top.identity.default_from.clone(),
        },
    };
    let robot_name = p.robot_name.clone().or_else(|| top.robot_name.clone());
    let default_agent = match (&robot_name, &p.default_user_agent) {
        (Some(name), _) => name.clone(),
        (None, Some(ua)) => product_token(ua).to_owned(),
        (None, None) => top.default_agent.clone(),
    };
    Ok(Profile {
        name: Arc::from(name),
        users: p.users.iter().map(|u| u.get_ref().clone()).collect(),
        clients: p.clients.clone(),
        identity,
        robot_name,
        default_agent,
        purposes: p.purposes.unwrap_or(top.purposes),
        enforce: p.enforce.unwrap_or(top.enforce),
        min_delay: p.min_delay.unwrap_or(Duration::ZERO),
        deny_destinations: p.deny_destinations.clone(),
        signing_key: p.signing_key.clone(),
    })
}

fn header(value: &str, key: &'static str) -> Result<HeaderValue, SettingsError> {
    HeaderValue::from_str(value).map_err(|_| SettingsError::BadDefault { key })
}

fn mode(m: ConfigIdentityMode) -> IdentityMode {
    match m {
        ConfigIdentityMode::Require => IdentityMode::Require,
        ConfigIdentityMode::Fill => IdentityMode::Fill,
        ConfigIdentityMode::Pass => IdentityMode::Pass,
    }
}
