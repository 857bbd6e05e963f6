//! `edgeprof run CONFIG` when `matrix.nodes` names nodes: the fleet run's progress on stderr,
//! its tables on stdout, `fleet.json` and one results directory per node.

use super::{print_out, render};
use anyhow::Context;
use edgeprof::collect::stop::Cancel;
use edgeprof::config::Config;
use edgeprof::event::{Event, RunEvent};
use edgeprof::fleet::run::{self as fleet, FleetEvent, FLEET};
use edgeprof::results;
use std::path::Path;

pub fn run(file: &Path, config: &Config, output: Option<&Path>) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    // Ctrl-C or SIGTERM cancels every node (a second one ends edgeprof at once); a hang-up
    // does not stop the run.
    let cancel = Cancel::new();
    crate::cli::sweep::install_stop_handlers(&cancel)?;
    let nodes = edgeprof::fleet::run::targets(config).len();
    let show = |event: Event| match event {
        Event::Run(RunEvent::FleetStarted { dir, nodes: names }) => errln!(
            "{}: a fleet run on {nodes} node(s) ({}), each running the whole matrix; results in {}",
            config.name,
            names.join(", "),
            dir.display()
        ),
        Event::Run(RunEvent::Node(event)) => node_line(event),
        _ => {}
    };
    let runtime = super::runtime()?;
    let driver = fleet::Driver::Own(&runtime);
    let ran = edgeprof::jobs::fleet(config, &text, file, output, &cancel, &driver, &show)?;
    let (dir, outcomes) = (&ran.dir, &ran.outcomes);
    let rows: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| {
            let device = results::read_manifest(&fleet::node_dir(dir, &o.name))
                .map(|m| fleet::device_line(&m))
                .unwrap_or_default();
            vec![
                o.name.clone(),
                o.status.word().to_string(),
                device,
                o.ok.to_string(),
                o.failed.to_string(),
                o.reason.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut out = render::table(
        &["node", "status", "device", "ok", "failed", "reason"],
        &[false, false, false, true, true, false],
        &rows,
    );
    let mut conditions = Vec::new();
    for o in outcomes {
        let Ok(stored) = results::load(&fleet::node_dir(dir, &o.name)) else {
            continue;
        };
        for r in results::summary::rows(&stored.manifest, &stored.runs) {
            conditions.push(vec![
                o.name.clone(),
                r.id.clone(),
                r.status.clone(),
                r.median_ms.map(|m| format!("{m:.3}")).unwrap_or_default(),
                r.images_per_s
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_default(),
                r.peak_rss_bytes.map(render::bytes).unwrap_or_default(),
            ]);
        }
    }
    if !conditions.is_empty() {
        out.push('\n');
        out.push_str(&render::table(
            &[
                "node",
                "condition",
                "status",
                "median ms",
                "images/s",
                "peak RSS",
            ],
            &[false, false, false, true, true, true],
            &conditions,
        ));
    }
    out.push_str(&format!(
        "\nresults in {}: {FLEET} and one results directory per node (edgeprof report {}/NODE)\n",
        dir.display(),
        dir.display()
    ));
    print_out(&out)?;
    Ok(ran.verdict()?)
}

/// One node's event, as a line on stderr.
fn node_line(event: FleetEvent) {
    match event {
        FleetEvent::Started {
            node,
            conditions,
            device,
        } => errln!("[{node}] started: {conditions} condition(s) on {device}"),
        FleetEvent::Record { node, record } => {
            errln!(
                "[{node}] {}: {}",
                record.condition.id,
                results::summary::record_line(&record, !record.last && !record.ok)
            );
        }
        FleetEvent::Dropped {
            node,
            reason,
            resuming,
        } => errln!(
            "[{node}] dropped: {reason}{}",
            if resuming {
                "; trying again"
            } else {
                "; its unfinished conditions are recorded as failures"
            }
        ),
        FleetEvent::Finished(o) => errln!(
            "[{}] {}: {} ok, {} failed",
            o.name,
            o.status.word(),
            o.ok,
            o.failed
        ),
    }
}
