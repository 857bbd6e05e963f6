//! Running evaluations: the run matrix, preparing and spawning worker processes, the worker
//! itself and its protocol, the sweep with retries and cool-downs, the placement worker and the
//! cache simulation.

pub mod cachesim;
pub mod gpu_profile;
pub mod lowered;
pub mod matrix;
pub mod place_worker;
pub mod prepare;
pub mod progress;
pub mod spawn;
pub mod sweep;
pub mod worker;

pub use crate::protocol::{repetition, resolve_threads};
