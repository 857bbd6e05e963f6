//! What this machine offers edgeprof, as `edgeprof probe` lists it: every telemetry source,
//! the CPU's topology, the GPU tools and every framework, each available or not and why.

use crate::collect::telemetry;
use serde::Serialize;
use std::path::Path;

/// One thing edgeprof can use here, or cannot and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Source {
    pub source: String,
    pub available: bool,
    pub detail: String,
}

/// Every source under `root` (`/` on a real machine, a fixture tree in tests).
pub fn sources(root: &Path) -> Vec<Source> {
    let mut entries: Vec<Source> = telemetry::readers(root)
        .iter()
        .map(|r| {
            let (available, detail) = match r.probe() {
                Ok(d) => (true, d),
                Err(why) => (false, why),
            };
            Source {
                source: r.name().to_string(),
                available,
                detail,
            }
        })
        .collect();
    entries.extend(other_sources(root));
    entries.extend(
        crate::engines::env::engines_here(&Default::default())
            .into_iter()
            .map(|(name, readiness)| Source {
                source: format!("framework {name}"),
                available: matches!(
                    readiness,
                    crate::engines::env::Readiness::BuiltIn { .. }
                        | crate::engines::env::Readiness::Ready(_)
                ),
                detail: readiness.describe(),
            }),
    );
    entries
}

/// The CPU's clusters, SIMD extensions and caches, in words.
fn topology(root: &Path) -> String {
    let f = crate::collect::device::fingerprint(root);
    let clusters: Vec<String> = f
        .clusters
        .iter()
        .map(|c| {
            let ids: Vec<String> = c.cpus.iter().map(|i| i.to_string()).collect();
            let mut s = format!("cpu {}", ids.join(","));
            if let Some(cap) = c.capacity {
                s.push_str(&format!(" capacity {cap}"));
            }
            if let Some(mhz) = c.max_freq_mhz {
                s.push_str(&format!(" up to {mhz} MHz"));
            }
            s
        })
        .collect();
    let caches: Vec<String> = f
        .caches
        .iter()
        .map(|c| {
            format!(
                "L{} {} {}",
                c.level,
                c.kind.to_lowercase(),
                crate::text::bytes(c.size_bytes)
            )
        })
        .collect();
    format!(
        "clusters: {}; SIMD: {}; caches: {}",
        if clusters.is_empty() {
            "unknown".to_string()
        } else {
            clusters.join(" | ")
        },
        if f.simd.is_empty() {
            "unknown".to_string()
        } else {
            f.simd.join(", ")
        },
        if caches.is_empty() {
            "unknown".to_string()
        } else {
            caches.join(", ")
        }
    )
}

/// Sources that are not sampled but matter to the user: the CPU topology and tegrastats.
/// The board's performance state in one line, then each warning with its fix.
fn board_state(root: &Path) -> Source {
    let state = crate::collect::board::read(root, &crate::collect::board::LiveCommands);
    let mut detail = state.summary();
    for w in state.warnings() {
        detail.push_str(&format!("; warning: {w}"));
    }
    Source {
        source: "board state (clocks, power mode)".to_string(),
        available: state.cpufreq.get().is_some() || state.jetson.get().is_some(),
        detail,
    }
}

fn other_sources(root: &Path) -> Vec<Source> {
    let tegrastats = crate::collect::find_on_path("tegrastats");
    vec![
        Source {
            source: "CPU topology (sysfs, cpuinfo)".to_string(),
            available: true,
            detail: topology(root),
        },
        board_state(root),
        Source {
            source: "tegrastats".to_string(),
            available: tegrastats.is_some(),
            detail: tegrastats.map_or(
                "not installed (Jetson only); logs from a board can be replayed with `monitor --from-tegrastats FILE`".to_string(),
                |p| p.display().to_string(),
            ),
        },
        {
            let cuda = crate::collect::gpubench::availability();
            Source {
                source: "CUDA driver + NVRTC (GPU ceilings)".to_string(),
                available: cuda.is_ok(),
                detail: cuda.map_or_else(
                    |why| why.0,
                    |_| "loadable: `roofline measure-gpu` can measure the GPU's ceilings".to_string(),
                ),
            }
        },
        {
            use crate::collect::gpuprof::{find, Tool};
            let found: Vec<String> = [Tool::Ncu, Tool::Nvprof]
                .into_iter()
                .filter_map(|t| find(t).ok())
                .map(|p| p.display().to_string())
                .collect();
            Source {
                source: "GPU profilers (ncu, nvprof)".to_string(),
                available: !found.is_empty(),
                detail: if found.is_empty() {
                    "neither ncu (Nsight Compute) nor nvprof is on PATH or in /usr/local/cuda/bin"
                        .to_string()
                } else {
                    found.join(", ")
                },
            }
        },
    ]
}
