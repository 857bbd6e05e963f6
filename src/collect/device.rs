//! The device fingerprint stored with every result: what machine produced these numbers.
//! Everything is read under a root path; what a system does not expose is left out, never
//! guessed.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One CPU cache as the kernel describes it (cpu0's view).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cache {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size_bytes: u64,
    /// How many CPUs share this cache (from `shared_cpu_list`), when the system says.
    #[serde(default)]
    pub shared_cpus: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub hostname: Option<String>,
    pub arch: String,
    pub cpu_model: Option<String>,
    /// Board model from the device tree (Jetson, Raspberry Pi), when there is one.
    pub board: Option<String>,
    /// Logical CPUs online, and those this process may use.
    pub cpus_online: Option<usize>,
    pub cpus_available: usize,
    pub caches: Vec<Cache>,
    pub kernel: Option<String>,
    pub os: Option<String>,
    pub memory_total_bytes: Option<u64>,
    /// Groups of cores of one kind, biggest first (big.LITTLE boards have two or three).
    #[serde(default)]
    pub clusters: Vec<Cluster>,
    /// The SIMD extensions the CPU reports (`avx512f`, `avx2`, `fma`; `asimd`, `sve`, `asimddp`, …).
    #[serde(default)]
    pub simd: Vec<String>,
}

/// Cores of one kind: by the kernel's `cpu_capacity` where it gives one (Arm), else by maximum
/// frequency (`cpufreq/cpuinfo_max_freq`); one cluster when neither is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub cpus: Vec<usize>,
    pub capacity: Option<u32>,
    pub max_freq_mhz: Option<u32>,
}

/// The clusters of the CPUs listed in `sys/devices/system/cpu/possible` under `root`.
pub fn clusters(root: &Path) -> Vec<Cluster> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let ids = read(root, "sys/devices/system/cpu/possible")
        .map(|t| crate::collect::telemetry::cpu::parse_cpu_ids(&t))
        .unwrap_or_default();
    let number = |path: std::path::PathBuf| -> Option<u32> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let cores: Vec<(usize, Option<u32>, Option<u32>)> = ids
        .into_iter()
        .map(|id| {
            let dir = cpu_dir.join(format!("cpu{id}"));
            (
                id,
                number(dir.join("cpu_capacity")),
                number(dir.join("cpufreq/cpuinfo_max_freq")).map(|khz| khz / 1000),
            )
        })
        .collect();
    let by_capacity = cores.iter().any(|c| c.1.is_some());
    let mut out: Vec<Cluster> = Vec::new();
    for (id, capacity, freq) in cores {
        let key = if by_capacity { capacity } else { freq };
        let existing = out.iter_mut().find(|c| {
            (if by_capacity {
                c.capacity
            } else {
                c.max_freq_mhz
            }) == key
        });
        match existing {
            Some(c) => c.cpus.push(id),
            None => out.push(Cluster {
                cpus: vec![id],
                capacity,
                max_freq_mhz: freq,
            }),
        }
    }
    out.sort_by_key(|c| {
        std::cmp::Reverse(if by_capacity {
            c.capacity
        } else {
            c.max_freq_mhz
        })
    });
    out
}

/// SIMD extensions from /proc/cpuinfo's `flags` (x86) or `Features` (Arm) line.
pub fn parse_simd(cpuinfo: &str) -> Vec<String> {
    const KNOWN: &[&str] = &[
        "sse2",
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "avx512f",
        "avx512bw",
        "avx512_vnni",
        "avx512_bf16",
        "avx512_fp16",
        "avx_vnni",
        "amx_tile",
        "asimd",
        "asimdhp",
        "asimddp",
        "i8mm",
        "bf16",
        "sve",
        "sve2",
        "fphp",
    ];
    let line = cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        matches!(k.trim(), "flags" | "Features").then_some(v)
    });
    let present: Vec<&str> = line
        .map(|v| v.split_whitespace().collect())
        .unwrap_or_default();
    KNOWN
        .iter()
        .filter(|f| present.contains(f))
        .map(|f| f.to_string())
        .collect()
}

/// A cache size as sysfs writes it: `32K`, `1024K`, `8M`, or plain bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, factor) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1024),
        'M' | 'm' => (&t[..t.len() - 1], 1024 * 1024),
        'G' | 'g' => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(factor)
}

/// Cores this process may use (1 when the system cannot say).
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The kernel's CPU-list notation: `0-3,6`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Counts the CPUs of a kernel list such as `0-3,6,8-9`.
pub fn count_cpu_list(text: &str) -> Option<usize> {
    let mut n = 0;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<usize>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// The CPU's name from `/proc/cpuinfo`: x86 `model name`, Raspberry Pi `Model`, older Arm
/// kernels `Hardware`, else the Arm implementer and part numbers.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    field("model name")
        .or_else(|| field("Model"))
        .or_else(|| field("Hardware"))
        .or_else(|| {
            Some(format!(
                "Arm implementer {} part {}",
                field("CPU implementer")?,
                field("CPU part")?
            ))
        })
}

/// `PRETTY_NAME` of an os-release file.
pub fn parse_os_release(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix("PRETTY_NAME=")?;
        Some(value.trim().trim_matches('"').to_string())
    })
}

fn read(root: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(root.join(path)).ok()
}

fn caches(root: &Path) -> Vec<Cache> {
    let dir = root.join("sys/devices/system/cpu/cpu0/cache");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut caches: Vec<Cache> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let p = e.path();
            let get = |f: &str| std::fs::read_to_string(p.join(f)).ok();
            Some(Cache {
                level: get("level")?.trim().parse().ok()?,
                kind: get("type")?.trim().to_string(),
                size_bytes: parse_cache_size(&get("size")?)?,
                shared_cpus: get("shared_cpu_list").and_then(|t| count_cpu_list(&t)),
            })
        })
        .collect();
    caches.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
    caches
}

impl Fingerprint {
    /// The device in a few words: `host: board or CPU, N CPUs, arch`.
    pub fn describe(&self) -> String {
        let what = self
            .board
            .as_deref()
            .or(self.cpu_model.as_deref())
            .unwrap_or("an unnamed CPU");
        let cpus = self
            .cpus_online
            .map(|n| format!("{n} CPUs, "))
            .unwrap_or_default();
        match &self.hostname {
            Some(host) => format!("{host}: {what}, {cpus}{}", self.arch),
            None => format!("{what}, {cpus}{}", self.arch),
        }
    }

    /// Whether `other` is the same device for measurements: the same architecture, CPU model,
    /// board and number of CPUs. The host name, kernel and the CPUs this process may use are
    /// left out: a board renamed, updated or run in a container measures as before.
    pub fn same_device(&self, other: &Fingerprint) -> bool {
        (&self.arch, &self.cpu_model, &self.board, self.cpus_online)
            == (
                &other.arch,
                &other.cpu_model,
                &other.board,
                other.cpus_online,
            )
    }
}

/// Reads the fingerprint of the machine whose filesystem is at `root`.
pub fn fingerprint(root: &Path) -> Fingerprint {
    let uname = nix::sys::utsname::uname().ok();
    let real_root = root == Path::new("/");
    Fingerprint {
        hostname: read(root, "proc/sys/kernel/hostname").map(|s| s.trim().to_string()),
        arch: std::env::consts::ARCH.to_string(),
        cpu_model: read(root, "proc/cpuinfo").and_then(|t| parse_cpu_model(&t)),
        board: read(root, "proc/device-tree/model")
            .map(|s| s.trim_end_matches('\0').trim().to_string())
            .filter(|s| !s.is_empty()),
        cpus_online: read(root, "sys/devices/system/cpu/online").and_then(|t| count_cpu_list(&t)),
        cpus_available: available_cores(),
        caches: caches(root),
        kernel: match (&uname, real_root) {
            (Some(u), true) => Some(format!(
                "{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.version().to_string_lossy()
            )),
            _ => read(root, "proc/sys/kernel/osrelease").map(|s| s.trim().to_string()),
        },
        os: read(root, "etc/os-release").and_then(|t| parse_os_release(&t)),
        memory_total_bytes: read(root, "proc/meminfo")
            .and_then(|t| crate::collect::proc::parse_meminfo(&t))
            .map(|m| m.0),
        clusters: clusters(root),
        simd: read(root, "proc/cpuinfo")
            .map(|t| parse_simd(&t))
            .unwrap_or_default(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A temporary root holding `files` (path under the root, text), for readers of a tree.
    pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        for (path, text) in files {
            let p = dir.path().join(path);
            if let Some(parent) = p.parent() {
                if let Err(e) = std::fs::create_dir_all(parent) {
                    panic!("{e}");
                }
            }
            if let Err(e) = std::fs::write(&p, text) {
                panic!("{e}");
            }
        }
        dir
    }

    #[test]
    fn big_little_by_capacity_then_by_frequency() {
        // An RK3588: four A55 (capacity 414), two pairs of A76 (1024) at different clocks.
        let cpu = "sys/devices/system/cpu";
        let mut files = vec![(format!("{cpu}/possible"), "0-7\n".to_string())];
        for id in 0..8 {
            let (cap, khz) = if id < 4 {
                (414, 1800000)
            } else {
                (1024, if id < 6 { 2256000 } else { 2304000 })
            };
            files.push((format!("{cpu}/cpu{id}/cpu_capacity"), format!("{cap}\n")));
            files.push((
                format!("{cpu}/cpu{id}/cpufreq/cpuinfo_max_freq"),
                format!("{khz}\n"),
            ));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let root = tree(&refs);
        let c = clusters(root.path());
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].cpus.clone(), c[0].capacity),
            (vec![4, 5, 6, 7], Some(1024))
        );
        assert_eq!(
            (c[1].cpus.clone(), c[1].max_freq_mhz),
            (vec![0, 1, 2, 3], Some(1800))
        );
        // Without capacities (x86, older kernels): by maximum frequency.
        let root = tree(&[
            ("sys/devices/system/cpu/possible", "0-2"),
            (
                "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
                "3000000",
            ),
            (
                "sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq",
                "3000000",
            ),
            (
                "sys/devices/system/cpu/cpu2/cpufreq/cpuinfo_max_freq",
                "4200000",
            ),
        ]);
        let c = clusters(root.path());
        assert_eq!(
            c.iter().map(|c| c.cpus.clone()).collect::<Vec<_>>(),
            vec![vec![2], vec![0, 1]]
        );
        // Nothing known: one cluster of every core; no possible file: none.
        let root = tree(&[("sys/devices/system/cpu/possible", "0-3")]);
        assert_eq!(clusters(root.path()).len(), 1);
        assert!(clusters(tree(&[]).path()).is_empty());
    }

    #[test]
    fn simd_extensions_from_cpuinfo() {
        assert_eq!(
            parse_simd("flags\t\t: fpu sse2 ssse3 fma sse4_2 avx avx2 avx512f\n"),
            vec!["sse2", "sse4_2", "avx", "avx2", "fma", "avx512f"]
        );
        assert_eq!(
            parse_simd("Features\t: fp asimd evtstrm aes crc32 asimdhp asimddp\n"),
            vec!["asimd", "asimdhp", "asimddp"]
        );
        assert!(parse_simd("garbage").is_empty());
    }

    #[test]
    fn cpu_lists_are_written_in_ranges() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(cpu_list(&[1]), "1");
        assert_eq!(cpu_list(&[]), "");
    }

    #[test]
    fn cache_sizes_and_cpu_lists() {
        assert_eq!(parse_cache_size("32K\n"), Some(32 * 1024));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("big"), None);
        assert_eq!(parse_cache_size(""), None);
        assert_eq!(count_cpu_list("0-3,6,8-9\n"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn cpu_model_from_x86_pi_and_bare_arm() {
        assert_eq!(
            parse_cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n").as_deref(),
            Some("AMD EPYC 7B13")
        );
        assert_eq!(
            parse_cpu_model("CPU part\t: 0xd08\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n")
                .as_deref(),
            Some("Raspberry Pi 4 Model B Rev 1.4")
        );
        assert_eq!(
            parse_cpu_model("CPU implementer\t: 0x41\nCPU part\t: 0xd42\n").as_deref(),
            Some("Arm implementer 0x41 part 0xd42")
        );
        assert_eq!(parse_cpu_model("nothing useful"), None);
        assert_eq!(
            parse_os_release("NAME=x\nPRETTY_NAME=\"Ubuntu 18.04.6 LTS\"\n").as_deref(),
            Some("Ubuntu 18.04.6 LTS")
        );
    }

    #[test]
    fn fingerprint_of_a_fixture_tree() {
        let root = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let put = |path: &str, text: &str| {
            let p = root.path().join(path);
            if let Err(e) = p
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(&p, text))
            {
                panic!("{e}")
            }
        };
        put(
            "proc/cpuinfo",
            "model name\t: ARMv8 Processor rev 1 (v8l)\n",
        );
        put(
            "proc/device-tree/model",
            "NVIDIA Jetson Nano Developer Kit\0",
        );
        put("sys/devices/system/cpu/online", "0-3\n");
        put("sys/devices/system/cpu/cpu0/cache/index0/level", "1\n");
        put("sys/devices/system/cpu/cpu0/cache/index0/type", "Data\n");
        put("sys/devices/system/cpu/cpu0/cache/index0/size", "32K\n");
        put("sys/devices/system/cpu/cpu0/cache/index2/level", "2\n");
        put("sys/devices/system/cpu/cpu0/cache/index2/type", "Unified\n");
        put("sys/devices/system/cpu/cpu0/cache/index2/size", "2048K\n");
        put(
            "sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_list",
            "0-3\n",
        );
        put("proc/sys/kernel/osrelease", "4.9.253-tegra\n");
        put("proc/meminfo", "MemTotal: 4051040 kB\nMemAvailable: 1 kB\n");
        let f = fingerprint(root.path());
        assert_eq!(f.board.as_deref(), Some("NVIDIA Jetson Nano Developer Kit"));
        assert_eq!(f.cpus_online, Some(4));
        assert_eq!(f.kernel.as_deref(), Some("4.9.253-tegra"));
        assert_eq!(f.caches.len(), 2);
        assert_eq!((f.caches[1].level, f.caches[1].size_bytes), (2, 2 << 20));
        assert_eq!(
            (f.caches[0].shared_cpus, f.caches[1].shared_cpus),
            (None, Some(4))
        );
        assert_eq!(f.memory_total_bytes, Some(4_051_040 * 1024));
        assert_eq!(f.os, None);
    }
}
