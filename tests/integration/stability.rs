//! The overload test's detection table, as a test: queues of known load,
//! several seeds and run lengths, and the targets docs/stability.md
//! publishes. The full table (`servesim stability-table`, 50 seeds, up to
//! 100,000 requests) is in docs/stability.md; this runs a smaller grid.

use servesim::Catalog;
use servesim::detection::{Load, RHOS, System, cases, table};

#[test]
fn detection_table_meets_its_targets() {
    let catalog = Catalog::builtin().unwrap();
    let cases = cases(&[System::MM1, System::MD1, System::W1], &RHOS, &[2000, 20000]);
    let rows = table(&cases, 12, &catalog).unwrap();
    let mut problems = Vec::new();
    for r in &rows {
        let label = format!("{} at ρ {} with {} requests", r.case.system.name(), r.case.load.label(), r.case.requests);
        let (lo, hi) = match r.case.load {
            Load::Steady(x) => (x, x),
            Load::Peak { mean, swing } => (mean - swing, mean + swing),
        };
        // Never "overloaded" at ρ ≤ 0.9, whatever the length.
        if hi <= 0.9 && r.overloaded > 0 {
            problems.push(format!("{label}: {} of {} runs called overloaded", r.overloaded, r.runs));
        }
        // Never "stable" at ρ ≥ 1.05 with 20,000 requests or more.
        if lo >= 1.05 && r.case.requests >= 20000 && r.stable > 0 {
            problems.push(format!("{label}: {} of {} runs called stable", r.stable, r.runs));
        }
        // Long runs of clear overload are called so, not left inconclusive.
        if lo >= 1.2 && r.case.requests >= 20000 && r.overloaded < r.runs {
            problems.push(format!("{label}: only {} of {} runs called overloaded", r.overloaded, r.runs));
        }
        // Light, long runs are called stable.
        if hi <= 0.8 && r.case.requests >= 20000 && r.stable < r.runs {
            problems.push(format!("{label}: only {} of {} runs called stable", r.stable, r.runs));
        }
    }
    // A peak above capacity mid-run is found in most long runs of the single-server queues.
    for r in rows.iter().filter(|r| r.case.requests >= 20000 && r.case.system != System::W1) {
        if let Load::Peak { mean, swing } = r.case.load
            && mean + swing > 1.0
            && r.overloaded * 4 < r.runs * 3
        {
            problems.push(format!("{} peak: only {} of {} runs flagged", r.case.system.name(), r.overloaded, r.runs));
        }
    }
    assert!(problems.is_empty(), "detection table misses its targets:\n  {}", problems.join("\n  "));
}
