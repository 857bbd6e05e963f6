//! How much memory this process may still allocate. The system's available memory is not the
//! only bound: inside a container the cgroup's limit fails an allocation first, and under
//! `ulimit -v` the address-space limit does. Whichever is least decides, and the error that
//! refuses a run names it, so that a user reading `free` is not misled.

use super::proc::{kib_field, parse_meminfo};
use std::path::{Path, PathBuf};

/// What bounds the memory left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The system's available memory (MemAvailable of /proc/meminfo).
    System,
    /// A memory limit of this process's cgroup (a container's, a systemd unit's).
    Cgroup,
    /// The process's address-space limit (`ulimit -v`), less what it maps already.
    AddressSpace,
}

impl Bound {
    /// The phrase that follows "only N" in an error.
    pub fn phrase(self) -> &'static str {
        match self {
            Bound::System => "of memory is available now",
            Bound::Cgroup => "is left under this process's cgroup memory limit",
            Bound::AddressSpace => "is left under this process's address-space limit (ulimit -v)",
        }
    }
}

/// Memory left, in bytes, and what bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    pub bytes: u64,
    pub bound: Bound,
}

/// The memory this process may still allocate now; None when no bound can be read.
pub fn memory_room() -> Option<Room> {
    use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
    let address_space = match getrlimit(Resource::RLIMIT_AS) {
        Ok((soft, _)) if soft != RLIM_INFINITY => Some(soft),
        _ => None,
    };
    memory_room_under(Path::new("/"), address_space)
}

/// [`memory_room`] read under `root` (the real `/`, or a fixture tree), with the soft
/// address-space limit `address_space` in bytes (None when unlimited).
pub fn memory_room_under(root: &Path, address_space: Option<u64>) -> Option<Room> {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let system = read("proc/meminfo")
        .and_then(|t| parse_meminfo(&t))
        .map(|(total, used)| total.saturating_sub(used));
    let cgroup = read("proc/self/cgroup").and_then(|t| {
        cgroup_dirs(root, &t)
            .iter()
            .filter_map(|dir| cgroup_room(dir))
            .min()
    });
    let mapped = read("proc/self/status").and_then(|t| kib_field(&t, "VmSize"));
    let address = address_space.map(|limit| limit.saturating_sub(mapped.unwrap_or(0)));
    [
        (system, Bound::System),
        (cgroup, Bound::Cgroup),
        (address, Bound::AddressSpace),
    ]
    .into_iter()
    .filter_map(|(bytes, bound)| {
        Some(Room {
            bytes: bytes?,
            bound,
        })
    })
    .min_by_key(|r| r.bytes)
}

/// The memory-controller directories that bound this process, from its `/proc/self/cgroup`:
/// each level of its path, leaf to root, under the v2 mount and the v1 `memory` mount. The
/// mount points themselves are included: inside a container with its own cgroup namespace they
/// are the container's cgroup. Directories that do not exist are left out.
fn cgroup_dirs(root: &Path, self_cgroup: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for line in self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let mount = if controllers.is_empty() {
            root.join("sys/fs/cgroup")
        } else if controllers.split(',').any(|c| c == "memory") {
            root.join("sys/fs/cgroup/memory")
        } else {
            continue;
        };
        let mut level = Path::new(path.trim_start_matches('/'));
        loop {
            dirs.push(mount.join(level));
            match level.parent() {
                Some(up) => level = up,
                None => break,
            }
        }
    }
    dirs.retain(|d| d.is_dir());
    dirs.dedup();
    dirs
}

/// Limits at or above this are "no limit" (cgroup v1 writes 2^63 rounded down to a page).
const UNLIMITED: u64 = 1 << 62;

/// The memory one cgroup level has left: its limit less its usage, not counting the inactive
/// page cache the kernel reclaims before it fails an allocation. None when it has no limit or
/// its files cannot be read (v2: memory.max, memory.current; v1: memory.limit_in_bytes,
/// memory.usage_in_bytes).
fn cgroup_room(dir: &Path) -> Option<u64> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let number = |text: String| text.trim().parse::<u64>().ok();
    let (limit, usage, cache_key) = match read("memory.max") {
        Some(max) => (
            number(max)?,
            number(read("memory.current")?)?,
            "inactive_file",
        ),
        None => (
            number(read("memory.limit_in_bytes")?)?,
            number(read("memory.usage_in_bytes")?)?,
            "total_inactive_file",
        ),
    };
    if limit >= UNLIMITED {
        return None;
    }
    let cache = read("memory.stat")
        .and_then(|stat| {
            stat.lines().find_map(|line| {
                let value = line.strip_prefix(cache_key)?.strip_prefix(' ')?;
                value.trim().parse::<u64>().ok()
            })
        })
        .unwrap_or(0);
    Some(limit.saturating_sub(usage.saturating_sub(cache)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::device::tests::tree;

    const MEMINFO: (&str, &str) = (
        "proc/meminfo",
        "MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n",
    );
    const GIB: u64 = 1 << 30;

    #[test]
    fn the_system_bounds_a_process_with_no_other_limit() {
        let root = tree(&[MEMINFO, ("proc/self/cgroup", "0::/user.slice\n")]);
        let room = memory_room_under(root.path(), None);
        assert_eq!(
            room,
            Some(Room {
                bytes: 4 * GIB,
                bound: Bound::System
            })
        );
        assert_eq!(memory_room_under(Path::new("/nonexistent"), None), None);
    }

    #[test]
    fn a_cgroup_v2_limit_below_the_system_bounds_the_process_at_any_level() {
        // The container's limit (1 GiB, 600 MiB used of which 100 MiB is inactive cache: 524 MiB
        // left) is set on the parent of the process's own cgroup, which has none.
        let root = tree(&[
            MEMINFO,
            ("proc/self/cgroup", "0::/docker/abc/leaf\n"),
            ("sys/fs/cgroup/docker/abc/leaf/memory.max", "max\n"),
            (
                "sys/fs/cgroup/docker/abc/leaf/memory.current",
                "629145600\n",
            ),
            ("sys/fs/cgroup/docker/abc/memory.max", "1073741824\n"),
            ("sys/fs/cgroup/docker/abc/memory.current", "629145600\n"),
            (
                "sys/fs/cgroup/docker/abc/memory.stat",
                "anon 524288000\nfile 104857600\ninactive_file 104857600\n",
            ),
        ]);
        let room = memory_room_under(root.path(), None);
        assert_eq!(
            room,
            Some(Room {
                bytes: 524 << 20,
                bound: Bound::Cgroup
            })
        );
        assert!(Bound::Cgroup.phrase().contains("cgroup"));
    }

    #[test]
    fn a_cgroup_v1_memory_limit_counts_and_the_unlimited_value_does_not() {
        let v1 = |limit: &str| {
            tree(&[
                MEMINFO,
                (
                    "proc/self/cgroup",
                    "5:cpu,cpuacct:/x\n4:memory:/jetson/job\n0::/\n",
                ),
                (
                    "sys/fs/cgroup/memory/jetson/job/memory.limit_in_bytes",
                    limit,
                ),
                (
                    "sys/fs/cgroup/memory/jetson/job/memory.usage_in_bytes",
                    "1073741824\n",
                ),
                (
                    "sys/fs/cgroup/memory/jetson/job/memory.stat",
                    "cache 0\ntotal_inactive_file 0\n",
                ),
            ])
        };
        let limited = v1("2147483648\n");
        assert_eq!(
            memory_room_under(limited.path(), None),
            Some(Room {
                bytes: GIB,
                bound: Bound::Cgroup
            })
        );
        let unlimited = v1("9223372036854771712\n");
        assert_eq!(
            memory_room_under(unlimited.path(), None).map(|r| r.bound),
            Some(Bound::System)
        );
        // Garbled files are no limit rather than a wrong one.
        let garbled = v1("lots\n");
        assert_eq!(
            memory_room_under(garbled.path(), None).map(|r| r.bound),
            Some(Bound::System)
        );
    }

    #[test]
    fn an_address_space_limit_counts_what_the_process_maps_already() {
        let root = tree(&[MEMINFO, ("proc/self/status", "VmSize:\t 1048576 kB\n")]);
        assert_eq!(
            memory_room_under(root.path(), Some(3 * GIB)),
            Some(Room {
                bytes: 2 * GIB,
                bound: Bound::AddressSpace
            })
        );
        // A limit above the system's memory leaves the system as the bound.
        assert_eq!(
            memory_room_under(root.path(), Some(64 * GIB)).map(|r| r.bound),
            Some(Bound::System)
        );
        assert!(Bound::AddressSpace.phrase().contains("ulimit -v"));
    }

    #[test]
    fn this_process_has_some_room() {
        let room = memory_room();
        assert!(room.is_some_and(|r| r.bytes > 0), "{room:?}");
    }
}
