//! Running evaluations: the run matrix, preparing and spawning worker processes, the worker
//! itself and its protocol, the sweep with retries and cool-downs, the placement worker and the
//! cache simulation.

pub mod cachesim;
pub mod gpu_profile;
pub mod matrix;
pub mod prepare;
pub mod progress;
pub mod protocol;
pub mod repetition;
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
