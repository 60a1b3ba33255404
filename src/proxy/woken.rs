//! A future that is polled only after it asked to be.
//!
//! Every client connection's task selects between the hyper connection and
//! the server's drain signal. `select!` polls both branches each time the
//! task wakes, which is several times per request, and a poll of the drain
//! signal (`watch::Receiver::wait_for`) takes a read lock and the waiter
//! list's mutex each time: about 250 instructions, three times a request,
//! for a signal that fires once in the life of the process.
//! [`PolledWhenWoken`] polls the inner future on its first poll and then
//! only after the inner future's own waker has fired, so the task's other
//! wake-ups cost a waker registration (`AtomicWaker::register`, which
//! compares the waker and keeps it) and an atomic swap. Each connection
//! pays two allocations for this once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use atomic_waker::AtomicWaker;

/// Wraps `inner` so that it is polled only when its waker has fired (and on
/// the first poll). Ready when `inner` is.
pub(crate) struct PolledWhenWoken<F> {
    inner: Pin<Box<F>>,
    signal: Arc<Signal>,
    /// The waker handed to `inner`: it marks the signal, then wakes the
    /// task that last polled this future.
    waker: Waker,
}

/// What the inner future's waker touches.
struct Signal {
    /// Set when `inner` asked to be polled; starts set for the first poll.
    woken: AtomicBool,
    /// The task to wake.
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future> PolledWhenWoken<F> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: F) -> Self {
        let signal = Arc::new(Signal {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        PolledWhenWoken {
            inner: Box::pin(inner),
            waker: Waker::from(Arc::clone(&signal)),
            signal,
        }
    }
}

impl<F: Future> Future for PolledWhenWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Registered before the flag is read: a wake in between sets the
        // flag, which is then seen here or on the poll it causes.
        this.signal.task.register(cx.waker());
        if !this.signal.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// Counts its polls; ready once the watched value is true.
    struct Counted {
        polls: Arc<AtomicUsize>,
        changed: Pin<Box<dyn Future<Output = ()> + Send>>,
    }

    impl Future for Counted {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            self.changed.as_mut().poll(cx)
        }
    }

    #[tokio::test]
    async fn the_inner_future_is_polled_only_when_it_was_woken() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let polls = Arc::new(AtomicUsize::new(0));
        let inner = Counted {
            polls: polls.clone(),
            changed: Box::pin(async move {
                let mut rx = rx;
                let _ = rx.wait_for(|fired| *fired).await;
            }),
        };
        let mut gated = PolledWhenWoken::new(inner);
        let noop = Waker::noop();
        let mut cx = Context::from_waker(noop);
        // First poll reaches the inner future; the next ones, with no wake
        // of its own, do not.
        for _ in 0..5 {
            assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        tx.send_replace(true);
        // The inner waker fired: the next poll reaches it, and it is ready.
        assert!(Pin::new(&mut gated).poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_task_waiting_on_it_is_woken_when_the_inner_future_is() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let gated = PolledWhenWoken::new(async move {
            let mut rx = rx;
            let _ = rx.wait_for(|fired| *fired).await;
        });
        let waiter = tokio::spawn(gated);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        tx.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("joined");
    }
}
