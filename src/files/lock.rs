//! An exclusive claim on a results folder while one command writes it.

use crate::error::{ConfigError, Error, Result, at};
use std::path::Path;

/// An exclusive claim on a results folder while a command writes it: the
/// file `.lock` holds the writer's pid. A second writer (two `--resume` at
/// once duplicated most points; two `run --out X` lost one run's results) is
/// refused; a lock left by a dead process is taken over. Taking it removes
/// the temporaries of writers that died ([`super::Staging`]).
pub struct FolderLock {
    path: std::path::PathBuf,
}

impl FolderLock {
    /// Takes the lock of folder `dir` (which must exist) for a `what`
    /// ("sweep", "run").
    pub fn take(dir: &Path, what: &str) -> Result<Self> {
        let path = dir.join(".lock");
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    std::io::Write::write_all(&mut f, std::process::id().to_string().as_bytes())
                        .map_err(at("write", &path))?;
                    // What a killed or failed writer left behind goes now.
                    super::staging::remove_stale(dir);
                    return Ok(FolderLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse::<u32>().ok());
                    let alive = holder.is_none_or(|pid| super::staging::alive(pid, &path));
                    if alive {
                        return Err(ConfigError::new(format!(
                            "another {what} (pid {}) is writing {}",
                            holder.map_or("?".into(), |p| p.to_string()),
                            dir.display()
                        ))
                        .hint(format!(
                            "wait for it to finish, or use another --out; if no {what} runs, remove {}",
                            path.display()
                        ))
                        .into());
                    }
                    std::fs::remove_file(&path).map_err(at("remove", &path))?;
                }
                Err(e) => return Err(at("create", &path)(e)),
            }
        }
        Err(Error::Runtime(format!("cannot take the lock {}", path.display())))
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
