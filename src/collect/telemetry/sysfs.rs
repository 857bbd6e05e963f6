//! Board telemetry from sysfs: thermal zones, the Jetson integrated GPU (devfreq) and its shared
//! memory, INA3221 power monitors (Jetson; hwmon on JetPack 5 and later, iio on JetPack 4), AMD
//! GPUs (amdgpu) and RAPL energy counters (powercap).

use super::{read_number, Dropped, Gpu, Reader, Reading, Sample, CLOCKS_MHZ, TEMPERATURES_C};
use std::path::{Path, PathBuf};

/// Entries of a directory, sorted; empty when it cannot be read.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn read_trimmed(path: &Path) -> Option<String> {
    Some(std::fs::read_to_string(path).ok()?.trim().to_string())
}

/// Temperatures of `/sys/class/thermal/thermal_zone*` (m°C; −256 °C marks an offline sensor).
pub struct ThermalReader {
    root: PathBuf,
    dropped: Dropped,
}

impl ThermalReader {
    pub fn new(root: &Path) -> ThermalReader {
        ThermalReader {
            root: root.to_path_buf(),
            dropped: Dropped::default(),
        }
    }

    /// Zones with their temperature file and reading (None: offline or unreadable).
    fn zones(&self) -> Vec<(String, PathBuf, Option<f64>)> {
        entries(&self.root.join("sys/class/thermal"))
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("thermal_zone"))
            })
            .filter_map(|p| {
                let name = read_trimmed(&p.join("type"))?;
                let file = p.join("temp");
                let milli: Option<i64> = read_number(&file);
                Some((
                    name,
                    file,
                    milli.filter(|&m| m > -255_000).map(|m| m as f64 / 1e3),
                ))
            })
            .collect()
    }
}

impl Reader for ThermalReader {
    fn name(&self) -> &'static str {
        "thermal zones (sysfs)"
    }

    fn probe(&self) -> Result<String, String> {
        let zones = self.zones();
        if zones.is_empty() {
            return Err("no readable /sys/class/thermal/thermal_zone*".to_string());
        }
        let names: Vec<&str> = zones.iter().map(|z| z.0.as_str()).collect();
        Ok(format!("{} zone(s): {}", zones.len(), names.join(", ")))
    }

    fn read(&mut self, sample: &mut Sample) {
        for (name, file, celsius) in self.zones() {
            if let Some(value) = self.dropped.keep(celsius, TEMPERATURES_C, &file) {
                sample.temperatures.push(Reading { name, value });
            }
        }
    }

    fn dropped(&self) -> Dropped {
        self.dropped.clone()
    }
}

/// devfreq device names of Jetson integrated GPUs, Nano/TX1 to Thor.
const JETSON_GPUS: &[&str] = &["gpu", "gp10b", "gv11b", "ga10b", "gb10b"];

/// The JetPack release from `/etc/nv_tegra_release` (`# R35 (release), REVISION: 4.1` → "JetPack 5
/// (L4T R35.4.1)").
pub fn jetpack(text: &str) -> Option<String> {
    let major: u32 = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('R')?.parse().ok())?;
    let revision = text
        .split("REVISION:")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .map(str::trim)
        .unwrap_or("");
    let jetpack = match major {
        32 => "4",
        34 | 35 => "5",
        36 => "6",
        38 | 39 => "7",
        _ => "?",
    };
    Some(format!("JetPack {jetpack} (L4T R{major}.{revision})"))
}

/// The Jetson integrated GPU: load and frequencies from its devfreq node, shared memory from
/// `NvMapMemUsed` in /proc/meminfo.
pub struct JetsonGpuReader {
    root: PathBuf,
    node: Option<(PathBuf, String)>,
    /// nvmap's per-client table in debugfs, when this user can read it (root only).
    nvmap: Option<PathBuf>,
    dropped: Dropped,
}

/// Where nvmap lists its clients with their process ids and sizes (`clients`), or the same
/// with every allocation below each client (`maps`, on kernels without `clients`).
const NVMAP_TABLES: &[&str] = &[
    "sys/kernel/debug/nvmap/iovmm/clients",
    "sys/kernel/debug/nvmap/iovmm/maps",
];

/// GPU memory per process from an nvmap debugfs table: `CLIENT PROCESS PID SIZE` rows such as
/// `user   python3   4242   123456K`, summed per process id. Allocation rows (indented, under
/// their client in `maps`), the header and the `total` row are left out, as is anything garbled.
pub fn parse_nvmap(text: &str) -> Vec<(u32, u64)> {
    let mut per_pid: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) || line.starts_with("total") {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [.., pid, size] = words.as_slice() else {
            continue;
        };
        let (Ok(pid), Some(Ok(kib))) = (
            pid.parse::<u32>(),
            size.strip_suffix('K').map(str::parse::<u64>),
        ) else {
            continue;
        };
        // A size past what 64 bits of bytes hold is garbled, not memory.
        let Some(bytes) = kib.checked_mul(1024) else {
            continue;
        };
        let total = per_pid.entry(pid).or_default();
        *total = total.saturating_add(bytes);
    }
    per_pid.into_iter().collect()
}

/// The Jetson integrated GPU's devfreq node under `root` and its device's name, if any.
pub fn jetson_gpu_devfreq(root: &Path) -> Option<(PathBuf, String)> {
    entries(&root.join("sys/class/devfreq"))
        .into_iter()
        .find_map(|p| {
            let name = read_trimmed(&p.join("device/of_node/name"))?;
            JETSON_GPUS.contains(&name.as_str()).then_some((p, name))
        })
}

impl JetsonGpuReader {
    pub fn new(root: &Path) -> JetsonGpuReader {
        let node = jetson_gpu_devfreq(root);
        let nvmap = NVMAP_TABLES
            .iter()
            .map(|t| root.join(t))
            .find(|p| std::fs::read_to_string(p).is_ok());
        JetsonGpuReader {
            root: root.to_path_buf(),
            node,
            nvmap,
            dropped: Dropped::default(),
        }
    }
}

impl Reader for JetsonGpuReader {
    fn name(&self) -> &'static str {
        "Jetson GPU (devfreq)"
    }

    fn probe(&self) -> Result<String, String> {
        let Some((node, name)) = &self.node else {
            return Err(format!(
                "no Jetson GPU: no /sys/class/devfreq node whose device is one of {}",
                JETSON_GPUS.join(", ")
            ));
        };
        let release = read_trimmed(&self.root.join("etc/nv_tegra_release"))
            .and_then(|t| jetpack(&t))
            .unwrap_or_else(|| "release unknown".to_string());
        let load = if node.join("device/load").exists() {
            "load from sysfs"
        } else {
            "no load file (Thor: load only through NVML)"
        };
        let processes = if self.nvmap.is_some() {
            "per-process memory from nvmap debugfs"
        } else {
            "no per-process memory (nvmap debugfs is readable by root only)"
        };
        Ok(format!("{name}, {release}, {load}, {processes}"))
    }

    fn read(&mut self, sample: &mut Sample) {
        let Some((node, name)) = &self.node else {
            return;
        };
        let dropped = &mut self.dropped;
        let mut mhz = |file: &str| {
            let path = node.join(file);
            let hz = read_number::<u64>(&path);
            dropped
                .keep(hz, 0..=CLOCKS_MHZ.end() * 1_000_000, &path)
                .map(|hz| (hz / 1_000_000) as u32)
        };
        let (freq_mhz, max_freq_mhz) = (mhz("cur_freq"), mhz("max_freq"));
        // The load file counts in tenths of a percent.
        let load_file = node.join("device/load");
        let load = dropped.keep(read_number::<f64>(&load_file), 0.0..=1000.0, &load_file);
        let meminfo_file = self.root.join("proc/meminfo");
        let meminfo = std::fs::read_to_string(&meminfo_file).unwrap_or_default();
        let total = crate::collect::proc::parse_meminfo(&meminfo).map(|m| m.0);
        let used = crate::collect::proc::kib_field(&meminfo, "NvMapMemUsed");
        let used = match total {
            Some(t) => dropped.keep(used, 0..=t, &meminfo_file),
            None => used,
        };
        let gpu = Gpu {
            name: format!("jetson {name}"),
            load_pct: load.map(|l| l / 10.0),
            freq_mhz,
            max_freq_mhz,
            mem_used_bytes: used,
            mem_total_bytes: total,
            processes: self
                .nvmap
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|t| parse_nvmap(&t))
                .unwrap_or_default(),
            ..Gpu::default()
        };
        sample.gpus.push(gpu);
    }

    fn dropped(&self) -> Dropped {
        self.dropped.clone()
    }
}

/// One INA3221 channel: where its readings are, and how to turn them into watts.
#[derive(Debug, Clone, PartialEq)]
enum Channel {
    /// hwmon (JetPack 5+): `inN_input` in mV and `currN_input` in mA.
    Hwmon { volts: PathBuf, amps: PathBuf },
    /// iio (JetPack 4): `in_powerN_input` in mW.
    Iio { power: PathBuf },
}

/// The INA3221 power monitors of a Jetson: one reading per rail, and the board total.
pub struct Ina3221Reader {
    rails: Vec<(String, Channel)>,
    dropped: Dropped,
}

/// The most power one rail carries, in W.
const MAX_RAIL_W: f64 = 1000.0;

impl Ina3221Reader {
    pub fn new(root: &Path) -> Ina3221Reader {
        let mut rails = Vec::new();
        for dev in entries(&root.join("sys/bus/i2c/devices")) {
            if read_trimmed(&dev.join("name")).as_deref() != Some("ina3221") {
                continue;
            }
            for hwmon in entries(&dev.join("hwmon")) {
                for n in 1..=8 {
                    let Some(label) = read_trimmed(&hwmon.join(format!("in{n}_label"))) else {
                        continue;
                    };
                    if label == "NC"
                        || label.contains("NC ")
                        || label.to_lowercase().contains("sum of shunt")
                    {
                        continue;
                    }
                    let amps = hwmon.join(format!("curr{n}_input"));
                    if amps.exists() {
                        rails.push((
                            label,
                            Channel::Hwmon {
                                volts: hwmon.join(format!("in{n}_input")),
                                amps,
                            },
                        ));
                    }
                }
            }
            for iio in entries(&dev).into_iter().filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("iio:device"))
            }) {
                for n in 0..8 {
                    let Some(label) = read_trimmed(&iio.join(format!("rail_name_{n}"))) else {
                        continue;
                    };
                    if label == "NC" {
                        continue;
                    }
                    rails.push((
                        label,
                        Channel::Iio {
                            power: iio.join(format!("in_power{n}_input")),
                        },
                    ));
                }
            }
        }
        Ina3221Reader {
            rails,
            dropped: Dropped::default(),
        }
    }
}

/// The board's input power from its rails, in the rails' unit: `POM_5V_IN` (Nano) or `VDD_IN`,
/// else the sum (shared by the INA3221 reader and the tegrastats parser).
pub fn board_power(rails: &[Reading]) -> Option<f64> {
    rails
        .iter()
        .find(|r| r.name == "POM_5V_IN" || r.name == "VDD_IN")
        .map(|r| r.value)
        .or_else(|| (!rails.is_empty()).then(|| rails.iter().map(|r| r.value).sum()))
}

impl Reader for Ina3221Reader {
    fn name(&self) -> &'static str {
        "Jetson power rails (INA3221)"
    }

    fn probe(&self) -> Result<String, String> {
        if self.rails.is_empty() {
            return Err("no INA3221 power monitor under /sys/bus/i2c/devices".to_string());
        }
        let names: Vec<&str> = self.rails.iter().map(|r| r.0.as_str()).collect();
        Ok(format!("rails {}", names.join(", ")))
    }

    fn read(&mut self, sample: &mut Sample) {
        let mut read = Vec::new();
        for (name, channel) in &self.rails {
            let (watts, file) = match channel {
                Channel::Hwmon { volts, amps } => {
                    let mv: Option<f64> = read_number(volts);
                    let ma: Option<f64> = read_number(amps);
                    (mv.zip(ma).map(|(v, a)| v * a / 1e6), amps)
                }
                Channel::Iio { power } => (read_number::<f64>(power).map(|mw| mw / 1e3), power),
            };
            let watts = self.dropped.keep(watts, 0.0..=MAX_RAIL_W, file);
            if let Some(value) = watts {
                read.push(Reading {
                    name: name.clone(),
                    value,
                });
            }
        }
        if let Some(total) = board_power(&read) {
            sample.power_w = Some(total);
        }
        sample.rails.extend(read);
    }

    fn dropped(&self) -> Dropped {
        self.dropped.clone()
    }
}

/// AMD GPUs through amdgpu's sysfs files.
pub struct AmdGpuReader {
    cards: Vec<PathBuf>,
    dropped: Dropped,
}

impl AmdGpuReader {
    pub fn new(root: &Path) -> AmdGpuReader {
        let cards = entries(&root.join("sys/class/drm"))
            .into_iter()
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with("card") && !n.contains('-')
                })
            })
            .filter(|p| read_trimmed(&p.join("device/vendor")).as_deref() == Some("0x1002"))
            .collect();
        AmdGpuReader {
            cards,
            dropped: Dropped::default(),
        }
    }
}

impl Reader for AmdGpuReader {
    fn name(&self) -> &'static str {
        "AMD GPU (amdgpu sysfs)"
    }

    fn probe(&self) -> Result<String, String> {
        if self.cards.is_empty() {
            return Err("no AMD GPU: no /sys/class/drm/card* with vendor 0x1002".to_string());
        }
        let names: Vec<String> = self
            .cards
            .iter()
            .filter_map(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        Ok(names.join(", "))
    }

    fn read(&mut self, sample: &mut Sample) {
        for card in &self.cards {
            let device = card.join("device");
            let hwmon = entries(&device.join("hwmon")).into_iter().next();
            let dropped = &mut self.dropped;
            let mut from_hwmon = |file: &str, scale: f64, range| {
                let h = hwmon.as_ref()?;
                let path = h.join(file);
                dropped.keep(read_number::<f64>(&path).map(|v| v / scale), range, &path)
            };
            let temp_c = from_hwmon("temp1_input", 1e3, TEMPERATURES_C);
            let power_w = from_hwmon("power1_average", 1e6, 0.0..=2000.0);
            let busy_file = device.join("gpu_busy_percent");
            let load_pct = dropped.keep(read_number(&busy_file), 0.0..=100.0, &busy_file);
            let total_file = device.join("mem_info_vram_total");
            let mem_total_bytes: Option<u64> = read_number(&total_file);
            let used_file = device.join("mem_info_vram_used");
            let mem_used_bytes = dropped.keep(
                read_number(&used_file),
                0..=mem_total_bytes.unwrap_or(u64::MAX),
                &used_file,
            );
            sample.gpus.push(Gpu {
                name: format!(
                    "amdgpu {}",
                    card.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                ),
                load_pct,
                mem_used_bytes,
                mem_total_bytes,
                temp_c,
                power_w,
                ..Gpu::default()
            });
        }
    }

    fn dropped(&self) -> Dropped {
        self.dropped.clone()
    }
}

/// One RAPL zone: its counter, the range it wraps at, and the energy accumulated so far.
struct RaplZone {
    name: String,
    energy: PathBuf,
    range_uj: u64,
    last_uj: Option<u64>,
    total_uj: u64,
    last_t: f64,
}

/// Energy added between two counter readings that wrap at `range`.
pub fn rapl_delta(before: u64, after: u64, range: u64) -> u64 {
    if after >= before {
        after - before
    } else {
        range.saturating_sub(before) + after
    }
}

/// Linux powercap RAPL energy counters (Intel, and AMD Zen on recent kernels).
pub struct RaplReader {
    zones: Vec<RaplZone>,
    found: usize,
    dropped: Dropped,
}

/// The most power a RAPL zone draws, in W.
const MAX_RAPL_W: f64 = 10_000.0;

impl RaplReader {
    pub fn new(root: &Path) -> RaplReader {
        let mut found = 0;
        let zones = entries(&root.join("sys/class/powercap"))
            .into_iter()
            .filter(|p| {
                // Top-level zones only (`intel-rapl:0`, not the sub-zone `intel-rapl:0:0`).
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with("intel-rapl:") && n.matches(':').count() == 1
                })
            })
            .filter_map(|p| {
                found += 1;
                let energy = p.join("energy_uj");
                read_number::<u64>(&energy)?;
                Some(RaplZone {
                    name: read_trimmed(&p.join("name")).unwrap_or_else(|| "package".to_string()),
                    energy,
                    range_uj: read_number(&p.join("max_energy_range_uj")).unwrap_or(u64::MAX),
                    last_uj: None,
                    total_uj: 0,
                    last_t: 0.0,
                })
            })
            .collect();
        RaplReader {
            zones,
            found,
            dropped: Dropped::default(),
        }
    }
}

impl Reader for RaplReader {
    fn name(&self) -> &'static str {
        "RAPL energy (powercap)"
    }

    fn probe(&self) -> Result<String, String> {
        match (self.found, self.zones.len()) {
            (0, _) => Err("no /sys/class/powercap/intel-rapl:* zones (not an Intel/AMD x86 CPU, a virtual machine, or the intel_rapl driver is not loaded)".to_string()),
            (_, 0) => Err("the RAPL counters are not readable (root only since Linux 5.10)".to_string()),
            (_, n) => Ok(format!(
                "{n} zone(s): {}",
                self.zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    fn read(&mut self, sample: &mut Sample) {
        let mut package_w = Vec::new();
        for z in &mut self.zones {
            let Some(now) = read_number::<u64>(&z.energy) else {
                continue;
            };
            if let Some(before) = z.last_uj {
                let delta = rapl_delta(before, now, z.range_uj);
                let dt = sample.t_s - z.last_t;
                if dt > 0.0 {
                    // A counter that jumped (a garbled file, a wrong wrap range) is not energy.
                    let watts = delta as f64 / 1e6 / dt;
                    if let Some(watts) = self.dropped.keep(Some(watts), 0.0..=MAX_RAPL_W, &z.energy)
                    {
                        z.total_uj = z.total_uj.saturating_add(delta);
                        sample.rails.push(Reading {
                            name: z.name.clone(),
                            value: watts,
                        });
                        package_w.push(watts);
                    }
                }
            }
            z.last_uj = Some(now);
            z.last_t = sample.t_s;
            sample.energy.push(Reading {
                name: z.name.clone(),
                value: z.total_uj as f64 / 1e6,
            });
        }
        if sample.power_w.is_none() && !package_w.is_empty() {
            sample.power_w = Some(package_w.iter().sum());
        }
    }

    fn dropped(&self) -> Dropped {
        self.dropped.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jetpack_releases() {
        assert_eq!(
            jetpack(
                "# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t210ref, EABI: aarch64"
            )
            .as_deref(),
            Some("JetPack 4 (L4T R32.7.1)")
        );
        assert_eq!(
            jetpack("# R36 (release), REVISION: 4.0, GCID: 37537400").as_deref(),
            Some("JetPack 6 (L4T R36.4.0)")
        );
        assert_eq!(jetpack("garbage"), None);
    }

    #[test]
    fn nvmap_clients_are_summed_per_process() {
        let clients = include_str!("../../../tests/fixtures/nvmap/clients");
        assert_eq!(
            parse_nvmap(clients),
            vec![
                (1969, 69532 * 1024),
                (2170, 103916 * 1024),
                (4242, (812344 + 2048) * 1024),
                (5151, 16384 * 1024),
            ]
        );
        let maps = include_str!("../../../tests/fixtures/nvmap/maps");
        assert_eq!(
            parse_nvmap(maps),
            vec![(777, 1024 * 1024), (4242, 8192 * 1024)]
        );
        let garbled = include_str!("../../../tests/fixtures/nvmap/garbled");
        assert_eq!(parse_nvmap(garbled), vec![(5, 3 * 1024)]);
        assert!(parse_nvmap("").is_empty());
        // Sizes past 64 bits of bytes are garbled: left out, and sums saturate.
        assert_eq!(
            parse_nvmap("user a 7 18014398509481984K\nuser a 8 18014398509481983K\nuser b 8 18014398509481983K\n"),
            vec![(8, u64::MAX)]
        );
    }

    #[test]
    fn rapl_wraps_by_hand() {
        assert_eq!(rapl_delta(100, 250, 1000), 150);
        // 900 → wrap at 1000 → 50: 100 + 50.
        assert_eq!(rapl_delta(900, 50, 1000), 150);
    }

    #[test]
    fn board_power_prefers_the_input_rail() {
        let r = |name: &str, value| Reading {
            name: name.into(),
            value,
        };
        assert_eq!(
            board_power(&[r("VDD_GPU", 2.0), r("VDD_IN", 7.0)]),
            Some(7.0)
        );
        assert_eq!(
            board_power(&[r("VDD_GPU", 2.0), r("VDD_CPU", 3.0)]),
            Some(5.0)
        );
        assert_eq!(board_power(&[]), None);
    }
}

/// `vcgencmd get_throttled` bits (Raspberry Pi firmware): 0–3 now, 16–19 since boot.
const PI_THROTTLE_BITS: [&str; 4] = [
    "under-voltage",
    "ARM frequency capped",
    "throttled",
    "soft temperature limit",
];

/// What `throttled=0x50005` says: (in effect now, has occurred since boot), in words.
pub fn parse_throttled(text: &str) -> Option<(Vec<String>, Vec<String>)> {
    let hex = text.trim().strip_prefix("throttled=")?.strip_prefix("0x")?;
    let bits = u32::from_str_radix(hex, 16).ok()?;
    let named = |shift: u32| -> Vec<String> {
        PI_THROTTLE_BITS
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << (shift + *i as u32)) != 0)
            .map(|(_, name)| name.to_string())
            .collect()
    };
    Some((named(0), named(16)))
}

/// A Raspberry Pi: throttling from the firmware through `vcgencmd` (when the tool is installed),
/// at most once a second since each call starts a process.
pub struct RaspberryPiReader {
    model: Option<String>,
    vcgencmd: Option<PathBuf>,
    last: Option<(f64, Vec<String>)>,
}

impl RaspberryPiReader {
    pub fn new(root: &Path) -> RaspberryPiReader {
        let model = std::fs::read_to_string(root.join("proc/device-tree/model"))
            .ok()
            .map(|m| {
                m.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                    .to_string()
            })
            .filter(|m| m.starts_with("Raspberry Pi"));
        let vcgencmd = model
            .as_ref()
            .and_then(|_| crate::collect::find_on_path("vcgencmd"));
        RaspberryPiReader {
            model,
            vcgencmd,
            last: None,
        }
    }

    fn throttled(&self) -> Result<(Vec<String>, Vec<String>), String> {
        let tool = self.vcgencmd.as_ref().ok_or_else(|| {
            "vcgencmd is not installed (apt install libraspberrypi-bin)".to_string()
        })?;
        let mut command = crate::collect::child::Spec::new(tool);
        command.arg("get_throttled");
        // A firmware call that hangs must not stop the sampler with it.
        let out = crate::collect::child::run(
            &command,
            b"",
            std::time::Duration::from_secs(2),
            crate::collect::child::Stdout::Capture,
        )
        .map_err(|e| format!("{}: {e}", tool.display()))?;
        let text = out.stdout;
        parse_throttled(&text).ok_or_else(|| format!("vcgencmd said {:?}", text.trim()))
    }
}

impl Reader for RaspberryPiReader {
    fn name(&self) -> &'static str {
        "Raspberry Pi firmware (vcgencmd)"
    }

    fn probe(&self) -> Result<String, String> {
        let model = self
            .model
            .as_ref()
            .ok_or_else(|| "not a Raspberry Pi (/proc/device-tree/model)".to_string())?;
        let (now, since_boot) = self.throttled()?;
        let words = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        Ok(format!(
            "{model}; throttling now: {}; since boot: {}",
            words(&now),
            words(&since_boot)
        ))
    }

    fn read(&mut self, sample: &mut Sample) {
        if self.vcgencmd.is_none() {
            return;
        }
        let fresh = self
            .last
            .as_ref()
            .is_some_and(|(t, _)| sample.t_s - t < 1.0);
        if !fresh {
            let now = self.throttled().map(|t| t.0).unwrap_or_default();
            self.last = Some((sample.t_s, now));
        }
        if let Some((_, now)) = &self.last {
            sample.throttling.extend(now.iter().cloned());
        }
    }
}

#[cfg(test)]
mod pi_tests {
    use super::*;

    #[test]
    fn throttle_bits_by_hand() {
        // 0x50005: bits 0 and 2 now; bits 16 and 18 since boot.
        assert_eq!(
            parse_throttled("throttled=0x50005\n"),
            Some((
                vec!["under-voltage".to_string(), "throttled".to_string()],
                vec!["under-voltage".to_string(), "throttled".to_string()]
            ))
        );
        assert_eq!(parse_throttled("throttled=0x0"), Some((vec![], vec![])));
        assert_eq!(parse_throttled("error=1"), None);
    }
}
