//! `edgeprof compare BASELINE CANDIDATE` (or `BASELINE --within AXIS=VALUE`, conditions of one
//! directory against each other): two results directories, condition by condition, with
//! the ratio of medians, its bootstrap interval and a verdict; as a table, Markdown or JSON. The
//! comparison itself is `edgeprof::results::compare`.

use super::{print_json, print_out, BadInput};
use edgeprof::results::compare::{self, Compared, Comparison, Verdict};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(clap::Args, Debug)]
pub(super) struct CompareArgs {
    /// The baseline: a results directory written by `edgeprof run`
    pub(super) baseline: PathBuf,
    /// The candidate, compared against the baseline (without it, --within compares conditions
    /// of the baseline directory)
    #[arg(required_unless_present = "within")]
    pub(super) candidate: Option<PathBuf>,
    /// Within the one directory: the conditions with AXIS = VALUE against those that differ
    /// from them only on AXIS (engine, model, input, batch, threads, device, cores, precision),
    /// e.g. `threads=1`, `engine=tract` or `precision=fp32`
    #[arg(long, value_name = "AXIS=VALUE", conflicts_with = "candidate")]
    pub(super) within: Option<String>,
    /// Differences of medians under this fraction are not significant
    #[arg(long, default_value_t = compare::THRESHOLD, value_parser = threshold)]
    pub(super) threshold: f64,
    /// Print Markdown instead of the table
    #[arg(long, conflicts_with = "json")]
    pub(super) markdown: bool,
    /// Print the result as JSON instead of text
    #[arg(long)]
    pub(super) json: bool,
    /// Exit with 1 when any condition is slower (for CI)
    #[arg(long)]
    pub(super) fail_on_regression: bool,
    /// Give faster/slower verdicts although the two runs were measured in different board
    /// states (power mode, jetson_clocks, governor, clock limits); without it they are withheld
    #[arg(long)]
    pub(super) across_states: bool,
}

fn threshold(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if (0.0..1.0).contains(&t) => Ok(t),
        _ => Err(format!(
            "{text:?} is not a fraction from 0 to 1 (e.g. 0.05)"
        )),
    }
}

/// `--fail-on-regression` found slower conditions (exit code 1).
#[derive(Debug, Error)]
#[error("{slower} of {paired} condition(s) are slower than the baseline")]
pub struct Regressed {
    pub slower: usize,
    pub paired: usize,
}

fn load(dir: &Path) -> anyhow::Result<edgeprof::results::Stored> {
    edgeprof::results::load(dir).map_err(|e| {
        anyhow::Error::new(BadInput(format!(
            "{}: not a results directory of edgeprof run ({e:#})",
            dir.display()
        )))
    })
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// `v` to three significant digits (`0.421`, `3.23`, `61.5`, `888`).
fn sig3(v: f64) -> String {
    let decimals = match v.abs() {
        a if a < 1.0 => 3,
        a if a < 10.0 => 2,
        a if a < 100.0 => 1,
        _ => 0,
    };
    format!("{v:.decimals$}")
}

fn ratio(c: &Compared) -> String {
    match (c.ratio, c.low, c.high) {
        (Some(r), Some(l), Some(h)) => format!("{} [{}, {}]", sig3(r), sig3(l), sig3(h)),
        _ => "-".into(),
    }
}

/// The condition compared, its baseline's and candidate's ids in one: the parts where they
/// differ as `baseline→candidate` (`tract/mobilenet_v2/3x32x32/b1/t0→t1/cpu`).
fn name(c: &Compared) -> String {
    match (&c.baseline, &c.candidate) {
        (Some(a), Some(b)) if a != b => {
            let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('/').collect(), b.split('/').collect());
            if pa.len() != pb.len() {
                return format!("{a} → {b}");
            }
            pa.iter()
                .zip(&pb)
                .map(|(x, y)| {
                    if x == y {
                        x.to_string()
                    } else {
                        format!("{x}→{y}")
                    }
                })
                .collect::<Vec<_>>()
                .join("/")
        }
        (Some(a), _) => a.clone(),
        (None, Some(b)) => b.clone(),
        (None, None) => String::new(),
    }
}

const HEADER: [&str; 5] = [
    "condition",
    "baseline ms",
    "candidate ms",
    "ratio [95 % interval]",
    "verdict",
];

fn cells(c: &Compared) -> Vec<String> {
    vec![
        name(c),
        ms(c.baseline_median_ms),
        ms(c.candidate_median_ms),
        ratio(c),
        c.verdict.words().to_string(),
    ]
}

fn totals(c: &Comparison) -> String {
    let withheld = c.count(Verdict::Withheld);
    format!(
        "{} slower, {} faster, {} without a significant difference at {:.0} %, {} not in both{}\n",
        c.count(Verdict::Slower),
        c.count(Verdict::Faster),
        c.count(Verdict::NoSignificantDifference),
        c.threshold * 100.0,
        c.count(Verdict::Unpaired),
        if withheld > 0 {
            format!(", {withheld} withheld (different board states; --across-states judges them)")
        } else {
            String::new()
        }
    )
}

/// The boards' states, where they differed, above the table.
fn states(c: &Comparison) -> String {
    if c.states.is_empty() {
        return String::new();
    }
    format!(
        "The two runs were measured in different board states (A: the baseline, B: the \
         candidate):\n{}\n\n",
        c.states
            .iter()
            .map(|d| format!("  {d}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

fn markdown(c: &Comparison) -> String {
    let mut out = format!(
        "# {} against {}\n\nMedians of every timed iteration; ratio = candidate / baseline, \
         with its 95 % bootstrap interval.\n\n| {} |\n|---|--:|--:|--:|---|\n",
        c.candidate,
        c.baseline,
        HEADER.join(" | ")
    );
    for row in &c.conditions {
        out.push_str(&format!("| {} |\n", cells(row).join(" | ")));
    }
    out.push('\n');
    out.push_str(&totals(c));
    out
}

pub(super) fn run(args: CompareArgs) -> anyhow::Result<()> {
    let baseline = load(&args.baseline)?;
    let comparison = match (&args.candidate, &args.within) {
        (Some(candidate), _) => compare::compare(&baseline, &load(candidate)?, args.threshold),
        (None, Some(within)) => {
            let bad = || {
                BadInput(format!(
                    "--within {within:?}: give AXIS=VALUE with AXIS one of {}",
                    compare::AXES.join(", ")
                ))
            };
            let (axis, value) = within.split_once('=').ok_or_else(bad)?;
            let c = compare::within(&baseline, axis.trim(), value.trim(), args.threshold)
                .ok_or_else(bad)?;
            if c.conditions.is_empty() {
                anyhow::bail!(BadInput(format!(
                    "{}: no condition with {} = {} has a counterpart that differs only in {}",
                    args.baseline.display(),
                    axis.trim(),
                    value.trim(),
                    axis.trim()
                )));
            }
            c
        }
        (None, None) => anyhow::bail!(BadInput(
            "give a candidate directory, or --within AXIS=VALUE".into()
        )),
    };
    let mut comparison = comparison;
    if !args.across_states {
        comparison.withhold_across_states();
    }
    if args.json {
        print_json(&comparison)?;
    } else if args.markdown {
        super::print_raw(&format!("{}{}", states(&comparison), markdown(&comparison)))?;
    } else {
        let rows: Vec<Vec<String>> = comparison.conditions.iter().map(cells).collect();
        // The verdict and the ratio are the point; the medians go first on a narrow terminal.
        let fit = edgeprof::text::Fit {
            keep: &[0, 3],
            whole: &[4],
            names: Some("condition"),
        };
        let table =
            edgeprof::text::table_fit(&HEADER, &[false, true, true, true, false], &rows, &fit);
        print_out(&format!(
            "{}{table}\n{}",
            states(&comparison),
            totals(&comparison)
        ))?;
    }
    let slower = comparison.count(Verdict::Slower);
    if args.fail_on_regression && slower > 0 {
        anyhow::bail!(Regressed {
            slower,
            paired: comparison.conditions.len() - comparison.count(Verdict::Unpaired),
        });
    }
    Ok(())
}
