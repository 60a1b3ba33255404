//! Site back-off: what a host asked for, or showed, about slowing down.
//!
//! Two signals, kept per host (the pacer holds one [`Backoff`] in each host's
//! state):
//!
//! - **A pause.** An origin that answers `429` or `503` with `Retry-After`
//!   (RFC 9110 §10.2.3: seconds or an HTTP date) asks that nothing reach it
//!   before then. The pause is capped by `rate_limit.max_backoff`, so a wrong
//!   or hostile date cannot shut the host out for days.
//! - **An extra delay.** A `429` or `503` without `Retry-After`, and (with
//!   `rate_limit.backoff_on_errors`) connect errors, resets and timeouts,
//!   double the spacing added to the host's own: it starts at
//!   `max(default_delay, 1 s)`, doubles with each failure up to `max_backoff`,
//!   and each success halves it; once it falls below where it started it is
//!   gone. This is the error back-off of Heritrix and Scrapy's AutoThrottle,
//!   which no proxy offered.
//!
//! Pure state: the caller passes the clock.

use std::time::Duration;

use tokio::time::Instant;

/// Why a host is paused or slowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackoffCause {
    /// The origin answered this status (429 or 503) with `Retry-After`.
    RetryAfter(u16),
    /// The origin answered this status (429 or 503) without `Retry-After`.
    Status(u16),
    /// The origin could not be connected to.
    ConnectError,
    /// The origin did not answer in time.
    Timeout,
    /// The origin broke off an exchange.
    Reset,
}

impl BackoffCause {
    /// Every cause, for metrics that show each from the start.
    pub const ALL: [BackoffCause; 7] = [
        BackoffCause::RetryAfter(429),
        BackoffCause::RetryAfter(503),
        BackoffCause::Status(429),
        BackoffCause::Status(503),
        BackoffCause::ConnectError,
        BackoffCause::Timeout,
        BackoffCause::Reset,
    ];

    /// A short word for logs, metrics labels and the status page.
    pub fn word(self) -> &'static str {
        match self {
            BackoffCause::RetryAfter(429) => "retry-after-429",
            BackoffCause::RetryAfter(_) => "retry-after-503",
            BackoffCause::Status(429) => "status-429",
            BackoffCause::Status(_) => "status-503",
            BackoffCause::ConnectError => "connect-error",
            BackoffCause::Timeout => "timeout",
            BackoffCause::Reset => "reset",
        }
    }

    /// What an origin's answer with `status` (and the `Retry-After` it carried,
    /// if any) says about slowing down: a `429` or `503` asks for it, with the
    /// pause `Retry-After` names. Any other status says nothing.
    pub fn of_answer(
        status: u16,
        retry_after: Option<Duration>,
    ) -> Option<(BackoffCause, Option<Duration>)> {
        if status != 429 && status != 503 {
            return None;
        }
        Some(match retry_after {
            Some(wait) => (BackoffCause::RetryAfter(status), Some(wait)),
            None => (BackoffCause::Status(status), None),
        })
    }

    /// The cause a [`word`](BackoffCause::word) names (as a fleet's store keeps it).
    pub fn from_word(word: &str) -> Option<BackoffCause> {
        BackoffCause::ALL.into_iter().find(|c| c.word() == word)
    }

    /// Index into [`BackoffCause::ALL`] (statuses other than 429 count as 503).
    pub fn index(self) -> usize {
        match self {
            BackoffCause::RetryAfter(429) => 0,
            BackoffCause::RetryAfter(_) => 1,
            BackoffCause::Status(429) => 2,
            BackoffCause::Status(_) => 3,
            BackoffCause::ConnectError => 4,
            BackoffCause::Timeout => 5,
            BackoffCause::Reset => 6,
        }
    }
}

impl std::fmt::Display for BackoffCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// The knobs, from `[rate_limit]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffSettings {
    /// `honor_retry_after`: a `Retry-After` pauses the host (else it counts
    /// as a status without one).
    pub honor_retry_after: bool,
    /// `max_backoff`: the longest pause, and the largest extra delay.
    pub max_backoff: Duration,
    /// `backoff_on_errors`: connect errors, resets and timeouts slow the host.
    pub on_errors: bool,
    /// Where the extra delay starts: `max(default_delay, 1 s)`.
    pub first_delay: Duration,
}

impl Default for BackoffSettings {
    /// The configuration's defaults: `Retry-After` honoured, 15 min cap, errors slow
    /// down, starting at 1 s.
    fn default() -> BackoffSettings {
        BackoffSettings {
            honor_retry_after: true,
            max_backoff: Duration::from_secs(15 * 60),
            on_errors: true,
            first_delay: Duration::from_secs(1),
        }
    }
}

/// One host's back-off state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backoff {
    /// Nothing starts before this.
    paused_until: Option<Instant>,
    /// Added to the host's spacing.
    extra: Duration,
    /// The latest cause, while paused or slowed.
    cause: Option<BackoffCause>,
}

/// What the status page shows of a host's back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffView {
    /// The time left of a pause, if paused.
    pub paused_for: Option<Duration>,
    /// The extra spacing now.
    pub extra: Duration,
    /// Why.
    pub cause: Option<BackoffCause>,
}

impl Backoff {
    /// The origin asked for a pause of `wait` (capped by `max_backoff`).
    /// A longer pause already in force stays.
    pub fn pause(
        &mut self,
        now: Instant,
        wait: Duration,
        cause: BackoffCause,
        s: &BackoffSettings,
    ) {
        let until = now + wait.min(s.max_backoff);
        if self.paused_until.is_none_or(|t| t < until) {
            self.paused_until = Some(until);
        }
        self.cause = Some(cause);
    }

    /// A failure that slows the host: the extra delay starts, or doubles
    /// (capped by `max_backoff`).
    pub fn failed(&mut self, cause: BackoffCause, s: &BackoffSettings) {
        self.extra = if self.extra.is_zero() {
            s.first_delay
        } else {
            self.extra.saturating_mul(2)
        }
        .min(s.max_backoff);
        self.cause = Some(cause);
    }

    /// A success: the extra delay halves, and is gone once below where it
    /// started. Returns whether anything changed.
    pub fn succeeded(&mut self, s: &BackoffSettings) -> bool {
        if self.extra.is_zero() {
            return false;
        }
        let halved = self.extra / 2;
        self.extra = if halved < s.first_delay {
            Duration::ZERO
        } else {
            halved
        };
        if self.extra.is_zero() && self.paused_until.is_none() {
            self.cause = None;
        }
        true
    }

    /// The spacing added to the host's own.
    pub fn extra(&self) -> Duration {
        self.extra
    }

    /// The end of a pause still in force at `now`.
    pub fn paused_until(&self, now: Instant) -> Option<Instant> {
        self.paused_until.filter(|t| *t > now)
    }

    /// Is the host paused or slowed at `now`?
    pub fn is_active(&self, now: Instant) -> bool {
        self.paused_until(now).is_some() || !self.extra.is_zero()
    }

    /// The view at `now`, if active.
    pub fn view(&self, now: Instant) -> Option<BackoffView> {
        self.is_active(now).then(|| BackoffView {
            paused_for: self.paused_until(now).map(|t| t - now),
            extra: self.extra,
            cause: self.cause,
        })
    }

    /// Forgets a pause that is over (keeps the extra delay).
    pub fn expire(&mut self, now: Instant) {
        if self.paused_until.is_some_and(|t| t <= now) {
            self.paused_until = None;
            if self.extra.is_zero() {
                self.cause = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn settings() -> BackoffSettings {
        BackoffSettings {
            honor_retry_after: true,
            max_backoff: 60 * SEC,
            on_errors: true,
            first_delay: SEC,
        }
    }

    #[test]
    fn errors_double_the_extra_delay_up_to_the_cap_and_successes_halve_it_away() {
        let s = settings();
        let mut b = Backoff::default();
        let got: Vec<u64> = (0..8)
            .map(|_| {
                b.failed(BackoffCause::Status(503), &s);
                b.extra().as_secs()
            })
            .collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 60, 60]);
        let back: Vec<u64> = (0..7)
            .map(|_| {
                b.succeeded(&s);
                b.extra().as_secs()
            })
            .collect();
        assert_eq!(back, [30, 15, 7, 3, 1, 0, 0]);
        assert!(!b.is_active(Instant::now()));
        assert!(!b.succeeded(&s), "nothing to decay");
    }

    #[test]
    fn a_pause_is_capped_and_a_longer_one_stays() {
        let s = settings();
        let now = Instant::now();
        let mut b = Backoff::default();
        b.pause(now, 3600 * SEC, BackoffCause::RetryAfter(429), &s);
        assert_eq!(b.paused_until(now), Some(now + 60 * SEC), "capped");
        b.pause(now, 10 * SEC, BackoffCause::RetryAfter(503), &s);
        assert_eq!(
            b.paused_until(now),
            Some(now + 60 * SEC),
            "the longer one stays"
        );
        let view = b.view(now + 20 * SEC).expect("active");
        assert_eq!(view.paused_for, Some(40 * SEC));
        assert_eq!(view.cause, Some(BackoffCause::RetryAfter(503)));
        b.expire(now + 61 * SEC);
        assert!(!b.is_active(now + 61 * SEC));
        assert_eq!(b.view(now + 61 * SEC), None);
    }

    #[test]
    fn causes_have_distinct_words_and_indexes() {
        let words: std::collections::HashSet<_> =
            BackoffCause::ALL.iter().map(|c| c.word()).collect();
        assert_eq!(words.len(), BackoffCause::ALL.len());
        for (i, cause) in BackoffCause::ALL.iter().enumerate() {
            assert_eq!(cause.index(), i);
            assert_eq!(BackoffCause::from_word(cause.word()), Some(*cause));
        }
    }
}
