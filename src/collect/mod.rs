//! Collectors: read what the system says about a process and the machine. Every reader takes a
//! root path (the real `/`, or a fixture tree in tests) and never imports a front-end.

pub mod device;
pub mod proc;
