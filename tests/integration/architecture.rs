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

/// The name of the function a (rustfmt-formatted) line declares, if it does:
/// `fn`, after any of `pub`, `pub(…)`, `const`, `unsafe`, `async`,
/// `extern "…"`.
fn declares_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("pub(") {
            rest = r.split_once(") ")?.1;
        } else if let Some(r) = rest.strip_prefix("extern \"") {
            rest = r.split_once("\" ")?.1;
        } else if let Some(r) = ["pub ", "const ", "unsafe ", "async "].iter().find_map(|k| rest.strip_prefix(k)) {
            rest = r;
        } else {
            break;
        }
    }
    let name = rest.strip_prefix("fn ")?;
    name.split(|c: char| !(c.is_alphanumeric() || c == '_')).next()
}

/// The lines of the function whose signature starts at `lines[i]`, from
/// its signature to its closing brace (rustfmt puts that brace at the
/// signature's indentation, alone once comments are blanked); None for a
/// declaration without a body. Strings and comments are to be blanked
/// first ([`crate::imports::blank_comments_and_strings`]), so that a `}`
/// inside a literal cannot end a function.
fn fn_lines(lines: &[&str], i: usize) -> Option<usize> {
    let indent = &lines[i][..lines[i].len() - lines[i].trim_start().len()];
    let mut open = i;
    loop {
        let l = lines.get(open)?.trim_end();
        if l.ends_with(';') {
            return None;
        }
        if l.ends_with('}') && l.contains('{') {
            return Some(open - i + 1);
        }
        if l.ends_with('{') {
            break;
        }
        open += 1;
    }
    let closes =
        |l: &str| l.strip_prefix(indent).and_then(|r| r.strip_prefix('}')).is_some_and(|r| r.trim().is_empty());
    let close = (open + 1..lines.len()).find(|&k| closes(lines[k]))?;
    Some(close - i + 1)
}

/// Step 14's house rules, kept: no file in src/ over 1,000 lines and no
/// function there over 150 (unit tests included), so that a reader can hold
/// a mechanism in mind by opening one file.
#[test]
fn no_source_file_over_1000_lines_and_no_function_over_150() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    crate::imports::read_tree(&src, &src, &mut files);
    assert!(files.len() >= 100, "only {} files under src/", files.len());
    let (mut long_files, mut long_fns, mut fns) = (Vec::new(), Vec::new(), 0);
    for (name, text) in &files {
        let code = crate::imports::blank_comments_and_strings(text);
        let lines: Vec<&str> = code.lines().collect();
        if lines.len() > 1000 {
            long_files.push(format!("src/{name}: {} lines", lines.len()));
        }
        for i in 0..lines.len() {
            if let (Some(fname), Some(n)) = (declares_fn(lines[i]), fn_lines(&lines, i)) {
                fns += 1;
                if n > 150 {
                    long_fns.push(format!("src/{name}:{}: fn {fname}, {n} lines", i + 1));
                }
            }
        }
    }
    assert!(fns >= 1000, "only {fns} functions found: is the scanner broken?");
    assert!(long_files.is_empty(), "split these files (at most 1,000 lines): {long_files:?}");
    assert!(long_fns.is_empty(), "split these functions (at most 150 lines): {long_fns:?}");
}

/// The scanner above finds what it should.
#[test]
fn the_length_scanner_measures_functions() {
    let src = [
        "impl X {",
        "    pub(crate) const fn a(&self) -> u32 { 1 }",
        "",
        "    fn b(",
        "        x: u32,",
        "    ) -> u32 {",
        "        x",
        "    }",
        "    fn c(&self);",
        "}",
        "async fn d() {",
        "    let s = \"}\";",
        "}",
        "pub unsafe extern \"C\" fn e<T>(t: T) -> T",
        "where",
        "    T: Copy,",
        "{",
        "    t",
        "} // e",
        "fn f() {}",
        "fn g() {",
        "    let json = \"{",
        "}\";",
        "}",
    ];
    let code = crate::imports::blank_comments_and_strings(&src.join("\n"));
    let lines: Vec<&str> = code.lines().collect();
    let found: Vec<(usize, &str, Option<usize>)> =
        (0..lines.len()).filter_map(|i| declares_fn(lines[i]).map(|n| (i, n, fn_lines(&lines, i)))).collect();
    assert_eq!(
        found,
        vec![
            (1, "a", Some(1)),
            (3, "b", Some(5)),
            (8, "c", None),
            (10, "d", Some(3)),
            (13, "e", Some(6)),
            (19, "f", Some(1)),
            (20, "g", Some(4)),
        ]
    );
    assert_eq!(declares_fn("    // fn not_code"), None);
    assert_eq!(declares_fn("let f = fnord;"), None);
}
