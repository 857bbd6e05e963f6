//! NVIDIA GPUs through NVML, loaded at run time (`libnvidia-ml.so.1`, installed with the driver):
//! the binary builds and runs on machines without it, and this reader then says why it is
//! unavailable. Per GPU: utilization, memory, clocks, temperature, power, throttle reasons and
//! each compute process's memory. On Jetson boards NVML names the device but most queries are
//! "not supported" (Thor excepted); the fields it refuses stay empty.

use super::{Gpu, Reader, Sample};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

/// Throttle reasons that lower the clocks below what was asked, in words (idle and
/// application-clock settings are not throttling).
pub fn throttle_words(reasons: ThrottleReasons) -> Vec<&'static str> {
    [
        (ThrottleReasons::SW_POWER_CAP, "power cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hardware slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "thermal (software)"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "thermal (hardware)"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "power brake"),
    ]
    .iter()
    .filter(|(flag, _)| reasons.contains(*flag))
    .map(|(_, word)| *word)
    .collect()
}

pub struct NvmlReader {
    nvml: Result<Nvml, String>,
}

impl Default for NvmlReader {
    fn default() -> Self {
        Self::new()
    }
}

impl NvmlReader {
    pub fn new() -> NvmlReader {
        let nvml = Nvml::init().map_err(|e| match e {
            nvml_wrapper::error::NvmlError::LibloadingError(_) => {
                "libnvidia-ml.so.1 is not installed (no NVIDIA driver here)".to_string()
            }
            other => format!("NVML did not start: {other}"),
        });
        NvmlReader { nvml }
    }
}

impl NvmlReader {
    /// The compute capability of GPU `index` (major, minor), or why it cannot be had.
    pub fn compute_capability(&self, index: u32) -> Result<(u32, u32), crate::error::Unavailable> {
        let nvml = self.nvml.as_ref().map_err(Clone::clone)?;
        let device = nvml
            .device_by_index(index)
            .map_err(|e| format!("NVML has no GPU {index}: {e}"))?;
        let cc = device
            .cuda_compute_capability()
            .map_err(|e| format!("NVML cannot say GPU {index}'s compute capability: {e}"))?;
        Ok((cc.major as u32, cc.minor as u32))
    }
}

/// A GPU's settings that decide its speed: persistence mode, application clocks (MHz) and power
/// limit (W); None where NVML does not say.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuSettings {
    pub index: u32,
    pub name: String,
    pub persistence: Option<bool>,
    pub app_sm_mhz: Option<u32>,
    pub app_mem_mhz: Option<u32>,
    pub power_limit_w: Option<f64>,
}

impl NvmlReader {
    /// Every GPU's settings, or why NVML cannot give them.
    pub fn settings(&self) -> Result<Vec<GpuSettings>, crate::error::Unavailable> {
        let nvml = self.nvml.as_ref().map_err(Clone::clone)?;
        let count = nvml
            .device_count()
            .map_err(|e| format!("NVML cannot count the GPUs: {e}"))?;
        let mut out = Vec::new();
        for index in 0..count {
            let Ok(device) = nvml.device_by_index(index) else {
                continue;
            };
            out.push(GpuSettings {
                index,
                name: device.name().unwrap_or_else(|_| format!("GPU {index}")),
                persistence: device.is_in_persistent_mode().ok(),
                app_sm_mhz: device.applications_clock(Clock::SM).ok(),
                app_mem_mhz: device.applications_clock(Clock::Memory).ok(),
                power_limit_w: device
                    .power_management_limit()
                    .ok()
                    .map(|mw| f64::from(mw) / 1000.0),
            });
        }
        Ok(out)
    }
}

impl Reader for NvmlReader {
    fn name(&self) -> &'static str {
        "NVIDIA GPU (NVML)"
    }

    fn probe(&self) -> Result<String, String> {
        let nvml = self.nvml.as_ref().map_err(Clone::clone)?;
        let count = nvml
            .device_count()
            .map_err(|e| format!("NVML cannot count the GPUs: {e}"))?;
        if count == 0 {
            return Err("NVML sees no GPU".to_string());
        }
        let names: Vec<String> = (0..count)
            .map(|i| {
                nvml.device_by_index(i)
                    .and_then(|d| d.name())
                    .unwrap_or_else(|e| format!("GPU {i} ({e})"))
            })
            .collect();
        let driver = nvml.sys_driver_version().unwrap_or_default();
        Ok(format!("{} (driver {driver})", names.join(", ")))
    }

    fn read(&mut self, sample: &mut Sample) {
        let Ok(nvml) = &self.nvml else { return };
        let count = nvml.device_count().unwrap_or(0);
        for i in 0..count {
            let Ok(device) = nvml.device_by_index(i) else {
                continue;
            };
            let utilization = device.utilization_rates().ok();
            let memory = device.memory_info().ok();
            let name = device.name().unwrap_or_else(|_| format!("GPU {i}"));
            if let Ok(reasons) = device.current_throttle_reasons() {
                for word in throttle_words(reasons) {
                    sample.throttling.push(format!("GPU {i}: {word}"));
                }
            }
            let processes = device
                .running_compute_processes()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| match p.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some((p.pid, bytes)),
                    UsedGpuMemory::Unavailable => None,
                })
                .collect();
            sample.gpus.push(Gpu {
                name: format!("nvml {i} {name}"),
                load_pct: utilization.map(|u| f64::from(u.gpu)),
                freq_mhz: device.clock_info(Clock::Graphics).ok(),
                max_freq_mhz: device.max_clock_info(Clock::Graphics).ok(),
                mem_used_bytes: memory.as_ref().map(|m| m.used),
                mem_total_bytes: memory.as_ref().map(|m| m.total),
                temp_c: device
                    .temperature(TemperatureSensor::Gpu)
                    .ok()
                    .map(f64::from),
                power_w: device.power_usage().ok().map(|mw| f64::from(mw) / 1e3),
                processes,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_reasons_in_words() {
        let r = ThrottleReasons::GPU_IDLE
            | ThrottleReasons::SW_POWER_CAP
            | ThrottleReasons::HW_THERMAL_SLOWDOWN;
        assert_eq!(throttle_words(r), vec!["power cap", "thermal (hardware)"]);
        assert!(throttle_words(ThrottleReasons::NONE).is_empty());
    }

    #[test]
    fn without_the_library_it_says_why() {
        // On a machine with a driver this reads real GPUs; without one it must explain.
        if let Err(why) = NvmlReader::new().probe() {
            assert!(!why.is_empty());
        }
    }
}
