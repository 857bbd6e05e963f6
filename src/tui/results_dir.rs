//! Opening a results directory in the Results tab, the kept ceilings for the Roofline tab, and
//! following a directory that another edgeprof is still writing.

use super::*;

/// Loads a results directory into the Results and Roofline tabs.
pub fn open_results(app: &mut App, dir: &Path) {
    let stored = match results::load(dir) {
        Ok(s) => s,
        Err(e) => {
            app.results.error = Some(format!("{e:#}"));
            app.say(Severity::Error, format!("{e:#}"));
            return;
        }
    };
    let rows = summary::rows(&stored.manifest, &stored.runs);
    let utilisation = vec![
        (
            "worker CPU (% of a core)".to_string(),
            edgeprof::report::cpu_timeline(&stored.runs, &stored.samples),
        ),
        (
            "machine CPU (%)".to_string(),
            edgeprof::report::system_cpu_timeline(&stored.runs, &stored.telemetry),
        ),
        (
            "GPU (%)".to_string(),
            edgeprof::report::gpu_timeline(&stored.runs, &stored.telemetry),
        ),
    ];
    let latencies = stored
        .runs
        .iter()
        .filter(|r| r.last && r.ok)
        .filter_map(|r| Some((r.condition.id.clone(), r.kept_repeats()?)))
        .filter(|(_, l)| l.iter().any(|r| !r.is_empty()))
        .collect();
    let mut curves: std::collections::HashMap<String, Vec<_>> = Default::default();
    if !edgeprof::report::condition_charts_wanted(&stored) {
        // No GPU figures: the sweep's CPU chart says it all.
    } else {
        use edgeprof::report::curves;
        for (what, unit, figure) in [
            ("GPU load", "%", curves::gpu_load as curves::Figure),
            ("GPU memory", "MiB", curves::gpu_memory_mib),
            ("machine CPU", "%", curves::cpu_load),
        ] {
            for g in curves::by_framework(&stored, figure) {
                for c in g.curves {
                    let id = format!("{}/{}", g.engine, c.label);
                    curves.entry(id).or_default().push((what, unit, c.points));
                }
            }
        }
    }
    // A failed condition's last attempt: what its worker said last on stderr.
    let stderr_tails = stored
        .runs
        .iter()
        .filter(|r| r.last)
        .filter_map(|r| {
            let tail = r.failure.as_ref()?.stderr_tail().trim().to_string();
            (!tail.is_empty()).then(|| (r.condition.id.clone(), tail))
        })
        .collect();
    // Each lower precision's cost against its fp32 twin, for the detail pane.
    let accuracy = edgeprof::results::accuracy::compare(dir, &rows)
        .into_iter()
        .map(|a| (a.condition.clone(), a))
        .collect();
    // What the reader chose stays: the filter, hiding skipped rows, the detail pane.
    let kept = std::mem::take(&mut app.results);
    app.results = app::ResultsView {
        dir: Some(dir.to_path_buf()),
        all: rows,
        utilisation,
        latencies,
        accuracy,
        curves,
        stderr_tails,
        hide_skipped: kept.hide_skipped,
        filter: kept.filter,
        detail: kept.detail,
        ..app::ResultsView::default()
    };
    app.results.refresh_rows();
    app.scorecard.rejoin(&app.results.all);
    match stored.warnings.first() {
        Some(w) => app.say(
            Severity::Warn,
            format!("{} ({} warning(s) reading it)", w, stored.warnings.len()),
        ),
        None => app.say(Severity::Info, format!("opened {}", dir.display())),
    }
    let simulations = edgeprof::runner::cachesim::load(dir).unwrap_or_default();
    let cpu = edgeprof::roofline::programs_from_results(&stored, &simulations);
    let (gpu, gpu_ceilings) = gpu_points(app, dir);
    for (processor, (programs, left_out)) in [(Processor::Cpu, cpu), (Processor::Gpu, gpu)] {
        let (p, l) = app.roofline.points_of(processor);
        *p = programs;
        *l = left_out;
        let ceilings = app.roofline.ceilings_of(processor);
        match (&gpu_ceilings, processor) {
            (Some(kept), Processor::Gpu) => *ceilings = Some(Shown::Ready(kept.clone())),
            _ if ceilings.is_none() || matches!(ceilings, Some(Shown::Note(_))) => {
                *ceilings = Some(stored_ceilings(processor))
            }
            _ => {}
        }
    }
    app.roofline.selected = 0;
    app.roofline.layers = None;
    app.roofline.classes = stored.classes();
    app.roofline.conditions = stored.manifest.conditions.clone();
    app.refresh_roofline();
}

/// The GPU points of a results directory: its GPU conditions on GPU 0 as the sweep profiled
/// them (`gpu-roofline.json`, with the ceilings it judged them by), then any profile kept with
/// `roofline profile-gpu --output DIR/NAME`; conditions of other GPUs and those not placed are
/// left out with their reason.
#[allow(clippy::type_complexity)]
fn gpu_points(
    app: &mut App,
    dir: &Path,
) -> (
    (Vec<edgeprof::roofline::Program>, Vec<(String, String)>),
    Option<(edgeprof::roofline::Ceilings, String)>,
) {
    let (mut programs, mut left_out) = (Vec::new(), Vec::new());
    let mut ceilings = None;
    match edgeprof::runner::gpu_profile::load(dir) {
        Ok(Some(gpu)) => {
            let (p, l) = gpu.points(0);
            programs.extend(p);
            left_out.extend(l);
            for n in gpu.gpus().into_iter().filter(|&n| n > 0) {
                let (p, l) = gpu.points(n);
                left_out.extend(p.into_iter().map(|p| {
                    (
                        p.label,
                        format!("on GPU {n}: `edgeprof report` shows its roofline"),
                    )
                }));
                left_out.extend(l);
            }
            ceilings = gpu.ceilings_of(0).and_then(|c| {
                let file = c.file.clone().unwrap_or_else(|| "kept by the sweep".into());
                Some((c.ceilings.clone()?, file))
            });
        }
        Ok(None) => {}
        Err(e) => app.say(Severity::Warn, format!("{e:#}")),
    }
    let (p, l) = edgeprof::roofline::nvidia::programs_in(dir);
    programs.extend(p);
    left_out.extend(l);
    ((programs, left_out), ceilings)
}

/// The kept ceilings of this device's CPU or GPU 0 and their file, or what to do to get them.
pub(super) fn stored_ceilings(
    processor: Processor,
) -> Shown<(edgeprof::roofline::Ceilings, String)> {
    kept_ceilings(processor).into()
}

fn kept_ceilings(processor: Processor) -> Result<(edgeprof::roofline::Ceilings, String), String> {
    use edgeprof::roofline::store;
    let fingerprint = edgeprof::collect::device::fingerprint(Path::new("/"));
    let Some(dir) = store::cache_dir() else {
        return Err(
            "no cache directory (set EDGEPROF_CACHE_DIR or HOME), so no stored ceilings".into(),
        );
    };
    let (loaded, path) = match processor {
        Processor::Cpu => (
            store::load(&dir, &fingerprint),
            store::path_for(&dir, &fingerprint),
        ),
        Processor::Gpu => (
            store::load_gpu(&dir, &fingerprint, 0),
            store::gpu_path_for(&dir, &fingerprint, 0),
        ),
    };
    match (loaded, processor) {
        (Ok(Some(stored)), _) => Ok((stored.ceilings, path.display().to_string())),
        (Ok(None), Processor::Cpu) => Err(
            "no ceilings for this device yet: press m to measure them (about 5 s), or run \
             `edgeprof roofline measure`"
                .into(),
        ),
        // Without the CUDA driver there is nothing m could measure: say that first.
        (Ok(None), Processor::Gpu) if store::gpu_bench_program().is_err() => {
            let why = match store::gpu_bench_program() {
                Err(edgeprof::collect::gpubench::GpuBenchError::Unavailable(why)) => why,
                Err(e) => e.to_string(),
                Ok(_) => String::new(),
            };
            Err(format!(
                "no ceilings for GPU 0, and none can be measured here: {why}; ceilings measured \
                 elsewhere can be imported with `edgeprof roofline import-ert FILE --gpu`"
            ))
        }
        (Ok(None), Processor::Gpu) => Err(
            "no ceilings for GPU 0 yet: press m to measure them with the CUDA microbenchmark, or \
             run `edgeprof roofline measure-gpu` (or `roofline import-ert FILE --gpu`); GPU points \
             come from the profiles kept in the results directory (`roofline profile-gpu --output \
             DIR/NAME`)"
                .into(),
        ),
        (Err(e), _) => Err(format!("{e:#}")),
    }
}

/// What changes on disk while another edgeprof writes a results directory.
#[derive(PartialEq)]
pub(super) struct Watched {
    runs_bytes: Option<u64>,
    manifest: Option<std::time::SystemTime>,
    running: bool,
}

pub(super) fn watched(dir: &Path) -> Watched {
    Watched {
        runs_bytes: std::fs::metadata(dir.join(results::RUNS))
            .ok()
            .map(|m| m.len()),
        manifest: std::fs::metadata(dir.join(results::MANIFEST))
            .and_then(|m| m.modified())
            .ok(),
        running: edgeprof::lockfile::holder(&dir.join(results::LOCK)).is_some(),
    }
}

/// Follows a results directory that another edgeprof is writing (a sweep started headless,
/// before the user's SSH session dropped): a message whenever it changes, and a last one when its
/// writer has let go. Nothing polls: one thread blocks on the directory's inotify events, one
/// waits for the writer's lock to be released.
pub(super) fn spawn_follower(tx: Sender<Message>, dir: PathBuf) {
    use std::sync::atomic::AtomicBool;
    let ended = std::sync::Arc::new(AtomicBool::new(false));
    {
        let (tx, dir, ended) = (tx.clone(), dir.clone(), std::sync::Arc::clone(&ended));
        std::thread::spawn(move || {
            // An error (the file vanished) ends the following as a release would.
            let _ = edgeprof::lockfile::wait_released(&dir.join(results::LOCK));
            ended.store(true, Ordering::SeqCst);
            let _ = tx.send(Message::Followed(dir));
        });
    }
    std::thread::spawn(move || {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let watching = Inotify::init(InitFlags::IN_CLOEXEC).and_then(|inotify| {
            inotify
                .add_watch(
                    &dir,
                    AddWatchFlags::IN_MODIFY
                        | AddWatchFlags::IN_CLOSE_WRITE
                        | AddWatchFlags::IN_MOVED_TO
                        | AddWatchFlags::IN_CREATE,
                )
                .map(|_| inotify)
        });
        // Without inotify (a file system that has none) the end is still told by the lock.
        let Ok(inotify) = watching else { return };
        let mut last = watched(&dir);
        while inotify.read_events().is_ok() && !ended.load(Ordering::SeqCst) {
            let now = watched(&dir);
            if now == last {
                continue;
            }
            last = now;
            if tx.send(Message::Followed(dir.clone())).is_err() {
                return;
            }
        }
    });
}

/// Reloads a followed directory, keeping the table's order and selection, and says where the
/// sweep stands.
pub(super) fn follow_update(app: &mut App, dir: &Path) {
    let (sort, descending, selected) = (
        app.results.sort,
        app.results.descending,
        app.results.selected,
    );
    open_results(app, dir);
    app.results.sort = sort;
    app.results.descending = descending;
    app.results.refresh_rows();
    app.results.selected = selected.min(app.results.rows.len().saturating_sub(1));
    let Some(listing) = results::listing::describe(dir) else {
        return;
    };
    let text = match (listing.state, listing.pid) {
        (results::listing::State::Running, pid) => format!(
            "following a running sweep (edgeprof pid {}): {} of {} condition(s) done{}",
            pid.map_or_else(|| "?".to_string(), |p| p.to_string()),
            listing.done,
            listing.total,
            listing
                .last_progress
                .as_deref()
                .and_then(|l| l.split_once(' ').map(|(_, rest)| format!(" · {rest}")))
                .unwrap_or_default()
        ),
        (state, _) => format!(
            "the sweep ended: {state}, {} of {} condition(s) done",
            listing.done, listing.total
        ),
    };
    app.say(Severity::Info, text);
}
