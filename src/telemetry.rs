//! Logging setup (tracing-subscriber) and the per-request log line.

use std::net::SocketAddr;
use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. `RUST_LOG`, when set, overrides
/// `log.level`.
pub fn init(log: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    // A second init (tests) fails harmlessly: the first subscriber stays.
    let _ = match log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
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
    /// The request target.
    pub url: &'a str,
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
}

/// Writes the one log line of a finished request.
pub fn log_request(r: &RequestRecord<'_>) {
    tracing::info!(
        client = %r.client,
        user = r.user,
        method = r.method,
        url = r.url,
        agent = r.agent,
        verdict = r.verdict,
        rule_line = r.rule_line,
        status = r.status,
        upstream_ms = r.upstream.map(|d| d.as_secs_f64() * 1000.0),
        "request"
    );
}
