//! Logging setup (tracing-subscriber), the per-request log line, and the
//! optional access log ([`access`]).

pub mod access;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::config::{AccessLog, AccessLogFormat, LogConfig, LogFormat};
use crate::outcome::Finished;
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

/// Writes the one log line of a finished request, and its access log record.
pub fn log_request(r: &Finished<'_>) {
    tracing::info!(
        client = %r.client,
        user = r.user,
        method = r.method,
        url = %r.url,
        agent = r.agent,
        profile = &**r.profile,
        outcome = r.reason.word(),
        purposes = (!r.purposes.is_empty()).then_some(tracing::field::display(r.purposes)),
        usage_refused = r.usage_refused,
        would_refuse = (!r.would_refuse.is_empty())
            .then_some(WouldRefuse(r.would_refuse))
            .map(tracing::field::display),
        rule_line = r.rule.map(|rule| rule.line),
        status = r.status,
        upstream_ms = r.upstream.map(millis),
        duration_ms = millis(r.duration),
        "request"
    );
    if let Some(access) = ACCESS_LOG.get() {
        access.record(r);
    }
}

/// Waived reasons as one comma-separated value.
struct WouldRefuse<'a>(&'a [crate::outcome::Reason]);

impl std::fmt::Display for WouldRefuse<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, reason) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(reason.word())?;
        }
        Ok(())
    }
}

/// Milliseconds with microsecond precision, as a number that prints without
/// float noise (`0.018`, not `0.017575999999999998`).
pub fn millis(d: Duration) -> f64 {
    let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    // Integer micros to a decimal string and back: the nearest f64 to a
    // three-decimal number prints as exactly those decimals.
    format!("{}.{:03}", micros / 1000, micros % 1000)
        .parse()
        .unwrap_or(f64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_print_without_float_noise() {
        assert_eq!(
            millis(Duration::from_nanos(17_575_999)).to_string(),
            "17.575"
        );
        assert_eq!(millis(Duration::from_nanos(17_576)).to_string(), "0.017");
        assert_eq!(millis(Duration::from_secs(2)).to_string(), "2000");
        assert_eq!(millis(Duration::ZERO).to_string(), "0");
    }
}
