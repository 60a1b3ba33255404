//! Requests per minute over the last hour, by profile and outcome: what the
//! status page's chart draws.
//!
//! Prometheus keeps history for those who run it; a team lead opening the
//! status page should still see at a glance whether their robot was refused
//! more in the last ten minutes than before. The proxy therefore keeps one
//! hour of per-minute counts itself: at most 60 minutes × the profiles in
//! force × the outcomes (a few dozen), so memory stays bounded however much
//! traffic passes.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::outcome::Reason;

/// Minutes kept.
pub const MINUTES: usize = 60;

/// What one count is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Series {
    /// A request that ended for this reason.
    Outcome(Reason),
    /// A request a report-only profile let through that would have been
    /// refused for this reason.
    WouldRefuse(Reason),
}

/// Slots per minute and profile: one per reason, as itself and as
/// would-refuse.
const SLOTS: usize = 2 * Reason::ALL.len();

impl Series {
    /// Its slot in a minute's counts: a plain index, so counting costs no
    /// hashing on the request path.
    fn slot(self) -> usize {
        match self {
            Series::Outcome(reason) => reason as usize,
            Series::WouldRefuse(reason) => Reason::ALL.len() + reason as usize,
        }
    }

    /// The series of slot `slot`.
    fn of_slot(slot: usize) -> Option<Series> {
        let reasons = Reason::ALL.len();
        match slot {
            s if s < reasons => Some(Series::Outcome(Reason::ALL[s])),
            s if s < SLOTS => Some(Series::WouldRefuse(Reason::ALL[s - reasons])),
            _ => None,
        }
    }

    /// The name shown in the chart's legend.
    pub fn label(self) -> String {
        match self {
            Series::Outcome(reason) => reason.word().to_owned(),
            Series::WouldRefuse(reason) => format!("would-refuse: {}", reason.word()),
        }
    }
}

/// One minute's counts, per profile.
#[derive(Debug)]
struct Minute {
    /// Minutes since the Unix epoch.
    at: u64,
    /// Per profile (a handful, so a list), its counts per series slot.
    profiles: Vec<(Arc<str>, [u32; SLOTS])>,
}

/// The counts of one minute, as read for the chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinuteCounts {
    /// Minutes since the Unix epoch.
    pub at: u64,
    /// Per series, in the order of [`Series`].
    pub counts: Vec<(Series, u64)>,
}

/// The last hour, a minute at a time.
#[derive(Debug, Default)]
pub struct Timeline {
    minutes: VecDeque<Minute>,
}

impl Timeline {
    /// Counts one request of `profile` in minute `now` (minutes since the
    /// epoch) as `series`.
    pub fn count(&mut self, now: u64, profile: &Arc<str>, series: Series) {
        if self.minutes.back().is_none_or(|m| m.at < now) {
            if self.minutes.len() == MINUTES {
                self.minutes.pop_front();
            }
            self.minutes.push_back(Minute {
                at: now,
                profiles: Vec::new(),
            });
        }
        // A clock stepped back counts in the newest minute.
        let Some(minute) = self.minutes.back_mut() else {
            return;
        };
        let counts = match minute
            .profiles
            .iter()
            .position(|(name, _)| **name == **profile)
        {
            Some(at) => &mut minute.profiles[at].1,
            None => {
                minute.profiles.push((profile.clone(), [0; SLOTS]));
                let last = minute.profiles.len() - 1;
                &mut minute.profiles[last].1
            }
        };
        let slot = &mut counts[series.slot()];
        *slot = slot.saturating_add(1);
    }

    /// The `MINUTES` minutes up to `now`, oldest first, each with its counts
    /// for `profile` (all profiles together when `None`); minutes without
    /// traffic are there with no counts.
    pub fn last_hour(&self, now: u64, profile: Option<&str>) -> Vec<MinuteCounts> {
        let first = now.saturating_sub(MINUTES as u64 - 1);
        (first..=now)
            .map(|at| {
                let mut totals = [0u64; SLOTS];
                if let Some(minute) = self.minutes.iter().find(|m| m.at == at) {
                    for (name, counts) in &minute.profiles {
                        if profile.is_some_and(|p| p != &**name) {
                            continue;
                        }
                        for (total, n) in totals.iter_mut().zip(counts) {
                            *total += u64::from(*n);
                        }
                    }
                }
                let mut counts: Vec<(Series, u64)> = totals
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .filter_map(|(slot, n)| Some((Series::of_slot(slot)?, *n)))
                    .collect();
                counts.sort_unstable();
                MinuteCounts { at, counts }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_one_hour_per_profile() {
        let mut timeline = Timeline::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("team-a"), Arc::from("team-b"));
        let allowed = Series::Outcome(Reason::Allowed);
        let would = Series::WouldRefuse(Reason::RobotsDisallow);
        timeline.count(100, &a, allowed);
        timeline.count(100, &b, allowed);
        timeline.count(100, &b, would);
        timeline.count(101, &a, allowed);
        let hour = timeline.last_hour(101, None);
        assert_eq!(hour.len(), MINUTES);
        assert_eq!(hour[MINUTES - 2].counts, vec![(allowed, 2), (would, 1)]);
        assert_eq!(hour[MINUTES - 1].counts, vec![(allowed, 1)]);
        let only_b = timeline.last_hour(101, Some("team-b"));
        assert_eq!(only_b[MINUTES - 2].counts, vec![(allowed, 1), (would, 1)]);
        assert!(only_b[MINUTES - 1].counts.is_empty());
        // An hour later, the old minutes are gone, and no more than an hour
        // is ever kept.
        for minute in 102..300 {
            timeline.count(minute, &a, allowed);
        }
        assert_eq!(timeline.minutes.len(), MINUTES);
        // Every series has a slot of its own.
        for slot in 0..SLOTS {
            assert_eq!(Series::of_slot(slot).map(Series::slot), Some(slot));
        }
        assert!(timeline
            .last_hour(299, Some("team-b"))
            .iter()
            .all(|m| m.counts.is_empty()));
    }
}
