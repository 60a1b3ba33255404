//! File descriptors: the proxy must not run out of them however many
//! origins it visits.
//!
//! Every client connection, every upstream connection in use and every one
//! kept for reuse is a socket. The first two are bounded by
//! `proxy.max_connections` (a forwarded request or a tunnel holds one
//! upstream socket beside its client's), the last by
//! `proxy.max_idle_upstream`. At start the soft `RLIMIT_NOFILE` is raised to
//! the hard limit (the soft default, often 1024, is far below what the
//! default caps need), and a warning says so when the caps do not fit.

use crate::config::Config;

/// Descriptors beside the connections: the listening sockets, the event
/// loops' own, log files, DNS lookups in flight, the CA files read on a
/// reload.
const RESERVED: u64 = 64;

/// The descriptors `config` may need at once: a client and an upstream
/// socket per connection, the idle upstream connections, and
/// [`RESERVED`].
pub fn needed(config: &Config) -> u64 {
    let connections = config.proxy.max_connections.get() as u64;
    let idle = config.proxy.max_idle_upstream.get() as u64;
    2 * connections + idle + RESERVED
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit and returns
/// the limit now in force.
///
/// # Errors
///
/// The OS error when the limit cannot be read or set.
pub fn raise() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// [`raise`], then a warning when `config`'s caps may need more descriptors
/// than the limit allows (new connections would then fail with "too many
/// open files" under load, instead of waiting for a slot).
pub fn raise_and_check(config: &Config) {
    let needed = needed(config);
    match raise() {
        Ok(limit) if limit < needed => tracing::warn!(
            limit,
            needed,
            max_connections = config.proxy.max_connections.get(),
            max_idle_upstream = config.proxy.max_idle_upstream.get(),
            "the file descriptor limit (ulimit -n) is below what max_connections (twice: \
             client and upstream) and max_idle_upstream may hold at once; raise the hard \
             limit or lower the caps"
        ),
        Ok(limit) => tracing::debug!(limit, needed, "file descriptor limit"),
        Err(error) => tracing::warn!(%error, "cannot raise the file descriptor limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_need_two_sockets_per_connection_and_the_idle_ones() {
        let config = Config::default();
        assert_eq!(needed(&config), 2 * 4096 + 1024 + RESERVED);
    }

    #[test]
    fn raising_reaches_the_hard_limit() {
        let limit = raise().expect("raise RLIMIT_NOFILE");
        let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).expect("getrlimit");
        assert_eq!(soft, limit);
        assert!(soft == hard || soft >= limit);
    }
}
