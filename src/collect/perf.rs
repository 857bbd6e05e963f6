//! Can this process count hardware events? Probes `perf_event_open(2)` with the generic
//! "instructions retired" event on itself and says why not when it cannot: a virtual machine
//! or CPU without an exposed PMU (ENOENT, EOPNOTSUPP), a `perf_event_paranoid` setting that
//! forbids it (EACCES, EPERM), or a kernel built without perf events (ENOSYS).

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
    /// Bit 0 `disabled`, bit 5 `exclude_kernel`, bit 6 `exclude_hv`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

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

/// Ok when a hardware counter can be opened on this process, else why not.
pub fn probe() -> Result<(), String> {
    let attr = PerfEventAttrV0 {
        kind: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<PerfEventAttrV0>() as u32,
        config: PERF_COUNT_HW_INSTRUCTIONS,
        flags: 1 | (1 << 5) | (1 << 6),
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
        // SAFETY: fd is a descriptor perf_event_open just returned to us.
        unsafe { libc::close(fd as libc::c_int) };
        return Ok(());
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse().ok());
    Err(reason(errno, paranoid))
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
}
