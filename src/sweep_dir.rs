//! A sweep's life in its results directory, shared by both front-ends: a new directory with
//! its manifest, reopening an interrupted one, and the summaries and charts written when it ends.
//! [`crate::jobs`] runs whole jobs (a run, a resumption, a tuning) from start to end with their
//! events.

use crate::config::{self, Config};
use crate::error::Context;
use crate::lockfile::{LockError, LockFile};
use crate::report;
use crate::results::{self, summary, Manifest, Stored, SweepStatus};
use crate::runner::matrix::{self, Condition, Plan};
use crate::runner::sweep::SweepOutcome;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::error::BadInput;

/// A results directory that did not exist before, under `parent`. Creating the last component
/// with `mkdir` (not "exists? then create") makes the choice atomic: two runs started in the
/// same second get two directories, never one.
pub fn new_dir(parent: &Path, name: &str) -> crate::error::Result<PathBuf> {
    let base = results::dir_name(name);
    std::fs::create_dir_all(parent).map_err(|e| {
        BadInput(format!(
            "cannot create the output directory {}: {e}",
            parent.display()
        ))
    })?;
    for n in 1..1000 {
        let candidate = if n == 1 {
            parent.join(&base)
        } else {
            parent.join(format!("{base}-{n}"))
        };
        match std::fs::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => crate::error::bail!(BadInput(format!(
                "cannot create the results directory {}: {e}",
                candidate.display()
            ))),
        }
    }
    crate::error::bail!(BadInput(format!(
        "cannot find a free results directory name under {}",
        parent.display()
    )))
}

/// Takes the writer's lock of a results directory for the life of a run, or says who holds it.
pub fn lock_dir(dir: &Path, what: &str) -> crate::error::Result<LockFile> {
    match LockFile::try_acquire(&dir.join(results::LOCK), what) {
        Ok(lock) => Ok(lock),
        Err(LockError::Io { path, source }) => Err(BadInput(format!(
            "cannot lock {} for writing: {source}",
            path.display()
        ))
        .into()),
        Err(held) => {
            let who = match &held {
                LockError::Held { holder, .. } => format!("edgeprof ({holder})"),
                _ => "another edgeprof that is just starting".to_string(),
            };
            Err(BadInput(format!(
                "{} is being written by {who}; one run writes a results directory at a time: \
                 follow it with `edgeprof tui --open {}` or `tail -f {}`, or wait until it ends",
                dir.display(),
                dir.display(),
                dir.join(results::PROGRESS).display()
            ))
            .into())
        }
    }
}

pub fn engine_versions() -> std::collections::BTreeMap<String, String> {
    crate::engines::BUILT_IN
        .iter()
        .filter_map(|&e| crate::engines::version(e).map(|v| (e.to_string(), v.to_string())))
        .collect()
}

/// The versions of the built-in engines and of the external frameworks the plan runs, as found
/// here (with the interpreter that has them).
pub fn engine_versions_for(
    config: &Config,
    plan: &Plan,
) -> std::collections::BTreeMap<String, String> {
    let mut versions = engine_versions();
    let configured = config.interpreters();
    let external: std::collections::BTreeSet<&str> =
        plan.to_run.iter().map(|c| c.engine.as_str()).collect();
    for name in external {
        if let Some(f) = crate::engines::external::find(name) {
            let readiness = crate::engines::env::readiness(f, configured.get(name));
            if let Some(i) = readiness.interpreter() {
                versions.insert(
                    name.to_string(),
                    format!(
                        "{} (Python {}, {})",
                        i.version,
                        i.python_version,
                        i.python.display()
                    ),
                );
            }
        }
    }
    versions
}

/// A new sweep, ready to run: its directory is made, locked and holds the manifest.
pub struct Started {
    pub config: Config,
    pub plan: Plan,
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// Held until the sweep ends: no second writer can open the directory meanwhile.
    pub lock: LockFile,
}

/// Starts a new sweep from a config file.
pub fn start_new(file: &Path, output: Option<&Path>) -> crate::error::Result<Started> {
    let text = std::fs::read_to_string(file).map_err(|e| config::ConfigReadError {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    start_from_text(text, file, output)
}

/// Starts a new sweep from config text (`file` names it and resolves its relative paths).
pub fn start_from_text(
    text: String,
    file: &Path,
    output: Option<&Path>,
) -> crate::error::Result<Started> {
    let mut config = config::parse(&text, file)?;
    // `measure.input_data = "images"` without the photographs: refused before anything starts.
    // `auto` is settled here, once for the whole sweep: photographs set up while it runs (by
    // `env setup images` in another terminal) must not feed some conditions and not others.
    let images = crate::runner::prepare::input_images(&config)?;
    config.measure.input_data = match images {
        Some(_) => config::InputData::Images,
        None => config::InputData::Seeded,
    };
    let plan = matrix::check_frameworks(&config, matrix::expand(&config));
    if plan.to_run.is_empty() {
        crate::error::bail!(BadInput(format!(
            "nothing to run: {} condition(s) skipped and {} excluded (see edgeprof config check {})",
            plan.skipped.len(),
            plan.excluded,
            file.display()
        )));
    }
    let parent = output.unwrap_or(&config.output.dir);
    let dir = new_dir(parent, &config.name)?;
    let lock = lock_dir(&dir, "edgeprof run")?;
    let manifest = Manifest {
        format: results::FORMAT,
        edgeprof_version: env!("CARGO_PKG_VERSION").to_string(),
        name: config.name.clone(),
        config_file: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
        config_text: text,
        files: results::integrity::digests(&plan.to_run),
        config: serde_json::to_value(&config).context("cannot encode the config")?,
        device: crate::collect::device::fingerprint(Path::new("/")),
        engines: engine_versions_for(&config, &plan),
        conditions: plan.to_run.clone(),
        skipped: plan.skipped.clone(),
        excluded: plan.excluded,
        started: crate::text::now_rfc3339(),
        ended: None,
        resumed: Vec::new(),
        status: SweepStatus::Running,
        board_state: None,
    };
    results::write_manifest(&dir, &manifest)?;
    Ok(Started {
        config,
        plan,
        dir,
        manifest,
        lock,
    })
}

/// An interrupted sweep reopened to finish it.
pub struct Resumed {
    pub config: Config,
    pub manifest: Manifest,
    pub lock: LockFile,
    /// The conditions without their result yet, in the plan's order.
    pub todo: Vec<Condition>,
    /// Conditions that had their result before this resume.
    pub done_before: usize,
    /// Attempts already made at each unfinished condition, so retries count on from there.
    pub attempts_before: HashMap<String, crate::runner::sweep::Made>,
    /// What the stopped sweep had measured of the conditions it was in the middle of.
    pub partials: HashMap<String, results::partial::Partial>,
    /// Lines of the directory that were skipped, and conditions measured again, in words.
    pub warnings: Vec<String>,
}

/// How a resume may go on where a plain one refuses.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResumeOptions {
    /// Go on although the directory was measured on another device (`--resume-on-other-device`).
    pub other_device: bool,
}

/// Reopens an interrupted sweep: locks its directory, checks that it was measured on this
/// device, that the files its conditions read are those it measured, and that its stored config
/// still expands to the conditions it stored, and marks it running again. A condition counted
/// as done whose samples or telemetry are not all stored (a full disk) is measured again.
pub fn resume(dir: &Path, options: ResumeOptions) -> crate::error::Result<Resumed> {
    let manifest = results::read_manifest(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    let here = crate::collect::device::fingerprint(Path::new("/"));
    if !options.other_device && !manifest.device.same_device(&here) {
        crate::error::bail!(BadInput(format!(
            "{} was measured on {}, and this is {}: resuming here would put two devices' \
             figures in one table; start a new run, or pass --resume-on-other-device to go on \
             here anyway",
            dir.display(),
            manifest.device.describe(),
            here.describe()
        )));
    }
    let changed = results::integrity::changed(&manifest.files);
    if !changed.is_empty() {
        crate::error::bail!(BadInput(format!(
            "the files {} measured have changed since ({}); its conditions would mix two \
             models under one name: start a new run",
            dir.display(),
            changed.join("; ")
        )));
    }
    let lock = lock_dir(dir, "edgeprof run --resume")?;
    // Read again under the lock: a run that ended just now has rewritten it.
    let mut manifest = results::read_manifest(dir).unwrap_or(manifest);
    let mut config =
        config::parse(&manifest.config_text, &manifest.config_file).with_context(|| {
            format!(
                "the config stored in {} no longer resolves here",
                dir.display()
            )
        })?;
    // The input data the sweep began with (`auto` was settled then, and stays so).
    match manifest
        .config
        .pointer("/measure/input_data")
        .and_then(|v| v.as_str())
    {
        Some("images") => config.measure.input_data = config::InputData::Images,
        Some("seeded") => config.measure.input_data = config::InputData::Seeded,
        _ => {}
    }
    let plan = matrix::expand(&config);
    // Conditions skipped at the start (a framework not set up then) stay skipped.
    let skipped: HashSet<&str> = manifest
        .skipped
        .iter()
        .map(|s| s.condition.id.as_str())
        .collect();
    let stored: Vec<&str> = manifest.conditions.iter().map(|c| c.id.as_str()).collect();
    let now: Vec<&str> = plan
        .to_run
        .iter()
        .map(|c| c.id.as_str())
        .filter(|id| !skipped.contains(id))
        .collect();
    if stored != now {
        crate::error::bail!(BadInput(format!(
            "the config stored in {} now expands to other conditions ({}); start a new run instead",
            dir.display(),
            plan_difference(&stored, &now)
        )));
    }
    let (runs, samples, telemetry) = results::integrity::read_all(dir)
        .map_err(|e| BadInput(format!("cannot resume {}: {e:#}", dir.display())))?;
    let mut warnings = runs.warnings;
    warnings.extend(samples.warnings);
    warnings.extend(telemetry.warnings);
    let mut finished = results::finished_ids(&runs.records);
    for gap in results::integrity::incomplete(&runs.records, &samples.records, &telemetry.records) {
        warnings.push(format!(
            "{} (attempt {}) is measured again: {}",
            gap.condition, gap.attempt, gap.missing
        ));
        finished.remove(&gap.condition);
    }
    let numbered =
        results::integrity::highest_attempts(&runs.records, &samples.records, &telemetry.records);
    let mut recorded: HashMap<&str, usize> = HashMap::new();
    for r in &runs.records {
        let n = recorded.entry(r.condition.id.as_str()).or_default();
        *n = (*n).max(r.attempt);
    }
    let attempts_before: HashMap<String, crate::runner::sweep::Made> = numbered
        .into_iter()
        .filter(|(id, _)| !finished.contains(id))
        .map(|(id, highest)| {
            let made = crate::runner::sweep::Made {
                recorded: recorded.get(id.as_str()).copied().unwrap_or(0),
                numbered: highest,
            };
            (id, made)
        })
        .collect();
    let todo: Vec<Condition> = manifest
        .conditions
        .iter()
        .filter(|c| !finished.contains(&c.id))
        .cloned()
        .collect();
    let (mut partials, unread) = results::partial::pending(dir, &recorded)
        .map_err(|e| BadInput(format!("cannot resume {}: {e:#}", dir.display())))?;
    warnings.extend(unread);
    // Only for conditions still to run, as the plan stands now.
    partials.retain(|id, p| todo.iter().any(|c| c.id == *id && *c == p.condition));
    if !partials.is_empty() {
        let repeats: usize = partials.values().map(|p| p.run.repeats.len()).sum();
        warnings.push(format!(
            "{} condition(s) go on from the {repeats} repeat(s) they had finished when the run              was stopped",
            partials.len()
        ));
    }
    let done_before = manifest.conditions.len() - todo.len();
    manifest.resumed.push(crate::text::now_rfc3339());
    manifest.status = SweepStatus::Running;
    manifest.ended = None;
    results::write_manifest(dir, &manifest).map_err(|e| {
        BadInput(format!(
            "cannot resume {}: {e:#} (a results directory is resumed where it can be written)",
            dir.display()
        ))
    })?;
    Ok(Resumed {
        config,
        manifest,
        lock,
        todo,
        done_before,
        attempts_before,
        partials,
        warnings,
    })
}

/// How two lists of condition ids differ, for a person: counts, then the first few of each side.
fn plan_difference(stored: &[&str], now: &[&str]) -> String {
    const SHOWN: usize = 3;
    let stored_set: HashSet<&str> = stored.iter().copied().collect();
    let now_set: HashSet<&str> = now.iter().copied().collect();
    let gone: Vec<&str> = stored
        .iter()
        .copied()
        .filter(|id| !now_set.contains(id))
        .collect();
    let new: Vec<&str> = now
        .iter()
        .copied()
        .filter(|id| !stored_set.contains(id))
        .collect();
    let list = |ids: &[&str]| {
        let mut text = ids
            .iter()
            .take(SHOWN)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if ids.len() > SHOWN {
            text.push_str(&format!(" and {} more", ids.len() - SHOWN));
        }
        text
    };
    let mut parts = vec![format!("{} stored, {} now", stored.len(), now.len())];
    if !gone.is_empty() {
        parts.push(format!("no longer planned: {}", list(&gone)));
    }
    if !new.is_empty() {
        parts.push(format!("newly planned: {}", list(&new)));
    }
    if gone.is_empty() && new.is_empty() {
        parts.push("the same conditions in another order".to_string());
    }
    parts.join("; ")
}

/// Writes summary.csv/json/md (and the SVG charts) in the formats asked for.
pub fn write_summaries(
    stored: &Stored,
    rows: &[summary::Row],
    formats: &[String],
) -> crate::error::Result<()> {
    let dir = &stored.dir;
    let checks = summary::OutputChecks::of(dir, rows);
    for format in formats {
        match format.as_str() {
            "csv" => {
                results::write_atomic(&dir.join("summary.csv"), summary::to_csv(rows).as_bytes())?
            }
            "json" => results::write_atomic(
                &dir.join("summary.json"),
                summary::to_json(&stored.manifest, rows, &checks)?.as_bytes(),
            )?,
            "md" => results::write_atomic(
                &dir.join("summary.md"),
                summary::to_markdown(&stored.manifest, rows, &checks).as_bytes(),
            )?,
            "svg" => {
                write_svgs(stored, rows, &dir.join("charts"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The seeds' chart set as SVG files; returns their paths.
pub fn write_svgs(
    stored: &Stored,
    rows: &[summary::Row],
    dir: &Path,
) -> crate::error::Result<Vec<PathBuf>> {
    crate::files::create_real_dir(dir)?;
    let mut paths = Vec::new();
    for chart in report::charts(stored, rows)? {
        let path = dir.join(chart.file);
        results::write_atomic(&path, chart.svg.as_bytes())?;
        paths.push(path);
    }
    Ok(paths)
}

/// Closes a sweep: its end time and status in the manifest, then the summaries in `formats`.
pub fn finish(
    dir: &Path,
    manifest: &mut Manifest,
    outcome: &SweepOutcome,
    formats: &[String],
) -> crate::error::Result<(Stored, Vec<summary::Row>)> {
    manifest.ended = Some(crate::text::now_rfc3339());
    manifest.status = if outcome.interrupted {
        SweepStatus::Interrupted
    } else {
        SweepStatus::Complete
    };
    results::write_manifest(dir, manifest)?;
    let stored = results::load(dir)?;
    let rows = summary::rows(&stored.manifest, &stored.runs);
    write_summaries(&stored, &rows, formats)?;
    Ok((stored, rows))
}

/// The CPU roofline of a finished sweep: this device's ceilings (where they are kept) and the
/// sweep's successful CPU conditions as points, with those left out and why.
#[derive(Debug, Clone)]
pub struct CpuRoofline {
    pub ceilings: crate::roofline::store::Stored,
    pub from: String,
    pub programs: Vec<crate::roofline::Program>,
    pub left_out: Vec<(String, String)>,
}

impl CpuRoofline {
    /// As the terminal shows it: chart, roofs and advice.
    pub fn text(&self) -> String {
        format!(
            "\nroofline\n{}",
            crate::report::text::roofline_text(
                &self.ceilings.ceilings,
                &self.from,
                &self.programs,
                &self.left_out,
                crate::roofline::Precision::Fp32,
                false,
                (80, 24),
            )
        )
    }
}

/// The CPU roofline of a finished sweep (None when no CPU condition succeeded: a sweep of GPU
/// conditions only has none): `roofline.json` with each point's analysis, and
/// `charts/roofline.svg`. This device's ceilings are measured first when none are kept;
/// `progress` hears that measurement.
pub fn cpu_roofline(
    stored: &Stored,
    progress: impl FnMut(crate::roofline::store::Progress),
) -> crate::error::Result<Option<CpuRoofline>> {
    use crate::roofline::{advice, Precision};
    let on_cpu = stored
        .runs
        .iter()
        .any(|r| r.ok && r.condition.device == crate::config::Device::Cpu);
    if !on_cpu {
        return Ok(None);
    }
    let (ceilings, from) = crate::roofline::store::kept_or_measure(progress)?;
    let c = &ceilings.ceilings;
    let simulations = crate::runner::cachesim::load(&stored.dir)?;
    let (programs, left_out) = crate::roofline::programs_from_results(stored, &simulations);
    let analyses: Vec<_> = programs
        .iter()
        .filter_map(|p| advice::analyse(p, c).ok())
        .collect();
    let value = serde_json::json!({
        "ceilings": c,
        "ceilings_file": from,
        "programs": programs,
        "left_out": left_out,
        "analyses": analyses,
    });
    let text = serde_json::to_string_pretty(&value).context("cannot encode the roofline")?;
    results::write_atomic(&stored.dir.join("roofline.json"), (text + "\n").as_bytes())?;
    let charts = stored.dir.join("charts");
    crate::files::create_real_dir(&charts)?;
    let svg = report::svg::roofline(c, Precision::Fp32, &programs)?;
    results::write_atomic(&charts.join("roofline.svg"), svg.as_bytes())?;
    Ok(Some(CpuRoofline {
        ceilings,
        from,
        programs,
        left_out,
    }))
}

/// The GPU roofline of a finished sweep (see [`crate::runner::gpu_profile`]): when the config
/// asks for the roofline and the sweep has GPU conditions with times, each is profiled,
/// `gpu-roofline.json` written, and each GPU with kept ceilings gets its chart
/// (`charts/gpu-roofline.svg`, `charts/gpu1-roofline.svg`, …). None when there is nothing to
/// profile.
pub fn gpu_roofline(
    config: &Config,
    stored: &Stored,
    edgeprof: &Path,
    root: &Path,
    cancel: &crate::collect::stop::Cancel,
    on_event: impl FnMut(crate::runner::gpu_profile::GpuProfileEvent),
) -> crate::error::Result<Option<crate::runner::gpu_profile::GpuRoofline>> {
    use crate::runner::gpu_profile::{gpu_conditions, GpuProfiling};
    let conditions = gpu_conditions(stored);
    if !config.output.roofline || conditions.is_empty() {
        return Ok(None);
    }
    let profiling = GpuProfiling {
        config,
        dir: &stored.dir,
        edgeprof,
        root,
        cancel,
    };
    let roofline = profiling.run(&conditions, on_event)?;
    let charts = stored.dir.join("charts");
    for gpu in roofline.gpus() {
        let Some(ceilings) = roofline.ceilings_of(gpu).and_then(|c| c.ceilings.as_ref()) else {
            continue;
        };
        let (programs, _) = roofline.points(gpu);
        if programs.is_empty() {
            continue;
        }
        crate::files::create_real_dir(&charts)?;
        let svg = report::svg::roofline(ceilings, crate::roofline::Precision::Fp32, &programs)?;
        results::write_atomic(&charts.join(gpu_chart_file(gpu)), svg.as_bytes())?;
    }
    Ok(Some(roofline))
}

/// The GPU roofline chart of GPU `gpu` in a results directory's `charts/`.
pub fn gpu_chart_file(gpu: usize) -> String {
    match gpu {
        0 => "gpu-roofline.svg".to_string(),
        n => format!("gpu{n}-roofline.svg"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_plan_names_what_went_and_what_came() {
        let said = plan_difference(&["a", "b", "c"], &["a", "c", "d"]);
        assert_eq!(
            said,
            "3 stored, 3 now; no longer planned: b; newly planned: d"
        );
        let many: Vec<String> = (0..5).map(|i| format!("x{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(plan_difference(&many, &[]).contains("x0, x1, x2 and 2 more"));
        assert!(plan_difference(&["a", "b"], &["b", "a"]).contains("another order"));
    }

    #[test]
    fn new_directories_never_collide() {
        let parent = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let made: Vec<PathBuf> = (0..3)
            .filter_map(|_| new_dir(parent.path(), "x").ok())
            .collect();
        assert_eq!(made.len(), 3);
        assert!(made[0] != made[1] && made[1] != made[2] && made[0] != made[2]);
    }
}
