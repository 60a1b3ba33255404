//! A response body that holds something (the host's pacing slot, the
//! connection's busy mark) until the body has been sent or dropped.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::upstream::{BoxError, ProxyBody};

/// A body that holds a value until the body is finished or dropped, so that
/// "in flight" lasts as long as the transfer.
pub struct HoldingBody<T> {
    inner: ProxyBody,
    held: Option<T>,
}

impl<T> HoldingBody<T> {
    /// Wraps `inner`, keeping `held` alive while it streams.
    pub fn new(inner: ProxyBody, held: T) -> Self {
        HoldingBody {
            inner,
            held: Some(held),
        }
    }
}

impl<T: Send + Unpin + 'static> Body for HoldingBody<T> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // hyper stops polling once `is_end_stream` says so and may keep the
        // body around afterwards, so release on the last frame too.
        let finished = match &polled {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if finished {
            self.held = None;
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
