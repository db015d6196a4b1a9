//! The harness's results: figures with their same-run baselines and targets.

use serde::Serialize;

/// One measured figure.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    /// What was measured.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Its unit (`µs`, `ms`, `MB/s`, `cmd/s`, `MiB`).
    pub unit: String,
    /// The baseline measured in the same run, if this figure has one.
    pub baseline: Option<Baseline>,
    /// The target, in words (for example `p50 <= 3x baseline`).
    pub target: Option<String>,
    /// Whether the target was met.
    pub met: Option<bool>,
}

/// A same-run baseline.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    /// What it is.
    pub name: String,
    /// Its value, in the figure's unit.
    pub value: f64,
    /// `value / baseline` (for a time) or `baseline / value` inverted for a
    /// rate, as the figure's `ratio_meaning` says.
    pub ratio: f64,
}

/// Everything one run of the harness measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The figures, in the order they were measured.
    pub figures: Vec<Figure>,
    /// Facts about the run (limits, counts).
    pub notes: Vec<String>,
}

impl Report {
    pub(crate) fn add(&mut self, figure: Figure) {
        self.figures.push(figure);
    }

    /// The report as an aligned text table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "{:<52} {:>14} {:>38} {:>8}  {}\n",
            "figure", "value", "baseline (same run)", "ratio", "target"
        ));
        for f in &self.figures {
            let value = format!("{:.2} {}", f.value, f.unit);
            let (baseline, ratio) = match &f.baseline {
                Some(b) => (
                    format!("{} {:.2} {}", b.name, b.value, f.unit),
                    format!("{:.2}x", b.ratio),
                ),
                None => (String::new(), String::new()),
            };
            let target = match (&f.target, f.met) {
                (Some(t), Some(true)) => format!("{t} (met)"),
                (Some(t), Some(false)) => format!("{t} (NOT met)"),
                (Some(t), None) => t.clone(),
                (None, _) => String::new(),
            };
            out.push_str(&format!(
                "{:<52} {value:>14} {baseline:>38} {ratio:>8}  {target}\n",
                f.name
            ));
        }
        for note in &self.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        out
    }
}

/// A time figure (lower is better) with an optional baseline and a bound on
/// the ratio to it.
pub(crate) fn time(
    name: &str,
    value_us: f64,
    baseline: Option<(&str, f64)>,
    target: Option<(String, bool)>,
) -> Figure {
    figure(
        name,
        value_us,
        "µs",
        baseline.map(|(n, b)| (n, b, value_us / b)),
        target,
    )
}

/// A rate figure (higher is better): the ratio is value / baseline.
pub(crate) fn rate(
    name: &str,
    value: f64,
    unit: &str,
    baseline: Option<(&str, f64)>,
    target: Option<(String, bool)>,
) -> Figure {
    figure(
        name,
        value,
        unit,
        baseline.map(|(n, b)| (n, b, value / b)),
        target,
    )
}

pub(crate) fn figure(
    name: &str,
    value: f64,
    unit: &str,
    baseline: Option<(&str, f64, f64)>,
    target: Option<(String, bool)>,
) -> Figure {
    Figure {
        name: name.to_owned(),
        value,
        unit: unit.to_owned(),
        baseline: baseline.map(|(n, v, ratio)| Baseline {
            name: n.to_owned(),
            value: v,
            ratio,
        }),
        met: target.as_ref().map(|(_, met)| *met),
        target: target.map(|(t, _)| t),
    }
}
