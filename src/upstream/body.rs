//! The bodies on either side of an exchange with an origin.
//!
//! [`OutgoingBody`] carries the client's request body to the origin and
//! notes when it fails: that is where a client's broken upload shows, and
//! hyper would otherwise report it to the exchange as one more error of the
//! connection (over HTTP/2, as a reset stream). The exchange reads the note
//! ([`BodyWatch`]) to tag its error [`UpstreamError::ClientBody`].
//!
//! [`UpstreamBody`] carries the origin's answer back and returns its
//! connection to the pool when the answer has been read to the end: an
//! HTTP/1.1 connection is checked in, an HTTP/2 one marked used. One whose
//! answer broke off, or was dropped half-read, is not checked in, which
//! closes it (an HTTP/2 stream is merely reset).
//!
//! [`UpstreamError::ClientBody`]: super::UpstreamError::ClientBody

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::pool::{Http1Sender, Pool, PoolKey};
use super::{BoxError, ProxyBody};

/// A request body on its way to an origin.
pub(super) struct OutgoingBody {
    inner: ProxyBody,
    /// Set when `inner` fails; absent for a body that is empty from the
    /// start (most requests), which cannot fail.
    failed: Option<Arc<AtomicBool>>,
}

/// Tells whether a request's [`OutgoingBody`] failed.
pub(super) struct BodyWatch(Option<Arc<AtomicBool>>);

impl BodyWatch {
    /// Did the client's body fail while it was being sent?
    pub(super) fn failed(&self) -> bool {
        // Set by the connection's task before it reports the exchange's
        // error, which reaches the request through a channel: that hand-over
        // orders the two.
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Acquire))
    }
}

impl OutgoingBody {
    /// `request` with its body watched.
    pub(super) fn watch(request: Request<ProxyBody>) -> (Request<OutgoingBody>, BodyWatch) {
        let failed = (!request.body().is_end_stream()).then(|| Arc::new(AtomicBool::new(false)));
        let watch = BodyWatch(failed.clone());
        (request.map(|inner| OutgoingBody { inner, failed }), watch)
    }

    /// No body.
    pub(super) fn empty() -> OutgoingBody {
        OutgoingBody {
            inner: super::empty_body(),
            failed: None,
        }
    }
}

impl Body for OutgoingBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let (Poll::Ready(Some(Err(_))), Some(failed)) = (&polled, &self.failed) {
            failed.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An origin's response body, streamed; hands its connection back to the
/// pool when it has been read to the end.
pub struct UpstreamBody {
    body: Incoming,
    give_back: Option<GiveBack>,
    ended: bool,
}

enum GiveBack {
    /// An HTTP/1.1 connection on loan for this exchange.
    Http1 {
        pool: Pool,
        key: PoolKey,
        sender: Http1Sender,
    },
    /// The shared HTTP/2 connection `id`.
    Http2 { pool: Pool, key: PoolKey, id: u64 },
}

impl UpstreamBody {
    /// The body of an answer on an HTTP/1.1 connection lent from `pool`.
    pub(super) fn http1(body: Incoming, pool: Pool, key: PoolKey, sender: Http1Sender) -> Self {
        UpstreamBody {
            body,
            give_back: Some(GiveBack::Http1 { pool, key, sender }),
            ended: false,
        }
    }

    /// The body of an answer on `pool`'s shared HTTP/2 connection `id`.
    pub(super) fn http2(body: Incoming, pool: Pool, key: PoolKey, id: u64) -> Self {
        UpstreamBody {
            body,
            give_back: Some(GiveBack::Http2 { pool, key, id }),
            ended: false,
        }
    }

    fn give_back(&mut self) {
        match self.give_back.take() {
            Some(GiveBack::Http1 { pool, key, sender }) => pool.check_in_http1(key, sender),
            Some(GiveBack::Http2 { pool, key, id }) => pool.touch_http2(&key, id),
            None => {}
        }
    }
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("body", &self.body)
            .field("pooled", &self.give_back.is_some())
            .finish_non_exhaustive()
    }
}

impl Body for UpstreamBody {
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
            // A broken answer leaves an HTTP/1.1 connection unusable: drop it.
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

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        // Readers stop polling once `is_end_stream` says so (a body with a
        // `Content-Length`, or none): the connection is then done with this
        // exchange too. A body dropped half-read takes its connection along.
        if self.body.is_end_stream() {
            self.give_back();
        }
    }
}
