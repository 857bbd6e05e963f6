//! The Results tab's state: a stored sweep's summary rows and their order.

use super::*;

/// The Results tab's state: a stored sweep's rows, sorted.
#[derive(Debug, Clone, Default)]
pub struct ResultsView {
    pub dir: Option<PathBuf>,
    /// Every condition of the directory.
    pub all: Vec<Row>,
    /// The conditions shown: `all` less the hidden, sorted.
    pub rows: Vec<Row>,
    /// Leave skipped (and not run) conditions out (h).
    pub hide_skipped: bool,
    /// Show only conditions whose name holds this (/).
    pub filter: String,
    /// The selected condition's every figure in place of the charts (Enter).
    pub detail: bool,
    /// The first line of the detail shown (PgUp/PgDn; back to the top for another condition).
    pub detail_scroll: u16,
    /// The last lines a failed condition's worker wrote on stderr, by condition.
    pub stderr_tails: std::collections::HashMap<String, String>,
    pub error: Option<String>,
    pub sort: usize,
    pub descending: bool,
    pub selected: usize,
    /// Over the sweep's time: worker CPU %, machine CPU %, GPU %.
    pub utilisation: Vec<(String, Vec<(f64, f64)>)>,
    /// Each condition's telemetry curves (GPU load, GPU memory, machine CPU) when the directory
    /// has GPU figures: (what, unit, points over the condition's own time), by condition.
    pub curves: std::collections::HashMap<String, Vec<CurveOf>>,
    /// Each condition's timed iterations by repeat (those its statistics keep), for comparing.
    pub latencies: std::collections::HashMap<String, Vec<Vec<f64>>>,
    /// Each lower-precision condition's accuracy against its fp32 twin, by condition.
    pub accuracy: std::collections::HashMap<String, edgeprof::results::accuracy::Accuracy>,
    /// The condition marked as the baseline (b), and every other condition against it.
    pub baseline: Option<String>,
    pub versus: std::collections::HashMap<String, edgeprof::results::compare::Compared>,
}

/// One telemetry curve of a condition: what it shows, its unit, its points over the condition's
/// own time.
pub type CurveOf = (&'static str, &'static str, Vec<(f64, f64)>);

/// Bootstrap resamples per comparison in the Results tab (fewer than `compare`'s, so that
/// marking a baseline among many conditions stays quick).
const TUI_ROUNDS: usize = 500;

/// The sortable columns of the results table.
pub const RESULT_COLUMNS: [&str; 8] = [
    "condition",
    "status",
    "median ms",
    "mean ms",
    "p99 ms",
    "inf/s",
    "peak RSS",
    "CPU %",
];

/// What the status column shows: the verdict of a condition that ran (clean, noisy, disturbed,
/// throttled), else its status (failed, skipped, not run).
pub fn status_word(r: &Row) -> &str {
    match (r.status.as_str(), r.verdict.as_deref()) {
        ("ok", Some(verdict)) => verdict,
        (status, _) => status,
    }
}

impl ResultsView {
    /// Marks the selected condition as the baseline (again: unmarks it) and compares every
    /// other condition with results against it. Says what it did.
    pub fn toggle_baseline(&mut self) -> String {
        let Some(row) = self.rows.get(self.selected) else {
            return "no condition selected".to_string();
        };
        let id = row.id.clone();
        if self.baseline.as_deref() == Some(id.as_str()) {
            self.baseline = None;
            self.versus.clear();
            return "baseline cleared".to_string();
        }
        let Some(base) = self.latencies.get(&id) else {
            return format!("{id} has no timed iterations to compare with");
        };
        let threshold = 0.05;
        self.versus = self
            .latencies
            .iter()
            .filter(|(other, _)| **other != id)
            .map(|(other, l)| {
                (
                    other.clone(),
                    edgeprof::results::compare::against(
                        (&id, base),
                        (other, l),
                        threshold,
                        TUI_ROUNDS,
                    ),
                )
            })
            .collect();
        self.baseline = Some(id.clone());
        let count = |v| self.versus.values().filter(|c| c.verdict == v).count();
        use edgeprof::results::compare::Verdict;
        format!(
            "baseline {id}: {} slower, {} faster, {} without a significant difference at 5 %",
            count(Verdict::Slower),
            count(Verdict::Faster),
            count(Verdict::NoSignificantDifference)
        )
    }

    /// What the table shows, in words: how many of the conditions, and what hides the rest.
    pub fn shown(&self) -> String {
        let mut why = Vec::new();
        if !self.filter.is_empty() {
            why.push(format!("names holding \"{}\"", self.filter));
        }
        if self.hide_skipped {
            why.push("skipped ones hidden (h shows them)".to_string());
        }
        if why.is_empty() {
            format!("all {} condition(s) shown", self.all.len())
        } else {
            format!(
                "{} of {} condition(s) shown: {}",
                self.rows.len(),
                self.all.len(),
                why.join(", ")
            )
        }
    }

    /// Shows the conditions that pass the filter (and are not hidden), sorted, keeping the
    /// selected one selected when it is still shown.
    pub fn refresh_rows(&mut self) {
        let was = self.rows.get(self.selected).map(|r| r.id.clone());
        let filter = self.filter.to_lowercase();
        self.rows = self
            .all
            .iter()
            .filter(|r| !(self.hide_skipped && matches!(r.status.as_str(), "skipped" | "not run")))
            .filter(|r| filter.is_empty() || r.id.to_lowercase().contains(&filter))
            .cloned()
            .collect();
        self.sort_rows();
        self.selected = was
            .and_then(|id| self.rows.iter().position(|r| r.id == id))
            .unwrap_or(0)
            .min(self.rows.len().saturating_sub(1));
    }

    /// Sorts the shown rows by the chosen column. Rows without the figure (skipped, failed)
    /// come last either way.
    pub fn sort_rows(&mut self) {
        let key = |r: &Row| -> Option<f64> {
            match self.sort {
                2 => r.median_ms,
                3 => r.mean_ms,
                4 => r.p99_ms,
                5 => r.inferences_per_s,
                6 => r.peak_rss_bytes.map(|b| b as f64),
                7 => r.cpu_mean_pct,
                _ => None,
            }
        };
        let (sort, descending) = (self.sort, self.descending);
        let directed = |order: std::cmp::Ordering| {
            if descending {
                order.reverse()
            } else {
                order
            }
        };
        self.rows.sort_by(|a, b| match sort {
            0 => directed(a.id.cmp(&b.id)),
            1 => directed(status_word(a).cmp(status_word(b))).then(a.id.cmp(&b.id)),
            _ => match (key(a), key(b)) {
                (Some(x), Some(y)) => directed(x.total_cmp(&y)),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => a.id.cmp(&b.id),
            },
        });
    }
}
