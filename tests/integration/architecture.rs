//! docs/architecture.md names files; every one must exist, so the map
//! cannot silently fall behind the code.

use std::path::Path;

#[test]
fn every_file_the_architecture_page_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    // Paths are written in backticks: `src/engine/mod.rs`.
    for chunk in text.split('`').skip(1).step_by(2) {
        let looks_like_file = ["src/", "tests/", "docs/", "models/", "scenarios/"].iter().any(|p| chunk.starts_with(p))
            && chunk.rsplit('/').next().is_some_and(|f| f.contains('.'))
            && !chunk.contains(' ');
        if looks_like_file {
            named += 1;
            if !root.join(chunk).exists() {
                missing.push(chunk.to_string());
            }
        }
    }
    assert!(named >= 40, "only {named} files named: did the page lose its map?");
    assert!(missing.is_empty(), "docs/architecture.md names files that do not exist: {missing:?}");
}
