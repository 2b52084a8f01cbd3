//! Exporters: one per format. Every file is written to a temporary name and
//! renamed into place ([`crate::files`]), so an interrupted run never leaves
//! a half-written file.

mod csv;
mod html;
mod manifest;
mod run_data;
mod run_folder;
mod table;

pub use self::csv::{RequestsCsv, write_requests_csv};
pub use html::{report_number, stages_html, write_html_report};
pub use manifest::{Manifest, manifest};
pub use run_data::{RunData, RunView, run_label};
pub use run_folder::{write_run, write_run_charts, write_run_files};
pub use table::{format_baseline, format_check, format_summary, format_sweep};

use crate::error::{ConfigError, Result};
use crate::files::{RUN_FILES, check_out_dir, read};
use std::path::Path;

/// Checks a run's output folder before the run: refuses a path that cannot
/// be a folder, and results already in it unless `force` or a servesim run
/// wrote them (its `manifest.json` says so: rerunning a run replaces its
/// results, all or nothing). The folder itself is created with the run's
/// [`crate::files::Staging`]. Returns whether earlier results will be replaced.
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
