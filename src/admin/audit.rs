//! `/audit?origin=ORIGIN`: the robots.txt copy the proxy holds for an origin,
//! with what the access log records of it (fetched-at time, `ETag`,
//! `Last-Modified`, the SHA-256 prefix) and its bytes, so "what did the site
//! say when we fetched page X at 14:02?" can be answered: the access log line
//! of that request names the copy's hash, and this shows the copy.
//! `robots-guard audit ORIGIN` prints it.

use std::time::SystemTime;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::Full;
use hyper::Response;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::fetch::{RobotsEntry, RobotsRules};
use crate::origin::Origin;
use crate::proxy::Live;
use crate::telemetry::access::CopyRecord;

/// The audit record of one cached copy.
#[derive(Serialize)]
struct Audit<'a> {
    origin: String,
    #[serde(flatten)]
    copy: CopyRecord<'a>,
    /// When the proxy last asked (successfully or not).
    checked_at: Option<String>,
    /// When it will ask again.
    expires_at: Option<String>,
    /// Why the copy is used although the latest fetch failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    stale: Option<&'a str>,
    /// Consecutive failed fetches.
    failures: u32,
    /// Only the first `robots.max_size` bytes were parsed.
    truncated: bool,
    /// What went wrong, for an unreachable file or a certificate failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<&'a str>,
    /// The bytes parsed, as text (invalid UTF-8 replaced).
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

/// Answers `/audit` for `query`.
pub fn answer(live: &Live, query: Option<&str>) -> Response<Full<Bytes>> {
    let asked = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(key, _)| key == "origin")
            .map(|(_, value)| value.into_owned())
    });
    let Some(asked) = asked else {
        return json(
            StatusCode::BAD_REQUEST,
            &error("give the origin: /audit?origin=https://example.com"),
        );
    };
    let origin = match asked
        .parse::<http::Uri>()
        .map_err(|e| e.to_string())
        .and_then(|uri| Origin::from_uri(&uri).map_err(|e| e.to_string()))
    {
        Ok(origin) => origin,
        Err(problem) => {
            return json(
                StatusCode::BAD_REQUEST,
                &error(&format!(
                    "{asked:?} is not an origin (scheme://host[:port]): {problem}"
                )),
            )
        }
    };
    match live.services().robots.peek(&origin) {
        Some(entry) => json(StatusCode::OK, &record(&origin, &entry)),
        None => json(
            StatusCode::NOT_FOUND,
            &error(&format!(
                "no robots.txt of {origin} is cached: nothing was asked of it since the \
                 proxy started, or its copy was evicted (robots.cache_capacity)"
            )),
        ),
    }
}

fn record(origin: &Origin, entry: &RobotsEntry) -> serde_json::Value {
    let copy = entry.copy();
    let problem = match &entry.rules {
        RobotsRules::Unreachable { reason } | RobotsRules::Certificate { reason } => {
            Some(reason.as_str())
        }
        _ => None,
    };
    let audit = Audit {
        origin: origin.to_string(),
        body: copy.body.map(|b| String::from_utf8_lossy(b).into_owned()),
        copy: CopyRecord::of(&copy),
        checked_at: wall_clock(entry.checked_at),
        expires_at: wall_clock(entry.expires_at),
        stale: entry.stale.as_deref(),
        failures: entry.failures,
        truncated: entry.truncated,
        problem,
    };
    serde_json::to_value(&audit).unwrap_or_default()
}

/// A monotonic instant on the wall clock, as RFC 3339.
fn wall_clock(at: Instant) -> Option<String> {
    let now = Instant::now();
    let wall = if at <= now {
        SystemTime::now().checked_sub(now - at)?
    } else {
        SystemTime::now().checked_add(at - now)?
    };
    OffsetDateTime::from(wall).format(&Rfc3339).ok()
}

fn error(message: &str) -> serde_json::Value {
    serde_json::json!({ "error": message })
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut body = serde_json::to_string_pretty(value).unwrap_or_default();
    body.push('\n');
    super::answer(status, "application/json", body)
}
