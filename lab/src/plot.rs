//! SVG plots of a run, drawn with `plotters`: throughput over time (a line
//! per flow, or per workload when it has many, and one per collective job)
//! with the timeline's events marked, and the distribution of a collective's
//! operation times per size. Every chart is a string of SVG: the caller
//! writes it where it wants.

use plotters::prelude::*;

use crate::events::LoggedEvent;
use crate::workload::{Report, SERIES_STEP};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{FlowReport, OpReport, State};

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
