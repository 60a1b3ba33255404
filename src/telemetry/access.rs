//! The access log: one JSON object per request per line (JSON Lines).
//!
//! Records are serialised on the request's task and handed through a
//! bounded queue to a writer thread, which does the (blocking) file I/O and
//! flushes whenever the queue runs empty: one `write` per burst rather than
//! per record, yet a record reaches the file within moments at low load. A
//! thread rather than a tokio task because file writes block anyway and the
//! logger is set up before the runtime exists. If the writer cannot keep up
//! and the queue is full, records are dropped and counted rather than
//! making the proxy wait: a slow disk must not slow every client. The writer
//! reports the number dropped as a `warn` once it has caught up.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::millis;
use crate::outcome::{Finished, Reason, RobotsCopy};

/// Records queued for the writer before new ones are dropped: about 4 MB
/// at a typical 500 bytes, a few seconds of a busy proxy's traffic.
pub const QUEUE_CAPACITY: usize = 8192;

/// The access log's sending end. Records go to a writer thread that ends
/// when the last `AccessLogger` is dropped.
pub struct AccessLogger {
    queue: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

enum Message {
    Line(String),
    /// Flush, then answer.
    Flush(SyncSender<()>),
}

/// One record as written: field names are the access log's format.
#[derive(Serialize)]
struct Line<'a> {
    ts: Option<String>,
    client: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    method: &'a str,
    url: String,
    agent: &'a str,
    profile: &'a str,
    /// The purposes declared, comma-separated (`search, ai-train`).
    #[serde(skip_serializing_if = "String::is_empty")]
    purposes: String,
    outcome: &'a str,
    /// The origin's `Content-Usage` members that refused a declared purpose.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_refused: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    would_refuse: Vec<&'static str>,
    rule_line: Option<u32>,
    /// The deciding statement as the site wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    statement: Option<String>,
    /// The robots.txt copy the request was judged by.
    #[serde(skip_serializing_if = "Option::is_none")]
    robots: Option<CopyRecord<'a>>,
    status: u16,
    upstream_ms: Option<f64>,
    duration_ms: f64,
}

/// A robots.txt copy as the access log (and the audit) writes it.
#[derive(Serialize)]
pub struct CopyRecord<'a> {
    url: &'a str,
    fetched_at: Option<String>,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    etag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_modified: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<&'a str>,
}

impl<'a> CopyRecord<'a> {
    /// The record of `copy`.
    pub fn of(copy: &RobotsCopy<'a>) -> CopyRecord<'a> {
        CopyRecord {
            url: copy.url,
            fetched_at: OffsetDateTime::from(copy.fetched_on).format(&Rfc3339).ok(),
            kind: copy.kind,
            status: copy.status,
            etag: copy.etag,
            last_modified: copy.last_modified,
            sha256: copy.sha256,
        }
    }
}

impl AccessLogger {
    /// Starts a writer thread writing to `out`, with room for `capacity`
    /// queued records.
    ///
    /// # Errors
    ///
    /// When the thread cannot be spawned.
    pub fn start(out: Box<dyn Write + Send>, capacity: usize) -> std::io::Result<AccessLogger> {
        let (queue, receiver) = mpsc::sync_channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        std::thread::Builder::new()
            .name("access-log".to_owned())
            .spawn(move || write_loop(&receiver, out, &counter))?;
        Ok(AccessLogger { queue, dropped })
    }

    /// Queues the record of one request; drops it (and counts it) if the
    /// queue is full. Never blocks.
    pub fn record(&self, r: &Finished<'_>) {
        let copy = r.robots.map(|source| source.copy());
        let line = Line {
            ts: OffsetDateTime::now_utc().format(&Rfc3339).ok(),
            client: r.client.to_string(),
            user: r.user,
            method: r.method,
            url: r.url.to_string(),
            agent: r.agent,
            profile: r.profile,
            purposes: r.purposes.to_string(),
            outcome: r.reason.word(),
            usage_refused: r.usage_refused,
            would_refuse: r.would_refuse.iter().map(|w| Reason::word(*w)).collect(),
            rule_line: r.rule.map(|rule| rule.line),
            statement: r
                .rule
                .zip(copy.as_ref())
                .and_then(|(rule, copy)| copy.statement(rule.line)),
            robots: copy.as_ref().map(CopyRecord::of),
            status: r.status,
            upstream_ms: r.upstream.map(millis),
            duration_ms: millis(r.duration),
        };
        // Serialising plain strings and numbers cannot fail.
        let Ok(mut text) = serde_json::to_string(&line) else {
            return;
        };
        text.push('\n');
        match self.queue.try_send(Message::Line(text)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The writer is gone (it only stops when we are dropped).
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Waits until every record queued so far is written and flushed, for
    /// at most `timeout`. Returns whether that happened in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (done, wait) = mpsc::sync_channel(1);
        let deadline = std::time::Instant::now() + timeout;
        // The queue may be full: retry until there is room or time is up.
        let mut message = Message::Flush(done);
        loop {
            match self.queue.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if std::time::Instant::now() < deadline => {
                    message = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return false,
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        wait.recv_timeout(left).is_ok()
    }

    /// Records dropped because the queue was full and not yet reported.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn write_loop(receiver: &Receiver<Message>, mut out: Box<dyn Write + Send>, dropped: &AtomicU64) {
    let mut failing = false;
    let mut report = |result: std::io::Result<()>| match (result, failing) {
        (Err(error), false) => {
            failing = true;
            tracing::error!(%error, "cannot write the access log; records are lost until it works again");
        }
        (Ok(()), true) => {
            failing = false;
            tracing::info!("access log writable again");
        }
        _ => {}
    };
    // `recv` fails once every sender is gone: the process is ending.
    while let Ok(first) = receiver.recv() {
        let mut acks = Vec::new();
        let mut next = Some(first);
        // Write everything already queued, then flush once.
        while let Some(message) = next {
            match message {
                Message::Line(text) => report(out.write_all(text.as_bytes())),
                Message::Flush(ack) => acks.push(ack),
            }
            next = receiver.try_recv().ok();
        }
        report(out.flush());
        for ack in acks {
            let _ = ack.try_send(());
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            tracing::warn!(
                dropped = lost,
                "access log queue was full; records were dropped"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::outcome::{DecidingRule, Reason};
    use crate::robots::RuleKind;

    /// A writer whose bytes the test can read, optionally blocked.
    #[derive(Clone, Default)]
    struct Shared {
        bytes: Arc<Mutex<Vec<u8>>>,
        gate: Arc<Mutex<()>>,
    }

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _open = self.gate.lock().unwrap();
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A copy that is always the same.
    #[derive(Debug)]
    struct Fixed(RobotsCopy<'static>);

    impl crate::outcome::RobotsSource for Fixed {
        fn copy(&self) -> RobotsCopy<'_> {
            self.0
        }
    }

    fn record<'a>(url: &'a http::Uri, profile: &'a Arc<str>) -> Finished<'a> {
        Finished {
            client: "127.0.0.1:40000".parse().unwrap(),
            host: None,
            user: None,
            method: "GET",
            url,
            agent: "FooBot",
            reason: Reason::RobotsDisallow,
            rule: Some(DecidingRule {
                kind: RuleKind::Disallow.as_str(),
                pattern: Some("/x"),
                line: 3,
            }),
            status: 403,
            upstream: None,
            duration: Duration::from_micros(1500),
            profile,
            would_refuse: &[],
            robots: None,
            purposes: crate::robots::Purposes::NONE,
            usage_refused: None,
        }
    }

    #[test]
    fn writes_one_json_object_per_line() {
        let out = Shared::default();
        let log = AccessLogger::start(Box::new(out.clone()), 16).unwrap();
        let (plain, quoted) = (
            "http://a.example/x".parse().unwrap(),
            "http://a.example/\"quoted\"".parse().unwrap(),
        );
        let profile: Arc<str> = Arc::from("team-a");
        let copy = RobotsCopy {
            url: "http://a.example/robots.txt",
            fetched_on: std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            kind: "parsed",
            status: None,
            etag: Some("\"v7\""),
            last_modified: None,
            sha256: Some("0123456789ab"),
            body: Some(b"User-agent: *\n\nDisallow: /x # keep out\n"),
        };
        log.record(&Finished {
            robots: Some(&Fixed(copy)),
            would_refuse: &[Reason::RobotsDisallow, Reason::Pacing],
            ..record(&plain, &profile)
        });
        log.record(&Finished {
            upstream: Some(Duration::from_millis(12)),
            rule: None,
            reason: Reason::Allowed,
            status: 200,
            ..record(&quoted, &profile)
        });
        assert!(log.flush(Duration::from_secs(5)));
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first = &lines[0];
        assert_eq!(first["client"], "127.0.0.1:40000");
        assert_eq!(first["method"], "GET");
        assert_eq!(first["url"], "http://a.example/x");
        assert_eq!(first["agent"], "FooBot");
        assert_eq!(first["outcome"], "robots-disallow");
        assert_eq!(first["rule_line"], 3);
        assert_eq!(first["profile"], "team-a");
        assert_eq!(
            first["would_refuse"],
            serde_json::json!(["robots-disallow", "pacing"])
        );
        assert_eq!(first["statement"], "Disallow: /x # keep out");
        assert_eq!(
            first["robots"],
            serde_json::json!({
                "url": "http://a.example/robots.txt",
                "fetched_at": "2023-11-14T22:13:20Z",
                "kind": "parsed",
                "etag": "\"v7\"",
                "sha256": "0123456789ab",
            })
        );
        assert_eq!(first["status"], 403);
        assert!(first["upstream_ms"].is_null());
        assert_eq!(first["duration_ms"], 1.5);
        let ts = first["ts"].as_str().unwrap();
        assert!(OffsetDateTime::parse(ts, &Rfc3339).is_ok(), "{ts}");
        assert_eq!(lines[1]["url"], "http://a.example/\"quoted\"");
        assert_eq!(lines[1]["upstream_ms"], 12.0);
        assert!(lines[1]["rule_line"].is_null());
        assert!(lines[1].get("would_refuse").is_none());
        assert!(lines[1].get("robots").is_none());
    }

    #[test]
    fn full_queue_drops_and_counts_instead_of_blocking() {
        let out = Shared::default();
        let gate = out.gate.lock().unwrap();
        let log = AccessLogger::start(Box::new(out.clone()), 2).unwrap();
        // The writer takes one record and blocks on the gate; two more fill
        // the queue; the rest are dropped, and `record` never waits.
        let url = "http://a.example/".parse().unwrap();
        let profile: Arc<str> = Arc::from("default");
        let started = std::time::Instant::now();
        for _ in 0..10 {
            log.record(&record(&url, &profile));
        }
        assert!(started.elapsed() < Duration::from_secs(1));
        let dropped = log.dropped();
        assert!((7..=8).contains(&dropped), "dropped {dropped}");
        drop(gate);
        assert!(log.flush(Duration::from_secs(5)));
        let written = out
            .bytes
            .lock()
            .unwrap()
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        assert_eq!(written as u64 + dropped, 10);
    }
}
