//! SVG plots of a run, drawn with `plotters`: throughput over time (a line
//! per flow, or per workload when it has many, and one per collective job)
//! with the timeline's events marked, and the distribution of a collective's
//! operation times per size. Every chart is a string of SVG: the caller
//! writes it where it wants.

use plotters::prelude::*;

use turbonet_lab::events::LoggedEvent;
use turbonet_lab::workload::{Report, SERIES_STEP};

/// Flows of one workload drawn one by one; beyond, the workload's sum.
const LINES_PER_WORKLOAD: usize = 8;

const SIZE: (u32, u32) = (900, 420);

/// One line: its label and its points (seconds on the lab's clock, bits
/// per second).
type Line = (String, Vec<(f64, f64)>);

/// The throughput lines of a run's workloads.
fn lines(reports: &[Report]) -> Vec<Line> {
    let step = SERIES_STEP.as_secs_f64();
    let points = |start: f64, series: &[u64]| -> Vec<(f64, f64)> {
        series
            .iter()
            .enumerate()
            .map(|(i, &b)| (start + (i as f64 + 0.5) * step, b as f64 * 8.0 / step))
            .collect()
    };
    let mut out = Vec::new();
    for r in reports {
        let start = r.started.unwrap_or(0.0);
        if !r.series.is_empty() {
            out.push((r.name.clone(), points(start, &r.series)));
        }
        if r.flows.len() <= LINES_PER_WORKLOAD {
            for f in r.flows.iter().filter(|f| !f.series.is_empty()) {
                let label = format!("{} {}->{}", r.name, f.src, f.dst);
                out.push((label, points(start, &f.series)));
            }
        } else {
            let mut sum: Vec<u64> = Vec::new();
            for f in &r.flows {
                if sum.len() < f.series.len() {
                    sum.resize(f.series.len(), 0);
                }
                for (s, b) in sum.iter_mut().zip(&f.series) {
                    *s += b;
                }
            }
            let label = format!("{} ({} flows)", r.name, r.flows.len());
            out.push((label, points(start, &sum)));
        }
    }
    out
}

/// Bits per second in the unit that suits the largest value.
fn rate_unit(max: f64) -> (f64, &'static str) {
    if max >= 1e9 {
        (1e9, "Gbit/s")
    } else if max >= 1e6 {
        (1e6, "Mbit/s")
    } else {
        (1e3, "kbit/s")
    }
}

/// Throughput over time of every workload, with the timeline's events as
/// dashed lines; `None` when no workload moved a byte.
pub fn throughput(reports: &[Report], events: &[LoggedEvent]) -> Option<String> {
    let lines = lines(reports);
    let (mut t_max, mut y_max) = (0.0f64, 0.0f64);
    for (_, pts) in &lines {
        for &(t, y) in pts {
            t_max = t_max.max(t);
            y_max = y_max.max(y);
        }
    }
    if y_max <= 0.0 {
        return None;
    }
    let (scale, unit) = rate_unit(y_max);
    let marks: Vec<&LoggedEvent> = events
        .iter()
        .filter(|e| e.source == "timeline" && e.t <= t_max)
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let mut chart = ChartBuilder::on(&root)
            .caption("throughput received", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max * 1.02, 0.0..y_max / scale * 1.1)
            .ok()?;
        chart
            .configure_mesh()
            .x_desc("seconds since the fabric was ready")
            .y_desc(unit)
            .draw()
            .ok()?;
        for (i, (label, pts)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|&(t, y)| (t, y / scale)),
                    color.stroke_width(2),
                ))
                .ok()?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        for e in &marks {
            let top = y_max / scale * 1.1;
            chart
                .draw_series(DashedLineSeries::new(
                    [(e.t, 0.0), (e.t, top)],
                    5,
                    4,
                    RED.stroke_width(1),
                ))
                .ok()?;
            chart
                .draw_series(std::iter::once(Text::new(
                    e.event.clone(),
                    (e.t, top * 0.97),
                    ("sans-serif", 12).into_font().color(&RED),
                )))
                .ok()?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .ok()?;
        root.present().ok()?;
    }
    Some(svg)
}

/// Every timed repetition of every collective, per workload and size:
/// how spread its operation times are; `None` without collectives.
pub fn op_times(reports: &[Report]) -> Option<String> {
    let columns: Vec<(String, &[f64])> = reports
        .iter()
        .flat_map(|r| {
            r.ops.iter().map(move |o| {
                (
                    format!("{} {}", r.name, turbonet_topo::units::Bytes(o.bytes)),
                    &o.times[..],
                )
            })
        })
        .filter(|(_, t)| !t.is_empty())
        .collect();
    if columns.is_empty() {
        return None;
    }
    let y_max = columns
        .iter()
        .flat_map(|(_, t)| t.iter())
        .fold(0.0f64, |a, &b| a.max(b))
        * 1e3;
    let n = columns.len();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let names: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption("operation time of every repetition", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..y_max * 1.1)
            .ok()?;
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("ms")
            .draw()
            .ok()?;
        for (i, (_, times)) in columns.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(
                    times
                        .iter()
                        .map(|&t| Circle::new((i as f64, t * 1e3), 4, color.filled())),
                )
                .ok()?;
            let mean = times.iter().sum::<f64>() / times.len() as f64 * 1e3;
            chart
                .draw_series(LineSeries::new(
                    [(i as f64 - 0.25, mean), (i as f64 + 0.25, mean)],
                    BLACK.stroke_width(2),
                ))
                .ok()?;
        }
        root.present().ok()?;
    }
    Some(svg)
}

/// Directions drawn in the link-load picture, busiest first.
const LOAD_ROWS: usize = 24;

/// Per-link load over time, as a heat map: a row per busy link direction
/// (busiest first), a cell per sampling interval, coloured by the share of
/// the link's rate it carried (or, when a drawn link has no rate, by its
/// rate against the busiest's), with the timeline's events marked;
/// `None` when no link carried load.
pub fn link_load(u: &crate::utilisation::Utilisation, events: &[LoggedEvent]) -> Option<String> {
    use plotters::coord::ranged1d::SegmentValue;
    use plotters::style::colors::colormaps::ViridisRGB;
    let rows: Vec<_> = u.directions.iter().take(LOAD_ROWS).collect();
    let (Some(&t0), Some(&t1)) = (u.times.first(), u.times.last()) else {
        return None;
    };
    if rows.is_empty() || t1 <= t0 {
        return None;
    }
    let peak = rows.iter().map(|d| d.peak).fold(0.0, f64::max);
    let of_rate = rows.iter().all(|d| d.rate.is_some());
    let share = |d: &crate::utilisation::DirectionLoad, r: f64| {
        let full = if of_rate {
            d.rate.unwrap_or(peak)
        } else {
            peak
        };
        (r / full.max(1.0)).clamp(0.0, 1.0)
    };
    let n = rows.len();
    let height = (140 + 22 * n as u32).max(260);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let (main, bar) = root.split_horizontally(SIZE.0 - 90);
        let caption = if of_rate {
            "link load: share of each link's rate".to_owned()
        } else {
            let (scale, unit) = rate_unit(peak);
            format!(
                "link load: rate against the busiest ({:.1} {unit})",
                peak / scale
            )
        };
        let labels: Vec<String> = rows
            .iter()
            .map(|d| format!("{} -> {}", d.from, d.to))
            .collect();
        let mut chart = ChartBuilder::on(&main)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(170)
            .build_cartesian_2d(t0..t1, (0..n).into_segmented())
            .ok()?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("seconds since the fabric was ready")
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                // Row 0 (the busiest) on top.
                SegmentValue::CenterOf(i) if *i < n => labels[n - 1 - i].clone(),
                _ => String::new(),
            })
            .draw()
            .ok()?;
        for (i, d) in rows.iter().enumerate() {
            let y = n - 1 - i;
            chart
                .draw_series(d.rates.iter().zip(u.times.windows(2)).map(|(&r, w)| {
                    let c = ViridisRGB::get_color(share(d, r));
                    Rectangle::new(
                        [
                            (w[0], SegmentValue::Exact(y)),
                            (w[1], SegmentValue::Exact(y + 1)),
                        ],
                        c.filled(),
                    )
                }))
                .ok()?;
        }
        for e in events
            .iter()
            .filter(|e| e.source == "timeline" && (t0..=t1).contains(&e.t))
        {
            chart
                .draw_series(DashedLineSeries::new(
                    [(e.t, SegmentValue::Exact(0)), (e.t, SegmentValue::Exact(n))],
                    5,
                    4,
                    RED.stroke_width(2),
                ))
                .ok()?;
            chart
                .draw_series(std::iter::once(Text::new(
                    e.event.clone(),
                    (e.t, SegmentValue::Exact(n)),
                    ("sans-serif", 12).into_font().color(&RED),
                )))
                .ok()?;
        }
        // The colour scale, 0 at the bottom.
        let mut scale = ChartBuilder::on(&bar)
            .margin_top(40)
            .margin_bottom(48)
            .margin_right(8)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..1.0, 0.0..100.0)
            .ok()?;
        scale
            .configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_labels(5)
            .y_label_style(("sans-serif", 12))
            .y_label_formatter(&|v| format!("{v:.0}%"))
            .draw()
            .ok()?;
        scale
            .draw_series((0..100).map(|k| {
                let c = ViridisRGB::get_color(f64::from(k) / 99.0);
                Rectangle::new([(0.0, f64::from(k)), (1.0, f64::from(k + 1))], c.filled())
            }))
            .ok()?;
        root.present().ok()?;
    }
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_lab::workload::{FlowReport, OpReport, State};

    fn report(name: &str) -> Report {
        Report {
            name: name.into(),
            kind: "tcp".into(),
            job: name.into(),
            seed: 1,
            state: State::Done,
            message: None,
            started: Some(1.0),
            ended: Some(2.0),
            flows: Vec::new(),
            ops: Vec::new(),
            series: Vec::new(),
            commands: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn throughput_draws_a_line_per_flow_and_marks_the_timeline() {
        let mut r = report("bulk");
        r.flows = (0..2)
            .map(|i| FlowReport {
                id: i,
                src: format!("h{i}"),
                dst: "h9".into(),
                series: vec![125_000_000; 10],
                ..FlowReport::default()
            })
            .collect();
        let events = [LoggedEvent {
            t: 1.5,
            unix: 0.0,
            source: "timeline".into(),
            kind: "fail".into(),
            event: "fail link a--b".into(),
            result: "ok".into(),
            about: turbonet_lab::events::About::link("a--b"),
            machine: None,
        }];
        let svg = throughput(&[r.clone()], &events).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        // 125 MB per 100 ms is 10 Gbit/s.
        assert!(
            svg.contains("Gbit/s") && svg.contains("bulk h0-&gt;h9"),
            "{svg}"
        );
        assert!(svg.contains("bulk h1-&gt;h9") && svg.contains("fail link a--b"));
        // Many flows become one line.
        r.flows = (0..20)
            .map(|i| FlowReport {
                id: i,
                series: vec![1000],
                ..FlowReport::default()
            })
            .collect();
        let svg = throughput(&[r], &[]).unwrap();
        assert!(svg.contains("bulk (20 flows)") && svg.contains("Mbit/s"));
        assert_eq!(throughput(&[report("idle")], &[]), None);
    }

    #[test]
    fn link_load_draws_a_row_per_busy_direction_and_its_scale() {
        use crate::utilisation::{DirectionLoad, Utilisation};
        let direction = |from: &str, rates: Vec<f64>| DirectionLoad {
            link: format!("{from}--s1"),
            from: from.into(),
            to: "s1".into(),
            rate: Some(100e6),
            bytes: 1,
            peak: rates.iter().copied().fold(0.0, f64::max),
            rates,
        };
        let u = Utilisation {
            times: vec![0.0, 0.1, 0.2, 0.3],
            directions: vec![
                direction("h1", vec![40e6, 100e6, 0.0]),
                direction("h2", vec![0.0, 5e6, 5e6]),
            ],
            fidelity: Vec::new(),
            machine: crate::utilisation::MachineLoad::default(),
        };
        let svg = link_load(&u, &[]).expect("a picture");
        assert!(svg.contains("share of each link"), "{svg}");
        assert!(svg.contains("h1 -&gt; s1") && svg.contains("h2 -&gt; s1"));
        // Six cells and the scale's hundred steps, at least.
        assert!(svg.matches("<rect").count() >= 106);
        assert!(link_load(&Utilisation::default(), &[]).is_none());
    }

    #[test]
    fn op_times_show_every_repetition_per_size() {
        let mut r = report("ring");
        r.ops = vec![OpReport {
            bytes: 1 << 20,
            times: vec![0.010, 0.012, 0.011],
            ..OpReport::default()
        }];
        let svg = op_times(&[r]).unwrap();
        assert!(svg.contains("ring 1MiB"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(op_times(&[report("x")]), None);
    }
}
