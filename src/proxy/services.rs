//! Services: the parts of the proxy that hold state or connections.
//!
//! The robots.txt cache, the pacer, the upstream pools, the destination
//! policy's DNS cache, the leaf certificates and the metrics live as long as
//! the process. A reload does not rebuild them: it hands each its new
//! [`Settings`] ([`Services::apply`]), so no robots.txt is fetched again, no
//! host's pacing is forgotten and no counter restarts. What cannot change
//! while the process runs is only what [`crate::config::Startup`] holds.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};

use super::headers::Via;
use super::settings::Settings;
use crate::fetch::{RobotsCache, RobotsFetcher};
use crate::fleet::{Fleet, StoreError};
use crate::metrics::{Metrics, ScrapeSources};
use crate::policy::destination::DestinationPolicy;
use crate::policy::Pacer;
use crate::signing::{Signer, Signers, SigningError};
use crate::tls::{CertificateAuthority, LeafMinter, TlsError};
use crate::upstream::{UpstreamBuildError, UpstreamPools};

/// How long a DNS answer is trusted for destination checks. Short, so a
/// changed record is seen soon; long enough to spare a lookup per request.
const DNS_CACHE_TTL: Duration = Duration::from_secs(30);

/// How many names the destination check remembers.
const DNS_CACHE_CAPACITY: NonZeroUsize = match NonZeroUsize::new(4096) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

/// How many leaf certificates stay cached (one per intercepted host).
const LEAF_CACHE_CAPACITY: NonZeroUsize = match NonZeroUsize::new(4096) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

/// Why the services could not be started, or a reload could not give them
/// their new settings.
#[derive(Debug, thiserror::Error)]
pub enum ServicesError {
    /// The upstream pools could not be built.
    #[error(transparent)]
    Upstream(#[from] UpstreamBuildError),
    /// The interception CA could not be loaded or created.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The request signing key could not be loaded.
    #[error(transparent)]
    Signing(#[from] SigningError),
    /// The fleet's store URL cannot be used.
    #[error(transparent)]
    Fleet(#[from] StoreError),
}

/// Everything kept across reloads.
pub struct Services {
    /// The address the proxy listens on (for loop detection and messages).
    pub listen: SocketAddr,
    /// This instance's `Via` entries; its pseudonym on an incoming request
    /// means the request looped. One name for the process's life, so a
    /// request that left before a reload is still recognised after it.
    pub via: Via,
    /// robots.txt per origin.
    pub robots: RobotsCache,
    /// Per-host pacing.
    pub pacer: Pacer,
    /// Pooled upstream connections, one set per worker.
    pub upstream: UpstreamPools,
    /// `proxy.deny_destinations` with its DNS cache; the pools and tunnels
    /// connect through it.
    pub destinations: Arc<DestinationPolicy>,
    /// Leaf certificates for interception.
    pub minter: Minter,
    /// Counters for `/metrics` and the status page.
    pub metrics: Arc<Metrics>,
    /// The request signers: `[signing]`'s and each profile's own (none
    /// when signing is off), read per request (`load()` takes no lock) and
    /// replaced by a reload, which reads the key files again.
    pub signers: ArcSwap<Signers>,
    /// `[fleet]`: pacing, back-off and robots.txt shared with other processes through
    /// a store; `None` for a process alone, whose requests never look at it again.
    pub fleet: Option<Arc<Fleet>>,
}

/// The leaf minter of the CA in force (none in tunnel mode), replaced when a
/// reload names other CA files.
pub struct Minter {
    current: Arc<ArcSwapOption<LeafMinter>>,
    /// The files `current` was loaded from.
    files: Mutex<Option<(PathBuf, PathBuf)>>,
}

impl Minter {
    /// The minter in force.
    pub fn current(&self) -> Option<Arc<LeafMinter>> {
        self.current.load_full()
    }

    fn files(&self) -> Option<(PathBuf, PathBuf)> {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What a reload must prepare before it may change anything: the parts that
/// can fail (loading another CA).
pub struct Prepared {
    /// `Some` when the minter changes: the new one, or none (tunnel mode).
    minter: Option<Option<Arc<LeafMinter>>>,
    /// The signers of the new settings.
    signers: Arc<Signers>,
}

impl Services {
    /// Starts the services for a proxy listening on `listen` with `workers`
    /// worker threads.
    ///
    /// # Errors
    ///
    /// [`ServicesError`] when the pools or the CA cannot be set up.
    pub fn start(
        settings: &Settings,
        listen: SocketAddr,
        workers: NonZeroUsize,
    ) -> Result<Services, ServicesError> {
        let destinations = Arc::new(DestinationPolicy::new(
            settings.deny_destinations.clone(),
            DNS_CACHE_TTL,
            DNS_CACHE_CAPACITY,
        ));
        let upstream = UpstreamPools::build(&settings.upstream, destinations.clone(), workers)?;
        let pacer = Pacer::new(settings.pacing.clone());
        let robots = RobotsCache::new(RobotsFetcher::new(
            upstream.clone(),
            pacer.clone(),
            settings.fetch.clone(),
        ));
        let fleet = settings
            .fleet
            .as_ref()
            .map(|config| Fleet::start(config, &pacer, &robots, workers.get()))
            .transpose()?
            .map(Arc::new);
        let minter = settings.ca_files.as_ref().map(load_minter).transpose()?;
        let signers = load_signers(settings)?;
        let current = Arc::new(ArcSwapOption::new(minter));
        let metrics = Arc::new(Metrics::new(ScrapeSources {
            robots: robots.clone(),
            pacer: pacer.clone(),
            upstream: upstream.clone(),
            minter: current.clone(),
            fleet: fleet.as_ref().map(|f| f.store.clone()),
        }));
        Ok(Services {
            listen,
            via: Via::new(&format!(
                "robots-guard-{:08x}",
                crate::random_id::rand_u32()
            )),
            robots,
            pacer,
            upstream,
            destinations,
            minter: Minter {
                current,
                files: Mutex::new(settings.ca_files.clone()),
            },
            metrics,
            signers: ArcSwap::new(signers),
            fleet,
        })
    }

    /// Does what applying `settings` could fail at, changing nothing yet.
    ///
    /// # Errors
    ///
    /// [`ServicesError`] when another CA is named and cannot be loaded, or
    /// the signing key cannot be.
    pub fn prepare(&self, settings: &Settings) -> Result<Prepared, ServicesError> {
        let minter = if settings.ca_files == self.minter.files() {
            None
        } else {
            Some(settings.ca_files.as_ref().map(load_minter).transpose()?)
        };
        let signers = load_signers(settings)?;
        Ok(Prepared { minter, signers })
    }

    /// Gives every service its part of `settings`. Cannot fail: what could,
    /// `prepared` did.
    pub fn apply(&self, settings: &Settings, prepared: Prepared) {
        self.destinations
            .set_deny(settings.deny_destinations.clone());
        self.pacer.reconfigure(settings.pacing.clone());
        if let Some(fleet) = &self.fleet {
            fleet.pacer.reconfigure(&settings.pacing);
        }
        self.robots.reconfigure(settings.fetch.clone());
        self.upstream.reconfigure(&settings.upstream);
        if let Some(minter) = prepared.minter {
            self.minter.current.store(minter);
            *self
                .minter
                .files
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = settings.ca_files.clone();
        }
        self.signers.store(prepared.signers);
    }
}

/// The signers of `settings`: `[signing]`'s key and each profile's own, read
/// from the files every time, so a reload after `keys init --force` signs
/// with the new key. A file named twice is read once.
///
/// # Errors
///
/// [`ServicesError::Signing`] for the first key that cannot be loaded.
pub fn load_signers(settings: &Settings) -> Result<Arc<Signers>, ServicesError> {
    let Some(signing) = &settings.signing else {
        return Ok(Arc::new(Signers::none()));
    };
    let default = Arc::new(Signer::from_config(signing)?);
    let mut loaded: Vec<(PathBuf, Arc<Signer>)> = vec![(signing.key.clone(), default.clone())];
    let mut by_profile = Vec::new();
    for profile in &settings.profiles {
        let Some(path) = &profile.signing_key else {
            continue;
        };
        let signer = match loaded.iter().find(|(p, _)| p == path) {
            Some((_, signer)) => signer.clone(),
            None => {
                let signer = Arc::new(
                    Signer::load(path, &signing.signature_agent, signing.expires_in)?
                        .keep_client_signatures(signing.keep_client_signatures),
                );
                loaded.push((path.clone(), signer.clone()));
                signer
            }
        };
        by_profile.push((profile.name.clone(), signer));
    }
    for (path, signer) in &loaded {
        tracing::info!(
            key = %path.display(),
            keyid = signer.keyid(),
            signature_agent = signer.signature_agent(),
            "requests are signed (Web Bot Auth)"
        );
    }
    Ok(Arc::new(Signers::new(Some(default), by_profile)))
}

/// Loads the CA of `files`, creating it on first start, and says where it is
/// and how to trust it.
fn load_minter((cert, key): &(PathBuf, PathBuf)) -> Result<Arc<LeafMinter>, ServicesError> {
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
    Ok(Arc::new(LeafMinter::new(ca, LEAF_CACHE_CAPACITY)?))
}
