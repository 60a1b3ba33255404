//! Which of the proxy's worker threads the running code is on.
//!
//! The proxy serves clients on `proxy.workers` threads, each with its own
//! single-threaded runtime (see [`crate::proxy::Server::run`]). Everything a
//! request touches that owns a background task, such as a pooled upstream
//! connection, is kept per worker and looked up by this index, so the request
//! and the tasks serving it never wake each other across threads.

use std::cell::Cell;
use std::num::NonZeroUsize;

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The index of the worker thread this code runs on; 0 on any other thread
/// (the control thread, tests), which then shares worker 0's resources.
pub fn current() -> usize {
    INDEX.with(Cell::get)
}

/// Marks the calling thread as worker `index`, for the rest of its life.
pub(crate) fn enter(index: usize) {
    INDEX.with(|cell| cell.set(index));
}

/// How many workers `proxy.workers = configured` means: the number itself,
/// or for 0 one per CPU the process may run on (at least 1).
pub fn count(configured: usize) -> NonZeroUsize {
    NonZeroUsize::new(configured)
        .or_else(|| std::thread::available_parallelism().ok())
        .unwrap_or(NonZeroUsize::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_count_is_kept_and_zero_means_the_cores() {
        assert_eq!(count(3).get(), 3);
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(count(0).get(), cores);
    }

    #[test]
    fn the_index_is_per_thread() {
        assert_eq!(current(), 0);
        let seen = std::thread::spawn(|| {
            enter(5);
            current()
        })
        .join()
        .unwrap();
        assert_eq!(seen, 5);
        assert_eq!(current(), 0, "another thread's index does not leak here");
    }
}
