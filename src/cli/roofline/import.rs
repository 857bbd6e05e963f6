//! `edgeprof roofline import-ert`, `import-ncu` and `import-nvprof`: other tools' measurements
//! read into ceilings and program points.

use super::*;

/// Most bytes of an ERT roofline.json or sweep file (real ones are a few KiB).
const MAX_ERT_BYTES: u64 = 16 << 20;

/// Most bytes of an ncu or nvprof CSV file: a long application with every kernel profiled
/// makes tens of MiB; parsing holds a few times the file.
const MAX_PROFILE_BYTES: u64 = 256 << 20;

/// A file read whole up to `limit` bytes, or one sentence naming it, its size and the limit.
fn read_input(path: &Path, limit: u64) -> Result<String, BadInput> {
    edgeprof::collect::read_capped(path, limit)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))
}

/// `edgeprof roofline import-ert`.
pub fn import_ert(path: &Path, sweep: Option<&Path>, gpu: Option<usize>) -> anyhow::Result<()> {
    let read = |p: &Path| read_input(p, MAX_ERT_BYTES);
    let json = read(path)?;
    let sweep_text = sweep.map(read).transpose()?;
    let kept = store::import_ert(path, &json, sweep_text.as_deref(), gpu)?;
    for note in &kept.notes {
        errln!("{note}");
    }
    let stored = &kept.stored;
    let mut out = match stored.gpu {
        Some(_) => format!("{}\n\n", stored.ceilings.source),
        None => format!(
            "{} ({} thread(s))\n\n",
            stored.ceilings.source, kept.threads
        ),
    };
    out.push_str(&ceilings_text(&stored.ceilings, &stored.device.caches));
    let _ = writeln!(
        out,
        "\nsaved to {} (used by later roofline commands on this device)",
        kept.saved.display()
    );
    print_out(&out)
}

pub struct ImportOptions<'a> {
    pub ceilings: Option<&'a Path>,
    /// Whose stored ceilings to use without `ceilings`.
    pub gpu: usize,
    pub label: Option<&'a str>,
    pub json: bool,
    pub ascii: bool,
    pub size: (usize, usize),
    pub svg: Option<&'a Path>,
}

/// `edgeprof roofline import-ncu` / `import-nvprof`: the kernels and the program as points per
/// level, the warnings (failed launches, truncated lines, levels that disagree), and with
/// --ceilings the chart and the advice.
pub fn import_gpu_profile(
    path: &Path,
    summary: Option<&Path>,
    o: ImportOptions,
    nvprof: bool,
) -> anyhow::Result<()> {
    use edgeprof::roofline::{advice, nvidia};
    let read = |p: &Path| read_input(p, MAX_PROFILE_BYTES);
    let text = read(path)?;
    let summary_text = summary.map(read).transpose()?;
    let import = if nvprof {
        nvidia::parse_nvprof(&text, summary_text.as_deref())
    } else {
        nvidia::parse_ncu(&text)
    };
    // A bad time in the summary is the summary's fault: name that file.
    let import = import.map_err(|e| {
        let file = match (&e, summary) {
            (nvidia::ImportError::BadValue { place, .. }, Some(s))
                if place.starts_with("GPU summary") =>
            {
                s
            }
            _ => path,
        };
        BadInput(format!("{}: {e}", file.display()))
    })?;
    let label = o.label.map(str::to_string).unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "gpu program".to_string())
    });
    let program = nvidia::program(&import, &label);
    // A given file, else this GPU's stored ceilings when there are any.
    let ceilings = match o.ceilings {
        Some(f) => Some(load_ceilings(Some(f))?),
        None => load_gpu_ceilings(None, o.gpu).ok(),
    };
    let analysis = match (&program, &ceilings) {
        (Some(p), Some((c, _))) => Some(advice::analyse(p, &c.ceilings).map_err(|e| e.to_string())),
        _ => None,
    };
    if o.json {
        let kernels: Vec<serde_json::Value> = import
            .kernels
            .iter()
            .map(|k| {
                serde_json::json!({
                    "name": k.name,
                    "invocations": k.invocations,
                    "seconds": k.seconds,
                    "flops": k.flops.iter().map(|(p, f)| (p.to_string(), *f)).collect::<std::collections::BTreeMap<_, _>>(),
                    "bytes": k.bytes.iter().map(|(l, b)| (l.to_string(), *b)).collect::<std::collections::BTreeMap<_, _>>(),
                })
            })
            .collect();
        return print_json(&serde_json::json!({
            "tool": import.tool,
            "kernels": kernels,
            "program": program,
            "warnings": import.warnings,
            "analysis": analysis.map(|a| match a {
                Ok(a) => serde_json::to_value(a).unwrap_or_default(),
                Err(e) => serde_json::json!({ "error": e }),
            }),
        }));
    }
    for w in &import.warnings {
        errln!("warning: {w}");
    }
    let mb = |b: Option<&f64>| b.map_or("-".to_string(), |b| format!("{:.1}", b / 1e6));
    let rows: Vec<Vec<String>> = import
        .kernels
        .iter()
        .map(|k| {
            let name: String = k.name.chars().take(48).collect();
            vec![
                name,
                k.invocations.to_string(),
                k.seconds
                    .map_or("-".to_string(), |s| format!("{:.3}", s * 1e3)),
                format!("{:.3}", k.total_flops() / 1e9),
                mb(k.bytes.get(&Level::L1)),
                mb(k.bytes.get(&Level::L2)),
                mb(k.bytes.get(&Level::Dram)),
            ]
        })
        .collect();
    let mut out = format!(
        "{}: {} kernel(s) from {}\n\n",
        label,
        import.kernels.len(),
        import.tool
    );
    out.push_str(&render::table(
        &[
            "kernel", "calls", "time ms", "GFLOP", "L1 MB", "L2 MB", "DRAM MB",
        ],
        &[false, true, true, true, true, true, true],
        &rows,
    ));
    match (&program, &ceilings) {
        (None, _) => out.push_str(
            "\nno kernel has a time, so there is no FLOP rate to place (nvprof: give --summary)\n",
        ),
        (Some(p), None) => {
            let _ = writeln!(
                out,
                "\nprogram: {:.3} GFLOP in {:.3} ms = {:.2} GFLOP/s ({})",
                p.flops / 1e9,
                p.seconds * 1e3,
                p.flops_per_s().unwrap_or(0.0) / 1e9,
                p.basis.join("; ")
            );
            for l in [Level::L1, Level::L2, Level::Dram] {
                if let Some(ai) = p.intensity(l) {
                    let _ = writeln!(out, "  {l}: {ai:.3} FLOP/byte");
                }
            }
            let _ = writeln!(
                out,
                "\nno ceilings for GPU {} yet: run `edgeprof roofline measure-gpu` (or import an \
                 ERT GPU run with `roofline import-ert FILE --gpu`), or pass --ceilings FILE, for \
                 the chart and the advice",
                o.gpu
            );
        }
        (Some(p), Some((c, from))) => {
            if let Some(path) = o.svg {
                let svg = edgeprof::report::svg::roofline(
                    &c.ceilings,
                    p.precision,
                    std::slice::from_ref(p),
                )?;
                edgeprof::results::write_atomic(path, svg.as_bytes())?;
                errln!("wrote {}", path.display());
            }
            out.push('\n');
            out.push_str(&roofline_text(
                &c.ceilings,
                from,
                std::slice::from_ref(p),
                &[],
                p.precision,
                o.ascii,
                o.size,
            ));
        }
    }
    print_out(&out)
}
