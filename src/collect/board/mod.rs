//! The board's performance state: what decides how fast the same work runs from one run to the
//! next (CPU frequency governors and limits, turbo, idle states; a Jetson's power mode,
//! `jetson_clocks`, GPU and memory clocks and fan; a Raspberry Pi's clocks and throttling; a
//! discrete GPU's persistence mode, application clocks and power limit). Read from a root path
//! (`/`, or a fixture tree in tests), kept beside every run, compared between runs and checked
//! before a sweep. Every source is optional: where one is absent, the state says why.

pub mod lock;
mod readers;

pub use readers::{
    parse_nvpmodel_conf, parse_nvpmodel_query, parse_nvpmodel_status, parse_power_profile,
    parse_vcgencmd_clock, read, Commands, FixtureCommands, LiveCommands,
};

use serde::{Deserialize, Serialize};

/// One source of the state: what it found, or why there is nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Found<T> {
    Found(T),
    Absent(String),
}

impl<T> Found<T> {
    pub fn get(&self) -> Option<&T> {
        match self {
            Found::Found(t) => Some(t),
            Found::Absent(_) => None,
        }
    }
}

impl<T> Default for Found<T> {
    fn default() -> Self {
        Found::Absent("not read".to_string())
    }
}

/// One cpufreq policy (a group of CPUs that share a clock). Frequencies in kHz, as sysfs has
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuPolicy {
    /// `policy0`, …
    pub policy: String,
    pub cpus: Vec<usize>,
    pub driver: Option<String>,
    pub governor: Option<String>,
    /// The limits the governor keeps to (`scaling_min_freq`, `scaling_max_freq`).
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    pub cur_khz: Option<u64>,
    /// What the hardware allows (`cpuinfo_min_freq`, `cpuinfo_max_freq`).
    pub hw_min_khz: Option<u64>,
    pub hw_max_khz: Option<u64>,
}

impl CpuPolicy {
    /// The clock held at the hardware's maximum (as `jetson_clocks` or `board lock` leave it).
    pub fn pinned_at_max(&self) -> bool {
        matches!((self.min_khz, self.hw_max_khz), (Some(min), Some(max)) if min >= max)
    }

    /// The upper limit lowered below what the hardware allows.
    pub fn capped(&self) -> Option<(u64, u64)> {
        match (self.max_khz, self.hw_max_khz) {
            (Some(limit), Some(hw)) if limit < hw => Some((limit, hw)),
            _ => None,
        }
    }
}

/// Turbo / boost: whether the CPU may run above its base clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turbo {
    pub on: bool,
    /// The file that says so (and that turns it off).
    pub file: String,
}

/// The idle states the kernel may put a CPU in (CPU 0's), and the driver that manages them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleStates {
    pub driver: Option<String>,
    pub states: Vec<IdleState>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleState {
    pub name: String,
    pub disabled: bool,
    /// Exit latency, µs.
    pub latency_us: Option<u64>,
}

/// An nvpmodel power mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerMode {
    pub id: u32,
    pub name: String,
}

impl std::fmt::Display for PowerMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.id)
    }
}

/// A devfreq device (a Jetson's GPU). Frequencies in Hz.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Devfreq {
    pub device: String,
    pub governor: Option<String>,
    pub min_hz: Option<u64>,
    pub max_hz: Option<u64>,
    pub cur_hz: Option<u64>,
    /// The highest of `available_frequencies`.
    pub available_max_hz: Option<u64>,
}

impl Devfreq {
    pub fn pinned(&self) -> bool {
        matches!((self.min_hz, self.max_hz), (Some(a), Some(b)) if a >= b)
    }

    pub fn capped(&self) -> Option<(u64, u64)> {
        match (self.max_hz, self.available_max_hz) {
            (Some(limit), Some(hw)) if limit < hw => Some((limit, hw)),
            _ => None,
        }
    }
}

/// A Jetson's power state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Jetson {
    /// The nvpmodel mode in force.
    pub mode: Found<PowerMode>,
    /// The board's fastest mode (MAXN where the board has one, else mode 0).
    pub fastest: Option<PowerMode>,
    /// nvpmodel's fan mode (`quiet`, `cool`), where it keeps one.
    pub fan_mode: Option<String>,
    pub gpu: Found<Devfreq>,
    pub emc_hz: Found<u64>,
    /// The fan's PWM, 0–255.
    pub fan_pwm: Found<u32>,
}

/// A Raspberry Pi's clocks and throttling, from the firmware (`vcgencmd`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pi {
    pub arm_hz: Found<u64>,
    pub core_hz: Found<u64>,
    /// `get_throttled`: in effect now, and since boot, in words.
    pub throttled_now: Found<Vec<String>>,
    pub throttled_since_boot: Vec<String>,
}

/// A discrete NVIDIA GPU's settings (NVML).
pub use crate::collect::telemetry::nvml::GpuSettings as NvidiaGpu;

/// An AMD GPU's power settings (amdgpu sysfs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AmdGpu {
    pub card: String,
    /// `power_dpm_force_performance_level`: auto, high, low, manual, profile_*.
    pub performance_level: Option<String>,
    /// The active entry of `pp_power_profile_mode`.
    pub power_profile: Option<String>,
}

/// Everything read, each source found or absent with its reason.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BoardState {
    pub cpufreq: Found<Vec<CpuPolicy>>,
    pub turbo: Found<Turbo>,
    pub idle: Found<IdleStates>,
    pub jetson: Found<Jetson>,
    pub pi: Found<Pi>,
    pub nvidia: Found<Vec<NvidiaGpu>>,
    pub amd: Found<Vec<AmdGpu>>,
}

/// A frequency in words.
pub fn hz(v: u64) -> String {
    if v >= 1_000_000_000 {
        format!("{:.2} GHz", v as f64 / 1e9)
    } else {
        format!("{} MHz", (v as f64 / 1e6).round())
    }
}

fn khz(v: u64) -> String {
    hz(v.saturating_mul(1000))
}

/// Something in the state that makes a measurement less repeatable, with the command that
/// fixes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub problem: String,
    pub fix: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (fix: {})", self.problem, self.fix)
    }
}

impl BoardState {
    /// The policies, where cpufreq is here.
    fn policies(&self) -> &[CpuPolicy] {
        self.cpufreq.get().map_or(&[], Vec::as_slice)
    }

    /// Whether `jetson_clocks` is in force: every CPU clock held at its maximum and the GPU's
    /// minimum raised to its maximum. None off a Jetson.
    pub fn jetson_clocks(&self) -> Option<bool> {
        let jetson = self.jetson.get()?;
        let cpus = self.policies();
        let cpu_pinned = !cpus.is_empty() && cpus.iter().all(CpuPolicy::pinned_at_max);
        let gpu_pinned = jetson.gpu.get().is_none_or(Devfreq::pinned);
        Some(cpu_pinned && gpu_pinned)
    }

    /// The state in named parts, each as comparable text: what `compare` holds two runs to.
    pub fn parts(&self) -> Vec<(String, String)> {
        let mut parts = Vec::new();
        if let Some(j) = self.jetson.get() {
            if let Some(mode) = j.mode.get() {
                parts.push(("power mode".to_string(), mode.to_string()));
            }
            if let Some(on) = self.jetson_clocks() {
                parts.push((
                    "jetson_clocks".to_string(),
                    if on { "on" } else { "off" }.to_string(),
                ));
            }
            if let Some(g) = j.gpu.get() {
                if let Some(max) = g.max_hz {
                    parts.push(("GPU clock limit".to_string(), hz(max)));
                }
            }
        }
        let mut governors: Vec<String> = self
            .policies()
            .iter()
            .filter_map(|p| p.governor.clone())
            .collect();
        governors.sort();
        governors.dedup();
        if !governors.is_empty() {
            parts.push(("CPU governor".to_string(), governors.join(", ")));
        }
        for p in self.policies() {
            if let Some(max) = p.max_khz {
                parts.push((format!("CPU clock limit ({})", p.policy), khz(max)));
            }
        }
        if let Some(t) = self.turbo.get() {
            parts.push((
                "turbo".to_string(),
                if t.on { "on" } else { "off" }.to_string(),
            ));
        }
        if let Some(pi) = self.pi.get() {
            if let Some(now) = pi.throttled_now.get() {
                parts.push((
                    "throttling".to_string(),
                    if now.is_empty() {
                        "none".to_string()
                    } else {
                        now.join(", ")
                    },
                ));
            }
        }
        for g in self.nvidia.get().map_or(&[][..], Vec::as_slice) {
            let clocks = match (g.app_sm_mhz, g.app_mem_mhz) {
                (Some(sm), Some(mem)) => format!("{sm} MHz SM, {mem} MHz memory"),
                _ => "unknown".to_string(),
            };
            parts.push((format!("GPU {} application clocks", g.index), clocks));
            if let Some(w) = g.power_limit_w {
                parts.push((format!("GPU {} power limit", g.index), format!("{w:.0} W")));
            }
        }
        for g in self.amd.get().map_or(&[][..], Vec::as_slice) {
            if let Some(level) = &g.performance_level {
                parts.push((format!("{} performance level", g.card), level.clone()));
            }
        }
        parts
    }

    /// The state in one line, e.g. `power mode MAXN (0), jetson_clocks on, CPU governor
    /// schedutil`; or what could not be read.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .parts()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("CPU clock limit ("))
            .map(|(name, value)| format!("{name} {value}"))
            .collect();
        if parts.is_empty() {
            match &self.cpufreq {
                Found::Absent(why) => format!("no clock state: {why}"),
                Found::Found(_) => "no clock state".to_string(),
            }
        } else {
            parts.join(", ")
        }
    }

    /// What makes a measurement in this state less repeatable, each with its fix.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        let slow: Vec<&CpuPolicy> = self
            .policies()
            .iter()
            // A clock pinned at its maximum does not follow its governor.
            .filter(|p| {
                p.governor.as_deref().is_some_and(|g| g != "performance") && !p.pinned_at_max()
            })
            .collect();
        if let Some(first) = slow.first() {
            let governors: Vec<String> = slow
                .iter()
                .map(|p| {
                    format!(
                        "{} on CPUs {}",
                        p.governor.as_deref().unwrap_or("?"),
                        crate::collect::device::cpu_list(&p.cpus)
                    )
                })
                .collect();
            out.push(Warning {
                problem: format!(
                    "the CPU frequency governor is not `performance` ({}): the clock follows the \
                     load, so the first iterations run slower",
                    governors.join("; ")
                ),
                fix: format!(
                    "sudo edgeprof board lock, or echo performance | sudo tee \
                     /sys/devices/system/cpu/cpufreq/{}/scaling_governor (each policy)",
                    first.policy
                ),
            });
        }
        for p in self.policies() {
            if let Some((limit, hw)) = p.capped() {
                out.push(Warning {
                    problem: format!(
                        "CPUs {} are limited to {} of their {}",
                        crate::collect::device::cpu_list(&p.cpus),
                        khz(limit),
                        khz(hw)
                    ),
                    fix: format!(
                        "echo {hw} | sudo tee /sys/devices/system/cpu/cpufreq/{}/scaling_max_freq",
                        p.policy
                    ),
                });
            }
        }
        if let Some(t) = self.turbo.get().filter(|t| t.on) {
            let (value, what) = if t.file.ends_with("no_turbo") {
                ("1", "turbo")
            } else {
                ("0", "boost")
            };
            out.push(Warning {
                problem: format!(
                    "{what} is on: the clock depends on temperature and on how many cores are busy"
                ),
                fix: format!("echo {value} | sudo tee {}", t.file),
            });
        }
        if let Some(j) = self.jetson.get() {
            if let (Some(mode), Some(fastest)) = (j.mode.get(), &j.fastest) {
                if mode.id != fastest.id {
                    out.push(Warning {
                        problem: format!(
                            "the power mode is {mode}, below the board's fastest, {fastest}"
                        ),
                        fix: format!("sudo nvpmodel -m {}", fastest.id),
                    });
                }
            }
            if self.jetson_clocks() == Some(false) {
                out.push(Warning {
                    problem: "jetson_clocks is off: the CPU, GPU and memory clocks follow the load"
                        .to_string(),
                    fix: "sudo jetson_clocks (or sudo edgeprof board lock, which puts the \
                          clocks back after)"
                        .to_string(),
                });
            }
            if let Some((limit, hw)) = j.gpu.get().and_then(Devfreq::capped) {
                out.push(Warning {
                    problem: format!("the GPU is limited to {} of its {}", hz(limit), hz(hw)),
                    fix: "sudo jetson_clocks".to_string(),
                });
            }
        }
        if let Some(now) = self.pi.get().and_then(|p| p.throttled_now.get()) {
            if !now.is_empty() {
                out.push(Warning {
                    problem: format!("the firmware is throttling now: {}", now.join(", ")),
                    fix: "a power supply that holds 5.1 V under load (under-voltage), a heatsink \
                          or fan (temperature); vcgencmd get_throttled shows it"
                        .to_string(),
                });
            }
        }
        out
    }

    /// How two states differ, part by part (`name: A …, B …`); empty when they agree on every
    /// part both recorded.
    pub fn differences(a: &BoardState, b: &BoardState) -> Vec<String> {
        let pa = a.parts();
        let pb = b.parts();
        let mut out = Vec::new();
        for (name, va) in &pa {
            if let Some((_, vb)) = pb.iter().find(|(n, _)| n == name) {
                if va != vb {
                    out.push(format!("{name}: A {va}, B {vb}"));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
