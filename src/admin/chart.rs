//! The status page's chart: requests per minute over the last hour, stacked
//! by outcome, drawn as inline SVG on the server.
//!
//! No script and no external asset: the page's Content-Security-Policy
//! allows neither, and a chart that needs nothing but the HTML works in any
//! browser, in a screenshot and in `curl`. Each bar segment carries a
//! `<title>`, which browsers show on hover.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::metrics::timeline::{MinuteCounts, Series};
use crate::outcome::Reason;

/// The drawing's size in SVG units; it scales to the page's width.
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 220.0;
/// Room for the y-axis labels, the x-axis labels and a little air.
const LEFT: f64 = 44.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 24.0;

/// The colour of `series`: greens for what went through, reds and oranges
/// for politeness refusals, greys for the security refusals (rare, and the
/// same kind of thing), ambers for `429`s, purples for failures, blues for
/// what a report-only profile would have refused. One colour per series, so
/// a legend entry names one thing.
pub fn colour(series: Series) -> &'static str {
    match series {
        Series::WouldRefuse(reason) => match reason {
            Reason::RobotsDisallow => "#0969da",
            Reason::RobotsForbidden => "#0550ae",
            Reason::RobotsUnreachable => "#54aeff",
            Reason::UsagePreference => "#218bff",
            Reason::Identity => "#80ccff",
            Reason::Pacing => "#033d8b",
            _ => "#b6e3ff",
        },
        Series::Outcome(reason) => match reason {
            Reason::Allowed => "#2da44e",
            Reason::Tunnel | Reason::Intercept => "#6fdd8b",
            Reason::RobotsDisallow => "#cf222e",
            Reason::RobotsForbidden => "#82071e",
            Reason::UsagePreference => "#e16f24",
            Reason::Identity => "#bf3989",
            Reason::Pacing => "#d4a72c",
            Reason::SiteBackoff => "#9a6700",
            Reason::RobotsUnreachable => "#8250df",
            Reason::UpstreamCertificate => "#6639ba",
            Reason::UpstreamError => "#a475f9",
            Reason::UpstreamTimeout => "#d8b9ff",
            Reason::FleetStoreUnavailable => "#512a97",
            Reason::CrawlerTrap => "#953800",
            Reason::ClientNotAllowed => "#24292f",
            Reason::ProxyAuth => "#424a53",
            Reason::DestinationDenied => "#57606a",
            Reason::PortRefused => "#6e7781",
            Reason::Loop => "#8c959f",
            Reason::BadRequest => "#afb8c1",
            Reason::UriTooLong => "#32383f",
            Reason::HeaderTooLarge => "#d0d7de",
        },
    }
}

/// Draws `minutes` (oldest first) as stacked bars, with a legend of the
/// hour's totals. `what` names whose requests they are, for the caption.
pub fn render(page: &mut String, minutes: &[MinuteCounts], what: &str) {
    let mut totals: BTreeMap<Series, u64> = BTreeMap::new();
    for minute in minutes {
        for (series, n) in &minute.counts {
            *totals.entry(*series).or_insert(0) += n;
        }
    }
    let peak = minutes
        .iter()
        .map(|m| m.counts.iter().map(|(_, n)| n).sum::<u64>())
        .max()
        .unwrap_or(0);
    let top = nice_ceiling(peak);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let slot = plot_w / minutes.len().max(1) as f64;
    let y = |count: f64| TOP + plot_h - count / top as f64 * plot_h;

    let _ = write!(
        page,
        "<figure class=\"chart\"><svg id=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" \
         aria-label=\"Requests per minute over the last hour, by outcome: {}\" \
         xmlns=\"http://www.w3.org/2000/svg\">",
        escape_attr(what)
    );
    // Grid lines and the y axis: 0, half, top.
    for tick in [0, top / 2, top] {
        let at = y(tick as f64);
        let _ = write!(
            page,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{at:.1}\" y2=\"{at:.1}\"/>\
             <text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{tick}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            at + 4.0
        );
    }
    // The x axis: a label every ten minutes.
    for (i, minute) in minutes.iter().enumerate() {
        if minute.at % 10 == 0 {
            let x = LEFT + slot * i as f64 + slot / 2.0;
            let _ = write!(
                page,
                "<text class=\"axis\" x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                HEIGHT - 6.0,
                hh_mm(minute.at)
            );
        }
    }
    // The bars: each minute's series stacked from the bottom, in legend order.
    let bar_w = (slot - 2.0).max(1.0);
    for (i, minute) in minutes.iter().enumerate() {
        let x = LEFT + slot * i as f64 + 1.0;
        let mut below = 0u64;
        for (series, n) in &minute.counts {
            let (from, to) = (y(below as f64), y((below + n) as f64));
            below += n;
            let _ = write!(
                page,
                "<rect class=\"bar\" x=\"{x:.1}\" y=\"{to:.1}\" width=\"{bar_w:.1}\" height=\"{:.1}\" \
                 fill=\"{}\"><title>{} · {}: {n}</title></rect>",
                (from - to).max(0.5),
                colour(*series),
                hh_mm(minute.at),
                escape_attr(&series.label()),
            );
        }
    }
    page.push_str("</svg><figcaption>");
    if totals.is_empty() {
        page.push_str("<span class=\"muted\">No requests in the last hour.</span>");
    } else {
        page.push_str("<ul class=\"legend\">");
        for (series, n) in &totals {
            let _ = write!(
                page,
                "<li><span class=\"swatch\" style=\"background:{}\"></span>{} <span class=\"muted\">{n}</span></li>",
                colour(*series),
                escape_attr(&series.label())
            );
        }
        page.push_str("</ul>");
    }
    page.push_str("</figcaption></figure>\n");
}

/// The smallest of 1, 2, 5, 10, 20, 50, ... at or above `n` (at least 1):
/// a y-axis top whose half is a round number too.
fn nice_ceiling(n: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for factor in [1, 2, 5] {
            let candidate = step.saturating_mul(factor);
            if candidate >= n.max(1) {
                return candidate;
            }
        }
        step = step.saturating_mul(10);
    }
}

/// `HH:MM` (UTC) of a minute since the epoch.
fn hh_mm(minute: u64) -> String {
    let of_day = minute % (24 * 60);
    format!("{:02}:{:02}", of_day / 60, of_day % 60)
}

fn escape_attr(s: &str) -> String {
    super::status_page::escape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_top_is_round() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(1), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(7), 10);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(480), 500);
        assert_eq!(nice_ceiling(501), 1000);
    }

    #[test]
    fn bars_stack_each_minute_and_the_legend_sums_the_hour() {
        let allowed = Series::Outcome(Reason::Allowed);
        let refused = Series::Outcome(Reason::RobotsDisallow);
        let would = Series::WouldRefuse(Reason::RobotsDisallow);
        let minutes = vec![
            MinuteCounts {
                at: 600,
                counts: vec![(allowed, 3), (refused, 1)],
            },
            MinuteCounts {
                at: 601,
                counts: vec![],
            },
            MinuteCounts {
                at: 602,
                counts: vec![(allowed, 1), (would, 4)],
            },
        ];
        let mut page = String::new();
        render(&mut page, &minutes, "every profile");
        assert_eq!(page.matches("<rect class=\"bar\"").count(), 4, "{page}");
        assert!(page.contains("<title>10:00 · robots-disallow: 1</title>"));
        assert!(page.contains("<title>10:02 · would-refuse: robots-disallow: 4</title>"));
        assert!(page.contains("allowed <span class=\"muted\">4</span>"));
        // The tallest minute (5 requests) reaches the top of the plot.
        assert!(page.contains(">5</text>"), "{page}");
        // One colour per series.
        let mut colours: Vec<&str> = Reason::ALL
            .iter()
            .filter(|r| **r != Reason::Intercept)
            .map(|r| colour(Series::Outcome(*r)))
            .chain(
                Reason::ALL
                    .iter()
                    .filter(|r| r.waivable())
                    .map(|r| colour(Series::WouldRefuse(*r))),
            )
            .collect();
        let all = colours.len();
        colours.sort_unstable();
        colours.dedup();
        assert_eq!(colours.len(), all);
    }

    #[test]
    fn an_empty_hour_says_so() {
        let mut page = String::new();
        render(
            &mut page,
            &[MinuteCounts {
                at: 0,
                counts: vec![],
            }],
            "team-a",
        );
        assert!(page.contains("No requests in the last hour."));
        assert!(!page.contains("<rect"));
    }
}
