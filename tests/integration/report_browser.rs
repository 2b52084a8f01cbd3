//! The HTML report in a real browser: headless Chromium loads a run report and
//! a sweep report from disk, must log no console message, must parse them into
//! a DOM with the inline SVG charts, and must paint a screenshot that is not
//! blank.
//!
//! Without a Chromium on the machine the test prints SKIPPED and passes, except
//! under `CI=true`, where `.ci/run` installs Debian's `chromium` and a missing
//! browser is a failure. Set `SERVESIM_REPORT_SCREENSHOTS=DIR` to keep the
//! screenshots (`DIR/report-run.png`, `DIR/report-sweep.png`) for a person to
//! look at.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 2400;

fn servesim(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "servesim {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// What one headless load of a page left behind.
struct Load {
    /// `--dump-dom`: the DOM after parsing, serialised.
    dom: String,
    /// Chromium's log (`--enable-logging=stderr`), console messages included.
    log: String,
}

/// Loads `page` headless with a fresh profile, dumps its DOM and writes a
/// `WIDTH`×`HEIGHT` screenshot to `png`.
fn load(browser: &Path, page: &Path, png: &Path) -> Load {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let extra = [format!("--screenshot={}", png.display()), format!("--window-size={WIDTH},{HEIGHT}")];
    let (dom, log) = crate::common::browser::headless(browser, &url, &extra);
    Load { dom, log }
}

/// The lines of Chromium's log that report something from the page's console.
///
/// Chromium logs every console message, `console.error` and uncaught
/// exceptions included, as `INFO:CONSOLE(line)] "message", source: URL`
/// whatever its level, so the level cannot be told apart here. The report has
/// no scripts, so any console line at all is a fault: the ones seen in
/// practice come from the engine itself, such as "Failed to decode downloaded
/// font" and "OTS parsing error" for a broken embedded font. ERROR lines that
/// name the page or the console count too; the rest of the log (D-Bus, GPU,
/// sandbox noise) does not.
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.contains("Uncaught")
                || (l.contains(":ERROR:") && (l.contains("file://") || l.to_ascii_lowercase().contains("console")))
        })
        .collect()
}

/// The report must stand alone: no scripts, no stylesheets, images or frames
/// fetched from elsewhere, and `url(...)` only for inline data.
fn assert_self_contained(html: &str, what: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in ["<script", "<link", "<iframe", "<object", "<embed", "src=\"http", "href=\"http", "@import"] {
        assert!(!lower.contains(bad), "{what}: report.html contains {bad:?}");
    }
    for (i, _) in html.match_indices("url(") {
        let arg = html[i + 4..].trim_start_matches(['"', '\'']);
        assert!(
            arg.starts_with("data:") || arg.starts_with('#'),
            "{what}: external url({})",
            &arg[..arg.len().min(60)]
        );
        // A malformed base64 payload fails to load without a word in the
        // console, and the browser quietly falls back to a system font.
        if let Some(b64) = arg.strip_prefix("data:").and_then(|a| a.split_once(";base64,")).map(|(_, b)| b) {
            let b64 = &b64[..b64.find([')', '"', '\'']).unwrap_or(b64.len())];
            let body = b64.trim_end_matches('=');
            assert!(
                b64.len() % 4 == 0
                    && b64.len() - body.len() <= 2
                    && body.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/'),
                "{what}: malformed base64 in url(data:...) ({} characters)",
                b64.len()
            );
        }
    }
}

#[test]
fn reports_render_in_headless_chromium() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (run, sweep) = (d.join("run"), d.join("sweep"));
    servesim(&[
        "run",
        "scenarios/what-if-chunked-prefill.toml",
        "--set",
        "num_requests=600",
        "--out",
        run.to_str().unwrap(),
        "--report",
    ]);
    servesim(&[
        "sweep",
        "scenarios/quickstart.toml",
        "--grid",
        "workload.rate=4,8,16",
        "--set",
        "num_requests=300",
        "--out",
        sweep.to_str().unwrap(),
        "--report",
        "-q",
    ]);
    for (what, out) in [("run", &run), ("sweep", &sweep)] {
        assert_self_contained(&std::fs::read_to_string(out.join("report.html")).unwrap(), what);
    }
    // The run's banner says what its verdict means in one sentence (600
    // requests at the scenario's load: too short to certify, or stable).
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("<b>Stable: the queue did not grow") || html.contains("<b>Inconclusive: the run is too short"),
        "no verdict sentence in the run report"
    );

    let Some(browser) = crate::common::browser::find_browser() else {
        let msg = "SKIPPED: no headless Chromium found (install Debian's chromium package; .ci/run does)";
        let ci = std::env::var("CI").as_deref() == Ok("true");
        assert!(
            !ci,
            "CI=true and no headless Chromium found: .ci/run installs Debian's chromium package; did it fail?"
        );
        // Straight to stderr, past the test harness's capture, so that the
        // skip shows in a passing run.
        let _ = writeln!(std::io::stderr(), "{msg}");
        return;
    };

    // A page that does log console errors, loaded alongside the reports: it
    // shows that `console_errors` still catches them with this Chromium's log
    // format, so a silent pass below means a clean page.
    let canary = d.join("canary.html");
    std::fs::write(
        &canary,
        "<!doctype html><title>canary</title><p>canary</p>\
         <script>console.error(\"servesim-canary-error\")</script>\
         <script>servesimCanaryUndefined()</script>",
    )
    .unwrap();

    let pages = [
        ("run", run.join("report.html"), d.join("report-run.png")),
        ("sweep", sweep.join("report.html"), d.join("report-sweep.png")),
        ("canary", canary, d.join("canary.png")),
    ];
    let browser = browser.as_path();
    let loads: Vec<Load> = std::thread::scope(|s| {
        let handles: Vec<_> = pages.iter().map(|(_, page, png)| s.spawn(move || load(browser, page, png))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let caught = console_errors(&loads[2].log);
    assert!(
        caught.iter().any(|l| l.contains("servesim-canary-error"))
            && caught.iter().any(|l| l.contains("Uncaught") && l.contains("servesimCanaryUndefined")),
        "the console check misses a page's errors; adapt console_errors to this log:\n{}",
        loads[2].log
    );
    // Its screenshot, one word on white, is blank by the measure used below.
    assert!(blankness(&screenshot(&pages[2].2, "canary")).is_some(), "the blank-page check passes a near-empty page");

    let keep = std::env::var_os("SERVESIM_REPORT_SCREENSHOTS").map(PathBuf::from);
    for ((what, _, png), l) in pages.iter().zip(&loads).take(2) {
        let errors = console_errors(&l.log);
        let shown: Vec<String> = errors.iter().map(|l| l.chars().take(400).collect()).collect();
        assert!(errors.is_empty(), "{what} report: console messages:\n{}", shown.join("\n"));
        assert!(l.dom.contains("</html>"), "{what} report: no DOM dumped:\n{}", l.log);
        let charts = l.dom.matches("<svg class=\"chart\"").count();
        assert!(charts >= 3, "{what} report: {charts} <svg class=\"chart\"> in the DOM, want at least 3");
        if let Some(why) = blankness(&screenshot(png, what)) {
            panic!("{what} report: the screenshot looks blank: {why}");
        }
        if let Some(k) = &keep {
            std::fs::create_dir_all(k).unwrap();
            std::fs::copy(png, k.join(png.file_name().unwrap())).unwrap();
        }
    }
    eprintln!("reports rendered in {:.1} s", started.elapsed().as_secs_f64());
}

/// Why a screenshot looks blank, if it does: a painted page has many colours,
/// a fair share of pixels off the background, and ink down most of its height.
fn blankness(img: &Image) -> Option<String> {
    let mut counts = std::collections::HashMap::<u32, usize>::new();
    for &p in &img.pixels {
        *counts.entry(p).or_default() += 1;
    }
    let (&background, &bg_count) = counts.iter().max_by_key(|&(_, n)| n).unwrap();
    let ink = 1.0 - bg_count as f64 / img.pixels.len() as f64;
    let rows_with_ink = img
        .pixels
        .chunks(img.width as usize)
        .filter(|row| row.iter().filter(|&&p| p != background).count() > 8)
        .count();
    let stats = format!(
        "{} colours, {:.2}% of pixels off the background {background:08x}, ink on {rows_with_ink} of {} rows",
        counts.len(),
        ink * 100.0,
        img.height
    );
    let painted = counts.len() >= 256 && ink >= 0.02 && rows_with_ink as f64 >= 0.5 * f64::from(img.height);
    (!painted).then_some(stats)
}

fn screenshot(png: &Path, what: &str) -> Image {
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{what}: no screenshot {}: {e}", png.display()));
    let img = decode_png(&bytes).unwrap_or_else(|e| panic!("{what}: {}: {e}", png.display()));
    assert_eq!((img.width, img.height), (WIDTH, HEIGHT), "{what}: screenshot size");
    img
}

// ---- A minimal PNG decoder: 8-bit RGB or RGBA, non-interlaced, which is what
// Chromium writes. Enough to count colours without a new dependency.

struct Image {
    width: u32,
    height: u32,
    /// 0xRRGGBBAA per pixel, row by row.
    pixels: Vec<u32>,
}

fn decode_png(b: &[u8]) -> Result<Image, String> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if !b.starts_with(SIGNATURE) {
        return Err("not a PNG (bad signature)".into());
    }
    let (mut pos, mut header, mut idat) = (SIGNATURE.len(), None, Vec::new());
    while pos + 8 <= b.len() {
        let len = u32::from_be_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
        let kind = &b[pos + 4..pos + 8];
        let data = b.get(pos + 8..pos + 8 + len).ok_or("truncated chunk")?;
        match kind {
            b"IHDR" => header = Some(data.to_vec()),
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        pos += 12 + len;
    }
    let h = header.ok_or("no IHDR")?;
    let width = u32::from_be_bytes(h[0..4].try_into().unwrap());
    let height = u32::from_be_bytes(h[4..8].try_into().unwrap());
    let (depth, colour, interlace) = (h[8], h[9], h[12]);
    let channels = match colour {
        2 => 3,
        6 => 4,
        _ => return Err(format!("colour type {colour} not handled")),
    };
    if depth != 8 || interlace != 0 {
        return Err(format!("bit depth {depth}, interlace {interlace} not handled"));
    }
    let raw = zlib_decompress(&idat)?;
    let stride = width as usize * channels;
    if raw.len() != height as usize * (stride + 1) {
        return Err(format!("{} bytes of image data for {width}x{height}", raw.len()));
    }
    let mut prev = vec![0u8; stride];
    let mut pixels = Vec::with_capacity(width as usize * height as usize);
    for row in raw.chunks(stride + 1) {
        let (filter, src) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= channels { cur[i - channels] } else { 0 };
            let (up, c) = (prev[i], if i >= channels { prev[i - channels] } else { 0 });
            let predicted = match filter {
                0 => 0,
                1 => a,
                2 => up,
                3 => ((u16::from(a) + u16::from(up)) / 2) as u8,
                4 => paeth(a, up, c),
                f => return Err(format!("filter type {f}")),
            };
            cur[i] = src[i].wrapping_add(predicted);
        }
        pixels.extend(cur.chunks(channels).map(|p| {
            let alpha = if channels == 4 { p[3] } else { 255 };
            u32::from_be_bytes([p[0], p[1], p[2], alpha])
        }));
        prev = cur;
    }
    Ok(Image { width, height, pixels })
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = ((p - i16::from(a)).abs(), (p - i16::from(b)).abs(), (p - i16::from(c)).abs());
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

/// zlib (RFC 1950) around deflate (RFC 1951), with the Adler-32 checked: a
/// wrong decoder fails here rather than passing a garbled image.
fn zlib_decompress(z: &[u8]) -> Result<Vec<u8>, String> {
    if z.len() < 6 || z[0] & 0x0f != 8 || (u16::from(z[0]) << 8 | u16::from(z[1])) % 31 != 0 || z[1] & 0x20 != 0 {
        return Err("bad zlib header".into());
    }
    let out = inflate(&z[2..])?;
    let (mut s1, mut s2) = (1u32, 0u32);
    for chunk in out.chunks(5552) {
        for &x in chunk {
            s1 += u32::from(x);
            s2 += s1;
        }
        s1 %= 65521;
        s2 %= 65521;
    }
    if (s2 << 16 | s1).to_be_bytes() != z[z.len() - 4..] {
        return Err("Adler-32 mismatch".into());
    }
    Ok(out)
}

struct Bits<'a> {
    data: &'a [u8],
    bit: usize,
}

impl Bits<'_> {
    fn get(&mut self, n: u32) -> Result<u32, String> {
        let mut v = 0;
        for i in 0..n {
            let byte = *self.data.get(self.bit / 8).ok_or("deflate stream truncated")?;
            v |= u32::from(byte >> (self.bit % 8) & 1) << i;
            self.bit += 1;
        }
        Ok(v)
    }
}

/// A canonical Huffman code: how many codes of each length, and the symbols in
/// code order.
struct Huffman {
    counts: [u16; 16],
    symbols: Vec<u16>,
}

impl Huffman {
    fn new(lengths: &[u8]) -> Huffman {
        let mut counts = [0u16; 16];
        for &l in lengths {
            counts[l as usize] += 1;
        }
        counts[0] = 0;
        let mut offsets = [0u16; 16];
        for l in 1..16 {
            offsets[l] = offsets[l - 1] + counts[l - 1];
        }
        let mut symbols = vec![0; lengths.iter().filter(|&&l| l > 0).count()];
        for (sym, &l) in lengths.iter().enumerate() {
            if l > 0 {
                symbols[offsets[l as usize] as usize] = sym as u16;
                offsets[l as usize] += 1;
            }
        }
        Huffman { counts, symbols }
    }

    fn decode(&self, bits: &mut Bits) -> Result<u16, String> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= bits.get(1)? as i32;
            let count = i32::from(self.counts[len]);
            if code - first < count {
                return Ok(self.symbols[(index + code - first) as usize]);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err("bad Huffman code".into())
    }
}

fn inflate(data: &[u8]) -> Result<Vec<u8>, String> {
    const LEN_BASE: [u16; 29] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ];
    const LEN_EXTRA: [u8; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
    const DIST_BASE: [u16; 30] = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ];
    const DIST_EXTRA: [u8; 30] =
        [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
    const CODE_ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

    let mut bits = Bits { data, bit: 0 };
    let mut out = Vec::new();
    loop {
        let last = bits.get(1)?;
        let (lit, dist) = match bits.get(2)? {
            0 => {
                bits.bit = bits.bit.div_ceil(8) * 8;
                let len = bits.get(16)? as usize;
                if bits.get(16)? as usize != !len & 0xffff {
                    return Err("stored block length check".into());
                }
                let start = bits.bit / 8;
                out.extend_from_slice(data.get(start..start + len).ok_or("stored block truncated")?);
                bits.bit += 8 * len;
                if last == 1 {
                    return Ok(out);
                }
                continue;
            }
            1 => {
                let mut l = [8u8; 288];
                l[144..256].fill(9);
                l[256..280].fill(7);
                (Huffman::new(&l), Huffman::new(&[5; 30]))
            }
            2 => {
                let (hlit, hdist, hclen) =
                    (bits.get(5)? as usize + 257, bits.get(5)? as usize + 1, bits.get(4)? as usize + 4);
                let mut cl = [0u8; 19];
                for &i in &CODE_ORDER[..hclen] {
                    cl[i] = bits.get(3)? as u8;
                }
                let cl = Huffman::new(&cl);
                let mut lengths = Vec::with_capacity(hlit + hdist);
                while lengths.len() < hlit + hdist {
                    let (value, repeat) = match cl.decode(&mut bits)? {
                        s @ 0..=15 => (s as u8, 1),
                        16 => (*lengths.last().ok_or("repeat with no previous length")?, 3 + bits.get(2)?),
                        17 => (0, 3 + bits.get(3)?),
                        _ => (0, 11 + bits.get(7)?),
                    };
                    lengths.extend(std::iter::repeat_n(value, repeat as usize));
                }
                if lengths.len() != hlit + hdist {
                    return Err("code lengths overrun".into());
                }
                (Huffman::new(&lengths[..hlit]), Huffman::new(&lengths[hlit..]))
            }
            _ => return Err("reserved block type".into()),
        };
        loop {
            match lit.decode(&mut bits)? {
                s @ 0..=255 => out.push(s as u8),
                256 => break,
                s => {
                    let i = usize::from(s - 257);
                    let len = usize::from(*LEN_BASE.get(i).ok_or("bad length code")?)
                        + bits.get(u32::from(LEN_EXTRA[i]))? as usize;
                    let j = usize::from(dist.decode(&mut bits)?);
                    let d = usize::from(*DIST_BASE.get(j).ok_or("bad distance code")?)
                        + bits.get(u32::from(DIST_EXTRA[j]))? as usize;
                    if d > out.len() {
                        return Err("distance before the start".into());
                    }
                    let from = out.len() - d;
                    for k in 0..len {
                        out.push(out[from + k]);
                    }
                }
            }
        }
        if last == 1 {
            return Ok(out);
        }
    }
}
