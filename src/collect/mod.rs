//! Collectors: read what the system says about a process and the machine. Every reader takes a
//! root path (the real `/`, or a fixture tree in tests) and never imports a front-end.

pub mod ceilings;
pub mod device;
pub mod kernels;
pub mod perf;
pub mod proc;
