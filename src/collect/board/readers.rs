//! Reading the board's state under a root path. The firmware tools a state needs (`vcgencmd`
//! on a Raspberry Pi, `nvpmodel -q` where nvpmodel keeps no status file) are asked through
//! [`Commands`], so fixture trees carry their output as files.

use super::{
    AmdGpu, BoardState, CpuPolicy, Devfreq, Found, IdleState, IdleStates, Jetson, NvidiaGpu, Pi,
    PowerMode, Turbo,
};
use std::path::{Path, PathBuf};

/// Where a firmware tool's output comes from.
pub trait Commands {
    /// What `program args…` printed, or why it could not be asked.
    fn output(&self, program: &str, args: &[&str]) -> Result<String, String>;
}

/// The tools on this machine's PATH, each given ten seconds (a firmware call can hang;
/// `jetson_clocks` and `nvpmodel -m` take a second or two).
pub struct LiveCommands;

impl Commands for LiveCommands {
    fn output(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let tool = crate::collect::find_on_path(program)
            .ok_or_else(|| format!("{program} is not installed"))?;
        let mut spec = crate::collect::child::Spec::new(&tool);
        spec.args(args.iter().copied());
        crate::collect::child::run(
            &spec,
            b"",
            std::time::Duration::from_secs(10),
            crate::collect::child::Stdout::Capture,
        )
        .map(|out| out.stdout)
        .map_err(|e| format!("{}: {e}", tool.display()))
    }
}

/// Recorded outputs in a directory: `program args…` is the file `program_arg1_arg2.txt`; a
/// missing file is a tool that is not installed.
pub struct FixtureCommands(pub PathBuf);

impl Commands for FixtureCommands {
    fn output(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let mut name = program.to_string();
        for a in args {
            name.push('_');
            name.push_str(a);
        }
        std::fs::read_to_string(self.0.join(format!("{name}.txt")))
            .map_err(|_| format!("{program} is not installed"))
    }
}

fn text(path: &Path) -> Option<String> {
    let t = std::fs::read_to_string(path).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn number(path: &Path) -> Option<u64> {
    text(path)?.parse().ok()
}

fn sorted_entries(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    // policy2 before policy10.
    v.sort_by_key(|p| {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let digits: String = name.chars().filter(char::is_ascii_digit).collect();
        (digits.parse::<u64>().unwrap_or(u64::MAX), name)
    });
    v
}

/// Everything under `root`; NVML is asked only when `root` is `/` (it reads the driver, not
/// files).
pub fn read(root: &Path, commands: &dyn Commands) -> BoardState {
    let policies = cpufreq(root);
    BoardState {
        turbo: turbo(root),
        idle: idle(root),
        jetson: jetson(root, commands),
        pi: pi(root, commands),
        nvidia: if root == Path::new("/") {
            nvidia()
        } else {
            Found::Absent("NVML is read on the machine itself, not from a directory".to_string())
        },
        amd: amd(root),
        cpufreq: policies,
    }
}

fn cpufreq(root: &Path) -> Found<Vec<CpuPolicy>> {
    let dir = root.join("sys/devices/system/cpu/cpufreq");
    let policies: Vec<CpuPolicy> = sorted_entries(&dir, "policy")
        .into_iter()
        .map(|p| CpuPolicy {
            policy: p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            cpus: text(&p.join("related_cpus"))
                .or_else(|| text(&p.join("affected_cpus")))
                .map(|t| {
                    // related_cpus is space-separated; some kernels write ranges.
                    t.split_whitespace()
                        .flat_map(crate::collect::telemetry::cpu::parse_cpu_ids)
                        .collect()
                })
                .unwrap_or_default(),
            driver: text(&p.join("scaling_driver")),
            governor: text(&p.join("scaling_governor")),
            min_khz: number(&p.join("scaling_min_freq")),
            max_khz: number(&p.join("scaling_max_freq")),
            cur_khz: number(&p.join("scaling_cur_freq")),
            hw_min_khz: number(&p.join("cpuinfo_min_freq")),
            hw_max_khz: number(&p.join("cpuinfo_max_freq")),
        })
        .collect();
    if policies.is_empty() {
        Found::Absent(
            "no cpufreq here (no /sys/devices/system/cpu/cpufreq/policy*: the clock is the \
             hypervisor's or the firmware's, and nothing here can read or set it)"
                .to_string(),
        )
    } else {
        Found::Found(policies)
    }
}

fn turbo(root: &Path) -> Found<Turbo> {
    let pstate = "sys/devices/system/cpu/intel_pstate/no_turbo";
    let boost = "sys/devices/system/cpu/cpufreq/boost";
    if let Some(v) = number(&root.join(pstate)) {
        return Found::Found(Turbo {
            on: v == 0,
            file: format!("/{pstate}"),
        });
    }
    if let Some(v) = number(&root.join(boost)) {
        return Found::Found(Turbo {
            on: v != 0,
            file: format!("/{boost}"),
        });
    }
    Found::Absent("no turbo switch (neither intel_pstate/no_turbo nor cpufreq/boost)".to_string())
}

fn idle(root: &Path) -> Found<IdleStates> {
    let driver =
        text(&root.join("sys/devices/system/cpu/cpuidle/current_driver")).filter(|d| d != "none");
    let states: Vec<IdleState> =
        sorted_entries(&root.join("sys/devices/system/cpu/cpu0/cpuidle"), "state")
            .into_iter()
            .filter_map(|p| {
                Some(IdleState {
                    name: text(&p.join("name"))?,
                    disabled: number(&p.join("disable")).is_some_and(|d| d != 0),
                    latency_us: number(&p.join("latency")),
                })
            })
            .collect();
    if driver.is_none() && states.is_empty() {
        Found::Absent("no cpuidle states (the kernel idles the CPUs without them)".to_string())
    } else {
        Found::Found(IdleStates { driver, states })
    }
}

/// nvpmodel's modes from its configuration: `< POWER_MODEL ID=0 NAME=MAXN >` lines.
pub fn parse_nvpmodel_conf(text: &str) -> Vec<PowerMode> {
    text.lines()
        .filter_map(|line| {
            let inner = line.trim().strip_prefix('<')?.strip_suffix('>')?.trim();
            let rest = inner.strip_prefix("POWER_MODEL")?;
            let mut id = None;
            let mut name = None;
            for word in rest.split_whitespace() {
                if let Some(v) = word.strip_prefix("ID=") {
                    id = v.parse::<u32>().ok();
                } else if let Some(v) = word.strip_prefix("NAME=") {
                    name = Some(v.to_string());
                }
            }
            Some(PowerMode {
                id: id?,
                name: name?,
            })
        })
        .collect()
}

/// nvpmodel's status file: `pmode:0002 fmode:quiet` → (2, Some("quiet")).
pub fn parse_nvpmodel_status(text: &str) -> Option<(u32, Option<String>)> {
    let mut mode = None;
    let mut fan = None;
    for word in text.split_whitespace() {
        if let Some(v) = word.strip_prefix("pmode:") {
            mode = v.parse::<u32>().ok();
        } else if let Some(v) = word.strip_prefix("fmode:") {
            fan = Some(v.to_string());
        }
    }
    Some((mode?, fan))
}

/// `nvpmodel -q`: `NV Power Mode: MAXN` then the mode's id on a line of its own (warnings such
/// as `NVPM WARN: …` may come first).
pub fn parse_nvpmodel_query(text: &str) -> Option<PowerMode> {
    let mut lines = text.lines().map(str::trim);
    let name = lines
        .by_ref()
        .find_map(|l| l.strip_prefix("NV Power Mode:"))?
        .trim()
        .to_string();
    let id = lines.find_map(|l| l.parse::<u32>().ok())?;
    Some(PowerMode { id, name })
}

/// The fastest mode: MAXN (or MAXN_SUPER, …) where the board has one, else mode 0.
fn fastest(modes: &[PowerMode]) -> Option<PowerMode> {
    modes
        .iter()
        .find(|m| m.name.starts_with("MAXN"))
        .or_else(|| modes.iter().find(|m| m.id == 0))
        .cloned()
}

const EMC_RATES: [&str; 2] = [
    "sys/kernel/debug/bpmp/debug/clk/emc/rate",
    "sys/kernel/debug/clk/emc/clk_rate",
];

fn jetson(root: &Path, commands: &dyn Commands) -> Found<Jetson> {
    let gpu_node = crate::collect::telemetry::sysfs::jetson_gpu_devfreq(root);
    if !root.join("etc/nv_tegra_release").exists() && gpu_node.is_none() {
        return Found::Absent("not a Jetson (no /etc/nv_tegra_release)".to_string());
    }
    let modes = text(&root.join("etc/nvpmodel.conf"))
        .map(|t| parse_nvpmodel_conf(&t))
        .unwrap_or_default();
    let status =
        text(&root.join("var/lib/nvpmodel/status")).and_then(|t| parse_nvpmodel_status(&t));
    let (mode, fan_mode) = match status {
        Some((id, fan)) => {
            let name = modes
                .iter()
                .find(|m| m.id == id)
                .map_or_else(|| format!("mode {id}"), |m| m.name.clone());
            (Found::Found(PowerMode { id, name }), fan)
        }
        None => match commands.output("nvpmodel", &["-q"]) {
            Ok(out) => match parse_nvpmodel_query(&out) {
                Some(m) => (Found::Found(m), None),
                None => (
                    Found::Absent("nvpmodel -q printed no power mode".to_string()),
                    None,
                ),
            },
            Err(why) => (
                Found::Absent(format!(
                    "no /var/lib/nvpmodel/status, and {why}: the power mode is unknown"
                )),
                None,
            ),
        },
    };
    let gpu = match gpu_node {
        Some((node, name)) => Found::Found(Devfreq {
            device: name,
            governor: text(&node.join("governor")),
            min_hz: number(&node.join("min_freq")),
            max_hz: number(&node.join("max_freq")),
            cur_hz: number(&node.join("cur_freq")),
            available_max_hz: text(&node.join("available_frequencies")).and_then(|t| {
                t.split_whitespace()
                    .filter_map(|f| f.parse::<u64>().ok())
                    .max()
            }),
        }),
        None => Found::Absent("no GPU devfreq node".to_string()),
    };
    let emc_hz = EMC_RATES
        .iter()
        .find_map(|p| number(&root.join(p)))
        .map_or_else(
            || {
                Found::Absent(
                    "the EMC clock is in debugfs (bpmp/debug/clk/emc/rate), readable by root only"
                        .to_string(),
                )
            },
            Found::Found,
        );
    let mut fans: Vec<PathBuf> = vec![root.join("sys/devices/pwm-fan/target_pwm")];
    fans.extend(
        sorted_entries(&root.join("sys/devices/platform/pwm-fan/hwmon"), "hwmon")
            .into_iter()
            .map(|h| h.join("pwm1")),
    );
    fans.extend(
        sorted_entries(&root.join("sys/class/hwmon"), "hwmon")
            .into_iter()
            .filter(|h| text(&h.join("name")).as_deref() == Some("pwmfan"))
            .map(|h| h.join("pwm1")),
    );
    let fan_pwm = fans
        .iter()
        .find_map(|p| number(p).and_then(|v| u32::try_from(v).ok()))
        .map_or_else(
            || Found::Absent("no PWM fan found".to_string()),
            Found::Found,
        );
    Found::Found(Jetson {
        mode,
        fastest: fastest(&modes),
        fan_mode,
        gpu,
        emc_hz,
        fan_pwm,
    })
}

/// `frequency(48)=1500398464` → 1500398464.
pub fn parse_vcgencmd_clock(text: &str) -> Option<u64> {
    text.trim().split_once('=')?.1.trim().parse().ok()
}

fn pi(root: &Path, commands: &dyn Commands) -> Found<Pi> {
    let model = text(&root.join("proc/device-tree/model"))
        .map(|m| m.trim_end_matches('\0').to_string())
        .unwrap_or_default();
    if !model.starts_with("Raspberry Pi") {
        return Found::Absent("not a Raspberry Pi".to_string());
    }
    let clock = |which: &str| match commands.output("vcgencmd", &["measure_clock", which]) {
        Ok(out) => parse_vcgencmd_clock(&out).map_or_else(
            || Found::Absent(format!("vcgencmd printed no {which} clock")),
            Found::Found,
        ),
        Err(why) => Found::Absent(format!("{why} (apt install libraspberrypi-bin)")),
    };
    let (throttled_now, throttled_since_boot) = match commands
        .output("vcgencmd", &["get_throttled"])
    {
        Ok(out) => match crate::collect::telemetry::sysfs::parse_throttled(&out) {
            Some((now, since)) => (Found::Found(now), since),
            None => (
                Found::Absent("vcgencmd get_throttled printed no throttled=0x… value".to_string()),
                Vec::new(),
            ),
        },
        Err(why) => (
            Found::Absent(format!("{why} (apt install libraspberrypi-bin)")),
            Vec::new(),
        ),
    };
    Found::Found(Pi {
        arm_hz: clock("arm"),
        core_hz: clock("core"),
        throttled_now,
        throttled_since_boot,
    })
}

fn nvidia() -> Found<Vec<NvidiaGpu>> {
    match crate::collect::telemetry::nvml::NvmlReader::new().settings() {
        Ok(gpus) if gpus.is_empty() => Found::Absent("NVML sees no GPU".to_string()),
        Ok(gpus) => Found::Found(gpus),
        Err(why) => Found::Absent(why.0),
    }
}

/// The active line of `pp_power_profile_mode` (marked `*`), by its name: `  1 3D_FULL_SCREEN*:`
/// → `3D_FULL_SCREEN`.
pub fn parse_power_profile(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let star = line.find('*')?;
        let head = &line[..star];
        let name = head.split_whitespace().last()?;
        Some(name.trim_end_matches(':').to_string())
    })
}

fn amd(root: &Path) -> Found<Vec<AmdGpu>> {
    let cards: Vec<AmdGpu> = sorted_entries(&root.join("sys/class/drm"), "card")
        .into_iter()
        .filter(|c| {
            c.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.contains('-'))
                && text(&c.join("device/vendor")).as_deref() == Some("0x1002")
        })
        .map(|c| AmdGpu {
            card: c
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            performance_level: text(&c.join("device/power_dpm_force_performance_level")),
            power_profile: text(&c.join("device/pp_power_profile_mode"))
                .and_then(|t| parse_power_profile(&t)),
        })
        .collect();
    if cards.is_empty() {
        Found::Absent("no AMD GPU".to_string())
    } else {
        Found::Found(cards)
    }
}
