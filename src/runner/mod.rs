//! Running evaluations: the run matrix (and, next, isolated worker runs and the results store).

pub mod cachesim;
pub mod matrix;
pub mod prepare;
pub mod protocol;
pub mod spawn;
pub mod split;
pub mod sweep;
pub mod worker;

/// Cores this process may use (1 when the system cannot say).
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A configured thread count made concrete: 0 means all available cores.
pub fn resolve_threads(requested: usize) -> usize {
    if requested == 0 {
        available_cores()
    } else {
        requested
    }
}
