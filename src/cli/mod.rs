//! The headless front-end: argument parsing and dispatch. Results go to stdout, progress and
//! errors to stderr.

mod args;
mod bench_command;
mod board;
mod compare;
mod costmodel;
mod env;
pub(crate) mod fleet;
mod frameworks;
mod monitor;
mod nodes;
mod place;
pub mod render;
mod roofline;
mod shell;
pub(crate) mod sweep;
pub(crate) mod train;
mod tune;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};
use edgeprof::bench::{self, BenchModel, BenchRequest};
use edgeprof::models::cost;
use edgeprof::models::onnx::{self, DEFAULT_SEED};
use edgeprof::models::zoo::{self, ModelParams};
use edgeprof::models::InputShape;
use std::io::Write;
use std::path::{Path, PathBuf};

use args::*;
pub use args::{without_hidden_suggestions, Cli};
pub use edgeprof::error::BadInput;

fn tui(args: TuiArgs) -> anyhow::Result<()> {
    crate::tui::main(crate::tui::TuiOptions {
        config: args.config,
        theme: args.ui.theme,
        ascii: args.ui.ascii,
        open: args.ui.open,
        monitor: None,
        panic_after_first_frame: args.panic_after_first_frame,
    })
}

/// The CLI's one async runtime (a process makes at most one): the headless monitor's sampling
/// loop, a fleet run's nodes. Current-thread: what it waits on wakes it.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the event loop: {e}"))
}

/// Exit code for an error: 2 for bad input, 130 for a stop on request, 1 for anything else
/// (see [`edgeprof::jobs::kind_of`]).
pub fn exit_code_for(error: &anyhow::Error) -> u8 {
    edgeprof::jobs::kind_of(error.chain()).failure().exit_code()
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    // Tables fit the terminal that shows them; a file or a pipe gets them whole.
    edgeprof::text::fit_tables_to(if cli.wide {
        None
    } else {
        edgeprof::text::console::columns(1)
    });
    let ui_flags = cli.ui.ascii || cli.ui.theme.is_some() || cli.ui.open.is_some();
    if ui_flags && !matches!(cli.command, None | Some(Command::Tui(_))) {
        anyhow::bail!(BadInput::from(
            "--ascii, --theme and --open are the terminal UI's: give them to edgeprof alone or \
             to edgeprof tui"
        ));
    }
    // A lock that an edgeprof which is gone left on the board's clocks goes back first.
    board::restore_left_over();
    let Some(command) = cli.command else {
        return tui(TuiArgs {
            config: None,
            ui: cli.ui,
            panic_after_first_frame: false,
        });
    };
    match command {
        // `edgeprof --ascii tui`: the UI's options on either side of `tui`.
        Command::Tui(mut args) => {
            args.ui.ascii |= cli.ui.ascii;
            args.ui.theme = args.ui.theme.or(cli.ui.theme);
            args.ui.open = args.ui.open.or(cli.ui.open);
            tui(args)
        }
        Command::Models(ModelsCommand::List { json }) => models_list(json),
        Command::Models(ModelsCommand::Info { name, shape, json }) => {
            if is_file_model(&name) {
                if shape.classes.is_some() {
                    bail!(BadInput(format!(
                        "--classes sets a zoo model's classifier; {name} has its own"
                    )));
                }
                let specs = edgeprof::models::onnx_graph::InputSpec::parse_all(&shape.input)
                    .map_err(|e| BadInput(e.to_string()))?;
                let cost = edgeprof::models::onnx_graph::analyse_file(
                    Path::new(&name),
                    &specs,
                    shape.batch,
                )
                .map_err(|e| BadInput(e.to_string()))?;
                return if json {
                    print_json(&cost)
                } else {
                    print_out(&edgeprof::report::text::graph_cost_table(&cost))
                };
            }
            let model = zoo_of(&name, &shape)?;
            let cost = cost::analyze(&model);
            if json {
                print_json(&cost)
            } else {
                print_out(&edgeprof::report::text::cost_table(&cost))
            }
        }
        Command::Models(ModelsCommand::Export {
            name,
            shape,
            seed,
            output,
            test_data,
        }) => export(&name, &shape, seed, &output, test_data.as_deref()),
        Command::Bench(args) => bench_command::bench_command(args),
        Command::Board(command) => board::run(command),
        Command::Config(ConfigCommand::Check { file, json }) => config_check(&file, json),
        Command::Run(args) => sweep::run(sweep::RunOptions {
            config: args.config,
            resume: args.resume,
            resume_options: edgeprof::sweep_dir::ResumeOptions {
                other_device: args.resume_on_other_device,
            },
            output: args.output,
            charts: !args.no_charts,
            stream: args.stream,
            control: args.control,
            require_stable_clocks: args.require_stable_clocks,
            lock_clocks: args.lock_clocks,
        }),
        Command::Roofline(RooflineCommand::Measure {
            quick,
            thorough,
            threads,
            replace,
            json,
        }) => {
            let effort = match (quick, thorough) {
                (true, _) => edgeprof::collect::ceilings::Effort::Quick,
                (_, true) => edgeprof::collect::ceilings::Effort::Thorough,
                _ => edgeprof::collect::ceilings::Effort::Default,
            };
            roofline::measure(effort, threads, replace, json)
        }
        Command::Roofline(RooflineCommand::Show {
            results,
            ceilings,
            precision,
            chart,
            json,
            cache_sim,
            cache_sim_iterations,
            gpu,
        }) => roofline::show(roofline::ShowOptions {
            results,
            ceilings,
            gpu,
            precision: precision.map(Into::into),
            ascii: chart.ascii,
            width: chart.width,
            height: chart.height,
            svg: chart.svg,
            json,
            cache_sim: cache_sim.then_some(cache_sim_iterations as usize),
        }),
        Command::Roofline(RooflineCommand::Layers {
            model,
            shape,
            threads,
            runs,
            profile,
            ceilings,
            json,
            top,
            chart,
        }) => {
            let threads = edgeprof::protocol::resolve_threads(threads.unwrap_or(0));
            // The request is checked whole before the ceilings are read and anything runs.
            let layer_model = if is_file_model(&model) {
                if shape.batch.is_some() || shape.classes.is_some() {
                    bail!(BadInput(format!(
                        "{model} is an ONNX file: its inputs, batch included, are given by \
                         --input NAME=DIMS"
                    )));
                }
                for spec in &shape.input {
                    spec.parse::<edgeprof::models::onnx_graph::InputSpec>()
                        .map_err(|e| BadInput(format!("{e}")))?;
                }
                edgeprof::roofline::layers::LayerModel::File {
                    path: PathBuf::from(&model),
                    inputs: shape.input.clone(),
                }
            } else {
                // Built once here so that a model the zoo cannot build is refused at once.
                zoo_of(&model, &shape)?;
                let input = match shape.input.first() {
                    Some(text) => text
                        .parse::<InputShape>()
                        .map_err(|e| BadInput(e.to_string()))?,
                    None => InputShape::default(),
                };
                edgeprof::roofline::layers::LayerModel::Zoo {
                    name: model.clone(),
                    channels: input.channels,
                    height: input.height,
                    width: input.width,
                    batch: shape.batch.unwrap_or(1),
                    classes: shape.classes.unwrap_or(1000),
                }
            };
            let request = edgeprof::roofline::layers::LayerRequest {
                model: layer_model,
                threads,
                runs,
            };
            let source = match &profile {
                Some(file) => roofline::LayerSource::Saved(file),
                None => roofline::LayerSource::Profile(&request),
            };
            roofline::layers(
                &model,
                source,
                roofline::LayersOptions {
                    threads,
                    runs,
                    ceilings: ceilings.as_deref(),
                    json,
                    top: top as usize,
                    ascii: chart.ascii,
                    size: (chart.width, chart.height),
                    svg: chart.svg.as_deref(),
                },
            )
        }
        Command::Roofline(RooflineCommand::Kernels) => roofline::kernels(),
        Command::Roofline(RooflineCommand::ProfileGpu {
            tool,
            compute_capability,
            output,
            import,
            command,
        }) => {
            use edgeprof::collect::gpuprof::{self, Tool};
            let tool = match (tool, compute_capability) {
                (Some(ToolArg::Ncu), _) => Tool::Ncu,
                (Some(ToolArg::Nvprof), _) => Tool::Nvprof,
                (None, Some(text)) => {
                    let cc = text
                        .split_once('.')
                        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                        .ok_or_else(|| {
                            BadInput(format!(
                                "--compute-capability {text:?} is not MAJOR.MINOR (e.g. 8.7)"
                            ))
                        })?;
                    gpuprof::tool_for(cc)
                }
                (None, None) => gpuprof::compute_capability(Path::new("/"))
                    .map(gpuprof::tool_for)
                    .map_err(|why| BadInput(format!("GPU profiling unavailable: {why}")))?,
            };
            let program = gpuprof::find(tool)
                .map_err(|why| BadInput(format!("GPU profiling unavailable: {why}")))?;
            let dir =
                output.unwrap_or_else(|| PathBuf::from(edgeprof::results::dir_name("gpu-profile")));
            errln!(
                "profiling {} with {} (CSV in {}) …",
                command.join(" "),
                program.display(),
                dir.display()
            );
            let profile = gpuprof::profile(tool, &program, &command, &dir, Default::default())
                .map_err(|why| anyhow::anyhow!("{why}"))?;
            roofline::import_gpu_profile(
                &profile.metrics,
                profile.summary.as_deref(),
                import.options(),
                tool == Tool::Nvprof,
            )
        }
        Command::Roofline(RooflineCommand::ImportNcu { path, import }) => {
            roofline::import_gpu_profile(&path, None, import.options(), false)
        }
        Command::Roofline(RooflineCommand::ImportNvprof {
            path,
            summary,
            import,
        }) => roofline::import_gpu_profile(&path, summary.as_deref(), import.options(), true),
        Command::Roofline(RooflineCommand::ImportErt { path, sweep, gpu }) => {
            roofline::import_ert(&path, sweep.as_deref(), gpu)
        }
        Command::Roofline(RooflineCommand::MeasureGpu {
            device,
            quick,
            thorough,
            json,
            compile_only,
            arch,
            ptx,
        }) => {
            if compile_only {
                return roofline::compile_gpu_kernels(
                    arch.as_deref().unwrap_or("compute_53"),
                    ptx.as_deref(),
                );
            }
            let effort = match (quick, thorough) {
                (true, _) => edgeprof::collect::ceilings::Effort::Quick,
                (_, true) => edgeprof::collect::ceilings::Effort::Thorough,
                _ => edgeprof::collect::ceilings::Effort::Default,
            };
            roofline::measure_gpu(device, effort, json)
        }
        Command::Runs(args) => sweep::runs_command(&args.dir, args.json),
        Command::Compare(args) => compare::run(args),
        Command::Report(args) => {
            let fleet = args.dir.join(edgeprof::fleet::run::FLEET);
            if let Some(file) = &args.html {
                return report_html(&args.dir, file.as_deref(), fleet.is_file());
            }
            if !fleet.is_file() {
                return sweep::report_command(&args.dir, !args.no_charts, args.svg_dir.as_deref());
            }
            // A fleet run: each node's results directory in turn.
            let text = std::fs::read_to_string(&fleet)
                .with_context(|| format!("cannot read {}", fleet.display()))?;
            let manifest: edgeprof::fleet::run::FleetManifest = serde_json::from_str(&text)
                .with_context(|| format!("{} is damaged", fleet.display()))?;
            for node in &manifest.nodes {
                let dir = edgeprof::fleet::run::node_dir(&args.dir, &node.name);
                print_out(&format!(
                    "\n== node {} ({:?}{}) ==\n",
                    node.name,
                    node.status,
                    node.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ))?;
                if !dir.join(edgeprof::results::MANIFEST).is_file() {
                    print_out("no results from this node\n")?;
                    continue;
                }
                let svg = args
                    .svg_dir
                    .as_ref()
                    .map(|d| edgeprof::fleet::run::node_dir(d, &node.name));
                // A node with failed conditions is reported like the others.
                if let Err(e) = sweep::report_command(&dir, !args.no_charts, svg.as_deref()) {
                    errln!("edgeprof: {}: {e:#}", node.name);
                }
            }
            Ok(())
        }
        Command::Monitor(a) => {
            use std::io::IsTerminal;
            let interactive = !a.headless
                && a.from_tegrastats.is_none()
                && a.duration.is_none()
                && a.pid.is_none()
                && std::io::stdout().is_terminal()
                && std::io::stdin().is_terminal();
            if interactive {
                return crate::tui::main(crate::tui::TuiOptions {
                    monitor: Some((a.interval, a.root)),
                    ..crate::tui::TuiOptions::default()
                });
            }
            monitor::monitor(monitor::MonitorOptions {
                interval: a.interval,
                duration: a.duration,
                format: a.format,
                pid: a.pid,
                root: a.root,
                from_tegrastats: a.from_tegrastats,
            })
        }
        Command::Probe { root, json } => monitor::probe(&root, json),
        Command::Env(command) => env::run(command),
        Command::Frameworks(command) => frameworks::run(command),
        Command::Scorecard(args) => frameworks::scorecard_command(args),
        Command::Nodes(command) => nodes::run(command),
        Command::Costmodel(command) => costmodel::run(command),
        Command::Train(args) => train::run(*args),
        Command::NodeInfo => nodes::node_info(),
        Command::TrainRank { workdir } => {
            let mut out = std::io::stdout().lock();
            Ok(edgeprof::train::cluster::serve(
                std::io::BufReader::new(std::io::stdin()),
                &workdir,
                &mut out,
            )?)
        }
        Command::Completions { shell } => shell::completions(shell),
        Command::Man { dir } => shell::man(dir.as_deref()),
        Command::ReapGuard { prefix } => {
            edgeprof::collect::tree::guard_main(&prefix);
            Ok(())
        }
        Command::Tune(args) => tune::run(*args),
        Command::Place(args) => place::run(args),
        Command::PlaceWorker => {
            let response = edgeprof::runner::place_worker::serve(std::io::stdin().lock())?;
            print_json(&response)
        }
        Command::LayersWorker => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
                .context("cannot read the layer request from stdin")?;
            let request: edgeprof::roofline::layers::LayerRequest = serde_json::from_str(&text)
                .map_err(|e| BadInput(format!("not a layer request ({e})")))?;
            print_json(&request.profile()?)
        }
        Command::GpuBenchWorker { device, effort } => {
            let mut out = std::io::stdout().lock();
            edgeprof::collect::gpubench::worker(device, effort.effort(), &mut out)
                .context("cannot write the GPU benchmark's report")
        }
        Command::Worker => {
            let mut out = std::io::stdout().lock();
            Ok(edgeprof::runner::worker::run(
                std::io::stdin().lock(),
                &mut out,
            )?)
        }
    }
}

/// `report DIR --html [FILE]`: one HTML file, or one per node of a fleet run in the node's
/// results directory.
fn report_html(dir: &Path, file: Option<&Path>, fleet: bool) -> anyhow::Result<()> {
    let wrote = |path: &Path| {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        print_out(&format!(
            "wrote {} ({}): one file, no network needed to open it\n",
            path.display(),
            render::bytes(size)
        ))
    };
    let write = |dir: &Path, file: Option<&Path>| -> anyhow::Result<PathBuf> {
        let (path, warnings) = edgeprof::report::html::write(dir, file)?;
        for warning in &warnings {
            errln!("warning: {warning}");
        }
        Ok(path)
    };
    if !fleet {
        return wrote(&write(dir, file)?);
    }
    if file.is_some() {
        return Err(BadInput(format!(
            "{} is a fleet run, which gets one HTML report per node (in each node's \
             directory): leave the file name out",
            dir.display()
        ))
        .into());
    }
    let fleet = dir.join(edgeprof::fleet::run::FLEET);
    let text = std::fs::read_to_string(&fleet)
        .with_context(|| format!("cannot read {}", fleet.display()))?;
    let manifest: edgeprof::fleet::run::FleetManifest =
        serde_json::from_str(&text).with_context(|| format!("{} is damaged", fleet.display()))?;
    for node in &manifest.nodes {
        let node_dir = edgeprof::fleet::run::node_dir(dir, &node.name);
        if !node_dir.join(edgeprof::results::MANIFEST).is_file() {
            errln!("{}: no results from this node", node.name);
            continue;
        }
        match write(&node_dir, None) {
            Ok(path) => wrote(&path)?,
            Err(e) => errln!("edgeprof: {}: {e:#}", node.name),
        }
    }
    Ok(())
}

pub(crate) fn print_out(text: &str) -> anyhow::Result<()> {
    // What is printed quotes names read from files (kernels, layers, models): their control
    // characters are shown escaped, never sent to the terminal. A terminal gets long lines
    // broken at spaces, as its tables are fitted to it (not with --wide: all whole).
    let text = edgeprof::text::shown_lines(text);
    match edgeprof::text::table_width() {
        Some(width) => write_out(&edgeprof::text::fit_lines(&text, width)),
        None => write_out(&text),
    }
}

/// Prints a program, a script or data (a harness, completions, JSON) with its lines as they
/// are, whatever the terminal's width: broken lines would not run or parse when copied; its
/// control characters are still shown escaped.
pub(crate) fn print_raw(text: &str) -> anyhow::Result<()> {
    write_out(&edgeprof::text::shown_lines(text))
}

/// Writes `text` to standard output as it is.
fn write_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .context("cannot write to standard output")
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot encode the result as JSON")?;
    print_raw(&(text + "\n"))
}

#[derive(serde::Serialize)]
struct ZooListing {
    name: &'static str,
    description: &'static str,
    params: u64,
    gmacs_224: f64,
}

fn models_list(json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for entry in zoo::ZOO {
        let model = zoo::build(entry.name, &ModelParams::default())?;
        let total = cost::analyze(&model).total;
        rows.push(ZooListing {
            name: entry.name,
            description: entry.description,
            params: total.params,
            gmacs_224: total.macs as f64 / 1e9,
        });
    }
    if json {
        return print_json(&rows);
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.name.to_string(),
                render::thousands(r.params),
                format!("{:.3}", r.gmacs_224),
                r.description.to_string(),
            ]
        })
        .collect();
    print_out(&render::table(
        &["model", "parameters", "GMACs@224", "architecture"],
        &[false, true, true, false],
        &table,
    ))
}

fn export(
    name: &str,
    shape: &ShapeArgs,
    seed: u64,
    output: &Path,
    test_data: Option<&Path>,
) -> anyhow::Result<()> {
    use edgeprof::engines::tract::{self, ExportError};
    let model = zoo::build(name, &shape.params())?;
    let bytes = tract::write_onnx(&model, seed, output).map_err(|e| BadInput(e.to_string()))?;
    errln!(
        "wrote {} ({} bytes, opset {}, input {:?}, seed {seed})",
        output.display(),
        render::thousands(bytes as u64),
        onnx::OPSET,
        model.input_shape
    );
    if let Some(dir) = test_data {
        let set = tract::write_test_set(&model, seed, dir).map_err(|e| match e {
            ExportError::File(e) => anyhow::Error::new(BadInput(e.to_string())),
            ExportError::Engine(e) => anyhow::Error::new(e),
        })?;
        errln!(
            "wrote tract's reference input and output under {}",
            set.display()
        );
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct ConfigCheck<'a> {
    config: &'a edgeprof::config::Config,
    plan: &'a edgeprof::runner::matrix::Plan,
    estimated_seconds: f64,
}

fn config_check(file: &Path, json: bool) -> anyhow::Result<()> {
    let config = edgeprof::config::load(file)?;
    let plan = edgeprof::runner::matrix::check_frameworks(
        &config,
        edgeprof::runner::matrix::expand(&config),
    );
    let estimated_seconds = edgeprof::runner::matrix::estimate_seconds(
        &config,
        &plan,
        edgeprof::collect::device::available_cores(),
    );
    if json {
        return print_json(&ConfigCheck {
            config: &config,
            plan: &plan,
            estimated_seconds,
        });
    }
    print_out(&edgeprof::report::text::config_summary(
        &file.display().to_string(),
        &config,
        &plan,
        estimated_seconds,
    ))
}

/// Zoo model `name` as `models info` and `roofline layers` take it: one input as CxHxW at
/// most, the batch and classes given.
fn zoo_of(
    name: &str,
    shape: &args::InfoShapeArgs,
) -> anyhow::Result<edgeprof::models::graph::Model> {
    let input = match &shape.input[..] {
        [] => None,
        [text] => Some(
            text.parse::<InputShape>()
                .map_err(|e| BadInput(e.to_string()))?,
        ),
        _ => bail!(BadInput(format!(
            "{name} is a zoo model with one input: give --input once"
        ))),
    };
    Ok(edgeprof::models::describe(
        name,
        input,
        shape.batch,
        shape.classes,
        InputShape::default(),
    )?)
}

pub(crate) use edgeprof::models::is_file_model;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_errors_exit_with_two() {
        let e = anyhow::Error::new(BadInput("x".into()));
        assert_eq!(exit_code_for(&e), 2);
        let e = anyhow::Error::new(zoo::ZooError::UnknownModel { name: "x".into() });
        assert_eq!(exit_code_for(&e.context("while building")), 2);
        let e = anyhow::anyhow!("something broke");
        assert_eq!(exit_code_for(&e), 1);
    }

    #[test]
    fn file_models_are_told_from_zoo_names() {
        assert!(!is_file_model("resnet50"));
        assert!(is_file_model("model.onnx"));
        assert!(is_file_model("./x/y"));
        assert!(!is_file_model("resnet51"));
    }
}
