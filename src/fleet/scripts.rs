//! The Lua scripts the store runs, and their keys.
//!
//! Every update is one script, so it is atomic in the store and costs one round trip
//! (`redis::Script` sends `EVALSHA` and falls back to loading the script once after the
//! store restarted). Scripts read the clock with `redis.call('TIME')`, so the machines of
//! the fleet need not agree on the time. Each script touches the keys of one hash tag
//! only (`{host}` or `{origin}`), so it runs on Redis Cluster too: a host's keys live in
//! one slot, and hosts spread over the slots. Every key gets a `PEXPIRE`, so the store
//! holds only what is in use.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

/// One admission: drop expired and finished leases, apply the back-off, reserve the
/// next start, take a lease.
pub static ADMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("admit.lua")));

/// Finished leases given back in a background batch (when no admission carried them).
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));

/// Extends the leases of requests still running.
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("renew.lua")));

/// A pause (`Retry-After`) or a failure that slows the host.
pub static BACKOFF: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("backoff.lua")));

/// A robots.txt lookup: the stored entry, or the fetch lock, or "wait".
pub static ROBOTS_GET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("robots_get.lua")));

/// Stores a fetched robots.txt entry and frees the fetch lock.
pub static ROBOTS_PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("robots_put.lua")));

/// `rg:{host}:pace`: the host's next start, pause, extra delay and its cause.
pub fn pace_key(host: &str) -> String {
    format!("rg:{{{host}}}:pace")
}

/// `rg:{host}:leases`: the slots held, scored by expiry.
pub fn leases_key(host: &str) -> String {
    format!("rg:{{{host}}}:leases")
}

/// `rg:{host}:waiting`: requests told "full", by when they first asked (the fleet's
/// queue for the host's slots).
pub fn waiting_key(host: &str) -> String {
    format!("rg:{{{host}}}:waiting")
}

/// `rg:{host}:seen`: the same requests, by when they last asked (to drop the gone).
pub fn seen_key(host: &str) -> String {
    format!("rg:{{{host}}}:seen")
}

/// `rg:{origin}:robots`: the origin's robots.txt entry.
pub fn robots_key(origin: &str) -> String {
    format!("rg:{{{origin}}}:robots")
}

/// `rg:{origin}:robots-lock`: held by the process fetching it.
pub fn robots_lock_key(origin: &str) -> String {
    format!("rg:{{{origin}}}:robots-lock")
}

/// Milliseconds, as the scripts count (saturating far beyond any setting).
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_a_host_share_one_hash_tag() {
        assert_eq!(pace_key("a.example"), "rg:{a.example}:pace");
        assert_eq!(leases_key("a.example"), "rg:{a.example}:leases");
        assert_eq!(waiting_key("a.example"), "rg:{a.example}:waiting");
        assert_eq!(seen_key("a.example"), "rg:{a.example}:seen");
        assert_eq!(
            robots_key("https://a.example"),
            "rg:{https://a.example}:robots"
        );
        assert_eq!(
            robots_lock_key("https://a.example"),
            "rg:{https://a.example}:robots-lock"
        );
    }

    #[test]
    fn every_script_reads_the_store_clock_or_none() {
        for (name, text) in [
            ("admit", include_str!("admit.lua")),
            ("backoff", include_str!("backoff.lua")),
            ("renew", include_str!("renew.lua")),
            ("robots_get", include_str!("robots_get.lua")),
            ("robots_put", include_str!("robots_put.lua")),
        ] {
            assert!(text.contains("redis.call('TIME')"), "{name}");
        }
    }
}
