//! Plain-text output of the CLI that is its own: a running benchmark's progress lines. What
//! results, model costs and configs read as is the library's (`edgeprof::report::text`).

use edgeprof::bench::BenchEvent;

pub use edgeprof::text::{bytes, duration, si, table, thousands};

/// Progress of a running benchmark, on stderr.
pub fn progress_line(event: BenchEvent) {
    match event {
        BenchEvent::Loading { model } => errln!("loading {model} …"),
        BenchEvent::Loaded { init } => {
            errln!("loaded and optimised in {:.1} ms", init.as_secs_f64() * 1e3)
        }
        BenchEvent::FirstInference { time } => {
            errln!("first inference {:.2} ms", time.as_secs_f64() * 1e3)
        }
        BenchEvent::WarmupDone { iterations } => {
            errln!("warm-up done ({iterations} iteration(s))")
        }
        BenchEvent::Timed { done, total } => {
            if done == total || done % (total / 4).max(1) == 0 {
                errln!("timed {done}/{total}");
            }
        }
        BenchEvent::Profiling { runs } => errln!("profiling node by node over {runs} runs …"),
        BenchEvent::InWorker => errln!("loaded in a worker process; timing …"),
    }
}
