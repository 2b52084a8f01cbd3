//! Charts of a sweep: the latency–throughput tradeoff, the Pareto frontier of
//! throughput per GPU against interactivity, and latency against load.

use super::{Figure, Flag, PALETTE, RefLine, Series, XyChart};
use std::collections::BTreeMap;

/// What the sweep charts need of one point (replication means).
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// Configuration family: the swept parameters other than the load.
    pub family: String,
    /// Offered load (workload.rate), if the scenario has one.
    pub rate: Option<f64>,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Output tokens per second per GPU.
    pub output_throughput_per_gpu: f64,
    /// TTFT median and p99, ms.
    pub ttft_p50: f64,
    /// TTFT p99, ms.
    pub ttft_p99: f64,
    /// TPOT median, ms.
    pub tpot_p50: f64,
    /// TPOT p99, ms.
    pub tpot_p99: f64,
    /// Why the point is not a stable service (the worst replication's
    /// verdict); None when it is. Flagged points are drawn with their own
    /// mark, not joined, and kept off the Pareto frontier and the knee.
    pub flag: Option<Flag>,
}

impl SweepPoint {
    fn ok(&self) -> bool {
        self.flag.is_none()
    }
}

/// The flagged points of `ps` at (x, y).
fn flagged<'a>(
    ps: &'a [&SweepPoint],
    xy: impl Fn(&SweepPoint) -> (f64, f64) + 'a,
) -> impl Iterator<Item = (f64, f64, Flag)> + 'a {
    ps.iter().filter_map(move |p| p.flag.map(|f| (xy(p).0, xy(p).1, f)))
}

/// Orders text as people read numbers in it: runs of digits compare by
/// value ("max_num_seqs=512" before "max_num_seqs=2048"), the rest as text.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut digit = None;
        for (i, c) in s.char_indices() {
            let d = c.is_ascii_digit();
            if digit.is_some_and(|x| x != d) {
                out.push((digit.unwrap_or(false), &s[start..i]));
                start = i;
            }
            digit = Some(d);
        }
        if start < s.len() {
            out.push((digit.unwrap_or(false), &s[start..]));
        }
        out
    }
    let (ra, rb) = (runs(a), runs(b));
    for (x, y) in ra.iter().zip(&rb) {
        let o = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    ra.len().cmp(&rb.len()).then_with(|| a.cmp(b))
}

/// The points by family, families in [`natural_cmp`] order (the legends').
fn families(points: &[SweepPoint]) -> Vec<(String, Vec<&SweepPoint>)> {
    let mut m: BTreeMap<String, Vec<&SweepPoint>> = BTreeMap::new();
    for p in points {
        m.entry(p.family.clone()).or_default().push(p);
    }
    for v in m.values_mut() {
        v.sort_by(|a, b| a.output_throughput.total_cmp(&b.output_throughput));
    }
    let mut fams: Vec<(String, Vec<&SweepPoint>)> = m.into_iter().collect();
    fams.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    fams
}

fn label(f: &str) -> String {
    if f.is_empty() { "all points".into() } else { f.to_string() }
}

/// Chart 1: output throughput against TTFT p50 and p99, one line per family;
/// points that were not a stable service are marked and not joined.
pub fn tradeoff_figure(title: &str, points: &[SweepPoint], per_gpu: bool, ttft_slo: Option<f64>) -> Figure {
    let fam = families(points);
    let x = |p: &SweepPoint| if per_gpu { p.output_throughput_per_gpu } else { p.output_throughput };
    let mut panels = Vec::new();
    for (name, get) in
        [("p50", (|p: &SweepPoint| p.ttft_p50) as fn(&SweepPoint) -> f64), ("p99", |p: &SweepPoint| p.ttft_p99)]
    {
        let mut c = XyChart {
            title: format!("TTFT {name} vs throughput"),
            x_label: if per_gpu { "output tokens/s per GPU".into() } else { "output tokens/s".into() },
            y_label: format!("TTFT {name} (ms, log)"),
            log_y: true,
            ..Default::default()
        };
        for (k, (f, ps)) in fam.iter().enumerate() {
            let stable: Vec<(f64, f64)> = ps.iter().filter(|p| p.ok()).map(|p| (x(p), get(p))).collect();
            c.series.push(Series::line(label(f), stable, PALETTE[k % 10]));
            c.flagged.extend(flagged(ps, |p| (x(p), get(p))));
        }
        if let Some(s) = ttft_slo {
            c.hlines.push(RefLine { at: s, label: format!("TTFT SLO {s} ms") });
        }
        panels.push(c);
    }
    Figure::Panels { title: title.into(), rows: 1, cols: 2, panels }
}

/// Indices of the Pareto-optimal points when maximising both coordinates.
pub fn pareto_front(xy: &[(f64, f64)]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..xy.len()).filter(|&i| xy[i].0.is_finite() && xy[i].1.is_finite()).collect();
    idx.sort_by(|&a, &b| xy[b].0.total_cmp(&xy[a].0).then(xy[b].1.total_cmp(&xy[a].1)));
    let mut front = Vec::new();
    let mut best_y = f64::NEG_INFINITY;
    for i in idx {
        if xy[i].1 > best_y {
            front.push(i);
            best_y = xy[i].1;
        }
    }
    front.sort_by(|&a, &b| xy[a].0.total_cmp(&xy[b].0));
    front
}

/// Chart 2: throughput per GPU against interactivity (tokens/s per user =
/// 1000 / TPOT p50), every stable point, the Pareto frontier highlighted.
pub fn pareto_figure(title: &str, points: &[SweepPoint]) -> Figure {
    let fam = families(points);
    let mut c = XyChart {
        title: "Throughput per GPU vs interactivity".into(),
        x_label: "interactivity: tokens/s per user (1000 / median TPOT)".into(),
        y_label: "output tokens/s per GPU".into(),
        ..Default::default()
    };
    let all: Vec<(f64, f64)> =
        points.iter().filter(|p| p.ok()).map(|p| (1000.0 / p.tpot_p50, p.output_throughput_per_gpu)).collect();
    for (k, (f, ps)) in fam.iter().enumerate() {
        let pts = ps.iter().filter(|p| p.ok()).map(|p| (1000.0 / p.tpot_p50, p.output_throughput_per_gpu)).collect();
        c.series.push(Series {
            name: label(f),
            points: pts,
            color: PALETTE[k % 10],
            line: false,
            markers: true,
            bold: false,
        });
        c.flagged.extend(flagged(ps, |p| (1000.0 / p.tpot_p50, p.output_throughput_per_gpu)));
    }
    let front: Vec<(f64, f64)> = pareto_front(&all).into_iter().map(|i| all[i]).collect();
    c.series.push(Series {
        name: "Pareto frontier".into(),
        points: front,
        color: plotters::style::RGBColor(0, 0, 0),
        line: true,
        markers: false,
        bold: true,
    });
    c.legend = plotters::chart::SeriesLabelPosition::LowerLeft;
    Figure::Panels { title: title.into(), rows: 1, cols: 1, panels: vec![c] }
}

/// A family's knee: the highest offered rate whose p99 TTFT meets the SLO
/// and whose run is a stable service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knee {
    /// That rate, req/s.
    pub rate: f64,
    /// Whether a higher rate of the grid fails: at the grid's last rate the
    /// curve has not bent yet, and the knee lies beyond the grid.
    pub inside: bool,
}

impl Knee {
    /// The knee's label on a chart, for family `family`.
    pub fn label(&self, family: &str) -> String {
        if self.inside {
            format!(" knee {family}: {} req/s", self.rate)
        } else {
            format!(" {family}: no knee inside the grid (SLO met up to {} req/s, its highest)", self.rate)
        }
    }
}

/// The knee per family: the highest offered rate whose p99 TTFT meets the
/// SLO and whose run is a stable service (not overloaded, shedding, failing
/// or inconclusive); not inside the grid when that is the family's highest rate.
pub fn knees(points: &[SweepPoint], ttft_slo: f64) -> BTreeMap<String, Knee> {
    let mut m = BTreeMap::new();
    for (f, ps) in families(points) {
        let top = ps.iter().filter_map(|p| p.rate).fold(f64::NEG_INFINITY, f64::max);
        if let Some(r) = ps
            .iter()
            .filter(|p| p.ok() && p.ttft_p99 <= ttft_slo)
            .filter_map(|p| p.rate)
            .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))))
        {
            m.insert(f, Knee { rate: r, inside: r < top });
        }
    }
    m
}

/// Chart 3: p50 and p99 TTFT against offered load (the hockey stick), with
/// the SLO line and each family's knee.
pub fn hockey_figure(title: &str, points: &[SweepPoint], ttft_slo: Option<f64>) -> Figure {
    let mut fam = families(points);
    for (_, v) in fam.iter_mut() {
        v.sort_by(|a, b| a.rate.unwrap_or(0.0).total_cmp(&b.rate.unwrap_or(0.0)));
    }
    let mut c = XyChart {
        title: "Latency vs offered load".into(),
        x_label: "offered load (requests/s)".into(),
        y_label: "TTFT (ms, log)".into(),
        log_y: true,
        ..Default::default()
    };
    for (k, (f, ps)) in fam.iter().enumerate() {
        let color = PALETTE[k % 10];
        let pick = |g: fn(&SweepPoint) -> f64| {
            ps.iter().filter(|p| p.ok() && p.rate.is_some()).map(|p| (p.rate.unwrap_or(0.0), g(p))).collect()
        };
        c.series.push(Series::line(format!("{} p99", label(f)), pick(|p| p.ttft_p99), color));
        // p50 in a lighter shade of the family's colour.
        let light = plotters::style::RGBColor(color.0 / 2 + 128, color.1 / 2 + 128, color.2 / 2 + 128);
        c.series.push(Series {
            name: format!("{} p50", label(f)),
            points: pick(|p| p.ttft_p50),
            color: light,
            line: true,
            markers: true,
            bold: false,
        });
        let with_rate: Vec<&SweepPoint> = ps.iter().copied().filter(|p| p.rate.is_some()).collect();
        c.flagged.extend(flagged(&with_rate, |p| (p.rate.unwrap_or(0.0), p.ttft_p99)).collect::<Vec<_>>());
    }
    if let Some(s) = ttft_slo {
        c.hlines.push(RefLine { at: s, label: format!("TTFT SLO {s} ms") });
        let mut knees: Vec<(String, Knee)> = knees(points, s).into_iter().collect();
        knees.sort_by(|a, b| natural_cmp(&a.0, &b.0));
        for (f, k) in knees {
            c.vlines.push(RefLine { at: k.rate, label: k.label(&label(&f)) });
        }
    }
    Figure::Panels { title: title.into(), rows: 1, cols: 1, panels: vec![c] }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point of one family at `rate` with p99 TTFT `ttft`.
    fn p(rate: f64, ttft: f64, flag: Option<Flag>) -> SweepPoint {
        SweepPoint {
            family: String::new(),
            rate: Some(rate),
            output_throughput: rate * 100.0,
            output_throughput_per_gpu: rate * 100.0,
            ttft_p50: ttft / 2.0,
            ttft_p99: ttft,
            tpot_p50: 10.0,
            tpot_p99: 20.0,
            flag,
        }
    }

    /// A point that is not a stable service never sets the knee, whatever
    /// its latency: shedding keeps p99 TTFT low by refusing requests.
    #[test]
    fn flagged_points_are_kept_off_the_knee() {
        let pts = [
            p(10.0, 100.0, None),
            p(20.0, 200.0, None),
            p(30.0, 300.0, Some(Flag::Shedding)),
            p(40.0, 100.0, Some(Flag::Failing)),
            p(50.0, 100.0, Some(Flag::Inconclusive)),
        ];
        assert_eq!(knees(&pts, 500.0).get(""), Some(&Knee { rate: 20.0, inside: true }));
    }

    /// A curve that meets the SLO at the grid's highest rate has not bent
    /// yet: that rate is no knee (review: the last grid point was labelled
    /// the knee).
    #[test]
    fn a_knee_at_the_last_grid_point_is_no_knee() {
        let k = knees(&[p(10.0, 100.0, None), p(20.0, 150.0, None), p(30.0, 200.0, None)], 500.0)[""];
        assert_eq!(k, Knee { rate: 30.0, inside: false });
        assert!(k.label("all points").contains("no knee inside the grid"), "{}", k.label("all points"));
        assert!(!k.label("all points").contains("knee all points"));
    }

    #[test]
    fn pareto_front_keeps_non_dominated_points() {
        let xy = [(1.0, 5.0), (2.0, 4.0), (1.5, 3.0), (3.0, 1.0), (0.5, 5.0)];
        assert_eq!(pareto_front(&xy), vec![0, 1, 3]);
    }

    #[test]
    fn numbers_in_names_sort_by_value() {
        let mut v = vec!["tokens=16384", "tokens=512", "tokens=2048", "tp=2 tokens=512", "tp=10", "a", "tokens=0512"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["a", "tokens=0512", "tokens=512", "tokens=2048", "tokens=16384", "tp=2 tokens=512", "tp=10"]);
    }

    /// Legends list families in numeric order (512 before 2048), and only
    /// families with something drawn.
    #[test]
    fn legends_sort_numerically_and_skip_families_without_a_line() {
        let mut points = Vec::new();
        for (fam, ok) in [("b=2048", true), ("b=512", true), ("b=16384", false)] {
            for r in [1.0, 2.0] {
                let mut q = p(r, 100.0 * r, if ok { None } else { Some(Flag::Overloaded) });
                q.family = fam.into();
                points.push(q);
            }
        }
        let Figure::Panels { panels, .. } = tradeoff_figure("t", &points, false, None) else { panic!() };
        let names: Vec<&str> = panels[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["b=512", "b=2048", "b=16384"]);
        let svg = crate::plot::to_svg(&tradeoff_figure("t", &points, false, None)).unwrap();
        let (a, b) = (svg.find("b=512").unwrap(), svg.find("b=2048").unwrap());
        assert!(a < b, "legend order");
        assert!(!svg.contains("b=16384"), "a family with no stable point has no line, and no legend entry");
    }
}
