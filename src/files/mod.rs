//! Files and folders: writing a file atomically, creating and locking a
//! results folder, staging a run's files all or nothing, and reading back
//! what servesim wrote within bounds. What the files hold is the business of
//! the modules that write them ([`crate::export`], [`crate::sweep`],
//! [`crate::explain`], [`crate::plot`]); this module only moves bytes.

mod lock;
pub mod read;
pub(crate) mod staging;

pub use lock::FolderLock;
pub use staging::Staging;

use crate::error::{ConfigError, Error, Result};
use std::io::Write;
use std::path::Path;

/// Files a run writes.
pub const RUN_FILES: [&str; 11] = [
    "summary.json",
    "requests.csv",
    "manifest.json",
    "timeseries.json",
    "timeline.json",
    "cdf.svg",
    "cdf.png",
    "timeseries.svg",
    "timeseries.png",
    "timeline.svg",
    "timeline.png",
];

/// Writes `bytes` to `path` atomically (temporary file + rename).
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let f = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        write(&mut w)?;
        w.flush()?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Runtime(format!("cannot write {}: {e}", path.display())));
    }
    Ok(())
}

/// Refuses an output path that cannot become a folder: a file, or a
/// symbolic link to nothing (which creating reported as "File exists").
pub(crate) fn check_out_dir(dir: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return Ok(()) };
    if meta.file_type().is_symlink() && std::fs::metadata(dir).is_err() {
        let target = std::fs::read_link(dir).map_or_else(|_| "?".into(), |t| t.display().to_string());
        return Err(ConfigError::new(format!(
            "{} is a symbolic link to {target}, which does not exist",
            dir.display()
        ))
        .hint("create the folder it points to, remove the link, or pass another --out")
        .into());
    }
    if !dir.is_dir() {
        return Err(ConfigError::new(format!("{} exists and is not a folder", dir.display()))
            .hint("pass --out with a folder path")
            .into());
    }
    Ok(())
}

/// Creates an output folder (and its parents), after `check_out_dir`.
pub fn create_out_dir(dir: &Path) -> Result<()> {
    check_out_dir(dir)?;
    std::fs::create_dir_all(dir).map_err(crate::error::at("create", dir))
}

/// Writes `value` as pretty JSON followed by a newline.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, value).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    })
}
