//! A kernel file (procfs, sysfs) that a sampler reads again and again: opened once and re-read
//! from its start with `pread`, so a sample costs a read or two instead of an open, a stat,
//! several growing reads and a close. The buffer keeps the size the file had, so the next read
//! usually takes one call.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub struct Reread {
    path: PathBuf,
    file: Option<File>,
    buf: Vec<u8>,
}

impl Reread {
    pub fn new(path: &Path) -> Reread {
        Reread {
            path: path.to_path_buf(),
            file: None,
            buf: Vec::new(),
        }
    }

    /// The file's whole text now; None when it cannot be opened or read (it is opened again
    /// next time: a CPU that went offline takes its files with it).
    pub fn read(&mut self) -> Option<&str> {
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        let file = self.file.as_ref()?;
        let mut len = 0;
        loop {
            if self.buf.len() < len + 4096 {
                self.buf.resize(len + 4096, 0);
            }
            match file.read_at(&mut self.buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.file = None;
                    return None;
                }
            }
        }
        std::str::from_utf8(&self.buf[..len]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_whole_each_time_as_it_is_then() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("stat");
        let long = "x".repeat(10_000);
        std::fs::write(&path, &long)?;
        let mut file = Reread::new(&path);
        assert_eq!(file.read(), Some(long.as_str()));
        // Shorter now (rewritten in place, as the kernel's files are): only what it holds.
        std::fs::write(&path, "short\n")?;
        assert_eq!(file.read(), Some("short\n"));
        std::fs::remove_file(&path)?;
        let mut gone = Reread::new(&path);
        assert_eq!(gone.read(), None);
        // Procfs regenerates its text at offset 0.
        let mut stat = Reread::new(Path::new("/proc/self/stat"));
        let first = stat.read().map(str::to_string);
        assert!(first.is_some_and(|t| t.contains('(')));
        assert!(stat.read().is_some());
        Ok(())
    }
}
