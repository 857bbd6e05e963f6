//! What a shell and `man` need from the command line's definition: completion scripts and manual
//! pages, generated from the same clap definition the binary parses, so they cannot drift from it.

use super::args::Cli;
use anyhow::Context;
use clap::CommandFactory;
use std::path::Path;

/// The completion script for `shell`, on standard output.
pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut command = Cli::command();
    // Generated into memory first: the generators panic on a failed write, and standard
    // output may be a closed pipe.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "edgeprof", &mut script);
    let text = String::from_utf8(script).context("the completion script is not UTF-8")?;
    super::print_raw(&text)
}

/// The manual page of `edgeprof` on standard output, or, with `dir`, `edgeprof.1` and one page per
/// command (`edgeprof-run.1`, `edgeprof-roofline-measure.1`, …) written there.
pub(super) fn man(dir: Option<&Path>) -> anyhow::Result<()> {
    let command = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .context("cannot render the manual page")?;
        let text = String::from_utf8(page).context("the manual page is not UTF-8")?;
        return super::print_raw(&text);
    };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
    let mut pages: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("edgeprof") && name.ends_with(".1"))
        .collect();
    pages.sort();
    super::print_out(&format!(
        "wrote {} manual pages into {} (read one with `man {}/edgeprof.1`)\n",
        pages.len(),
        dir.display(),
        dir.display()
    ))
}
