//! `edgeprof tune`: the adaptive tuner from the command line: a live search on this device with
//! progress on stderr and the result on stdout, an exhaustive measurement of the space into a
//! table, or replay of such a table comparing the guided search with random and grid search.

use crate::cli::{print_json, print_out, render};
use clap::Args;
use edgeprof::event::Event;
use edgeprof::models::InputShape;
use edgeprof::results::compare::Verdict;
use edgeprof::runner::sweep::SweepEvent;
use edgeprof::tune::costmodel::Db;
use edgeprof::tune::live::{TuneEvent, TuneReport};
use edgeprof::tune::prior;
use edgeprof::tune::replay::{self, Comparison, Table};
use edgeprof::tune::tuning::Overrides;
use edgeprof::tune::Objective;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Default)]
pub struct TuneArgs {
    /// Config whose [tune] section, [measure] settings and [frameworks] apply (default: the
    /// built-in defaults)
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Zoo model or ONNX file to tune (default: [tune] model, else the config's first model)
    #[arg(long)]
    model: Option<String>,
    /// Input as CxHxW (default: [tune] input, else the config's first)
    #[arg(long)]
    input: Option<InputShape>,
    /// An engine to search over; repeat for several (default: [tune] engines, else the
    /// config's)
    #[arg(long = "engine", value_name = "ENGINE")]
    engines: Vec<String>,
    /// Most trials
    #[arg(long)]
    budget: Option<usize>,
    /// What to minimise (default: [tune] objective, else latency)
    #[arg(long, value_enum)]
    objective: Option<Objective>,
    /// Reject candidates whose peak resident memory exceeds this (bytes, or with K, M, G)
    #[arg(long, value_parser = parse_bytes)]
    max_memory: Option<u64>,
    /// Thread counts to try, e.g. 1,2,4 (default: powers of two up to the cores here)
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::args::thread_count)]
    threads: Vec<usize>,
    /// Batch sizes to try, e.g. 1,4
    #[arg(long, value_delimiter = ',')]
    batch: Vec<usize>,
    /// Core sets to try: all, big, little, clusterN, one, or CPU lists like 0-3 (default:
    /// every set this machine offers)
    #[arg(long, value_delimiter = ',')]
    cores: Vec<String>,
    /// Seed of the search's random choices
    #[arg(long)]
    seed: Option<u64>,
    /// Trials in a row without a 1% gain that end the search (0: never)
    #[arg(long)]
    stall: Option<usize>,
    /// Rounds of re-measuring the default and the best in turns at the end (0: none)
    #[arg(long)]
    confirm: Option<usize>,
    /// Measure every candidate of the space (no search) and write table.json for --replay
    #[arg(long, conflicts_with = "replay")]
    exhaustive: bool,
    /// Write the best configuration as a config for `edgeprof run`
    #[arg(long, value_name = "FILE")]
    write_config: Option<PathBuf>,
    /// Parent folder of the results directory (default: the config's output.dir)
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Replay the searches against a measured table instead of this device
    #[arg(long, value_name = "TABLE")]
    replay: Option<PathBuf>,
    /// Seeds to replay each strategy with
    #[arg(long, default_value_t = 10, requires = "replay")]
    seeds: u64,
    /// How close to the table's best counts as found (0.05: within 5%)
    #[arg(long, default_value_t = 0.05, requires = "replay")]
    tolerance: f64,
    /// The measurement database the guided search's prior comes from and every trial is
    /// recorded in (default: this device's, in the cache directory; with --replay, no prior
    /// unless given)
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Search without the database's prior (trials are still recorded)
    #[arg(long)]
    no_prior: bool,
    /// Precisions to search, e.g. fp32,int8 (default: the config's matrix.precision, else
    /// fp32); each engine is tried in the ones it runs
    #[arg(long = "precision", value_delimiter = ',', value_enum)]
    precisions: Vec<crate::cli::args::ModelPrecisionArg>,
    /// The most top-1 agreement with fp32 a lower precision may lose, in percent (1% keeps
    /// only candidates that agree with fp32 on at least 99 % of the images)
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    max_top1_drop: Option<f64>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// `1%`, `0.5 %` or `2` (percent) as a fraction.
fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!(
            "{text:?} is not a percentage from 0 to 100 (e.g. 1%)"
        )),
    }
}

/// `512M`, `2G`, `1.5GiB` or plain bytes.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 512M, 2G or bytes)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown size unit {other:?}; use K, M or G")),
    };
    Ok((n * scale) as u64)
}

impl TuneArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            model: self.model.clone(),
            input: self.input,
            engines: self.engines.clone(),
            budget: self.budget,
            objective: self.objective,
            max_memory: self.max_memory,
            threads: self.threads.clone(),
            batch: self.batch.clone(),
            cores: self.cores.clone(),
            seed: self.seed,
            stall: self.stall,
            confirm: self.confirm,
            exhaustive: self.exhaustive,
            output: self.output.clone(),
            db: self.db.clone(),
            no_prior: self.no_prior,
            precisions: self.precisions.iter().map(|&p| p.into()).collect(),
            max_top1_drop: self.max_top1_drop,
        }
    }
}

pub fn run(args: TuneArgs) -> anyhow::Result<()> {
    if let Some(table) = &args.replay {
        return replay_command(&args, table);
    }
    let config = match &args.config {
        Some(file) => edgeprof::config::load(file)?,
        None => edgeprof::config::parse("", Path::new("edgeprof-tune.toml"))?,
    };
    let cancel = edgeprof::collect::stop::Cancel::new();
    crate::cli::sweep::install_stop_handlers(&cancel)?;
    let telemetry_root = std::env::var_os("EDGEPROF_TELEMETRY_ROOT")
        .map_or_else(|| PathBuf::from("/"), PathBuf::from);
    let unit = std::sync::Mutex::new(String::new());
    let show = |event: Event| {
        let Event::Tune(event) = event else { return };
        let Ok(mut unit) = unit.lock() else { return };
        match event {
            TuneEvent::Started {
                dir,
                title,
                unit: u,
                budget,
                candidates,
                skipped,
                prior,
            } => {
                for line in &skipped {
                    errln!("  left out: {line}");
                }
                errln!(
                    "tuning {title}: {candidates} candidates, {budget} trials at most{}; results \
                     in {}",
                    if args.exhaustive {
                        " (every candidate)"
                    } else {
                        ""
                    },
                    dir.display()
                );
                errln!("{prior}");
                *unit = u;
            }
            event => progress(event, &unit),
        }
    };
    let job = edgeprof::jobs::TuneJob {
        config,
        file: args.config.as_deref(),
        overrides: args.overrides(),
        write_config: args.write_config.as_deref(),
    };
    let tuned = edgeprof::jobs::tuning(job, &cancel, &telemetry_root, &show)?;
    let (report, dir) = (&tuned.report, &tuned.dir);
    if args.json {
        print_json(report)?;
    } else {
        print_out(&report_text(
            report,
            tuned.seconds,
            dir,
            tuned.written.as_deref(),
            args.exhaustive,
        ))?;
    }
    Ok(tuned.verdict()?)
}

fn fmt_cost(cost: Option<f64>, unit: &str) -> String {
    match cost {
        Some(c) if c >= 100.0 => format!("{c:.1} {unit}"),
        Some(c) => format!("{c:.3} {unit}"),
        None => "-".into(),
    }
}

/// One line per trial on stderr.
fn progress(event: TuneEvent, unit: &str) {
    match event {
        TuneEvent::Trial {
            n,
            budget,
            candidate,
            predicted,
        } => {
            let guess = predicted
                .map(|(c, sd)| {
                    format!(
                        " (predicted {} ±{:.0}%)",
                        fmt_cost(Some(c), unit),
                        sd * 100.0
                    )
                })
                .unwrap_or_default();
            errln!("trial {n}/{budget}: {}{guess} …", candidate.label());
        }
        TuneEvent::Measured { trial, .. } => match (&trial.cost, &trial.failure) {
            (Some(c), _) => errln!(
                "  measured {}; best so far {}",
                fmt_cost(Some(*c), unit),
                fmt_cost(trial.best_cost, unit)
            ),
            (None, Some(why)) => errln!("  failed: {why}"),
            (None, None) => errln!("  failed"),
        },
        TuneEvent::Confirm {
            round,
            rounds,
            which,
        } => errln!("re-measuring the {which} (round {round}/{rounds}) …"),
        TuneEvent::Sweep(SweepEvent::Done {
            record,
            retry: true,
            ..
        }) => errln!(
            "  attempt {} failed ({}); retrying",
            record.attempt,
            record.reason.as_deref().unwrap_or("no reason")
        ),
        TuneEvent::Sweep(SweepEvent::Warning(why)) => errln!("warning: {why}"),
        TuneEvent::Sweep(_) => {}
        // This command prints its own start line before and the whole report after.
        TuneEvent::Started { .. } | TuneEvent::Finished { .. } => {}
    }
}

/// The tuning result as text.
fn report_text(
    report: &TuneReport,
    seconds: f64,
    dir: &Path,
    written: Option<&Path>,
    exhaustive: bool,
) -> String {
    let unit = &report.unit;
    let mut out = format!(
        "tuned {} {} for {} over {} candidates: {} trial(s) in {} ({})\n\n",
        report.model,
        report.input,
        report.objective,
        report.space.len(),
        report.trace.trials.len(),
        render::duration(seconds),
        report.trace.stop
    );
    let rows: Vec<Vec<String>> = report
        .trace
        .trials
        .iter()
        .map(|t| {
            let c = &report.space[t.index];
            let mut label = c.label();
            if t.index == report.default {
                label.push_str("  (default)");
            }
            vec![
                t.n.to_string(),
                label,
                t.predicted
                    .map(|p| {
                        format!(
                            "{} ±{:.0}%",
                            fmt_cost(Some(p), unit),
                            t.predicted_sd.unwrap_or(0.0) * 100.0
                        )
                    })
                    .unwrap_or_else(|| "-".into()),
                match (&t.cost, &t.failure) {
                    (Some(c), _) => fmt_cost(Some(*c), unit),
                    (None, Some(why)) => {
                        format!("failed: {}", why.chars().take(60).collect::<String>())
                    }
                    _ => "failed".into(),
                },
                fmt_cost(t.best_cost, unit),
            ]
        })
        .collect();
    out.push_str(&render::table(
        &[
            "trial",
            "configuration",
            "predicted",
            "measured",
            "best so far",
        ],
        &[true, false, true, true, true],
        &rows,
    ));
    if report.trace.trials.len() >= 3 {
        out.push_str(&trace_chart(report));
    }
    out.push('\n');
    match (report.best, report.best_cost) {
        (Some(b), Some(cost)) => {
            let _ = writeln!(
                out,
                "best:    {}  {}",
                report.space[b].label(),
                fmt_cost(Some(cost), unit)
            );
            // A lower precision's cost in accuracy, beside the speed it buys.
            let agreement = report
                .trace
                .trials
                .iter()
                .position(|t| t.index == b)
                .and_then(|k| report.measured.get(k).copied().flatten())
                .and_then(|m| m.top1_agreement);
            if let Some(a) = agreement {
                let _ = writeln!(
                    out,
                    "         {}: top-1 agreement with fp32 {:.1} % (--max-top1-drop)",
                    report.space[b].precision,
                    100.0 * a
                );
            }
        }
        _ => out.push_str("best:    none: no candidate could be measured\n"),
    }
    let default = &report.space[report.default];
    match (report.default_cost, report.best_cost) {
        _ if report.best == Some(report.default) => {
            let _ = writeln!(
                out,
                "default: {}  {}  (the default is the best found: nothing to re-measure it \
                 against)",
                default.label(),
                fmt_cost(report.default_cost, unit)
            );
        }
        (Some(d), Some(b)) => {
            let _ = writeln!(
                out,
                "default: {}  {}  (the search's best is {:.2}× the default)",
                default.label(),
                fmt_cost(Some(d), unit),
                d / b
            );
        }
        _ if !exhaustive => {
            let _ = writeln!(out, "default: {}  not measured", default.label());
        }
        _ => {}
    }
    if let Some(c) = &report.confirmation {
        let spread = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if v.is_empty() {
                String::new()
            } else {
                format!(" (range {:.3}–{:.3})", lo, hi)
            }
        };
        let _ = writeln!(
            out,
            "re-measured in turns, {} round(s): default median {}{}, best median {}{}{}",
            c.default_costs.len().max(c.best_costs.len()),
            fmt_cost(c.default_median, unit),
            spread(&c.default_costs),
            fmt_cost(c.best_median, unit),
            spread(&c.best_costs),
            match (c.gain, c.gain_interval, c.verdict) {
                (Some(g), Some((low, high)), Some(v)) => format!(
                    " → gain {g:.2}× [{low:.2}, {high:.2}]: the best is {}",
                    match v {
                        Verdict::Faster => "faster than the default",
                        Verdict::Slower => "slower than the default",
                        Verdict::NoSignificantDifference
                        | Verdict::Unpaired
                        | Verdict::Withheld => "not significantly different from the default",
                    }
                ),
                (Some(g), _, _) => format!(" → gain {g:.2}×"),
                _ => String::new(),
            }
        );
    }
    if let (Some(r), Some(b)) = (report.recommended, report.best) {
        if r != b {
            let _ = writeln!(
                out,
                "recommendation: keep the default ({}): re-measured in turns it was faster than the search's best, whose figure was a lucky run",
                report.space[r].label()
            );
        }
    }
    match report.prediction_error {
        Some((median, mean, n)) => {
            let _ = writeln!(
                out,
                "cost model: |predicted − measured| / measured median {:.1}%, mean {:.1}%, over {n} trial(s) it chose",
                median * 100.0,
                mean * 100.0
            );
        }
        None if !exhaustive => out.push_str(
            "cost model: no predictions yet (the budget ended within the default and the space-filling trials)\n",
        ),
        None => {}
    }
    if let Some((median, mean, n)) = report.leave_one_out_error {
        let _ = writeln!(
            out,
            "cost model at the end, each trial left out in turn: median {:.1}%, mean {:.1}%, over {n} trial(s)",
            median * 100.0,
            mean * 100.0
        );
    }
    let _ = writeln!(
        out,
        "results: {} (tune.json{}, runs.jsonl, summary files)",
        dir.display(),
        if exhaustive { ", table.json" } else { "" }
    );
    if let Some(file) = written {
        let _ = writeln!(
            out,
            "recommended configuration written to {}; measure it with: edgeprof run {}",
            file.display(),
            file.display()
        );
    }
    out
}

/// The search trace: each trial's measured cost and the best so far, over trials.
fn trace_chart(report: &TuneReport) -> String {
    use textplots::{Chart, Plot, Shape};
    let measured: Vec<(f32, f32)> = report
        .trace
        .trials
        .iter()
        .filter_map(|t| Some((t.n as f32, t.cost? as f32)))
        .collect();
    let best: Vec<(f32, f32)> = report
        .trace
        .trials
        .iter()
        .filter_map(|t| Some((t.n as f32, t.best_cost? as f32)))
        .collect();
    if measured.is_empty() {
        return String::new();
    }
    let n = report.trace.trials.len() as f32;
    let mut chart = Chart::new(120, 40, 1.0, n.max(2.0));
    let (dots, steps) = (Shape::Points(&measured), Shape::Steps(&best));
    let chart = chart.lineplot(&dots).lineplot(&steps);
    chart.axis();
    chart.figures();
    let text = chart.to_string();
    format!(
        "\n{} per trial (dots: measured; steps: best so far)\n{text}",
        report.unit
    )
}

fn replay_command(args: &TuneArgs, path: &Path) -> anyhow::Result<()> {
    let table = Table::load(path)?;
    let objective = args.objective.unwrap_or(Objective::Latency);
    let n = table.rows.len();
    let budget = args.budget.unwrap_or((n / 4).max(1));
    // A replay judges a first tuning: the table's own model is left out of the prior.
    let prior = match (&args.db, args.no_prior) {
        (Some(path), false) => {
            let db = Db::open(path)?;
            for warning in db.warnings() {
                errln!("warning: {warning}");
            }
            Some(prior::build(
                &db,
                &table.model,
                &table.input,
                &table.space(),
                objective,
                false,
            ))
        }
        _ => None,
    };
    let comparison = replay::compare(
        &table,
        replay::Pick {
            objective,
            max_top1_drop: args
                .max_top1_drop
                .unwrap_or(edgeprof::tune::tuning::DEFAULT_MAX_TOP1_DROP),
        },
        budget,
        args.seeds.max(1),
        args.tolerance,
        edgeprof::config::Tune::default().initial,
        prior.as_ref(),
    )?;
    if args.json {
        return print_json(&comparison);
    }
    print_out(&comparison_text(&table, &comparison))
}

/// What the best costs in accuracy and buys in speed, where the table holds lower precisions:
/// its top-1 agreement with fp32 against the limit, its speed-up over the best fp32, and how
/// many measured configurations the limit left out.
fn accuracy_line(c: &Comparison) -> Option<String> {
    let floor = 100.0 * (1.0 - c.max_top1_drop);
    let mut parts = Vec::new();
    if c.best_precision != "fp32" && !c.best_precision.is_empty() {
        let agreement = c
            .best_top1_agreement
            .map_or_else(|| "-".to_string(), |a| format!("{:.1} %", 100.0 * a));
        let speedup = c
            .best_fp32
            .filter(|f| *f > 0.0 && c.best > 0.0)
            .map_or_else(String::new, |f| {
                format!(", {:.2}× the best fp32 at {f:.3}", f / c.best)
            });
        parts.push(format!(
            "{}: top-1 agreement with fp32 {agreement} (limit: at least {floor:.1} %){speedup}",
            c.best_precision
        ));
    }
    if c.beyond_accuracy_limit > 0 {
        parts.push(format!(
            "{} lower-precision configuration(s) left out: top-1 agreement with fp32 below \
             {floor:.1} % (--max-top1-drop)",
            c.beyond_accuracy_limit
        ));
    }
    (!parts.is_empty()).then(|| parts.join("\n"))
}

fn comparison_text(table: &Table, c: &Comparison) -> String {
    let mut out = format!(
        "replay of {} {} ({} configurations measured on {} at {}), objective {}\n\
         best in the table: {} at {:.3} {}\n\
         budget {} trial(s) ({:.0}% of the table); found = within {:.0}% of the best\n\n",
        table.model,
        table.input,
        c.configurations,
        table.machine,
        table.measured_at,
        c.objective,
        c.best_label,
        c.best,
        c.objective.unit(),
        c.budget,
        100.0 * c.budget as f64 / c.configurations.max(1) as f64,
        c.tolerance * 100.0
    );
    if let Some(line) = accuracy_line(c) {
        let _ = writeln!(out, "{line}\n");
    }
    if let Some(p) = &c.prior {
        let _ = writeln!(
            out,
            "{p} (the table's own model left out: a replay judges a first tuning)\n"
        );
    }
    let seeds = c.strategies.first().map_or(0, |s| s.seeds.len());
    let rows: Vec<Vec<String>> = c
        .strategies
        .iter()
        .map(|s| {
            let hits: Vec<f64> = s
                .seeds
                .iter()
                .filter_map(|r| r.trials_to_hit.map(|t| t as f64))
                .collect();
            vec![
                s.name(),
                format!("{}/{}", s.hits, s.seeds.len()),
                format!("{:.3}", s.median_ratio),
                edgeprof::stats::median(&hits)
                    .map(|m| format!("{m:.1}"))
                    .unwrap_or_else(|| "-".into()),
                s.median_prediction_error
                    .map(|e| format!("{:.1}%", e * 100.0))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out.push_str(&render::table(
        &[
            "strategy",
            "found",
            "median best/optimum",
            "median trials to find",
            "model error (median)",
        ],
        &[false, true, true, true, true],
        &rows,
    ));
    let _ = writeln!(out, "\nper seed: best found / optimum (trials to find)");
    let mut per_seed: Vec<Vec<String>> = Vec::new();
    for k in 0..seeds {
        let mut row = vec![k.to_string()];
        for s in &c.strategies {
            let r = &s.seeds[k];
            row.push(format!(
                "{:.3} ({})",
                r.ratio,
                r.trials_to_hit
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "-".into())
            ));
        }
        per_seed.push(row);
    }
    let mut header = vec!["seed".to_string()];
    header.extend(c.strategies.iter().map(|s| s.name()));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let right = vec![true; header.len()];
    out.push_str(&render::table(&header, &right, &per_seed));
    out
}
