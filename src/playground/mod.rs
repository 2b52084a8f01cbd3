//! `servesim playground`: a local web page to feel the latency–throughput
//! tradeoff (docs/playground.md).
//!
//! The page's controls are `--set` overrides of one scenario. Each change
//! re-simulates the scenario in-process ([`crate::resolve()`] and
//! [`crate::run_setup`]) and the server answers with the redrawn results:
//! headline numbers, the five stages of a request's life in words, latency
//! CDFs, latency against offered load (the hockey stick, cached per
//! configuration other than the rate), the run over time and a request
//! timeline, all server-rendered SVG from [`crate::plot`]. A pinned
//! baseline runs with the same seed (common random numbers) and the page
//! shows the paired differences. "Export" gives the scenario file of what
//! is on screen: `servesim run` on it prints the same numbers.
//!
//! The server ([`serve`]) listens on 127.0.0.1 only; [`Playground::respond`]
//! answers one request and never panics out (a panic becomes an error page).

mod explain;
mod http;
mod page;

pub use http::{Handle, Reply, serve};

use crate::error::{ConfigError, Result};
use crate::plot::Flag;
use crate::scenario::{LoadedScenario, load_scenario_str_with};
use crate::{Catalog, Report, Setup};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The port `servesim playground` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 8737;

/// Requests a scenario is cut to when it has more (`num_requests`, or a
/// `duration_s` shortened to about as many), so that a redraw stays
/// interactive; the page's "requests" control raises it again.
pub const DEFAULT_CAP: u64 = 2000;

/// The most requests one playground run may simulate (more is refused with
/// a message pointing at `servesim run`).
pub const MAX_REQUESTS: f64 = 100_000.0;

/// Offered rates of the latency-vs-load curve, as multiples of the rate it
/// is drawn around.
pub const CURVE_FACTORS: [f64; 8] = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0];
/// When none of those rates overloads the configuration, the curve goes on
/// from its highest rate by these factors, up to this many rounds, until a
/// point is overloaded: the hockey stick reaches past saturation and bends.
const EXTEND_STEPS: [f64; 3] = [1.5, 2.25, 3.375];
const EXTEND_ROUNDS: usize = 4;

/// Curves and baselines kept between redraws.
const CURVE_CACHE: usize = 16;
const BASELINE_CACHE: usize = 4;
/// Most overrides one request may carry.
const MAX_SETS: usize = 256;

/// Most prompt + output tokens one run of the page may simulate (20 times
/// the capped quickstart): a request for more is refused, so that no value
/// typed into the page can keep the server busy for minutes.
pub const MAX_TOKENS: f64 = 5e7;

/// Most replicas one run of the page may simulate.
pub const MAX_REPLICAS: u32 = 64;

/// Most memory one run of the page may need ([`crate::resolve::estimate`]):
/// no value typed into the page can grow the server past a few of these.
pub const MAX_MEMORY_BYTES: f64 = 256.0 * 1024.0 * 1024.0;

/// Simulations running at once; a request beyond them is answered 503.
pub const MAX_IN_FLIGHT: usize = 2;

/// Why the page refuses override `set`, if it does. The page's controls
/// and its "other overrides" box set single values: the value is parsed as
/// the loader parses it, and a table or list is refused (the page has no
/// reason to replace a section, and a table could name a file however its
/// keys are spelt). Keys that name files or replace the workload's tables
/// (`file`, `trace`, `lengths` anywhere in the dotted path) are refused too;
/// [`Playground::load`] then checks that the loaded scenario reads no file
/// the command line's did not.
fn refused(set: &str) -> Option<String> {
    let key = set_key(set);
    let raw = set.split_once('=').map_or("", |(_, v)| v).trim();
    let value = crate::scenario::parse_value(raw);
    if matches!(value, toml::Value::Table(_) | toml::Value::Array(_)) {
        return Some(format!(
            "`{key}`: the playground's page takes single values (a number, a string, true or false), not a {}",
            if value.is_table() { "table" } else { "list" }
        ));
    }
    let names_file = key.split('.').map(|p| p.split_once('[').map_or(p, |(n, _)| n).trim()).any(|p| {
        let p = p.to_ascii_lowercase();
        p == "file" || p == "trace" || p == "lengths" || p.ends_with("file") || p.ends_with("path")
    });
    (key == "workload" || names_file).then(|| {
        format!(
            "`{key}`: the playground's page cannot name files (traces, length tables) or replace the workload's tables"
        )
    })
}

/// The files a scenario table names (`file` keys at any depth), with where.
fn files_named(t: &toml::Table) -> Vec<String> {
    fn walk(v: &toml::Value, at: &str, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let here = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                    if k == "file" {
                        out.push(format!("{here}={v}"));
                    }
                    walk(v, &here, out);
                }
            }
            toml::Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(v, &format!("{at}[{i}]"), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&toml::Value::Table(t.clone()), "", &mut out);
    out.sort();
    out
}

/// What the page shows: the user's overrides and, when pinned, the
/// baseline's. Both are `--set`-style `key=value` strings applied after the
/// command line's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Overrides of the configuration on screen.
    pub sets: Vec<String>,
    /// Overrides of the pinned baseline (None: nothing pinned).
    pub baseline: Option<Vec<String>>,
}

impl State {
    /// Reads a URL query: `set=K=V` (repeatable), `pinned=1` and `pin=K=V`
    /// (repeatable) for the baseline; other parameters are ignored.
    pub fn parse(query: &str) -> State {
        let mut s = State::default();
        let (mut pins, mut pinned) = (Vec::new(), false);
        for (k, v) in http::query_pairs(query) {
            match k.as_str() {
                "set" if !v.trim().is_empty() => s.sets.push(v.trim().to_string()),
                "pin" if !v.trim().is_empty() => pins.push(v.trim().to_string()),
                "pinned" => pinned = v != "0",
                _ => {}
            }
        }
        if pinned || !pins.is_empty() {
            s.baseline = Some(pins);
        }
        s
    }

    /// The URL query that [`State::parse`] reads back.
    pub fn query(&self) -> String {
        let mut q: Vec<String> = self.sets.iter().map(|s| format!("set={}", http::encode(s))).collect();
        if let Some(b) = &self.baseline {
            q.push("pinned=1".into());
            q.extend(b.iter().map(|s| format!("pin={}", http::encode(s))));
        }
        q.join("&")
    }
}

/// One point of the latency-vs-load curve.
#[derive(Debug, Clone)]
struct CurvePoint {
    rate: f64,
    p50: f64,
    p99: f64,
    flag: Option<Flag>,
}

/// The latency-vs-load curve of one configuration (everything but the rate).
#[derive(Debug)]
struct Curve {
    /// The rate the curve's rates are multiples of.
    anchor: f64,
    points: Vec<CurvePoint>,
    /// Points that could not run, with why.
    errors: Vec<String>,
}

impl Curve {
    fn covers(&self, rate: f64) -> bool {
        let (lo, hi) = (CURVE_FACTORS[0] * self.anchor, CURVE_FACTORS[CURVE_FACTORS.len() - 1] * self.anchor);
        let hi = self.points.iter().map(|p| p.rate).fold(hi, f64::max);
        rate >= lo * (1.0 - 1e-9) && rate <= hi * (1.0 + 1e-9)
    }
}

/// Everything one redraw shows.
pub struct View {
    /// The scenario on screen (command-line and page overrides applied).
    pub loaded: LoadedScenario,
    /// Its run.
    pub report: Report,
    /// The pinned baseline's run with the same seed, or why it could not run.
    pub baseline: Option<std::result::Result<Arc<Report>, String>>,
    curve: std::result::Result<Arc<Curve>, String>,
    /// `servesim explain`'s answer for this run (its what-ifs run with 3
    /// seeds), or why there is none.
    pub explanation: std::result::Result<crate::explain::Explanation, String>,
    /// Wall-clock time of the simulations, ms.
    pub sim_ms: f64,
}

/// A playground over one scenario file: its text, the command line's
/// overrides and the catalogue, with caches shared by the server's threads.
pub struct Playground {
    path: PathBuf,
    text: String,
    /// The command line's `--set`s, then the request cap.
    base_sets: Vec<String>,
    catalog: Arc<Catalog>,
    /// The scenario with `base_sets` applied: what the controls start from.
    initial: LoadedScenario,
    curves: Mutex<Vec<(String, Arc<Curve>)>>,
    baselines: Mutex<Vec<(String, Arc<Report>)>>,
    /// Simulations running now ([`MAX_IN_FLIGHT`]).
    pub(crate) in_flight: std::sync::atomic::AtomicUsize,
}

/// A poisoned cache is still a cache.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Looks `key` up in a small most-recently-used list.
fn cached<T>(cache: &Mutex<Vec<(String, Arc<T>)>>, key: &str) -> Option<Arc<T>> {
    let mut c = lock(cache);
    let i = c.iter().position(|(k, _)| k == key)?;
    let hit = c.remove(i);
    let v = hit.1.clone();
    c.insert(0, hit);
    Some(v)
}

fn remember<T>(cache: &Mutex<Vec<(String, Arc<T>)>>, key: String, value: Arc<T>, max: usize) {
    let mut c = lock(cache);
    c.retain(|(k, _)| *k != key);
    c.insert(0, (key, value));
    c.truncate(max);
}

/// The dotted key of a `key=value` override.
fn set_key(set: &str) -> &str {
    set.split_once('=').map_or(set, |(k, _)| k).trim()
}

impl Playground {
    /// Reads and validates a scenario with the command line's overrides.
    /// A scenario of more than [`DEFAULT_CAP`] requests is cut to that many
    /// unless `sets` name `num_requests` or `duration_s` themselves.
    pub fn new(path: &Path, sets: &[String], catalog: Catalog) -> Result<Playground> {
        let catalog = Arc::new(catalog);
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(format!("cannot read scenario: {e}"))
                .file(path)
                .hint("pass the path of a scenario TOML file, e.g. scenarios/quickstart.toml")
        })?;
        let mut base_sets = sets.to_vec();
        let loaded = load_scenario_str_with(&text, path, &base_sets, &catalog)?;
        let setup = crate::resolve(&loaded.scenario, &catalog).map_err(|e| loaded.locate(e))?;
        let user_sized = sets.iter().any(|s| matches!(set_key(s), "num_requests" | "duration_s"));
        if !user_sized && let Some(cap) = cap_set(&loaded, &setup, DEFAULT_CAP) {
            base_sets.push(cap);
        }
        let initial = load_scenario_str_with(&text, path, &base_sets, &catalog)?;
        Ok(Playground {
            path: path.to_path_buf(),
            text,
            base_sets,
            catalog,
            initial,
            curves: Mutex::new(Vec::new()),
            baselines: Mutex::new(Vec::new()),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The scenario file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The overrides every run starts from: the command line's, then the
    /// request cap if one was applied.
    pub fn base_sets(&self) -> &[String] {
        &self.base_sets
    }

    /// The scenario with the page's overrides `user` after the base ones.
    pub fn load(&self, user: &[String]) -> std::result::Result<LoadedScenario, ConfigError> {
        if user.len() > MAX_SETS {
            return Err(ConfigError::new(format!("{} overrides in one request; at most {MAX_SETS}", user.len())));
        }
        let on_command_line = "pass such changes on the command line: servesim playground SCENARIO --set ...";
        if let Some(why) = user.iter().find_map(|s| refused(s)) {
            return Err(ConfigError::new(why).hint(on_command_line));
        }
        let sets: Vec<String> = self.base_sets.iter().chain(user).cloned().collect();
        let loaded = load_scenario_str_with(&self.text, &self.path, &sets, &self.catalog)?;
        if files_named(&loaded.table()) != files_named(&self.initial.table()) {
            return Err(ConfigError::new(
                "these overrides change the files the scenario reads; the playground's page cannot name files",
            )
            .hint(on_command_line));
        }
        Ok(loaded)
    }

    fn resolve(&self, loaded: &LoadedScenario) -> std::result::Result<Setup, ConfigError> {
        let setup = crate::resolve(&loaded.scenario, &self.catalog).map_err(|e| loaded.locate(e))?;
        if let Some(n) = expected_requests(&setup)
            && n > MAX_REQUESTS
        {
            return Err(ConfigError::new(format!(
                "this run would simulate about {n:.0} requests; the playground runs at most {MAX_REQUESTS:.0} so \
                 that the page redraws at once"
            ))
            .key(if loaded.scenario.num_requests.is_some() { "num_requests" } else { "duration_s" })
            .hint("lower the request count (the \"requests\" control), or run it with `servesim run`"));
        }
        let base = &self.initial.scenario;
        if expected_requests(&setup).is_none()
            && loaded.scenario.duration_s.unwrap_or(f64::INFINITY) > base.duration_s.unwrap_or(f64::INFINITY)
        {
            return Err(ConfigError::new(
                "this workload's request count cannot be told in advance (closed loop): the page may shorten its \
                 duration_s, not lengthen it",
            )
            .key("duration_s")
            .hint("run longer runs with `servesim run`"));
        }
        let memory = crate::resolve::estimate(&setup);
        if memory.memory_bytes > MAX_MEMORY_BYTES {
            let (key, _) = memory.memory_driver.unwrap_or(("requests", 0.0));
            return Err(ConfigError::new(format!(
                "this run would need {}; the playground runs at most {:.0} MiB",
                memory.describe(),
                MAX_MEMORY_BYTES / 1048576.0
            ))
            .key(if key == "requests" { "num_requests" } else { key })
            .hint("lower it, or run it with `servesim run`"));
        }
        let replicas: u32 = setup.pools.iter().map(|p| p.replicas).sum();
        if replicas > MAX_REPLICAS {
            return Err(ConfigError::new(format!(
                "{replicas} replicas; the playground simulates at most {MAX_REPLICAS}"
            ))
            .key("hardware.replicas")
            .hint("run larger clusters with `servesim run`"));
        }
        let (p, o) = setup.workload.mean_lengths();
        if let Some(n) = expected_requests(&setup)
            && n * (p + o) > MAX_TOKENS
        {
            return Err(ConfigError::new(format!(
                "this run would simulate about {:.1e} prompt and output tokens; the playground simulates at most \
                 {MAX_TOKENS:.0e} so that the page redraws at once",
                n * (p + o)
            ))
            .hint("lower the request count or the lengths, or run it with `servesim run`"));
        }
        Ok(setup)
    }

    /// Simulates the configuration of `state`, its pinned baseline with the
    /// same seed, and the latency-vs-load curve (from the cache when this
    /// configuration, rate aside, was drawn before), side by side.
    pub fn simulate(&self, state: &State) -> Result<View> {
        let start = Instant::now();
        let loaded = self.load(&state.sets)?;
        let mut setup = self.resolve(&loaded)?;
        // Attribution changes no number of the run; explain needs it.
        setup.attribution = true;
        let seed = loaded.scenario.seed;
        let ((report, baseline), curve) = rayon::join(
            || {
                rayon::join(
                    || crate::run_setup(&setup, seed),
                    || state.baseline.as_ref().map(|b| self.baseline(b, seed)),
                )
            },
            || self.curve(&loaded, &state.sets),
        );
        report.check().map_err(|e| loaded.locate(e))?;
        let opts = crate::explain::Options { replications: 3, what_if: true, metric: None };
        let explanation = crate::explain::explain(&report, &loaded, &self.catalog, opts).map_err(|e| e.to_string());
        let sim_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(View { loaded, report, baseline, curve, explanation, sim_ms })
    }

    /// The pinned baseline's run with `seed` (the configuration's, so that
    /// both see the same arrivals and lengths).
    fn baseline(&self, sets: &[String], seed: u64) -> std::result::Result<Arc<Report>, String> {
        let mut sets = sets.to_vec();
        sets.push(format!("seed={seed}"));
        let key = sets.join("\n");
        if let Some(r) = cached(&self.baselines, &key) {
            return Ok(r);
        }
        let run = || -> Result<Report> {
            let loaded = self.load(&sets)?;
            let setup = self.resolve(&loaded)?;
            let r = crate::run_setup(&setup, seed);
            r.check().map_err(|e| loaded.locate(e))?;
            Ok(r)
        };
        let r = Arc::new(run().map_err(|e| e.to_string())?);
        remember(&self.baselines, key, r.clone(), BASELINE_CACHE);
        Ok(r)
    }

    /// The latency-vs-load curve around the scenario's rate, cached per
    /// configuration without the rate; recomputed around the current rate
    /// when that leaves the cached curve's range.
    fn curve(&self, loaded: &LoadedScenario, user: &[String]) -> std::result::Result<Arc<Curve>, String> {
        let Some(rate) = loaded.scenario.workload.rate.filter(|r| r.is_finite() && *r > 0.0) else {
            return Err(format!(
                "no latency-vs-load curve: this workload has no single offered rate (`workload.rate`; arrival \
                 = \"{}\")",
                loaded.scenario.workload.arrival_kind().as_str()
            ));
        };
        let key: Vec<&str> = user.iter().map(|s| s.as_str()).filter(|s| set_key(s) != "workload.rate").collect();
        let key = key.join("\n");
        if let Some(c) = cached(&self.curves, &key)
            && c.covers(rate)
        {
            return Ok(c);
        }
        let seed = loaded.scenario.seed;
        let point = |r: f64| -> std::result::Result<CurvePoint, String> {
            let what = format!("the latency-vs-load point at {r} req/s");
            let s =
                loaded.derive(&[("workload.rate".into(), toml::Value::Float(r))], &what).map_err(|e| e.to_string())?;
            let setup = crate::resolve(&s, &self.catalog).map_err(|e| format!("{what}: {e}"))?;
            let rep = crate::run_lean(&setup, seed);
            rep.check().map_err(|e| format!("{what}: {e}"))?;
            let v = serde_json::to_value(&rep.summary).map_err(|e| format!("{what}: {e}"))?;
            let get = |k: &str| metric(&v, k).unwrap_or(f64::NAN);
            Ok(CurvePoint { rate: r, p50: get("median_ttft_ms"), p99: get("p99_ttft_ms"), flag: flag(&rep.summary) })
        };
        let (mut points, mut errors) = (Vec::new(), Vec::new());
        let mut rates: Vec<f64> = CURVE_FACTORS.iter().map(|f| rate * f).collect();
        // Past saturation the curve bends: while no point is overloaded,
        // go on to higher rates (×1.5 steps, a few rounds).
        for round in 0..=EXTEND_ROUNDS {
            let results: Vec<_> = rates.par_iter().map(|&r| point(r)).collect();
            for r in results {
                match r {
                    Ok(p) => points.push(p),
                    Err(e) => errors.push(e),
                }
            }
            let saturated = points.iter().any(|p| matches!(p.flag, Some(Flag::Overloaded | Flag::Shedding)));
            let top = points.iter().map(|p| p.rate).fold(0.0, f64::max);
            if saturated || round == EXTEND_ROUNDS || top <= 0.0 || !errors.is_empty() {
                break;
            }
            rates = EXTEND_STEPS.iter().map(|f| top * f).collect();
        }
        let c = Arc::new(Curve { anchor: rate, points, errors });
        remember(&self.curves, key, c.clone(), CURVE_CACHE);
        Ok(c)
    }

    /// The scenario file of `state`'s configuration: the original file with
    /// every override applied, its seed and name written out, so that
    /// `servesim run` on it reproduces the page's numbers.
    pub fn export_toml(&self, state: &State) -> Result<String> {
        let loaded = self.load(&state.sets)?;
        let sets: Vec<&String> = self.base_sets.iter().chain(&state.sets).collect();
        let head = format!(
            "# Exported by the servesim playground from {}\n# with {}.\n# Reproduce the page's numbers with: servesim run <this file>\n",
            self.path.display(),
            if sets.is_empty() {
                "no overrides".to_string()
            } else {
                sets.iter().map(|s| format!("--set {}", s.escape_default())).collect::<Vec<_>>().join(" ")
            }
        );
        Ok(loaded.scenario_toml(&head)?)
    }

    /// Answers one HTTP request (`method`, `url` = path and query).
    pub fn respond(&self, method: &str, url: &str) -> Reply {
        http::respond(self, method, url)
    }

    /// Everything answering the raw bytes of one request does but the
    /// simulation (the fuzz target `playground` drives it): the head read
    /// within the server's limits, the Host and site checks, the query, and
    /// the configuration and pinned baseline loaded and resolved with every
    /// refusal of the page. Returns the status the server would answer with
    /// (200 where it would go on to simulate).
    pub fn dry_respond(&self, request: &[u8]) -> u16 {
        http::dry_respond(self, request)
    }
}

/// About how many requests a run generates, when known before simulating
/// (multi-turn sessions: sessions times their mean number of turns);
/// None for a closed loop, whose count depends on its latencies.
fn expected_requests(setup: &Setup) -> Option<f64> {
    if setup.workload.closed_loop.is_some() { None } else { crate::resolve::estimate(setup).requests }
}

/// The override that cuts a scenario to about `cap` requests, if it has more.
fn cap_set(loaded: &LoadedScenario, setup: &Setup, cap: u64) -> Option<String> {
    let s = &loaded.scenario;
    if let Some(n) = s.num_requests {
        return (n > cap).then(|| format!("num_requests={cap}"));
    }
    let n = expected_requests(setup)?;
    if n <= cap as f64 {
        return None;
    }
    // A whole trace replayed: its first `cap` rows.
    let Some(d) = s.duration_s else { return Some(format!("num_requests={cap}")) };
    // About `cap` requests, most of them after the warm-up.
    let per_request = d / n;
    let short = (cap as f64 * per_request).max(s.warmup_s + 0.8 * cap as f64 * per_request);
    let short = (short * 10.0).ceil() / 10.0;
    (short < d).then(|| format!("duration_s={short}"))
}

/// A number of a summary by its dotted path in `summary.json` (`slo.attainment`).
fn metric(v: &serde_json::Value, path: &str) -> Option<f64> {
    path.split('.').try_fold(v, |acc, p| acc.get(p)).and_then(|x| x.as_f64())
}

/// Why a run is not a stable service, as the sweep charts flag it.
fn flag(s: &crate::Summary) -> Option<Flag> {
    use crate::sweep::Verdict;
    match Verdict::of(s) {
        Verdict::Overloaded => Some(Flag::Overloaded),
        Verdict::Shedding => Some(Flag::Shedding),
        Verdict::Failing => Some(Flag::Failing),
        Verdict::Inconclusive => Some(Flag::Inconclusive),
        Verdict::Stable | Verdict::NotApplicable => None,
    }
}

/// `servesim playground`: serves `pg` on 127.0.0.1:`port`, prints the URL,
/// opens it in a browser when `open`, and serves until the process ends.
pub fn run_cli(pg: Playground, port: u16, open: bool) -> Result<()> {
    let handle = serve(pg, port)?;
    let url = handle.url();
    println!("servesim playground: {url}  (127.0.0.1 only; Ctrl-C to stop)");
    if open {
        open_browser(&url);
    }
    handle.wait();
    Ok(())
}

/// Best effort: the desktop's opener, silently nothing without one.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_runs_are_cut_and_exports_load_back() {
        let open = |path: &str, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            Playground::new(Path::new(path), &sets, Catalog::builtin().unwrap()).unwrap()
        };
        // 36 req/s for 300 s: shortened to about 2,000 requests.
        let pg = open("scenarios/what-if-router.toml", &[]);
        assert!(matches!(pg.base_sets(), [d] if d.starts_with("duration_s=")), "{:?}", pg.base_sets());
        // A whole trace replayed: its first 2,000 rows.
        assert_eq!(open("scenarios/conversation.toml", &[]).base_sets(), ["num_requests=2000"]);
        // A length given on the command line is kept.
        let pg = open("scenarios/quickstart.toml", &["num_requests=3000"]);
        assert_eq!(pg.base_sets(), ["num_requests=3000"]);
        let state = State { sets: vec!["engine.max_num_seqs=64".into(), "seed=11".into()], baseline: None };
        let text = pg.export_toml(&state).unwrap();
        let back = crate::scenario::load_scenario_str(&text, Path::new("scenarios/exported.toml"), &[]).unwrap();
        let s = &back.scenario;
        assert_eq!((s.engine.max_num_seqs, s.num_requests, s.seed), (64, Some(3000), 11));
        assert_eq!(s.name, "quickstart");
        // The same scenario as the page runs, name and folder aside.
        let mut on_page = pg.load(&state.sets).unwrap().scenario;
        on_page.base_dir = s.base_dir.clone();
        assert_eq!(&on_page, s);
    }

    #[test]
    fn the_page_refuses_files_by_what_the_override_means_not_how_it_is_spelt() {
        let pg = Playground::new(Path::new("scenarios/quickstart.toml"), &[], Catalog::builtin().unwrap()).unwrap();
        let refused = |set: &str| pg.load(&[set.to_string()]).err().map(|e| e.to_string()).unwrap_or_default();
        // The key `file` written as a TOML escape (issue 26): a table, refused as parsed.
        let e = refused(
            r#"workload.prompt_tokens={dist="empirical","file"="/etc/passwd",column="root:x:0:0:root:/root:/bin/bash"}"#,
        );
        assert!(e.contains("single values") && e.contains("workload.prompt_tokens"), "{e}");
        assert!(refused("workload.output_tokens=[1,2]").contains("not a list"));
        for key in
            ["workload.prompt_tokens.file", "workload.trace.file", "workload.classes[0].lengths.file", "workload"]
        {
            assert!(refused(&format!("{key}=\"/etc/passwd\"")).contains("cannot name files"), "{key}");
        }
        // Single values of any key still work, the escape-free spellings too.
        assert!(pg.load(&["engine.max_num_seqs=64".into(), "workload.prompt_tokens.mean=800".into()]).is_ok());
        // A scenario that reads a trace keeps reading the same file, and only it.
        let pg = Playground::new(Path::new("scenarios/conversation.toml"), &[], Catalog::builtin().unwrap()).unwrap();
        let base = files_named(&pg.load(&[]).unwrap().table());
        assert_eq!(base.len(), 1, "{base:?}");
    }
}
