//! `robots-guard audit ORIGIN`: asks a running proxy's admin listener for
//! its copy of an origin's robots.txt (`/audit`) and prints it for people,
//! or as the endpoint's JSON with `--json`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// How long the command waits for the proxy.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why the audit could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The admin listener could not be reached or answered badly.
    #[error("cannot ask the proxy's admin listener at {admin}: {problem}")]
    Admin {
        /// Where it was asked.
        admin: SocketAddr,
        /// What went wrong.
        problem: String,
    },
    /// The proxy holds no copy of the origin's robots.txt.
    #[error("{0}")]
    NotCached(String),
    /// The proxy refused the question (not an origin).
    #[error("{0}")]
    Refused(String),
}

/// The answer of `/audit` for `origin` from the admin listener at `admin`:
/// `Ok(json)` for a cached copy, [`AuditError::NotCached`] or
/// [`AuditError::Refused`] with the proxy's reason otherwise.
///
/// # Errors
///
/// [`AuditError`].
pub async fn fetch(admin: SocketAddr, origin: &str) -> Result<serde_json::Value, AuditError> {
    let failed = |problem: String| AuditError::Admin { admin, problem };
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("origin", origin)
        .finish();
    let ask = async {
        let stream = tokio::net::TcpStream::connect(admin)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed(e.to_string()))?;
        tokio::spawn(connection);
        let request = http::Request::builder()
            .uri(format!("/audit?{query}"))
            .header(http::header::HOST, admin.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| failed(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        Ok::<_, AuditError>((status, body))
    };
    let (status, body) = tokio::time::timeout(TIMEOUT, ask)
        .await
        .map_err(|_| failed(format!("no answer within {} s", TIMEOUT.as_secs())))??;
    let json: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|_| failed(format!("{status}, not the audit endpoint's JSON")))?;
    let reason = || json["error"].as_str().unwrap_or("refused").to_owned();
    match status {
        http::StatusCode::OK => Ok(json),
        http::StatusCode::NOT_FOUND => Err(AuditError::NotCached(reason())),
        _ => Err(AuditError::Refused(reason())),
    }
}

/// The audit record as text: the fields, then the bytes.
pub fn render(audit: &serde_json::Value) -> String {
    let mut out = String::new();
    let field = |out: &mut String, label: &str, key: &str| {
        let value = &audit[key];
        let text = match value {
            serde_json::Value::Null => return,
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let _ = writeln!(out, "{label:<15}{text}");
    };
    field(&mut out, "origin", "origin");
    field(&mut out, "robots.txt", "url");
    field(&mut out, "kind", "kind");
    field(&mut out, "status", "status");
    field(&mut out, "fetched at", "fetched_at");
    field(&mut out, "checked at", "checked_at");
    field(&mut out, "expires at", "expires_at");
    field(&mut out, "etag", "etag");
    field(&mut out, "last-modified", "last_modified");
    field(&mut out, "sha256", "sha256");
    field(&mut out, "stale", "stale");
    field(&mut out, "problem", "problem");
    if audit["failures"].as_u64().is_some_and(|n| n > 0) {
        field(&mut out, "failures", "failures");
    }
    if audit["truncated"].as_bool() == Some(true) {
        out.push_str("truncated      only the first robots.max_size bytes were parsed\n");
    }
    if let Some(body) = audit["body"].as_str() {
        out.push_str("--- robots.txt as fetched ---\n");
        out.push_str(body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}
