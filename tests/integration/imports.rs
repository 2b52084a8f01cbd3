//! No import cycles between modules (docs/architecture.md, "Layers").
//!
//! Every `crate::…`, `super::…` and `self::…` path in `src/**/*.rs` is read
//! (comments and string literals left out, and `#[cfg(test)]` items and
//! test-only files such as `tests.rs`, which may import freely), resolved to
//! the file module it names (through `pub use` re-exports), and counted as an
//! arrow between two sibling modules: `calibrate` → `validate` at the top
//! level, `workload::trace::scan` → `workload::trace::datetime` inside a
//! folder. A module using its parent or its own children is no arrow. The
//! arrows must form no cycle, at any level.
//!
//! Inline modules (`mod limits { … }`) count as part of their file.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// A module path below the crate root: `["workload", "trace", "scan"]`.
type Module = Vec<String>;

/// Where an arrow comes from: `src/validate/gpustack.rs:158`.
type Site = String;

/// One source file: its module, its path, and its code with comments,
/// string and char literals blanked and `#[cfg(test)]` items removed
/// (newlines kept, so lines still count).
struct Source {
    module: Module,
    path: String,
    code: String,
}

/// The module a file under `src/` is: `a/b.rs` and `a/b/mod.rs` are `a::b`.
fn module_of(rel: &str) -> Module {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Module = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The code with comments and the contents of string and char literals
/// replaced by spaces, newlines kept.
pub(crate) fn blank_comments_and_strings(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (at(i + 1) == '"' || at(i + 1) == '#')
            && (i == 0 || at(i - 1) == 'b' || !at(i - 1).is_alphanumeric())
        {
            // A raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            while at(j) == '#' {
                j += 1;
            }
            if at(j) != '"' {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.push('"');
            (i..j).for_each(|_| out.push(' '));
            i = j + 1;
            while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#')) {
                blank(&mut out, c[i]);
                i += 1;
            }
            (0..=hashes).for_each(|_| out.push(' '));
            i += hashes + 1;
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A char literal ('x', '\n', '\''); a lifetime ('a) is left as it is.
            out.push(' ');
            i += 1;
            if at(i) == '\\' {
                out.push_str("  ");
                i += 2;
            }
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Removes every `#[cfg(test)]` item (the attribute through the item's `;`
/// or closing brace), keeping newlines; returns the names of the test-only
/// file modules it declared (`#[cfg(test)] mod tests;`).
fn strip_test_items(code: &mut String) -> Vec<String> {
    const ATTR: &str = "#[cfg(test)]";
    let mut test_files = Vec::new();
    while let Some(start) = code.find(ATTR) {
        let bytes = code.as_bytes();
        let mut i = start + ATTR.len();
        let mut depth = 0usize;
        let mut braced = false;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    depth += 1;
                    braced = true;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                b';' if depth == 0 && !braced => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let item = &code[start + ATTR.len()..i];
        let words: Vec<&str> =
            item.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        if !braced && let Some(k) = words.iter().position(|w| *w == "mod") {
            test_files.push(words[k + 1].to_string());
        }
        let blanked: String = code[start..i].chars().map(|ch| if ch == '\n' { '\n' } else { ' ' }).collect();
        code.replace_range(start..i, &blanked);
    }
    test_files
}

/// Tokens with their line: identifiers, `::`, and single punctuation.
fn tokens(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let c: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\n' {
            line += 1;
            i += 1;
        } else if c[i].is_whitespace() {
            i += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((c[s..i].iter().collect(), line));
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push(("::".to_string(), line));
            i += 2;
        } else {
            out.push((c[i].to_string(), line));
            i += 1;
        }
    }
    out
}

/// A path tree from token `i` on (`a::b::{c, d::e as f, *}`), expanded into
/// its leaves: each as its segments and the name it binds (`as` aliases
/// followed; `*` for a glob).
fn path_tree(t: &[(String, usize)], mut i: usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) -> usize {
    let mut segs = prefix.to_vec();
    let is_ident = |s: &str| s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_');
    while i < t.len() {
        let tok = t[i].0.as_str();
        if tok == "{" {
            i += 1;
            while i < t.len() && t[i].0 != "}" {
                i = path_tree(t, i, &segs, out);
                if i < t.len() && t[i].0 == "," {
                    i += 1;
                }
            }
            return i + 1;
        }
        if tok == "*" {
            out.push((segs, "*".to_string()));
            return i + 1;
        }
        if !is_ident(tok) {
            break;
        }
        if tok != "self" || segs.is_empty() {
            segs.push(tok.to_string());
        }
        i += 1;
        if t.get(i).is_some_and(|x| x.0 == "::") {
            i += 1;
            continue;
        }
        break;
    }
    let mut name = segs.last().cloned().unwrap_or_default();
    if t.get(i).is_some_and(|x| x.0 == "as") && t.get(i + 1).is_some() {
        name = t[i + 1].0.clone();
        i += 2;
    }
    out.push((segs, name));
    i
}

/// Turns `crate::`, `super::` and `self::` at the head of a path into the
/// absolute path below the crate root; `None` for any other head (an
/// external crate, a local name).
fn absolute(from: &Module, segs: &[String], known: &BTreeSet<Module>) -> Option<Vec<String>> {
    let (mut base, mut rest) = match segs.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &segs[1..]),
        Some("self") => (from.clone(), &segs[1..]),
        Some("super") => (from.clone(), segs),
        // A path into a child module, as `pub use child::Name;` writes it.
        Some(first) if known.contains(&[from.clone(), vec![first.to_string()]].concat()) => (from.clone(), segs),
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    Some([base, rest.to_vec()].concat())
}

/// The module graph: arrows between modules with the sites that make them.
#[derive(Default)]
struct Graph {
    /// Every arrow, from module to module, with its sites.
    arrows: BTreeMap<(Module, Module), Vec<Site>>,
}

/// Builds the graph of a crate's files, given as (path below `src/`, text).
fn graph(files: &[(String, String)]) -> Graph {
    let mut test_only: BTreeSet<Module> = BTreeSet::new();
    let mut sources = Vec::new();
    for (rel, text) in files {
        let module = module_of(rel);
        if module.last().is_some_and(|l| l == "tests") {
            test_only.insert(module.clone());
        }
        let mut code = blank_comments_and_strings(text);
        for name in strip_test_items(&mut code) {
            test_only.insert([module.clone(), vec![name]].concat());
        }
        sources.push(Source { module, path: format!("src/{rel}"), code });
    }
    sources.retain(|s| !test_only.iter().any(|t| s.module.starts_with(t)));
    let known: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();

    // Re-exports: (module, name) → the path it stands for; globs per module.
    let mut reexports: BTreeMap<(Module, String), Vec<String>> = BTreeMap::new();
    let mut globs: BTreeMap<Module, Vec<Module>> = BTreeMap::new();
    let mut toks = Vec::new();
    for s in &sources {
        let t = tokens(&s.code);
        for i in 0..t.len() {
            let public = i >= 1 && (t[i - 1].0 == "pub" || (t[i - 1].0 == ")" && i >= 4 && t[i - 4].0 == "pub"));
            if t[i].0 == "use" && public {
                let mut leaves = Vec::new();
                path_tree(&t, i + 1, &[], &mut leaves);
                for (segs, name) in leaves {
                    let Some(abs) = absolute(&s.module, &segs, &known) else { continue };
                    if name == "*" {
                        globs.entry(s.module.clone()).or_default().push(abs);
                    } else {
                        reexports.insert((s.module.clone(), name), abs);
                    }
                }
            }
        }
        toks.push(t);
    }

    // Which file module a path lands in, following re-exports.
    let defines = |m: &Module, name: &str| {
        sources.iter().filter(|s| &s.module == m).any(|s| {
            let t = tokens(&s.code);
            t.windows(2).any(|w| {
                ["fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod"].contains(&w[0].0.as_str())
                    && w[1].0 == name
            })
        })
    };
    let target = |abs: &[String]| -> Option<Module> {
        let mut path = abs.to_vec();
        for _ in 0..8 {
            let k = (0..=path.len()).rev().find(|&k| known.contains(&path[..k]))?;
            let m = path[..k].to_vec();
            let Some(next) = path.get(k) else { return Some(m) };
            if let Some(to) = reexports.get(&(m.clone(), next.clone())) {
                path = [to.clone(), path[k + 1..].to_vec()].concat();
                continue;
            }
            if let Some(g) = globs.get(&m).and_then(|g| g.iter().find(|g| defines(g, next))) {
                path = [g.clone(), path[k..].to_vec()].concat();
                continue;
            }
            return Some(m);
        }
        None
    };

    let mut g = Graph::default();
    for (s, t) in sources.iter().zip(&toks) {
        let mut i = 0;
        while i < t.len() {
            let head = t[i].0.as_str();
            let starts = matches!(head, "crate" | "super" | "self")
                && t.get(i + 1).is_some_and(|x| x.0 == "::")
                && (i == 0 || (t[i - 1].0 != "::" && t[i - 1].0 != "$"));
            if !starts {
                i += 1;
                continue;
            }
            let line = t[i].1;
            let mut leaves = Vec::new();
            let next = path_tree(t, i, &[], &mut leaves);
            for (segs, _) in leaves {
                let Some(to) = absolute(&s.module, &segs, &known).and_then(|abs| target(&abs)) else { continue };
                let site = format!("{}:{line}", s.path);
                let sites = g.arrows.entry((s.module.clone(), to)).or_default();
                if !sites.contains(&site) {
                    sites.push(site);
                }
            }
            i = next.max(i + 1);
        }
    }
    g
}

impl Graph {
    /// The arrows between siblings: a module's arrow to another counts
    /// between their ancestors just below the deepest folder they share;
    /// arrows to a module's own parent or children are left out.
    fn sibling_arrows(&self) -> BTreeMap<(Module, Module), Vec<Site>> {
        let mut out: BTreeMap<(Module, Module), Vec<Site>> = BTreeMap::new();
        for ((a, b), sites) in &self.arrows {
            let k = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            if k < a.len() && k < b.len() {
                out.entry((a[..=k].to_vec(), b[..=k].to_vec())).or_default().extend(sites.iter().cloned());
            }
        }
        for sites in out.values_mut() {
            // By file, then line.
            sites.sort_by_key(|s| {
                let (file, line) = s.rsplit_once(':').unwrap_or((s, "0"));
                (file.to_string(), line.parse::<usize>().unwrap_or(0))
            });
            sites.dedup();
        }
        out
    }

    /// Each set of modules that import one another in a ring (a strongly
    /// connected component of more than one module), with one shortest
    /// cycle through it and the sites of every arrow inside it.
    fn cycles(&self) -> Vec<String> {
        let arrows = self.sibling_arrows();
        let mut next: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
        for (a, b) in arrows.keys() {
            next.entry(a).or_default().push(b);
        }
        let reach = |from: &Module| {
            let mut seen = BTreeSet::from([from.clone()]);
            let mut todo = vec![from.clone()];
            while let Some(m) = todo.pop() {
                for n in next.get(&m).into_iter().flatten() {
                    if seen.insert((*n).clone()) {
                        todo.push((*n).clone());
                    }
                }
            }
            seen
        };
        let name = |m: &Module| m.join("::");
        let mut done: BTreeSet<Module> = BTreeSet::new();
        let mut out = Vec::new();
        for start in next.keys() {
            if done.contains(*start) {
                continue;
            }
            let from = reach(start);
            let ring: BTreeSet<Module> = from.iter().filter(|m| reach(m).contains(*start)).cloned().collect();
            done.extend(ring.iter().cloned());
            if ring.len() < 2 {
                continue;
            }
            // A shortest way back to `start` (breadth first within the ring).
            let mut prev: BTreeMap<&Module, &Module> = BTreeMap::new();
            let mut queue = VecDeque::from([*start]);
            let mut end = None;
            while let Some(m) = queue.pop_front() {
                for n in next.get(m).into_iter().flatten().filter(|n| ring.contains(**n)) {
                    if *n == *start {
                        end = Some(m);
                        queue.clear();
                        break;
                    }
                    if !prev.contains_key(n) {
                        prev.insert(n, m);
                        queue.push_back(n);
                    }
                }
            }
            let mut back = Vec::new();
            let mut m = end.expect("a ring has a cycle");
            while m != *start {
                back.push(m);
                m = prev[m];
            }
            let way: Vec<&Module> = std::iter::once(*start).chain(back.into_iter().rev()).chain([*start]).collect();
            let mut text = format!("cycle: {}\n", way.iter().map(|m| name(m)).collect::<Vec<_>>().join(" → "));
            for ((a, b), sites) in &arrows {
                if ring.contains(a) && ring.contains(b) {
                    text += &format!("  {} → {}:\n", name(a), name(b));
                    for s in sites {
                        text += &format!("    {s}\n");
                    }
                }
            }
            out.push(text);
        }
        out
    }
}

/// Every `.rs` file under `dir`, as (path below `src/`, text), in path order.
pub(crate) fn read_tree(src: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_tree(src, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn no_module_imports_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    // The binary's root is another crate: its `crate::` is not the library's.
    files.retain(|(rel, _)| rel != "main.rs");
    let g = graph(&files);
    let sibling = g.sibling_arrows();
    // The checker sees the crate: the core's arrows are there.
    assert!(sibling.len() > 100, "only {} arrows between modules: is the checker reading src/?", sibling.len());
    assert!(sibling.contains_key(&(vec!["sim".to_string()], vec!["engine".to_string()])));
    let cycles = g.cycles();
    assert!(cycles.is_empty(), "{} import cycle(s):\n{}", cycles.len(), cycles.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_through_a_folder_and_a_re_export() {
    let file = |p: &str, t: &str| (p.to_string(), t.to_string());
    let files = vec![
        file("lib.rs", "pub mod a; pub mod b;"),
        file("a/mod.rs", "mod x; mod y; pub use x::Thing;\n// use crate::b::Nope;\n"),
        file("a/x.rs", "use super::y::{self, Other};\npub struct Thing;"),
        file("a/y.rs", "pub struct Other;\nfn f() -> super::Thing { crate::b::g() }"),
        file("a/tests.rs", "use crate::b::*;"),
        file(
            "b.rs",
            "pub fn g() {}\nconst S: &str = \"crate::a::x\";\n#[cfg(test)]\nmod tests { use crate::a::Thing; }",
        ),
    ];
    let cycles = graph(&files).cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].starts_with("cycle: a::x → a::y → a::x\n"), "{}", cycles[0]);
    assert!(cycles[0].contains("src/a/x.rs:1") && cycles[0].contains("src/a/y.rs:2"), "{}", cycles[0]);
    // b uses nothing of a outside its tests: no cycle a ↔ b.
    let arrows = graph(&files).sibling_arrows();
    assert!(arrows.contains_key(&(vec!["a".into()], vec!["b".into()])));
    assert!(!arrows.contains_key(&(vec!["b".into()], vec!["a".into()])));
}
