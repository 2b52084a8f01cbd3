//! The playground in a real browser: the server runs in-process on an
//! ephemeral port of 127.0.0.1, headless Chromium loads the page and moves
//! the rate slider as a user would (the page's `?drive=` hook dispatches the
//! slider's `input` and `change` events, waits for the redraw and marks the
//! body), and the dumped DOM must show the new numbers, the pinned
//! baseline's paired differences, the current point higher up the hockey
//! stick, and an export that `servesim run` reproduces to the last bit.
//!
//! Without a Chromium on the machine the browser part prints SKIPPED and
//! passes (the HTTP checks still run), except under `CI=true`, where a
//! missing browser is a failure (as in report_browser.rs).

use servesim::Catalog;
use servesim::playground::{Playground, serve};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The headline numbers the page and `summary.json` both hold: (page id, summary key).
const COMPARED: [(&str, &str); 9] = [
    ("p50-ttft", "median_ttft_ms"),
    ("p99-ttft", "p99_ttft_ms"),
    ("p50-tpot", "median_tpot_ms"),
    ("p99-tpot", "p99_tpot_ms"),
    ("p50-e2e", "median_e2el_ms"),
    ("p99-e2e", "p99_e2el_ms"),
    ("throughput", "request_throughput"),
    ("output-throughput", "output_throughput"),
    ("goodput", "request_goodput"),
];

/// A plain HTTP/1.0 GET: (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    get_with(addr, path, &format!("Host: {addr}"))
}

/// The same with the request's headers given (CRLF-separated).
fn get_with(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    try_get_with(addr, path, headers).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// [`get_with`], with a failed connection or a missing answer as an error.
fn try_get_with(addr: SocketAddr, path: &str, headers: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(s, "GET {path} HTTP/1.0\r\n{headers}\r\nConnection: close\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| std::io::Error::other(format!("no HTTP answer: {text}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status: {head}")))?;
    Ok((status, body.to_string()))
}

/// Attribute `name` of the element with id `id` in an HTML text.
fn attr(html: &str, id: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let start = html[..at].rfind('<')?;
    let end = at + html[at..].find('>')?;
    let tag = &html[start..end];
    let k = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let v = &tag[k..];
    Some(v[..v.find('"')?].replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
}

/// The number in `data-value` of element `id`.
fn value(html: &str, id: &str) -> f64 {
    let v = attr(html, id, "data-value").unwrap_or_else(|| panic!("no data-value on #{id}"));
    v.parse().unwrap_or_else(|_| panic!("#{id}: data-value {v:?} is not a number"))
}

/// Loads `url` headless and returns (DOM, log) once the page's script has
/// had up to 30 s of virtual time (paused while fetches are pending).
fn load(browser: &Path, url: &str) -> (String, String) {
    let extra = ["--virtual-time-budget=30000".to_string(), "--window-size=1400,2000".to_string()];
    crate::common::browser::headless(browser, url, &extra)
}

#[test]
fn playground_redraws_in_a_browser_and_exports_what_the_cli_reproduces() {
    let started = Instant::now();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("scenarios/quickstart.toml");
    let pg = Playground::new(&scenario, &["num_requests=2000".into()], Catalog::builtin().unwrap()).unwrap();
    let server = serve(pg, 0).unwrap();
    let addr = server.addr();
    assert!(addr.ip().is_loopback(), "the playground listens on {addr}, not on 127.0.0.1");

    // The page as served, at the scenario's own settings: the numbers before any move.
    let (status, page) = get(addr, "/");
    assert_eq!(status, 200, "{page}");
    let before = value(&page, "m-p99-ttft");
    let cy_before: f64 = attr(&page, "hockey-current-p99", "cy").expect("no current-point marker").parse().unwrap();
    assert!(page.contains("id=\"stages\"") && page.contains("Time to first token."), "no five stages");
    assert_eq!(
        page.matches("<svg class=\"chart\"").count(),
        5,
        "CDF, hockey stick, time series, timeline and the explanation's parts"
    );
    // The explain answer for the run on screen, with its tested what-ifs.
    assert!(page.contains("id=\"explain\"") && page.contains("what it pays for") && page.contains("paired difference"));
    assert_eq!(attr(&page, "s-rate", "value").as_deref(), Some("5"), "the rate slider starts at the scenario's rate");

    // A bad value is a readable error, and the server goes on serving.
    let (status, err) = get(addr, "/results?set=engine.max_num_seqs%3D0");
    assert_eq!(status, 422);
    assert!(err.contains("max_num_seqs") && err.contains("at least 1"), "unreadable error: {err}");
    assert_eq!(get(addr, "/results?set=workload.rate%3Dfast").0, 422);
    assert_eq!(get(addr, "/results").0, 200);
    // What a page must not do: read the machine's files, ask for minutes of
    // work, answer another site's page or another host name, or smuggle a
    // second key into one override.
    let (status, err) =
        get(addr, "/results?set=workload%3D%7Barrival%3D%22trace%22%2Ctrace%3D%7Bfile%3D%22%2Fetc%2Fpasswd%22%7D%7D");
    assert_eq!(status, 422, "{err}");
    assert!(err.contains("single values") && !err.contains("root:"), "{err}");
    // The key `file` spelt as a TOML escape: the value is a table, refused
    // as parsed, whatever its text says.
    let escaped = "workload.prompt_tokens={dist=\"empirical\",\"\\u0066ile\"=\"/etc/passwd\",column=\"root:x:0:0:root:/root:/bin/bash\"}";
    let encoded: String = escaped.bytes().map(|b| format!("%{b:02X}")).collect();
    let (status, err) = get(addr, &format!("/results?set={encoded}"));
    assert_eq!(status, 422, "{err}");
    assert!(err.contains("single values") && !err.contains("/root:/bin/bash"), "{err}");
    let (status, err) = get(addr, "/results?set=workload.prompt_tokens.file%3D%22%2Fetc%2Fpasswd%22");
    assert_eq!(status, 422, "{err}");
    assert!(err.contains("cannot name files"), "{err}");
    let (status, err) = get(addr, "/results?set=workload.output_tokens.mean%3D100000");
    assert_eq!(status, 422, "{err}");
    assert!(err.contains("at most 5e7"), "{err}");
    assert_eq!(get(addr, "/results?set=hardware.replicas%3D1000000").0, 422);
    // A key that multiplies memory, not work: refused before anything is allocated.
    let (status, err) = get(addr, "/results?set=lora.adapters%3D1000000000");
    assert_eq!(status, 422, "{err}");
    assert!(err.contains("lora.adapters") && err.contains("memory binds"), "{err}");
    let (status, _) = get_with(addr, "/results", &format!("Host: {addr}\r\nSec-Fetch-Site: cross-site"));
    assert_eq!(status, 403);
    assert_eq!(get_with(addr, "/results", &format!("Host: {addr}\r\nSec-Fetch-Site: same-origin")).0, 200);
    assert_eq!(get_with(addr, "/results", "Host: evil.example").0, 403);
    let (status, err) = get(addr, "/export.toml?set=engine.max_num_seqs%3D64%0Aduration_s%3D5%20%23");
    assert_eq!(status, 422, "a second key smuggled into an override was exported: {err}");

    let Some(browser) = crate::common::browser::find_browser() else {
        let ci = std::env::var("CI").as_deref() == Ok("true");
        assert!(
            !ci,
            "CI=true and no headless Chromium found: .ci/run installs Debian's chromium package; did it fail?"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED: no headless Chromium found (install Debian's chromium package)");
        return;
    };

    // Pin the scenario as the baseline, then drag the rate from 5 to 9 req/s.
    let (dom, log) = load(&browser, &format!("http://{addr}/?drive=pin,rate:9"));
    assert!(dom.contains("data-driven=\"done\""), "the drive did not finish; the DOM ends with:\n{}\n{log}", {
        let tail: String = dom.chars().rev().take(2000).collect();
        tail.chars().rev().collect::<String>()
    });
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "console messages:\n{}", console.join("\n"));

    // The numbers moved: a higher rate queues more.
    let after = value(&dom, "m-p99-ttft");
    assert!(after > before, "p99 TTFT did not rise with the rate: {before} ms -> {after} ms");
    assert_ne!(value(&dom, "m-throughput"), value(&page, "m-throughput"), "throughput did not change");
    // The baseline is the served page's run (same seed), the difference paired.
    assert_eq!(value(&dom, "b-p99-ttft"), before, "the pinned baseline is not the scenario's run");
    assert_eq!(value(&dom, "d-p99-ttft"), after - before);
    // The current point climbed the hockey stick (SVG y grows downwards).
    let cy_after: f64 = attr(&dom, "hockey-current-p99", "cy").expect("no current-point marker").parse().unwrap();
    assert!(cy_after < cy_before, "the current point did not move up: cy {cy_before} -> {cy_after}");
    assert_eq!(attr(&dom, "chart-hockey", "data-rate").as_deref(), Some("9"));

    // Export what is on screen and run it on the command line.
    let href = attr(&dom, "export-link", "href").expect("no export link");
    assert!(href.contains("workload.rate"), "the export does not carry the moved rate: {href}");
    let (status, toml) = get(addr, &href);
    assert_eq!(status, 200, "{toml}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("exported.toml");
    std::fs::write(&file, &toml).unwrap();
    let back = servesim::scenario::load_scenario(&file, &[]).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!((back.scenario.seed, back.scenario.num_requests), (7, Some(2000)));
    assert_eq!(back.scenario.workload.rate, Some(9.0));
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "servesim run {}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for (id, key) in COMPARED {
        let cli = summary[key].as_f64().unwrap_or_else(|| panic!("summary.json has no {key}"));
        assert_eq!(value(&dom, &format!("m-{id}")), cli, "{id}: the page and `servesim run` of the export differ");
    }
    assert_eq!(value(&dom, "m-slo"), summary["slo"]["attainment"].as_f64().unwrap());
    assert_eq!(value(&dom, "m-energy"), summary["energy"]["joules_per_output_token"].as_f64().unwrap());
    assert_eq!(attr(&dom, "m-verdict", "data-value").as_deref(), summary["stability"]["verdict"].as_str());
    server.stop();
    eprintln!("playground checked in {:.1} s", started.elapsed().as_secs_f64());
}

/// Threads of this process (Linux), or None.
fn threads() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok())
}

/// The HTTP layer's limits (issue 26): an endless header grew the server to
/// 2 GB, 5,000 half-open connections held 5,005 threads, and a Host of
/// `[::1]evil.example` or an empty one was accepted.
#[test]
fn the_playground_server_bounds_what_a_client_can_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pg = Playground::new(
        &root.join("scenarios/quickstart.toml"),
        &["num_requests=200".into()],
        Catalog::builtin().unwrap(),
    )
    .unwrap();
    let server = serve(pg, 0).unwrap();
    let addr = server.addr();
    let raw = |bytes: &[u8]| -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let _ = s.write_all(bytes);
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    };
    // One endless header: refused at the limit, not read to the end.
    let mut endless = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Long: ").into_bytes();
    endless.extend(std::iter::repeat_n(b'a', 200_000));
    assert!(raw(&endless).starts_with("HTTP/1.1 431"), "an endless header was read");
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: {addr}\r\n\r\n", "a".repeat(40_000));
    assert!(raw(long_line.as_bytes()).starts_with("HTTP/1.1 414"));
    // Only this machine's names, exactly; an empty or missing Host is refused.
    for host in ["Host: [::1]evil.example", "Host: ", "Host: 127.0.0.1.evil.example", "X-No-Host: 1"] {
        assert_eq!(get_with(addr, "/results", host).0, 403, "{host}");
    }
    assert_eq!(get_with(addr, "/results", "Host: [::1]:8737").0, 200);
    // Hundreds of half-open connections hold no thread each: the pool is fixed,
    // connections beyond its queue are closed, and the server answers once they go.
    let before = threads();
    let idle: Vec<TcpStream> = (0..300).filter_map(|_| TcpStream::connect(addr).ok()).collect();
    std::thread::sleep(Duration::from_millis(300));
    if let (Some(b), Some(a)) = (before, threads()) {
        assert!(a <= b + 2, "threads grew from {b} to {a} with {} idle connections", idle.len());
    }
    drop(idle);
    // (A connection may still be refused while the server closes the idle
    // ones queued before it: it is tried again until the server answers.)
    let started = Instant::now();
    let status = loop {
        match try_get_with(addr, "/results", &format!("Host: {addr}")) {
            Ok((status, _)) => break status,
            Err(e) if started.elapsed() < Duration::from_secs(20) => {
                eprintln!("GET /results after the idle connections: {e}; again");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("GET /results: {e}"),
        }
    };
    assert_eq!(status, 200);
    assert!(started.elapsed() < Duration::from_secs(20), "the server stayed blocked: {:?}", started.elapsed());
    server.stop();
}

/// Issue 26: the charts come before the explanation; the hockey stick
/// reaches past saturation (a scenario far below it still gets an
/// overloaded point, so the curve bends); and under overload a throughput
/// gain over the pinned baseline is not painted green.
#[test]
fn the_page_leads_with_charts_reaches_saturation_and_does_not_praise_an_overloaded_gain() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("scenarios/quickstart.toml");
    let sets = ["num_requests=1500".to_string(), "workload.rate=1".to_string()];
    let pg = Playground::new(&scenario, &sets, Catalog::builtin().unwrap()).unwrap();
    let server = serve(pg, 0).unwrap();
    let addr = server.addr();
    let (status, page) = get(addr, "/results");
    assert_eq!(status, 200, "{page}");
    let at = |needle: &str| page.find(needle).unwrap_or_else(|| panic!("{needle:?} not on the page"));
    let first_chart = at("<svg class=\"chart\"");
    assert!(first_chart < at("id=\"stages\"") && at("id=\"chart-hockey\"") < at("id=\"explain\""));
    // At 1 req/s the base rates (0.25–2 req/s) are all far below saturation:
    // the curve goes on until a point is overloaded.
    let hockey = &page[at("id=\"chart-hockey\"")..];
    let hockey = &hockey[..hockey.find("</svg>").unwrap()];
    assert!(hockey.contains("overloaded run"), "the hockey stick never reaches saturation");
    assert!(!page.contains("This configuration at 0.25, 0.50, 0.75, 1.00, 1.25, 1.50, 1.75, 2.00 req/s"));
    // Far past saturation, against the pinned scenario: throughput is higher
    // but the run is not a stable service.
    let (status, over) = get(addr, "/results?set=workload.rate%3D60&pinned=1");
    assert_eq!(status, 200, "{over}");
    let verdict = attr(&over, "m-verdict", "data-value").unwrap();
    assert!(verdict == "overloaded" || verdict == "inconclusive", "{verdict}");
    assert!(value(&over, "d-throughput") > 0.0, "no throughput gain to judge");
    let class = attr(&over, "d-throughput", "class");
    assert_eq!(class.as_deref(), Some("moot"), "a throughput gain under {verdict} is painted {class:?}");
    assert!(over.contains("id=\"moot-note\""));
    // Latency getting worse is still said plainly.
    assert_eq!(attr(&over, "d-p99-ttft", "class").as_deref(), Some("worse"));
    server.stop();
}
