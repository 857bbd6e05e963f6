//! The Results tab's state: a stored sweep's summary rows and their order.

use super::*;

/// The Results tab's state: a stored sweep's rows, sorted.
#[derive(Debug, Clone, Default)]
pub struct ResultsView {
    pub dir: Option<PathBuf>,
    pub rows: Vec<Row>,
    pub error: Option<String>,
    pub sort: usize,
    pub descending: bool,
    pub selected: usize,
    /// Over the sweep's time: worker CPU %, machine CPU %, GPU %.
    pub utilisation: Vec<(String, Vec<(f64, f64)>)>,
    /// Each condition's timed iterations by repeat (those its statistics keep), for comparing.
    pub latencies: std::collections::HashMap<String, Vec<Vec<f64>>>,
    /// The condition marked as the baseline (b), and every other condition against it.
    pub baseline: Option<String>,
    pub versus: std::collections::HashMap<String, edgeprof::results::compare::Compared>,
}

/// Bootstrap resamples per comparison in the Results tab (fewer than `compare`'s, so that
/// marking a baseline among many conditions stays quick).
const TUI_ROUNDS: usize = 500;

/// The sortable columns of the results table.
pub const RESULT_COLUMNS: [&str; 7] = [
    "condition",
    "status",
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

    pub fn sort_rows(&mut self) {
        let key = |r: &Row| -> f64 {
            match self.sort {
                2 => r.mean_ms.unwrap_or(f64::INFINITY),
                3 => r.p99_ms.unwrap_or(f64::INFINITY),
                4 => r.inferences_per_s.unwrap_or(-1.0),
                5 => r.peak_rss_bytes.map_or(-1.0, |b| b as f64),
                6 => r.cpu_mean_pct.unwrap_or(-1.0),
                _ => 0.0,
            }
        };
        let sort = self.sort;
        self.rows.sort_by(|a, b| {
            let order = match sort {
                0 => a.id.cmp(&b.id),
                1 => status_word(a).cmp(status_word(b)).then(a.id.cmp(&b.id)),
                _ => key(a).total_cmp(&key(b)),
            };
            if self.descending {
                order.reverse()
            } else {
                order
            }
        });
    }
}
