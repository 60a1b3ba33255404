//! Bodies generated on the fly for streaming tests: a deterministic byte pattern of any
//! length, produced chunk by chunk without a declared length (so HTTP/1.1 sends it
//! chunked) and never held in memory as a whole, and [`PatternCheck`], which verifies
//! such a body as it arrives, also without keeping it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};

use super::origin::BoxError;

/// The pattern repeats every `PERIOD` bytes; a prime, so chunk edges fall everywhere in it.
const PERIOD: usize = 251;

/// The largest chunk [`Generated`] sends and [`PatternCheck`] compares at once.
const MAX_CHUNK: usize = 64 * 1024;

/// `PERIOD + MAX_CHUNK` bytes of the pattern: any chunk is a slice of it.
fn block() -> Bytes {
    (0..PERIOD + MAX_CHUNK)
        .map(|i| (i % PERIOD) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// A body of `total` bytes of the pattern, in chunks of `chunk` bytes (at most 64 KiB),
/// with no size hint. Each chunk is a slice of one shared block: nothing is copied.
pub struct Generated {
    block: Bytes,
    chunk: usize,
    sent: u64,
    total: u64,
}

impl Generated {
    /// `total` bytes in chunks of `chunk` bytes.
    ///
    /// # Panics
    ///
    /// If `chunk` is 0 or above 64 KiB: a mistake in the test.
    pub fn new(total: u64, chunk: usize) -> Generated {
        assert!((1..=MAX_CHUNK).contains(&chunk), "chunk size {chunk}");
        Generated {
            block: block(),
            chunk,
            sent: 0,
            total,
        }
    }
}

impl Body for Generated {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let left = self.total - self.sent;
        if left == 0 {
            return Poll::Ready(None);
        }
        // `left` is only narrowed when it is below `chunk`, a usize.
        let len = usize::try_from(left).map_or(self.chunk, |left| left.min(self.chunk));
        let offset = (self.sent % PERIOD as u64) as usize;
        let data = self.block.slice(offset..offset + len);
        self.sent += len as u64;
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == self.total
    }
}

/// Checks that bytes fed to it, in order, are the pattern [`Generated`] sends.
pub struct PatternCheck {
    block: Bytes,
    seen: u64,
    first_bad: Option<u64>,
}

impl Default for PatternCheck {
    fn default() -> Self {
        PatternCheck {
            block: block(),
            seen: 0,
            first_bad: None,
        }
    }
}

impl PatternCheck {
    /// Reads `body` to its end, checking every data frame; the body's error if it breaks.
    pub async fn read<B>(mut body: B) -> Result<PatternCheck, B::Error>
    where
        B: Body + Unpin,
        B::Data: AsRef<[u8]>,
    {
        use http_body_util::BodyExt;
        let mut check = PatternCheck::default();
        while let Some(frame) = body.frame().await {
            if let Some(data) = frame?.data_ref() {
                check.feed(data.as_ref());
            }
        }
        Ok(check)
    }

    /// Takes the next bytes of the body.
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let n = data.len().min(MAX_CHUNK);
            let offset = (self.seen % PERIOD as u64) as usize;
            if self.first_bad.is_none() && data[..n] != self.block[offset..offset + n] {
                self.first_bad = Some(self.seen);
            }
            self.seen += n as u64;
            data = &data[n..];
        }
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.seen
    }

    /// The offset of the first chunk that differed from the pattern, if any did.
    pub fn first_bad(&self) -> Option<u64> {
        self.first_bad
    }
}
