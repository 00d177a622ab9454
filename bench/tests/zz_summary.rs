//! The end of a test run: how many of the tests that depend on the machine (a GPU, NVRTC, compilers,
//! files beside the test executables) ran, and how many were skipped and why, from the records those
//! tests wrote in this run (`tests/common/outcomes.rs`). A skipped test passes, so without this a run
//! on a machine without a GPU would read like a run of the GPU tests.
//!
//! It must run after every other test executable. Cargo runs the packages of a workspace one after
//! another in name order (this one, `sparsegpu-bench`, after `sparsegpu`) and the test targets of a
//! package in name order, hence this package and the name `zz_summary`; executables gathered to be
//! carried to a GPU machine run in name order too. It is a target without libtest's harness
//! (`harness = false` in `bench/Cargo.toml`) so that what it prints is never captured.

#[path = "../../tests/common/outcomes.rs"]
mod outcomes;

use outcomes::{Category, Record};
use std::collections::BTreeMap;

/// Records of other runs older than this are removed: no run lasts that long.
const KEEP_OTHER_RUNS: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

fn main() {
    // `cargo test -- --list` asks every target for its tests: this one has none to list.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let records = outcomes::read_this_run();
    print!("{}", summary(&records));
    outcomes::remove_old_runs(KEEP_OTHER_RUNS);
}

/// What each test of one category did: the reasons it skipped for (none: it ran), by test.
type Tests<'a> = BTreeMap<(&'a str, &'a str), Vec<&'a str>>;

fn summary(records: &[Record]) -> String {
    let mut text =
        String::from("\n=== Tests that depend on the machine, in this run (skipped in part counts as skipped)\n");
    if records.is_empty() {
        text += "None of them ran in this run (no records in ";
        text += &outcomes::this_run().map_or("an unknown folder".into(), |d| d.display().to_string());
        text += ").\n";
    }
    let width = Category::ALL.iter().map(|c| c.tests().len()).max().unwrap_or(0) + " tests:".len();
    for category in Category::ALL {
        let mut tests: Tests = BTreeMap::new();
        for r in records.iter().filter(|r| r.category == category) {
            let reasons = tests.entry((&r.binary, &r.test)).or_default();
            if let Some(reason) = &r.skip_reason
                && !reasons.contains(&reason.as_str())
            {
                reasons.push(reason);
            }
        }
        if tests.is_empty() {
            continue;
        }
        let skipped = tests.values().filter(|reasons| !reasons.is_empty()).count();
        let label = format!("{} tests:", category.tests());
        text += &format!("{label:width$} {} ran, {skipped} skipped\n", tests.len() - skipped);
        // Each reason once, with the executables whose tests skipped for it.
        let mut by_reason: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for ((binary, _), reasons) in &tests {
            for reason in reasons {
                *by_reason.entry(reason).or_default().entry(binary).or_default() += 1;
            }
        }
        for (reason, binaries) in by_reason {
            let count: usize = binaries.values().sum();
            let wheres: Vec<String> = binaries.iter().map(|(binary, n)| format!("{binary} {n}")).collect();
            text += &format!("    {count} skipped: {reason} [{}]\n", wheres.join(", "));
        }
    }
    let variables: Vec<&str> = Category::ALL.iter().filter_map(|c| c.required_by()).collect();
    let set: Vec<&str> = Category::ALL.iter().filter(|c| c.required()).filter_map(|c| c.required_by()).collect();
    text += &format!(
        "{}=1 make skips of their kind failures (set in this run: {}).\n",
        variables.join("=1, "),
        if set.is_empty() { "none".to_string() } else { set.join(", ") }
    );
    text
}
