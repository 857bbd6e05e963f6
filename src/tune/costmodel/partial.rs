//! A profile run's measurements kept as they are taken, beside the database, until the run
//! merges them into it: a run cut short (the SSH session dropped, Ctrl-C, a reboot) resumes
//! from them instead of starting over, and nothing half-merged ever reaches the database.

use super::{Db, Profile};
use std::path::{Path, PathBuf};

/// Where the run writing to the database at `db` keeps its measurements: `<db>.partial`.
pub fn beside(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// What a cut-short run left: its measurements (one round of one model each, in the order
/// taken) and the lines that did not parse (a line cut by the interruption). None when there
/// is no such file.
pub fn read(path: &Path) -> Result<Option<(Vec<Profile>, usize)>, crate::error::BadInput> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(crate::error::BadInput(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let mut broken = 0;
    let rounds = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let parsed = serde_json::from_str::<Profile>(l).ok();
            broken += usize::from(parsed.is_none());
            parsed
        })
        .collect();
    Ok(Some((rounds, broken)))
}

/// Keeps one measurement (a line, flushed to the disk).
pub fn append(path: &Path, round: &Profile) -> crate::error::Result<()> {
    Db::append_to(path, round)
}

/// Removes the file once the run has merged its measurements into the database (or they were
/// discarded); a file already gone is no error.
pub fn remove(path: &Path) -> crate::error::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(crate::error::failed!(
            "cannot remove {}: {e}",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// Why the measurements a cut-short run left cannot be resumed by a run of `engine` at `input`
/// on `cores`: the first that was taken otherwise, described. None when all can.
pub fn mismatch(
    rounds: &[Profile],
    engine: &str,
    input: &str,
    cores: Option<&[usize]>,
) -> Option<String> {
    let other = rounds.iter().find(|p| {
        p.engine != engine
            || (p.input != input
                && !super::is_file(&p.model)
                && super::graph_probe::seed_of(&p.model).is_none())
            || p.cores.as_deref() != cores
    })?;
    let on = other.cores.as_deref().map_or("every CPU".to_string(), |c| {
        format!("CPUs {}", crate::collect::device::cpu_list(c))
    });
    Some(format!(
        "they were taken with {} at {} on {on}",
        other.engine, other.input
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(model: &str, engine: &str) -> Profile {
        Profile::one_round(
            engine,
            (model, "3x64x64", 1),
            Vec::new(),
            (1.0, (0.99, 1.01)),
            vec![1.0, 1.0],
        )
    }

    #[test]
    fn measurements_are_kept_read_back_past_a_cut_line_and_removed() -> crate::error::Result<()> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("costmodel-x.jsonl");
        let path = beside(&db);
        assert_eq!(path, dir.path().join("costmodel-x.jsonl.partial"));
        assert!(read(&path)?.is_none());
        append(&path, &round("probe-1", "tract"))?;
        append(&path, &round("resnet18", "tract"))?;
        // The run was killed in the middle of a line.
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str("{\"engine\": \"tra");
        std::fs::write(&path, text)?;
        let (rounds, broken) = read(&path)?.ok_or_else(|| crate::error::failed!("no file"))?;
        assert_eq!(rounds.len(), 2);
        assert_eq!(broken, 1);
        assert_eq!(rounds[1].model, "resnet18");
        assert_eq!(rounds[1].times_ms, vec![1.0, 1.0]);
        assert_eq!(mismatch(&rounds, "tract", "3x64x64", None), None);
        let why = mismatch(&rounds, "tract", "3x32x32", None);
        assert_eq!(
            why.as_deref(),
            Some("they were taken with tract at 3x64x64 on every CPU")
        );
        assert!(mismatch(&rounds, "onnxruntime", "3x64x64", None).is_some());
        assert!(mismatch(&rounds, "tract", "3x64x64", Some(&[0])).is_some());
        remove(&path)?;
        assert!(read(&path)?.is_none());
        remove(&path)?;
        Ok(())
    }
}
