//! A small reader for the shipped reference tables: comma-separated, a
//! header line, `#` comment lines before it, fields optionally in double
//! quotes (a doubled quote inside is one quote); a user's table is read
//! with the columns it needs ([`user_table`]).

use crate::error::ConfigError;
use std::path::Path;

/// A parsed table.
#[derive(Debug, Clone)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows of fields, as text.
    pub rows: Vec<Vec<String>>,
    /// The file line (from 1) of each row.
    pub lines: Vec<usize>,
}

impl Table {
    /// Parses shipped data; `name` is used in panics about it being malformed.
    pub fn parse(text: &str, name: &str) -> Table {
        Self::read(text).unwrap_or_else(|(line, m)| panic!("{name}:{line}: {m}"))
    }

    /// Parses a user's table: an error is (file line, what is wrong).
    pub fn read(text: &str) -> Result<Table, (usize, String)> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|(i, l)| (i + 1, l));
        let Some((_, head)) = lines.next() else { return Err((1, "no header line".into())) };
        let header = split(head);
        let mut rows = Vec::new();
        let mut at = Vec::new();
        for (line, l) in lines {
            let r = split(l);
            if r.len() != header.len() {
                return Err((line, format!("the row has {} fields, the header has {}", r.len(), header.len())));
            }
            rows.push(r);
            at.push(line);
        }
        Ok(Table { header, rows, lines: at })
    }

    /// The first of `names` that is not a column, if any.
    pub fn missing<'a>(&self, names: &[&'a str]) -> Option<&'a str> {
        names.iter().copied().find(|n| !self.header.iter().any(|h| h == n))
    }

    /// Index of column `name`.
    pub fn col(&self, name: &str) -> usize {
        self.header.iter().position(|h| h == name).unwrap_or_else(|| panic!("column {name} missing"))
    }

    /// Field `name` of row `r`.
    pub fn get<'a>(&self, r: &'a [String], name: &str) -> &'a str {
        &r[self.col(name)]
    }

    /// Field `name` of row `r` as a number (NaN when empty or not a number).
    pub fn num(&self, r: &[String], name: &str) -> f64 {
        self.get(r, name).trim().parse().unwrap_or(f64::NAN)
    }
}

/// A user's measurements table with the `required` columns, or an error
/// naming the file, the line and what is wrong (a malformed row panicked).
pub fn user_table(path: &Path, text: &str, required: &[&str]) -> Result<Table, ConfigError> {
    let t = Table::read(text).map_err(|(line, m)| {
        let mut e =
            ConfigError::new(m).file(path).hint("every row needs one value per header column; fix or remove it");
        e.line = Some(line);
        e
    })?;
    if let Some(c) = t.missing(required) {
        return Err(ConfigError::new(format!("column `{c}` is missing"))
            .file(path)
            .hint(format!("the table needs the columns {}", required.join(", "))));
    }
    Ok(t)
}

/// Splits one CSV line into fields.
fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().map(|s| s.trim().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_comments_and_numbers() {
        let t = Table::parse("# a comment\nname,value\n\"a, b\",3\n\"say \"\"hi\"\"\",x\n", "t");
        assert_eq!(t.rows[0][0], "a, b");
        assert_eq!(t.num(&t.rows[0], "value"), 3.0);
        assert_eq!(t.rows[1][0], "say \"hi\"");
        assert!(t.num(&t.rows[1], "value").is_nan());
    }
}
