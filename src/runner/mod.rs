//! Running evaluations: the run matrix (and, next, isolated worker runs and the results store).

pub mod cachesim;
pub mod matrix;
pub mod prepare;
pub mod protocol;
pub mod spawn;
pub mod split;
pub mod sweep;
pub mod worker;

/// A configured thread count made concrete: 0 means all available cores.
pub fn resolve_threads(requested: usize) -> usize {
    if requested == 0 {
        crate::collect::device::available_cores()
    } else {
        requested
    }
}
