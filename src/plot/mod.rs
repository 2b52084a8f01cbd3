//! Charts, drawn with plotters into SVG and PNG. Text uses DejaVu Sans
//! compiled into the binary (`assets/fonts/`), so PNGs need no system fonts;
//! SVGs name the same family with generic fallbacks, and `report.html` embeds
//! the font itself.
//!
//! A chart is data ([`Figure`]) first; [`save`] draws it on both backends.

mod run_charts;
mod sweep_charts;

pub use run_charts::{cdf_figure, fleet_figure, gantt_figure, timeseries_figure};
pub use sweep_charts::{SweepPoint, hockey_figure, pareto_figure, tradeoff_figure};

use crate::error::{Error, Result, at};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;

/// The font family charts use.
pub const FONT: &str = "sans-serif";
/// The embedded font file.
pub static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// A qualitative palette (Tableau 10) for series.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Registers the embedded font (once per process).
pub fn init_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES);
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, FONT_BYTES);
    });
}

/// One line or scatter series.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Data points (x, y) in axis units.
    pub points: Vec<(f64, f64)>,
    /// Colour.
    pub color: RGBColor,
    /// Join the points with a line.
    pub line: bool,
    /// Draw a marker at each point.
    pub markers: bool,
    /// Thicker line (e.g. a Pareto frontier).
    pub bold: bool,
}

impl Series {
    /// A line with markers.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>, color: RGBColor) -> Self {
        Series { name: name.into(), points, color, line: true, markers: true, bold: false }
    }
}

/// A labelled reference line.
#[derive(Debug, Clone)]
pub struct RefLine {
    /// Position in axis units.
    pub at: f64,
    /// Label drawn next to it.
    pub label: String,
}

/// An x–y panel.
#[derive(Clone)]
pub struct XyChart {
    /// Panel title.
    pub title: String,
    /// X-axis label (with unit).
    pub x_label: String,
    /// Y-axis label (with unit).
    pub y_label: String,
    /// Logarithmic y axis (data must be positive).
    pub log_y: bool,
    /// The series.
    pub series: Vec<Series>,
    /// Horizontal reference lines (e.g. SLOs).
    pub hlines: Vec<RefLine>,
    /// Vertical reference lines (e.g. the knee).
    pub vlines: Vec<RefLine>,
    /// Points to flag (runs that were not a stable service), each drawn
    /// with its flag's mark and explained in the legend.
    pub flagged: Vec<(f64, f64, Flag)>,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
}

impl XyChart {
    /// `y` on the panel's y axis: log10 on a log axis (non-positive values at 10⁻⁹).
    fn ty(&self, y: f64) -> f64 {
        if self.log_y { y.max(1e-9).log10() } else { y }
    }
}

impl Default for XyChart {
    fn default() -> Self {
        XyChart {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            log_y: false,
            series: Vec::new(),
            hlines: Vec::new(),
            vlines: Vec::new(),
            flagged: Vec::new(),
            legend: SeriesLabelPosition::UpperLeft,
        }
    }
}

/// Why a chart point is not a stable service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flag {
    /// The backlog grew: overloaded.
    Overloaded,
    /// Steady only by refusing or timing out more than 1% of requests.
    Shedding,
    /// More than 1% of requests failed for other reasons (e.g. too long).
    Failing,
    /// Too short to tell: run longer.
    Inconclusive,
}

impl Flag {
    /// Legend text.
    pub fn label(self) -> &'static str {
        match self {
            Flag::Overloaded => "overloaded run",
            Flag::Shedding => "sheds load (> 1% refused)",
            Flag::Failing => "> 1% of requests failed",
            Flag::Inconclusive => "inconclusive (run longer)",
        }
    }

    fn color(self) -> RGBColor {
        match self {
            Flag::Overloaded => RGBColor(200, 0, 0),
            Flag::Shedding => RGBColor(230, 120, 0),
            Flag::Failing => RGBColor(130, 0, 160),
            Flag::Inconclusive => RGBColor(120, 120, 120),
        }
    }
}

/// One request's bar in a timeline.
#[derive(Debug, Clone)]
pub struct GanttRow {
    /// Row label.
    pub label: String,
    /// (start, end, kind) segments; kind 0 queue, 1 prefill, 2 decode, 3 preempted.
    pub segments: Vec<(f64, f64, u8)>,
    /// First-token time, marked with a tick.
    pub first_token: Option<f64>,
}

/// One panel of stacked bars: title, x-axis label (with unit), and rows of
/// (label, one value per category), top to bottom.
pub type StackPanel = (String, String, Vec<(String, Vec<f64>)>);

/// What to draw.
#[derive(Clone)]
pub enum Figure {
    /// Panels of x–y charts laid out in `rows` × `cols`, under a title.
    Panels {
        /// Figure title.
        title: String,
        /// Grid rows.
        rows: usize,
        /// Grid columns.
        cols: usize,
        /// The panels, row-major.
        panels: Vec<XyChart>,
    },
    /// A timeline of requests.
    Gantt {
        /// Figure title.
        title: String,
        /// X-axis label.
        x_label: String,
        /// One row per request, top to bottom.
        rows: Vec<GanttRow>,
    },
    /// Panels of horizontal stacked bars, one above the other, each with
    /// its own scale: each row splits its total into categories.
    Stacked {
        /// Figure title.
        title: String,
        /// Category names and colours, in stacking order.
        categories: Vec<(String, RGBColor)>,
        /// Per panel: (title, x-axis label, rows of (label, one value per category)).
        panels: Vec<StackPanel>,
    },
}

/// Height a panel's title takes, px.
const CAPTION: u32 = 26;
/// Height of one row of vertical-line labels above a chart, px.
const LABEL_ROW: u32 = 16;
/// Rows of vertical-line labels at most (further labels share them).
const VLINE_ROWS: usize = 6;

/// Width a horizontal line's label takes right of the chart, px (12 px text).
fn label_width(label: &str) -> u32 {
    (label.trim().chars().count() as u32 * 7 + 8).min(160)
}

type DrawResult<DB, T = ()> = std::result::Result<T, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn pad(lo: f64, hi: f64) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        let d = if lo.abs() > 0.0 { lo.abs() * 0.1 } else { 1.0 };
        return (lo - d, hi + d);
    }
    let d = (hi - lo) * 0.05;
    (lo - d, hi + d)
}

/// Tick label for a log10 axis value.
fn log_label(v: f64) -> String {
    human(10f64.powf(v))
}

/// A compact human number.
pub fn human(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.3}M", x / 1e6).trim_end_matches('0').trim_end_matches('.').to_string() + ""
    } else if a >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The coordinates of an x–y panel (or of a chart of horizontal rows).
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The padded data ranges of an x–y panel, `[x0, x1, y0, y1]` (y on the
/// panel's axis: log10 on a log axis), reference lines included.
fn xy_bounds(c: &XyChart) -> [f64; 4] {
    let pts = || {
        c.series
            .iter()
            .flat_map(|s| s.points.iter())
            .copied()
            .chain(c.flagged.iter().map(|&(x, y, _)| (x, y)))
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for (x, y) in pts() {
        if c.log_y && y <= 0.0 {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(c.ty(y));
        y1 = y1.max(c.ty(y));
    }
    for h in &c.hlines {
        y0 = y0.min(c.ty(h.at));
        y1 = y1.max(c.ty(h.at));
    }
    for v in &c.vlines {
        x0 = x0.min(v.at);
        x1 = x1.max(v.at);
    }
    let (x0, x1) = pad(x0, x1);
    let (y0, y1) = pad(y0, y1);
    [x0, x1, y0, y1]
}

/// An x–y panel: its series, flagged points, reference lines and legend.
fn draw_xy<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &XyChart) -> DrawResult<DB> {
    let panel = XyPanel { area, c, b: xy_bounds(c) };
    let mut chart = xy_frame(area, c, panel.b)?;
    panel.axes(&mut chart)?;
    draw_xy_series(&mut chart, c)?;
    draw_flagged(&mut chart, c)?;
    panel.ref_lines(&mut chart)?;
    if c.series.iter().any(|s| !s.name.is_empty()) || !c.flagged.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font((FONT, 12))
            .position(c.legend.clone())
            .draw()?;
    }
    Ok(())
}

/// The panel's title and plotting area, with room for the reference-line labels.
fn xy_frame<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    c: &XyChart,
    [x0, x1, y0, y1]: [f64; 4],
) -> DrawResult<DB, Chart<'a, DB>> {
    // Reference-line labels go outside the plotting area, where no curve
    // can cross them: vertical lines' in a strip above it (one row each, up
    // to VLINE_ROWS), horizontal lines' in a strip to its right.
    let top = LABEL_ROW * c.vlines.len().min(VLINE_ROWS) as u32;
    let right = c.hlines.iter().map(|h| label_width(&h.label)).max().unwrap_or(0);
    // The title is drawn above that strip (a caption would sit below it).
    let caption = if c.title.is_empty() { 0 } else { CAPTION };
    if caption > 0 {
        let (w, _) = area.dim_in_pixel();
        let style = (FONT, 17).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        area.draw(&Text::new(c.title.clone(), (w as i32 / 2, 8), style))?;
    }
    ChartBuilder::on(area)
        .margin(10)
        .margin_top(10 + caption + top)
        .margin_right(10 + right)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
}

/// An x–y panel being drawn: its drawing area, its data and their padded ranges.
struct XyPanel<'a, DB: DrawingBackend> {
    area: &'a DrawingArea<DB, Shift>,
    c: &'a XyChart,
    /// `[x0, x1, y0, y1]`, from [`xy_bounds`].
    b: [f64; 4],
}

impl<DB: DrawingBackend> XyPanel<'_, DB> {
    /// The axes, labels and light grid; on a log axis, the 1-2-5 ticks and their grid lines.
    fn axes(&self, chart: &mut Chart<'_, DB>) -> DrawResult<DB> {
        let (area, c, [x0, x1, y0, y1]) = (self.area, self.c, self.b);
        let log_y = c.log_y;
        // On a log axis, ticks go at 1-2-5 multiples of powers of ten.
        let log_ticks: Vec<f64> = if log_y {
            (y0.floor() as i32..=y1.ceil() as i32)
                .flat_map(|e| [1.0, 2.0, 5.0].map(|m| (m * 10f64.powi(e)).log10()))
                .filter(|v| *v >= y0 && *v <= y1)
                .collect()
        } else {
            Vec::new()
        };
        chart
            .configure_mesh()
            .x_desc(&c.x_label)
            .y_desc(&c.y_label)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .x_label_formatter(&|v| human(*v))
            .y_labels(if log_y { 0 } else { 10 })
            .y_label_formatter(&|v| human(*v))
            .max_light_lines(2)
            .light_line_style(RGBColor(240, 240, 240))
            .draw()?;
        if log_y {
            let grid = RGBColor(225, 225, 225);
            // Tick labels go in the axis margin, left of the plotting area, like
            // a linear axis's (inside it, a legend in a corner covered them).
            let base = area.get_base_pixel();
            let style = (FONT, 12).into_font().color(&RGBColor(60, 60, 60)).pos(Pos::new(HPos::Right, VPos::Center));
            for &v in &log_ticks {
                chart.draw_series(std::iter::once(PathElement::new(vec![(x0, v), (x1, v)], grid.stroke_width(1))))?;
                let (px, py) = chart.backend_coord(&(x0, v));
                area.draw(&Text::new(log_label(v), (px - base.0 - 6, py - base.1), style.clone()))?;
            }
        }
        Ok(())
    }

    /// The reference lines, labelled outside the plotting area.
    fn ref_lines(&self, chart: &mut Chart<'_, DB>) -> DrawResult<DB> {
        let (area, c, [x0, x1, y0, y1]) = (self.area, self.c, self.b);
        let grey = RGBColor(90, 90, 90);
        let base = area.get_base_pixel();
        let (plot_top, plot_right) = {
            let (px, py) = chart.backend_coord(&(x1, y1));
            (py - base.1, px - base.0)
        };
        for h in &c.hlines {
            let y = c.ty(h.at);
            chart.draw_series(std::iter::once(PathElement::new(vec![(x0, y), (x1, y)], grey.stroke_width(1))))?;
            let py = chart.backend_coord(&(x1, y)).1 - base.1;
            let style = (FONT, 12).into_font().color(&grey).pos(Pos::new(HPos::Left, VPos::Center));
            area.draw(&Text::new(h.label.trim().to_string(), (plot_right + 4, py), style))?;
        }
        for (i, v) in c.vlines.iter().enumerate() {
            chart.draw_series(std::iter::once(PathElement::new(vec![(v.at, y0), (v.at, y1)], grey.stroke_width(1))))?;
            // Labels right of the line in the left half, left of it in the right half.
            let anchor = if v.at > x0 + (x1 - x0) * 0.5 { HPos::Right } else { HPos::Left };
            let style = (FONT, 12).into_font().color(&grey).pos(Pos::new(anchor, VPos::Bottom));
            let px = chart.backend_coord(&(v.at, y1)).0 - base.0;
            // Labels of several lines are stacked, one row each, not overprinted.
            let row = (c.vlines.len().min(VLINE_ROWS) - 1 - i % VLINE_ROWS) as i32;
            let tick = PathElement::new(vec![(px, plot_top), (px, plot_top - 4)], grey.stroke_width(1));
            area.draw(&tick)?;
            area.draw(&Text::new(format!(" {} ", v.label.trim()), (px, plot_top - 2 - row * LABEL_ROW as i32), style))?;
        }
        Ok(())
    }
}

/// The series, each with its legend entry (none when it has nothing to draw).
fn draw_xy_series<DB: DrawingBackend>(chart: &mut Chart<'_, DB>, c: &XyChart) -> DrawResult<DB> {
    let log_y = c.log_y;
    for s in &c.series {
        let data: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite() && (!log_y || p.1 > 0.0))
            .map(|&(x, y)| (x, c.ty(y)))
            .collect();
        // A series with nothing to draw gets no legend entry either.
        if data.is_empty() {
            continue;
        }
        let color = s.color;
        // Thick polylines get miter spikes at sharp turns: dense series (time
        // series with hundreds of points) are drawn 1 px wide.
        let width = if data.len() > 300 {
            1
        } else if s.bold {
            3
        } else {
            2
        };
        if s.line {
            let ann = chart.draw_series(LineSeries::new(data.clone(), color.stroke_width(width)))?;
            ann.label(&s.name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        if s.markers {
            let ann = chart.draw_series(data.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            if !s.line {
                ann.label(&s.name).legend(move |(x, y)| Circle::new((x + 9, y), 3, color.filled()));
            }
        }
    }
    Ok(())
}

/// The flagged points: each kind of flag has its own mark, named once in the legend.
fn draw_flagged<DB: DrawingBackend>(chart: &mut Chart<'_, DB>, c: &XyChart) -> DrawResult<DB> {
    let log_y = c.log_y;
    let mut kinds: Vec<Flag> = c.flagged.iter().map(|p| p.2).collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let color = kind.color();
        let data: Vec<(f64, f64)> = c
            .flagged
            .iter()
            .filter(|p| p.2 == kind && p.1.is_finite() && (!log_y || p.1 > 0.0))
            .map(|&(x, y, _)| (x, c.ty(y)))
            .collect();
        let name = kind.label();
        match kind {
            Flag::Overloaded => {
                chart
                    .draw_series(data.iter().map(|&p| Cross::new(p, 6, color.stroke_width(2))))?
                    .label(name)
                    .legend(move |(x, y)| Cross::new((x + 9, y), 5, color.stroke_width(2)));
            }
            Flag::Shedding => {
                chart
                    .draw_series(data.iter().map(|&p| TriangleMarker::new(p, 7, color.stroke_width(2))))?
                    .label(name)
                    .legend(move |(x, y)| TriangleMarker::new((x + 9, y), 6, color.stroke_width(2)));
            }
            Flag::Failing => {
                chart
                    .draw_series(
                        data.iter().map(|&p| EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], color.filled())),
                    )?
                    .label(name)
                    .legend(move |(x, y)| Rectangle::new([(x + 5, y - 4), (x + 13, y + 4)], color.filled()));
            }
            Flag::Inconclusive => {
                chart
                    .draw_series(data.iter().map(|&p| Circle::new(p, 5, color.stroke_width(2))))?
                    .label(name)
                    .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.stroke_width(2)));
            }
        }
    }
    Ok(())
}

/// The label of the row at `y` in a chart of horizontal rows (row i is
/// centred on y = n − 1 − i); empty between rows.
fn row_label(labels: &[String], y: f64) -> String {
    let n = labels.len() as f64;
    let i = (n - 1.0 - y).round();
    if (n - 1.0 - y - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
        labels[i as usize].clone()
    } else {
        String::new()
    }
}

/// The axes of a chart of horizontal rows: a numeric x axis and one label per row.
fn row_mesh<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    x_label: &str,
    y_label: &str,
    labels: &[String],
) -> DrawResult<DB> {
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style((FONT, 11))
        .axis_desc_style((FONT, 13))
        .x_label_formatter(&|v| human(*v))
        .y_labels(labels.len())
        .y_label_formatter(&|v| row_label(labels, *v))
        .disable_y_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
}

fn draw_gantt<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    rows: &[GanttRow],
) -> DrawResult<DB> {
    let t1 = rows.iter().flat_map(|r| r.segments.iter().map(|s| s.1)).filter(|x| x.is_finite()).fold(0.0f64, f64::max);
    let t0 = rows
        .iter()
        .flat_map(|r| r.segments.iter().map(|s| s.0))
        .filter(|x| x.is_finite())
        .fold(f64::INFINITY, f64::min);
    let (t0, t1) = pad(if t0.is_finite() { t0 } else { 0.0 }, t1);
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 17))
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(120)
        .build_cartesian_2d(t0..t1, -0.5..n - 0.5)?;
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    row_mesh(&mut chart, x_label, "request (prompt + output tokens)", &labels)?;
    let colors = [RGBColor(200, 200, 200), RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];
    let names = ["queued", "prefill (chunk)", "decode", "preempted"];
    for (k, name) in names.iter().enumerate() {
        let color = colors[k];
        let mut rects = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            let y = n - i as f64 - 1.0;
            for &(a, b, kind) in &r.segments {
                if kind as usize == k && a.is_finite() && b.is_finite() {
                    rects.push(Rectangle::new(
                        [(a, y - 0.35), (b.max(a + (t1 - t0) * 0.001), y + 0.35)],
                        color.filled(),
                    ));
                }
            }
        }
        chart
            .draw_series(rects)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    let ticks: Vec<PathElement<(f64, f64)>> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.first_token.map(|t| (i, t)))
        .map(|(i, t)| {
            let y = n - i as f64 - 1.0;
            PathElement::new(vec![(t, y - 0.45), (t, y + 0.45)], BLACK.stroke_width(2))
        })
        .collect();
    chart
        .draw_series(ticks)?
        .label("first token")
        .legend(|(x, y)| PathElement::new(vec![(x + 7, y - 6), (x + 7, y + 6)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FONT, 12))
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    Ok(())
}

fn draw_stacked<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (title, x_label, rows): &StackPanel,
    categories: &[(String, RGBColor)],
) -> DrawResult<DB> {
    let total = rows.iter().map(|r| r.1.iter().filter(|v| v.is_finite()).sum::<f64>()).fold(0.0f64, f64::max);
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 17))
        .margin(10)
        .x_label_area_size(44)
        .y_label_area_size(150)
        .build_cartesian_2d(0.0..(total * 1.45).max(1e-9), -0.5..n - 0.5)?;
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    row_mesh(&mut chart, x_label, "", &labels)?;
    for (k, (name, color)) in categories.iter().enumerate() {
        if rows.iter().all(|r| r.1.get(k).is_none_or(|v| v.is_nan() || *v <= 0.0)) {
            continue;
        }
        let color = *color;
        let rects: Vec<_> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let v = *r.1.get(k)?;
                if v.is_nan() || v <= 0.0 {
                    return None;
                }
                let x0: f64 = r.1[..k].iter().filter(|v| v.is_finite() && **v > 0.0).sum();
                let y = n - i as f64 - 1.0;
                Some(Rectangle::new([(x0, y - 0.35), (x0 + v, y + 0.35)], color.filled()))
            })
            .collect();
        chart
            .draw_series(rects)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FONT, 11))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

fn draw_figure<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, f: &Figure) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    match f {
        Figure::Panels { title, rows, cols, panels } => {
            let inner = if title.is_empty() { root.clone() } else { root.titled(title, (FONT, 20))? };
            let areas = inner.split_evenly((*rows, *cols));
            for (a, p) in areas.iter().zip(panels) {
                draw_xy(a, p)?;
            }
        }
        Figure::Gantt { title, x_label, rows } => draw_gantt(&root, title, x_label, rows)?,
        Figure::Stacked { title, categories, panels } => {
            let inner = if title.is_empty() { root.clone() } else { root.titled(title, (FONT, 20))? };
            for (a, p) in inner.split_evenly((panels.len().max(1), 1)).iter().zip(panels) {
                draw_stacked(a, p, categories)?;
            }
        }
    }
    root.present()?;
    Ok(())
}

/// Pixel size of a figure.
pub fn size_of(f: &Figure) -> (u32, u32) {
    match f {
        Figure::Panels { rows, cols, .. } => {
            ((if *cols >= 3 { 430 } else { 520 } * *cols as u32).max(900), 360 * *rows as u32 + 40)
        }
        Figure::Gantt { rows, .. } => (1100, (22 * rows.len() as u32 + 140).max(360)),
        Figure::Stacked { panels, .. } => (1100, 280 * panels.len().max(1) as u32 + 40),
    }
}

/// Standard base64 (RFC 4648, padded).
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 { A[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if c.len() > 2 { A[n as usize & 63] as char } else { '=' });
    }
    out
}

/// A CSS `@font-face` rule carrying the embedded font as a data URL.
pub fn font_face_css() -> String {
    static CSS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSS.get_or_init(|| {
        format!(
            "@font-face{{font-family:'DejaVu Sans';src:url(data:font/ttf;base64,{}) format('truetype');}}",
            base64(FONT_BYTES)
        )
    })
    .clone()
}

const FONT_STYLE_START: &str = "<defs><style id=\"servesim-font\">";

/// Removes the embedded font block from an SVG (for pages that embed the font once).
pub fn strip_font_face(svg: &str) -> String {
    match (svg.find(FONT_STYLE_START), svg.find("</style></defs>")) {
        (Some(a), Some(b)) if b > a => format!("{}{}", &svg[..a], &svg[b + "</style></defs>".len()..]),
        _ => svg.to_string(),
    }
}

/// Draws a figure as an SVG document.
pub fn to_svg(f: &Figure) -> Result<String> {
    init_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, size_of(f)).into_drawing_area();
        draw_figure(root, f).map_err(|e| Error::Runtime(format!("cannot draw chart: {e}")))?;
    }
    // Name the embedded font first, with common fallbacks, and embed it so the
    // SVG renders the same everywhere.
    let s = s.replace("font-family=\"sans-serif\"", "font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\"");
    let at = s.find("<svg").and_then(|i| s[i..].find('>').map(|j| i + j + 1)).unwrap_or(0);
    Ok(format!("{}{FONT_STYLE_START}{}</style></defs>{}", &s[..at], font_face_css(), &s[at..]))
}

/// Writes `<stem>.svg` and `<stem>.png` into `dir` (each atomically); returns the SVG text.
pub fn save(f: &Figure, dir: &Path, stem: &str) -> Result<String> {
    let svg = to_svg(f)?;
    crate::files::write_atomic(&dir.join(format!("{stem}.svg")), |w| w.write_all(svg.as_bytes()))?;
    let tmp = dir.join(format!(".{stem}.png.tmp-{}.png", std::process::id()));
    {
        let root = BitMapBackend::new(&tmp, size_of(f)).into_drawing_area();
        draw_figure(root, f).map_err(|e| Error::Runtime(format!("cannot draw {stem}.png: {e}")))?;
    }
    let png = dir.join(format!("{stem}.png"));
    std::fs::rename(&tmp, &png).map_err(at("write", &png))?;
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn svgs_embed_the_font_and_pages_can_strip_it() {
        let f = Figure::Panels { title: "t".into(), rows: 1, cols: 1, panels: vec![XyChart::default()] };
        let svg = to_svg(&f).unwrap();
        assert!(svg.contains("@font-face") && svg.contains("base64,"));
        let bare = strip_font_face(&svg);
        assert!(!bare.contains("@font-face") && bare.starts_with("<svg") && bare.contains("</svg>"));
    }

    /// The y (or x) coordinates of every vertex of the series' polylines
    /// (2 px wide; axes, grid and ticks are 1 px) in an SVG.
    fn polyline_coords(svg: &str, axis: usize) -> Vec<f64> {
        svg.split("<polyline")
            .skip(1)
            .filter(|p| p.contains("stroke-width=\"2\""))
            .flat_map(|p| {
                let pts = p.split("points=\"").nth(1).unwrap_or("").split('"').next().unwrap_or("").to_string();
                pts.split_whitespace()
                    .filter_map(|xy| xy.split(',').nth(axis).and_then(|v| v.parse::<f64>().ok()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The `attr` of the `<text>` element whose content contains `needle`.
    fn text_attr(svg: &str, needle: &str, attr: &str) -> f64 {
        let at = svg.find(needle).unwrap_or_else(|| panic!("{needle:?} not in the SVG"));
        let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
        let v = tag.split(&format!(" {attr}=\"")).nth(1).unwrap().split('"').next().unwrap();
        v.parse().unwrap()
    }

    /// Issue 26: reference-line labels sit outside the plotting area, where
    /// no curve crosses them: "end of warm-up" above every curve, the SLO's
    /// label right of every curve (a p99 line ran through it).
    #[test]
    fn reference_labels_are_not_drawn_over_curves() {
        let rising: Vec<(f64, f64)> = (0..50).map(|i| (i as f64, 100.0 + 20.0 * i as f64)).collect();
        let chart = XyChart {
            title: "t".into(),
            series: vec![Series::line("p99", rising, PALETTE[0])],
            hlines: vec![RefLine { at: 900.0, label: "TTFT SLO 900 ms".into() }],
            vlines: vec![RefLine { at: 10.0, label: " end of warm-up".into() }],
            ..Default::default()
        };
        let svg = to_svg(&Figure::Panels { title: String::new(), rows: 1, cols: 1, panels: vec![chart] }).unwrap();
        let ys = polyline_coords(&svg, 1);
        let xs = polyline_coords(&svg, 0);
        assert!(!ys.is_empty());
        let top = ys.iter().copied().fold(f64::INFINITY, f64::min);
        let right = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!(text_attr(&svg, "end of warm-up", "y") < top, "the warm-up label is inside the curves' area");
        assert!(text_attr(&svg, "TTFT SLO 900 ms", "x") > right, "the SLO label is inside the curves' area");
    }

    /// A series with nothing to draw (every point of a family flagged) gets
    /// no legend entry.
    #[test]
    fn series_without_points_are_left_out_of_the_legend() {
        let chart = XyChart {
            series: vec![
                Series::line("drawn", vec![(1.0, 1.0), (2.0, 2.0)], PALETTE[0]),
                Series::line("nothing to draw", vec![], PALETTE[1]),
                Series::line("not finite", vec![(f64::NAN, 1.0)], PALETTE[2]),
            ],
            ..Default::default()
        };
        let svg = to_svg(&Figure::Panels { title: String::new(), rows: 1, cols: 1, panels: vec![chart] }).unwrap();
        assert!(svg.contains("drawn"), "the drawn series lost its legend entry");
        assert!(!svg.contains("nothing to draw") && !svg.contains("not finite"));
    }
}
