//! `edgeprof costmodel import`: tune tables' rows as trials, sweeps' layer times as profiles.

use super::{open, ImportArgs};
use crate::cli::print_out;
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

/// Adds the profiles of sweep `dir` that the database lacks (see [`costmodel::sweep::import`]).
fn import_sweep(
    db: &mut Db,
    dir: &std::path::Path,
    this_device: bool,
    out: &mut String,
) -> anyhow::Result<()> {
    let imported = costmodel::sweep::import(db, dir, this_device)?;
    let _ = writeln!(
        out,
        "{}: {} profile(s) added{}",
        dir.display(),
        imported.added,
        if imported.present > 0 {
            format!(", {} already in the database", imported.present)
        } else {
            String::new()
        }
    );
    for (id, why) in &imported.left_out {
        let _ = writeln!(out, "  left out {id}: {why}");
    }
    if imported.added + imported.present == 0 && imported.left_out.is_empty() {
        let _ = writeln!(
            out,
            "  no condition of it has layer times: run it with measure.layer_runs (e.g. 15)"
        );
    }
    Ok(())
}
