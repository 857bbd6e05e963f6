//! Collectors: read what the system says about a process and the machine. Every reader takes a
//! root path (the real `/`, or a fixture tree in tests) and never imports a front-end.

pub mod alarm;
pub mod board;
pub mod ceilings;
pub mod child;
pub mod device;
pub mod exit;
pub mod gpubench;
pub mod gpuprof;
pub mod kernels;
pub mod memory_room;
pub mod other_processes;
pub mod perf;
pub mod proc;
pub mod reread;
pub mod stop;
pub mod tegrastats;
pub mod telemetry;
pub mod tree;

/// The first executable `name` on PATH, if any (a file without the execute permission, or a
/// directory of that name, is passed over as the shell would).
pub fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    which::which(name).ok()
}

/// The first executable `name` in `dirs`, in their order.
pub fn find_in(name: &str, dirs: &[std::path::PathBuf]) -> Option<std::path::PathBuf> {
    let joined = std::env::join_paths(dirs).ok()?;
    let here = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    which::which_in(name, Some(joined), here).ok()
}

/// A text file read whole, refused when larger than `limit` bytes: the parsers hold several
/// times a file's size while they work, so a mistaken multi-gigabyte file would exhaust memory
/// instead of being refused. The error says the size and the limit.
pub fn read_capped(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    let bytes = crate::files::read_at_most(std::fs::File::open(path)?, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it is not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn capped_reads_refuse_large_files_and_say_the_sizes() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let file = dir.path().join("f.txt");
        if let Err(e) = std::fs::write(&file, "x".repeat(3000)) {
            panic!("{e}");
        }
        assert_eq!(
            super::read_capped(&file, 3000).map(|t| t.len()).ok(),
            Some(3000)
        );
        let why = super::read_capped(&file, 2048)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            why,
            "it is 2.93 KiB and edgeprof reads files of this kind up to 2.00 KiB"
        );
        if let Err(e) = std::fs::write(&file, [b'a', 0xff, b'b']) {
            panic!("{e}");
        }
        let why = super::read_capped(&file, 10)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(why, "it is not UTF-8 text (byte 1)");
        assert!(super::read_capped(&dir.path().join("none"), 10)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound));
    }
}
