//! Files written whole: a shared helper every layer may use.

use anyhow::Context;
use std::path::Path;

/// Writes a file whole, through a temporary file renamed into place, so a reader (or a crash)
/// never sees half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let written = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A full disk leaves no half-written file behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}
