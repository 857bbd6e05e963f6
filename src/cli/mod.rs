//! The headless front-end: argument parsing and dispatch. Results go to stdout, progress and
//! errors to stderr.

mod env;
mod fleet;
mod frameworks;
mod monitor;
mod nodes;
mod place;
pub mod render;
mod roofline;
mod sweep;
mod train;
mod tune;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};
use edgeprof::bench::{self, BenchModel, BenchRequest};
use edgeprof::engines::tract::{ModelSource, TractSession};
use edgeprof::models::cost;
use edgeprof::models::onnx::{self, DEFAULT_SEED};
use edgeprof::models::zoo::{self, ModelParams};
use edgeprof::models::InputShape;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "edgeprof",
    version,
    about = "Evaluate deep-learning frameworks on edge devices and learn what to optimise next",
    long_about = "edgeprof benchmarks deep-learning models on the board it runs on: a built-in zoo of \
                  the classic edge CNNs (or your own ONNX file), exact analytic costs per layer, and an \
                  embedded tract engine that needs nothing installed. Without a subcommand it \
                  opens the terminal UI."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The terminal UI (also what `edgeprof` alone opens): pick conditions, watch runs live,
    /// read results and rooflines with their advice, monitor the board
    Tui(TuiArgs),
    /// The built-in model zoo: list, per-layer costs, ONNX export
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Benchmark one model on one engine in this process
    Bench(BenchArgs),
    /// Measure one condition and report over the worker protocol (JSON request on stdin,
    /// JSON lines on stdout); started by edgeprof itself, or by hand to debug a condition
    Worker,
    /// Run configurations (TOML): validate and show the run matrix
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Run every condition of a config, each in its own worker process, into a results directory
    Run(RunArgs),
    /// Re-render the tables and charts of a results directory, and write its SVG charts
    Report(ReportArgs),
    /// The results directories under an output directory and where each stands: running (with
    /// its pid and progress), complete, failed, interrupted; find a sweep after a reconnect
    Runs(RunsArgs),
    /// The hierarchical roofline: this CPU's ceilings
    #[command(subcommand)]
    Roofline(RooflineCommand),
    /// Log live telemetry (CPU per core, memory, GPUs, temperatures, power, throttling) as JSON
    /// lines or CSV, or turn a tegrastats log into the same samples
    Monitor(MonitorArgs),
    /// Measure one GPU's ceilings and report JSON lines on stdout; started by
    /// `roofline measure-gpu` in a child process
    #[command(hide = true)]
    GpuBenchWorker {
        #[arg(long, default_value_t = 0)]
        device: usize,
        #[arg(long, value_enum, default_value = "default")]
        effort: EffortArg,
    },
    /// Search the fastest execution configuration of one model on this device (threads, core
    /// set, engine, engine options, batch, device) with a learned cost model; or measure a
    /// space exhaustively, or replay a measured table against random and grid search
    Tune(Box<tune::TuneArgs>),
    /// Place a model's blocks on processing units (CPU clusters) for the least end-to-end
    /// latency, from per-block profiles and a measured copy cost; run the plan as a split
    Place(place::PlaceArgs),
    /// Measure blocks, copies or a split plan for `place` (JSON request on stdin, JSON on stdout)
    #[command(hide = true)]
    PlaceWorker,
    /// The external frameworks' Python environments: list, set up, remove
    #[command(subcommand)]
    Env(env::EnvCommand),
    /// The frameworks' development- and deployment-time facts: list, show, refresh the GitHub
    /// figures, probe which are installed here and what they see
    #[command(subcommand)]
    Frameworks(frameworks::FrameworksCommand),
    /// One table per framework across development time, deployment time (curated and probed
    /// here) and runtime (from a results directory), as text, Markdown or JSON
    Scorecard(frameworks::ScorecardArgs),
    /// Distributed-training scaling: train a torchvision model with PyTorch's own launcher
    /// (torchrun, DDP over gloo) on 1..N nodes of this machine, on CIFAR-10 or a synthetic set in
    /// its format; speedup and accuracy ratios against one node, as tables and charts
    Train(Box<train::TrainArgs>),
    /// The boards of a config's [[nodes]], over SSH: check them, install edgeprof on them
    #[command(subcommand)]
    Nodes(nodes::NodesCommand),
    /// Describe this machine as a node (JSON: version, device, frameworks); `nodes check` runs
    /// it over SSH
    #[command(hide = true)]
    NodeInfo,
    /// Wait for standard input to end, then kill the processes a sweep's workers left behind
    /// (started by edgeprof itself, so they die with it however it dies)
    #[command(hide = true)]
    ReapGuard {
        #[arg(long)]
        prefix: String,
    },
    /// List every telemetry source and engine, and whether it works here (and why not)
    Probe {
        /// Read /proc and /sys under this directory instead of / (a fixture tree, a chroot)
        #[arg(long, default_value = "/")]
        root: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug, Default)]
struct TuiArgs {
    /// Config to start from (default: configs/default.toml when it is here, else the defaults)
    config: Option<PathBuf>,
    /// Colour theme: dark, light, high-contrast, monochrome, a theme under
    /// ~/.config/edgeprof/themes/, or a TOML file (NO_COLOR selects monochrome)
    #[arg(long)]
    theme: Option<String>,
    /// Draw with ASCII characters only (for terminals without Unicode fonts)
    #[arg(long)]
    ascii: bool,
    /// Open this results directory at start
    #[arg(long, value_name = "DIR")]
    open: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct MonitorArgs {
    /// Log to stdout even on a terminal (without it, a terminal gets the terminal UI's Monitor
    /// tab; pipes, files, --duration, --pid and --from-tegrastats always log)
    #[arg(long)]
    headless: bool,
    /// Time between samples (e.g. 100ms, 1s)
    #[arg(long, default_value = "1s", value_parser = monitor::parse_duration)]
    interval: std::time::Duration,
    /// Stop after this long (default: until Ctrl-C)
    #[arg(long, value_parser = monitor::parse_duration)]
    duration: Option<std::time::Duration>,
    #[arg(long, value_enum, default_value = "jsonl")]
    format: monitor::Format,
    /// Also sample this process (CPU %, RSS, peak RSS); the monitor stops when it ends
    #[arg(long)]
    pid: Option<u32>,
    /// Turn a tegrastats log into samples instead of sampling this machine (lines without
    /// timestamps are --interval apart)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "duration"])]
    from_tegrastats: Option<PathBuf>,
    /// Read /proc and /sys under this directory instead of / (a fixture tree, a chroot)
    #[arg(long, default_value = "/")]
    root: PathBuf,
}

#[derive(Subcommand, Debug)]
enum RooflineCommand {
    /// Measure this CPU's ceilings (peak FLOP/s per precision, one thread and all threads; load
    /// bandwidth per memory level) and keep them for this device
    Measure {
        /// Shorter trials (about a third of the default time)
        #[arg(long, conflicts_with = "thorough")]
        quick: bool,
        /// Longer trials, more of them (steadier figures)
        #[arg(long)]
        thorough: bool,
        /// Threads for the all-thread figures (default: every core this process may use)
        #[arg(long)]
        threads: Option<usize>,
        /// Print the ceilings and the sweep as JSON
        #[arg(long)]
        json: bool,
    },
    /// Measure an NVIDIA GPU's ceilings with a CUDA microbenchmark (fp64/fp32/fp16 FMA peaks;
    /// L1/shared, L2 and device-memory bandwidth by a working-set sweep) and keep them for this
    /// device; needs the CUDA driver and NVRTC, loaded at run time
    MeasureGpu {
        /// The CUDA device number
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Shorter trials
        #[arg(long, conflicts_with = "thorough")]
        quick: bool,
        /// Longer trials, more of them (steadier figures)
        #[arg(long)]
        thorough: bool,
        /// Print the ceilings and the sweep as JSON
        #[arg(long)]
        json: bool,
        /// Only compile the kernels with NVRTC (no GPU needed) and print the PTX's entry points:
        /// checks the CUDA toolkit on a machine before its GPU is used
        #[arg(long)]
        compile_only: bool,
        /// NVRTC's target for --compile-only, e.g. compute_87 (default: compute_53, the oldest
        /// edge GPU, Jetson Nano)
        #[arg(long, requires = "compile_only", value_name = "compute_XY")]
        arch: Option<String>,
    },
    /// Draw the roofline with this device's ceilings and, given a results directory, its
    /// conditions as points, followed by the advice for each
    Show {
        /// A results directory written by `edgeprof run`
        results: Option<PathBuf>,
        /// Ceilings from this file (as saved by `measure`) instead of this device's
        #[arg(long, value_name = "FILE")]
        ceilings: Option<PathBuf>,
        /// The compute roof the points are judged against
        #[arg(long, value_enum, default_value = "fp32")]
        precision: PrecisionArg,
        #[command(flatten)]
        chart: ChartArgs,
        /// Print ceilings, points and advice as JSON
        #[arg(long)]
        json: bool,
        /// Where counters are out of reach, simulate each condition's caches with valgrind to get
        /// L2 and DRAM traffic (slow: one thread, 50–100× native time; kept in the directory)
        #[arg(long, requires = "results")]
        cache_sim: bool,
        /// Counted inferences per simulated condition
        #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1000))]
        cache_sim_iterations: u64,
        /// GPU N's ceilings (default 0) instead of the CPU's, and the GPU profiles (ncu.csv,
        /// nvprof-metrics.csv from `roofline profile-gpu --output DIR/NAME`) in the results
        /// directory as points
        #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0", conflicts_with = "cache_sim")]
        gpu: Option<usize>,
    },
    /// Per-layer points of one zoo model (tract's node profile + analytic per-layer cost),
    /// ranked by time share × headroom
    Layers {
        /// A zoo model
        model: String,
        #[command(flatten)]
        shape: ShapeArgs,
        /// tract's threads (default: all cores)
        #[arg(long)]
        threads: Option<usize>,
        /// Profiled inferences to average
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Ceilings from this file instead of this device's
        #[arg(long, value_name = "FILE")]
        ceilings: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        /// Layers drawn on the chart: the highest-ranked
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=26))]
        top: u64,
        #[command(flatten)]
        chart: ChartArgs,
    },
    /// List the SIMD kernels this CPU can run and check that each does exactly the FLOPs and
    /// bytes it claims (counts, not speed: meaningful under emulation too)
    Kernels,
    /// Place a GPU workload from Nsight Compute output (`ncu --csv` with the hierarchical
    /// roofline metrics): per-kernel and whole-program points per level, with advice when
    /// --ceilings gives the GPU's ceilings
    ImportNcu {
        /// The CSV ncu printed (application output before the header is fine)
        path: PathBuf,
        #[command(flatten)]
        import: ImportArgs,
    },
    /// Run a command under the GPU profiler its GPU needs (ncu from Volta on, nvprof on
    /// Maxwell/Pascal: Jetson Nano, TX2), keep the CSV, and place it like import-ncu/import-nvprof
    ProfileGpu {
        /// The profiler (default: chosen by the GPU's compute capability)
        #[arg(long, value_enum)]
        tool: Option<ToolArg>,
        /// The GPU's compute capability, e.g. 8.7 (default: from NVML, else the Jetson SoC)
        #[arg(long, value_name = "X.Y")]
        compute_capability: Option<String>,
        /// Where the profiler's CSV files go (default: gpu-profile-<UTC time>/)
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
        #[command(flatten)]
        import: ImportArgs,
        /// The workload: a program and its arguments, after --
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Place a GPU workload from nvprof output (Maxwell/Pascal: Jetson Nano, TX2): the CSV of
    /// `nvprof --csv --metrics flop_count_sp,…`, with kernel times from --summary
    ImportNvprof {
        /// The CSV of nvprof's metrics run
        path: PathBuf,
        /// The CSV of `nvprof --csv --print-gpu-summary` for the same workload (kernel times)
        #[arg(long, value_name = "FILE")]
        summary: Option<PathBuf>,
        #[command(flatten)]
        import: ImportArgs,
    },
    /// Use the ceilings of an LBNL Empirical Roofline Toolkit run (its roofline.json) for this device
    ImportErt {
        /// ERT's roofline.json (either dialect)
        path: PathBuf,
        /// ERT's bandwidth sweep (`max` or `max.trimmed` of the FLOPS=1 run), to name the levels
        /// from this device's cache sizes rather than ERT's positions
        #[arg(long, value_name = "FILE")]
        sweep: Option<PathBuf>,
        /// An ERT GPU run: keep them as GPU N's ceilings (default 0), apart from the CPU's;
        /// ERT's own level names are kept
        #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0", conflicts_with = "sweep")]
        gpu: Option<usize>,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum EffortArg {
    Quick,
    Default,
    Thorough,
}

impl EffortArg {
    fn effort(self) -> edgeprof::collect::ceilings::Effort {
        use edgeprof::collect::ceilings::Effort;
        match self {
            EffortArg::Quick => Effort::Quick,
            EffortArg::Default => Effort::Default,
            EffortArg::Thorough => Effort::Thorough,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ToolArg {
    Ncu,
    Nvprof,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PrecisionArg {
    Fp64,
    Fp32,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The TOML config (`-`: read it from stdin; leave it out with --resume)
    config: Option<PathBuf>,
    /// Finish an interrupted run in this results directory, skipping conditions already done
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Create the results directory under DIR instead of the config's output.dir
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Print tables only, no terminal charts
    #[arg(long)]
    no_charts: bool,
    /// Report on stdout as JSON lines (the results directory and manifest, each run's record,
    /// the end) instead of tables: what a fleet run reads from each node
    #[arg(long)]
    stream: bool,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// A results directory written by `edgeprof run`
    dir: PathBuf,
    /// Write the SVG charts here instead of DIR/charts
    #[arg(long, value_name = "DIR")]
    svg_dir: Option<PathBuf>,
    /// Print tables only, no terminal charts
    #[arg(long)]
    no_charts: bool,
}

#[derive(Args, Debug)]
struct RunsArgs {
    /// The output directory to look in (a config's `output.dir`)
    #[arg(default_value = "results")]
    dir: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Validate a config and show its run matrix, skipped conditions and estimated duration
    Check {
        /// The TOML config file
        file: PathBuf,
        /// Print the resolved config and the plan as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ModelsCommand {
    /// List the zoo's models with their parameter counts
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Per-layer analytic cost (FLOPs, parameters, activation bytes, DRAM traffic) and totals
    Info {
        /// Zoo model name (see `edgeprof models list`)
        name: String,
        #[command(flatten)]
        shape: ShapeArgs,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Export a zoo model with seeded random weights as ONNX (opset 13)
    Export {
        /// Zoo model name (see `edgeprof models list`)
        name: String,
        #[command(flatten)]
        shape: ShapeArgs,
        /// Seed of the random weights
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// Output file
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Also write an input and tract's output for it in ONNX's test-data layout
        /// (DIR/test_data_set_0/input_0.pb, output_0.pb), to check other runtimes against
        #[arg(long, value_name = "DIR")]
        test_data: Option<PathBuf>,
    },
}

/// Chart options shared by the roofline commands.
#[derive(Args, Debug, Clone)]
struct ChartArgs {
    /// Plain characters instead of braille
    #[arg(long)]
    ascii: bool,
    /// Chart size in terminal cells
    #[arg(long, default_value_t = 80)]
    width: usize,
    #[arg(long, default_value_t = 24)]
    height: usize,
    /// Also write the chart as SVG
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// Options of the GPU profiler imports.
#[derive(Args, Debug)]
struct ImportArgs {
    /// The GPU's ceilings from this file (as saved by `roofline measure-gpu` or
    /// `import-ert --gpu`) instead of the stored ceilings of GPU --gpu
    #[arg(long, value_name = "FILE")]
    ceilings: Option<PathBuf>,
    /// Whose stored ceilings to use when there is no --ceilings: this CUDA device's
    #[arg(long, value_name = "N", default_value_t = 0)]
    gpu: usize,
    /// The program's name on the chart (default: the file's name)
    #[arg(long)]
    label: Option<String>,
    /// Print kernels, program, warnings and advice as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    chart: ChartArgs,
}

/// Shape options shared by the zoo commands.
#[derive(Args, Debug, Clone)]
struct ShapeArgs {
    /// Input as CxHxW; height and width at least 32
    #[arg(long, value_name = "CxHxW", default_value = "3x224x224")]
    input: InputShape,
    /// Batch size
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Number of output classes
    #[arg(long, default_value_t = 1000)]
    classes: usize,
}

impl ShapeArgs {
    fn params(&self) -> ModelParams {
        ModelParams {
            num_classes: self.classes,
            channels: self.input.channels,
            height: self.input.height,
            width: self.input.width,
            batch: self.batch,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    /// Embedded pure-Rust ONNX engine (always available)
    Tract,
    /// Embedded candle (Hugging Face's Rust ML framework): zoo models built layer by layer
    Candle,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Tract => "tract",
            Engine::Candle => "candle",
        }
    }
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Engine to run the model with
    #[arg(long, value_enum, default_value = "tract")]
    engine: Engine,
    /// Zoo model name, or the path of an ONNX file
    #[arg(long, value_name = "NAME|FILE.onnx")]
    model: String,
    /// Input as CxHxW [zoo default: 3x224x224; for an ONNX file, overrides its input shape]
    #[arg(long, value_name = "CxHxW")]
    input: Option<InputShape>,
    /// Batch size [zoo default: 1]
    #[arg(long)]
    batch: Option<usize>,
    /// Number of output classes of a zoo model
    #[arg(long, default_value_t = 1000)]
    classes: usize,
    /// Threads for the engine's executor [default: all available cores]
    #[arg(long)]
    threads: Option<usize>,
    /// Untimed iterations before timing
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Timed iterations
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    iterations: u64,
    /// Timed loops of --iterations each, averaged (mean of means, with spread)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    repeats: u64,
    /// Seed of the random weights and input data
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Also profile node by node and show the time per layer
    #[arg(long)]
    profile: bool,
    /// Inferences the profile averages over
    #[arg(long, default_value_t = 10)]
    profile_runs: usize,
    /// Measure in a separate `edgeprof worker` process (its own process group), as the
    /// evaluation pipeline does, instead of inside this process
    #[arg(long)]
    isolated: bool,
    /// Print JSON (with every sample) instead of a summary
    #[arg(long)]
    json: bool,
}

pub use edgeprof::error::BadInput;

impl ImportArgs {
    fn options(&self) -> roofline::ImportOptions<'_> {
        roofline::ImportOptions {
            ceilings: self.ceilings.as_deref(),
            gpu: self.gpu,
            label: self.label.as_deref(),
            json: self.json,
            ascii: self.chart.ascii,
            size: (self.chart.width, self.chart.height),
            svg: self.chart.svg.as_deref(),
        }
    }
}

fn tui(args: TuiArgs) -> anyhow::Result<()> {
    crate::tui::main(crate::tui::TuiOptions {
        config: args.config,
        theme: args.theme,
        ascii: args.ascii,
        open: args.open,
        monitor: None,
    })
}

/// Exit code for an error: 2 for bad input, 1 for anything else.
pub fn exit_code_for(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause.is::<sweep::Interrupted>() {
            return 130;
        }
        if cause.is::<BadInput>()
            || cause.is::<zoo::ZooError>()
            || cause.is::<edgeprof::models::ShapeParseError>()
            || cause.is::<edgeprof::config::ConfigError>()
            || cause.is::<edgeprof::config::ConfigReadError>()
        {
            return 2;
        }
        if let Some(e) = cause.downcast_ref::<edgeprof::engines::tract::EngineError>() {
            return if e.is_bad_input() { 2 } else { 1 };
        }
    }
    1
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    let Some(command) = cli.command else {
        return tui(TuiArgs::default());
    };
    match command {
        Command::Tui(args) => tui(args),
        Command::Models(ModelsCommand::List { json }) => models_list(json),
        Command::Models(ModelsCommand::Info { name, shape, json }) => {
            let model = zoo::build(&name, &shape.params())?;
            let cost = cost::analyze(&model);
            if json {
                print_json(&cost)
            } else {
                print_out(&render::cost_table(&cost))
            }
        }
        Command::Models(ModelsCommand::Export {
            name,
            shape,
            seed,
            output,
            test_data,
        }) => export(&name, &shape, seed, &output, test_data.as_deref()),
        Command::Bench(args) => bench_command(args),
        Command::Config(ConfigCommand::Check { file, json }) => config_check(&file, json),
        Command::Run(args) => sweep::run(sweep::RunOptions {
            config: args.config,
            resume: args.resume,
            output: args.output,
            charts: !args.no_charts,
            stream: args.stream,
        }),
        Command::Roofline(RooflineCommand::Measure {
            quick,
            thorough,
            threads,
            json,
        }) => {
            let effort = match (quick, thorough) {
                (true, _) => edgeprof::collect::ceilings::Effort::Quick,
                (_, true) => edgeprof::collect::ceilings::Effort::Thorough,
                _ => edgeprof::collect::ceilings::Effort::Default,
            };
            roofline::measure(effort, threads, json)
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
            precision: match precision {
                PrecisionArg::Fp64 => edgeprof::roofline::Precision::Fp64,
                PrecisionArg::Fp32 => edgeprof::roofline::Precision::Fp32,
            },
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
            ceilings,
            json,
            top,
            chart,
        }) => {
            if threads == Some(0) {
                bail!(BadInput("--threads must be at least 1".into()));
            }
            let model = zoo::build(&model, &shape.params())?;
            roofline::layers(
                &model,
                roofline::LayersOptions {
                    threads: edgeprof::runner::resolve_threads(threads.unwrap_or(0)),
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
            let profile = gpuprof::profile(tool, &program, &command, &dir)
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
        }) => {
            if compile_only {
                return roofline::compile_gpu_kernels(arch.as_deref().unwrap_or("compute_53"));
            }
            let effort = match (quick, thorough) {
                (true, _) => edgeprof::collect::ceilings::Effort::Quick,
                (_, true) => edgeprof::collect::ceilings::Effort::Thorough,
                _ => edgeprof::collect::ceilings::Effort::Default,
            };
            roofline::measure_gpu(device, effort, json)
        }
        Command::Runs(args) => sweep::runs_command(&args.dir, args.json),
        Command::Report(args) => {
            let fleet = args.dir.join(edgeprof::fleet::run::FLEET);
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
        Command::Train(args) => train::run(*args),
        Command::NodeInfo => nodes::node_info(),
        Command::ReapGuard { prefix } => {
            edgeprof::collect::tree::guard_main(&prefix);
            Ok(())
        }
        Command::Tune(args) => tune::run(*args),
        Command::Place(args) => place::run(args),
        Command::PlaceWorker => {
            let response = edgeprof::runner::split::serve(std::io::stdin().lock())?;
            print_json(&response)
        }
        Command::GpuBenchWorker { device, effort } => {
            let mut out = std::io::stdout().lock();
            edgeprof::collect::gpubench::worker(device, effort.effort(), &mut out)
                .context("cannot write the GPU benchmark's report")
        }
        Command::Worker => {
            let mut out = std::io::stdout().lock();
            edgeprof::runner::worker::run(std::io::stdin().lock(), &mut out)
        }
    }
}

pub(crate) fn print_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .context("cannot write to standard output")
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot encode the result as JSON")?;
    print_out(&(text + "\n"))
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
    let model = zoo::build(name, &shape.params())?;
    let proto = onnx::to_onnx(&model, seed);
    let bytes = onnx::encode(&proto);
    std::fs::write(output, &bytes)
        .map_err(|e| BadInput(format!("cannot write {}: {e}", output.display())))?;
    errln!(
        "wrote {} ({} bytes, opset {}, input {:?}, seed {seed})",
        output.display(),
        render::thousands(bytes.len() as u64),
        onnx::OPSET,
        model.input_shape
    );
    if let Some(dir) = test_data {
        let set = dir.join("test_data_set_0");
        std::fs::create_dir_all(&set)
            .map_err(|e| BadInput(format!("cannot create {}: {e}", set.display())))?;
        let session = TractSession::load(
            ModelSource::Zoo {
                model: &model,
                seed,
            },
            None,
            1,
        )?;
        let input = session.make_input(seed)?;
        let (out_shape, values) = session.run(&input)?;
        let input_values: Vec<f32> = input
            .to_plain_array_view::<f32>()
            .map_err(|e| anyhow::anyhow!("input tensor is not float32: {e}"))?
            .iter()
            .copied()
            .collect();
        let write = |file: &str, tensor: tract_onnx::pb::TensorProto| -> anyhow::Result<()> {
            let path = set.join(file);
            std::fs::write(&path, prost::Message::encode_to_vec(&tensor))
                .with_context(|| format!("cannot write {}", path.display()))
        };
        write(
            "input_0.pb",
            onnx::float_tensor("input", &session.input_shape, &input_values),
        )?;
        write(
            "output_0.pb",
            onnx::float_tensor("output", &out_shape, &values),
        )?;
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
    print_out(&render::config_summary(
        &file.display().to_string(),
        &config,
        &plan,
        estimated_seconds,
    ))
}

/// `bench --isolated`: the same measurement through a worker process and the worker protocol.
fn bench_isolated(
    args: &BenchArgs,
    model: BenchModel,
    threads: usize,
) -> anyhow::Result<bench::BenchReport> {
    use edgeprof::config::{Device, ModelRef};
    use edgeprof::runner::{matrix::Condition, protocol::WorkerRequest, spawn};
    let (model_ref, input, batch, analytic, label) = match &model {
        BenchModel::Zoo(m) => (
            ModelRef::Zoo(m.name.clone()),
            args.input.unwrap_or_default(),
            args.batch.unwrap_or(1),
            Some(cost::analyze(m).total),
            m.name.clone(),
        ),
        BenchModel::File { path, input_shape } => {
            let Some(shape) = input_shape else {
                bail!(BadInput(
                    "--isolated on an ONNX file needs --input CxHxW (and --batch N)".into()
                ));
            };
            let input = InputShape {
                channels: shape[1],
                height: shape[2],
                width: shape[3],
            };
            (
                ModelRef::Onnx(path.clone()),
                input,
                shape[0],
                None,
                path.display().to_string(),
            )
        }
    };
    let condition = Condition::new(
        args.engine.name(),
        model_ref,
        input,
        batch,
        threads,
        Device::Cpu,
    );
    let request = WorkerRequest {
        condition,
        warmup: args.warmup,
        warmup_seconds: 0.0,
        iterations: usize::try_from(args.iterations).unwrap_or(usize::MAX),
        min_duration_s: 0.0,
        repeats: usize::try_from(args.repeats).unwrap_or(1),
        seed: args.seed,
        classes: args.classes,
        counters: false,
        model_file: None,
        input_file: None,
        output_file: None,
        options: None,
    };
    let program = std::env::current_exe().context("cannot locate the edgeprof binary")?;
    errln!("running {} in a worker process …", request.condition.id);
    let limits = spawn::RunLimits {
        // A single benchmark has no configured timeout: a day stands for none.
        timeout: std::time::Duration::from_secs(86_400),
        sample_interval: std::time::Duration::from_millis(500),
    };
    let attempt = spawn::run_worker(
        &spawn::WorkerCommand::edgeprof(&program),
        &request,
        limits,
        &std::sync::atomic::AtomicBool::new(false),
        |_| {},
    );
    let run = attempt.outcome?;
    let first_inference_ms = run
        .first_inference_ms
        .ok_or_else(|| anyhow::anyhow!("the worker reported no first inference"))?;
    bench::assemble(
        args.engine.name(),
        bench::Measured {
            model: label,
            input_shape: vec![batch, input.channels, input.height, input.width],
            threads: run.threads.unwrap_or(threads),
            init_ms: run.init_ms,
            first_inference_ms,
            warmup_ms: run.warmup_ms,
            repeats: run.repeats,
        },
        analytic,
        None,
    )
}

/// True when `model` names a file rather than a zoo entry.
fn is_file_model(model: &str) -> bool {
    zoo::find(model).is_none()
        && (model.ends_with(".onnx") || model.contains('/') || Path::new(model).exists())
}

fn bench_command(args: BenchArgs) -> anyhow::Result<()> {
    if args.threads == Some(0) {
        bail!(BadInput("--threads must be at least 1".into()));
    }
    let threads = edgeprof::runner::resolve_threads(args.threads.unwrap_or(0));
    let model = if is_file_model(&args.model) {
        let input_shape = match (args.input, args.batch) {
            (Some(s), batch) => Some(vec![batch.unwrap_or(1), s.channels, s.height, s.width]),
            (None, Some(_)) => bail!(BadInput(
                "--batch on an ONNX file needs --input CxHxW as well".into()
            )),
            (None, None) => None,
        };
        BenchModel::File {
            path: PathBuf::from(&args.model),
            input_shape,
        }
    } else {
        let input = args.input.unwrap_or_default();
        let params = ModelParams {
            num_classes: args.classes,
            channels: input.channels,
            height: input.height,
            width: input.width,
            batch: args.batch.unwrap_or(1),
        };
        BenchModel::Zoo(zoo::build(&args.model, &params)?)
    };
    if args.isolated {
        if args.profile {
            bail!(BadInput(
                "--profile times tract's nodes inside this process; leave out --isolated".into()
            ));
        }
        let report = bench_isolated(&args, model, threads)?;
        return if args.json {
            print_json(&report)
        } else {
            print_out(&render::bench_summary(&report))
        };
    }
    let request = BenchRequest {
        engine: args.engine.name().to_string(),
        model,
        threads,
        warmup: args.warmup,
        iterations: usize::try_from(args.iterations).unwrap_or(usize::MAX),
        repeats: usize::try_from(args.repeats).unwrap_or(1),
        seed: args.seed,
        profile_runs: if args.profile {
            args.profile_runs.max(1)
        } else {
            0
        },
    };
    let report = bench::run(&request, render::progress_line)?;
    if args.json {
        print_json(&report)
    } else {
        print_out(&render::bench_summary(&report))
    }
}

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
