//! The cache simulation of one condition under valgrind (see [`crate::roofline::cachesim`] for
//! what it approximates, how its output is read and where it is kept).

use crate::collect::device::Cache;
use crate::protocol::WorkerRequest;
pub use crate::roofline::cachesim::*;
use crate::runner::spawn::{run_worker, RunLimits, WorkerCommand};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The valgrind on PATH, or why there is none.
pub fn valgrind() -> Result<PathBuf, crate::error::Unavailable> {
    crate::collect::find_on_path("valgrind")
        .ok_or_else(|| "valgrind is not installed (Debian/Ubuntu: apt install valgrind)".into())
}

/// Simulates one condition: `request` with one thread and its warm-up is run under valgrind,
/// counting only the timed inferences. `work` holds the simulator's output file.
pub fn simulate(
    valgrind: &Path,
    edgeprof: &Path,
    request: &WorkerRequest,
    caches: &[Cache],
    work: &Path,
    timeout: Duration,
    cancel: &crate::collect::stop::Cancel,
) -> crate::error::Result<Simulation> {
    let started = std::time::Instant::now();
    let out_file = work.join(format!("callgrind.{}.out", std::process::id()));
    let mut args = vec![
        "--tool=callgrind".to_string(),
        "--cache-sim=yes".to_string(),
        "--collect-atstart=no".to_string(),
        format!(
            "--toggle-collect={}",
            crate::runner::worker::TIMED_REPEAT_SYMBOL
        ),
        format!("--callgrind-out-file={}", out_file.display()),
    ];
    let (d1, ll) = shapes(caches, 64);
    if let Some(g) = d1 {
        args.push(format!("--D1={}", g.arg()));
    }
    if let Some(g) = ll {
        args.push(format!("--LL={}", g.arg()));
    }
    args.push(edgeprof.display().to_string());
    args.push("worker".to_string());
    let mut request = request.clone();
    request.condition.threads = 1;
    request.counters = false;
    // The condition's own worker profiled its layers; under valgrind it would take minutes.
    request.layer_runs = 0;
    let command = WorkerCommand {
        program: valgrind.to_path_buf(),
        args,
    };
    let limits = RunLimits {
        timeout,
        sample_interval: Duration::from_secs(1),
    };
    let attempt = run_worker(&command, &request, limits, cancel, |_| {});
    let text = std::fs::read_to_string(&out_file);
    let _ = std::fs::remove_file(&out_file);
    let run = attempt.outcome.map_err(|f| crate::error::failed!("{f}"))?;
    let text = text.map_err(|e| {
        crate::error::failed!("valgrind left no output file {}: {e}", out_file.display())
    })?;
    let output = parse(&text)?;
    let iterations = run.repeats.iter().map(Vec::len).sum();
    let (l2_bytes, dram_bytes) = per_inference(&output, iterations)?;
    Ok(Simulation {
        condition: request.condition.id.clone(),
        iterations,
        threads: 1,
        output,
        l2_bytes,
        dram_bytes,
        seconds: started.elapsed().as_secs_f64(),
        written: crate::text::now_rfc3339(),
    })
}

/// Simulates the caches for the stored sweep's conditions that have no traffic yet (neither
/// counted nor simulated): its successful tract conditions on zoo models, one after another,
/// each simulation kept in the directory as it ends; one that fails leaves its point analytic,
/// with a warning. `say` hears each step.
pub fn simulate_missing(
    stored: &crate::results::Stored,
    simulations: &mut Vec<Simulation>,
    iterations: usize,
    timeout: Duration,
    mut say: impl FnMut(String),
) -> crate::error::Result<()> {
    use crate::config::ModelRef;
    let valgrind = valgrind()
        .map_err(|why| crate::error::BadInput(format!("--cache-sim needs valgrind: {why}")))?;
    let edgeprof = std::env::current_exe()
        .map_err(|e| crate::error::failed!("cannot locate the edgeprof binary: {e}"))?;
    let caches = crate::collect::device::fingerprint(Path::new("/")).caches;
    let todo: Vec<_> = stored
        .runs
        .iter()
        .filter(|r| r.ok && r.condition.engine == "tract")
        .filter(|r| matches!(r.condition.model, ModelRef::Zoo(_)))
        .filter(|r| {
            let counted = r
                .run
                .as_ref()
                .and_then(|run| run.counters.as_ref())
                .map(crate::collect::perf::CounterReport::derive)
                .is_some_and(|d| d.has_traffic());
            !counted && !simulations.iter().any(|s| s.condition == r.condition.id)
        })
        .collect();
    if todo.is_empty() {
        say(
            "cache simulation: nothing to simulate (it covers successful tract conditions on zoo \
             models that have neither counted nor simulated traffic yet)"
                .to_string(),
        );
        return Ok(());
    }
    let cancel = crate::collect::stop::Cancel::new();
    for (k, record) in todo.iter().enumerate() {
        say(format!(
            "[{}/{}] simulating the caches for {} under valgrind (one thread, 1 warm-up + {iterations} counted inference(s); often 50–100× slower than native) …",
            k + 1,
            todo.len(),
            record.condition.id
        ));
        let request = crate::protocol::WorkerRequest {
            warmup: 1,
            iterations,
            repeats: 1,
            ..crate::protocol::WorkerRequest::new(
                record.condition.clone(),
                stored.seed(),
                stored.classes(),
            )
        };
        match simulate(
            &valgrind,
            &edgeprof,
            &request,
            &caches,
            &stored.dir,
            timeout,
            &cancel,
        ) {
            Ok(sim) => {
                say(format!(
                    "      {:.1} s: {} between L1 and L2, {} from DRAM per inference",
                    sim.seconds,
                    crate::text::bytes(sim.l2_bytes as u64),
                    crate::text::bytes(sim.dram_bytes as u64)
                ));
                simulations.push(sim);
                save(&stored.dir, simulations)?;
            }
            Err(e) => say(format!(
                "warning: {}: the cache simulation failed ({e:#}); its point stays analytic",
                record.condition.id
            )),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_valgrind_is_said_plainly() {
        if let Err(why) = valgrind() {
            assert!(why.contains("apt install valgrind"));
        }
    }
}
