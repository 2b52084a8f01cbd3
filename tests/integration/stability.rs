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

/// The families users run beyond Poisson queues (docs/stability.md, "Beyond
/// Poisson"): bursty gamma traffic with heavy-tailed lengths, the Azure code
/// trace, two priority classes, disaggregated pools and an autoscaled
/// fleet, each at loads relative to its measured saturation throughput. The
/// same targets as the Poisson table, except the gaps docs/stability.md
/// lists, which stay visible here so that a fix shows and a regression fails.
#[test]
fn detection_families_meet_their_targets() {
    use servesim::detection::family_cases;
    let catalog = Catalog::builtin().unwrap();
    let cases = family_cases(&System::FAMILIES, &[0.8, 0.9, 1.05, 1.2], &[20000]);
    let rows = table(&cases, 6, &catalog).unwrap();
    // Documented gaps (docs/stability.md): (family, target) pairs not met yet.
    let gap = |s: System, target: &str| {
        matches!(
            (s, target),
            // Bursts leave a realised load below capacity in some seeds: "stable" at ρ 1.05.
            (System::Bursty, "no stable") | (System::Bursty, "overloaded")
                // A trace with inter-arrival CV 13 cannot certify 20,000 requests either way.
                | (System::AzureCode, "stable") | (System::AzureCode, "overloaded")
                // The fleet starts at one replica: the first scale-up's lag is a real overload window.
                | (System::Autoscaled, "no overloaded") | (System::Autoscaled, "stable")
        )
    };
    let mut problems = Vec::new();
    for r in &rows {
        let Load::Steady(x) = r.case.load else { continue };
        let s = r.case.system;
        let label = format!("{} at ρ {x} with {} requests", s.name(), r.case.requests);
        if x <= 0.9 && r.overloaded > 0 && !gap(s, "no overloaded") {
            problems.push(format!("{label}: {} of {} runs called overloaded", r.overloaded, r.runs));
        }
        if x >= 1.05 && r.stable > 0 && !gap(s, "no stable") {
            problems.push(format!("{label}: {} of {} runs called stable", r.stable, r.runs));
        }
        if x >= 1.2 && r.overloaded < r.runs && !gap(s, "overloaded") {
            problems.push(format!("{label}: only {} of {} runs called overloaded", r.overloaded, r.runs));
        }
        if x <= 0.8 && r.stable < r.runs && !gap(s, "stable") {
            problems.push(format!("{label}: only {} of {} runs called stable", r.stable, r.runs));
        }
        // Whatever the gaps: never "overloaded" at ρ 0.8 on a steady stream
        // without a fleet, and never "stable" at ρ 1.2.
        if x <= 0.8 && r.overloaded > 0 && s != System::Autoscaled {
            problems.push(format!("{label}: {} of {} runs called overloaded", r.overloaded, r.runs));
        }
        // (A trace's ρ is nominal: a 20,000-request window of the looped
        // trace can run far below the trace's mean rate.)
        if x >= 1.2 && r.stable > 0 && s != System::AzureCode {
            problems.push(format!("{label}: {} of {} runs called stable", r.stable, r.runs));
        }
    }
    assert!(problems.is_empty(), "detection families miss their targets:\n  {}", problems.join("\n  "));
}
