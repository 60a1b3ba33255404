//! Sends the requests a worker has for its plain-http origins together, in
//! one system call per batch.
//!
//! Writing a request to an origin's socket wakes the origin's process, and
//! Linux lets the woken process run at the end of that very `writev`: when
//! the origin shares the proxy's core (the load benchmark pins nginx and
//! the proxy to one), it preempts the proxy, answers that one request and
//! sleeps again, twice a context switch per request. The load rig counted
//! 0.65 such preemptions per proxied request. A process that sends many
//! requests in one system call wakes the origin once for all of them: with
//! the batch below, 0.085 preemptions per request, and 11.4 instead of
//! 14.2 µs of the proxy's CPU per request (BENCHMARKS.md, "One wake-up
//! per batch").
//!
//! So a worker thread that [`install`]s a batch keeps the small writes of
//! its upstream connections ([`BatchedIo`]) in each connection's outbox,
//! and a flusher task (spawned by [`install`]) sends every outbox in one
//! `io_uring_enter`. The flusher is woken by the first write of a batch,
//! and tokio runs it after the tasks already woken, so the connections
//! that had a request to send in the same pass of the scheduler share the
//! system call. Each send is `MSG_DONTWAIT`: it completes inside the call,
//! fully, in part or not at all (`EAGAIN`, a full socket buffer), so no
//! buffer is in the kernel's hands after the call returns. What a send
//! left behind stays in the outbox, and the connection's own task writes
//! it the ordinary way (it is woken for that); a failed send is reported
//! by the connection's next write or flush.
//!
//! Writes larger than [`MAX_BATCHED_BYTES`] (uploads), writes on a thread
//! without a batch (tests, the robots.txt fetcher) and writes on a TLS
//! connection go straight to the socket. Answers to clients are not
//! batched: a client on another core is not preempted by the proxy's
//! writes, and batching them saved no time on the load rig (the proxy's
//! CPU per request fell, the origin's rose by as much: the loopback
//! delivery work moved, it did not shrink).

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use hyper::rt::{Read, ReadBufCursor, Write};

/// Writes up to this size wait for the batch; larger ones go straight out.
pub const MAX_BATCHED_BYTES: usize = 16 * 1024;

/// Submission queue entries per `io_uring_enter`; larger batches take more
/// calls.
const RING_ENTRIES: u32 = 256;

/// A connection's bytes waiting for the batch, and what became of the last
/// send.
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    /// In this thread's batch: the next flush sends `bytes`. Cleared when
    /// the connection shuts down or drops, so the batch never sends on a
    /// closed socket's number.
    queued: bool,
    /// A batched send failed; the next write or flush reports it.
    error: Option<io::Error>,
    /// The connection's task (the waker of its last batched write), woken
    /// when a flush left bytes, failed, or made room for a waiting write.
    task: Option<Waker>,
    /// A write waits for the flush to empty the outbox.
    waiting: bool,
}

struct Shared {
    fd: RawFd,
    outbox: Mutex<Outbox>,
}

impl Shared {
    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An upstream connection's I/O whose small writes go out with the worker's
/// batch. Reads pass straight through.
pub struct BatchedIo<T> {
    inner: T,
    /// `None` when the connection has no plain socket to send on (TLS).
    shared: Option<Arc<Shared>>,
}

impl<T> BatchedIo<T> {
    /// Wraps `inner`, whose plain TCP socket (if any) is `fd`. The socket
    /// must stay open as long as `inner` lives.
    pub fn new(inner: T, fd: Option<RawFd>) -> Self {
        BatchedIo {
            inner,
            shared: fd.map(|fd| {
                Arc::new(Shared {
                    fd,
                    outbox: Mutex::new(Outbox::default()),
                })
            }),
        }
    }
}

impl<T: Write + Unpin> BatchedIo<T> {
    /// A write: what a flush left goes first, then `bufs` go to the batch,
    /// or straight out through `direct` when they cannot.
    fn poll_write_via(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
        direct: impl FnOnce(Pin<&mut T>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_drain(cx))?;
        if let Some(polled) = self.try_batch(cx, bufs) {
            return polled;
        }
        direct(Pin::new(&mut self.inner), cx)
    }

    /// Writes what a flush left in the outbox, straight to the socket.
    /// Ready when the outbox is empty (or not waiting for the batch).
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(shared) = &self.shared else {
            return Poll::Ready(Ok(()));
        };
        let mut outbox = shared.outbox();
        if let Some(error) = outbox.error.take() {
            return Poll::Ready(Err(error));
        }
        while !outbox.queued && !outbox.bytes.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &outbox.bytes) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    outbox.bytes.drain(..n);
                }
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Puts `bufs` in the outbox for the batch when they are small enough
    /// and this thread batches; `None` when they must go straight out.
    fn try_batch(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Option<Poll<io::Result<usize>>> {
        let shared = self.shared.as_ref()?;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        let mut outbox = shared.outbox();
        if outbox.bytes.len() + len > MAX_BATCHED_BYTES {
            if outbox.queued {
                // Wait for the flush to take what is there.
                remember_task(&mut outbox, cx);
                outbox.waiting = true;
                return Some(Poll::Pending);
            }
            return None;
        }
        if !outbox.queued {
            if !outbox.bytes.is_empty() || !enqueue(shared) {
                return None;
            }
            outbox.queued = true;
        }
        remember_task(&mut outbox, cx);
        for buf in bufs {
            outbox.bytes.extend_from_slice(buf);
        }
        Some(Poll::Ready(Ok(len)))
    }
}

/// Keeps the waker of the task writing, for the flush to wake. A
/// connection's task keeps its waker, so this clones once per connection.
fn remember_task(outbox: &mut Outbox, cx: &Context<'_>) {
    if !outbox
        .task
        .as_ref()
        .is_some_and(|task| task.will_wake(cx.waker()))
    {
        outbox.task = Some(cx.waker().clone());
    }
}

impl<T: Read + Unpin> Read for BatchedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for BatchedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_via(cx, &[io::IoSlice::new(buf)], |io, cx| {
                io.poll_write(cx, buf)
            })
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_via(cx, bufs, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// Bytes waiting for the batch count as flushed: the flusher sends them
    /// in this pass of the scheduler, before the thread can sleep.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(shared) = &this.shared {
            // Sent here rather than left for the batch: the socket closes.
            shared.outbox().queued = false;
        }
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<T> Drop for BatchedIo<T> {
    fn drop(&mut self) {
        // The socket closes with `inner`, after this: the batch must not
        // send on its number, which the next socket opened may reuse. The
        // bytes it was holding go now, as a socket's own buffer would
        // still deliver them after a close (best effort: never blocks).
        if let Some(shared) = &self.shared {
            let mut outbox = shared.outbox();
            if std::mem::take(&mut outbox.queued) {
                use std::io::Write as _;
                use std::os::fd::FromRawFd;
                // SAFETY: `inner` owns the socket and is dropped after this
                // body, so the descriptor is open; `ManuallyDrop` leaves it
                // to `inner` to close.
                let socket = std::mem::ManuallyDrop::new(unsafe {
                    std::net::TcpStream::from_raw_fd(shared.fd)
                });
                let _ = (&*socket).write(&outbox.bytes);
            }
            outbox.bytes = Vec::new();
        }
    }
}

/// A worker thread's batch: its ring, the outboxes to send, the flusher.
struct Batch {
    ring: io_uring::IoUring,
    queue: Vec<Arc<Shared>>,
    flusher: Option<Waker>,
    /// System calls made and sends in them, for the tests.
    #[cfg(test)]
    calls: usize,
    #[cfg(test)]
    sends: usize,
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// Adds `shared` to this thread's batch and wakes the flusher for the first
/// of a batch. False when this thread has no batch.
fn enqueue(shared: &Arc<Shared>) -> bool {
    BATCH.with(|batch| {
        let Ok(mut batch) = batch.try_borrow_mut() else {
            return false;
        };
        let Some(batch) = batch.as_mut() else {
            return false;
        };
        if batch.queue.is_empty() {
            if let Some(flusher) = &batch.flusher {
                flusher.wake_by_ref();
            }
        }
        batch.queue.push(Arc::clone(shared));
        true
    })
}

/// Gives this thread a batch (an io_uring) and spawns its flusher. Call it
/// inside a current-thread runtime on the thread that runs it (a proxy
/// worker): the flusher must run on the thread whose writes it sends.
///
/// # Errors
///
/// The ring could not be set up (io_uring disabled or unsupported): writes
/// then go straight to their sockets.
pub fn install() -> io::Result<()> {
    let ring = io_uring::IoUring::new(RING_ENTRIES)?;
    BATCH.with(|batch| {
        *batch.borrow_mut() = Some(Batch {
            ring,
            queue: Vec::new(),
            flusher: None,
            #[cfg(test)]
            calls: 0,
            #[cfg(test)]
            sends: 0,
        });
    });
    tokio::spawn(flush_when_woken());
    Ok(())
}

/// The flusher: sends the batch each time its first write wakes it. Runs
/// for as long as the runtime does.
async fn flush_when_woken() {
    std::future::poll_fn(|cx| {
        BATCH.with(|cell| {
            let mut taken = cell.borrow_mut().take();
            if let Some(batch) = taken.as_mut() {
                batch.flusher = Some(cx.waker().clone());
                if let Err(error) = flush(batch) {
                    // The ring is dropped with the batch: the connections
                    // write for themselves from now on.
                    tracing::warn!(%error, "batched upstream sends failed; sending one by one");
                    return Poll::Ready(());
                }
            }
            *cell.borrow_mut() = taken;
            Poll::Pending
        })
    })
    .await;
}

/// One outbox being sent: whose, and its bytes (out of the outbox during
/// the call, so the kernel reads a buffer nothing else touches).
struct Sending {
    shared: Arc<Shared>,
    bytes: Vec<u8>,
    sent: io::Result<usize>,
}

/// Sends every queued outbox, `RING_ENTRIES` per system call.
fn flush(batch: &mut Batch) -> io::Result<()> {
    let mut sending: Vec<Sending> = Vec::with_capacity(batch.queue.len());
    // Drained, not taken: the queue keeps its room for the next batch.
    for shared in batch.queue.drain(..) {
        let bytes = {
            let mut outbox = shared.outbox();
            if !outbox.queued {
                continue;
            }
            outbox.queued = false;
            std::mem::take(&mut outbox.bytes)
        };
        sending.push(Sending {
            shared,
            bytes,
            sent: Ok(0),
        });
    }
    let mut result = Ok(());
    for chunk in sending.chunks_mut(RING_ENTRIES as usize) {
        if result.is_ok() {
            result = send_all(&mut batch.ring, chunk);
            #[cfg(test)]
            {
                batch.calls += 1;
                batch.sends += chunk.len();
            }
        }
    }
    for Sending {
        shared,
        mut bytes,
        sent,
    } in sending
    {
        let mut outbox = shared.outbox();
        let left = match sent {
            Ok(n) if n >= bytes.len() => {
                bytes.clear();
                false
            }
            Ok(n) => {
                bytes.drain(..n);
                true
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => true,
            Err(error) => {
                bytes.clear();
                outbox.error = Some(error);
                true
            }
        };
        // Anything written to the outbox during the call came after.
        bytes.append(&mut outbox.bytes);
        outbox.bytes = bytes;
        // The task writes what is left itself (its next flush polls the
        // socket), reports the error, or writes what waited for room.
        if left || outbox.waiting {
            outbox.waiting = false;
            if let Some(task) = &outbox.task {
                task.wake_by_ref();
            }
        }
    }
    result
}

/// Sends one chunk of outboxes in one `io_uring_enter` and records what
/// each send did. An error means the ring is unusable; the chunk's bytes
/// are then left for their connections to write.
fn send_all(ring: &mut io_uring::IoUring, chunk: &mut [Sending]) -> io::Result<()> {
    const MSG_DONTWAIT: i32 = 0x40;
    const MSG_NOSIGNAL: i32 = 0x4000;
    for (index, sending) in chunk.iter().enumerate() {
        let len = u32::try_from(sending.bytes.len()).unwrap_or(u32::MAX);
        let entry = io_uring::opcode::Send::new(
            io_uring::types::Fd(sending.shared.fd),
            sending.bytes.as_ptr(),
            len,
        )
        .flags(MSG_DONTWAIT | MSG_NOSIGNAL)
        .build()
        .user_data(index as u64);
        // SAFETY: the buffer is owned by `chunk`, which outlives the call
        // below; every send is MSG_DONTWAIT, so each completes within it
        // and the kernel holds no pointer once it has returned with all
        // completions. The chunk is at most the ring's size, so the push
        // cannot fail.
        unsafe {
            ring.submission()
                .push(&entry)
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        }
    }
    let mut done = 0;
    while done < chunk.len() {
        match ring.submit_and_wait(chunk.len() - done) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
        for completion in ring.completion() {
            let Some(sending) = usize::try_from(completion.user_data())
                .ok()
                .and_then(|index| chunk.get_mut(index))
            else {
                continue;
            };
            let result = completion.result();
            sending.sent = if result >= 0 {
                Ok(usize::try_from(result).unwrap_or(0))
            } else {
                Err(io::Error::from_raw_os_error(-result))
            };
            done += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use std::io::Read as _;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    type Io = BatchedIo<TokioIo<tokio::net::TcpStream>>;

    /// A loopback connection: the proxy's side, batched, and the origin's.
    async fn connection() -> (Io, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let stream = tokio::net::TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (peer, _) = listener.accept().expect("accept");
        let fd = stream.as_raw_fd();
        (BatchedIo::new(TokioIo::new(stream), Some(fd)), peer)
    }

    async fn write(io: &mut Io, bytes: &[u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, bytes)).await
    }

    async fn flush(io: &mut Io) -> io::Result<()> {
        std::future::poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await
    }

    /// (system calls, sends) of this thread's batch so far.
    fn stats() -> (usize, usize) {
        BATCH.with(|b| b.borrow().as_ref().map_or((0, 0), |b| (b.calls, b.sends)))
    }

    fn read_exactly(peer: &mut std::net::TcpStream, len: usize) -> Vec<u8> {
        peer.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut got = vec![0; len];
        peer.read_exact(&mut got).expect("read");
        got
    }

    fn batched_runtime() -> tokio::runtime::Runtime {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async { install().expect("io_uring") });
        runtime
    }

    #[test]
    fn the_writes_of_one_pass_go_out_in_one_system_call() {
        batched_runtime().block_on(async {
            let mut connections = Vec::new();
            for _ in 0..8 {
                connections.push(connection().await);
            }
            for (index, (io, _)) in connections.iter_mut().enumerate() {
                let request = format!("GET /{index} HTTP/1.1\r\n\r\n");
                assert_eq!(
                    write(io, request.as_bytes()).await.expect("write"),
                    request.len()
                );
                flush(io).await.expect("flush");
            }
            assert_eq!(stats(), (0, 0), "nothing sent before the flusher ran");
            tokio::task::yield_now().await;
            assert_eq!(stats(), (1, 8));
            for (index, (_, peer)) in connections.iter_mut().enumerate() {
                let request = format!("GET /{index} HTTP/1.1\r\n\r\n");
                assert_eq!(read_exactly(peer, request.len()), request.as_bytes());
            }
        });
    }

    #[test]
    fn writes_before_the_flush_go_out_together_in_order() {
        batched_runtime().block_on(async {
            let (mut io, mut peer) = connection().await;
            write(&mut io, b"first ").await.expect("write");
            write(&mut io, b"second").await.expect("write");
            flush(&mut io).await.expect("flush");
            tokio::task::yield_now().await;
            assert_eq!(stats(), (1, 1));
            assert_eq!(read_exactly(&mut peer, 12), b"first second");
        });
    }

    #[test]
    fn what_a_full_socket_left_is_written_by_the_connection() {
        batched_runtime().block_on(async {
            let (mut io, mut peer) = connection().await;
            // Fill the socket: large writes go straight out, until it blocks.
            let chunk = vec![b'a'; 64 * 1024];
            let mut written = 0;
            loop {
                let polled = std::future::poll_fn(|cx| {
                    Poll::Ready(Pin::new(&mut io).poll_write(cx, &chunk))
                })
                .await;
                match polled {
                    Poll::Ready(Ok(n)) => written += n,
                    Poll::Ready(Err(error)) => panic!("write: {error}"),
                    Poll::Pending => break,
                }
            }
            // A small write waits for the batch, whose send finds no room.
            assert_eq!(write(&mut io, b"tail").await.expect("write"), 4);
            tokio::task::yield_now().await;
            assert_eq!(stats(), (1, 1));
            let reader = std::thread::spawn(move || read_exactly(&mut peer, written + 4));
            // The connection's own flush writes the rest as room appears.
            tokio::time::timeout(Duration::from_secs(10), flush(&mut io))
                .await
                .expect("flushed in time")
                .expect("flush");
            let got = reader.join().expect("reader");
            assert!(got[..written].iter().all(|&b| b == b'a'));
            assert_eq!(&got[written..], b"tail");
        });
    }

    #[test]
    fn a_failed_send_is_reported_by_the_next_flush() {
        batched_runtime().block_on(async {
            let (mut io, peer) = connection().await;
            // The origin resets the connection (close with linger 0).
            peer.set_nonblocking(true).expect("nonblocking");
            let peer = tokio::net::TcpStream::from_std(peer).expect("peer");
            peer.set_zero_linger().expect("linger");
            drop(peer);
            tokio::time::sleep(Duration::from_millis(50)).await;
            write(&mut io, b"GET / HTTP/1.1\r\n\r\n")
                .await
                .expect("queued");
            tokio::task::yield_now().await;
            assert_eq!(stats(), (1, 1));
            let error = flush(&mut io).await.expect_err("reset reported");
            assert!(
                matches!(
                    error.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ),
                "{error}"
            );
        });
    }

    #[test]
    fn a_connection_dropped_before_the_flush_sends_its_bytes_once_on_the_way_out() {
        batched_runtime().block_on(async {
            let (mut io, mut peer) = connection().await;
            write(&mut io, b"last words").await.expect("queued");
            drop(io);
            tokio::task::yield_now().await;
            assert_eq!(stats(), (0, 0), "the batch skips a closed socket");
            let mut rest = Vec::new();
            peer.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            peer.read_to_end(&mut rest).expect("eof");
            assert_eq!(rest, b"last words");
        });
    }

    #[tokio::test]
    async fn without_a_batch_writes_go_straight_out() {
        let (mut io, mut peer) = connection().await;
        write(&mut io, b"direct").await.expect("write");
        assert_eq!(read_exactly(&mut peer, 6), b"direct");
        assert_eq!(stats(), (0, 0));
    }
}
