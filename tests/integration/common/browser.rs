//! Headless Chromium for the browser tests (report_browser.rs, playground.rs).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each Chromium is killed (with the processes it started) after this long.
pub const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

/// Chromium under one of its usual names, on PATH or in /usr/bin.
pub fn find_browser() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.push(PathBuf::from("/usr/bin"));
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Loads `url` headless with a fresh profile and `--dump-dom`, plus `extra`
/// flags; returns (the DOM after loading, serialised; Chromium's log,
/// console messages included). Panics if it fails or outlasts
/// [`BROWSER_TIMEOUT`].
pub fn headless(browser: &Path, url: &str, extra: &[String]) -> (String, String) {
    let work = tempfile::tempdir().unwrap();
    let (out, err) = (work.path().join("stdout"), work.path().join("stderr"));
    // Output goes to files, not pipes: the renderer and GPU processes inherit
    // them, and a pipe held open by a straggler would hang the reader.
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .args(extra)
        .arg(format!("--user-data-dir={}", work.path().join("profile").display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > BROWSER_TIMEOUT {
            // The whole process group: the browser and the processes it started.
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            panic!("{} did not finish loading {url} within {BROWSER_TIMEOUT:?}", browser.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = String::from_utf8_lossy(&std::fs::read(&err).unwrap()).into_owned();
    assert!(status.success(), "{} exited with {status} on {url}:\n{log}", browser.display());
    (String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned(), log)
}
