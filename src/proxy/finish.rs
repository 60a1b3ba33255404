//! The one place a finished request is logged and counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{StatusCode, Uri};

use super::exchange::Exchange;
use super::reload::Live;
use super::response::Answer;
use super::services::Services;
use crate::outcome::{DecidingRule, Finished, Reason};
use crate::telemetry::log_request;

/// Logs `ex`, ended for `reason` with `status` (and `answer`, when the proxy
/// refused it), and counts it in the metrics.
pub(crate) fn finish(ex: &Exchange, reason: Reason, answer: Option<&Answer>, status: StatusCode) {
    let rule = match answer {
        Some(Answer::RobotsDisallow {
            kind,
            pattern,
            line,
            ..
        }) => Some(DecidingRule {
            kind: kind.as_str(),
            pattern: Some(pattern.as_str()),
            line: *line,
        }),
        Some(Answer::UsagePreference {
            kind,
            statement,
            line,
            ..
        }) => Some(DecidingRule {
            kind: kind.as_str(),
            pattern: Some(statement.as_str()),
            line: *line,
        }),
        _ => None,
    };
    let record = ex.finished(reason, rule, status.as_u16());
    log_request(&record);
    ex.services.metrics.record(&record);
}

/// Logs and counts a connection refused before any request was read (a
/// client outside `proxy.allow_clients`, a head hyper could not read).
pub(crate) fn refused_connection(live: &Live, client: SocketAddr, answer: &Answer) {
    let settings = live.settings();
    // No request was read, so no user: the profile is the one the client's
    // address selects, if any.
    let profile = &settings.profile_for(None, client.ip()).name;
    refused_outside_the_pipeline(
        live.services(),
        client,
        "-",
        &Uri::default(),
        "",
        profile,
        answer,
    );
}

/// Logs and counts a blind tunnel closed once it showed TLS (see
/// `Exchange::if_tls`); its CONNECT was logged when it was answered.
pub(crate) fn refused_tunnel(
    services: &Services,
    client: SocketAddr,
    url: &Uri,
    agent: &str,
    profile: &Arc<str>,
    answer: &Answer,
) {
    refused_outside_the_pipeline(services, client, "CONNECT", url, agent, profile, answer);
}

fn refused_outside_the_pipeline(
    services: &Services,
    client: SocketAddr,
    method: &str,
    url: &Uri,
    agent: &str,
    profile: &Arc<str>,
    answer: &Answer,
) {
    let record = Finished {
        client,
        user: None,
        method,
        url,
        host: None,
        agent,
        reason: answer.reason(),
        rule: None,
        status: answer.status().as_u16(),
        upstream: None,
        duration: Duration::ZERO,
        profile,
        would_refuse: &[],
        robots: None,
        purposes: crate::robots::Purposes::NONE,
        usage_refused: None,
    };
    log_request(&record);
    services.metrics.record(&record);
}
