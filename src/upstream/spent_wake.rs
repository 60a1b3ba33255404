//! Keeps an upstream connection's task asleep when its response's last
//! bytes are taken.
//!
//! hyper (1.12) hands a response body from the connection's task to the
//! reader through a channel. Taking a chunk out of it wakes the sending
//! side, so that a sender waiting for room sends the next one. It does so
//! even when there is no next one: the last chunk of a body with a
//! `Content-Length` ends the body on the sending side at once, and the
//! sender is gone. The connection's task was still woken, and polled for
//! nothing, once per response: callgrind counted three task polls of the
//! upstream connection per proxied request, the last one after the answer
//! was already written to the client (BENCHMARKS.md, "the last chunk wakes
//! nobody").
//!
//! [`Relayed`] drives a connection with a waker of its own, which passes
//! each wake-up on to the task, except while [`WakeRelay::poll_body`] is
//! polling one of the connection's bodies on the same thread: wake-ups from
//! inside that poll are held, and passed on afterwards unless the body has
//! ended, when no sender is left to want them. Only code inside the poll
//! can fire a wake-up on this thread while it runs; wake-ups from other
//! threads pass straight through.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use atomic_waker::AtomicWaker;
use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::body::Incoming;

thread_local! {
    /// The relay whose wake-ups this thread is holding (its address), or 0.
    static HOLDING: Cell<usize> = const { Cell::new(0) };
    /// A held wake-up came in.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// The waker side of one upstream connection: the task that drives it.
#[derive(Default)]
pub struct WakeRelay {
    task: AtomicWaker,
    /// Wake-ups passed on to the task, for the pool's tests.
    #[cfg(test)]
    pub(super) passed: std::sync::atomic::AtomicUsize,
}

impl WakeRelay {
    /// Polls `body`, one of this connection's response bodies, and passes
    /// on the connection's wake-ups from inside the poll unless the body
    /// has ended with it.
    pub fn poll_body(
        &self,
        mut body: Pin<&mut Incoming>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let (polled, held) = self.hold_wakes(|| body.as_mut().poll_frame(cx));
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => body.is_end_stream(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => false,
        };
        if held && !ended {
            self.pass_on();
        }
        polled
    }

    /// Runs `poll_body` with the connection's wake-ups held, and returns its
    /// result and whether a wake-up was held.
    fn hold_wakes<R>(&self, poll_body: impl FnOnce() -> R) -> (R, bool) {
        let me = std::ptr::from_ref(self) as usize;
        let outer = HOLDING.replace(me);
        let outer_held = HELD.replace(false);
        let result = poll_body();
        HOLDING.set(outer);
        let held = HELD.replace(outer_held);
        (result, held)
    }

    /// Wakes the connection's task.
    fn pass_on(&self) {
        #[cfg(test)]
        self.passed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.task.wake();
    }
}

impl Wake for WakeRelay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if HOLDING.get() == Arc::as_ptr(self) as usize {
            HELD.set(true);
        } else {
            self.pass_on();
        }
    }
}

/// A connection future driven through its [`WakeRelay`].
pub struct Relayed<C> {
    connection: C,
    relay: Arc<WakeRelay>,
    waker: Waker,
}

impl<C: Future + Unpin> Relayed<C> {
    /// Wraps `connection`; the relay goes with each response's body.
    pub fn new(connection: C) -> (Self, Arc<WakeRelay>) {
        let relay = Arc::new(WakeRelay::default());
        let waker = Waker::from(Arc::clone(&relay));
        let relayed = Relayed {
            connection,
            relay: Arc::clone(&relay),
            waker,
        };
        (relayed, relay)
    }
}

impl<C: Future + Unpin> Future for Relayed<C> {
    type Output = C::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = &mut *self;
        // Registered before the poll: a wake-up during it reaches the task.
        this.relay.task.register(cx.waker());
        Pin::new(&mut this.connection).poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the wake-ups that reach the task.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A connection future that keeps the last waker it was polled with.
    #[derive(Default)]
    struct Parked(Option<Waker>);

    impl Future for Parked {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0 = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn polled_once() -> (Relayed<Parked>, Arc<WakeRelay>, Arc<Count>) {
        let (mut relayed, relay) = Relayed::new(Parked::default());
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(Arc::clone(&count));
        assert!(Pin::new(&mut relayed)
            .poll(&mut Context::from_waker(&task))
            .is_pending());
        (relayed, relay, count)
    }

    fn woken(count: &Count) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    #[test]
    fn wake_ups_pass_through_to_the_task() {
        let (relayed, _relay, count) = polled_once();
        let inner = relayed.connection.0.clone().expect("polled");
        inner.wake_by_ref();
        assert_eq!(woken(&count), 1);
    }

    #[test]
    fn a_wake_up_inside_hold_wakes_is_held_and_reported() {
        let (relayed, relay, count) = polled_once();
        let inner = relayed.connection.0.clone().expect("polled");
        let ((), held) = relay.hold_wakes(|| inner.wake_by_ref());
        assert!(held);
        assert_eq!(woken(&count), 0, "held, not passed on");
        relay.pass_on();
        assert_eq!(woken(&count), 1);
    }

    #[test]
    fn another_connections_wake_up_is_not_held() {
        let (first, first_relay, first_count) = polled_once();
        let (second, _second_relay, second_count) = polled_once();
        let second_inner = second.connection.0.clone().expect("polled");
        let ((), held) = first_relay.hold_wakes(|| second_inner.wake_by_ref());
        assert!(!held);
        assert_eq!(woken(&second_count), 1);
        assert_eq!(woken(&first_count), 0);
        drop(first);
    }

    #[test]
    fn a_wake_up_from_another_thread_passes_while_holding() {
        let (relayed, relay, count) = polled_once();
        let inner = relayed.connection.0.clone().expect("polled");
        let ((), held) = relay.hold_wakes(|| {
            std::thread::spawn(move || inner.wake_by_ref())
                .join()
                .expect("waker thread");
        });
        assert!(!held);
        assert_eq!(woken(&count), 1);
    }

    #[test]
    fn holding_ends_with_the_call() {
        let (relayed, relay, count) = polled_once();
        let inner = relayed.connection.0.clone().expect("polled");
        let ((), held) = relay.hold_wakes(|| ());
        assert!(!held);
        inner.wake_by_ref();
        assert_eq!(woken(&count), 1);
    }
}
