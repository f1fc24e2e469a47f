//! Output: aligned text tables, JSON, and how times and missing values are
//! written in them.

use std::fmt::{self, Write as _};

use serde::Serialize;

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left.
    Right,
}

/// A text table: a header row and rows of cells, columns separated by two
/// spaces and as wide as their widest cell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Self {
            headers: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are blank, extra cells dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The number of rows below the header.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Reports whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let last = self.headers.len().saturating_sub(1);
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i].saturating_sub(cell.chars().count());
                match self.align[i] {
                    Align::Left if i == last => line.push_str(cell),
                    Align::Left => {
                        line.push_str(cell);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    }
                }
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// A command's result: printable as text tables or as JSON.
pub trait Report: Serialize {
    /// The result as text, one or more tables.
    fn text(&self) -> String;
}

/// `report` as JSON (pretty, with a final newline) when `json`, else as
/// text.
pub fn render(report: &impl Report, json: bool) -> String {
    if json {
        let mut out = serde_json::to_string_pretty(report)
            .unwrap_or_else(|e| format!("{{\"error\":\"cannot render JSON: {e}\"}}"));
        out.push('\n');
        out
    } else {
        report.text()
    }
}

/// A time in ms since the epoch as UTC (`2024-05-01 12:00:00.123`); `-`
/// for 0 or less (no time known).
pub fn time_text(ms: i64) -> String {
    if ms <= 0 {
        return "-".to_owned();
    }
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        None => ms.to_string(),
    }
}

/// The value, or `-` when absent.
pub fn or_dash(value: Option<impl fmt::Display>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Appends `text` and a blank line when `out` already holds something.
pub fn section(out: &mut String, title: &str, body: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    if !title.is_empty() {
        let _ = writeln!(out, "{title}");
    }
    out.push_str(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_their_widest_cell() {
        let mut t = Table::new(&[
            ("Broker", Align::Left),
            ("Queue", Align::Right),
            ("Note", Align::Left),
        ]);
        t.row(vec!["broker-a".into(), "0".into(), "x".into()]);
        t.row(vec!["b".into(), "12".into()]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.to_string(),
            "Broker    Queue  Note\n\
             broker-a      0  x\n\
             b            12\n"
        );
        assert!(Table::new(&[("A", Align::Left)]).is_empty());
    }

    #[test]
    fn times_are_utc_with_milliseconds() {
        assert_eq!(time_text(0), "-");
        assert_eq!(time_text(-1), "-");
        assert_eq!(time_text(1_714_564_800_123), "2024-05-01 12:00:00.123");
    }

    #[test]
    fn reports_render_as_text_or_json() {
        #[derive(Serialize)]
        struct R {
            n: i32,
        }
        impl Report for R {
            fn text(&self) -> String {
                format!("n is {}\n", self.n)
            }
        }
        assert_eq!(render(&R { n: 3 }, false), "n is 3\n");
        let json: serde_json::Value =
            serde_json::from_str(&render(&R { n: 3 }, true)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json["n"], 3);
        assert_eq!(or_dash(None::<i32>), "-");
        assert_eq!(or_dash(Some(2.5)), "2.5");
    }
}
