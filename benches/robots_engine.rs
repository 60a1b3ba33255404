//! robots.txt engine throughput, compared with the `robotstxt` crate (a port
//! of Google's reference parser) and `texting_robots`.
//!
//! Inputs: every `*.txt` file of `tests/testdata/robots` (150 real files),
//! each with 10 URLs built deterministically from the file's own
//! `Allow`/`Disallow` patterns (`*` replaced, `$` dropped, a hit and an
//! upper-cased likely miss per pattern) plus fixed URLs such as `/` and
//! `/search?q=robots`. Agent `Googlebot` for 8 of the 10 URLs, `FooBot` for 2.
//! One *case* is one (file, agent, URL) triple.
//!
//! Groups (one criterion iteration runs every case; throughput is
//! `Elements(cases)`, so criterion's elem/s is cases/s):
//! - `parse_match`: parse the file and match one URL, per case, for all three
//!   engines.
//! - `match_only`: files parsed outside the timing; match one URL against the
//!   parsed file (`robots_guard` via `RobotsTxt::check` and via `for_agent`
//!   selected once per file and agent, `texting_robots` with one `Robot` per
//!   file and agent). `robotstxt` has no parse-once API, so it is absent.
//! - `parse_large`: parse the corpus files over 100 KiB (throughput in bytes).
//! - `hostile`: a 16 KiB path against a pattern with 50 `*` (match only;
//!   `robotstxt` is too slow here to measure).
//!
//! Run: `cargo bench --bench robots_engine` (a few minutes on 2 cores).
//! Reference numbers, with machine and date, are in `BENCHMARKS.md`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use robots_guard::robots::RobotsTxt;

const AGENTS: [&str; 2] = ["Googlebot", "FooBot"];
const URLS_PER_FILE: usize = 10;
const FIXED_URLS: [&str; 4] = [
    "/",
    "/index.html",
    "/search?q=robots",
    "/products/123?ref=home",
];
const FILLER_URLS: [&str; 6] = [
    "/about/team.html",
    "/blog/2024/05/hello-world/",
    "/wp-admin/admin-ajax.php",
    "/cart?add=42",
    "/en-us/help/contact",
    "/static/app.js?v=3",
];
const LARGE_FILE_BYTES: usize = 100 * 1024;

/// One corpus file with its cases.
struct File {
    bytes: Vec<u8>,
    /// Lossy UTF-8 copy for `robotstxt`, made outside the timing.
    text: String,
    /// (index into `AGENTS`, absolute URL)
    cases: Vec<(usize, String)>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/robots")
}

fn load_corpus() -> Vec<File> {
    let dir = corpus_dir();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("robots.txt corpus not found at {}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.expect("reading corpus directory").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no *.txt files in {}", dir.display());
    paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let cases = urls_for(&text)
                .into_iter()
                .enumerate()
                .map(|(i, path)| {
                    (
                        usize::from(i % 5 == 4),
                        format!("https://example.com{path}"),
                    )
                })
                .collect();
            File { bytes, text, cases }
        })
        .collect()
}

/// `Allow`/`Disallow` values of a file that look like path patterns.
fn patterns(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        let is_rule = key.eq_ignore_ascii_case("allow") || key.eq_ignore_ascii_case("disallow");
        if is_rule && (value.starts_with('/') || value.starts_with('*')) && !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

/// Percent-encodes what a client would: controls, space and non-ASCII.
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for &b in path.as_bytes() {
        if b <= b' ' || b >= 0x7f {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

/// The 10 paths of one file: fixed ones, then a hit and a likely miss for up
/// to three of its patterns (first, middle, last), then fillers.
fn urls_for(text: &str) -> Vec<String> {
    let mut urls: Vec<String> = FIXED_URLS.iter().map(|s| s.to_string()).collect();
    let pats = patterns(text);
    let mut picks = vec![0, pats.len() / 2, pats.len().saturating_sub(1)];
    picks.dedup();
    for &i in picks.iter().filter(|&&i| i < pats.len()) {
        let pat = pats[i];
        let mut hit = pat.replace('*', "ab1").replace('$', "");
        if !hit.starts_with('/') {
            hit.insert(0, '/');
        }
        if !pat.ends_with('$') && hit.ends_with('/') {
            hit.push_str("item?id=7");
        }
        let miss = hit.to_ascii_uppercase();
        urls.push(encode(&hit));
        urls.push(encode(&miss));
    }
    urls.extend(FILLER_URLS.iter().map(|s| s.to_string()));
    urls.truncate(URLS_PER_FILE);
    urls
}

fn case_count(files: &[File]) -> u64 {
    files.iter().map(|f| f.cases.len() as u64).sum()
}

/// Prints once how often the engines agree, so a speed-up that comes from
/// answering differently does not go unnoticed.
fn report_agreement(files: &[File]) {
    let (mut vs_robotstxt, mut vs_texting, mut total) = (0, 0, 0);
    for f in files {
        let robots = RobotsTxt::parse(&f.bytes);
        for (agent, url) in &f.cases {
            let agent = AGENTS[*agent];
            let ours = robots.check(agent, url).allowed;
            let google = robotstxt::DefaultMatcher::default()
                .one_agent_allowed_by_robots(&f.text, agent, url);
            let texting = texting_robots::Robot::new(agent, &f.bytes)
                .map(|r| r.allowed(url))
                .unwrap_or(true);
            total += 1;
            vs_robotstxt += usize::from(ours == google);
            vs_texting += usize::from(ours == texting);
        }
    }
    eprintln!(
        "corpus: {} files, {total} cases; robots_guard agrees with robotstxt on \
         {vs_robotstxt}, with texting_robots on {vs_texting}",
        files.len()
    );
}

fn parse_match(c: &mut Criterion, files: &[File]) {
    let mut group = c.benchmark_group("parse_match");
    // One iteration takes a sizeable fraction of a second for the slower
    // engines: flat sampling keeps the run short.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(case_count(files)));
    group.bench_function("robots_guard", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for f in files {
                for (agent, url) in &f.cases {
                    let robots = RobotsTxt::parse(black_box(&f.bytes));
                    allowed += usize::from(robots.check(AGENTS[*agent], black_box(url)).allowed);
                }
            }
            allowed
        })
    });
    group.bench_function("robotstxt", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for f in files {
                for (agent, url) in &f.cases {
                    allowed += usize::from(
                        robotstxt::DefaultMatcher::default().one_agent_allowed_by_robots(
                            black_box(&f.text),
                            AGENTS[*agent],
                            black_box(url),
                        ),
                    );
                }
            }
            allowed
        })
    });
    group.bench_function("texting_robots", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for f in files {
                for (agent, url) in &f.cases {
                    // A file it rejects counts as allowed.
                    let ok = texting_robots::Robot::new(AGENTS[*agent], black_box(&f.bytes))
                        .map(|r| r.allowed(black_box(url)))
                        .unwrap_or(true);
                    allowed += usize::from(ok);
                }
            }
            allowed
        })
    });
    group.finish();
}

fn match_only(c: &mut Criterion, files: &[File]) {
    let parsed: Vec<RobotsTxt> = files.iter().map(|f| RobotsTxt::parse(&f.bytes)).collect();
    // One `Robot` per file and agent; `None` where it rejects the file.
    let texting: Vec<Vec<Option<texting_robots::Robot>>> = files
        .iter()
        .map(|f| {
            AGENTS
                .iter()
                .map(|a| texting_robots::Robot::new(a, &f.bytes).ok())
                .collect()
        })
        .collect();

    let mut group = c.benchmark_group("match_only");
    group.throughput(Throughput::Elements(case_count(files)));
    group.bench_function("robots_guard", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for (f, robots) in files.iter().zip(&parsed) {
                for (agent, url) in &f.cases {
                    allowed += usize::from(robots.check(AGENTS[*agent], black_box(url)).allowed);
                }
            }
            allowed
        })
    });
    group.bench_function("robots_guard_for_agent", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for (f, robots) in files.iter().zip(&parsed) {
                let selected = AGENTS.map(|a| robots.for_agent(a));
                for (agent, url) in &f.cases {
                    allowed += usize::from(selected[*agent].check(black_box(url)).allowed);
                }
            }
            allowed
        })
    });
    // robotstxt has no parse-once API (every query re-parses the file), so
    // it has no match-only figure.
    group.bench_function("texting_robots", |b| {
        b.iter(|| {
            let mut allowed = 0usize;
            for (f, robots) in files.iter().zip(&texting) {
                for (agent, url) in &f.cases {
                    let ok = robots[*agent]
                        .as_ref()
                        .is_none_or(|r| r.allowed(black_box(url)));
                    allowed += usize::from(ok);
                }
            }
            allowed
        })
    });
    group.finish();
}

fn parse_large(c: &mut Criterion, files: &[File]) {
    let large: Vec<&File> = files
        .iter()
        .filter(|f| f.bytes.len() > LARGE_FILE_BYTES)
        .collect();
    let bytes: usize = large.iter().map(|f| f.bytes.len()).sum();
    let mut group = c.benchmark_group("parse_large");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("robots_guard", |b| {
        b.iter(|| {
            large
                .iter()
                .map(|f| RobotsTxt::parse(black_box(&f.bytes)).rule_count())
                .sum::<usize>()
        })
    });
    // robotstxt cannot parse without matching: parse and match `/`.
    group.bench_function("robotstxt_with_match", |b| {
        b.iter(|| {
            large
                .iter()
                .filter(|f| {
                    robotstxt::DefaultMatcher::default().one_agent_allowed_by_robots(
                        black_box(&f.text),
                        "Googlebot",
                        "https://example.com/",
                    )
                })
                .count()
        })
    });
    group.bench_function("texting_robots", |b| {
        b.iter(|| {
            large
                .iter()
                .filter(|f| texting_robots::Robot::new("Googlebot", black_box(&f.bytes)).is_ok())
                .count()
        })
    });
    group.finish();
}

fn hostile(c: &mut Criterion) {
    // 50 `*`, and the path never holds the final `b`: a backtracking or
    // position-set matcher does the most work here.
    let pattern = format!("/{}*b", "*a".repeat(49));
    let body = format!("User-agent: *\nDisallow: {pattern}\n");
    let url = format!("https://example.com/{}", "a".repeat(16 * 1024 - 1));
    let robots = RobotsTxt::parse(body.as_bytes());
    let texting = texting_robots::Robot::new("Googlebot", body.as_bytes())
        .expect("texting_robots accepts the hostile file");

    let mut group = c.benchmark_group("hostile");
    group.throughput(Throughput::Elements(1));
    group.bench_function("robots_guard_match", |b| {
        b.iter(|| robots.check("Googlebot", black_box(&url)).allowed)
    });
    group.bench_function("texting_robots_match", |b| {
        b.iter(|| texting.allowed(black_box(&url)))
    });
    // robotstxt is left out: its matcher calls `chars().nth()` and
    // `Vec::insert` per candidate position, so this case costs it minutes per
    // iteration (it never finished a warm-up).
    group.finish();
}

fn benches(c: &mut Criterion) {
    let files = load_corpus();
    report_agreement(&files);
    parse_match(c, &files);
    match_only(c, &files);
    parse_large(c, &files);
    hostile(c);
}

criterion_group! {
    name = robots_engine;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(20);
    targets = benches
}
criterion_main!(robots_engine);
