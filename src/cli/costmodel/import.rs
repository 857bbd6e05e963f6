//! `edgeprof costmodel import`: tune tables' rows as trials, sweeps' layer times as profiles.

use super::{open, ImportArgs};
use crate::cli::{print_out, BadInput};
use edgeprof::tune::costmodel::{self, Db};
use std::fmt::Write as _;

pub(super) fn import(args: ImportArgs) -> anyhow::Result<()> {
    let mut db = open(&args.db)?;
    let mut out = String::new();
    for path in &args.tables {
        if path.is_dir() {
            import_sweep(&mut db, path, args.db.is_none(), &mut out)?;
            continue;
        }
        let table = edgeprof::tune::replay::Table::load(path)?;
        let (added, present) = db.import(&table)?;
        let _ = writeln!(
            out,
            "{}: {added} trial(s) of {} {} added{}",
            path.display(),
            table.model,
            table.input,
            if present > 0 {
                format!(", {present} already in the database")
            } else {
                String::new()
            }
        );
    }
    if let Some(path) = &db.path {
        let _ = writeln!(out, "database: {}", path.display());
    }
    print_out(&out)
}

/// Adds the profiles of sweep `dir` (see [`costmodel::sweep`]) that the database lacks. Into
/// this device's database (`this_device`) only a sweep measured on this device.
fn import_sweep(
    db: &mut Db,
    dir: &std::path::Path,
    this_device: bool,
    out: &mut String,
) -> anyhow::Result<()> {
    if !dir.join("manifest.json").is_file() {
        anyhow::bail!(BadInput(format!(
            "{} is neither a table of `edgeprof tune --exhaustive` nor a sweep's results \
             directory (it holds no manifest.json)",
            dir.display()
        )));
    }
    // A directory that is not a readable run is bad input, as `report` and `compare` say.
    let stored = edgeprof::results::load(dir).map_err(|e| BadInput(format!("{e:#}")))?;
    if this_device {
        let key = edgeprof::roofline::store::device_key;
        let here = edgeprof::collect::device::fingerprint(std::path::Path::new("/"));
        let there = &stored.manifest.device;
        if key(there) != key(&here) {
            anyhow::bail!(BadInput(format!(
                "{} was measured on another device ({}, {} {}); this device's database learns \
                 from its own measurements only (give --db FILE to keep them elsewhere)",
                dir.display(),
                there.hostname.as_deref().unwrap_or("unnamed"),
                there.arch,
                there.cpu_model.as_deref().unwrap_or("unknown CPU")
            )));
        }
    }
    let found = costmodel::sweep::profiles(&stored);
    let (mut added, mut present) = (0, 0);
    for p in found.profiles {
        let known = db.profiles.iter().any(|q| {
            (
                &q.engine, &q.model, &q.input, q.threads, &q.cores, &q.written,
            ) == (
                &p.engine, &p.model, &p.input, p.threads, &p.cores, &p.written,
            )
        });
        if known {
            present += 1;
        } else {
            db.append(p)?;
            added += 1;
        }
    }
    let _ = writeln!(
        out,
        "{}: {added} profile(s) added{}",
        dir.display(),
        if present > 0 {
            format!(", {present} already in the database")
        } else {
            String::new()
        }
    );
    for (id, why) in &found.left_out {
        let _ = writeln!(out, "  left out {id}: {why}");
    }
    if added + present == 0 && found.left_out.is_empty() {
        let _ = writeln!(
            out,
            "  no condition of it has layer times: run it with measure.layer_runs (e.g. 15)"
        );
    }
    Ok(())
}
