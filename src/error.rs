//! Errors. Configuration errors (exit code 2) name the file, line, key and the
//! fix; everything else is a runtime error (exit code 1).

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with user input: a scenario, a `--set` override, a catalogue file
/// or a command-line argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// What is wrong.
    pub message: String,
    /// The file it is in, if any.
    pub file: Option<PathBuf>,
    /// 1-based line in that file.
    pub line: Option<usize>,
    /// 1-based column in that file.
    pub column: Option<usize>,
    /// The dotted key path concerned, if known.
    pub key: Option<String>,
    /// How to fix it.
    pub hint: Option<String>,
}

impl ConfigError {
    /// A new error with just a message.
    pub fn new(message: impl Into<String>) -> Self {
        ConfigError { message: message.into(), file: None, line: None, column: None, key: None, hint: None }
    }

    /// Sets the file.
    pub fn file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    /// Sets the key path.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the hint (how to fix it).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Sets line and column from a byte offset into `text`.
    pub fn at_offset(mut self, text: &str, offset: usize) -> Self {
        let (line, column) = line_col(text, offset);
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    /// Converts a TOML parse/deserialise error, locating it in `text`.
    pub fn from_toml(e: &toml::de::Error, text: &str, file: &Path) -> Self {
        let msg = e.message().trim().to_string();
        let mut err = ConfigError::new(plain_type_message(&msg)).file(file);
        if msg.starts_with("duplicate key")
            && let Some(span) = e.span()
            && let Some((key, first)) = duplicated(text, span.start)
        {
            err.message = format!("duplicate key: it is already set{first}");
            return err.at_offset(text, span.start).key(key).hint("keep one of them and delete the other");
        }
        if let Some(span) = e.span() {
            err = err.at_offset(text, span.start);
            if let Some(key) = key_at(text, span.start) {
                err = err.key(key);
            }
        }
        if let Some(h) = unknown_field_hint(&msg).or_else(|| type_hint(&msg, err.key.as_deref())) {
            err = err.hint(h);
        }
        err
    }
}

/// The dotted key a "duplicate key" error at byte `at` of `text` is about
/// (a key, or a `[table]` header given twice), and where it was first set
/// (" at line N", or "" when not found).
fn duplicated(text: &str, at: usize) -> Option<(String, String)> {
    let line_start = text[..at.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?.trim();
    let header = |l: &str| {
        let l = l.trim();
        (l.starts_with('[') && !l.starts_with("[[")).then(|| l.trim_matches(['[', ']', ' ']).to_string())
    };
    let key_of = |l: &str| l.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_string());
    let lines: Vec<&str> = text[..line_start].lines().collect();
    let (key, first) = if let Some(table) = header(line) {
        let first = lines.iter().position(|l| header(l).as_deref() == Some(table.as_str()));
        (table, first)
    } else {
        let name = key_of(line)?;
        // The table this line is in: the last header above it.
        let start = lines.iter().rposition(|l| header(l).is_some() || l.trim().starts_with("[["));
        let table = start.and_then(|i| header(lines[i]));
        let from = start.map_or(0, |i| i + 1);
        let first = lines[from..].iter().position(|l| key_of(l).as_deref() == Some(name.as_str())).map(|i| i + from);
        (table.map_or(name.clone(), |t| format!("{t}.{name}")), first)
    };
    Some((key, first.map_or(String::new(), |i| format!(" at line {}", i + 1))))
}

/// serde's type names in words a scenario author knows.
const TYPE_WORDS: [(&str, &str); 12] = [
    ("u32", "a whole number from 0 to 4294967295"),
    ("u64", "a whole number of at least 0"),
    ("u16", "a whole number from 0 to 65535"),
    ("usize", "a whole number of at least 0"),
    ("i64", "a whole number"),
    ("f64", "a number"),
    ("a boolean", "true or false"),
    ("a string", "a string in quotes"),
    ("string only", "a string in quotes"),
    (
        "internally tagged enum LengthDist",
        "a length distribution, e.g. { dist = \"lognormal\", mean = 1000, cv = 1.0 }",
    ),
    ("internally tagged enum TimeDist", "a time distribution, e.g. { dist = \"exponential\", mean = 1.0 }"),
    ("a sequence", "a list, e.g. [1, 2]"),
];

/// "invalid type: X, expected T" in plain words: "expected `<T in words>`, found X".
pub fn plain_type_message(msg: &str) -> String {
    let Some(rest) = msg.strip_prefix("invalid type: ") else { return msg.to_string() };
    let Some((found, expected)) = rest.split_once(", expected ") else { return msg.to_string() };
    let words = TYPE_WORDS.iter().find(|(t, _)| expected == *t).map_or(expected, |(_, w)| w);
    let found = found.replace("floating point", "the number").replace("integer", "the number");
    format!("expected {words}, found {found}")
}

/// A fix for a type error: what to write instead, and where it is documented.
fn type_hint(msg: &str, key: Option<&str>) -> Option<String> {
    if !msg.starts_with("invalid type: ") && !msg.starts_with("invalid value: ") && !msg.contains("unknown variant") {
        return None;
    }
    let at = key.map_or(String::new(), |k| format!(" `{k}`"));
    Some(format!("write{at} as the message says; every key, its type and allowed values are in docs/scenario.md"))
}

/// 1-based (line, column) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" messages, suggests
/// the closest valid key.
fn unknown_field_hint(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    let (bad, rest) = rest.split_once('`')?;
    let valid: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let best = valid.iter().min_by_key(|v| edit_distance(bad, v))?;
    if edit_distance(bad, best) <= bad.len().max(3) / 2 + 1 {
        Some(format!("did you mean `{best}`?"))
    } else {
        Some(format!("remove `{bad}`; valid keys here are listed above"))
    }
}

/// Levenshtein distance (small strings only).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some(l) = self.line {
                write!(f, ":{l}")?;
                if let Some(c) = self.column {
                    write!(f, ":{c}")?;
                }
            }
            write!(f, ": ")?;
        }
        if let Some(k) = &self.key {
            write!(f, "`{k}`: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  fix: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Any servesim failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad user input (exit code 2).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Anything else, e.g. an I/O failure while writing results (exit code 1).
    #[error("{0}")]
    Runtime(String),
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(_) => 2,
            Error::Runtime(_) => 1,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Runtime(e.to_string())
    }
}

/// Names the file an I/O failure happened on: `.map_err(at("read", path))`
/// gives "cannot read PATH: REASON". Every file operation outside
/// [`crate::files::write_atomic`] (which names its file itself) goes through it.
pub fn at<'a>(what: &'a str, path: &'a std::path::Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| Error::Runtime(format!("cannot {what} {}: {e}", path.display()))
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The dotted key whose value holds byte `offset` of a TOML text (the
/// deepest one; array items as `key[i]`), to name the key of an error that
/// only has a position.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    use toml::de::DeValue;
    fn holds(span: std::ops::Range<usize>, offset: usize) -> bool {
        span.start <= offset && offset < span.end.max(span.start + 1)
    }
    fn join(k: &str, sub: String) -> String {
        match sub.chars().next() {
            None => k.to_string(),
            Some('[') => format!("{k}{sub}"),
            Some(_) => format!("{k}.{sub}"),
        }
    }
    // Tables' own spans do not cover their contents ([table] headers), so
    // every child is searched first; then a value whose span holds `offset`.
    fn find(v: &toml::Spanned<DeValue<'_>>, offset: usize) -> Option<String> {
        let inner = match v.get_ref() {
            DeValue::Table(t) => t.iter().find_map(|(k, v)| find(v, offset).map(|sub| join(k.get_ref(), sub))),
            DeValue::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| find(item, offset).map(|sub| join(&format!("[{i}]"), sub))),
            _ => None,
        };
        inner.or_else(|| holds(v.span(), offset).then(String::new))
    }
    let root = toml::de::DeTable::parse(text).ok()?;
    root.get_ref().iter().find_map(|(k, v)| find(v, offset).map(|sub| join(k.get_ref(), sub)))
}
