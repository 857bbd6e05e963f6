//! Collectors: read what the system says about a process and the machine. Every reader takes a
//! root path (the real `/`, or a fixture tree in tests) and never imports a front-end.

pub mod ceilings;
pub mod device;
pub mod gpubench;
pub mod gpuprof;
pub mod kernels;
pub mod perf;
pub mod proc;
pub mod tegrastats;
pub mod telemetry;
pub mod tree;

/// The first `name` on PATH, if any.
pub fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
