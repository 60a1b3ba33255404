//! Real robots.txt files, as sites served them, through the parser: no panic, group
//! counts that fit the file's class, diagnostics and rules that point at real lines, and
//! verdicts that agree between the one-shot and agent-bound paths.
//!
//! The files are in `tests/testdata/robots/` (150 of them: the largest, every class and
//! line-ending or BOM variant, and sizes from empty to hundreds of KiB), listed in its
//! `INDEX.tsv`; its README says where they come from.

use std::path::PathBuf;

use robots_guard::robots::{RobotsTxt, RuleKind};

/// How many files `INDEX.tsv` lists.
const FILES: usize = 150;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/robots")
}
#[test]
fn corpus_parses_with_sane_groups() {
    let dir = corpus_dir();
    let index = std::fs::read_to_string(dir.join("INDEX.tsv"))
        .unwrap_or_else(|e| panic!("corpus index at {}: {e}", dir.display()));
    let mut files = 0;
    let mut total_groups = 0;
    for row in index.lines().skip(1) {
        let fields: Vec<&str> = row.split('\t').collect();
        let (file, class) = (fields[0], fields[2]);
        let body = std::fs::read(dir.join(file)).expect("corpus file listed in INDEX.tsv");
        let robots = RobotsTxt::parse(&body);
        files += 1;
        total_groups += robots.group_count();
        assert!(robots.line_count() >= 1, "{file}");
        assert!(
            robots.group_count() <= robots.line_count() as usize,
            "{file}"
        );
        assert!(
            robots.rule_count() <= robots.line_count() as usize,
            "{file}"
        );
        match class {
            // A file holding a user-agent line has at least one group.
            "robots" => assert!(robots.group_count() >= 1, "{file} has no group"),
            "empty" => assert_eq!(robots.group_count(), 0, "{file}"),
            _ => {}
        }
        for d in robots.diagnostics() {
            assert!(d.line >= 1 && d.line <= robots.line_count(), "{file}: {d}");
            assert!(!d.to_string().is_empty());
        }
        for agent in ["Googlebot", "FooBot", "bingbot", ""] {
            let bound = robots.for_agent(agent);
            for url in [
                "/",
                "/index.html",
                "/search?q=x",
                "/wp-admin/",
                "/a/b/c.php",
            ] {
                let verdict = robots.check(agent, url);
                assert_eq!(bound.check(url), verdict, "{file} {agent} {url}");
                if let Some(rule) = verdict.rule {
                    assert!(rule.line >= 1 && rule.line <= robots.line_count(), "{file}");
                    assert_eq!(rule.kind == RuleKind::Allow, verdict.allowed, "{file}");
                }
            }
        }
    }
    assert_eq!(files, FILES, "the corpus holds {FILES} files");
    // Real files hold several groups each: far more than one per file.
    assert!(
        total_groups > 2 * FILES,
        "only {total_groups} groups in the corpus"
    );
}
