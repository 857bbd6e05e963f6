//! Hardware event counters through `perf_event_open(2)`: which events measure FLOPs
//! and cache traffic on this CPU, opening them on this process and the threads it creates later,
//! and turning the counts into FLOPs and bytes per inference.
//!
//! Events, by vendor (raw codes are only opened on CPUs known to implement them, because the
//! kernel accepts any raw code and an unimplemented one counts garbage or zero):
//! - Intel (Broadwell and later big cores, not hybrid parts): `FP_ARITH_INST_RETIRED` (event
//!   0xC7), one umask per width and precision, weighted by lanes (an FMA is counted twice by the
//!   event itself).
//! - AMD (Zen, family 17h and later): `RETIRED_SSE_AVX_FLOPS` (PMCx003, umask 0xFF on 17h, 0x0F
//!   later), which counts FLOPs directly; the kernel pairs it with the merge event.
//! - Arm (PMUv3, where the PMU lists them in sysfs): `FP_FIXED_OPS_SPEC` (0x80C1) and
//!   `FP_SCALE_OPS_SPEC` (0x80C0, per 128 bits of SVE vector length).
//! - Everywhere: the kernel's generic cache events, L1D read (and write) misses × line size as the
//!   traffic between L1 and L2, last-level read (and write) misses × line size as DRAM traffic.
//!
//! It also probes whether any counter can be opened and says why not when it cannot: a virtual
//! machine or CPU without an exposed PMU (ENOENT, EOPNOTSUPP), a `perf_event_paranoid` setting
//! that forbids it (EACCES, EPERM), or a kernel built without perf events (ENOSYS).

use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// `struct perf_event_attr` as of PERF_ATTR_SIZE_VER0 (64 bytes), the layout every kernel
/// since 2.6.31 accepts.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttrV0 {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0 `disabled`, bit 1 `inherit`, bit 5 `exclude_kernel`, bit 6 `exclude_hv`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_TYPE_RAW: u32 = 4;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const FLAG_DISABLED: u64 = 1;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
/// read_format: PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING.
const READ_TIMES: u64 = 1 | 2;
/// `_IO('$', 0)`, `_IO('$', 1)`, `_IO('$', 3)`.
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_RESET: libc::c_ulong = 0x2403;

/// Generic cache event config: cache id | operation << 8 | result << 16.
const fn cache_event(cache: u64, op: u64, result: u64) -> u64 {
    cache | (op << 8) | (result << 16)
}
const CACHE_L1D: u64 = 0;
const CACHE_LL: u64 = 2;
const OP_READ: u64 = 0;
const OP_WRITE: u64 = 1;
const RESULT_MISS: u64 = 1;

/// Why counters are unavailable, from the errno of perf_event_open.
pub fn reason(errno: i32, paranoid: Option<i32>) -> String {
    match errno {
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV => {
            "the CPU exposes no hardware events here (a virtual machine, or a PMU the kernel does not drive)".to_string()
        }
        libc::EACCES | libc::EPERM => format!(
            "not permitted: kernel.perf_event_paranoid is {}; lower it (sysctl kernel.perf_event_paranoid=1) or run as root",
            paranoid.map_or("unknown".to_string(), |p| p.to_string())
        ),
        libc::ENOSYS => "the kernel was built without perf events".to_string(),
        other => format!(
            "perf_event_open failed: {}",
            std::io::Error::from_raw_os_error(other)
        ),
    }
}

/// Opens one counting event on this process (and, with `inherit`, the threads it creates later),
/// disabled; the reason in words when the kernel refuses.
fn open(kind: u32, config: u64, inherit: bool) -> Result<OwnedFd, String> {
    let attr = PerfEventAttrV0 {
        kind,
        size: std::mem::size_of::<PerfEventAttrV0>() as u32,
        config,
        read_format: READ_TIMES,
        flags: FLAG_DISABLED
            | FLAG_EXCLUDE_KERNEL
            | FLAG_EXCLUDE_HV
            | if inherit { FLAG_INHERIT } else { 0 },
        ..Default::default()
    };
    // SAFETY: the attribute struct is a valid PERF_ATTR_SIZE_VER0 layout that outlives the
    // call; the arguments ask for this process (pid 0) on any CPU (-1) with no group (-1).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttrV0,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd >= 0 {
        // SAFETY: fd is a descriptor perf_event_open just returned to us and nothing else owns.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) });
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse().ok());
    Err(reason(errno, paranoid))
}

/// Ok when a hardware counter can be opened on this process, else why not.
pub fn probe() -> Result<(), crate::error::Unavailable> {
    open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, false)
        .map(drop)
        .map_err(Into::into)
}

/// What an event's count stands for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measures {
    /// Floating-point operations: count × this many FLOPs.
    Flops(f64),
    /// Lines brought into (or written back from) the first-level data cache.
    L1dMisses,
    /// Lines missed in the last-level cache.
    LastLevelMisses,
}

/// One event to open.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSpec {
    pub name: &'static str,
    kind: u32,
    config: u64,
    pub measures: Measures,
}

/// The events chosen for a CPU, and what was left out and why.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// The CPU as edgeprof recognised it, in words.
    pub cpu: String,
    pub events: Vec<EventSpec>,
    /// Why FLOPs cannot be counted here, when they cannot.
    pub no_flops: Option<String>,
}

/// Intel family-6 big-core models with `FP_ARITH_INST_RETIRED` (Broadwell and later, not hybrid).
const INTEL_FP_ARITH_MODELS: &[u32] = &[
    0x3D, 0x47, 0x4F, 0x56, // Broadwell
    0x4E, 0x5E, 0x55, // Skylake, Cascade Lake, Cooper Lake
    0x8E, 0x9E, 0xA5, 0xA6, // Kaby, Coffee, Whiskey, Comet Lake
    0x66, 0x6A, 0x6C, 0x7D, 0x7E, 0x9D, // Cannon, Ice Lake
    0x8C, 0x8D, 0xA7, // Tiger, Rocket Lake
    0x8F, 0xCF, 0xAD, 0xAE, // Sapphire, Emerald, Granite Rapids
];

fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn parse_number(text: &str) -> Option<u32> {
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Whether any PMU under `root`/sys/bus/event_source/devices lists the named event.
fn pmu_lists(root: &Path, event: &str) -> bool {
    let Ok(dirs) = std::fs::read_dir(root.join("sys/bus/event_source/devices")) else {
        return false;
    };
    dirs.flatten()
        .any(|d| d.path().join("events").join(event).exists())
}

/// The events to open on the CPU described under `root` (`/proc/cpuinfo`, the PMUs in sysfs).
pub fn plan(root: &Path) -> Plan {
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap_or_default();
    let mut events = vec![
        EventSpec {
            name: "L1D read misses",
            kind: PERF_TYPE_HW_CACHE,
            config: cache_event(CACHE_L1D, OP_READ, RESULT_MISS),
            measures: Measures::L1dMisses,
        },
        EventSpec {
            name: "L1D write misses",
            kind: PERF_TYPE_HW_CACHE,
            config: cache_event(CACHE_L1D, OP_WRITE, RESULT_MISS),
            measures: Measures::L1dMisses,
        },
        EventSpec {
            name: "LL read misses",
            kind: PERF_TYPE_HW_CACHE,
            config: cache_event(CACHE_LL, OP_READ, RESULT_MISS),
            measures: Measures::LastLevelMisses,
        },
        EventSpec {
            name: "LL write misses",
            kind: PERF_TYPE_HW_CACHE,
            config: cache_event(CACHE_LL, OP_WRITE, RESULT_MISS),
            measures: Measures::LastLevelMisses,
        },
    ];
    let vendor = cpuinfo_field(&cpuinfo, "vendor_id");
    let family = cpuinfo_field(&cpuinfo, "cpu family").and_then(parse_number);
    let model = cpuinfo_field(&cpuinfo, "model").and_then(parse_number);
    let (cpu, flops): (String, Result<Vec<EventSpec>, String>) = match (vendor, family, model) {
        (Some("GenuineIntel"), Some(6), Some(model)) => {
            let cpu = format!("Intel family 6 model {model:#x}");
            let hybrid = root.join("sys/bus/event_source/devices/cpu_core").exists();
            if hybrid {
                let why = "a hybrid Intel CPU: edgeprof does not open raw events on its cpu_core and cpu_atom PMUs yet";
                (cpu, Err(why.to_string()))
            } else if INTEL_FP_ARITH_MODELS.contains(&model) {
                let lanes: [(&'static str, u64, f64); 8] = [
                    ("FP_ARITH_INST_RETIRED.SCALAR_DOUBLE", 0x01, 1.0),
                    ("FP_ARITH_INST_RETIRED.SCALAR_SINGLE", 0x02, 1.0),
                    ("FP_ARITH_INST_RETIRED.128B_PACKED_DOUBLE", 0x04, 2.0),
                    ("FP_ARITH_INST_RETIRED.128B_PACKED_SINGLE", 0x08, 4.0),
                    ("FP_ARITH_INST_RETIRED.256B_PACKED_DOUBLE", 0x10, 4.0),
                    ("FP_ARITH_INST_RETIRED.256B_PACKED_SINGLE", 0x20, 8.0),
                    ("FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE", 0x40, 8.0),
                    ("FP_ARITH_INST_RETIRED.512B_PACKED_SINGLE", 0x80, 16.0),
                ];
                let specs = lanes
                    .iter()
                    .map(|&(name, umask, per)| EventSpec {
                        name,
                        kind: PERF_TYPE_RAW,
                        config: 0xC7 | (umask << 8),
                        measures: Measures::Flops(per),
                    })
                    .collect();
                (cpu, Ok(specs))
            } else {
                let why = format!("{cpu} is not one edgeprof knows to count FP_ARITH_INST_RETIRED (Broadwell or later)");
                (cpu, Err(why))
            }
        }
        (Some("AuthenticAMD"), Some(family), _) if family >= 0x17 => {
            let umask = if family == 0x17 { 0xFF } else { 0x0F };
            let spec = EventSpec {
                name: "RETIRED_SSE_AVX_FLOPS",
                kind: PERF_TYPE_RAW,
                config: 0x03 | (umask << 8),
                measures: Measures::Flops(1.0),
            };
            (format!("AMD family {family:#x}"), Ok(vec![spec]))
        }
        _ => match cpuinfo_field(&cpuinfo, "CPU implementer") {
            Some(implementer) => {
                let cpu = format!(
                    "Arm implementer {implementer} part {}",
                    cpuinfo_field(&cpuinfo, "CPU part").unwrap_or("?")
                );
                if pmu_lists(root, "fp_fixed_ops_spec") {
                    let mut specs = vec![EventSpec {
                        name: "FP_FIXED_OPS_SPEC",
                        kind: PERF_TYPE_RAW,
                        config: 0x80C1,
                        measures: Measures::Flops(1.0),
                    }];
                    if pmu_lists(root, "fp_scale_ops_spec") {
                        // Counted per 128 bits of vector length.
                        let vl_bytes: f64 = std::fs::read_to_string(
                            root.join("proc/sys/abi/sve_default_vector_length"),
                        )
                        .ok()
                        .and_then(|t| t.trim().parse().ok())
                        .unwrap_or(16.0);
                        specs.push(EventSpec {
                            name: "FP_SCALE_OPS_SPEC",
                            kind: PERF_TYPE_RAW,
                            config: 0x80C0,
                            measures: Measures::Flops(vl_bytes / 16.0),
                        });
                    }
                    (cpu, Ok(specs))
                } else {
                    let why = format!("{cpu}: its PMU does not list FP_FIXED_OPS_SPEC (an Armv8.0–8.x core without the FLOP-counting events)");
                    (cpu, Err(why))
                }
            }
            None => (
                "an unrecognised CPU".to_string(),
                Err("edgeprof knows no FLOP-counting event for this CPU".to_string()),
            ),
        },
    };
    let no_flops = match flops {
        Ok(mut specs) => {
            events.append(&mut specs);
            None
        }
        Err(why) => Some(why),
    };
    Plan {
        cpu,
        events,
        no_flops,
    }
}

/// Counters open on this process and the threads it starts afterwards.
pub struct Counters {
    open: Vec<(EventSpec, OwnedFd)>,
    refused: Vec<String>,
    no_flops: Option<String>,
}

/// One event's count over the counted region, scaled for multiplexing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Count {
    pub event: String,
    pub measures: Measures,
    pub value: f64,
    /// Fraction of the enabled time the event was on a counter (1 when not multiplexed).
    pub running: f64,
}

/// What the counters saw over `iterations` inferences.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterReport {
    pub iterations: usize,
    /// The first-level data cache's line size where the counts were taken.
    #[serde(default = "default_line")]
    pub line_bytes: u64,
    pub counts: Vec<Count>,
    /// Events that could not be opened or read, each with the reason.
    #[serde(default)]
    pub unavailable: Vec<String>,
}

impl Counters {
    /// Opens the planned events (those the kernel refuses are listed with the reason); an error
    /// with the reason when none opens at all.
    pub fn open(plan: &Plan) -> Result<Counters, crate::error::Unavailable> {
        let mut open_events = Vec::new();
        let mut refused = Vec::new();
        for spec in &plan.events {
            match open(spec.kind, spec.config, true) {
                Ok(fd) => open_events.push((spec.clone(), fd)),
                Err(why) => refused.push(format!("{}: {why}", spec.name)),
            }
        }
        if open_events.is_empty() {
            return Err(crate::error::Unavailable::from(
                refused
                    .first()
                    .and_then(|r| r.split_once(": "))
                    .map_or("no events planned".to_string(), |(_, why)| why.to_string()),
            ));
        }
        Ok(Counters {
            open: open_events,
            refused,
            no_flops: plan.no_flops.clone(),
        })
    }

    fn ioctl_all(&self, request: libc::c_ulong) {
        for (_, fd) in &self.open {
            // SAFETY: a perf event descriptor we own; these ioctls take no argument.
            unsafe { libc::ioctl(fd.as_raw_fd(), request as _, 0) };
        }
    }

    /// Zeroes the counts.
    pub fn reset(&self) {
        self.ioctl_all(IOC_RESET);
    }

    /// Counts from now on, adding to what was counted before.
    pub fn resume(&self) {
        self.ioctl_all(IOC_ENABLE);
    }

    /// Stops counting.
    pub fn stop(&self) {
        self.ioctl_all(IOC_DISABLE);
    }

    /// The counts so far, over `iterations` inferences.
    pub fn read(&self, iterations: usize) -> CounterReport {
        let mut report = CounterReport {
            iterations,
            line_bytes: line_bytes(Path::new("/")),
            counts: Vec::new(),
            unavailable: self.refused.clone(),
        };
        if let Some(why) = &self.no_flops {
            report.unavailable.push(format!("FLOPs: {why}"));
        }
        for (spec, fd) in &self.open {
            let mut values = [0u64; 3];
            // SAFETY: reading into a buffer of the size the read_format asks for.
            let n = unsafe {
                libc::read(
                    fd.as_raw_fd(),
                    values.as_mut_ptr().cast(),
                    std::mem::size_of_val(&values),
                )
            };
            if n != std::mem::size_of_val(&values) as isize {
                report
                    .unavailable
                    .push(format!("{}: the counter could not be read", spec.name));
                continue;
            }
            let [value, enabled, running] = values;
            if running == 0 {
                report.unavailable.push(format!(
                    "{}: never scheduled on a counter (too many events at once)",
                    spec.name
                ));
                continue;
            }
            let share = running as f64 / enabled.max(1) as f64;
            report.counts.push(Count {
                event: spec.name.to_string(),
                measures: spec.measures,
                value: value as f64 / share,
                running: share,
            });
        }
        report
    }
}

fn default_line() -> u64 {
    64
}

/// The first-level data cache's line size as sysfs reports it under `root`, else 64 bytes.
pub fn line_bytes(root: &Path) -> u64 {
    std::fs::read_to_string(
        root.join("sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size"),
    )
    .ok()
    .and_then(|t| t.trim().parse().ok())
    .filter(|&n: &u64| n.is_power_of_two() && n >= 16)
    .unwrap_or(64)
}

/// FLOPs and bytes per inference derived from a counter report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    pub flops: Option<f64>,
    /// Bytes between L1 and L2: L1D misses × line size.
    pub l2_bytes: Option<f64>,
    /// Bytes from DRAM: last-level misses × line size.
    pub dram_bytes: Option<f64>,
    /// Which events each figure rests on, in words.
    pub basis: Vec<String>,
}

impl Derived {
    /// Whether the counts gave any per-level traffic (what places a point by counters).
    pub fn has_traffic(&self) -> bool {
        self.l2_bytes.is_some() || self.dram_bytes.is_some()
    }
}

impl CounterReport {
    /// Per-inference FLOPs and traffic. A figure whose events did not all count is left out.
    pub fn derive(&self) -> Derived {
        let line_bytes = self.line_bytes;
        let per = self.iterations.max(1) as f64;
        let flop_refused = self
            .unavailable
            .iter()
            .any(|u| u.starts_with("FLOPs:") || u.starts_with("FP_") || u.starts_with("RETIRED_"));
        let mut d = Derived::default();
        let flop_counts: Vec<&Count> = self
            .counts
            .iter()
            .filter(|c| matches!(c.measures, Measures::Flops(_)))
            .collect();
        if !flop_counts.is_empty() && !flop_refused {
            let total: f64 = flop_counts
                .iter()
                .map(|c| match c.measures {
                    Measures::Flops(per_count) => c.value * per_count,
                    _ => 0.0,
                })
                .sum();
            d.flops = Some(total / per);
            let names: Vec<&str> = flop_counts.iter().map(|c| c.event.as_str()).collect();
            d.basis.push(format!("FLOPs from {}", names.join(" + ")));
        }
        let mut lines = |measures: Measures, level: &str| -> Option<f64> {
            let counts: Vec<&Count> = self
                .counts
                .iter()
                .filter(|c| c.measures == measures)
                .collect();
            if counts.is_empty() {
                return None;
            }
            let total: f64 = counts.iter().map(|c| c.value).sum();
            let names: Vec<&str> = counts.iter().map(|c| c.event.as_str()).collect();
            d.basis.push(format!(
                "{level} bytes = ({}) × {line_bytes} B",
                names.join(" + ")
            ));
            Some(total * line_bytes as f64 / per)
        };
        let l2 = lines(Measures::L1dMisses, "L2");
        let dram = lines(Measures::LastLevelMisses, "DRAM");
        d.l2_bytes = l2;
        d.dram_bytes = dram;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_is_the_version_0_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttrV0>(), 64);
    }

    #[test]
    fn refusals_are_explained() {
        assert!(reason(libc::ENOENT, None).contains("virtual machine"));
        assert!(reason(libc::EACCES, Some(3)).contains("perf_event_paranoid is 3"));
        assert!(reason(libc::ENOSYS, None).contains("without perf events"));
        assert!(reason(libc::EINVAL, None).starts_with("perf_event_open failed"));
    }

    #[test]
    fn probing_never_fails_the_caller() {
        // Whatever this machine allows, the answer is a value: Ok, or a reason in words.
        if let Err(why) = probe() {
            assert!(!why.is_empty());
        }
    }

    #[test]
    fn opening_here_gives_counters_or_a_reason() {
        match Counters::open(&plan(Path::new("/"))) {
            Ok(c) => {
                c.reset();
                c.resume();
                let x: f64 = (0..1000).map(|i| f64::from(i).sqrt()).sum();
                c.stop();
                assert!(x > 0.0);
                let report = c.read(1);
                assert!(report.counts.iter().all(|k| k.value >= 0.0));
            }
            Err(why) => assert!(!why.is_empty()),
        }
    }

    /// A fake root with the given /proc/cpuinfo and PMU event files.
    fn root_with(cpuinfo: &str, pmu_events: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        write(dir.path(), "proc/cpuinfo", cpuinfo);
        for (pmu, event) in pmu_events {
            let path = format!("sys/bus/event_source/devices/{pmu}/events/{event}");
            write(dir.path(), &path, "event=0x1\n");
        }
        dir
    }

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                panic!("{e}");
            }
        }
        if let Err(e) = std::fs::write(&path, text) {
            panic!("{}: {e}", path.display());
        }
    }

    fn flop_events(p: &Plan) -> Vec<(&'static str, u64, f64)> {
        p.events
            .iter()
            .filter_map(|e| match e.measures {
                Measures::Flops(per) => Some((e.name, e.config, per)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn intel_skylake_counts_fp_arith_by_lanes() {
        let root = root_with(
            "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n",
            &[("cpu", "cycles")],
        );
        let p = plan(root.path());
        assert_eq!(p.cpu, "Intel family 6 model 0x55");
        assert_eq!(p.no_flops, None);
        let f = flop_events(&p);
        assert_eq!(f.len(), 8);
        assert_eq!(f[0], ("FP_ARITH_INST_RETIRED.SCALAR_DOUBLE", 0x01C7, 1.0));
        assert_eq!(
            f[5],
            ("FP_ARITH_INST_RETIRED.256B_PACKED_SINGLE", 0x20C7, 8.0)
        );
        assert_eq!(
            f[7],
            ("FP_ARITH_INST_RETIRED.512B_PACKED_SINGLE", 0x80C7, 16.0)
        );
        // The cache events are always planned.
        assert_eq!(p.events.len(), 12);
    }

    #[test]
    fn unknown_and_hybrid_intel_parts_fall_back_with_a_reason() {
        let haswell = root_with(
            "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 60\n",
            &[],
        );
        let p = plan(haswell.path());
        assert!(flop_events(&p).is_empty());
        assert!(p.no_flops.is_some_and(|w| w.contains("Broadwell or later")));
        let alder = root_with(
            "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 151\n",
            &[("cpu_core", "cycles"), ("cpu_atom", "cycles")],
        );
        assert!(plan(alder.path())
            .no_flops
            .is_some_and(|w| w.contains("hybrid")));
    }

    #[test]
    fn amd_zen_uses_retired_sse_avx_flops() {
        let zen2 = root_with(
            "vendor_id : AuthenticAMD\ncpu family : 23\nmodel : 49\n",
            &[],
        );
        assert_eq!(
            flop_events(&plan(zen2.path())),
            vec![("RETIRED_SSE_AVX_FLOPS", 0xFF03, 1.0)]
        );
        let zen4 = root_with(
            "vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 97\n",
            &[],
        );
        assert_eq!(
            flop_events(&plan(zen4.path())),
            vec![("RETIRED_SSE_AVX_FLOPS", 0x0F03, 1.0)]
        );
    }

    #[test]
    fn arm_counts_flops_only_where_the_pmu_lists_the_events() {
        let pi4 = root_with(
            "CPU implementer\t: 0x41\nCPU part\t: 0xd08\n",
            &[("armv8_cortex_a72", "l1d_cache_refill")],
        );
        let p = plan(pi4.path());
        assert_eq!(p.cpu, "Arm implementer 0x41 part 0xd08");
        assert!(flop_events(&p).is_empty());
        assert!(p.no_flops.is_some_and(|w| w.contains("FP_FIXED_OPS_SPEC")));
        let v2 = root_with(
            "CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n",
            &[
                ("armv8_pmuv3_0", "fp_fixed_ops_spec"),
                ("armv8_pmuv3_0", "fp_scale_ops_spec"),
            ],
        );
        write(v2.path(), "proc/sys/abi/sve_default_vector_length", "32\n");
        assert_eq!(
            flop_events(&plan(v2.path())),
            vec![
                ("FP_FIXED_OPS_SPEC", 0x80C1, 1.0),
                ("FP_SCALE_OPS_SPEC", 0x80C0, 2.0)
            ]
        );
    }

    fn count(event: &str, measures: Measures, value: f64) -> Count {
        Count {
            event: event.into(),
            measures,
            value,
            running: 1.0,
        }
    }

    #[test]
    fn derived_figures_by_hand() {
        // 4 inferences; 1000 scalar-double and 500 256-bit single instructions: 1000 + 4000 FLOPs;
        // 300 + 100 L1D misses and 20 LL misses of 64-byte lines.
        let report = CounterReport {
            iterations: 4,
            line_bytes: 64,
            counts: vec![
                count("SD", Measures::Flops(1.0), 1000.0),
                count("256PS", Measures::Flops(8.0), 500.0),
                count("L1D read misses", Measures::L1dMisses, 300.0),
                count("L1D write misses", Measures::L1dMisses, 100.0),
                count("LL read misses", Measures::LastLevelMisses, 20.0),
            ],
            unavailable: vec!["LL write misses: not supported".into()],
        };
        let d = report.derive();
        assert_eq!(d.flops, Some(5000.0 / 4.0));
        assert_eq!(d.l2_bytes, Some(400.0 * 64.0 / 4.0));
        assert_eq!(d.dram_bytes, Some(20.0 * 64.0 / 4.0));
        assert!(d
            .basis
            .iter()
            .any(|b| b == "DRAM bytes = (LL read misses) × 64 B"));
    }

    #[test]
    fn a_partly_refused_flop_family_gives_no_flops() {
        let report = CounterReport {
            iterations: 1,
            line_bytes: 64,
            counts: vec![count(
                "FP_ARITH_INST_RETIRED.SCALAR_DOUBLE",
                Measures::Flops(1.0),
                10.0,
            )],
            unavailable: vec!["FP_ARITH_INST_RETIRED.SCALAR_SINGLE: not permitted".into()],
        };
        let d = report.derive();
        assert_eq!(d.flops, None);
        assert_eq!(d.l2_bytes, None);
        assert_eq!(d.dram_bytes, None);
    }
}
