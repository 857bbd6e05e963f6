//! Placement: which processing unit runs each block of a network so that the whole
//! inference is fastest, given each block's latency on each unit and what moving a tensor
//! between two units costs (t = α + bytes / β, fitted from a copy microbenchmark).
//!
//! A chain of blocks is solved exactly by dynamic programming over (block, unit); branching
//! networks become chains by cutting only where a single tensor crosses ([`blocks`]).

use serde::{Deserialize, Serialize};

/// The cost of moving `bytes` from one unit to another: `alpha_ms + bytes / beta`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub alpha_ms: f64,
    /// Bytes per millisecond.
    pub beta: f64,
}

impl Link {
    pub const FREE: Link = Link {
        alpha_ms: 0.0,
        beta: f64::INFINITY,
    };

    pub fn ms(&self, bytes: u64) -> f64 {
        self.alpha_ms + bytes as f64 / self.beta
    }
}

/// The units and the links between them; `links[a][b]` moves data from a to b (the diagonal is
/// unused). Unit 0 is the host: the input starts there and the output must end there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Units {
    pub names: Vec<String>,
    pub links: Vec<Vec<Link>>,
}

impl Units {
    fn transfer(&self, from: usize, to: usize, bytes: u64) -> f64 {
        if from == to {
            0.0
        } else {
            self.links[from][to].ms(bytes)
        }
    }
}

/// How a GPU reaches the tensors the CPU units hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GpuMemory {
    /// The GPU shares DRAM with the CPU (Jetson, integrated GPUs): a hand-over crosses no bus;
    /// it costs a synchronisation and at most a copy within DRAM, the measured `copy` link
    /// (measured like the links between CPU units).
    Unified { copy: Link },
    /// The GPU has its own memory behind PCIe: every hand-over crosses the bus, host to device
    /// and device to host at their own measured costs.
    Discrete { to_gpu: Link, to_host: Link },
}

impl GpuMemory {
    pub fn word(&self) -> &'static str {
        match self {
            GpuMemory::Unified { .. } => "unified",
            GpuMemory::Discrete { .. } => "discrete",
        }
    }
}

/// A GPU's links fitted from the copy benchmark's (bytes, ms) samples into the GPU and out of
/// it, as its memory has them: over unified memory both directions are one kind of hand-over
/// (a synchronisation and a copy within DRAM), fitted together; over PCIe each direction is
/// fitted apart. None when the samples do not make a fit.
pub fn gpu_memory(
    kind: crate::collect::gpuprof::MemoryKind,
    to_gpu: &[(u64, f64)],
    to_host: &[(u64, f64)],
) -> Option<GpuMemory> {
    match kind {
        crate::collect::gpuprof::MemoryKind::Unified => {
            let both: Vec<(u64, f64)> = to_gpu.iter().chain(to_host).copied().collect();
            fit_link(&both).map(|copy| GpuMemory::Unified { copy })
        }
        crate::collect::gpuprof::MemoryKind::Discrete => Some(GpuMemory::Discrete {
            to_gpu: fit_link(to_gpu)?,
            to_host: fit_link(to_host)?,
        }),
    }
}

/// `units` with a GPU unit `name` added last, linked both ways to every CPU unit by `memory`.
pub fn with_gpu(units: &Units, name: &str, memory: GpuMemory) -> Units {
    let (to_gpu, to_host) = match memory {
        GpuMemory::Unified { copy } => (copy, copy),
        GpuMemory::Discrete { to_gpu, to_host } => (to_gpu, to_host),
    };
    let n = units.names.len();
    let mut links: Vec<Vec<Link>> = units
        .links
        .iter()
        .map(|row| {
            let mut row = row.clone();
            row.push(to_gpu);
            row
        })
        .collect();
    let mut back = vec![to_host; n];
    back.push(Link::FREE);
    links.push(back);
    let mut names = units.names.clone();
    names.push(name.to_string());
    Units { names, links }
}

/// One block of the chain: its latency on each unit and the size of the tensor it hands on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub name: String,
    pub ms: Vec<f64>,
    pub out_bytes: u64,
}

/// An assignment and what it is predicted to cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The unit of each stage.
    pub units: Vec<usize>,
    pub predicted_ms: f64,
    /// Of which moving tensors.
    pub transfer_ms: f64,
}

/// The predicted end-to-end latency of an assignment: every stage on its unit, the input moved
/// from the host to the first stage's unit, each hand-over between units, and the output moved
/// back to the host.
pub fn evaluate(stages: &[Stage], units: &Units, input_bytes: u64, assign: &[usize]) -> Plan {
    let mut compute = 0.0;
    let mut transfer = 0.0;
    let mut at = 0;
    let mut bytes = input_bytes;
    for (stage, &u) in stages.iter().zip(assign) {
        transfer += units.transfer(at, u, bytes);
        compute += stage.ms[u];
        at = u;
        bytes = stage.out_bytes;
    }
    transfer += units.transfer(at, 0, bytes);
    Plan {
        units: assign.to_vec(),
        predicted_ms: compute + transfer,
        transfer_ms: transfer,
    }
}

/// The assignment with the least predicted latency, exactly, in O(stages × units²).
pub fn optimal(stages: &[Stage], units: &Units, input_bytes: u64) -> Plan {
    let k = units.names.len();
    if stages.is_empty() || k == 0 {
        return evaluate(stages, units, input_bytes, &[]);
    }
    // cost[u]: the least time to finish the stages so far with the last one on u.
    let mut cost: Vec<f64> = (0..k)
        .map(|u| units.transfer(0, u, input_bytes) + stages[0].ms[u])
        .collect();
    let mut from: Vec<Vec<usize>> = vec![vec![0; k]];
    for i in 1..stages.len() {
        let bytes = stages[i - 1].out_bytes;
        let mut next = vec![f64::INFINITY; k];
        let mut back = vec![0; k];
        for u in 0..k {
            for (v, before) in cost.iter().enumerate() {
                let c = before + units.transfer(v, u, bytes);
                if c < next[u] {
                    next[u] = c;
                    back[u] = v;
                }
            }
            next[u] += stages[i].ms[u];
        }
        cost = next;
        from.push(back);
    }
    let last_bytes = stages[stages.len() - 1].out_bytes;
    let mut end = 0;
    let mut best = f64::INFINITY;
    for (u, c) in cost.iter().enumerate() {
        let total = c + units.transfer(u, 0, last_bytes);
        if total < best {
            best = total;
            end = u;
        }
    }
    let mut assign = vec![0; stages.len()];
    assign[stages.len() - 1] = end;
    for i in (1..stages.len()).rev() {
        assign[i - 1] = from[i][assign[i]];
    }
    evaluate(stages, units, input_bytes, &assign)
}

/// Every stage on one unit.
pub fn single(stages: &[Stage], units: &Units, input_bytes: u64, unit: usize) -> Plan {
    evaluate(stages, units, input_bytes, &vec![unit; stages.len()])
}

/// Fits `t = α + bytes / β` by least squares to (bytes, ms) samples; α and 1/β are kept
/// non-negative (β infinite when the copy time does not grow with size).
pub fn fit_link(samples: &[(u64, f64)]) -> Option<Link> {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return None;
    }
    let mx = samples.iter().map(|s| s.0 as f64).sum::<f64>() / n;
    let my = samples.iter().map(|s| s.1).sum::<f64>() / n;
    let sxx: f64 = samples.iter().map(|s| (s.0 as f64 - mx).powi(2)).sum();
    let sxy: f64 = samples.iter().map(|s| (s.0 as f64 - mx) * (s.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = (sxy / sxx).max(0.0);
    let alpha = (my - slope * mx).max(0.0);
    Some(Link {
        alpha_ms: alpha,
        beta: if slope > 0.0 {
            1.0 / slope
        } else {
            f64::INFINITY
        },
    })
}

pub use crate::models::blocks::{blocks, file_blocks, Block};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Context;
    use crate::models::graph::ValueId;
    use rand::{Rng, SeedableRng};

    fn units(k: usize, link: Link) -> Units {
        Units {
            names: (0..k).map(|u| format!("u{u}")).collect(),
            links: vec![vec![link; k]; k],
        }
    }

    fn brute_force(stages: &[Stage], units: &Units, input: u64) -> f64 {
        let k = units.names.len();
        let n = stages.len();
        let mut best = f64::INFINITY;
        for code in 0..k.pow(n as u32) {
            let mut c = code;
            let assign: Vec<usize> = (0..n)
                .map(|_| {
                    let u = c % k;
                    c /= k;
                    u
                })
                .collect();
            best = best.min(evaluate(stages, units, input, &assign).predicted_ms);
        }
        best
    }

    /// A link fitted from copy timings as the microbenchmark takes them: `alpha_ms` plus
    /// `bytes_per_ms`, with a little noise.
    fn measured(alpha_ms: f64, bytes_per_ms: f64) -> Link {
        let samples: Vec<(u64, f64)> = [4u64 << 10, 64 << 10, 1 << 20, 4 << 20]
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let noise = 1.0 + 0.01 * (i as f64 - 1.5);
                (b, (alpha_ms + b as f64 / bytes_per_ms) * noise)
            })
            .collect();
        fit_link(&samples).unwrap_or_else(|| panic!("no fit of {samples:?}"))
    }

    /// A stem and a head that suit the CPU (small, branchy work), around a body ten times faster
    /// on the GPU, handing on `bytes` between them.
    fn offload_chain(bytes: u64) -> Vec<Stage> {
        vec![
            Stage {
                name: "stem".into(),
                ms: vec![0.5, 6.0],
                out_bytes: bytes,
            },
            Stage {
                name: "body".into(),
                ms: vec![10.0, 1.0],
                out_bytes: bytes,
            },
            Stage {
                name: "head".into(),
                ms: vec![0.2, 5.0],
                out_bytes: 4_000,
            },
        ]
    }

    #[test]
    fn a_gpus_links_are_fitted_as_its_memory_has_them() -> crate::error::Result<()> {
        use crate::collect::gpuprof::MemoryKind;
        let sizes = [4u64 << 10, 64 << 10, 1 << 20, 4 << 20];
        // Measured as the copy benchmark gives them: into the card 12 GB/s after 0.02 ms,
        // out of it 6 GB/s after 0.05 ms.
        let to_gpu: Vec<(u64, f64)> = sizes.iter().map(|&b| (b, 0.02 + b as f64 / 12e6)).collect();
        let to_host: Vec<(u64, f64)> = sizes.iter().map(|&b| (b, 0.05 + b as f64 / 6e6)).collect();
        let Some(GpuMemory::Discrete {
            to_gpu: a,
            to_host: b,
        }) = gpu_memory(MemoryKind::Discrete, &to_gpu, &to_host)
        else {
            crate::error::bail!("a discrete GPU's links were not fitted per direction");
        };
        assert!(
            (a.alpha_ms - 0.02).abs() < 1e-9 && (a.beta - 12e6).abs() < 1.0,
            "{a:?}"
        );
        assert!(
            (b.alpha_ms - 0.05).abs() < 1e-9 && (b.beta - 6e6).abs() < 1.0,
            "{b:?}"
        );
        // Over unified memory the two directions are one link, between the two.
        let Some(GpuMemory::Unified { copy }) = gpu_memory(MemoryKind::Unified, &to_gpu, &to_host)
        else {
            crate::error::bail!("a unified-memory GPU's links were not fitted together");
        };
        let mib = 1u64 << 20;
        assert!(
            copy.ms(mib) > a.ms(mib) && copy.ms(mib) < b.ms(mib),
            "{copy:?}"
        );
        // Too few samples make no link.
        assert_eq!(
            gpu_memory(MemoryKind::Discrete, &to_gpu[..1], &to_host),
            None
        );
        Ok(())
    }

    #[test]
    fn unified_memory_offloads_what_discrete_memory_keeps_on_the_cpu() {
        let cpu = units(1, Link::FREE);
        // A Jetson: the GPU reads the CPU's DRAM; a hand-over is a sync and a copy within DRAM
        // (about 10 GB/s here). A desktop GPU behind a slow PCIe link (about 0.8 GB/s, 50 µs).
        let unified = with_gpu(
            &cpu,
            "gpu",
            GpuMemory::Unified {
                copy: measured(0.02, 1e7),
            },
        );
        let pcie = measured(0.05, 8e5);
        let discrete = with_gpu(
            &cpu,
            "gpu",
            GpuMemory::Discrete {
                to_gpu: pcie,
                to_host: pcie,
            },
        );
        assert_eq!(unified.names, ["u0", "gpu"]);
        // 4 MiB activations: 0.4 ms each way in shared DRAM, 5 ms each way over the bus.
        let big = offload_chain(4 << 20);
        let plan = optimal(&big, &unified, 150_000);
        assert_eq!(plan.units, [0, 1, 0], "{plan:?}");
        assert!(plan.predicted_ms < single(&big, &unified, 150_000, 0).predicted_ms);
        let plan = optimal(&big, &discrete, 150_000);
        assert_eq!(plan.units, [0, 0, 0], "{plan:?}");
        // Small activations cross the bus cheaply: the discrete GPU takes the body too.
        let small = offload_chain(64 << 10);
        let plan = optimal(&small, &discrete, 150_000);
        assert_eq!(plan.units, [0, 1, 0], "{plan:?}");
        assert!(plan.transfer_ms > 0.1, "{plan:?}");
        // Asymmetric links are kept per direction.
        let asymmetric = with_gpu(
            &cpu,
            "gpu",
            GpuMemory::Discrete {
                to_gpu: measured(0.05, 8e5),
                to_host: measured(0.05, 4e5),
            },
        );
        assert!(asymmetric.links[1][0].ms(1 << 20) > asymmetric.links[0][1].ms(1 << 20));
        assert_eq!(GpuMemory::Unified { copy: Link::FREE }.word(), "unified");
    }

    #[test]
    fn the_dynamic_programme_matches_brute_force_on_random_chains() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for _ in 0..300 {
            let k = rng.random_range(1..=3);
            let n = rng.random_range(1..=7);
            let links: Vec<Vec<Link>> = (0..k)
                .map(|_| {
                    (0..k)
                        .map(|_| Link {
                            alpha_ms: rng.random_range(0.0..2.0),
                            beta: rng.random_range(100.0..10_000.0),
                        })
                        .collect()
                })
                .collect();
            let u = Units {
                names: (0..k).map(|i| i.to_string()).collect(),
                links,
            };
            let stages: Vec<Stage> = (0..n)
                .map(|i| Stage {
                    name: i.to_string(),
                    ms: (0..k).map(|_| rng.random_range(0.1..5.0)).collect(),
                    out_bytes: rng.random_range(0..20_000),
                })
                .collect();
            let input = rng.random_range(0..20_000);
            let dp = optimal(&stages, &u, input);
            let bf = brute_force(&stages, &u, input);
            assert!(
                (dp.predicted_ms - bf).abs() < 1e-9,
                "{} vs {bf}",
                dp.predicted_ms
            );
            let again = evaluate(&stages, &u, input, &dp.units).predicted_ms;
            assert!((again - dp.predicted_ms).abs() < 1e-9);
        }
    }

    /// A CPU that is good at the first half of a network and a GPU good at the second half.
    fn complementary() -> Vec<Stage> {
        vec![
            Stage {
                name: "a".into(),
                ms: vec![1.0, 5.0],
                out_bytes: 1 << 20,
            },
            Stage {
                name: "b".into(),
                ms: vec![1.0, 5.0],
                out_bytes: 1 << 20,
            },
            Stage {
                name: "c".into(),
                ms: vec![6.0, 1.0],
                out_bytes: 1 << 20,
            },
            Stage {
                name: "d".into(),
                ms: vec![6.0, 1.0],
                out_bytes: 4096,
            },
        ]
    }

    #[test]
    fn on_unified_memory_a_split_pays() {
        // Shared memory: a hand-over costs a few microseconds.
        let shared = units(
            2,
            Link {
                alpha_ms: 0.005,
                beta: 1e9,
            },
        );
        let plan = optimal(&complementary(), &shared, 1 << 20);
        assert_eq!(plan.units, [0, 0, 1, 1]);
        assert!(plan.predicted_ms < 4.1, "{plan:?}");
        assert!(plan.predicted_ms < single(&complementary(), &shared, 1 << 20, 0).predicted_ms);
    }

    #[test]
    fn expensive_transfers_keep_everything_on_one_unit() {
        // A slow bus: 1 MiB takes about 10 ms each way.
        let pcie = units(
            2,
            Link {
                alpha_ms: 0.5,
                beta: 1e5,
            },
        );
        let plan = optimal(&complementary(), &pcie, 1 << 20);
        assert_eq!(plan.units, [0, 0, 0, 0]);
        assert_eq!(plan.transfer_ms, 0.0);
        assert_eq!(plan.predicted_ms, 14.0);
    }

    #[test]
    fn free_links_pick_each_stage_s_fastest_unit() {
        let plan = optimal(&complementary(), &units(2, Link::FREE), 0);
        assert_eq!(plan.units, [0, 0, 1, 1]);
        assert_eq!(plan.predicted_ms, 4.0);
    }

    #[test]
    fn a_link_is_fitted_from_copy_times() -> crate::error::Result<()> {
        // 0.01 ms + bytes / 2e6 bytes per ms.
        let samples: Vec<(u64, f64)> = [4096u64, 65536, 1 << 20, 4 << 20]
            .iter()
            .map(|&b| (b, 0.01 + b as f64 / 2e6))
            .collect();
        let link = fit_link(&samples).context("missing")?;
        assert!((link.alpha_ms - 0.01).abs() < 1e-9);
        assert!((link.beta - 2e6).abs() / 2e6 < 1e-9);
        assert!(fit_link(&[(10, 1.0)]).is_none());
        // Flat times: no bandwidth term.
        assert_eq!(
            fit_link(&[(10, 1.0), (20, 1.0)]).context("missing")?.beta,
            f64::INFINITY
        );
        Ok(())
    }

    #[test]
    fn residual_networks_are_cut_between_their_blocks_only() -> crate::error::Result<()> {
        let params = crate::models::zoo::ModelParams {
            num_classes: 10,
            channels: 3,
            height: 32,
            width: 32,
            batch: 1,
        };
        let model = crate::models::zoo::build("resnet34", &params)?;
        let all = blocks(&model, usize::MAX);
        // Contiguous, covering every layer.
        assert_eq!(all.first().context("missing")?.first, 0);
        assert_eq!(all.last().context("missing")?.end, model.layers.len());
        for w in all.windows(2) {
            assert_eq!(w[0].end, w[1].first);
        }
        // No cut inside a residual block: no layer after a cut reads a value before it, other
        // than the tensor at the cut.
        for b in &all {
            for layer in &model.layers[b.end..] {
                for v in &layer.inputs {
                    if let ValueId::Layer(j) = v {
                        assert!(
                            *j + 1 >= b.end,
                            "{} reads layer {j} across {}",
                            layer.name,
                            b.name
                        );
                    } else {
                        panic!("{} reads the input after a cut", layer.name);
                    }
                }
            }
        }
        assert!(all.len() >= 8, "{}", all.len());
        let few = blocks(&model, 4);
        assert_eq!(few.len(), 4);
        assert_eq!(few.last().context("missing")?.end, model.layers.len());
        assert_eq!(few.last().context("missing")?.out_bytes, 10 * 4);
        Ok(())
    }
}
