//! Reading back what servesim wrote, within bounds: a results folder is
//! user-writable, so a file in it may be a link to a device (`/dev/zero`),
//! a FIFO, or a file of endless lines. Every reader of a results folder
//! opens files through here: regular files only, whole files up to
//! [`MAX_WHOLE_BYTES`], lines up to [`MAX_LINE_BYTES`].

use crate::error::ConfigError;
use std::io::{BufRead, Read};
use std::path::Path;

/// Most bytes of a file read whole (manifest, summary, timeseries, charts).
pub const MAX_WHOLE_BYTES: u64 = 256 << 20;

/// Longest line of a file read line by line (requests.csv, points.jsonl).
pub const MAX_LINE_BYTES: usize = 1 << 20;

fn cannot(path: &Path, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::new(format!("cannot read {}: {e}", path.display()))
}

/// Opens `path` if it is a regular file (links followed), with its size.
pub fn open_regular(path: &Path) -> Result<(std::fs::File, u64), ConfigError> {
    let meta = std::fs::metadata(path).map_err(|e| cannot(path, e))?;
    if !meta.is_file() {
        return Err(ConfigError::new(format!(
            "{} is not a regular file (a {}); servesim reads back only the files it wrote",
            path.display(),
            if meta.is_dir() { "folder" } else { "device, pipe or socket" }
        ))
        .hint("remove it, or run the command again to write the folder afresh"));
    }
    let f = std::fs::File::open(path).map_err(|e| cannot(path, e))?;
    Ok((f, meta.len()))
}

/// Reads a regular file whole, refusing one over `max` bytes.
pub fn read_whole(path: &Path, max: u64) -> Result<String, ConfigError> {
    let (f, len) = open_regular(path)?;
    let too_big = || {
        ConfigError::new(format!("{} is over {} MiB: not a file servesim wrote", path.display(), max >> 20))
            .hint("remove it, or run the command again to write the folder afresh")
    };
    if len > max {
        return Err(too_big());
    }
    let mut text = String::new();
    f.take(max + 1).read_to_string(&mut text).map_err(|e| cannot(path, e))?;
    if text.len() as u64 > max {
        return Err(too_big());
    }
    Ok(text)
}

/// Reads the next line of `reader` into `line` (cleared first), refusing
/// one over [`MAX_LINE_BYTES`]. Returns the bytes read (0 at the end).
/// `at` names the file and line number for the error.
pub fn read_line(reader: &mut impl BufRead, line: &mut String, at: impl Fn() -> String) -> Result<usize, ConfigError> {
    line.clear();
    let n = reader
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_line(line)
        .map_err(|e| ConfigError::new(format!("cannot read {}: {e}", at())))?;
    if n > MAX_LINE_BYTES && !line.ends_with('\n') {
        return Err(ConfigError::new(format!(
            "{}: a line over {} MiB: not a file servesim wrote",
            at(),
            MAX_LINE_BYTES >> 20
        ))
        .hint("remove it, or run the command again to write the folder afresh"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_huge_files_and_endless_lines_are_refused() {
        if Path::new("/dev/zero").exists() {
            let e = read_whole(Path::new("/dev/zero"), 1024).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.json");
        std::fs::write(&p, vec![b'x'; 2048]).unwrap();
        assert!(read_whole(&p, 1024).unwrap_err().to_string().contains("over 0 MiB"));
        assert_eq!(read_whole(&p, 4096).unwrap().len(), 2048);
        let mut long = vec![b'a'; MAX_LINE_BYTES + 10];
        long.push(b'\n');
        let mut r = std::io::BufReader::new(&long[..]);
        let mut line = String::new();
        let e = read_line(&mut r, &mut line, || "requests.csv:2".into()).unwrap_err().to_string();
        assert!(e.contains("requests.csv:2") && e.contains("a line over 1 MiB"), "{e}");
        let mut r = std::io::BufReader::new(&b"a,b\nc"[..]);
        assert_eq!(read_line(&mut r, &mut line, String::new).unwrap(), 4);
        assert_eq!(read_line(&mut r, &mut line, String::new).unwrap(), 1);
        assert_eq!(read_line(&mut r, &mut line, String::new).unwrap(), 0);
    }
}
