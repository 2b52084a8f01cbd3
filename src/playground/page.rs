//! The playground's HTML: the page with its controls and script, and the
//! results fragment the script swaps in after every change.

use super::{CURVE_FACTORS, Playground, State, View, explain::explain_html, metric};
use crate::config::{LengthDist, Scenario};
use crate::error::Result;
use crate::plot::{self, Figure, Series, SweepPoint};
use plotters::style::RGBColor;
use rayon::prelude::*;
use serde_json::Value;
use std::fmt::Write;
use std::time::Instant;

use crate::html::esc;

/// A number as the shortest text that reads back to it (what `data-value` holds).
fn raw(x: f64) -> String {
    if x.is_finite() { format!("{x}") } else { String::new() }
}

use crate::export::report_number as fmt;

// ---------------------------------------------------------------- controls

#[derive(Clone, Copy, PartialEq)]
enum Fmt {
    /// A TOML number, written as typed.
    Num,
    /// A TOML string (quoted by the script).
    Str,
    /// A checkbox: `true` or `false`.
    Bool,
}

/// One control: which `--set` key it writes and what it starts from.
struct Control {
    /// Element id `c-<id>` (and `s-<id>` for its slider); the name `?drive=` uses.
    id: &'static str,
    label: &'static str,
    unit: &'static str,
    help: String,
    key: String,
    fmt: Fmt,
    /// The scenario's value, as the control shows it ("" when unset).
    initial: String,
    /// Another override written with it whenever it differs from `initial`.
    also: Option<String>,
    /// (min, max, step) of a slider beside the number box.
    slider: Option<(f64, f64, f64)>,
    /// A drop-down's choices.
    options: Vec<String>,
    /// A drop-down's choice for "not set" (value "").
    unset: Option<&'static str>,
    /// Why the control does not apply to this scenario.
    disabled: Option<String>,
}

impl Control {
    fn new(id: &'static str, label: &'static str, key: &str, fmt: Fmt, initial: String) -> Control {
        Control {
            id,
            label,
            unit: "",
            help: String::new(),
            key: key.to_string(),
            fmt,
            initial,
            also: None,
            slider: None,
            options: Vec::new(),
            unset: None,
            disabled: None,
        }
    }
    fn unit(mut self, u: &'static str) -> Self {
        self.unit = u;
        self
    }
    fn help(mut self, h: impl Into<String>) -> Self {
        self.help = h.into();
        self
    }
    fn slider(mut self, lo: f64, hi: f64, step: f64) -> Self {
        self.slider = Some((lo, hi, step));
        self
    }
    fn options(mut self, o: Vec<String>) -> Self {
        self.options = o;
        if !self.initial.is_empty() && !self.options.contains(&self.initial) {
            self.options.insert(0, self.initial.clone());
        }
        self
    }
    fn disabled_if(mut self, why: Option<String>) -> Self {
        if why.is_some() {
            self.disabled = why;
        }
        self
    }
}

fn num(x: f64) -> String {
    format!("{x}")
}

/// A round step of about x / 100.
fn step_for(x: f64) -> f64 {
    if x > 0.0 && x.is_finite() { 10f64.powf((x / 100.0).log10().floor()) } else { 1.0 }
}

/// Where a length distribution's typical size is set, and its value.
fn length_key(d: Option<&LengthDist>) -> Result<(&'static str, f64), String> {
    match d {
        Some(LengthDist::Lognormal { mean: Some(m), .. }) => Ok(("mean", *m)),
        Some(LengthDist::Lognormal { median: Some(m), .. }) => Ok(("median", *m)),
        Some(LengthDist::Fixed { value }) => Ok(("value", *value as f64)),
        Some(LengthDist::Exponential { mean }) | Some(LengthDist::Normal { mean, .. }) => Ok(("mean", *mean)),
        Some(_) => Err("this length distribution has no single mean to move (uniform, zipf or empirical)".into()),
        None => Err("lengths come from elsewhere (workload.lengths, request classes or a trace)".into()),
    }
}

const ROUTERS: [&str; 9] = [
    "round-robin",
    "least-outstanding",
    "random",
    "least-kv",
    "least-tokens",
    "power-of-two",
    "session-affinity",
    "central-queue",
    "prefix-aware",
];

/// The controls, in sections, for scenario `s`.
fn controls(pg: &Playground) -> Vec<(&'static str, Vec<Control>)> {
    let s: &Scenario = &pg.initial.scenario;
    let w = &s.workload;
    let kind = w.arrival_kind().as_str();
    let rate = w.rate.unwrap_or(f64::NAN);
    let rate_ctl = Control::new("rate", "Request rate", "workload.rate", Fmt::Num, w.rate.map(num).unwrap_or_default())
        .unit("req/s")
        .help("Mean arrival rate (workload.rate). Move it up to walk along the hockey stick.")
        .slider(
            (rate / 10.0 / step_for(rate)).round().max(1.0) * step_for(rate),
            (rate * 3.0 / step_for(rate)).round() * step_for(rate),
            step_for(rate),
        )
        .disabled_if(w.rate.is_none().then(|| format!("this workload has no workload.rate (arrival = \"{kind}\")")));
    let fixed_rate = !w.rate_schedule.is_empty() || w.diurnal.is_some() || w.ramp_up.is_some();
    let burst = if w.burstiness.is_some() {
        Control::new("cv", "Burstiness: gamma shape", "workload.burstiness", Fmt::Num, num(w.burstiness.unwrap_or(1.0)))
            .help("Gamma shape of the gaps between arrivals (workload.burstiness = 1/cv²): 1 is Poisson, below 1 burstier.")
            .slider(0.05, 4.0, 0.05)
    } else {
        let mut c = Control::new("cv", "Burstiness: gap CV", "workload.cv", Fmt::Num, num(w.cv.unwrap_or(1.0)))
            .help("Coefficient of variation of the gaps between arrivals (workload.cv): 1 is Poisson, above 1 burstier, below 1 more regular.")
            .slider(0.2, 4.0, 0.05);
        if kind == "poisson" {
            c.also = Some("workload.arrival=\"gamma\"".into());
        }
        c.disabled_if(match kind {
            "poisson" if fixed_rate => Some("a Poisson process with a rate schedule, diurnal cycle or ramp-up".into()),
            "poisson" | "gamma" | "weibull" => None,
            k => Some(format!("arrival = \"{k}\" has no gap CV")),
        })
    };
    let length = |id: &'static str, label: &'static str, name: &str, d: Option<&LengthDist>| {
        let (sub, value, why) = match length_key(d) {
            Ok((sub, v)) => (sub, v, None),
            Err(why) => ("mean", f64::NAN, Some(why)),
        };
        Control::new(
            id,
            label,
            &format!("workload.{name}.{sub}"),
            Fmt::Num,
            if value.is_finite() { num(value) } else { String::new() },
        )
        .unit("tokens")
        .help(format!("The {sub} of workload.{name}."))
        .slider(1.0, (value * 4.0).max(100.0).round(), 1.0)
        .disabled_if(why)
    };
    let requests = match (s.num_requests, s.duration_s) {
        (_, Some(d)) => Control::new("requests", "Duration", "duration_s", Fmt::Num, num(d))
            .unit("s")
            .help("Arrivals are generated for this long (duration_s); the playground shortens long runs to about 2,000 requests.")
            .slider(1.0, (d * 4.0).max(60.0).round(), 1.0),
        (n, None) => {
            let initial = n.map(|n| n.to_string()).unwrap_or_default();
            let n = n.unwrap_or(super::DEFAULT_CAP) as f64;
            Control::new("requests", "Requests", "num_requests", Fmt::Num, initial)
                .help("Requests simulated (num_requests); the playground starts at most 2,000 so that a redraw takes well under a second; empty: the whole trace.")
                .slider(100.0, (n * 10.0).clamp(2000.0, super::MAX_REQUESTS), 100.0)
        }
    };
    let traffic = vec![
        rate_ctl,
        burst,
        length("prompt", "Prompt length", "prompt_tokens", w.prompt_tokens.as_ref()),
        length("output", "Output length", "output_tokens", w.output_tokens.as_ref()),
        requests,
        Control::new("seed", "Seed", "seed", Fmt::Num, s.seed.to_string())
            .help("Seed of every random stream: the same seed gives the same arrivals and lengths."),
    ];
    let pools = (!s.pools.is_empty()).then(|| "[[pools]] set the GPUs, tp and replicas of this scenario".to_string());
    let hw = &s.hardware;
    let deployment = vec![
        Control::new("model", "Model", "model.name", Fmt::Str, s.model.name.clone())
            .options(pg.catalog.models.keys().cloned().collect())
            .help("The LLM (model.name), from the catalogue: servesim list models.")
            .disabled_if(s.model.spec.is_some().then(|| "the scenario gives an inline model.spec".into())),
        Control::new("gpu", "GPU", "hardware.gpu", Fmt::Str, hw.gpu.clone())
            .options(pg.catalog.gpus.keys().cloned().collect())
            .help("The GPU (hardware.gpu): servesim list gpus.")
            .disabled_if(
                pools.clone().or(hw.gpu_spec.is_some().then(|| "the scenario gives an inline gpu_spec".into())),
            ),
        Control::new("tp", "Tensor parallel", "hardware.tp", Fmt::Num, hw.tp.to_string())
            .options(["1", "2", "4", "8"].map(String::from).to_vec())
            .help("GPUs each layer is split across (hardware.tp).")
            .disabled_if(pools.clone()),
        Control::new("replicas", "Replicas", "hardware.replicas", Fmt::Num, hw.replicas.to_string())
            .slider(1.0, (hw.replicas as f64 * 2.0).max(16.0), 1.0)
            .help("Identical engine replicas behind the router (hardware.replicas).")
            .disabled_if(pools.clone()),
        Control::new("router", "Router", "hardware.router", Fmt::Str, hw.router.as_str().to_string())
            .options(ROUTERS.map(String::from).to_vec())
            .help("How requests are spread over the replicas (hardware.router)."),
    ];
    let e = &s.engine;
    let mut preset = Control::new("preset", "Engine preset", "engine.preset", Fmt::Str, e.preset.clone().unwrap_or_default())
        .options(pg.catalog.engines.keys().cloned().collect())
        .help("An engine profile (engine.preset) fills the [engine] and [cost] keys the scenario does not set: servesim list engines.");
    if e.preset.is_none() {
        preset.unset = Some("(none: the scenario's own keys)");
    }
    let engine = vec![
        preset,
        Control::new("max-seqs", "Max sequences", "engine.max_num_seqs", Fmt::Num, e.max_num_seqs.to_string())
            .slider(1.0, (e.max_num_seqs as f64 * 2.0).max(1024.0), 1.0)
            .help("Most requests running at once per replica (engine.max_num_seqs)."),
        Control::new(
            "budget",
            "Token budget",
            "engine.max_num_batched_tokens",
            Fmt::Num,
            e.max_num_batched_tokens.to_string(),
        )
        .unit("tokens")
        .slider(256.0, (e.max_num_batched_tokens as f64 * 2.0).max(32768.0), 256.0)
        .help("Tokens one engine step may carry (engine.max_num_batched_tokens)."),
        Control::new("chunked", "Chunked prefill", "engine.chunked_prefill", Fmt::Bool, e.chunked_prefill.to_string())
            .help("Split prompts into chunks that share steps with decodes (engine.chunked_prefill)."),
    ];
    let slo = s.slo.clone().unwrap_or_default();
    let slos = vec![
        Control::new("ttft-slo", "TTFT objective", "slo.ttft_ms", Fmt::Num, slo.ttft_ms.map(num).unwrap_or_default())
            .unit("ms")
            .slider(10.0, slo.ttft_ms.map_or(5000.0, |x| (x * 4.0).max(5000.0)), 10.0)
            .help("Time to first token objective (slo.ttft_ms); empty: none."),
        Control::new("tpot-slo", "TPOT objective", "slo.tpot_ms", Fmt::Num, slo.tpot_ms.map(num).unwrap_or_default())
            .unit("ms")
            .slider(1.0, slo.tpot_ms.map_or(300.0, |x| (x * 4.0).max(300.0)), 1.0)
            .help("Time per output token objective (slo.tpot_ms); empty: none."),
    ];
    vec![("Traffic", traffic), ("Deployment", deployment), ("Engine", engine), ("Service-level objectives", slos)]
}

fn control_html(o: &mut String, c: &Control) {
    let fmt = match c.fmt {
        Fmt::Num => "num",
        Fmt::Str => "str",
        Fmt::Bool => "bool",
    };
    let dis = if c.disabled.is_some() { " disabled" } else { "" };
    let data = format!(
        "id=\"c-{}\" data-key=\"{}\" data-fmt=\"{fmt}\" data-initial=\"{}\"{}{}{dis}",
        c.id,
        esc(&c.key),
        esc(&c.initial),
        c.also.as_ref().map_or(String::new(), |a| format!(" data-also=\"{}\"", esc(a))),
        if c.slider.is_none() { format!(" data-drive=\"{}\"", c.id) } else { String::new() },
    );
    let _ = write!(
        o,
        "<div class=\"ctl\" title=\"{}\"><label for=\"c-{}\">{}{}</label><div class=\"row\">",
        esc(&c.help),
        c.id,
        c.label,
        if c.unit.is_empty() { String::new() } else { format!(" <span class=\"unit\">{}</span>", c.unit) }
    );
    if c.fmt == Fmt::Bool {
        let on = if c.initial == "true" { " checked" } else { "" };
        let _ = write!(o, "<input type=\"checkbox\" {data}{on}>");
    } else if !c.options.is_empty() {
        let _ = write!(o, "<select {data}>");
        if let Some(u) = c.unset {
            let _ = write!(
                o,
                "<option value=\"\"{}>{}</option>",
                if c.initial.is_empty() { " selected" } else { "" },
                esc(u)
            );
        }
        for v in &c.options {
            let sel = if *v == c.initial { " selected" } else { "" };
            let _ = write!(o, "<option value=\"{}\"{sel}>{}</option>", esc(v), esc(v));
        }
        o.push_str("</select>");
    } else {
        if let Some((lo, hi, step)) = c.slider {
            let v = c.initial.parse::<f64>().ok().filter(|v| v.is_finite()).unwrap_or(lo);
            let _ = write!(
                o,
                "<input type=\"range\" id=\"s-{id}\" data-for=\"c-{id}\" data-drive=\"{id}\" min=\"{}\" max=\"{}\" step=\"{}\" value=\"{}\"{dis}>",
                num(lo),
                num(hi.max(v)),
                num(step),
                num(v),
                id = c.id
            );
        }
        let _ = write!(o, "<input type=\"number\" step=\"any\" value=\"{}\" {data}>", esc(&c.initial));
    }
    o.push_str("</div>");
    if let Some(why) = &c.disabled {
        let _ = write!(o, "<div class=\"why\">Fixed: {}.</div>", esc(why));
    }
    o.push_str("</div>");
}

// ---------------------------------------------------------------- page

const CSS: &str = r#"
body{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;margin:0;background:#fafafa;color:#222;line-height:1.4;font-size:14px}
header{padding:12px 24px 8px;background:#fff;border-bottom:1px solid #ddd}
h1{font-size:22px;margin:0 0 2px}h2{font-size:18px;margin:22px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#555;margin:0}
.layout{display:grid;grid-template-columns:330px 1fr;gap:0;align-items:start}
form{position:sticky;top:0;max-height:100vh;overflow:auto;padding:8px 14px 20px;background:#f3f5f8;border-right:1px solid #ddd;box-sizing:border-box}
fieldset{border:1px solid #d5dae1;border-radius:6px;margin:8px 0;padding:6px 10px 8px;background:#fff}
legend{font-weight:bold;font-size:13px;padding:0 4px}
.ctl{margin:6px 0}.ctl label{display:block;font-size:12.5px;color:#333}.unit{color:#888;font-size:11px}
.row{display:flex;gap:6px;align-items:center}.row input[type=range]{flex:1;min-width:0}
.row input[type=number]{width:84px}.row select{width:100%}
.why{font-size:11px;color:#a15c00}
textarea{width:100%;box-sizing:border-box;font-family:monospace;font-size:12px}
.buttons{display:flex;flex-wrap:wrap;gap:6px;margin:10px 0}
button{padding:5px 10px;border:1px solid #8aa;border-radius:4px;background:#fff;cursor:pointer}
button.primary{background:#1f77b4;color:#fff;border-color:#1f77b4}
main{padding:10px 24px 60px;background:#fff;min-height:100vh;box-sizing:border-box}
#results.stale{opacity:.45}
body.busy #status::after{content:" simulating…";color:#1f77b4}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f0f3f7}td.l,th.l{text-align:left}
td.worse{color:#b71c1c}td.better{color:#1b5e20}td.moot{color:#666}
.warn{background:#fdecea;border-left:5px solid #c62828;padding:8px 12px;margin:8px 0}
.ok{background:#e8f5e9;border-left:5px solid #2e7d32;padding:8px 12px;margin:8px 0}
.note{color:#666;font-size:12.5px}
.error{background:#fff3e0;border-left:5px solid #e65100;padding:8px 12px;margin:8px 0;white-space:pre-wrap;font-family:monospace;font-size:12.5px}
svg.chart{width:100%;height:auto;display:block;margin:6px 0 14px;border:1px solid #eee}
.charts{display:grid;grid-template-columns:1fr;gap:0}
@media(min-width:1700px){.charts.two{grid-template-columns:1fr 1fr;gap:12px}}
ol.stages li{margin:5px 0}
code{background:#f3f3f3;padding:1px 4px;border-radius:3px;word-break:break-all}
"#;

const SCRIPT: &str = r#"
(function () {
  'use strict';
  const $ = (s) => document.querySelector(s);
  const form = $('#controls'), results = $('#results'), errbox = $('#error');
  const ctls = Array.from(form.querySelectorAll('[data-key]'));
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
  const params = new URLSearchParams(location.search);
  let baseline = params.get('pinned') === '1' || params.getAll('pin').length ? params.getAll('pin') : null;

  function value(el) { return el.dataset.fmt === 'bool' ? String(el.checked) : el.value.trim(); }
  function dirty(el) {
    const v = value(el), i = el.dataset.initial;
    if (v === '') return false;
    if (el.dataset.fmt === 'num' && i !== '' && Number(v) === Number(i)) return false;
    return v !== i;
  }
  function toml(el) {
    const v = value(el);
    return el.dataset.fmt === 'str' ? JSON.stringify(v) : v;
  }
  // The --set overrides the controls stand for: only those moved from the scenario's value.
  function sets() {
    const out = [];
    for (const el of ctls) {
      if (el.disabled || !dirty(el)) continue;
      if (el.dataset.also) out.push(el.dataset.also);
      out.push(el.dataset.key + '=' + toml(el));
    }
    for (const line of $('#extra').value.split('\n')) {
      const l = line.trim();
      if (l && !l.startsWith('#')) out.push(l);
    }
    return out;
  }
  function query() {
    const p = new URLSearchParams();
    for (const s of sets()) p.append('set', s);
    if (baseline) {
      p.append('pinned', '1');
      for (const s of baseline) p.append('pin', s);
    }
    return p.toString();
  }
  function syncSlider(el) {
    const s = document.getElementById('s-' + el.id.slice(2));
    if (s && el.value !== '') s.value = el.value;
  }
  // Controls take the values the URL's overrides give (a shared or reloaded page).
  function restore() {
    const also = new Set(ctls.map((el) => el.dataset.also).filter(Boolean));
    const extra = [];
    for (const s of params.getAll('set')) {
      const i = s.indexOf('=');
      const k = i < 0 ? s : s.slice(0, i).trim(), v = i < 0 ? '' : s.slice(i + 1).trim();
      const el = ctls.find((c) => c.dataset.key === k && !c.disabled);
      if (also.has(s)) continue;
      if (!el) { extra.push(s); continue; }
      if (el.dataset.fmt === 'bool') el.checked = v === 'true';
      else if (el.dataset.fmt === 'str') { try { el.value = JSON.parse(v); } catch (e) { el.value = v; } }
      else el.value = v;
      syncSlider(el);
    }
    $('#extra').value = extra.join('\n');
  }
  restore();
  let shown = query();
  let inflight = null;
  async function pump() {
    try {
      for (;;) {
        const q = query();
        if (q === shown) break;
        document.body.classList.add('busy');
        const t0 = performance.now();
        let r, html;
        try {
          r = await fetch('/results' + (q ? '?' + q : ''), { cache: 'no-store' });
          html = await r.text();
        } catch (e) {
          errbox.innerHTML = '<div class="error">The playground server did not answer (' + esc(e) + '). Is servesim playground still running?</div>';
          shown = q;
          break;
        }
        shown = q;
        if (r.ok) {
          errbox.innerHTML = '';
          results.innerHTML = html;
          results.classList.remove('stale');
        } else {
          errbox.innerHTML = html;
          results.classList.add('stale');
        }
        const server = r.headers.get('X-Servesim-Ms');
        $('#status').textContent = 'Redrawn in ' + Math.round(performance.now() - t0) + ' ms' + (server ? ' (server ' + server + ' ms)' : '') + '.';
        history.replaceState(null, '', q ? '?' + q : location.pathname);
      }
    } finally {
      inflight = null;
      document.body.classList.remove('busy');
    }
  }
  function refresh() {
    if (!inflight) inflight = pump();
    return inflight;
  }
  form.addEventListener('input', (e) => {
    const t = e.target;
    if (t.id === 'extra') return;
    if (t.dataset.for) {
      const n = document.getElementById(t.dataset.for);
      n.value = t.value;
    } else if (t.id && t.id.startsWith('c-')) syncSlider(t);
    refresh();
  });
  form.addEventListener('change', () => refresh());
  $('#pin').addEventListener('click', () => { baseline = sets(); refresh(); });
  $('#unpin').addEventListener('click', () => { baseline = null; refresh(); });
  $('#reset').addEventListener('click', () => {
    for (const el of ctls) {
      if (el.dataset.fmt === 'bool') el.checked = el.dataset.initial === 'true';
      else el.value = el.dataset.initial;
      syncSlider(el);
    }
    $('#extra').value = '';
    refresh();
  });
  $('#apply').addEventListener('click', () => refresh());
  // Test hook: ?drive=pin,rate:18 pins the baseline, then moves the rate slider as a
  // user would (input and change events), waits for each redraw, and marks the body.
  const drive = params.get('drive');
  if (drive) {
    (async () => {
      for (const step of drive.split(',')) {
        const i = step.indexOf(':');
        const what = i < 0 ? step : step.slice(0, i), v = i < 0 ? '' : step.slice(i + 1);
        if (what === 'pin' || what === 'unpin' || what === 'reset') $('#' + what).click();
        else {
          const el = document.querySelector('[data-drive="' + what + '"]');
          if (!el) { document.body.dataset.driven = 'error: no control ' + what; return; }
          if (el.type === 'checkbox') el.checked = v === 'true'; else el.value = v;
          el.dispatchEvent(new Event('input', { bubbles: true }));
          el.dispatchEvent(new Event('change', { bubbles: true }));
        }
        await (inflight || Promise.resolve());
      }
      document.body.dataset.driven = 'done';
    })();
  }
})();
"#;

/// A page around `body`, with the chart font embedded once.
pub(super) fn bare_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{}{CSS}</style></head><body>{body}</body></html>\n",
        esc(title),
        plot::font_face_css()
    )
}

/// An error, readable (the configuration errors name the key and the fix).
pub(super) fn error_html(message: &str) -> String {
    format!("<div class=\"error\" id=\"error-message\">{}</div>", esc(message))
}

/// The whole page: controls, the results of `state` (or why there are none), the script.
pub(super) fn page_html(pg: &Playground, results: std::result::Result<String, String>) -> String {
    let s = &pg.initial.scenario;
    let mut o = String::new();
    let base = if pg.base_sets.is_empty() {
        String::new()
    } else {
        format!(
            " with <code>{}</code>",
            esc(&pg.base_sets.iter().map(|s| format!("--set {s}")).collect::<Vec<_>>().join(" "))
        )
    };
    let _ = write!(
        o,
        "<header><h1>servesim playground: {}</h1><p class=\"sub\"><code>{}</code>{base}. Every control is a <code>--set</code> \
         override of this scenario; each change simulates it again with the same seed and redraws. <span id=\"status\"></span></p></header>",
        esc(&s.name),
        esc(&pg.path.display().to_string()),
    );
    o += "<div class=\"layout\"><form id=\"controls\" autocomplete=\"off\" onsubmit=\"return false\">";
    o += "<div class=\"buttons\"><button type=\"button\" id=\"pin\" class=\"primary\" title=\"Keep this configuration as the baseline: both run with the same seed (same arrivals and lengths) and the table shows the differences\">Pin as baseline</button>\
          <button type=\"button\" id=\"unpin\">Unpin</button><button type=\"button\" id=\"reset\">Reset</button></div>";
    for (section, cs) in controls(pg) {
        let _ = write!(o, "<fieldset><legend>{section}</legend>");
        for c in &cs {
            control_html(&mut o, c);
        }
        o += "</fieldset>";
    }
    o += "<fieldset><legend>Other overrides</legend><div class=\"ctl\"><label for=\"extra\">Any scenario key, one <code>key=value</code> a line \
          (docs/scenario.md), e.g. <code>engine.prefix_caching=true</code></label>\
          <textarea id=\"extra\" rows=\"4\" spellcheck=\"false\"></textarea></div>\
          <div class=\"buttons\"><button type=\"button\" id=\"apply\">Apply</button></div></fieldset></form>";
    let (err, res) = match results {
        Ok(r) => (String::new(), r),
        Err(e) => (error_html(&e), String::new()),
    };
    let _ = write!(
        o,
        "<main><div id=\"error\">{err}</div><div id=\"results\">{res}</div></main></div><script>{SCRIPT}</script>"
    );
    bare_page(&format!("servesim playground: {}", s.name), &o)
}

// ---------------------------------------------------------------- results

#[derive(Clone, Copy)]
enum Unit {
    Ms,
    PerS,
    Tokens,
    Fraction,
    Count,
    Usd,
    Joules,
}

/// The headline numbers: (id, label, summary.json path, unit, lower is better).
const HEADLINE: [(&str, &str, &str, Unit, bool); 13] = [
    ("p50-ttft", "TTFT p50", "median_ttft_ms", Unit::Ms, true),
    ("p99-ttft", "TTFT p99", "p99_ttft_ms", Unit::Ms, true),
    ("p50-tpot", "TPOT p50", "median_tpot_ms", Unit::Ms, true),
    ("p99-tpot", "TPOT p99", "p99_tpot_ms", Unit::Ms, true),
    ("p50-e2e", "End-to-end p50", "median_e2el_ms", Unit::Ms, true),
    ("p99-e2e", "End-to-end p99", "p99_e2el_ms", Unit::Ms, true),
    ("throughput", "Throughput", "request_throughput", Unit::PerS, false),
    ("output-throughput", "Output tokens/s", "output_throughput", Unit::Tokens, false),
    ("goodput", "Goodput (met every SLO)", "request_goodput", Unit::PerS, false),
    ("slo", "SLO attainment", "slo.attainment", Unit::Fraction, false),
    ("failed", "Failed requests", "failed", Unit::Count, true),
    ("cost", "$ per million output tokens", "cost.usd_per_million_output_tokens", Unit::Usd, true),
    ("energy", "Energy per output token", "energy.joules_per_output_token", Unit::Joules, true),
];

fn show(x: Option<f64>, unit: Unit, signed: bool) -> String {
    let Some(x) = x.filter(|x| x.is_finite()) else { return "–".into() };
    let sign = if signed && x >= 0.0 { "+" } else { "" };
    match unit {
        Unit::Ms => format!("{sign}{} ms", fmt(Some(x), 1)),
        Unit::PerS => format!("{sign}{} req/s", fmt(Some(x), 2)),
        Unit::Tokens => format!("{sign}{}", fmt(Some(x), 0)),
        Unit::Fraction if signed => format!("{sign}{:.2} pp", x * 100.0),
        Unit::Fraction => format!("{:.2}%", x * 100.0),
        Unit::Count => format!("{sign}{x:.0}"),
        Unit::Usd => format!("{}${:.3}", if x < 0.0 { "-" } else { sign }, x.abs()),
        Unit::Joules => format!("{sign}{} J", fmt(Some(x), 3)),
    }
}

fn verdict_html(o: &mut String, s: &Value, id: &str, who: &str) {
    let st = &s["stability"];
    let v = st["verdict"].as_str().unwrap_or("");
    let class = match v {
        "stable" => "ok",
        "overloaded" | "shedding" => "warn",
        _ => "note",
    };
    let meaning = crate::metrics::stability::meaning(v, st["shed_fraction"].as_f64().unwrap_or(0.0));
    let _ = write!(
        o,
        "<div class=\"{class}\" id=\"{id}\" data-value=\"{}\">{who}<b>{}</b> <span class=\"note\">{}</span></div>",
        esc(v),
        esc(&meaning),
        esc(st["explanation"].as_str().unwrap_or(""))
    );
}

/// Whether a summary's run was not shown to be a stable service (its throughput is no gain).
fn unsteady_run(s: &Value) -> bool {
    matches!(s["stability"]["verdict"].as_str(), Some("overloaded" | "shedding" | "inconclusive"))
}

fn headline_html(o: &mut String, s: &Value, base: Option<&Value>) {
    let unsteady = unsteady_run(s) || base.is_some_and(unsteady_run);
    o.push_str("<table id=\"headline\"><tr><th class=\"l\">metric</th><th>this configuration</th>");
    if base.is_some() {
        o.push_str("<th>pinned baseline</th><th>difference</th>");
    }
    o.push_str("</tr>");
    for (id, label, path, unit, lower_better) in HEADLINE {
        let a = metric(s, path);
        let _ = write!(
            o,
            "<tr><td class=\"l\">{label}</td><td id=\"m-{id}\" data-value=\"{}\">{}</td>",
            a.map(raw).unwrap_or_default(),
            show(a, unit, false)
        );
        if let Some(b) = base {
            let bv = metric(b, path);
            let d = a.zip(bv).map(|(a, b)| a - b).filter(|d| d.is_finite());
            let class = match d {
                // An overloaded or shedding run's throughput is what the
                // engine managed while its queue grew, not demand served: no
                // gain of it is painted as better.
                Some(d) if d != 0.0 && !lower_better && unsteady => " class=\"moot\"",
                Some(d) if d != 0.0 && (d > 0.0) == lower_better => " class=\"worse\"",
                Some(d) if d != 0.0 => " class=\"better\"",
                _ => "",
            };
            let rel = match (d, bv) {
                (Some(d), Some(b)) if b != 0.0 && !matches!(unit, Unit::Fraction | Unit::Count) => {
                    format!(" ({:+.1}%)", d / b.abs() * 100.0)
                }
                _ => String::new(),
            };
            let _ = write!(
                o,
                "<td id=\"b-{id}\" data-value=\"{}\">{}</td><td id=\"d-{id}\" data-value=\"{}\"{class}>{}{rel}</td>",
                bv.map(raw).unwrap_or_default(),
                show(bv, unit, false),
                d.map(raw).unwrap_or_default(),
                show(d, unit, true)
            );
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    if unsteady && base.is_some() {
        o.push_str(
            "<p class=\"note\" id=\"moot-note\">Throughput differences are left uncoloured: a run that is overloaded, \
             sheds load or is too short to tell reports what the engine got through while its queue grew or requests \
             were refused, not demand served, so more of it is no gain.</p>",
        );
    }
}

/// The marks of the current configuration on the hockey stick.
const CURRENT_P99: RGBColor = RGBColor(0, 0, 0);
const CURRENT_P50: RGBColor = RGBColor(96, 96, 96);

fn svg_color(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// Latency against offered load around this configuration (same seed at
/// every rate), with the current configuration marked.
fn hockey_figure(v: &View, s: &Value) -> Option<Figure> {
    let curve = v.curve.as_ref().ok()?;
    let rate = v.loaded.scenario.workload.rate?;
    let points: Vec<SweepPoint> = curve
        .points
        .iter()
        .map(|p| SweepPoint {
            family: String::new(),
            rate: Some(p.rate),
            output_throughput: 0.0,
            output_throughput_per_gpu: 0.0,
            ttft_p50: p.p50,
            ttft_p99: p.p99,
            tpot_p50: f64::NAN,
            tpot_p99: f64::NAN,
            flag: p.flag,
        })
        .collect();
    let slo = v.loaded.scenario.slo.as_ref().and_then(|s| s.ttft_ms);
    let mut fig = plot::hockey_figure("", &points, slo);
    if let Figure::Panels { panels, .. } = &mut fig
        && let Some(c) = panels.first_mut()
    {
        c.title = "Latency vs offered load (same seed at every rate)".into();
        for s in &mut c.series {
            s.name = s.name.replace("all points ", "TTFT ");
        }
        for l in &mut c.vlines {
            l.label = l.label.replace("knee all points:", "knee:").replace(" all points: no knee", " no knee");
        }
        let mark = |name: &str, y: Option<f64>, color| Series {
            name: name.into(),
            points: y.filter(|y| y.is_finite()).map(|y| vec![(rate, y)]).unwrap_or_default(),
            color,
            line: false,
            markers: true,
            bold: false,
        };
        c.series.push(mark("this configuration, p99", metric(s, "p99_ttft_ms"), CURRENT_P99));
        c.series.push(mark("this configuration, p50", metric(s, "median_ttft_ms"), CURRENT_P50));
    }
    Some(fig)
}

/// Gives the first circle of `color` in an SVG an id and a larger radius.
fn mark_circle(svg: &str, color: RGBColor, id: &str) -> String {
    let fill = format!("fill=\"{}\"", svg_color(color));
    let mut from = 0;
    while let Some(i) = svg[from..].find("<circle") {
        let start = from + i;
        let Some(len) = svg[start..].find('>') else { break };
        let tag = &svg[start..=start + len];
        if tag.contains(&fill) {
            let new = tag.replacen("<circle", &format!("<circle id=\"{id}\""), 1).replacen(" r=\"3\"", " r=\"7\"", 1);
            return format!("{}{new}{}", &svg[..start], &svg[start + len + 1..]);
        }
        from = start + len;
    }
    svg.to_string()
}

fn chart_svg(f: &Figure) -> Result<String> {
    Ok(plot::strip_font_face(&plot::to_svg(f)?).replacen(
        "<svg ",
        "<svg class=\"chart\" preserveAspectRatio=\"xMinYMin meet\" ",
        1,
    ))
}

/// The results of one redraw: what the page's script swaps in.
pub(super) fn results_html(pg: &Playground, state: &State, v: &View, start: Instant) -> Result<String> {
    let render = Instant::now();
    let rep = &v.report;
    let sc = &v.loaded.scenario;
    let s = serde_json::to_value(&rep.summary).map_err(|e| crate::Error::Runtime(format!("summary: {e}")))?;
    let base = match &v.baseline {
        Some(Ok(b)) => Some((b, serde_json::to_value(&b.summary).map_err(|e| crate::Error::Runtime(e.to_string()))?)),
        _ => None,
    };
    // The charts, drawn side by side.
    let slo = sc.slo.clone().unwrap_or_default();
    let mut runs = vec![("this configuration".to_string(), rep.output.records.as_slice(), sc.warmup_s)];
    if let Some((b, _)) = &base {
        runs.push(("pinned baseline".to_string(), b.output.records.as_slice(), b.setup.scenario.warmup_s));
    }
    let mut figs: Vec<(&str, Figure)> = vec![
        ("cdf", plot::cdf_figure("", &runs, [slo.ttft_ms, slo.tpot_ms, slo.e2e_ms])),
        ("timeseries", plot::timeseries_figure("", &rep.output.timeseries, sc.warmup_s)),
        (
            "timeline",
            plot::gantt_figure(
                &format!("The first {} requests", crate::sim::TIMELINE_REQUESTS),
                &rep.output.records,
                &rep.output.timeline,
                crate::sim::TIMELINE_REQUESTS as usize,
            ),
        ),
    ];
    if let Some(h) = hockey_figure(v, &s) {
        figs.push(("hockey", h));
    }
    let svgs: Vec<Result<String>> = figs.par_iter().map(|(_, f)| chart_svg(f)).collect();
    let mut charts = std::collections::HashMap::new();
    for ((name, _), svg) in figs.iter().zip(svgs) {
        charts.insert(*name, svg?);
    }
    if let Some(h) = charts.get_mut("hockey") {
        *h = mark_circle(h, CURRENT_P50, "hockey-current-p50");
        *h = mark_circle(h, CURRENT_P99, "hockey-current-p99");
    }
    let render_ms = render.elapsed().as_secs_f64() * 1e3;

    let mut o = String::new();
    let sets: Vec<&String> = pg.base_sets.iter().chain(&state.sets).collect();
    verdict_html(&mut o, &s, "m-verdict", "");
    o += "<h2>Headline numbers</h2>";
    headline_html(&mut o, &s, base.as_ref().map(|(_, b)| b));
    match &v.baseline {
        Some(Ok(b)) => {
            let _ = write!(
                o,
                "<p class=\"note\">Baseline and this configuration ran with the same seed ({}): the same arrivals and lengths where \
                 their traffic settings agree (common random numbers), so the differences are the configurations', not the dice's. \
                 Baseline: {}.</p>",
                b.seed,
                esc(&crate::export::run_label(b))
            );
            if let Some((_, bs)) = &base {
                verdict_html(&mut o, bs, "b-verdict", "Pinned baseline: ");
            }
        }
        Some(Err(e)) => {
            let _ = write!(o, "<p class=\"note\">The pinned baseline could not run:</p>{}", error_html(e));
        }
        None => o += "<p class=\"note\">Pin a configuration as the baseline to see the paired differences here.</p>",
    }
    o += "<h2>Latency distributions</h2>";
    o += &charts["cdf"];
    o += "<h2>Latency vs offered load</h2>";
    match (&v.curve, charts.get("hockey")) {
        (Ok(c), Some(h)) => {
            let rates: Vec<String> = c.points.iter().map(|p| fmt(Some(p.rate), 2)).collect();
            let _ = write!(
                o,
                "<p class=\"note\">This configuration at {} req/s ({}), every point with the same seed; large dots: where you are. \
                 Crosses and other marks: runs that were not a stable service. The curve is kept until a setting other than the rate changes.</p>\
                 <div id=\"chart-hockey\" data-rate=\"{}\" data-p99=\"{}\" data-p50=\"{}\">{h}</div>",
                rates.join(", "),
                c.points.len(),
                raw(sc.workload.rate.unwrap_or(f64::NAN)),
                metric(&s, "p99_ttft_ms").map(raw).unwrap_or_default(),
                metric(&s, "median_ttft_ms").map(raw).unwrap_or_default(),
            );
            curve_errors(&mut o, c);
        }
        (Err(why), _) => {
            let _ = write!(o, "<p class=\"note\">{}</p>", esc(why));
        }
        (Ok(c), None) => {
            curve_errors(&mut o, c);
        }
    }
    o += "<h2>A request's life in this run</h2>";
    o += &crate::export::stages_html(&s);
    let explain = explain_html(&v.explanation);
    if explain.is_empty() {
        o += "<div id=\"explain\"></div>";
    } else {
        let _ = write!(o, "<h2>Explain: reading this run backwards</h2><div id=\"explain\">{explain}</div>");
    }
    o += "<h2>The run over time</h2>";
    o += &charts["timeseries"];
    o += "<h2>Timeline of the first requests</h2><p class=\"note\">Grey: queued; blue: prefill chunks; green: decoding; red: preempted; black tick: first token.</p>";
    o += &charts["timeline"];
    let q = state.query();
    let cmd = std::iter::once(format!("servesim run {}", shell(&pg.path.display().to_string())))
        .chain(sets.iter().map(|s| format!("--set {}", shell(s))))
        .collect::<Vec<_>>()
        .join(" ");
    let _ = write!(
        o,
        "<h2>Export</h2><p><a id=\"export-link\" href=\"/export.toml{}\" download>Download the scenario TOML</a> of exactly this \
         configuration (overrides applied, seed {} and the request count written out): <code>servesim run</code> on it prints these numbers. \
         The same from the command line: <code id=\"cli\">{}</code></p>",
        esc(&if q.is_empty() { String::new() } else { format!("?{}", strip_baseline(state)) }),
        sc.seed,
        esc(&cmd)
    );
    let total = start.elapsed().as_secs_f64() * 1e3;
    let _ = write!(
        o,
        "<p class=\"note\" id=\"timing\" data-ms=\"{total:.1}\" data-sim-ms=\"{:.1}\" data-render-ms=\"{render_ms:.1}\">Simulated {} requests \
         in {:.0} ms and drew the charts in {render_ms:.0} ms (this configuration{}{}).</p>",
        v.sim_ms,
        rep.output.records.len(),
        v.sim_ms,
        if v.baseline.is_some() { ", the baseline" } else { "" },
        if v.curve.is_ok() { " and the latency-vs-load curve, side by side" } else { "" },
    );
    Ok(o)
}

/// Says which points of the curve could not run, and the first reason.
fn curve_errors(o: &mut String, c: &super::Curve) {
    if let Some(first) = c.errors.first() {
        let _ = write!(
            o,
            "<p class=\"note\">{} of {} points of the curve could not run; the first: <code>{}</code></p>",
            c.errors.len(),
            CURVE_FACTORS.len(),
            esc(first)
        );
    }
}

/// The export link's query: the configuration on screen only.
fn strip_baseline(state: &State) -> String {
    State { sets: state.sets.clone(), baseline: None }.query()
}

/// A word for a POSIX shell: as it is when safe, else single-quoted.
fn shell(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_the_first_circle_of_a_colour() {
        let svg = "<svg><circle cx=\"1\" cy=\"2\" r=\"3\" fill=\"#1F77B4\"/><circle cx=\"4\" cy=\"5\" r=\"3\" fill=\"#000000\"/>\
                   <circle cx=\"6\" cy=\"7\" r=\"3\" fill=\"#000000\"/></svg>";
        let m = mark_circle(svg, CURRENT_P99, "here");
        assert!(m.contains("<circle id=\"here\" cx=\"4\" cy=\"5\" r=\"7\""), "{m}");
        assert_eq!(m.matches("id=\"here\"").count(), 1);
    }

    #[test]
    fn shell_quotes_only_when_needed() {
        assert_eq!(shell("workload.rate=12"), "workload.rate=12");
        assert_eq!(shell("engine.preset=\"sglang\""), "'engine.preset=\"sglang\"'");
        assert_eq!(shell("it's"), "'it'\\''s'");
    }
}
