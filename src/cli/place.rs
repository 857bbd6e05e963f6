//! `edgeprof place`: layer placement across processing units, run by the library's
//! [`edgeprof::tune::place`] job; this prints its progress and its report.

use crate::cli::{print_json, print_out, render};
use clap::Args;
use edgeprof::tune::place::{PlaceJob, PlaceReport};
use edgeprof::tune::placement::Plan;
use std::fmt::Write as _;

#[derive(Args, Debug)]
pub struct PlaceArgs {
    /// The model to place: one of the zoo's, or an ONNX file
    #[arg(long)]
    model: String,
    /// A zoo model's input as CxHxW (default 3x224x224); an ONNX file's inputs as `models
    /// info --input` takes them (NAME=DIMS, NAME=TYPE:VALUE, NAME=@FILE), repeated for several
    /// (default: the file's own shapes)
    #[arg(long, value_name = "SPEC")]
    input: Vec<String>,
    /// A zoo model's batch (default 1)
    #[arg(long)]
    batch: Option<usize>,
    /// A zoo model's classes (default 1000)
    #[arg(long)]
    classes: Option<usize>,
    /// The units as NAME=CPUS, comma-separated (e.g. big=4-7,little=0-3), or
    /// NAME=onnxruntime:DEVICE[@CPUS] for a unit onnxruntime serves on `cpu` or `cuda:N`; the
    /// first is the host, where the input starts and the output ends (default: big and LITTLE
    /// clusters, else the first two CPUs as two units, and GPU 0 as unit `gpu` where there is
    /// one and onnxruntime has its CUDA provider)
    #[arg(long)]
    units: Option<String>,
    /// With the default units, leave the GPU out
    #[arg(long)]
    no_gpu: bool,
    /// The Python whose onnxruntime serves the onnxruntime units (default: edgeprof's
    /// environment, else the system's python3)
    #[arg(long, value_name = "PATH")]
    python: Option<std::path::PathBuf>,
    /// Most blocks the chain is cut into
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    blocks: u32,
    /// Timed runs per measurement (medians are kept)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Run this assignment (the unit index of each block, e.g. 0,0,1,1) instead of the optimal
    #[arg(long, value_delimiter = ',')]
    assign: Vec<usize>,
    /// Only predict: do not run the plan
    #[arg(long)]
    no_run: bool,
    /// Print the result as JSON instead of text
    #[arg(long)]
    json: bool,
}

pub fn run(args: PlaceArgs) -> anyhow::Result<()> {
    let job = PlaceJob {
        model: args.model,
        input: args.input,
        batch: args.batch,
        classes: args.classes,
        units: args.units,
        no_gpu: args.no_gpu,
        python: args.python,
        blocks: args.blocks as usize,
        runs: args.runs as usize,
        assign: args.assign,
        run: !args.no_run,
    };
    let report = edgeprof::tune::place::place(&job, |line| errln!("{line}"))?;
    if args.json {
        print_json(&report)
    } else {
        print_out(&report_text(&report))
    }
}

fn report_text(r: &PlaceReport) -> String {
    let mut out = format!(
        "placement of {} {} batch {} over {} unit(s); unit 0 ({}) holds the input and the output\n{}\n\n",
        r.model,
        r.input,
        r.batch,
        r.units.len(),
        r.units.first().map_or("", |u| u.name.as_str()),
        r.gpu
    );
    let mut header = vec!["block".to_string(), r.counts.to_string(), "out".to_string()];
    header.extend(r.units.iter().map(|u| format!("{} ms", u.name)));
    header.push("optimal".into());
    let rows: Vec<Vec<String>> = r
        .blocks
        .iter()
        .zip(&r.stages)
        .enumerate()
        .map(|(i, (b, s))| {
            let mut row = vec![
                b.name.clone(),
                format!("{}..{}", b.first, b.end),
                render::bytes(b.out_bytes),
            ];
            row.extend(s.ms.iter().map(|m| format!("{m:.3}")));
            row.push(r.units[r.optimal.units[i]].name.clone());
            row
        })
        .collect();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut right = vec![false, false, true];
    right.extend(r.units.iter().map(|_| true));
    right.push(false);
    out.push_str(&render::table(&header_refs, &right, &rows));
    let k = r.units.len();
    if k > 1 {
        out.push_str(
            "\ncopy cost between units (t = α + bytes/β, fitted from the copy microbenchmark)\n",
        );
        let mut link_rows = Vec::new();
        for a in 0..k {
            for b in (0..k).filter(|&b| b != a) {
                let l = &r.links.links[a][b];
                link_rows.push(vec![
                    format!("{} → {}", r.units[a].name, r.units[b].name),
                    format!("{:.4}", l.alpha_ms),
                    if l.beta.is_finite() {
                        format!("{:.2}", l.beta * 1e3 / 1e9)
                    } else {
                        "∞".into()
                    },
                    format!("{:.3}", l.ms(1 << 20)),
                ]);
            }
        }
        out.push_str(&render::table(
            &["link", "α ms", "β GB/s", "1 MiB ms"],
            &[false, true, true, true],
            &link_rows,
        ));
    }
    out.push_str("\nplans (predicted end-to-end latency)\n");
    let plan_name = |p: &Plan| -> String {
        p.units
            .iter()
            .map(|&u| r.units[u].name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut plan_rows = vec![vec![
        "optimal".to_string(),
        plan_name(&r.optimal),
        format!("{:.3}", r.optimal.predicted_ms),
        format!("{:.3}", r.optimal.transfer_ms),
    ]];
    if let Some(p) = &r.assigned {
        plan_rows.push(vec![
            "assigned".to_string(),
            plan_name(p),
            format!("{:.3}", p.predicted_ms),
            format!("{:.3}", p.transfer_ms),
        ]);
    }
    for (u, p) in r.single.iter().enumerate() {
        plan_rows.push(vec![
            format!("all on {}", r.units[u].name),
            plan_name(p),
            format!("{:.3}", p.predicted_ms),
            format!("{:.3}", p.transfer_ms),
        ]);
    }
    out.push_str(&render::table(
        &["plan", "units per block", "ms", "of which copies"],
        &[false, false, true, true],
        &plan_rows,
    ));
    if let (Some(p), Some(m)) = (&r.ran, &r.measured) {
        let _ = writeln!(
            out,
            "\nran {} as {} sub-model(s) chained {}: measured median {:.3} ms (range {:.3}–{:.3}) against {:.3} ms predicted ({:+.1}%); output matches the whole model's to {:.1e} (relative)",
            plan_name(p),
            m.segments.len(),
            if m.segments.iter().any(|s| r.units[s.0].engine.is_some()) {
                "through channels, and pipes to the onnxruntime units' processes"
            } else {
                "in one process"
            },
            m.median_ms,
            m.min_ms,
            m.max_ms,
            p.predicted_ms,
            (m.median_ms / p.predicted_ms - 1.0) * 100.0,
            m.max_relative_difference
        );
        if m.non_finite > 0 {
            let _ = writeln!(
                out,
                "warning: {} of the whole model's output values are NaN or infinite, so the \
                 comparison says little (each matched only the same non-finite value)",
                m.non_finite
            );
        }
    }
    out
}
