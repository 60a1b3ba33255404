//! Serving one HTTP connection: every request on it through the pipeline.
//!
//! The same code serves the listener's connections (absolute-form requests
//! and CONNECTs), decrypted TLS inside an intercepted tunnel (HTTP/1.1 or
//! HTTP/2 as the client chose by ALPN) and plain HTTP inside a tunnel. The
//! connection's IO is wrapped for the idle and head timers ([`IdleIo`]); on
//! shutdown the request in progress is finished and the connection closed,
//! and when the drain times out it is dropped.

use std::convert::Infallible;
use std::sync::Arc;

use http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::exchange::Conn;
use super::finish;
use super::holding_body::HoldingBody;
use super::idle::{IdleIo, Replace};
use super::pipeline;
use super::response::Answer;
use super::settings::Settings;

/// Serves `io` for `conn` until the client closes it, the server drains, or
/// a timer closes it. `http2`: the client chose HTTP/2 (only over TLS).
pub(crate) async fn serve<T>(io: T, conn: Arc<Conn>, http2: bool)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Connection settings are those in force when it opened.
    let settings = conn.scope.live().settings();
    let mut io = IdleIo::new(io, conn.activity.clone(), settings.timeouts);
    if !http2 {
        io = io.for_http1(own_answers(&conn, &settings));
    }
    let io = TokioIo::new(io);
    let serving = conn.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        let conn = serving.clone();
        async move {
            // Busy until the answer's body has been sent: no timer closes a
            // connection while it is answering.
            let busy = conn.activity.begin();
            let response = pipeline::run(conn, request).await;
            Ok::<_, Infallible>(response.map(|body| HoldingBody::new(body, busy).boxed()))
        }
    });
    let scope = &conn.scope;
    let ended = if http2 {
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
        serve_until_drained!(builder.serve_connection(io, service), scope)
    } else {
        serve_until_drained!(
            http1_server(settings.max_header_bytes)
                .serve_connection(io, service)
                .with_upgrades(),
            scope
        )
    };
    match ended {
        Some(Ok(())) => {}
        Some(Err(error)) => {
            tracing::debug!(client = %conn.client, %error, "connection ended with an error");
        }
        None => tracing::debug!(client = %conn.client, "connection closed: drain timed out"),
    }
}

/// The proxy's answers for those hyper makes itself to heads it cannot read
/// (see [`IdleIo::for_http1`]): the same refusals, logged and counted.
fn own_answers(conn: &Arc<Conn>, settings: &Settings) -> Replace {
    let conn = conn.clone();
    let (head_limit, url_limit) = (settings.max_header_bytes, settings.max_url_length);
    Box::new(move |status| {
        let answer = match status {
            431 => Answer::HeaderTooLarge { limit: head_limit },
            414 => Answer::UriTooLong { limit: url_limit },
            400 => Answer::BadRequest {
                reason: "the request could not be read as HTTP/1.1: a malformed request line \
                         or header field"
                    .to_owned(),
            },
            _ => return None,
        };
        finish::refused_connection(conn.scope.live(), conn.client, &answer);
        Some(answer.to_http1_bytes())
    })
}

/// [`serve`], boxed as a `Send` future: what a CONNECT's tunnel task runs.
/// The tunnel is served by the pipeline that opened it, so the types would
/// otherwise refer to themselves, and the compiler could not tell whether
/// the task may move between threads.
pub(crate) fn serve_in_tunnel<T>(
    io: T,
    conn: Arc<Conn>,
    http2: bool,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    Box::pin(serve(io, conn, http2))
}

/// The HTTP/1.1 server settings of every client connection: heads bounded by
/// `max_header_bytes`, and no head timer of hyper's own (it would also close
/// idle keep-alive connections; [`IdleIo`] keeps the two limits apart).
/// `max_buf_size` alone is not a head limit: one read can take the buffer
/// past it, and a head that then parses is accepted; `max_header_size`
/// checks the parsed head itself.
fn http1_server(max_header_bytes: usize) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(max_header_bytes)
        .max_header_size(max_header_bytes);
    builder
}
