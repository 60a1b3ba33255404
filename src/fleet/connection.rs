//! One worker's connection to the store: a single server (or a replica set's primary
//! behind one address) or a Redis Cluster.
//!
//! Both kinds are driven through [`redis::aio::ConnectionLike`], so the scripts and
//! commands of [`super::pacing`] and [`super::robots`] do not know which they talk to.
//! In a cluster every script touches the keys of one host (or origin) only, all under
//! one hash tag (`rg:{host}:...`), so each call is routed to the shard that owns the
//! host, and hosts spread over the shards.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A worker's connection to the store (cheap to clone: both kinds are handles to one
/// multiplexed connection).
#[derive(Clone)]
pub enum StoreConn {
    /// One server, reconnected by the manager after an I/O error.
    Single(ConnectionManager),
    /// A Redis Cluster: calls go to the shard that owns their keys' slot, and the
    /// connection follows `MOVED` redirections and refreshes the slot map itself.
    Cluster(ClusterConnection),
}

impl ConnectionLike for StoreConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            StoreConn::Single(conn) => conn.req_packed_command(cmd),
            StoreConn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            StoreConn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            StoreConn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            StoreConn::Single(conn) => conn.get_db(),
            StoreConn::Cluster(conn) => conn.get_db(),
        }
    }
}
