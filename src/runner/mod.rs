//! Running evaluations: the run matrix (and, next, isolated worker runs and the results store).

pub mod matrix;
pub mod protocol;
pub mod spawn;
pub mod worker;
