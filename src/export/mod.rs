//! Exporters: one per format. Every file is written to a temporary name and
//! renamed into place, so an interrupted run never leaves a half-written file.

mod csv;
mod html;
mod lock;
mod manifest;
pub mod read;
mod run_data;
mod run_folder;
pub(crate) mod staging;
mod table;

pub use self::csv::{RequestsCsv, write_requests_csv};
pub use html::{esc as html_escape, report_number, stages_html, write_html_report};
pub use lock::FolderLock;
pub use manifest::{Manifest, manifest};
pub use run_data::{RunData, RunView, run_label};
pub use run_folder::{write_run, write_run_charts, write_run_files};
pub use staging::Staging;
pub use table::{format_baseline, format_check, format_summary, format_sweep};

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

/// Checks a run's output folder before the run: refuses a path that cannot
/// be a folder, and results already in it unless `force` or a servesim run
/// wrote them (its `manifest.json` says so: rerunning a run replaces its
/// results, all or nothing). The folder itself is created with the run's
/// [`Staging`]. Returns whether earlier results will be replaced.
pub fn prepare_out_dir(dir: &Path, force: bool) -> Result<bool> {
    check_out_dir(dir)?;
    let existing: Vec<&str> = RUN_FILES.iter().copied().filter(|f| dir.join(f).exists()).collect();
    if !force && !existing.is_empty() && !written_by_a_run(dir) {
        {
            return Err(ConfigError::new(format!("{} already holds results ({})", dir.display(), existing.join(", ")))
                .hint("pass --force to replace them, or --out DIR to write elsewhere")
                .into());
        }
    }
    Ok(!existing.is_empty())
}

/// Whether `dir` holds results a `servesim run` wrote: a manifest naming
/// the servesim version and the run's files, and no sweep's files.
fn written_by_a_run(dir: &Path) -> bool {
    let Ok(text) = read::read_whole(&dir.join("manifest.json"), 1 << 20) else { return false };
    let Ok(m) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
    m["servesim_version"].is_string()
        && m["files"].as_array().is_some_and(|f| f.iter().any(|x| x == "summary.json"))
        && !dir.join(crate::sweep::MANIFEST).exists()
}

/// Refuses an output path that cannot become a folder: a file, or a
/// symbolic link to nothing (which creating reported as "File exists").
fn check_out_dir(dir: &Path) -> Result<()> {
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

/// Creates an output folder (and its parents), after [`check_out_dir`].
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
