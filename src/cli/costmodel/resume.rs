//! Continuing a profile run cut short: the measurements it kept beside the database.

use super::ProfileArgs;
use crate::cli::BadInput;
use edgeprof::tune::costmodel::{self, Profile};

/// The measurements a run cut short left at `partial` that this run continues (`--resume`),
/// none when there are none or they were discarded (`--restart`); without either flag, such
/// measurements stop the run with what to do, so that none is lost or mixed in unasked.
pub(super) fn resumed(
    partial: Option<&std::path::Path>,
    args: &ProfileArgs,
    input: &str,
    cores: Option<&[usize]>,
) -> anyhow::Result<Vec<Profile>> {
    let Some(path) = partial else {
        return Ok(Vec::new());
    };
    let Some((left, broken)) = costmodel::partial::read(path)? else {
        if args.resume {
            errln!(
                "nothing to resume ({} does not exist): profiling from the start",
                path.display()
            );
        }
        return Ok(Vec::new());
    };
    if args.restart {
        costmodel::partial::remove(path)?;
        errln!(
            "discarded {} measurement(s) a run cut short left in {}",
            left.len(),
            path.display()
        );
        return Ok(Vec::new());
    }
    let when = match (left.first(), left.last()) {
        (Some(a), Some(b)) => format!(", taken {} – {}", a.written, b.written),
        _ => String::new(),
    };
    if !args.resume {
        anyhow::bail!(BadInput(format!(
            "a profile run cut short left {} measurement(s) in {}{when}: --resume continues \
             it, --restart discards them",
            left.len(),
            path.display()
        )));
    }
    if let Some(why) = costmodel::partial::mismatch(&left, &args.engine, input, cores) {
        anyhow::bail!(BadInput(format!(
            "--resume: the measurements in {} cannot be continued by this run ({why}); run \
             with those settings, or --restart",
            path.display()
        )));
    }
    let cut = if broken > 0 {
        format!(" ({broken} line(s) cut short by the interruption left out)")
    } else {
        String::new()
    };
    errln!(
        "resuming: {} measurement(s) kept from {}{when}{cut}",
        left.len(),
        path.display()
    );
    Ok(left)
}
