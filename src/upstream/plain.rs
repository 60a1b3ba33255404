//! The connection pool for plain-http origins: HTTP/1.1 over TCP, the
//! proxy's hot path.
//!
//! hyper-util's pooled client is general (HTTP/1 and HTTP/2, TLS and ALPN,
//! racing a checkout against a connect) and pays for it on every request:
//! callgrind counts about 12k instructions per request in it, a fifth of the
//! proxy's user-space work (BENCHMARKS.md, "Where the CPU goes"). It hashes
//! the pool key three times, boxes the request future and spawns a task to
//! hand each connection back. A plain-http origin needs none of that, so
//! this pool keeps per worker, per authority, a list of idle connections:
//! a request takes the newest ready one or opens a new one, and the response
//! body hands the connection back when it has been read to the end.
//!
//! What it must get right, as hyper-util does:
//! - a request sent on a pooled connection that the origin has just closed
//!   comes back unsent (hyper's `try_send_request`) and goes out again on
//!   another connection. If it was already written when the close was seen,
//!   it goes out again only if it is idempotent and bodiless (RFC 9110
//!   §9.2.2), as Squid does and hyper-util does not; otherwise the error
//!   stands: a request with a body is never sent twice;
//! - a connection goes back to the pool only when its response was read to
//!   the end and the origin did not close it; one whose answer was cut short
//!   is dropped, which closes it;
//! - idle connections close after `idle_timeout`, swept by a task that runs
//!   only while the pool holds any; at most [`MAX_IDLE_PER_ORIGIN`] wait per
//!   origin, so memory stays bounded however many origins are visited.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, HOST};
use http::uri::Uri;
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use tokio::time::Instant;
use tower_service::Service;

use super::{BoxError, Connector, ProxyBody};

/// Idle connections kept per origin (the hyper-util pools use it too).
pub const MAX_IDLE_PER_ORIGIN: usize = 64;

/// A connection idle this long may be closed by the origin's keep-alive
/// timeout (seconds: nginx 75, Apache 5, Node 5, gunicorn 2) just as a
/// request goes out on it, so the request's head is kept to send it again.
/// Connections reused sooner, the busy case, skip that copy.
const STALE_RISK: Duration = Duration::from_millis(250);

/// Why a request through the plain-http pool failed.
#[derive(Debug, thiserror::Error)]
pub enum PlainError {
    /// DNS (including the destination policy), TCP connect or its timeout.
    #[error("{0}")]
    Connect(#[source] BoxError),
    /// The exchange on an open connection failed: the request could not be
    /// written, or the answer broke off or was not valid HTTP.
    #[error("{0}")]
    Exchange(#[source] hyper::Error),
    /// The request URI names no origin (the pipeline never sends one).
    #[error("request URI {0} names no origin")]
    NoAuthority(Uri),
}

impl PlainError {
    /// Did the connection never open? (Chooses "cannot connect" over "broke off".)
    pub fn is_connect(&self) -> bool {
        matches!(self, PlainError::Connect(_))
    }
}

/// One worker's pool of plain-http connections. Cloning shares it.
#[derive(Clone)]
pub struct PlainPool {
    shared: Arc<Shared>,
}

struct Shared {
    connector: Connector,
    idle_timeout: Duration,
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    /// Oldest first: a request takes from the back, so the connections used
    /// least lately age out.
    /// hashbrown's map: `get_key_value_mut` lets a checkout take the key
    /// along with the list, and its default hasher (foldhash, as `lru`'s
    /// caches use) costs a fraction of std's SipHash per lookup.
    by_origin: hashbrown::HashMap<PoolKey, Vec<IdleConnection>>,
    /// A sweeping task is running (or about to): see [`reap`].
    reaping: bool,
}

/// The authority a connection goes to, compared and hashed as written
/// (two spellings of one host merely get separate lists).
///
/// Its own copy, shared between the map and the connections out on loan:
/// a key cut from a request's URI (`Authority`, a slice of hyper's read
/// buffer) would keep that request's whole read buffer alive for as long
/// as the map holds the key, and freeing it on each check-in cost a few
/// hundred instructions per request.
type PoolKey = Arc<str>;

struct IdleConnection {
    sender: SendRequest<ProxyBody>,
    since: Instant,
}

impl PlainPool {
    /// An empty pool that opens connections through `connector` and closes
    /// them after `idle_timeout` unused.
    pub fn new(connector: Connector, idle_timeout: Duration) -> PlainPool {
        PlainPool {
            shared: Arc::new(Shared {
                connector,
                idle_timeout,
                idle: Mutex::new(Idle::default()),
            }),
        }
    }

    /// Sends `request` (absolute-form `http` URI) to its origin on a pooled
    /// connection, or a new one, and returns the response with its body
    /// streamed. Sets `Host` from the URI when the request has none, and
    /// sends the target in origin form.
    ///
    /// # Errors
    ///
    /// [`PlainError`]: the origin cannot be reached, or the exchange failed.
    pub async fn request(
        &self,
        mut request: Request<ProxyBody>,
    ) -> Result<Response<PooledBody>, PlainError> {
        if request.uri().authority().is_none() {
            return Err(PlainError::NoAuthority(request.uri().clone()));
        }
        let origin_form = origin_form(request.uri());
        let target = std::mem::replace(request.uri_mut(), origin_form);
        if !request.headers().contains_key(HOST) {
            if let Some(host) = host_field(&target) {
                request.headers_mut().insert(HOST, host);
            }
        }
        let written = target.authority().map_or("", |a| a.as_str());
        let authority = loop {
            let (authority, idle) = self.checkout(written);
            let Some(IdleConnection {
                mut sender,
                since: idle_since,
            }) = idle
            else {
                break authority;
            };
            let replay = if idle_since.elapsed() >= STALE_RISK {
                Replay::of(&request)
            } else {
                None
            };
            match sender.try_send_request(request).await {
                Ok(response) => return Ok(self.hand_back_after(response, authority, sender)),
                Err(mut failed) => match (failed.take_message(), replay) {
                    // Never written: the origin closed this idle connection
                    // as it was taken. Sending again cannot repeat anything.
                    (Some(unsent), _) => {
                        tracing::debug!(origin = %authority, error = %failed.error(), "pooled connection closed, request resent");
                        request = unsent;
                    }
                    (None, Some(replay)) if failed.error().is_incomplete_message() => {
                        tracing::debug!(origin = %authority, error = %failed.error(), "pooled connection closed unanswered, idempotent request resent");
                        request = replay.into_request();
                    }
                    (None, _) => return Err(PlainError::Exchange(failed.into_error())),
                },
            }
        };
        // Boxed: opening a connection is the rare path, and its future
        // (connector, handshake) would otherwise make every request's
        // future, which hyper moves into place, about 0.9 KiB larger.
        let mut sender = Box::pin(self.connect(target)).await?;
        let response = sender
            .send_request(request)
            .await
            .map_err(PlainError::Exchange)?;
        Ok(self.hand_back_after(response, authority, sender))
    }

    /// The pool's key for `authority` (the map's own, when it has a list),
    /// and the newest idle connection to it that can take a request
    /// now, and since when it has been idle. Closed ones found on the way are
    /// dropped; busy ones (still sending an earlier request's body) stay.
    fn checkout(&self, authority: &str) -> (PoolKey, Option<IdleConnection>) {
        let mut idle = self.shared.lock();
        let Some((key, list)) = idle.by_origin.get_key_value_mut(authority) else {
            return (PoolKey::from(authority), None);
        };
        let key = key.clone();
        let mut i = list.len();
        while i > 0 {
            i -= 1;
            if list[i].sender.is_ready() {
                return (key, Some(list.remove(i)));
            }
            if list[i].sender.is_closed() {
                list.remove(i);
            }
        }
        (key, None)
    }

    /// Opens a connection to the origin of `target` and starts driving it.
    async fn connect(&self, target: Uri) -> Result<SendRequest<ProxyBody>, PlainError> {
        let mut connector = self.shared.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(PlainError::Connect)?;
        let io = connector.call(target).await.map_err(PlainError::Connect)?;
        let (sender, connection) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| PlainError::Connect(e.into()))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream connection ended with an error");
            }
        });
        Ok(sender)
    }

    fn hand_back_after(
        &self,
        response: Response<Incoming>,
        authority: PoolKey,
        sender: SendRequest<ProxyBody>,
    ) -> Response<PooledBody> {
        let give_back = GiveBack {
            pool: self.shared.clone(),
            authority,
            sender,
        };
        response.map(|body| PooledBody {
            body,
            give_back: Some(give_back),
            ended: false,
        })
    }

    /// Idle connections held for `authority` (open or not yet swept).
    #[cfg(test)]
    fn idle_count(&self, authority: &str) -> usize {
        self.shared
            .lock()
            .by_origin
            .get(authority)
            .map_or(0, Vec::len)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Idle> {
        // The map stays consistent at every point a panic could unwind from.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts a connection whose exchange ended back in the pool.
    fn check_in(self: &Arc<Self>, authority: PoolKey, sender: SendRequest<ProxyBody>) {
        if sender.is_closed() {
            return;
        }
        let since = Instant::now();
        let mut idle = self.lock();
        let list = idle.by_origin.entry(authority).or_default();
        if list.len() >= MAX_IDLE_PER_ORIGIN {
            list.remove(0);
        }
        list.push(IdleConnection { sender, since });
        let start_reaper = if idle.reaping {
            None
        } else {
            tokio::runtime::Handle::try_current().ok()
        };
        if start_reaper.is_some() {
            idle.reaping = true;
        }
        drop(idle);
        // Spawned without the lock: a runtime that is shutting down drops the
        // task at once, and its guard takes the lock.
        if let Some(runtime) = start_reaper {
            let guard = ReaperGuard {
                pool: Arc::downgrade(self),
                armed: true,
            };
            runtime.spawn(reap(guard, self.idle_timeout));
        }
    }
}

/// Closes idle connections older than `idle_timeout`, and those the origin
/// closed, every half `idle_timeout`; ends when the pool is empty or gone.
async fn reap(mut guard: ReaperGuard, idle_timeout: Duration) {
    let period = (idle_timeout / 2).max(Duration::from_millis(10));
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    loop {
        ticks.tick().await;
        let Some(pool) = guard.pool.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut idle = pool.lock();
        idle.by_origin.retain(|_, list| {
            list.retain(|c| {
                !c.sender.is_closed() && now.saturating_duration_since(c.since) < idle_timeout
            });
            !list.is_empty()
        });
        if idle.by_origin.is_empty() {
            idle.reaping = false;
            guard.armed = false;
            return;
        }
    }
}

/// Clears the pool's `reaping` flag if the sweeping task is dropped early
/// (its runtime shut down), so the next check-in starts another.
struct ReaperGuard {
    pool: Weak<Shared>,
    armed: bool,
}

impl Drop for ReaperGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Some(pool) = self.pool.upgrade() {
                pool.lock().reaping = false;
            }
        }
    }
}

/// A bodiless idempotent request's head, kept to send it again.
struct Replay {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl Replay {
    /// The copy, if `request` may be sent twice: its method is idempotent
    /// (RFC 9110 §9.2.2) and it has no body to replay.
    fn of(request: &Request<ProxyBody>) -> Option<Replay> {
        let idempotent = matches!(
            *request.method(),
            Method::GET
                | Method::HEAD
                | Method::OPTIONS
                | Method::TRACE
                | Method::PUT
                | Method::DELETE
        );
        (idempotent && request.body().is_end_stream()).then(|| Replay {
            method: request.method().clone(),
            uri: request.uri().clone(),
            headers: request.headers().clone(),
        })
    }

    fn into_request(self) -> Request<ProxyBody> {
        let mut request = Request::new(super::empty_body());
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.headers_mut() = self.headers;
        request
    }
}

/// The request target in origin form, `/path?query` (RFC 9112 §3.2.1).
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(path) if path.as_str() != "/" => {
            let mut parts = http::uri::Parts::default();
            parts.path_and_query = Some(path.clone());
            Uri::from_parts(parts).unwrap_or_default()
        }
        _ => Uri::default(),
    }
}

/// `Host` for `uri` (an `http` URI, as all in this pool): its host, and its
/// port unless it is the default (RFC 9112 §3.2).
fn host_field(uri: &Uri) -> Option<HeaderValue> {
    let host = uri.host()?;
    match uri.port_u16() {
        Some(port) if port != crate::origin::Scheme::Http.default_port() => {
            HeaderValue::from_str(&format!("{host}:{port}")).ok()
        }
        _ => HeaderValue::from_str(host).ok(),
    }
}

/// A response body from the plain-http pool: hands its connection back
/// when it has been read to the end.
pub struct PooledBody {
    body: Incoming,
    give_back: Option<GiveBack>,
    ended: bool,
}

struct GiveBack {
    pool: Arc<Shared>,
    authority: PoolKey,
    sender: SendRequest<ProxyBody>,
}

impl std::fmt::Debug for PooledBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBody")
            .field("body", &self.body)
            .field("pooled", &self.give_back.is_some())
            .finish_non_exhaustive()
    }
}

impl PooledBody {
    fn give_back(&mut self) {
        if let Some(GiveBack {
            pool,
            authority,
            sender,
        }) = self.give_back.take()
        {
            pool.check_in(authority, sender);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let frame = std::task::ready!(Pin::new(&mut this.body).poll_frame(cx));
        match &frame {
            None => {
                this.ended = true;
                this.give_back();
            }
            // A broken answer leaves the connection unusable: drop it.
            Some(Err(_)) => this.give_back = None,
            Some(Ok(_)) => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        // Readers stop polling once `is_end_stream` says so (a body with a
        // `Content-Length`, or none): the connection is then done with this
        // exchange too. A body dropped half-read takes its connection along.
        if self.body.is_end_stream() {
            self.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt;

    use super::*;
    use crate::policy::destination::DestinationPolicy;
    use crate::upstream::{connector, UpstreamFailure, UpstreamSettings};

    /// How the test origin ends each exchange.
    #[derive(Clone, Copy)]
    enum Ending {
        /// Keeps the connection open for the next request.
        KeepAlive,
        /// Says `Connection: close` and closes.
        ConnectionClose,
        /// Closes 50 ms after answering without saying so, as an origin
        /// whose keep-alive timeout fires.
        CloseSilently,
    }

    /// A blocking origin on its own threads (so it answers while the test's
    /// runtime is blocked): `body_len` bytes per answer.
    struct Origin {
        port: u16,
        accepted: Arc<AtomicUsize>,
        closed: Arc<AtomicUsize>,
        last_head: Arc<Mutex<String>>,
    }

    fn origin(body_len: usize, ending: Ending) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let last_head = Arc::new(Mutex::new(String::new()));
        let (a, c, h) = (accepted.clone(), closed.clone(), last_head.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                a.fetch_add(1, Ordering::SeqCst);
                let (c, h) = (c.clone(), h.clone());
                std::thread::spawn(move || {
                    serve(stream, body_len, ending, &h);
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Origin {
            port,
            accepted,
            closed,
            last_head,
        }
    }

    /// Answers requests (heads only) until the client closes, or once.
    fn serve(mut stream: TcpStream, body_len: usize, ending: Ending, last_head: &Mutex<String>) {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let end = loop {
                if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            };
            let head: Vec<u8> = buffer.drain(..end).collect();
            *last_head.lock().expect("lock") = String::from_utf8_lossy(&head).into_owned();
            let close = match ending {
                Ending::ConnectionClose => "Connection: close\r\n",
                _ => "",
            };
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {body_len}\r\n{close}\r\n");
            if stream.write_all(answer.as_bytes()).is_err()
                || stream.write_all(&vec![b'x'; body_len]).is_err()
            {
                return;
            }
            match ending {
                Ending::KeepAlive => {}
                Ending::ConnectionClose => return,
                Ending::CloseSilently => {
                    std::thread::sleep(Duration::from_millis(50));
                    return;
                }
            }
        }
    }

    fn pool(idle_timeout: Duration) -> PlainPool {
        let settings = UpstreamSettings {
            connect_timeout: Duration::from_secs(2),
            pool_idle_timeout: idle_timeout,
            extra_roots: Vec::new(),
        };
        let connector =
            connector(&settings, DestinationPolicy::allow_all(), false).expect("connector");
        PlainPool::new(connector, idle_timeout)
    }

    fn get(port: u16, path: &str) -> Request<ProxyBody> {
        Request::get(format!("http://127.0.0.1:{port}{path}"))
            .body(crate::upstream::empty_body())
            .expect("request")
    }

    /// One request, its body read to the end; returns the body's length.
    async fn fetch(pool: &PlainPool, port: u16) -> usize {
        let response = pool
            .request(get(port, "/page?q=1"))
            .await
            .expect("response");
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.expect("body");
        body.to_bytes().len()
    }

    fn authority(port: u16) -> String {
        format!("127.0.0.1:{port}")
    }

    #[tokio::test]
    async fn sequential_requests_share_one_connection_in_origin_form_with_host() {
        let origin = origin(600, Ending::KeepAlive);
        let pool = pool(Duration::from_secs(30));
        for _ in 0..5 {
            assert_eq!(fetch(&pool, origin.port).await, 600);
        }
        assert_eq!(origin.accepted.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(&authority(origin.port)), 1);
        let head = origin.last_head.lock().expect("lock").clone();
        assert!(head.starts_with("GET /page?q=1 HTTP/1.1\r\n"), "{head}");
        let host = format!("host: 127.0.0.1:{}\r\n", origin.port);
        assert!(head.to_ascii_lowercase().contains(&host), "{head}");
    }

    #[tokio::test]
    async fn a_body_dropped_half_read_takes_its_connection_along() {
        let origin = origin(1 << 20, Ending::KeepAlive);
        let pool = pool(Duration::from_secs(30));
        let response = pool
            .request(get(origin.port, "/big"))
            .await
            .expect("response");
        let mut body = response.into_body();
        let first = body.frame().await.expect("a frame").expect("data");
        assert!(first.data_ref().is_some_and(|d| d.len() < 1 << 20));
        drop(body);
        assert_eq!(pool.idle_count(&authority(origin.port)), 0);
        assert_eq!(fetch(&pool, origin.port).await, 1 << 20);
        assert_eq!(origin.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn connection_close_answers_are_not_reused() {
        let origin = origin(10, Ending::ConnectionClose);
        let pool = pool(Duration::from_secs(30));
        for _ in 0..3 {
            assert_eq!(fetch(&pool, origin.port).await, 10);
        }
        assert_eq!(origin.accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_request_on_a_connection_the_origin_just_closed_is_sent_again() {
        let origin = origin(10, Ending::CloseSilently);
        let pool = pool(Duration::from_secs(30));
        for exchange in 1..=4 {
            assert_eq!(fetch(&pool, origin.port).await, 10);
            // The origin closes while this runtime is blocked, so the pooled
            // connection still looks ready when the next request takes it,
            // and the request is written before the close is seen: the race
            // an origin's keep-alive timeout causes.
            std::thread::sleep(STALE_RISK + Duration::from_millis(50));
            assert_eq!(origin.closed.load(Ordering::SeqCst), exchange);
            assert_eq!(pool.idle_count(&authority(origin.port)), 1);
        }
        assert_eq!(origin.accepted.load(Ordering::SeqCst), 4);
        // A request with a body is not sent twice: the error stands.
        let post = Request::post(format!("http://127.0.0.1:{}/form", origin.port))
            .body(
                http_body_util::Full::new(Bytes::from_static(b"a=1"))
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .expect("request");
        let error = pool
            .request(post)
            .await
            .expect_err("written on a closed connection");
        assert!(matches!(error, PlainError::Exchange(e) if e.is_incomplete_message()));
        assert_eq!(origin.accepted.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn idle_connections_close_after_the_idle_timeout() {
        let origin = origin(10, Ending::KeepAlive);
        let pool = pool(Duration::from_millis(100));
        assert_eq!(fetch(&pool, origin.port).await, 10);
        assert_eq!(pool.idle_count(&authority(origin.port)), 1);
        for _ in 0..100 {
            if origin.closed.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            origin.closed.load(Ordering::SeqCst),
            1,
            "the origin saw it close"
        );
        assert_eq!(pool.idle_count(&authority(origin.port)), 0);
        // The sweeper ended with the pool empty; the next connection gets a new one.
        assert_eq!(fetch(&pool, origin.port).await, 10);
        for _ in 0..100 {
            if origin.closed.load(Ordering::SeqCst) == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(origin.closed.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn at_most_max_idle_connections_wait_per_origin() {
        let origin = origin(10, Ending::KeepAlive);
        let pool = pool(Duration::from_secs(30));
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..MAX_IDLE_PER_ORIGIN + 6 {
            let pool = pool.clone();
            requests.spawn(async move { fetch(&pool, origin.port).await });
        }
        while let Some(length) = requests.join_next().await {
            assert_eq!(length.expect("task"), 10);
        }
        assert!(origin.accepted.load(Ordering::SeqCst) > MAX_IDLE_PER_ORIGIN);
        assert_eq!(
            pool.idle_count(&authority(origin.port)),
            MAX_IDLE_PER_ORIGIN
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_failure() {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let pool = pool(Duration::from_secs(30));
        let error = pool.request(get(port, "/")).await.expect_err("refused");
        assert!(error.is_connect());
        assert!(matches!(
            UpstreamFailure::classify(&error),
            UpstreamFailure::Connect(why) if why.contains("refused")
        ));
    }
}
