//! Connection timers hyper 1 does not offer as such: an idle timeout for
//! keep-alive connections and a request-head timeout (slow-loris) that
//! starts with the first byte of a request, not with the wait for one.
//!
//! hyper's own `header_read_timeout` runs from the moment a connection waits
//! for its next request, so it also closes idle keep-alive connections and
//! cannot tell "idle" from "sending a head very slowly". Here the connection's
//! IO is wrapped: the service marks the connection busy while a request is
//! being answered (until its response body ends), and the wrapper enforces
//! `idle_timeout` while the connection is quiet and `header_read_timeout`
//! from the first byte of a new request until the request reaches the
//! service.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::head_scan::LengthFields;

/// The two limits.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Longest quiet time between requests.
    pub idle: Duration,
    /// Longest time from a request's first byte to its complete head.
    pub head: Duration,
}

/// What the service tells the IO wrapper: how many requests are in flight,
/// and when the last one ended.
///
/// The end of a request wakes nobody: the wrapper's timer stays armed while
/// the connection is busy, so the reader looks at the clock again by the
/// time the idle limit could pass, and counts the quiet from `quiet_at`.
/// (Waking the reader instead cost a whole extra poll of the connection's
/// task per request, about 1.3k instructions: the request ends inside that
/// same task's poll.)
#[derive(Debug)]
pub struct Activity {
    busy: AtomicUsize,
    /// The connection became a tunnel: only the idle timer applies.
    upgraded: std::sync::atomic::AtomicBool,
    /// Bumped when a request ends, so the wrapper knows to restart its idle
    /// clock from `quiet_at`.
    quiet_since: AtomicU64,
    /// When the last request ended, in nanoseconds after `born`.
    quiet_at: AtomicU64,
    born: Instant,
    /// The head being read carries both `Content-Length` and
    /// `Transfer-Encoding` (see [`LengthFields`]).
    ambiguous_length: std::sync::atomic::AtomicBool,
}

impl Activity {
    /// A fresh, quiet connection.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            busy: AtomicUsize::new(0),
            upgraded: std::sync::atomic::AtomicBool::new(false),
            quiet_since: AtomicU64::new(0),
            quiet_at: AtomicU64::new(0),
            born: Instant::now(),
            ambiguous_length: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Did the head of the request now in the service carry both
    /// `Content-Length` and `Transfer-Encoding`? Clears the mark.
    pub fn take_ambiguous_length(&self) -> bool {
        self.ambiguous_length.swap(false, Ordering::AcqRel)
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::AcqRel);
        BusyGuard(self.clone())
    }

    /// The connection now carries a tunnel (CONNECT): bytes no longer
    /// start request heads, so only the idle timer applies.
    pub fn mark_upgraded(&self) {
        self.upgraded.store(true, Ordering::Release);
    }

    fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }

    /// When the last request ended.
    fn quiet_at(&self) -> Instant {
        self.born + Duration::from_nanos(self.quiet_at.load(Ordering::Acquire))
    }
}

/// Holds a connection busy (a request in flight, an upgraded pipe).
#[derive(Debug)]
pub struct BusyGuard(Arc<Activity>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let activity = &self.0;
        // The time first, then the mark, then quiet: a reader that sees the
        // connection quiet sees the new mark, and with it this time.
        let since_born = Instant::now().saturating_duration_since(activity.born);
        let nanos = u64::try_from(since_born.as_nanos()).unwrap_or(u64::MAX);
        activity.quiet_at.store(nanos, Ordering::Release);
        activity.quiet_since.fetch_add(1, Ordering::AcqRel);
        activity.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connection's IO with the idle and head timers.
///
/// The clock is read when the read side would wait with bytes moved since
/// the last look, and when a request ends ([`BusyGuard`]), not for every
/// byte moved; the timer is re-armed only when a deadline comes earlier:
/// when it fires for a deadline that activity has since pushed back, it is
/// armed again for the new one. A keep-alive connection serving requests
/// back to back thus costs one clock read per request and no timer work.
pub struct IdleIo<T> {
    inner: T,
    activity: Arc<Activity>,
    timeouts: Timeouts,
    /// When the current quiet period started (last byte or end of request),
    /// as of the last look at the clock.
    quiet_from: Instant,
    /// Bytes moved since `quiet_from` was taken.
    moved: bool,
    /// The quiet period `quiet_from` was taken from (see `Activity`).
    seen_quiet_mark: u64,
    /// A request head not yet handed to the service, and since when.
    head: Head,
    /// The length fields of that head, as it arrives.
    length_fields: LengthFields,
    /// HTTP/1.x (heads are text, answered by hyper when unreadable).
    http1: bool,
    timer: Pin<Box<Sleep>>,
    /// hyper's own answers to heads it cannot read, and their replacements.
    own_answers: OwnAnswers,
}

/// Makes the proxy's own answer for the status of an answer hyper wrote
/// itself (and logs and counts it); `None` leaves hyper's answer as it is.
pub type Replace = Box<dyn Fn(u16) -> Option<Vec<u8>> + Send + Sync>;

/// hyper answers a request head it cannot read (`400` for a malformed line
/// or field, `414` for an over-long target, `431` for an over-large head)
/// itself, with a bare status and no body, and closes. That answer reaches
/// the IO as the only bytes written after a new head began and before any
/// request reached the service; it is swapped for the proxy's own answer
/// (reason header, text, a log line, a metric), like every other refusal.
#[derive(Default)]
struct OwnAnswers {
    replace: Option<Replace>,
    /// The replacement, and how much of it is written.
    pending: Vec<u8>,
    written: usize,
    /// The connection ends with the replacement: hyper's further bytes go
    /// nowhere.
    swallow: bool,
}

/// Where the connection is in receiving a request head.
#[derive(Debug, Clone, Copy)]
enum Head {
    /// No head bytes since the last request (or a request is in flight).
    None,
    /// Head bytes arrived; the time is taken at the next look at the clock.
    Started,
    /// Head bytes first seen at this time.
    Since(Instant),
}

impl<T> IdleIo<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, activity: Arc<Activity>, timeouts: Timeouts) -> IdleIo<T> {
        let now = Instant::now();
        IdleIo {
            inner,
            activity,
            timeouts,
            quiet_from: now,
            moved: false,
            seen_quiet_mark: 0,
            head: Head::None,
            length_fields: LengthFields::new(),
            http1: false,
            timer: Box::pin(tokio::time::sleep_until(now + timeouts.idle)),
            own_answers: OwnAnswers::default(),
        }
    }

    /// The connection speaks HTTP/1.x: its heads are scanned for ambiguous
    /// length fields ([`Activity::take_ambiguous_length`]), and hyper's own
    /// answers to unreadable heads are replaced with `replace`'s.
    #[must_use]
    pub fn for_http1(mut self, replace: Replace) -> IdleIo<T> {
        self.http1 = true;
        self.own_answers.replace = Some(replace);
        self
    }

    /// Is `data` hyper's own answer to a head it could not read? Only then
    /// is a complete, bodiless response head written while a new head has
    /// begun and no request is in the service.
    fn own_answer_status(&self, data: &[u8]) -> Option<u16> {
        self.own_answers.replace.as_ref()?;
        if matches!(self.head, Head::None)
            || !data.starts_with(b"HTTP/1.")
            || self.activity.is_busy()
            || self.activity.upgraded.load(Ordering::Acquire)
        {
            return None;
        }
        let rest = data.strip_prefix(b"HTTP/1.")?;
        let bodiless = data.ends_with(b"\r\n\r\n")
            && memchr::memmem::find(&data.to_ascii_lowercase(), b"content-length: 0\r\n").is_some();
        let status = std::str::from_utf8(rest.get(2..5)?).ok()?.parse().ok()?;
        bodiless.then_some(status)
    }

    /// Notes that bytes moved; the clock is read when the read side would
    /// wait next, which is at once for a head that stalls.
    ///
    /// Only bytes that keep a quiet connection alive count: while a request
    /// is in flight no limit applies, and its end restarts the quiet clock
    /// anyway. Bytes written on a quiet connection that is no tunnel are the
    /// last of the answer that just ended (flushed after its body ended),
    /// so they do not count either: a reader that may not wake again would
    /// take the clock late for them.
    fn saw_bytes(&mut self, read: bool) {
        if self.activity.is_busy() {
            self.head = Head::None;
            return;
        }
        let tunnel = self.activity.upgraded.load(Ordering::Acquire);
        if !read && !tunnel {
            return;
        }
        // A request that ended since the last look ended before these bytes.
        self.catch_up_on_quiet();
        if tunnel {
            self.head = Head::None;
        } else if matches!(self.head, Head::None) {
            self.head = Head::Started;
            self.length_fields = LengthFields::new();
        }
        self.moved = true;
    }

    /// If a request ended since the last look: quiet since its end, and no
    /// head started (bytes since then come after this look).
    fn catch_up_on_quiet(&mut self) {
        let mark = self.activity.quiet_since.load(Ordering::Acquire);
        if mark != self.seen_quiet_mark {
            self.seen_quiet_mark = mark;
            self.quiet_from = self.activity.quiet_at();
            self.moved = false;
            self.head = Head::None;
        }
    }

    /// When the read side would wait: has a limit passed?
    fn poll_timers(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        if self.activity.is_busy() {
            // No limit applies while busy, but the timer stays armed: the
            // end of the request wakes nobody (see `Activity`), so this
            // reader must look again by the time the idle limit could pass.
            self.head = Head::None;
            loop {
                match self.timer.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => {
                        let next = Instant::now() + self.timeouts.idle;
                        self.timer.as_mut().reset(next);
                    }
                }
            }
        }
        self.catch_up_on_quiet();
        let stamp_head = matches!(self.head, Head::Started);
        if self.moved || stamp_head {
            let now = Instant::now();
            if self.moved {
                self.quiet_from = now;
                self.moved = false;
            }
            if stamp_head {
                self.head = Head::Since(now);
            }
        }
        let (deadline, what) = match self.head {
            Head::Since(start) => (
                start + self.timeouts.head,
                "request head not complete in time",
            ),
            Head::None | Head::Started => (
                self.quiet_from + self.timeouts.idle,
                "idle connection timed out",
            ),
        };
        if deadline < self.timer.deadline() {
            self.timer.as_mut().reset(deadline);
        }
        loop {
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if Instant::now() >= deadline => {
                    return Poll::Ready(std::io::Error::new(std::io::ErrorKind::TimedOut, what));
                }
                // Fired for a deadline activity has pushed back since.
                Poll::Ready(()) => self.timer.as_mut().reset(deadline),
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.saw_bytes(true);
                    if self.http1 && !matches!(self.head, Head::None) {
                        self.length_fields.feed(&buf.filled()[before..]);
                        if self.length_fields.ambiguous() {
                            self.activity
                                .ambiguous_length
                                .store(true, Ordering::Release);
                        }
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.poll_timers(cx) {
                Poll::Ready(error) => Poll::Ready(Err(error)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> IdleIo<T> {
    /// Writes what is left of a replacement answer; ready when none is.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let own = &mut self.own_answers;
        while own.written < own.pending.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &own.pending[own.written..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            own.written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `data` (all of it, as hyper sees it) in place of hyper's own
    /// answer, if it is one: queues the replacement.
    fn took_own_answer(&mut self, data: &[u8]) -> bool {
        if self.own_answers.swallow {
            return true;
        }
        let Some(status) = self.own_answer_status(data) else {
            return false;
        };
        let Some(replacement) = self.own_answers.replace.as_ref().and_then(|r| r(status)) else {
            return false;
        };
        self.own_answers.pending = replacement;
        self.own_answers.written = 0;
        self.own_answers.swallow = true;
        true
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.took_own_answer(data) {
            // hyper's bytes count as written; the replacement goes out as
            // far as the socket takes it now, the rest on flush.
            let _ = this.poll_pending(cx)?;
            return Poll::Ready(Ok(data.len()));
        }
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.saw_bytes(false);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let maybe_own_answer = this.own_answers.swallow
            || (this.own_answers.replace.is_some()
                && !matches!(this.head, Head::None)
                && bufs.first().is_some_and(|b| b.starts_with(b"HTTP/1.")));
        if maybe_own_answer {
            // Rare (an answer before any request reached the service): look at
            // the whole message.
            let whole: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            if this.took_own_answer(&whole) {
                let _ = this.poll_pending(cx)?;
                return Poll::Ready(Ok(whole.len()));
            }
        }
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.saw_bytes(false);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const TIMEOUTS: Timeouts = Timeouts {
        idle: Duration::from_secs(60),
        head: Duration::from_secs(10),
    };

    type Wrapped = IdleIo<tokio::io::DuplexStream>;

    /// A connection whose first request head (18 bytes) has been read.
    async fn after_one_head() -> (tokio::io::DuplexStream, Arc<Activity>, Wrapped) {
        let (mut client, server) = tokio::io::duplex(64);
        let activity = Activity::new();
        let mut io = IdleIo::new(server, activity.clone(), TIMEOUTS);
        client
            .write_all(b"GET / HTTP/1.1\r\n\r\n")
            .await
            .expect("write");
        let mut buf = [0u8; 64];
        assert_eq!(io.read(&mut buf).await.expect("head"), 18);
        (client, activity, io)
    }

    /// The next read fails with a timeout, `after` from now.
    async fn times_out_after(io: &mut Wrapped, after: Duration, why: &str) {
        let started = Instant::now();
        let mut buf = [0u8; 64];
        let error = io.read(&mut buf).await.expect_err(why);
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), after);
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_connection_closes_after_idle_timeout() {
        let (client, server) = tokio::io::duplex(64);
        let activity = Activity::new();
        let mut io = IdleIo::new(server, activity, TIMEOUTS);
        let _client = client;
        times_out_after(&mut io, Duration::from_secs(60), "times out").await;
    }

    #[tokio::test(start_paused = true)]
    async fn slow_head_closes_after_head_timeout() {
        let (mut client, server) = tokio::io::duplex(64);
        let activity = Activity::new();
        let mut io = IdleIo::new(server, activity, TIMEOUTS);
        client.write_all(b"GET ").await.expect("write");
        let mut buf = [0u8; 8];
        assert_eq!(io.read(&mut buf).await.expect("first bytes"), 4);
        times_out_after(&mut io, Duration::from_secs(10), "times out").await;
    }

    #[tokio::test(start_paused = true)]
    async fn busy_connection_has_no_timer_and_quiet_restarts_after() {
        let (_client, activity, mut io) = after_one_head().await;
        let guard = activity.begin();
        // A slow upstream: 5 minutes busy, no timer fires.
        let mut buf = [0u8; 64];
        let waiting = tokio::time::timeout(Duration::from_secs(300), io.read(&mut buf)).await;
        assert!(waiting.is_err(), "no timeout while busy");
        drop(guard);
        times_out_after(&mut io, Duration::from_secs(60), "idle after the request").await;
    }

    /// The end of a request wakes nobody: a reader that parked while the
    /// connection was busy still times out `idle` after the request ended,
    /// through the timer it kept armed, and not before.
    #[tokio::test(start_paused = true)]
    async fn a_request_ending_under_a_parked_reader_starts_the_idle_clock() {
        let (_client, activity, mut io) = after_one_head().await;
        let guard = activity.begin();
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let error = io.read(&mut buf).await.expect_err("idle after the request");
            (error.kind(), Instant::now())
        });
        // Busy for 150 s: the timer fires twice meanwhile and is re-armed.
        tokio::time::sleep(Duration::from_secs(150)).await;
        let ended = Instant::now();
        drop(guard);
        let (kind, closed) = tokio::time::timeout(Duration::from_secs(600), reader)
            .await
            .expect("the reader is woken")
            .expect("reader task");
        assert_eq!(kind, std::io::ErrorKind::TimedOut);
        assert_eq!(closed - ended, Duration::from_secs(60));
    }

    /// The reader need not look between the end of a request and the first
    /// bytes of the next: those bytes still start the head limit.
    #[tokio::test(start_paused = true)]
    async fn a_head_begun_before_the_reader_looked_again_gets_the_head_limit() {
        let (mut client, activity, mut io) = after_one_head().await;
        drop(activity.begin());
        client.write_all(b"GET ").await.expect("write");
        let mut buf = [0u8; 64];
        assert_eq!(io.read(&mut buf).await.expect("first bytes"), 4);
        times_out_after(&mut io, Duration::from_secs(10), "head times out").await;
    }

    #[tokio::test(start_paused = true)]
    async fn requests_push_the_idle_deadline_back_and_a_head_brings_it_forward() {
        let (mut client, server) = tokio::io::duplex(64);
        let activity = Activity::new();
        let mut io = IdleIo::new(server, activity.clone(), TIMEOUTS);
        let mut buf = [0u8; 64];
        // Three requests 40 s apart: each end of request restarts the idle
        // clock, though the timer armed first would fire at 60 s.
        for _ in 0..3 {
            let quiet = tokio::time::timeout(Duration::from_secs(40), io.read(&mut buf)).await;
            assert!(quiet.is_err(), "no timeout within 40 s of quiet");
            client
                .write_all(b"GET / HTTP/1.1\r\n\r\n")
                .await
                .expect("write");
            assert_eq!(io.read(&mut buf).await.expect("head"), 18);
            drop(activity.begin());
        }
        // 45 s quiet, then half a head: the head limit ends 10 s later,
        // before the idle one would (15 s later, 60 s after the request).
        let quiet = tokio::time::timeout(Duration::from_secs(45), io.read(&mut buf)).await;
        assert!(quiet.is_err(), "no timeout within 45 s of quiet");
        client.write_all(b"GET ").await.expect("write");
        assert_eq!(io.read(&mut buf).await.expect("first bytes"), 4);
        times_out_after(&mut io, Duration::from_secs(10), "head times out").await;
    }

    #[tokio::test(start_paused = true)]
    async fn tunnels_get_only_the_idle_timer() {
        let (mut client, server) = tokio::io::duplex(64);
        let activity = Activity::new();
        activity.mark_upgraded();
        let mut io = IdleIo::new(server, activity, TIMEOUTS);
        let mut buf = [0u8; 8];
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(30)).await;
            client.write_all(b"x").await.expect("write");
            let n = io
                .read(&mut buf)
                .await
                .expect("tunnel bytes keep it alive past the head timeout");
            assert_eq!(n, 1);
        }
    }
}
