//! Typed configuration, parsed from TOML (`config.toml`).
//!
//! Every value is parsed into the type the proxy uses (`Duration`, `SocketAddr`, `IpNet`,
//! `NonZeroUsize`, enums), so a bad value fails at load time with toml's own message: the
//! file, the line and column, the key, and what is accepted. There is no later
//! `validate()` pass. Every key is optional; a missing key or section takes the default
//! listed, key by key, in the shipped `config.toml`.
//! Unknown keys are errors, so a typo never silently falls back to a default.
//!
//! Durations are strings: a number (decimals allowed) followed by a unit, `ms`, `s`, `m`,
//! `h` or `d`; for example `"500ms"`, `"1.5s"`, `"24h"`, `"30d"`. See [`parse_duration`].

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::robots::{Purpose, Purposes, Spelling, Spellings};

mod profile;

pub use profile::{ProfileConfig, DEFAULT_PROFILE};

/// The duration syntax [`parse_duration`] accepts, quoted in every duration error.
const DURATION_UNITS: &str = "a duration string such as \"500ms\", \"1.5s\" or \"24h\": \
                              a number followed by a unit, ms, s, m, h or d";

/// The whole configuration: one field per section of `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[proxy]`: where clients connect and the limits on their connections.
    pub proxy: ProxyConfig,
    /// `[identity]`: how the robot identifies itself (`User-Agent`, `From`).
    pub identity: IdentityConfig,
    /// `[robots]`: fetching and caching robots.txt.
    pub robots: RobotsConfig,
    /// `[rate_limit]`: per-host pacing.
    pub rate_limit: RateLimitConfig,
    /// `[tls]`: HTTPS handling (interception or blind tunnels).
    pub tls: TlsConfig,
    /// `[admin]`: the metrics and health endpoint.
    pub admin: AdminConfig,
    /// `[log]`: log format and verbosity.
    pub log: LogConfig,
    /// `[auth]`: optional proxy authentication.
    pub auth: AuthConfig,
    /// `[[profile]]`: per-team robots, selected by proxy-auth user or client
    /// network; the first that matches wins.
    #[serde(rename = "profile")]
    pub profiles: Vec<ProfileConfig>,
    /// `[signing]`: Web Bot Auth request signatures; absent, requests are not signed.
    pub signing: Option<SigningConfig>,
    /// `[fleet]`: share pacing, site back-off and robots.txt with other processes
    /// through a Redis/Valkey store; absent, all state stays in this process.
    pub fleet: Option<FleetConfig>,
}

/// Errors from loading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read config file {}: {error}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// Why reading it failed.
        error: std::io::Error,
    },
    /// The file was read but is not a valid configuration.
    #[error("invalid config {file}: {message}")]
    Invalid {
        /// The file (or other source name) the text came from.
        file: String,
        /// toml's own message: line and column, the offending text, and what is accepted.
        message: String,
    },
}

/// The keys read once, when the process starts: the listening socket (and
/// whether it speaks the PROXY protocol), the worker threads, the connection
/// cap and the upstream pools' cap, the admin listener, and logging.
/// A reload cannot apply them (everything else it applies); the proxy names
/// the ones that changed from this struct's own fields, so that list cannot
/// drift from what the process really reads once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Startup {
    /// `[proxy]` keys of the listening socket and its threads.
    pub proxy: StartupProxy,
    /// `[admin]`.
    pub admin: AdminConfig,
    /// `[log]`.
    pub log: LogConfig,
    /// `[fleet]`: the store connections are made once, at start.
    pub fleet: StartupFleet,
}

/// The `[fleet]` keys of [`Startup`], as text, so a section added or removed
/// by a reload shows as changed keys too (an absent section is all empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartupFleet {
    /// `fleet.store`.
    pub store: String,
    /// `fleet.on_store_error`.
    pub on_store_error: String,
    /// `fleet.store_timeout`.
    pub store_timeout: String,
    /// `fleet.lease_ttl`.
    pub lease_ttl: String,
    /// `fleet.store_ca`.
    pub store_ca: String,
    /// `fleet.cluster`.
    pub cluster: bool,
}

/// The `[proxy]` keys of [`Startup`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartupProxy {
    /// `proxy.listen`.
    pub listen: SocketAddr,
    /// `proxy.max_connections`.
    pub max_connections: NonZeroUsize,
    /// `proxy.workers`.
    pub workers: usize,
    /// `proxy.proxy_protocol`: what the listener reads first on every connection.
    pub proxy_protocol: bool,
    /// `proxy.max_idle_upstream`: the pools are built once.
    pub max_idle_upstream: NonZeroUsize,
}

impl Config {
    /// The keys read once at start.
    pub fn startup(&self) -> Startup {
        Startup {
            proxy: StartupProxy {
                listen: self.proxy.listen,
                max_connections: self.proxy.max_connections,
                workers: self.proxy.workers,
                proxy_protocol: self.proxy.proxy_protocol,
                max_idle_upstream: self.proxy.max_idle_upstream,
            },
            admin: self.admin.clone(),
            log: self.log.clone(),
            fleet: match &self.fleet {
                Some(f) => StartupFleet {
                    store: f.store.clone(),
                    on_store_error: format!("{:?}", f.on_store_error),
                    store_timeout: format!("{:?}", f.store_timeout),
                    lease_ttl: format!("{:?}", f.lease_ttl),
                    store_ca: f
                        .store_ca
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    cluster: f.cluster,
                },
                None => StartupFleet {
                    store: String::new(),
                    on_store_error: String::new(),
                    store_timeout: String::new(),
                    lease_ttl: String::new(),
                    store_ca: String::new(),
                    cluster: false,
                },
            },
        }
    }

    /// Reads and parses the configuration file at `path`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Read`] if the file cannot be read, [`ConfigError::Invalid`] if its
    /// content is not a valid configuration.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Config::from_toml(&text, &path.display().to_string())
    }

    /// Parses a configuration from TOML text; `source_name` names it in error messages.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for a TOML syntax error, an unknown key, or a bad value.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            file: source_name.to_owned(),
            message,
        };
        let mut config: Config =
            toml::from_str(text).map_err(|e: toml::de::Error| invalid(e.to_string()))?;
        profile::check(&mut config.profiles, text).map_err(invalid)?;
        if let Some(fleet) = &config.fleet {
            if fleet.store_ca.is_some() && !fleet.store.starts_with("rediss://") {
                return Err(invalid(
                    "fleet.store_ca is for a rediss:// store (TLS); fleet.store is not one"
                        .to_owned(),
                ));
            }
        }
        Ok(config)
    }
}

/// `[proxy]`: the listening socket, who may use it, and connection limits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// Address and port the proxy listens on (`HTTP_PROXY` points here). Default
    /// `127.0.0.1:3128`, loopback only: an open proxy would lend the robot's identity to anyone.
    #[serde(deserialize_with = "de::socket_addr")]
    pub listen: SocketAddr,
    /// Client networks allowed to use the proxy, as CIDRs (a bare IP is a /32 or /128).
    /// Other clients are refused at accept. Must not be empty; use `0.0.0.0/0` and `::/0`
    /// to allow everyone. Default: loopback (`127.0.0.0/8`, `::1/128`).
    #[serde(deserialize_with = "de::ip_nets")]
    pub allow_clients: Vec<IpNet>,
    /// `false`: report-only rollout. Refusals for robots.txt, usage preferences, identity
    /// (`require`) and pacing are not enforced: the request is forwarded and the answer
    /// carries `X-Robots-Guard-Would-Refuse`. Security refusals (clients, proxy auth,
    /// destinations, ports, loops, malformed requests, limits) always hold. Profiles may
    /// override it. Default true.
    pub enforce: bool,
    /// Most client connections served at once; further connections wait in the accept
    /// backlog. Bounds memory and file descriptors. Default 4096.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_connections: NonZeroUsize,
    /// Time a client has to send a complete request head; guards against slow-loris
    /// clients holding connections. Default 10 s.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub header_read_timeout: Duration,
    /// An idle keep-alive client connection is closed after this long. Default 60 s.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub idle_timeout: Duration,
    /// Time allowed to open a TCP (and TLS) connection to an upstream server before
    /// answering `504`. Default 10 s.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub upstream_connect_timeout: Duration,
    /// Time allowed for an upstream server to start its response (first byte) before
    /// answering `504`. Bodies are streamed and not bounded by it. Default 60 s.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub upstream_timeout: Duration,
    /// Largest request head (request line plus headers) accepted from a client, in bytes;
    /// larger heads get `431`/`400`. Default 65536.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_header_bytes: NonZeroUsize,
    /// Longest request URL accepted, in bytes; longer ones get `414`. Keeps robots.txt
    /// matching cost bounded. Default 8192.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_url_length: NonZeroUsize,
    /// Destination networks the proxy never connects to, checked after DNS resolution (a
    /// public name resolving to a private address is caught). Default: link-local
    /// (`169.254.0.0/16`, cloud metadata services; `fe80::/10`). An egress proxy for a company
    /// adds its internal ranges. May be empty.
    #[serde(deserialize_with = "de::ip_nets_maybe_empty")]
    pub deny_destinations: Vec<IpNet>,
    /// Crawler-trap guard: a path in which one run of segments repeats back to back more
    /// than this many times (`/a/b/a/b/a/b/a/b`) is refused with `403`. 0 turns it off.
    /// Default 3.
    pub max_path_repeats: u32,
    /// On SIGTERM or ctrl-c the proxy stops accepting and lets in-flight requests finish
    /// for up to this long; connections still busy then are closed (`"0s"` closes them at
    /// once). Default 30 s.
    #[serde(deserialize_with = "de::duration")]
    pub drain_timeout: Duration,
    /// Worker threads serving clients, each with its own event loop, accept queue share
    /// and upstream connection pools, so a request is handled on one thread from accept
    /// to answer. 0 (the default) starts one per CPU core.
    pub workers: usize,
    /// Every connection starts with a PROXY protocol header (v1 or v2), as a load balancer
    /// such as HAProxy (`send-proxy-v2`) writes it: its source address is the client's
    /// for `allow_clients`, profiles and logs. A connection without a valid header is
    /// closed. Only the load balancer must be able to reach the listener then: whoever can
    /// connect can claim any address. Default false.
    pub proxy_protocol: bool,
    /// Upstream connections kept open for reuse, in all, across every origin and worker
    /// (idle HTTP/1.1 ones and shared HTTP/2 ones); past it the one unused longest is
    /// closed. Split evenly between the workers (at least one each). Bounds the sockets and
    /// buffers a crawl across many origins holds. Default 1024.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_idle_upstream: NonZeroUsize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 3128),
            allow_clients: vec![
                const { IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8) },
                const { IpNet::new_assert(IpAddr::V6(Ipv6Addr::LOCALHOST), 128) },
            ],
            enforce: true,
            max_connections: const { nonzero_usize(4096) },
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            upstream_connect_timeout: Duration::from_secs(10),
            upstream_timeout: Duration::from_secs(60),
            max_header_bytes: const { nonzero_usize(65536) },
            max_url_length: const { nonzero_usize(8192) },
            deny_destinations: vec![
                const { IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)), 16) },
                const { IpNet::new_assert(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), 10) },
            ],
            max_path_repeats: 3,
            drain_timeout: Duration::from_secs(30),
            workers: 0,
            proxy_protocol: false,
            max_idle_upstream: const { nonzero_usize(1024) },
        }
    }
}

/// `[auth]`: proxy authentication (`407` + `Proxy-Authenticate: Basic`). Off while no user
/// is configured.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The realm clients show when asking for credentials. Default `robots-guard`.
    pub realm: String,
    /// Users and their passwords: plain text, or a bcrypt (`$2y$...`) or `{SHA}` hash.
    /// Keep the config file private when it holds passwords. Default: none.
    pub users: std::collections::BTreeMap<String, String>,
    /// An htpasswd-style file of `user:hash` lines (bcrypt from `htpasswd -B`, or `{SHA}`
    /// from `htpasswd -s`), read at start and on reload. Default: none.
    pub htpasswd: Option<PathBuf>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            realm: "robots-guard".to_string(),
            users: std::collections::BTreeMap::new(),
            htpasswd: None,
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Passwords never reach a log line.
        f.debug_struct("AuthConfig")
            .field("realm", &self.realm)
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("htpasswd", &self.htpasswd)
            .finish()
    }
}

/// `[fleet]`: several robots-guard processes pace each host as one, through a shared
/// Redis (or Valkey) store: per-host spacing and slots, the site's back-off and the
/// robots.txt cache. Absent: everything stays in this process. `store` is required.
/// Read once at start (a reload that changes it warns).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// The store's URL: `redis://host:port/db`, or `rediss://` for TLS to the store
    /// (its certificate checked against the system's roots, or `store_ca`).
    #[serde(deserialize_with = "FleetConfig::store_url")]
    pub store: String,
    /// What a request does when the store cannot be reached: `local` (default) paces
    /// and caches in this process alone until the store is back; `refuse` answers `503
    /// fleet-store-unavailable`.
    #[serde(default)]
    pub on_store_error: OnStoreError,
    /// The longest any request waits on the store for one answer. Default 250 ms.
    #[serde(
        default = "FleetConfig::default_store_timeout",
        deserialize_with = "de::nonzero_duration"
    )]
    pub store_timeout: Duration,
    /// How long a request's slot (lease) lasts in the store if its process dies
    /// before giving it back (a living process renews the leases of its long
    /// requests). Default 30 s.
    #[serde(
        default = "FleetConfig::default_lease_ttl",
        deserialize_with = "de::nonzero_duration"
    )]
    pub lease_ttl: Duration,
    /// A PEM file of the CA that signed a `rediss://` store's certificate, when it is
    /// not one of the system's roots (a company CA, a managed store's own). Only with
    /// `rediss://`. Default: none.
    #[serde(default)]
    pub store_ca: Option<PathBuf>,
    /// `store` is one node of a Redis (or Valkey) Cluster: the others are found from
    /// it, and each host's state lives on the shard that owns its hash tag. Default
    /// false.
    #[serde(default)]
    pub cluster: bool,
}

impl FleetConfig {
    fn default_store_timeout() -> Duration {
        Duration::from_millis(250)
    }

    fn default_lease_ttl() -> Duration {
        Duration::from_secs(30)
    }

    fn store_url<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        use serde::de::Error;
        let url = String::deserialize(d)?;
        if !(url.starts_with("redis://")
            || url.starts_with("rediss://")
            || url.starts_with("redis+unix://"))
        {
            return Err(D::Error::custom(format!(
                "fleet.store must be a redis:// or rediss:// URL such as \"redis://127.0.0.1:6379/0\", not \"{url}\""
            )));
        }
        Ok(url)
    }
}

/// `fleet.on_store_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStoreError {
    /// Pace and cache in this process alone until the store is back.
    #[default]
    Local,
    /// Answer `503 fleet-store-unavailable`.
    Refuse,
}

/// `[signing]`: sign every forwarded request with HTTP Message Signatures (RFC 9421) as
/// Web Bot Auth (draft-ietf-webbotauth-httpsig-protocol) profiles them, so a site can
/// verify which robot sent it. Absent: no request is signed. `signature_agent` is
/// required; the rest have defaults.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningConfig {
    /// The Ed25519 private key (PKCS#8 PEM) made by `robots-guard keys init`, read at
    /// start and on every reload. Default `certs/signing.key`.
    #[serde(default = "SigningConfig::default_key")]
    pub key: PathBuf,
    /// The URL of the robot's key directory, sent in `Signature-Agent`: where sites fetch
    /// the public key, e.g. `https://bot.example/.well-known/http-message-signatures-directory`
    /// (the admin listener serves that path). An absolute `https://` URL (`http://` only
    /// for tests: the draft requires https). Required.
    #[serde(deserialize_with = "SigningConfig::signature_agent")]
    pub signature_agent: String,
    /// How long a signature stays valid after it is made (its `expires`); a stolen one
    /// can be replayed for that long. Greater than zero, at most 24 h as the draft
    /// recommends. Default 5 min.
    #[serde(
        default = "SigningConfig::default_expires_in",
        deserialize_with = "SigningConfig::expires_in"
    )]
    pub expires_in: Duration,
    /// Forward the signatures a client made itself beside the proxy's (under another
    /// label) instead of removing them. Default false.
    #[serde(default)]
    pub keep_client_signatures: bool,
}

impl SigningConfig {
    /// The longest `expires_in` accepted: the draft's recommended bound.
    pub const MAX_EXPIRES_IN: Duration = Duration::from_secs(24 * 3600);

    fn default_key() -> PathBuf {
        PathBuf::from("certs/signing.key")
    }

    fn default_expires_in() -> Duration {
        Duration::from_secs(300)
    }

    /// Why `url` cannot be a `Signature-Agent` member value, if it cannot: it must be
    /// an absolute `https://` (or, for tests, `http://`) URL with a host, in the
    /// printable ASCII a Structured Field String holds, without `"` or `\`.
    pub fn check_signature_agent(url: &str) -> Result<(), &'static str> {
        if !url
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        {
            return Err("must be printable ASCII without spaces, quotes or backslashes");
        }
        let uri: http::Uri = url.parse().map_err(|_| "is not a URL")?;
        match uri.scheme_str() {
            Some("https" | "http") => {}
            _ => return Err("must start with https:// (or http:// for tests)"),
        }
        match uri.authority() {
            Some(authority) if !authority.host().is_empty() => Ok(()),
            _ => Err("has no host"),
        }
    }

    fn signature_agent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let url = String::deserialize(d)?;
        SigningConfig::check_signature_agent(&url).map_err(|reason| {
            serde::de::Error::custom(format!(
                "{url:?} {reason}; expected the key directory's URL, such as \
                 \"https://bot.example/.well-known/http-message-signatures-directory\""
            ))
        })?;
        Ok(url)
    }

    fn expires_in<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = de::nonzero_duration(d)?;
        if v > SigningConfig::MAX_EXPIRES_IN {
            return Err(serde::de::Error::custom(
                "signatures valid for more than 24h can be replayed for as long; \
                 expected at most \"24h\", such as \"5m\"",
            ));
        }
        Ok(v)
    }
}

/// What to do with a client's identity header (`User-Agent` or `From`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdentityMode {
    /// Missing or invalid header: answer `403` saying what to add.
    Require,
    /// Missing header: add the configured default; an invalid one is still refused.
    Fill,
    /// Forward whatever the client sent (or nothing).
    Pass,
}

/// `[identity]`: how requests identify the robot to the sites it visits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdentityConfig {
    /// Policy for the `User-Agent` header, which decides the robots.txt group that
    /// applies. Default `require`: an anonymous client cannot be matched fairly.
    pub user_agent: IdentityMode,
    /// Policy for the `From` header (RFC 9110 §10.1.2: a robot SHOULD send a contact
    /// mailbox). Default `fill`.
    pub from: IdentityMode,
    /// `User-Agent` added in `fill` mode and used for the proxy's own robots.txt fetches
    /// when the client's is unavailable. Must be a valid header value. Default
    /// `robots-guard/0.1`.
    #[serde(deserialize_with = "de::header_text")]
    pub default_user_agent: String,
    /// `From` added in `fill` mode: a mailbox `local@domain` where a site owner can reach
    /// whoever runs the robot. Default `robots-admin@example.invalid`; set a real one.
    #[serde(deserialize_with = "de::mailbox")]
    pub default_from: String,
    /// Product token matched against robots.txt `User-agent` lines, overriding the one
    /// taken from each request's `User-Agent`: lets a fleet of differently named clients
    /// behave as one robot. Letters, `_` and `-` only. Default: unset.
    #[serde(deserialize_with = "de::product_token")]
    pub robot_name: Option<String>,
    /// What the robot fetches for: `search`, `ai-input`, `ai-train`. A request is
    /// refused (`403 usage-preference`) when the site's `Content-Signal` /
    /// `Content-Usage` statements refuse one of them. Clients may add purposes per
    /// request (`X-Robots-Guard-Purpose`), never remove these. Default `[]`: no
    /// preference applies.
    #[serde(deserialize_with = "de::purposes")]
    pub purposes: Purposes,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        IdentityConfig {
            user_agent: IdentityMode::Require,
            from: IdentityMode::Fill,
            default_user_agent: "robots-guard/0.1".to_owned(),
            default_from: "robots-admin@example.invalid".to_owned(),
            robot_name: None,
            purposes: Purposes::NONE,
        }
    }
}

/// How a robots.txt answered with a 4xx status (other than 429) is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum On4xx {
    /// RFC 9309 §2.3.1.3: the file is "unavailable", so there are no restrictions.
    Allow,
    /// The older reading that 401/403 mean "keep out": disallow everything.
    Disallow,
}

/// `[robots]`: fetching and caching robots.txt files.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RobotsConfig {
    /// Most origins whose robots.txt is kept in memory (LRU); bounds memory however many
    /// hosts are visited. Default 10000.
    #[serde(deserialize_with = "de::at_least_one")]
    pub cache_capacity: NonZeroUsize,
    /// How long a fetched robots.txt is used before it is fetched again (RFC 9309 §2.4
    /// suggests at most 24 h). `Cache-Control`/`Expires` may shorten it. Default 24 h.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub default_ttl: Duration,
    /// Floor on the cache lifetime, so a `no-cache` robots.txt cannot cause a fetch per
    /// request. Wins over `default_ttl` if larger. Default 1 min.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub min_ttl: Duration,
    /// Time allowed for one robots.txt fetch (connect to last byte); on timeout the
    /// file counts as unreachable. Default 10 s.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub fetch_timeout: Duration,
    /// Bytes of a robots.txt that are parsed; the rest is ignored (RFC 9309 §2.5 asks
    /// for at least 500 KiB). Default 512000.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_size: NonZeroUsize,
    /// Redirects followed when fetching robots.txt (RFC 9309 §2.3.1.2: at least 5);
    /// more hops count as a 4xx. 0 follows none. Default 5.
    pub max_redirects: u32,
    /// Reading of a robots.txt answered with 4xx (except 429): `allow` or `disallow`.
    /// Default `allow`.
    pub on_4xx: On4xx,
    /// While robots.txt is unreachable (5xx, 429, network error), a last good copy
    /// younger than this is used instead of disallowing everything. `"0s"` never uses a
    /// stale copy. Default 30 d.
    #[serde(deserialize_with = "de::duration")]
    pub stale_for: Duration,
    /// First retry interval after a robots.txt fetch failed as unreachable; doubles on
    /// each further failure up to `max_failure_ttl`. Default 1 min.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub failure_ttl: Duration,
    /// Cap on the growing retry interval for an unreachable robots.txt; if smaller than
    /// `failure_ttl` it caps that too. Default 1 h.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub max_failure_ttl: Duration,
    /// How servers may read a URL beyond its RFC 3986 normal form, each judged too (the
    /// most restrictive verdict wins): `merge-slashes`, `decode-slash`,
    /// `strip-path-params`, `backslash`, and the opt-in `case-insensitive`. May be
    /// empty. Default: the first four.
    #[serde(deserialize_with = "de::spellings")]
    pub equivalent_spellings: Spellings,
}

impl Default for RobotsConfig {
    fn default() -> Self {
        RobotsConfig {
            cache_capacity: const { nonzero_usize(10_000) },
            default_ttl: Duration::from_secs(24 * 3600),
            min_ttl: Duration::from_secs(60),
            fetch_timeout: Duration::from_secs(10),
            max_size: const { nonzero_usize(512_000) },
            max_redirects: 5,
            on_4xx: On4xx::Allow,
            stale_for: Duration::from_secs(30 * 86_400),
            failure_ttl: Duration::from_secs(60),
            max_failure_ttl: Duration::from_secs(3600),
            equivalent_spellings: Spellings::DEFAULT,
        }
    }
}

/// `[rate_limit]`: per-host pacing (per host name or IP, whatever the scheme and port).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Least time between the starts of two requests to one host, when robots.txt asks
    /// for nothing slower. `"0s"` disables the spacing. Default 1 s.
    #[serde(deserialize_with = "de::duration")]
    pub default_delay: Duration,
    /// Most requests in flight to one host at a time. Default 2.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_per_host: NonZeroU32,
    /// Raise the delay to robots.txt `Crawl-delay` / `Request-rate` for the agent.
    /// Default true.
    pub honor_crawl_delay: bool,
    /// Cap on a robots.txt `Crawl-delay`, so one file cannot stall the robot for hours.
    /// Default 30 s.
    #[serde(deserialize_with = "de::duration")]
    pub max_crawl_delay: Duration,
    /// Longest a request waits for its slot; if the wait would be longer the client gets
    /// `429` with `Retry-After`. `"0s"` never waits. Default 30 s.
    #[serde(deserialize_with = "de::duration")]
    pub max_wait: Duration,
    /// Limiter state of a host idle for longer than this is dropped, bounding memory.
    /// Default 5 min.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub idle_host_ttl: Duration,
    /// Most hosts with limiter state at once; beyond it the longest-idle host's state is
    /// dropped. Default 100000.
    #[serde(deserialize_with = "de::at_least_one")]
    pub max_hosts: NonZeroUsize,
    /// An origin's `429`/`503` with `Retry-After` pauses the host until then (capped by
    /// `max_backoff`). Off, such an answer counts like one without `Retry-After`.
    /// Default true.
    pub honor_retry_after: bool,
    /// The longest pause a site's `Retry-After` can cause, and the cap of the doubling
    /// error back-off. Default 15 min.
    #[serde(deserialize_with = "de::nonzero_duration")]
    pub max_backoff: Duration,
    /// Connect errors, resets and upstream timeouts double the host's extra delay (from
    /// `max(default_delay, 1s)`), as a `429`/`503` without `Retry-After` always does; each
    /// success halves it. Default true.
    pub backoff_on_errors: bool,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            default_delay: Duration::from_secs(1),
            max_per_host: const { nonzero_u32(2) },
            honor_crawl_delay: true,
            max_crawl_delay: Duration::from_secs(30),
            max_wait: Duration::from_secs(30),
            idle_host_ttl: Duration::from_secs(300),
            max_hosts: const { nonzero_usize(100_000) },
            honor_retry_after: true,
            max_backoff: Duration::from_secs(15 * 60),
            backoff_on_errors: true,
        }
    }
}

/// What the proxy does with a `CONNECT` (HTTPS) request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Decrypt with a local CA so each HTTPS request is checked like plain HTTP.
    Intercept,
    /// Blind tunnel: only a per-origin decision is possible (refused on `Disallow: /`).
    Tunnel,
}

/// `[tls]`: HTTPS interception and upstream verification.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// `intercept` (check every HTTPS request; clients must trust the local CA) or
    /// `tunnel` (no decryption, per-origin decisions only). Default `intercept`.
    pub mode: TlsMode,
    /// PEM certificate of the local CA that signs intercepted hosts' certificates;
    /// relative paths are from the working directory. Default `certs/ca.pem`.
    pub ca_cert: PathBuf,
    /// PEM private key of the local CA (created with mode 0600, never committed).
    /// Default `certs/ca.key`.
    pub ca_key: PathBuf,
    /// PEM files of extra CA certificates trusted for upstream servers, beside the
    /// Mozilla roots (e.g. a company CA). Default none.
    pub extra_roots: Vec<PathBuf>,
    /// Ports a `CONNECT` may reach; others are refused without contacting them, so the
    /// proxy cannot tunnel to SSH or SMTP. What a tunnel carries is read from its first
    /// bytes: TLS is intercepted (or tunnelled), plain HTTP (Node's undici tunnels `http://`
    /// requests too) runs through the pipeline. Non-empty, no port 0. Default `[443, 80]`.
    #[serde(deserialize_with = "de::ports")]
    pub connect_ports: Vec<u16>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            mode: TlsMode::Intercept,
            ca_cert: PathBuf::from("certs/ca.pem"),
            ca_key: PathBuf::from("certs/ca.key"),
            extra_roots: Vec::new(),
            connect_ports: vec![443, 80],
        }
    }
}

/// `[admin]`: the operator's endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Address serving `/metrics` (Prometheus) and `/healthz`. Keep it off the public
    /// network. Default `127.0.0.1:9180`.
    #[serde(deserialize_with = "de::socket_addr")]
    pub listen: SocketAddr,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9180),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// `[log]`: logging.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `text` or `json`. Default `text`.
    pub format: LogFormat,
    /// `trace`, `debug`, `info`, `warn`, `error`, or any `tracing-subscriber` `EnvFilter`
    /// directive string such as `"info,robots_guard::fetch=debug"`; checked at load.
    /// Default `info`.
    #[serde(deserialize_with = "de::log_filter")]
    pub level: String,
    /// Where the access log (one record per request) goes: `"off"`, `"stderr"` or a file
    /// path (appended to). Default `off`: each request is still logged at `info` through
    /// the general log.
    #[serde(
        deserialize_with = "de::access_log",
        serialize_with = "de::access_log_text"
    )]
    pub access_log: AccessLog,
    /// Format of the access log records: `json` (one object per line). Default `json`.
    pub access_log_format: AccessLogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".to_owned(),
            access_log: AccessLog::Off,
            access_log_format: AccessLogFormat::Json,
        }
    }
}

/// `log.access_log`: where the per-request records go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLog {
    /// No access log (the general log still has a line per request at `info`).
    Off,
    /// Standard error, interleaved with the general log.
    Stderr,
    /// This file, created if missing and appended to. A file really named `off` or
    /// `stderr` is written `./off`.
    File(PathBuf),
}

/// `log.access_log_format`: how access log records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// One JSON object per line (JSON Lines). The only format so far; the key exists so
    /// that others (e.g. a Common Log Format line) can be added without a new key.
    Json,
}

/// Parses a duration such as `"500ms"`, `"1s"`, `"1.5s"`, `"1m"`, `"24h"` or `"30d"`.
///
/// A non-negative decimal number (at most 9 fractional digits) followed directly by one
/// of the units `ms`, `s`, `m`, `h`, `d`; surrounding whitespace is ignored.
///
/// # Errors
///
/// A message naming the input and the accepted form, for a missing or unknown unit, a
/// missing, negative or malformed number, or a value too large for a `Duration`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let fail = |why: &str| {
        Err(format!(
            "invalid duration \"{s}\": {why}; expected {DURATION_UNITS}"
        ))
    };
    let t = s.trim();
    if t.is_empty() {
        return fail("empty");
    }
    if t.starts_with('-') {
        return fail("negative durations are not accepted");
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return fail("it does not start with a number");
    }
    let unit_nanos: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3600 * 1_000_000_000,
        "d" => 86_400 * 1_000_000_000,
        "" => return fail("missing unit"),
        _ => return fail("unknown unit"),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let malformed = whole.is_empty()
        || (number.contains('.') && frac.is_empty())
        || frac.contains('.')
        || frac.len() > 9;
    if malformed {
        return fail("malformed number");
    }
    // Exact integer arithmetic: 1.1s is exactly 1_100_000_000 ns, which f64 cannot promise.
    let Ok(whole) = whole.parse::<u128>() else {
        return fail("too large");
    };
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        match frac.parse() {
            Ok(v) => v,
            Err(_) => return fail("malformed number"),
        }
    };
    // `frac` has at most 9 digits (checked above), so the cast and the power cannot overflow.
    let frac_nanos = frac_value * unit_nanos / 10u128.pow(frac.len() as u32);
    let nanos = whole
        .checked_mul(unit_nanos)
        .and_then(|n| n.checked_add(frac_nanos));
    match nanos.map(u64::try_from) {
        Some(Ok(n)) => Ok(Duration::from_nanos(n)),
        _ => fail("too large"),
    }
}

/// `NonZeroUsize` for a default; called in `const` blocks, so a zero fails the build.
const fn nonzero_usize(n: usize) -> NonZeroUsize {
    match NonZeroUsize::new(n) {
        Some(n) => n,
        None => panic!("a non-zero default is zero"),
    }
}

/// `NonZeroU32` for a default; called in `const` blocks, so a zero fails the build.
const fn nonzero_u32(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => panic!("a non-zero default is zero"),
    }
}

/// Returns whether `s` is a plain mailbox `local@domain` (RFC 5322 addr-spec, unquoted).
fn is_mailbox(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~.".contains(&b))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..");
    let domain_ok = domain.split('.').all(|label| {
        !label.is_empty()
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    });
    local_ok && domain_ok
}

/// Custom serde deserializers, one per value shape; each error says what is accepted.
mod de {
    use super::*;

    use serde::de::{Error, Visitor};
    use serde::Deserializer;

    /// Visitor for a value written as a string and parsed by `parse`; `expecting` says
    /// what is accepted, for type errors such as `listen = 3128`.
    struct StrVisitor<T> {
        expecting: &'static str,
        parse: fn(&str) -> Result<T, String>,
    }

    impl<T> Visitor<'_> for StrVisitor<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.expecting)
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<T, E> {
            (self.parse)(v).map_err(E::custom)
        }
    }

    /// A duration string (zero allowed).
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_str(StrVisitor {
            expecting: DURATION_UNITS,
            parse: parse_duration,
        })
    }

    /// A duration string that must be greater than zero.
    pub fn nonzero_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = duration(d)?;
        if v.is_zero() {
            return Err(D::Error::custom(format!(
                "this duration must be greater than zero; expected {DURATION_UNITS}"
            )));
        }
        Ok(v)
    }

    /// An IP address and port.
    pub fn socket_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        const EXPECTING: &str =
            "an IP address and port such as \"127.0.0.1:3128\" or \"[::1]:3128\"";
        d.deserialize_str(StrVisitor {
            expecting: EXPECTING,
            parse: |s| {
                s.trim()
                    .parse()
                    .map_err(|_| format!("invalid address \"{s}\": expected {EXPECTING}"))
            },
        })
    }

    /// A list of spelling names (see [`Spelling::name`]), without repeats.
    pub fn spellings<'de, D: Deserializer<'de>>(d: D) -> Result<Spellings, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        let accepted = || {
            Spelling::ALL
                .map(|s| format!("\"{}\"", s.name()))
                .join(", ")
        };
        let mut set = Spellings::NONE;
        for name in &names {
            let spelling = Spelling::from_name(name).ok_or_else(|| {
                D::Error::custom(format!(
                    "unknown spelling \"{name}\": expected a list of {}",
                    accepted()
                ))
            })?;
            if set.contains(spelling) {
                return Err(D::Error::custom(format!("\"{name}\" is listed twice")));
            }
            set = set.with(spelling);
        }
        Ok(set)
    }

    /// A list of purposes (`["search", "ai-train"]`), each at most once.
    pub fn purposes<'de, D: Deserializer<'de>>(d: D) -> Result<Purposes, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        let mut set = Purposes::NONE;
        for name in &names {
            let purpose = Purpose::from_name(name).ok_or_else(|| {
                D::Error::custom(format!(
                    "unknown purpose \"{name}\": expected a list of {}",
                    Purpose::ALL.map(|p| format!("\"{}\"", p.name())).join(", ")
                ))
            })?;
            if set.contains(purpose) {
                return Err(D::Error::custom(format!("\"{name}\" is listed twice")));
            }
            set = set.with(purpose);
        }
        Ok(set)
    }

    /// [`purposes`], for a key that may be left out.
    pub fn opt_purposes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Purposes>, D::Error> {
        purposes(d).map(Some)
    }

    /// A whole number of at least 1, as any non-zero integer type.
    pub fn at_least_one<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<NonZeroU64>,
    {
        let n = i64::deserialize(d)?;
        let Some(n) = u64::try_from(n).ok().and_then(NonZeroU64::new) else {
            return Err(D::Error::custom(format!(
                "invalid value {n}: expected a whole number of at least 1"
            )));
        };
        T::try_from(n).map_err(|_| D::Error::custom(format!("invalid value {n}: too large")))
    }

    /// A non-empty list of CIDRs or bare IP addresses.
    pub fn ip_nets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
        let items = Vec::<String>::deserialize(d)?;
        if items.is_empty() {
            return Err(D::Error::custom(
                "the list is empty, so no client could connect; \
                 use [\"0.0.0.0/0\", \"::/0\"] to allow every client",
            ));
        }
        parse_nets(&items)
    }

    /// A list of CIDRs that may be empty.
    pub fn ip_nets_maybe_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
        parse_nets(&Vec::<String>::deserialize(d)?)
    }

    fn parse_nets<E: serde::de::Error>(items: &[String]) -> Result<Vec<IpNet>, E> {
        items
            .iter()
            .map(|s| {
                let s = s.trim();
                s.parse::<IpNet>()
                    .map(|net| net.trunc())
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        E::custom(format!(
                            "invalid network \"{s}\": expected a CIDR such as \"10.0.0.0/8\" \
                             or \"fd00::/8\", or a bare IP address"
                        ))
                    })
            })
            .collect()
    }

    /// A non-empty list of non-zero TCP ports.
    pub fn ports<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
        let ports = Vec::<u16>::deserialize(d)?;
        if ports.is_empty() {
            return Err(D::Error::custom(
                "the list is empty, so every CONNECT would be refused; expected ports such as [443]",
            ));
        }
        if ports.contains(&0) {
            return Err(D::Error::custom(
                "port 0 cannot be connected to; expected ports 1 to 65535",
            ));
        }
        Ok(ports)
    }

    /// A plain mailbox `local@domain`.
    pub fn mailbox<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let s = String::deserialize(d)?;
        if is_mailbox(&s) {
            Ok(s)
        } else {
            Err(D::Error::custom(format!(
                "\"{s}\" is not a mailbox; expected an address like \"robots@example.com\""
            )))
        }
    }

    /// Text usable as an HTTP header value: non-empty, visible ASCII and inner spaces.
    pub fn header_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let s = String::deserialize(d)?;
        let ok =
            !s.is_empty() && s.trim() == s && s.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
        if ok {
            Ok(s)
        } else {
            Err(D::Error::custom(format!(
                "{s:?} is not a valid header value; expected non-empty printable ASCII \
                 such as \"examplebot/1.0 (+https://example.com/bot)\""
            )))
        }
    }

    /// A robots.txt product token: letters, `_` and `-` (RFC 9309 §2.2.1).
    pub fn product_token<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let s = String::deserialize(d)?;
        if !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-')
        {
            Ok(Some(s))
        } else {
            Err(D::Error::custom(format!(
                "{s:?} is not a product token; expected letters, '_' and '-' only, such as \"examplebot\""
            )))
        }
    }

    /// `"off"`, `"stderr"` or a file path.
    pub fn access_log<'de, D: Deserializer<'de>>(d: D) -> Result<AccessLog, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "off" => Ok(AccessLog::Off),
            "stderr" => Ok(AccessLog::Stderr),
            "" => Err(D::Error::custom(
                "empty access log; expected \"off\", \"stderr\" or a file path \
                 such as \"/var/log/robots-guard/access.jsonl\"",
            )),
            path => Ok(AccessLog::File(PathBuf::from(path))),
        }
    }

    /// `log.access_log` written back as its config text.
    pub fn access_log_text<S: serde::Serializer>(log: &AccessLog, s: S) -> Result<S::Ok, S::Error> {
        match log {
            AccessLog::Off => s.serialize_str("off"),
            AccessLog::Stderr => s.serialize_str("stderr"),
            AccessLog::File(path) => s.serialize_str(&path.to_string_lossy()),
        }
    }

    /// A `tracing-subscriber` `EnvFilter` directive string.
    pub fn log_filter<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(D::Error::custom(
                "empty log level; expected trace, debug, info, warn, error \
                 or an EnvFilter directive such as \"info,robots_guard=debug\"",
            ));
        }
        match tracing_subscriber::EnvFilter::try_new(&s) {
            Ok(_) => Ok(s),
            Err(e) => Err(D::Error::custom(format!(
                "invalid log level {s:?} ({e}); expected trace, debug, info, warn, error \
                 or an EnvFilter directive such as \"info,robots_guard=debug\""
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text`, expecting failure, and returns the error message.
    fn error_of(text: &str) -> String {
        match Config::from_toml(text, "test.toml") {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// Asserts that `message` contains every one of `parts`.
    fn assert_mentions(message: &str, parts: &[&str]) {
        for part in parts {
            assert!(message.contains(part), "message lacks {part:?}:\n{message}");
        }
    }

    #[test]
    fn defaults_match_design_section_7() {
        let c = Config::default();
        assert_eq!(c.proxy.listen, "127.0.0.1:3128".parse().unwrap());
        assert_eq!(
            c.proxy.allow_clients,
            vec![
                "127.0.0.0/8".parse::<IpNet>().unwrap(),
                "::1/128".parse().unwrap()
            ]
        );
        assert_eq!(c.proxy.max_connections.get(), 4096);
        assert_eq!(c.proxy.header_read_timeout, Duration::from_secs(10));
        assert_eq!(c.proxy.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.proxy.upstream_connect_timeout, Duration::from_secs(10));
        assert_eq!(c.proxy.upstream_timeout, Duration::from_secs(60));
        assert_eq!(c.proxy.max_header_bytes.get(), 65536);
        assert_eq!(c.proxy.max_url_length.get(), 8192);
        assert_eq!(c.proxy.drain_timeout, Duration::from_secs(30));

        assert_eq!(c.identity.user_agent, IdentityMode::Require);
        assert_eq!(c.identity.from, IdentityMode::Fill);
        assert_eq!(c.identity.default_user_agent, "robots-guard/0.1");
        assert_eq!(c.identity.default_from, "robots-admin@example.invalid");
        assert_eq!(c.identity.robot_name, None);

        assert_eq!(c.robots.cache_capacity.get(), 10_000);
        assert_eq!(c.robots.default_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(c.robots.min_ttl, Duration::from_secs(60));
        assert_eq!(c.robots.fetch_timeout, Duration::from_secs(10));
        assert_eq!(c.robots.max_size.get(), 512_000);
        assert_eq!(c.robots.max_redirects, 5);
        assert_eq!(c.robots.on_4xx, On4xx::Allow);
        assert_eq!(c.robots.stale_for, Duration::from_secs(30 * 86_400));
        assert_eq!(c.robots.failure_ttl, Duration::from_secs(60));
        assert_eq!(c.robots.max_failure_ttl, Duration::from_secs(3600));

        assert_eq!(c.rate_limit.default_delay, Duration::from_secs(1));
        assert_eq!(c.rate_limit.max_per_host.get(), 2);
        assert!(c.rate_limit.honor_crawl_delay);
        assert_eq!(c.rate_limit.max_crawl_delay, Duration::from_secs(30));
        assert_eq!(c.rate_limit.max_wait, Duration::from_secs(30));
        assert_eq!(c.rate_limit.idle_host_ttl, Duration::from_secs(300));
        assert_eq!(c.rate_limit.max_hosts.get(), 100_000);

        assert_eq!(c.tls.mode, TlsMode::Intercept);
        assert_eq!(c.tls.ca_cert, PathBuf::from("certs/ca.pem"));
        assert_eq!(c.tls.ca_key, PathBuf::from("certs/ca.key"));
        assert!(c.tls.extra_roots.is_empty());
        assert_eq!(c.tls.connect_ports, vec![443, 80]);

        assert_eq!(c.admin.listen, "127.0.0.1:9180".parse().unwrap());

        assert_eq!(c.log.format, LogFormat::Text);
        assert_eq!(c.log.level, "info");
        assert_eq!(c.log.access_log, AccessLog::Off);
        assert_eq!(c.log.access_log_format, AccessLogFormat::Json);
    }

    #[test]
    fn empty_text_and_empty_sections_are_all_defaults() {
        assert_eq!(Config::from_toml("", "empty").unwrap(), Config::default());
        let sections = "[proxy]\n[identity]\n[robots]\n[rate_limit]\n[tls]\n[admin]\n[log]\n";
        assert_eq!(
            Config::from_toml(sections, "sections").unwrap(),
            Config::default()
        );
    }

    #[test]
    fn shipped_config_toml_is_the_defaults() {
        let shipped = Config::from_toml(include_str!("../config.toml"), "config.toml").unwrap();
        assert_eq!(shipped, Config::default());
    }

    #[test]
    fn shipped_config_toml_sets_every_key() {
        // Every key is written out (robot_name commented), so the file documents them all.
        let text = include_str!("../config.toml");
        let table: toml::Table = text.parse().unwrap();
        let count: usize = table
            .values()
            .map(|section| section.as_table().map_or(0, |t| t.len()))
            .sum();
        assert_eq!(count, 16 + 5 + 11 + 10 + 5 + 1 + 4 + 2);
        assert!(text.contains("# robot_name = "));
        // Optional sections are written out commented: [signing] and [fleet] (6 keys).
        for key in [
            "store",
            "on_store_error",
            "store_timeout",
            "lease_ttl",
            "store_ca",
            "cluster",
        ] {
            assert!(text.contains(&format!("# {key} = ")), "fleet.{key}");
        }
    }

    #[test]
    fn fleet_section_parses_with_defaults_and_rejects_unknown_keys() {
        let c = Config::from_toml("[fleet]\nstore = \"redis://127.0.0.1:6379/0\"\n", "t").unwrap();
        let f = c.fleet.clone().expect("fleet");
        assert_eq!(f.on_store_error, OnStoreError::Local);
        assert_eq!(f.store_timeout, Duration::from_millis(250));
        assert_eq!(f.lease_ttl, Duration::from_secs(30));
        let c2 = Config::from_toml(
            "[fleet]\nstore = \"redis://h:1/2\"\non_store_error = \"refuse\"\nstore_timeout = \"1s\"\nlease_ttl = \"5s\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            c2.fleet.as_ref().unwrap().on_store_error,
            OnStoreError::Refuse
        );
        assert_ne!(c.startup(), c2.startup(), "fleet keys are read at start");
        assert_ne!(
            Config::default().startup(),
            c.startup(),
            "adding [fleet] shows"
        );
        for bad in [
            "[fleet]\nstore = \"redis://h:1\"\nstores = 1\n",
            "[fleet]\nstore = \"http://h:1\"\n",
            "[fleet]\non_store_error = \"local\"\n",
            "[fleet]\nstore = \"redis://h:1\"\non_store_error = \"panic\"\n",
            "[fleet]\nstore = \"redis://h:1\"\nstore_timeout = \"0s\"\n",
            "[fleet]\nstore = \"redis://h:1\"\nstore_ca = \"ca.pem\"\n",
        ] {
            assert!(Config::from_toml(bad, "t").is_err(), "{bad}");
        }
    }

    #[test]
    fn load_reads_a_file_and_reports_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("robots-guard-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ok.toml");
        std::fs::write(&path, "[robots]\nmax_redirects = 0\n").unwrap();
        let c = Config::load(&path).unwrap();
        assert_eq!(c.robots.max_redirects, 0);

        let missing = dir.join("missing.toml");
        let err = Config::load(&missing).unwrap_err();
        assert!(matches!(err, ConfigError::Read { ref path, .. } if *path == missing));
        assert_mentions(
            &err.to_string(),
            &["cannot read config file", "missing.toml"],
        );

        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "[log]\nformat = \"xml\"\n").unwrap();
        let err = Config::load(&bad).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { ref file, .. } if file.ends_with("bad.toml")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn values_parse_into_types() {
        let text = r#"
            [proxy]
            listen = "[::1]:8080"
            allow_clients = ["10.1.2.3", "fd00::1", "192.168.7.9/16"]
            [identity]
            user_agent = "pass"
            from = "require"
            default_user_agent = "examplebot/2.0 (+https://example.com/bot)"
            default_from = "ops+bots@crawl.example.com"
            robot_name = "examplebot"
            [robots]
            on_4xx = "disallow"
            stale_for = "0s"
            [rate_limit]
            default_delay = "250ms"
            max_per_host = 8
            honor_crawl_delay = false
            [tls]
            mode = "tunnel"
            extra_roots = ["/etc/ssl/company.pem"]
            connect_ports = [443, 8443]
            [log]
            format = "json"
            level = "info,robots_guard::fetch=debug"
        "#;
        let c = Config::from_toml(text, "t").unwrap();
        assert_eq!(c.proxy.listen, "[::1]:8080".parse().unwrap());
        let nets: Vec<String> = c
            .proxy
            .allow_clients
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(nets, ["10.1.2.3/32", "fd00::1/128", "192.168.0.0/16"]);
        assert_eq!(c.identity.user_agent, IdentityMode::Pass);
        assert_eq!(c.identity.from, IdentityMode::Require);
        assert_eq!(c.identity.robot_name.as_deref(), Some("examplebot"));
        assert_eq!(c.robots.on_4xx, On4xx::Disallow);
        assert_eq!(c.robots.stale_for, Duration::ZERO);
        assert_eq!(c.rate_limit.default_delay, Duration::from_millis(250));
        assert_eq!(c.rate_limit.max_per_host.get(), 8);
        assert!(!c.rate_limit.honor_crawl_delay);
        assert_eq!(c.tls.mode, TlsMode::Tunnel);
        assert_eq!(c.tls.extra_roots, [PathBuf::from("/etc/ssl/company.pem")]);
        assert_eq!(c.tls.connect_ports, [443, 8443]);
        assert_eq!(c.log.format, LogFormat::Json);
        // Keys left out keep their defaults.
        assert_eq!(c.robots.cache_capacity.get(), 10_000);
        assert_eq!(c.admin, AdminConfig::default());
    }

    #[test]
    fn unknown_key_names_key_line_and_accepted_keys() {
        let msg = error_of("[robots]\ncache_capacity = 10\ncach_capacity = 5\n");
        assert_mentions(
            &msg,
            &[
                "test.toml",
                "line 3",
                "cach_capacity",
                "unknown field",
                "`cache_capacity`",
                "`default_ttl`",
                "`max_failure_ttl`",
            ],
        );
    }

    #[test]
    fn unknown_section_names_it_and_the_accepted_sections() {
        let msg = error_of("[proxy]\n\n[robot]\n");
        assert_mentions(&msg, &["line 3", "robot", "`robots`", "`rate_limit`"]);
    }

    #[test]
    fn bad_enum_value_names_value_line_and_accepted_values() {
        let msg = error_of("[tls]\nmode = \"sideways\"\n");
        assert_mentions(&msg, &["line 2", "sideways", "`intercept`", "`tunnel`"]);

        let msg = error_of("[identity]\nuser_agent = \"maybe\"\n");
        assert_mentions(&msg, &["line 2", "maybe", "`require`", "`fill`", "`pass`"]);

        let msg = error_of("[robots]\non_4xx = \"Allow\"\n");
        assert_mentions(&msg, &["line 2", "Allow", "`allow`", "`disallow`"]);

        let msg = error_of("[log]\nformat = \"xml\"\n");
        assert_mentions(&msg, &["line 2", "xml", "`text`", "`json`"]);
    }

    #[test]
    fn bad_duration_names_key_line_and_accepted_units() {
        let msg = error_of("[robots]\n\ndefault_ttl = \"5 parsecs\"\n");
        assert_mentions(
            &msg,
            &["line 3", "default_ttl", "5 parsecs", "ms, s, m, h or d"],
        );

        let msg = error_of("[rate_limit]\nmax_wait = \"-1s\"\n");
        assert_mentions(
            &msg,
            &["line 2", "max_wait", "-1s", "negative", "ms, s, m, h or d"],
        );

        let msg = error_of("[proxy]\nidle_timeout = 60\n");
        assert_mentions(
            &msg,
            &["line 2", "idle_timeout", "integer `60`", "ms, s, m, h or d"],
        );
    }

    #[test]
    fn zero_duration_is_refused_where_it_makes_no_sense() {
        let msg = error_of("[robots]\nfetch_timeout = \"0s\"\n");
        assert_mentions(&msg, &["line 2", "fetch_timeout", "greater than zero"]);
        // ... and accepted where it means "off".
        let c = Config::from_toml(
            "[rate_limit]\ndefault_delay = \"0ms\"\nmax_wait = \"0s\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.rate_limit.default_delay, Duration::ZERO);
        assert_eq!(c.rate_limit.max_wait, Duration::ZERO);
    }

    #[test]
    fn zero_or_negative_count_is_refused() {
        let msg = error_of("[robots]\ncache_capacity = 0\n");
        assert_mentions(&msg, &["line 2", "cache_capacity", "at least 1"]);
        let msg = error_of("[rate_limit]\nmax_per_host = -2\n");
        assert_mentions(&msg, &["line 2", "max_per_host", "-2", "at least 1"]);
        let msg = error_of("[rate_limit]\nmax_per_host = 5000000000\n");
        assert_mentions(&msg, &["line 2", "max_per_host", "too large"]);
        let msg = error_of("[proxy]\nmax_connections = \"many\"\n");
        assert_mentions(&msg, &["line 2", "max_connections", "\"many\""]);
        let msg = error_of("[robots]\nmax_redirects = -1\n");
        assert_mentions(&msg, &["line 2", "max_redirects", "-1"]);
    }

    #[test]
    fn bad_address_says_what_is_accepted() {
        let msg = error_of("[proxy]\nlisten = \"localhost\"\n");
        assert_mentions(&msg, &["line 2", "listen", "localhost", "127.0.0.1:3128"]);
        let msg = error_of("[admin]\nlisten = 9180\n");
        assert_mentions(&msg, &["line 2", "listen", "9180", "IP address and port"]);
    }

    #[test]
    fn bad_client_network_is_refused() {
        let msg = error_of("[proxy]\nallow_clients = [\"10.0.0.0/33\"]\n");
        assert_mentions(&msg, &["line 2", "10.0.0.0/33", "CIDR"]);
        let msg = error_of("[proxy]\nallow_clients = [\"intranet\"]\n");
        assert_mentions(&msg, &["intranet", "bare IP address"]);
        let msg = error_of("[proxy]\nallow_clients = []\n");
        assert_mentions(&msg, &["line 2", "allow_clients", "empty", "0.0.0.0/0"]);
    }

    #[test]
    fn bad_connect_ports_are_refused() {
        let msg = error_of("[tls]\nconnect_ports = []\n");
        assert_mentions(&msg, &["line 2", "connect_ports", "empty"]);
        let msg = error_of("[tls]\nconnect_ports = [443, 0]\n");
        assert_mentions(&msg, &["line 2", "port 0"]);
        let msg = error_of("[tls]\nconnect_ports = [70000]\n");
        assert_mentions(&msg, &["line 2", "70000"]);
    }

    #[test]
    fn default_from_must_be_a_mailbox() {
        for bad in [
            "nobody",
            "@example.com",
            "robots@",
            "robots@example..com",
            "Robots <robots@example.com>",
            "robots @example.com",
            "robots@-example.com",
        ] {
            let msg = error_of(&format!("[identity]\ndefault_from = \"{bad}\"\n"));
            assert_mentions(&msg, &["line 2", "default_from", bad, "not a mailbox"]);
        }
        for good in [
            "a@b",
            "robots-admin@example.invalid",
            "first.last+tag@mail.example.org",
        ] {
            assert!(is_mailbox(good), "{good}");
        }
    }

    #[test]
    fn identity_strings_are_checked() {
        let msg = error_of("[identity]\nrobot_name = \"example bot/1.0\"\n");
        assert_mentions(&msg, &["line 2", "robot_name", "not a product token"]);
        let msg = error_of("[identity]\ndefault_user_agent = \"\"\n");
        assert_mentions(
            &msg,
            &["line 2", "default_user_agent", "not a valid header value"],
        );
        let msg = error_of("[identity]\ndefault_user_agent = \"bot\\r\\nX-Evil: 1\"\n");
        assert_mentions(&msg, &["default_user_agent", "not a valid header value"]);
    }

    #[test]
    fn log_level_accepts_filters_and_refuses_garbage() {
        for good in [
            "trace",
            "warn",
            "info,robots_guard::fetch=debug",
            "hyper=off",
        ] {
            let c = Config::from_toml(&format!("[log]\nlevel = \"{good}\"\n"), "t").unwrap();
            assert_eq!(c.log.level, good);
        }
        let msg = error_of("[log]\nlevel = \"\"\n");
        assert_mentions(&msg, &["line 2", "level", "empty log level", "info"]);
        let msg = error_of("[log]\nlevel = \"robots_guard=loud\"\n");
        assert_mentions(&msg, &["line 2", "robots_guard=loud", "debug"]);
    }

    #[test]
    fn access_log_is_off_stderr_or_a_path() {
        let parse = |value: &str| {
            Config::from_toml(&format!("[log]\naccess_log = \"{value}\"\n"), "t")
                .unwrap()
                .log
                .access_log
        };
        assert_eq!(parse("off"), AccessLog::Off);
        assert_eq!(parse("stderr"), AccessLog::Stderr);
        assert_eq!(
            parse("/var/log/rg/access.jsonl"),
            AccessLog::File(PathBuf::from("/var/log/rg/access.jsonl"))
        );
        assert_eq!(parse("./off"), AccessLog::File(PathBuf::from("./off")));
        let msg = error_of("[log]\naccess_log = \"\"\n");
        assert_mentions(&msg, &["line 2", "access_log", "\"off\"", "\"stderr\""]);
        let msg = error_of("[log]\naccess_log_format = \"clf\"\n");
        assert_mentions(&msg, &["line 2", "clf", "`json`"]);
    }

    #[test]
    fn toml_syntax_error_keeps_line_and_column() {
        let msg = error_of("[proxy]\nlisten = \"127.0.0.1:3128\n");
        assert_mentions(&msg, &["test.toml", "line 2", "column"]);
    }

    #[test]
    fn parse_duration_table() {
        let ok: &[(&str, Duration)] = &[
            ("0s", Duration::ZERO),
            ("500ms", Duration::from_millis(500)),
            ("1s", Duration::from_secs(1)),
            ("1.5s", Duration::from_millis(1500)),
            ("1.1s", Duration::from_nanos(1_100_000_000)),
            ("0.25ms", Duration::from_micros(250)),
            ("1m", Duration::from_secs(60)),
            ("1.5m", Duration::from_secs(90)),
            ("24h", Duration::from_secs(86_400)),
            ("30d", Duration::from_secs(30 * 86_400)),
            (" 10s ", Duration::from_secs(10)),
            ("007s", Duration::from_secs(7)),
            ("1.000000001s", Duration::from_nanos(1_000_000_001)),
        ];
        for (input, want) in ok {
            assert_eq!(parse_duration(input), Ok(*want), "{input:?}");
        }
        let bad: &[(&str, &str)] = &[
            ("", "empty"),
            ("  ", "empty"),
            ("10", "missing unit"),
            ("1.5", "missing unit"),
            ("s", "does not start with a number"),
            ("-1s", "negative"),
            ("-0.5m", "negative"),
            ("+1s", "does not start with a number"),
            ("1sec", "unknown unit"),
            ("1 s", "unknown unit"),
            ("1S", "unknown unit"),
            ("1h30m", "unknown unit"),
            ("1e3s", "unknown unit"),
            (".5s", "malformed number"),
            ("5.s", "malformed number"),
            ("1.2.3s", "malformed number"),
            ("1.0000000001s", "malformed number"),
            ("1000000000000000d", "too large"),
            ("99999999999999999999999999999999999999999s", "too large"),
        ];
        for (input, why) in bad {
            let err = parse_duration(input).expect_err(input);
            assert!(err.contains(why), "{input:?}: {err}");
            assert!(err.contains("ms, s, m, h or d"), "{input:?}: {err}");
        }
    }
}
