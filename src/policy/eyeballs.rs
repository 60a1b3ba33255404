//! Connecting to the first of a name's addresses that answers, RFC 8305
//! ("Happy Eyeballs") style.
//!
//! Trying the addresses strictly one after another lets one that never
//! answers (a blackholed IPv6 route, a firewall that drops SYNs) use up the
//! whole connect timeout, and the working addresses after it are never
//! tried. Here the next address is tried when the previous attempt fails or
//! after [`ATTEMPT_DELAY`] without an answer, while the earlier attempts go
//! on; the first connection made wins and the others are dropped. The
//! address families alternate, starting with the resolver's first choice
//! (RFC 8305 §4). Tunnels and the upstream pools connect through this.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// How long an attempt has before the next address is tried beside it: RFC
/// 8305 §5 recommends 250 ms.
pub const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// Connects to the first of `addresses` (in the resolver's order, families
/// interleaved) that accepts on `port`.
///
/// # Errors
///
/// The error of the last attempt to fail when every address failed, or
/// `NotFound` when there was no address. No timeout of its own: callers
/// bound it (`DestinationPolicy::connect`).
pub async fn connect_first(addresses: &[IpAddr], port: u16) -> std::io::Result<TcpStream> {
    let mut queue = interleave_families(addresses).into_iter();
    let mut attempts = JoinSet::new();
    let mut last_error = None;
    loop {
        let waiting_on_more = queue.len() > 0 && !attempts.is_empty();
        let finished = if waiting_on_more {
            tokio::select! {
                finished = attempts.join_next() => finished,
                () = tokio::time::sleep(ATTEMPT_DELAY) => {
                    if let Some(ip) = queue.next() {
                        attempts.spawn(TcpStream::connect(SocketAddr::new(ip, port)));
                    }
                    continue;
                }
            }
        } else {
            attempts.join_next().await
        };
        match finished {
            // Dropping the set aborts the attempts still under way.
            Some(Ok(Ok(stream))) => return Ok(stream),
            Some(Ok(Err(error))) => last_error = Some(error),
            Some(Err(joined)) => last_error = Some(std::io::Error::other(joined)),
            None => {}
        }
        // A failure (or nothing started yet) moves on to the next address
        // at once.
        match queue.next() {
            Some(ip) => {
                attempts.spawn(TcpStream::connect(SocketAddr::new(ip, port)));
            }
            None if attempts.is_empty() => {
                return Err(last_error.unwrap_or_else(|| std::io::ErrorKind::NotFound.into()));
            }
            None => {}
        }
    }
}

/// The addresses with their families alternating, the family of the first
/// leading, each family in its own order.
fn interleave_families(addresses: &[IpAddr]) -> Vec<IpAddr> {
    let Some(first) = addresses.first() else {
        return Vec::new();
    };
    let (leading, other): (Vec<IpAddr>, Vec<IpAddr>) = addresses
        .iter()
        .partition(|ip| ip.is_ipv4() == first.is_ipv4());
    let mut out = Vec::with_capacity(addresses.len());
    let mut other = other.into_iter();
    for ip in leading {
        out.push(ip);
        out.extend(other.next());
    }
    out.extend(other);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().expect("ip")).collect()
    }

    #[test]
    fn families_alternate_from_the_first_ones() {
        assert_eq!(
            interleave_families(&ips(&["::1", "::2", "::3", "10.0.0.1", "10.0.0.2"])),
            ips(&["::1", "10.0.0.1", "::2", "10.0.0.2", "::3"])
        );
        assert_eq!(
            interleave_families(&ips(&["10.0.0.1", "::1", "10.0.0.2"])),
            ips(&["10.0.0.1", "::1", "10.0.0.2"])
        );
        assert!(interleave_families(&[]).is_empty());
    }

    /// A listener whose accept queue is full and never drained: Linux drops
    /// further SYNs, so a connect to it neither succeeds nor fails, as with
    /// a blackholed route, without leaving loopback.
    async fn silent_listener(ip: &str) -> (tokio::net::TcpListener, Vec<TcpStream>) {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::new(ip.parse().expect("ip"), 0))
            .expect("bind");
        let listener = socket.listen(1).expect("listen");
        let addr = listener.local_addr().expect("addr");
        let mut fillers = Vec::new();
        // Fill the queue until a connect hangs.
        loop {
            match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => fillers.push(stream),
                Ok(Err(error)) => panic!("filling the accept queue: {error}"),
                Err(_) => return (listener, fillers),
            }
            assert!(fillers.len() < 64, "the accept queue never filled");
        }
    }

    #[tokio::test]
    async fn an_address_that_never_answers_does_not_hold_up_the_next() {
        let (silent, _fillers) = silent_listener("127.0.0.2").await;
        let port = silent.local_addr().expect("addr").port();
        let answering = tokio::net::TcpListener::bind(("127.0.0.3", port))
            .await
            .expect("bind the same port on another loopback address");
        let started = Instant::now();
        let stream = tokio::time::timeout(
            Duration::from_secs(5),
            connect_first(&ips(&["127.0.0.2", "127.0.0.3"]), port),
        )
        .await
        .expect("the second address is tried while the first hangs")
        .expect("connected");
        let waited = started.elapsed();
        assert_eq!(
            stream.peer_addr().expect("peer"),
            answering.local_addr().expect("addr")
        );
        assert!(
            waited >= ATTEMPT_DELAY && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn a_refused_address_moves_on_at_once_and_all_refused_is_the_last_error() {
        let answering = tokio::net::TcpListener::bind("127.0.0.4:0")
            .await
            .expect("bind");
        let port = answering.local_addr().expect("addr").port();
        // Nothing listens on these addresses at that port: refused at once.
        let refused = ["127.0.0.5", "127.0.0.6", "127.0.0.7"];
        let started = Instant::now();
        let mut addresses = ips(&refused);
        addresses.extend(ips(&["127.0.0.4"]));
        let stream = connect_first(&addresses, port)
            .await
            .expect("connected to the last");
        // Waiting out the delay after each refusal would take 750 ms.
        let waited = started.elapsed();
        assert!(waited < ATTEMPT_DELAY * 3, "{waited:?}");
        assert_eq!(
            stream.peer_addr().expect("peer"),
            answering.local_addr().expect("addr")
        );
        let error = connect_first(&ips(&refused), port)
            .await
            .expect_err("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused);
        let error = connect_first(&[], port).await.expect_err("no address");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }
}
