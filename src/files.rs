//! Files written whole, and files opened only as what they claim to be: shared helpers every
//! layer may use.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A file or directory edgeprof could not write, with where; its message is the one sentence
/// the user reads.
#[derive(Debug, Error)]
pub enum FileError {
    // The I/O error is part of the sentence, not a source of its own: a chain printed
    // whole would say it twice.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot create {}: {error}", path.display())]
    Create {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A directory to write into that is a symbolic link: what the user gave, so bad input.
    #[error("{} is a symbolic link, and edgeprof writes only into real directories there", path.display())]
    Link { path: PathBuf },
}

impl FileError {
    /// Why, without the path: the system's reason (or that the folder is a link).
    pub fn reason(&self) -> String {
        match self {
            FileError::Write { error, .. } | FileError::Create { error, .. } => error.to_string(),
            FileError::Link { .. } => "it is a symbolic link".to_string(),
        }
    }

    /// Whether what the user asked for (a path that is a link) is at fault rather than the
    /// machine (a full disk, a missing permission).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, FileError::Link { .. })
    }
}

/// Writes a file whole, through a temporary file renamed into place, so a reader (or a crash)
/// never sees half of it. The rename replaces whatever `path` was, a symbolic link included,
/// rather than writing through it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let tmp = path.with_extension("tmp");
    // A symbolic link (or anything) left at the temporary name is replaced, not followed.
    let _ = std::fs::remove_file(&tmp);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let written = open_regular(&tmp, &options)
        .and_then(|mut file| std::io::Write::write_all(&mut file, bytes))
        .and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A full disk leaves no half-written file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|error| FileError::Write {
        path: path.to_path_buf(),
        error,
    })
}

/// Opens `path` with `options` only when it is a regular file: a symbolic link is not followed
/// (a link planted in a results directory would have edgeprof append to, or truncate, its
/// target), and a FIFO, a device or a directory is refused at once rather than read forever or
/// waited on. The error says which it was.
pub fn open_regular(path: &Path, options: &OpenOptions) -> std::io::Result<File> {
    let mut options = options.clone();
    // O_NONBLOCK only keeps the open of a FIFO from waiting for a writer; it changes nothing
    // for a regular file.
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => std::io::Error::other(
            "it is a symbolic link, and edgeprof opens its files only as regular files",
        ),
        Some(libc::ENXIO) => std::io::Error::other("it is a FIFO or a socket, not a regular file"),
        _ => e,
    })?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let what = if kind.is_dir() {
        "a directory"
    } else {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a socket or another special file"
        }
    };
    Err(std::io::Error::other(format!(
        "it is {what}, not a regular file"
    )))
}

/// Creates the directory `path` (and its parents) inside a results directory, refusing one
/// that is a symbolic link: files written into it would land wherever the link points.
pub fn create_real_dir(path: &Path) -> Result<(), FileError> {
    let create = |error| FileError::Create {
        path: path.to_path_buf(),
        error,
    };
    std::fs::create_dir_all(path).map_err(create)?;
    let meta = std::fs::symlink_metadata(path).map_err(create)?;
    if meta.file_type().is_symlink() {
        return Err(FileError::Link {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Opens `path` for reading with [`open_regular`].
pub fn open_read(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    open_regular(path, &options)
}

/// Reads `path` whole with [`open_regular`], refusing one larger than `cap` bytes.
pub fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    read_at_most(open_read(path)?, cap)
}

/// Reads `file` to its end, refusing it when it holds more than `limit` bytes: the size its
/// metadata gives is checked first, and the read itself is bounded too (the metadata of a pipe
/// or a /proc file says nothing). The error says the size and the limit.
pub fn read_at_most(file: File, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let too_large = |size: u64| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it is {} and edgeprof reads files of this kind up to {}",
                crate::text::bytes(size),
                crate::text::bytes(limit)
            ),
        )
    };
    let size = file.metadata()?.len();
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

crate::error::kinds_by_input!(FileError);

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> tempfile::TempDir {
        match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_symbolic_link_is_not_followed() {
        let dir = scratch();
        let target = dir.path().join("target");
        let link = dir.path().join("link");
        if let Err(e) = std::fs::write(&target, "secret")
            .and_then(|_| std::os::unix::fs::symlink(&target, &link))
        {
            panic!("{e}");
        }
        let mut options = OpenOptions::new();
        options.append(true);
        match open_regular(&link, &options) {
            Ok(_) => panic!("opened a symbolic link"),
            Err(e) => assert!(e.to_string().contains("symbolic link"), "{e}"),
        }
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = scratch();
        let fifo = dir.path().join("manifest.json");
        match std::process::Command::new("mkfifo").arg(&fifo).status() {
            Ok(s) if s.success() => {}
            other => panic!("mkfifo: {other:?}"),
        }
        match open_read(&fifo) {
            Ok(_) => panic!("opened a FIFO"),
            Err(e) => assert_eq!(e.to_string(), "it is a FIFO, not a regular file"),
        }
    }

    #[test]
    fn an_endless_file_is_read_no_further_than_the_cap() {
        match read_capped(Path::new("/dev/zero"), 1024) {
            Ok(b) => panic!("read {} bytes of /dev/zero", b.len()),
            Err(e) => assert_eq!(e.to_string(), "it is a device, not a regular file"),
        }
    }

    #[test]
    fn write_atomic_replaces_a_link_at_its_temporary_name() {
        let dir = scratch();
        let victim = dir.path().join("victim");
        let path = dir.path().join("summary.csv");
        if let Err(e) = std::fs::write(&victim, "keep")
            .and_then(|_| std::os::unix::fs::symlink(&victim, path.with_extension("tmp")))
        {
            panic!("{e}");
        }
        if let Err(e) = write_atomic(&path, b"new") {
            panic!("{e:#}");
        }
        match std::fs::read_to_string(&victim) {
            Ok(t) => assert_eq!(t, "keep"),
            Err(e) => panic!("{e}"),
        }
    }
}
