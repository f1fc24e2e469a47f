//! The overload experiment's chart: a PNG with two panels over the recorded
//! seconds, one line per run: the 99th percentile latency of the sends
//! accepted in each second (top) and the busy answers of each second
//! (bottom). Only the recorded seconds are drawn: the responses that
//! arrive after the end (to requests of the last second) make a partial
//! second that would look like a drop.
//!
//! Drawn with `plotters`' bitmap backend and no system font library: text
//! is rendered with `ab_glyph` from a TrueType font read at run time
//! ([`FONT_ENV`], else the first of [`FONT_PATHS`] that exists). Without a
//! font the chart is still drawn, lines and axes only, and [`draw`] says so.

use std::{path::Path, sync::OnceLock};

use anyhow::{anyhow, Result};
use plotters::{
    prelude::*,
    style::{register_font, FontStyle},
};

use crate::overload::Overload;

/// Environment variable naming a TrueType font file for the chart's text.
pub const FONT_ENV: &str = "SLUICE_CHART_FONT";

/// Font files tried, in order, when [`FONT_ENV`] is not set.
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// Font family name the chart's text uses.
const FAMILY: &str = "sans-serif";

/// Chart size in pixels.
const SIZE: (u32, u32) = (1200, 800);

/// Whether text could be drawn, with the font file used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// Titles, axis labels and the legend were drawn with this font.
    Drawn(String),
    /// No font was found: lines and axes only.
    NoFont,
}

/// Draws the chart of `overload` into the PNG file `path`.
///
/// # Errors
/// The file cannot be written.
pub fn draw(overload: &Overload, path: &Path) -> Result<Text> {
    let text = font();
    let labels = matches!(text, Text::Drawn(_));
    let fail = |e: &dyn std::fmt::Display| anyhow!("draw the chart {}: {e}", path.display());
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let (top, bottom) = root.split_vertically(SIZE.1 / 2);
    let recorded = |r: &crate::overload::OverloadRun| {
        let last = r.report.duration_s.ceil();
        r.report
            .series
            .iter()
            .filter(move |s| s.t as f64 <= last)
            .cloned()
            .collect::<Vec<_>>()
    };
    let series: Vec<_> = overload.runs.iter().map(recorded).collect();
    let seconds = series.iter().map(Vec::len).max().unwrap_or(0).max(1) as f64;
    let latency: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            s.iter()
                .filter_map(|s| Some((s.t as f64, s.ok_p99_ms?)))
                .collect()
        })
        .collect();
    let busy: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| s.iter().map(|s| (s.t as f64, s.busy as f64)).collect())
        .collect();
    let limit = overload.limit_ms as f64;
    panel(
        &top,
        labels,
        &format!(
            "p99 latency of accepted sends per second (ms); dashed: {} ms wait limit",
            overload.limit_ms
        ),
        seconds,
        &latency,
        Some(limit),
        overload,
    )
    .map_err(|e| fail(&e))?;
    panel(
        &bottom,
        labels,
        "busy answers per second",
        seconds,
        &busy,
        None,
        overload,
    )
    .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(text)
}

/// One panel: a line per run over the seconds, and optionally a dashed
/// horizontal line at `mark`.
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    labels: bool,
    title: &str,
    seconds: f64,
    lines: &[Vec<(f64, f64)>],
    mark: Option<f64>,
    overload: &Overload,
) -> Result<()> {
    let highest = lines
        .iter()
        .flatten()
        .map(|(_, y)| *y)
        .chain(mark)
        .fold(0.0_f64, f64::max);
    let y_top = if highest > 0.0 { highest * 1.1 } else { 1.0 };
    let mut builder = ChartBuilder::on(area);
    builder.margin(12);
    if labels {
        builder
            .caption(title, (FAMILY, 20))
            .x_label_area_size(36)
            .y_label_area_size(70);
    }
    let mut chart = builder
        .build_cartesian_2d(0.0..seconds + 1.0, 0.0..y_top)
        .map_err(|e| anyhow!("{e}"))?;
    let mut mesh = chart.configure_mesh();
    if labels {
        mesh.x_desc("seconds after warm-up")
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 14));
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| anyhow!("{e}"))?;
    if let Some(y) = mark {
        let dashed = DashedLineSeries::new(
            [(0.0, y), (seconds + 1.0, y)],
            6,
            4,
            BLACK.mix(0.6).stroke_width(1),
        );
        chart.draw_series(dashed).map_err(|e| anyhow!("{e}"))?;
    }
    for (i, (points, run)) in lines.iter().zip(&overload.runs).enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let series = chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?;
        if labels {
            series.label(run.label.clone()).legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
    }
    if labels {
        chart
            .configure_series_labels()
            .label_font((FAMILY, 14))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

/// Finds and registers the chart font once.
fn font() -> Text {
    static FONT: OnceLock<Text> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates = std::env::var(FONT_ENV)
            .ok()
            .into_iter()
            .chain(FONT_PATHS.iter().map(|p| (*p).to_owned()));
        for path in candidates {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            // Registered fonts must live for the whole program; one font,
            // read once.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
                return Text::Drawn(path);
            }
        }
        Text::NoFont
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        config::{Config, Mode},
        outcome::{Busy, Outcome},
        report::Recorder,
    };

    #[test]
    fn the_chart_is_a_png_file() -> Result<()> {
        let mut rec = Recorder::new()?;
        for t in 1..=5 {
            for i in 0..50 {
                rec.record_in(t, &Outcome::Ok, Duration::from_millis(i * 4));
            }
            let busy = Outcome::Busy(Busy {
                tag: "EARLY_REJECT".into(),
                period_in_queue_ms: None,
                retry_after_ms: None,
            });
            rec.record_in(t, &busy, Duration::from_micros(300));
        }
        let mut config = Config::new("b:1");
        config.duration = Duration::from_secs(5);
        let closed = rec.report(&config, Mode::Closed { in_flight: 8 });
        let open = rec.report(
            &config,
            Mode::Open {
                rate_per_sec: 100.0,
                max_outstanding: 100,
            },
        );
        let overload = Overload::new(
            "test".into(),
            200,
            closed,
            vec![("a".into(), open.clone()), ("b".into(), open)],
        )?;
        let dir = std::env::temp_dir().join(format!("sluice-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("overload.png");
        let drawn = draw(&overload, &path);
        let bytes = std::fs::read(&path);
        std::fs::remove_dir_all(&dir)?;
        drawn?;
        let bytes = bytes?;
        assert!(bytes.len() > 1000, "{} bytes", bytes.len());
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        Ok(())
    }
}
