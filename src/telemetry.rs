//! Logging setup (tracing-subscriber), the per-request log line, and the
//! optional access log ([`access`]).

pub mod access;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::config::{AccessLog, AccessLogFormat, LogConfig, LogFormat};
use access::AccessLogger;

/// The process's access log, if `log.access_log` is on. Global because
/// [`log_request`] is called deep in the pipeline, like the tracing
/// subscriber it sits beside.
static ACCESS_LOG: OnceLock<AccessLogger> = OnceLock::new();

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The access log file could not be opened for appending.
    #[error("cannot open the access log {}: {error}", path.display())]
    AccessLogFile {
        /// `log.access_log`.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The access log's writer thread could not be started.
    #[error("cannot start the access log writer: {0}")]
    AccessLogThread(std::io::Error),
}

/// Flushes the logs when dropped: keep it until the process ends.
#[must_use = "dropping the guard flushes the logs; keep it until exit"]
pub struct TelemetryGuard {
    /// Flushes the log writer thread when dropped.
    _writer: Option<tracing_appender::non_blocking::WorkerGuard>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(access) = ACCESS_LOG.get() {
            access.flush(Duration::from_secs(2));
        }
    }
}

/// Installs the global subscriber and, if configured, the access log.
/// `RUST_LOG`, when set, overrides `log.level`.
///
/// # Errors
///
/// [`TelemetryError`] when the access log file cannot be opened.
pub fn init(log: &LogConfig) -> Result<TelemetryGuard, TelemetryError> {
    let writer_guard = init_tracing(log);
    let out: Box<dyn std::io::Write + Send> = match &log.access_log {
        AccessLog::Off => {
            return Ok(TelemetryGuard {
                _writer: writer_guard,
            })
        }
        // Its writer thread also writes what has queued, then flushes.
        AccessLog::Stderr => Box::new(std::io::BufWriter::with_capacity(
            STDERR_BATCH_BYTES,
            std::io::stderr(),
        )),
        AccessLog::File(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| TelemetryError::AccessLogFile {
                    path: path.clone(),
                    error,
                })?;
            Box::new(std::io::BufWriter::new(file))
        }
    };
    match log.access_log_format {
        AccessLogFormat::Json => {
            let logger = AccessLogger::start(out, access::QUEUE_CAPACITY)
                .map_err(TelemetryError::AccessLogThread)?;
            // A second init (tests) keeps the first logger.
            let _ = ACCESS_LOG.set(logger);
        }
    }
    Ok(TelemetryGuard {
        _writer: writer_guard,
    })
}

/// Checks that the access log could be opened (its directory exists),
/// without creating it: for `check-config`.
///
/// # Errors
///
/// [`TelemetryError::AccessLogFile`] when the directory is missing.
pub fn check(log: &LogConfig) -> Result<(), TelemetryError> {
    if let AccessLog::File(path) = &log.access_log {
        let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty());
        if dir.is_some_and(|dir| !dir.is_dir()) {
            return Err(TelemetryError::AccessLogFile {
                path: path.clone(),
                error: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "its directory does not exist",
                ),
            });
        }
    }
    Ok(())
}

/// The most log text a writer thread gathers before a `write` to stderr:
/// `PIPE_BUF` (4 KiB on Linux), so that each write to a pipe is atomic and
/// the log's and the access log's threads (or other writers to the same
/// pipe) cannot interleave inside a line. About 15 lines a write under
/// load instead of one.
const STDERR_BATCH_BYTES: usize = 4096;

/// Log lines go to stderr through a writer thread, so a request never
/// waits on a `write` to stderr (one per request at `info`). Under a flood
/// the queue drops lines rather than slowing the proxy (tracing-appender's
/// lossy mode), like the access log.
fn init_tracing(log: &LogConfig) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // Buffered behind the writer thread: it writes whatever has queued up,
    // then flushes, so under load many lines go out in one `write` instead
    // of one each, and a quiet proxy's lines still appear at once.
    let stderr = std::io::BufWriter::with_capacity(STDERR_BATCH_BYTES, std::io::stderr());
    let (writer, guard) = tracing_appender::non_blocking(stderr);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(writer);
    // A second init (tests) fails harmlessly: the first subscriber stays.
    let installed = match log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.ok().map(|()| guard)
}

/// What one request came to, for its log line.
#[derive(Debug)]
pub struct RequestRecord<'a> {
    /// The client's address.
    pub client: SocketAddr,
    /// The authenticated proxy user, if authentication is on.
    pub user: Option<&'a str>,
    /// The request method.
    pub method: &'a str,
    /// The request target, formatted only where it is written out (a log
    /// line that is not enabled costs nothing).
    pub url: &'a http::Uri,
    /// The target's host as its origin holds it, when the request got that
    /// far; saves the metrics from parsing `url` again.
    pub host: Option<&'a str>,
    /// The product token matched against robots.txt (empty if none yet).
    pub agent: &'a str,
    /// `allowed`, `disallowed`, `identity`, `pacing`, ... A fixed word of the
    /// proxy's (hence `'static`): metrics use it as a label, whose values
    /// must stay few.
    pub verdict: &'static str,
    /// The deciding robots.txt line, if any.
    pub rule_line: Option<u32>,
    /// The status sent to the client.
    pub status: u16,
    /// Time to the origin's response head, if forwarded.
    pub upstream: Option<Duration>,
    /// Time from the request's arrival to its answer's head (bodies are
    /// streamed afterwards and not counted).
    pub duration: Duration,
}

/// Writes the one log line of a finished request, and its access log record.
pub fn log_request(r: &RequestRecord<'_>) {
    tracing::info!(
        client = %r.client,
        user = r.user,
        method = r.method,
        url = %r.url,
        agent = r.agent,
        verdict = r.verdict,
        rule_line = r.rule_line,
        status = r.status,
        upstream_ms = r.upstream.map(|d| d.as_secs_f64() * 1000.0),
        duration_ms = r.duration.as_secs_f64() * 1000.0,
        "request"
    );
    if let Some(access) = ACCESS_LOG.get() {
        access.record(r);
    }
}
