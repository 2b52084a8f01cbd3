//! Every command the README and docs/ print is checked (issue 26: a
//! calibrate example in docs/engines.md exited 2 and nothing noticed).
//!
//! A command is a line of a code block that starts with `servesim` (or
//! `cargo run --release --`), or an inline code span that does. Each is
//! judged by what it is:
//! - a synopsis (`servesim run [scenario.toml] [--out DIR]`, `--seed N`) or
//!   a mention (`servesim run`, `servesim run --set`): its command and every
//!   flag it names must exist;
//! - a concrete command must parse, and is run in a sandbox (a temporary
//!   folder holding links to the repository's files, `/tmp/` mapped into
//!   it), in the order the page gives, and must exit 0; where the page
//!   prints the `error:` it answers, it must exit 2 with that first line;
//! - a command too long for the test suite ([`HEAVY`]) is parsed, and its
//!   scenario and overrides are checked by `servesim check`; one that
//!   cannot run here ([`NOT_HERE`]) is parsed, with the reason stated.

use clap::{CommandFactory, Parser};
use servesim::cli::Cli;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands that take minutes (or write into the repository): parsed, and
/// their scenario checked, not run. (text the command contains, why)
const HEAVY: &[(&str, &str)] = &[
    ("servesim validate", "every data set: tests/integration/validation.rs runs them"),
    ("servesim stability-table", "hundreds of runs (tests/integration/stability.rs runs small tables)"),
    ("servesim bench", "measures speed over 10⁵–10⁷ requests"),
    ("plan scenarios/plan-70b-chat.toml", "half a minute (tests/integration/plan.rs plans it at 1,500 requests)"),
    ("plan scenarios/plan-fleet-day.toml", "a day of fleet runs"),
    ("capacity scenarios/", "bisections of many runs (tests/integration/plan.rs checks capacity)"),
    ("num_requests=1000000", "10⁶ or more requests"),
    ("scenarios/cluster/big-sweep.toml", "a cluster-sized sweep (.ci/slurm runs it sharded)"),
    ("calibrate validation:gpustack-serve-h100", "4.5 minutes of fitting, measured in docs/engines.md"),
];

/// Commands that cannot run in a sandbox. (text the command contains, why)
const NOT_HERE: &[(&str, &str)] = &[
    ("servesim playground", "starts a web server (tests/integration/playground.rs drives it)"),
    ("my-setup.toml", "the reader's own measurements and scenario"),
    ("calibrate perf_model.csv", "the reader's own measurements"),
    ("calibrate offline.csv", "the reader's own measurements"),
    ("shard-*", "merges the shards a job array or a shell loop wrote"),
    ("/tmp/big/shard-0", "merges a shard the shell loop above wrote"),
    ("output/shard-0", "merges the shards of a sweep run on several machines"),
    ("results/merged", "the merged folder of a sweep run as a cluster job"),
];

/// Files the text describes without shipping them: (name, how to make it
/// from the quickstart, first replaced by second).
const DESCRIBED: &[(&str, &str, &str, &str)] = &[
    ("chat.toml", "26:1: unknown field `max_num_seq`", "max_num_seqs = ", "max_num_seq = "),
    ("chat.toml", "34:8: `workload.rate`", "rate = 5.0", "rate = -3"),
];

#[derive(Debug)]
struct DocCommand {
    /// file:line
    at: String,
    text: String,
    words: Vec<String>,
    inline: bool,
    /// The `error:` line the page prints under it.
    error: Option<String>,
}

/// Splits a shell line into words: single and double quotes, and a `#`
/// that starts a word begins a comment.
fn shell_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quote, mut in_word) = (None, false);
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                }
                in_word = false;
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    std::iter::once(root.join("README.md")).chain(docs).collect()
}

fn commands(root: &Path, file: &Path) -> Vec<DocCommand> {
    let text = std::fs::read_to_string(file).unwrap();
    let name = file.strip_prefix(root).unwrap().display().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let (mut block, mut i) = (false, 0);
    let mut push = |at: usize, text: String, inline: bool, error: Option<String>| {
        let text = text.replace("cargo run --release -- ", "servesim ");
        let words = shell_words(&text);
        out.push(DocCommand { at: format!("{name}:{}", at + 1), text, words, inline, error });
    };
    while i < lines.len() {
        let l = lines[i].trim();
        if l.starts_with("```") {
            block = !block;
        } else if block {
            let l = l.strip_prefix("$ ").unwrap_or(l);
            if l.starts_with("servesim ") || l.starts_with("cargo run --release -- ") {
                let (start, mut full) = (i, l.to_string());
                while full.ends_with('\\') && i + 1 < lines.len() {
                    i += 1;
                    full = format!("{} {}", full.trim_end_matches('\\'), lines[i].trim());
                }
                let error = lines.get(i + 1).map(|n| n.trim()).filter(|n| n.starts_with("error:")).map(str::to_string);
                push(start, full, false, error);
            }
        } else if !l.is_empty() {
            // A paragraph (or table): code spans may run across its line breaks.
            let end = (i..lines.len()).find(|&j| lines[j].trim().is_empty() || lines[j].trim().starts_with("```"));
            let end = end.unwrap_or(lines.len());
            let para = lines[i..end].join("\n");
            let mut offset = 0;
            for (k, piece) in para.split('`').enumerate() {
                if k % 2 == 1 && piece.starts_with("servesim ") {
                    let span = piece.split_whitespace().collect::<Vec<_>>().join(" ");
                    push(i + para[..offset].matches('\n').count(), span, true, None);
                }
                offset += piece.len() + 1;
            }
            i = end;
            continue;
        }
        i += 1;
    }
    out
}

/// A synopsis or template: placeholders, options in brackets, shell variables.
fn is_template(c: &DocCommand) -> bool {
    ["<", "[", "...", "…", "$"].iter().any(|p| c.text.contains(p))
        || c.words.iter().skip(2).any(|w| !w.is_empty() && w.chars().all(|x| x.is_ascii_uppercase() || x == '_'))
}

/// A command named in prose: the command alone, or with flags and no values.
fn is_mention(c: &DocCommand) -> bool {
    c.inline && c.words.iter().skip(2).all(|w| w.starts_with('-'))
}

/// Checks that the command and every `--flag` a synopsis or mention names exist.
fn check_names(c: &DocCommand, problems: &mut Vec<String>) {
    let cli = Cli::command();
    let Some(sub) = c.words.get(1).and_then(|s| cli.find_subcommand(s)) else {
        problems.push(format!("{}: `{}`: no such command", c.at, c.text));
        return;
    };
    let longs: Vec<String> = sub
        .get_arguments()
        .chain(cli.get_arguments())
        .filter_map(|a| a.get_long().map(str::to_string))
        .chain(["help".to_string()])
        .collect();
    for w in c.words.iter().skip(2) {
        let w = w.trim_matches(|x| matches!(x, '[' | ']' | '.' | '…'));
        if let Some(flag) = w.strip_prefix("--") {
            let flag = flag.split('=').next().unwrap_or(flag);
            if !longs.iter().any(|l| l == flag) {
                problems.push(format!("{}: `{}`: {} has no --{flag}", c.at, c.text, sub.get_name()));
            }
        }
    }
}

/// A folder holding links to the repository's files, with room for output/ and /tmp/.
fn sandbox(root: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if !matches!(name.to_str(), Some("output" | "target" | ".git")) {
            std::os::unix::fs::symlink(e.path(), d.path().join(&name)).unwrap();
        }
    }
    std::fs::create_dir(d.path().join("tmp")).unwrap();
    d
}

fn run(dir: &Path, words: &[String]) -> (i32, String) {
    let t0 = std::time::Instant::now();
    let args: Vec<String> = words[1..].iter().map(|w| w.replace("/tmp/", &format!("{}/tmp/", dir.display()))).collect();
    let o = Command::new(env!("CARGO_BIN_EXE_servesim")).args(&args).current_dir(dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    eprintln!("docs: {:.1}s {}", t0.elapsed().as_secs_f64(), words.join(" "));
    assert!(!err.contains("panicked"), "servesim {args:?} panicked: {err}");
    (o.status.code().unwrap_or(-1), err)
}

/// The command `servesim check` of a run, sweep, capacity or plan command:
/// its scenario and overrides.
fn check_of(words: &[String]) -> Option<Vec<String>> {
    if !matches!(words.get(1)?.as_str(), "run" | "sweep" | "capacity" | "plan") {
        return None;
    }
    let mut out = vec!["servesim".to_string(), "check".to_string(), words.get(2)?.clone()];
    let mut it = words[3..].iter();
    while let Some(w) = it.next() {
        if w == "--set" {
            out.push(w.clone());
            out.push(it.next()?.clone());
        }
    }
    Some(out)
}

#[test]
fn every_command_in_the_docs_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let quickstart = std::fs::read_to_string(root.join("scenarios/quickstart.toml")).unwrap();
    let mut problems = Vec::new();
    let (mut ran, mut checked, mut named, mut skipped) = (0, 0, 0, Vec::new());
    let mut done = std::collections::HashSet::new();
    for file in doc_files(root) {
        let dir = sandbox(root);
        for c in commands(root, &file) {
            if is_template(&c) || is_mention(&c) {
                check_names(&c, &mut problems);
                named += 1;
                continue;
            }
            if let Err(e) = Cli::try_parse_from(&c.words) {
                problems.push(format!("{}: `{}` does not parse: {}", c.at, c.text, e.to_string().trim()));
                continue;
            }
            if let Some((_, why)) = NOT_HERE.iter().find(|(k, _)| c.text.contains(k)) {
                skipped.push(format!("{}: {} ({why})", c.at, c.text));
                continue;
            }
            if HEAVY.iter().any(|(k, _)| c.text.contains(k)) {
                if let Some(check) = check_of(&c.words) {
                    let (code, err) = run(dir.path(), &check);
                    if code != 0 {
                        problems.push(format!("{}: `{}`: its scenario does not check: {err}", c.at, c.text));
                    }
                }
                checked += 1;
                continue;
            }
            if let Some(error) = &c.error {
                for (name, says, from, to) in DESCRIBED {
                    if c.words.iter().any(|w| w == name) && error.contains(says) {
                        assert!(quickstart.contains(from), "quickstart.toml no longer holds {from:?}");
                        std::fs::write(dir.path().join(name), quickstart.replacen(from, to, 1)).unwrap();
                    }
                }
            } else if !done.insert(c.text.clone()) {
                continue;
            }
            let (code, err) = run(dir.path(), &c.words);
            ran += 1;
            match &c.error {
                Some(e) => {
                    let first = err.lines().next().unwrap_or("");
                    if code != 2 || first != e {
                        problems.push(format!(
                            "{}: `{}`: the page prints\n  {e}\nbut it exits {code} with\n  {first}",
                            c.at, c.text
                        ));
                    }
                }
                None if code != 0 => problems.push(format!("{}: `{}` exits {code}: {}", c.at, c.text, err.trim())),
                None => {}
            }
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    assert!(ran >= 40 && checked >= 8 && named >= 50, "ran {ran}, checked {checked}, named {named}");
    eprintln!(
        "ran {ran}, checked {checked} heavy ones, {named} synopses and mentions; not here:\n  {}",
        skipped.join("\n  ")
    );
}
