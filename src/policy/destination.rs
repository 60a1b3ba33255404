//! Destination rules: which addresses the proxy may connect to.
//!
//! A forward proxy must not be a way into the networks behind it: cloud
//! metadata (`169.254.169.254`), link-local and, for a company, internal
//! ranges. Names are checked *after* DNS resolution, because a public name
//! can resolve to a private address; the same filtered answer feeds the
//! pipeline's early check and [`DestinationPolicy::connect`], through which
//! the upstream pools and tunnels connect, so a rebinding DNS server cannot
//! slip a denied address in between (denied addresses are removed again at
//! connect time). Answers are cached briefly so the check
//! does not add a lookup per request.

use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::IpNet;
use lru::LruCache;
use tokio::time::Instant;

/// Why a destination cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// Every address of the host is in `proxy.deny_destinations`.
    #[error("destination {host} ({addresses}) is in proxy.deny_destinations")]
    Denied {
        /// The host asked for.
        host: String,
        /// Its addresses, comma-separated.
        addresses: String,
    },
    /// The name did not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Lookup {
        /// The host asked for.
        host: String,
        /// The resolver's error.
        reason: String,
    },
}

/// Why [`DestinationPolicy::connect`] could not open a connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The destination is denied or does not resolve.
    #[error(transparent)]
    Destination(#[from] DestinationError),
    /// Every allowed address refused or failed; the last error.
    #[error("cannot connect to {host}:{port}: {error}")]
    Io {
        /// The host asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// The error of the last address tried.
        error: std::io::Error,
    },
    /// No address answered within the connect timeout.
    #[error("no answer from {host}:{port} within {waited:?}")]
    TimedOut {
        /// The host asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// The connect timeout.
        waited: Duration,
    },
}

type Addresses = Arc<[IpAddr]>;

/// A cached answer: when it was looked up, and the filtered result.
type CachedAnswer = (Instant, Result<Addresses, DestinationError>);

/// The deny list and a small cache of resolved, filtered answers.
pub struct DestinationPolicy {
    /// Replaced whole on a config reload (the connector keeps this policy).
    deny: std::sync::RwLock<Arc<Vec<IpNet>>>,
    ttl: Duration,
    cache: Mutex<LruCache<String, CachedAnswer>>,
}

impl std::fmt::Debug for DestinationPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestinationPolicy")
            .field("deny", &self.deny)
            .finish()
    }
}

impl DestinationPolicy {
    /// A policy denying `deny`, caching answers for `ttl` (at most
    /// `capacity` names).
    pub fn new(deny: Vec<IpNet>, ttl: Duration, capacity: NonZeroUsize) -> Self {
        DestinationPolicy {
            deny: std::sync::RwLock::new(Arc::new(deny)),
            ttl,
            cache: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// No deny list, default caching: what tests and tools use.
    pub fn allow_all() -> Arc<Self> {
        Arc::new(DestinationPolicy::new(
            Vec::new(),
            Duration::from_secs(30),
            NonZeroUsize::MIN,
        ))
    }

    /// Is this address denied? IPv4-mapped IPv6 addresses are checked as
    /// IPv4, so `::ffff:169.254.169.254` is caught too.
    pub fn is_denied(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.rules().iter().any(|net| net.contains(&ip))
    }

    /// Whether any rule is configured (no rule: nothing to check early).
    pub fn has_rules(&self) -> bool {
        !self.rules().is_empty()
    }

    /// Replaces the deny list (a config reload) and forgets cached answers,
    /// which were filtered by the old list.
    pub fn set_deny(&self, deny: Vec<IpNet>) {
        *self.deny.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(deny);
        self.lock().clear();
    }

    fn rules(&self) -> Arc<Vec<IpNet>> {
        // A poisoned lock still holds a complete list.
        self.deny.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Should a request to `host` be refused? Yes when every address it
    /// resolves to is denied. A name that does not resolve is not refused
    /// here: it fails where it is fetched. Without rules, or for an allowed
    /// IP literal, no lookup (and no allocation) happens.
    pub async fn denies(&self, host: &str) -> bool {
        if !self.has_rules() {
            return false;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.is_denied(ip);
        }
        matches!(
            self.resolve(host).await,
            Err(DestinationError::Denied { .. })
        )
    }

    /// The allowed addresses of `host` (a name or an IP literal).
    ///
    /// # Errors
    ///
    /// [`DestinationError::Denied`] when every address is denied,
    /// [`DestinationError::Lookup`] when the name does not resolve.
    pub async fn resolve(&self, host: &str) -> Result<Addresses, DestinationError> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return self.filter(host, vec![ip]);
        }
        let now = Instant::now();
        if let Some((at, answer)) = self.lock().get(host) {
            if now.duration_since(*at) < self.ttl {
                return answer.clone();
            }
        }
        let answer = match tokio::net::lookup_host((host, 0)).await {
            Ok(addrs) => self.filter(host, addrs.map(|a| a.ip()).collect()),
            Err(e) => Err(DestinationError::Lookup {
                host: host.to_string(),
                reason: e.to_string(),
            }),
        };
        self.lock().put(host.to_string(), (now, answer.clone()));
        answer
    }

    /// Opens a TCP connection to `host:port` on one of the addresses
    /// [`resolve`](DestinationPolicy::resolve) allows, in the resolver's
    /// order, within `timeout` overall (the lookup included, as the socket
    /// layer's own lookup was: a slow resolver must not hold a client past
    /// it). The addresses are raced RFC 8305 style ([`super::eyeballs`]), so
    /// one that never answers does not use up the time of the others.
    /// Resolving once and connecting to
    /// exactly that answer is the point: letting the socket layer look the
    /// name up again would reach whatever a second answer says, denied or
    /// not (a name with mixed addresses, or DNS rebinding).
    ///
    /// # Errors
    ///
    /// [`ConnectError`]: denied or unresolvable, refused, or timed out.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<tokio::net::TcpStream, ConnectError> {
        let attempts = async {
            let addresses = self.resolve(host).await?;
            super::eyeballs::connect_first(&addresses, port)
                .await
                .map_err(|error| ConnectError::Io {
                    host: host.to_string(),
                    port,
                    error,
                })
        };
        match tokio::time::timeout(timeout, attempts).await {
            Ok(result) => result,
            Err(_) => Err(ConnectError::TimedOut {
                host: host.to_string(),
                port,
                waited: timeout,
            }),
        }
    }

    /// Stores `addresses` as the current answer for `host`, filtered as a
    /// lookup's would be: lets tests give a name an answer no resolver here
    /// would (a mix of denied and allowed addresses).
    #[cfg(test)]
    fn remember(&self, host: &str, addresses: Vec<IpAddr>) {
        let answer = self.filter(host, addresses);
        self.lock().put(host.to_string(), (Instant::now(), answer));
    }

    fn filter(&self, host: &str, all: Vec<IpAddr>) -> Result<Addresses, DestinationError> {
        let allowed: Vec<IpAddr> = all
            .iter()
            .copied()
            .filter(|ip| !self.is_denied(*ip))
            .collect();
        if allowed.is_empty() && !all.is_empty() {
            return Err(DestinationError::Denied {
                host: host.to_string(),
                addresses: all
                    .iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if all.is_empty() {
            return Err(DestinationError::Lookup {
                host: host.to_string(),
                reason: "no addresses".to_string(),
            });
        }
        Ok(allowed.into())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<String, CachedAnswer>> {
        // A poisoned cache holds only lookup answers; keep using it.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(deny: &[&str]) -> DestinationPolicy {
        DestinationPolicy::new(
            deny.iter().map(|n| n.parse().expect("net")).collect(),
            Duration::from_secs(30),
            NonZeroUsize::new(16).expect("nonzero"),
        )
    }

    #[tokio::test]
    async fn literals_and_names_are_checked_after_resolution() {
        let p = policy(&["169.254.0.0/16", "127.0.0.0/8", "::1/128"]);
        assert!(matches!(
            p.resolve("169.254.169.254").await,
            Err(DestinationError::Denied { .. })
        ));
        assert!(p.is_denied("::ffff:169.254.169.254".parse().expect("ip")));
        assert!(matches!(
            p.resolve("[::1]").await,
            Err(DestinationError::Denied { .. })
        ));
        // "localhost" resolves to loopback only: denied after resolution.
        assert!(matches!(
            p.resolve("localhost").await,
            Err(DestinationError::Denied { .. })
        ));
        assert_eq!(p.resolve("93.184.216.34").await.map(|a| a.len()), Ok(1));
        let open = policy(&[]);
        assert!(open.resolve("localhost").await.is_ok());
        assert!(matches!(
            open.resolve("name.that.does.not.exist.invalid").await,
            Err(DestinationError::Lookup { .. })
        ));
    }

    /// A name whose answer mixes a denied address (where a listener waits)
    /// with an allowed one (where nothing listens): the connection must
    /// never reach the denied address, however the name would resolve
    /// again. Then the other way round: the allowed address is used.
    #[tokio::test]
    async fn connect_uses_only_the_allowed_addresses_of_the_answer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let loopback: IpAddr = "127.0.0.1".parse().expect("ip");
        let elsewhere: IpAddr = "127.0.0.2".parse().expect("ip");
        let timeout = Duration::from_secs(5);

        let p = policy(&["127.0.0.1/32"]);
        p.remember("mixed.test", vec![loopback, elsewhere]);
        // Refused at once on Linux (all of 127/8 is local); elsewhere the
        // address may not answer at all.
        let refused = p.connect("mixed.test", port, Duration::from_secs(1)).await;
        assert!(
            matches!(
                refused,
                Err(ConnectError::Io { .. } | ConnectError::TimedOut { .. })
            ),
            "{refused:?}"
        );
        let reached = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(reached.is_err(), "the denied address was connected to");
        p.remember("denied.test", vec![loopback]);
        assert!(matches!(
            p.connect("denied.test", port, timeout).await,
            Err(ConnectError::Destination(DestinationError::Denied { .. }))
        ));

        let p = policy(&["127.0.0.2/32"]);
        p.remember("mixed.test", vec![elsewhere, loopback]);
        let stream = p
            .connect("mixed.test", port, timeout)
            .await
            .expect("connects");
        let (accepted, _) = listener.accept().await.expect("accepted");
        assert_eq!(
            accepted.peer_addr().expect("peer"),
            stream.local_addr().expect("local")
        );
    }
}
