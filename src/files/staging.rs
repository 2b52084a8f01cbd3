//! Writing a run's results folder all or nothing.
//!
//! A run is written into a staging folder inside the results folder
//! (`.staging-<pid>-<n>`), then moved into place file by file: first the old
//! `manifest.json` goes, then the other files are renamed over the old ones,
//! and the new `manifest.json` comes last. So a folder holds a manifest only
//! when every file beside it belongs to the same run, and readers (`plot`,
//! `report`) refuse a folder without one. A failure while writing (a full
//! disk, say) leaves the old results untouched; only a kill in the short
//! renaming phase can leave a folder without a manifest.
//!
//! Staging folders and `write_atomic` temporaries left by a process that
//! died (`kill -9`) are removed by the next run into the same folder.

use super::{RUN_FILES, create_out_dir};
use crate::error::{Error, Result, at};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Files of a run folder that a new run replaces or removes.
const REPLACED: [&str; 3] = ["baseline-summary.json", "report.html", "trace.json"];

/// A staging folder for one run's files.
pub struct Staging {
    dir: PathBuf,
    tmp: PathBuf,
    done: bool,
}

impl Staging {
    /// Creates `dir` if needed, removes stale temporaries in it, and opens a
    /// staging folder there.
    pub fn new(dir: &Path) -> Result<Self> {
        create_out_dir(dir)?;
        remove_stale(dir);
        static N: AtomicU32 = AtomicU32::new(0);
        let tmp = dir.join(format!(".staging-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&tmp).map_err(at("create", &tmp))?;
        Ok(Staging { dir: dir.to_path_buf(), tmp, done: false })
    }

    /// Where to write the run's files.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Moves the staged files into the results folder, manifest last.
    pub fn commit(mut self) -> Result<()> {
        let manifest = "manifest.json";
        remove_if_present(&self.dir.join(manifest))?;
        let staged: Vec<String> = std::fs::read_dir(&self.tmp)
            .map_err(at("read", &self.tmp))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for old in RUN_FILES.iter().chain(REPLACED.iter()) {
            if !staged.iter().any(|s| s == old) {
                remove_if_present(&self.dir.join(old))?;
            }
        }
        for name in staged.iter().filter(|n| *n != manifest) {
            let (from, to) = (self.tmp.join(name), self.dir.join(name));
            std::fs::rename(&from, &to).map_err(at("move into place", &to))?;
        }
        if staged.iter().any(|n| n == manifest) {
            let to = self.dir.join(manifest);
            std::fs::rename(self.tmp.join(manifest), &to).map_err(at("move into place", &to))?;
        }
        std::fs::remove_dir(&self.tmp).map_err(at("remove", &self.tmp))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

fn remove_if_present(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::Runtime(format!("cannot remove {}: {e}", p.display())))
        }
        _ => Ok(()),
    }
}

/// Removes staging folders and atomic-write temporaries (`.<file>.tmp-<pid>`)
/// in `dir` whose process is gone. Best effort: what cannot be removed stays.
pub(super) fn remove_stale(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = if let Some(rest) = name.strip_prefix(".staging-") {
            rest.split('-').next().and_then(|p| p.parse::<u32>().ok())
        } else if name.starts_with('.') {
            // `.<file>.tmp-<pid>`, or `.<chart>.png.tmp-<pid>.png` (the chart writer wants the extension).
            name.rsplit_once(".tmp-").and_then(|(_, p)| p.split('.').next()?.parse::<u32>().ok())
        } else {
            None
        };
        let Some(pid) = pid else { continue };
        if pid == std::process::id() || alive(pid, &e.path()) {
            continue;
        }
        let p = e.path();
        let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
    }
}

/// Whether process `pid` may still be writing `path` (a run's temporary
/// file, a sweep's lock): it runs (Linux: its /proc entry exists), or, where
/// that cannot be told, the file changed within the last day.
pub(crate) fn alive(pid: u32, path: &Path) -> bool {
    let proc = Path::new("/proc");
    if proc.join("self").exists() {
        return proc.join(pid.to_string()).exists();
    }
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age.as_secs() < 86_400)
}
