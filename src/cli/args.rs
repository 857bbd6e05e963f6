//! The command line: every subcommand and its arguments (clap derive). What each does is in
//! the handlers (`cli/mod.rs` and the modules beside it).

use super::*;

#[derive(Parser, Debug)]
#[command(
    name = "edgeprof",
    version,
    about = "Evaluate deep-learning frameworks on edge devices and learn what to optimise next",
    long_about = "edgeprof evaluates deep-learning frameworks on the board it runs on: tract and \
                  candle built in, onnxruntime, PyTorch, TensorFlow and TFLite set up on demand \
                  (edgeprof env setup), on a zoo of edge CNNs or your own ONNX file. It measures \
                  in child processes with live telemetry, draws hierarchical rooflines that say \
                  what to optimise next, tunes threads, cores, engine and batch with a learned \
                  cost model, runs fleets of boards over SSH and distributed-training scaling. \
                  Without a subcommand it opens the terminal UI."
)]
pub struct Cli {
    #[command(subcommand)]
    pub(super) command: Option<Command>,
    /// The terminal UI's options, for `edgeprof` alone
    #[command(flatten)]
    pub(super) ui: UiArgs,
    /// Print tables whole: on a terminal they are otherwise fitted to its width, cutting long
    /// names in the middle and leaving the least important columns out (output to a file or
    /// a pipe is always whole)
    #[arg(long, global = true)]
    pub(super) wide: bool,
}

/// The axes of a run's matrix that `bench` and `tune` take as options and `run` takes from its
/// config: `run --threads` is pointed there, not to a look-alike option.
const MATRIX_OPTIONS: &[(&str, &str)] = &[
    ("--threads", "threads"),
    ("--engine", "engines"),
    ("--engines", "engines"),
    ("--model", "models"),
    ("--models", "models"),
    ("--input", "inputs"),
    ("--inputs", "inputs"),
    ("--batch", "batch"),
    ("--device", "devices"),
    ("--devices", "devices"),
    ("--cores", "cores"),
];

/// A command-line error whose tips lead somewhere: without the internal (hidden) subcommands
/// among its "similar subcommand" tips (a typo should lead to a command a user runs), and
/// with `run`'s matrix options (`run --threads`) pointed at the config's matrix rather than a
/// look-alike option.
pub fn without_hidden_suggestions(mut error: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    use clap::CommandFactory;
    let usage = match error.get(ContextKind::Usage) {
        Some(ContextValue::StyledStr(u)) => u.to_string(),
        _ => String::new(),
    };
    let invalid = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.split('=').next().unwrap_or("").to_string(),
        _ => String::new(),
    };
    let axis = MATRIX_OPTIONS.iter().find(|(flag, _)| *flag == invalid);
    if let (Some((flag, key)), true) = (axis, usage.contains("edgeprof run")) {
        error.remove(ContextKind::SuggestedArg);
        error.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![format!(
                "`edgeprof run` takes its conditions from the config: set matrix.{key} there, \
                 or measure one condition with `edgeprof bench {flag} …`"
            )
            .into()]),
        );
        // clap's usage line here is built around the option it would have suggested.
        let mut command = Cli::command();
        if let Some(run) = command.find_subcommand_mut("run") {
            let usage = run
                .render_usage()
                .to_string()
                .replace("Usage: run", "Usage: edgeprof run");
            error.insert(ContextKind::Usage, ContextValue::StyledStr(usage.into()));
        }
        return error;
    }
    let names = match error.remove(ContextKind::SuggestedSubcommand) {
        Some(ContextValue::Strings(names)) => names,
        Some(ContextValue::String(name)) => vec![name],
        Some(other) => {
            error.insert(ContextKind::SuggestedSubcommand, other);
            return error;
        }
        None => return error,
    };
    let command = Cli::command();
    let hidden: Vec<&str> = command
        .get_subcommands()
        .filter(|c| c.is_hide_set())
        .map(|c| c.get_name())
        .collect();
    let kept: Vec<String> = names
        .into_iter()
        .filter(|n| !hidden.contains(&n.as_str()))
        .collect();
    if !kept.is_empty() {
        error.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(kept),
        );
    }
    error
}

#[derive(Subcommand, Debug)]
pub(super) enum Command {
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
    /// Compare two results directories condition by condition: the ratio of medians with its
    /// 95 % bootstrap interval and a verdict (faster, slower, no significant difference)
    Compare(super::compare::CompareArgs),
    /// The hierarchical roofline: this device's CPU and GPU ceilings, where each condition sits
    /// under them, and what to optimise next
    #[command(subcommand)]
    Roofline(RooflineCommand),
    /// Log live telemetry (CPU per core, memory, GPUs, temperatures, power, throttling) as JSON
    /// lines or CSV, or turn a tegrastats log into the same samples
    Monitor(MonitorArgs),
    /// The board's performance state (governors, clock limits, turbo, power mode,
    /// jetson_clocks, throttling) with what in it makes figures wander; lock the clocks for
    /// steady figures and put them back
    #[command(subcommand)]
    Board(super::board::BoardCommand),
    /// Profile one model's layers from a request on stdin and print the profile as JSON;
    /// started by `roofline layers` and the terminal UI in a child process
    #[command(hide = true)]
    LayersWorker,
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
    /// Place a model's blocks on processing units (CPU clusters, a GPU) for the least end-to-end
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
    /// The per-layer learned cost model: profile the zoo into this device's measurement
    /// database, fit it, predict a model's latency without running it, evaluate it
    #[command(subcommand)]
    Costmodel(costmodel::CostmodelCommand),
    /// The boards of a config's [[nodes]], over SSH: check them, install edgeprof on them
    #[command(subcommand)]
    Nodes(nodes::NodesCommand),
    /// Describe this machine as a node (JSON: version, device, frameworks); `nodes check` runs
    /// it over SSH
    #[command(hide = true)]
    NodeInfo,
    /// Train one rank of a cluster for `train` (JSON spec on stdin, whose end stops it; JSON
    /// lines on stdout); `train` runs it on every member, over SSH or here
    #[command(hide = true)]
    TrainRank {
        /// Where the harness, the data and the rank's files go
        #[arg(long, value_name = "DIR")]
        workdir: PathBuf,
    },
    /// Wait for standard input to end, then kill the processes a sweep's workers left behind
    /// (started by edgeprof itself, so they die with it however it dies)
    #[command(hide = true)]
    ReapGuard {
        #[arg(long)]
        prefix: String,
    },
    /// A shell's completion script, on standard output (e.g. `edgeprof completions bash >
    /// ~/.local/share/bash-completion/completions/edgeprof`)
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// The manual page (roff) on standard output, or with --dir a page per command written there
    /// (e.g. `edgeprof man --dir ~/.local/share/man/man1`)
    Man {
        /// Write edgeprof.1 and one page per command (edgeprof-run.1, …) into this directory
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// List every telemetry source and engine, and whether it works here (and why not)
    Probe {
        /// Read /proc and /sys under this directory instead of / (a fixture tree, a chroot)
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug, Default)]
pub(super) struct TuiArgs {
    /// Config to start from (default: configs/default.toml when it is here, else the defaults)
    pub(super) config: Option<PathBuf>,
    #[command(flatten)]
    pub(super) ui: UiArgs,
    /// Panic once the first frame is drawn: the fault the test of the terminal's restoration
    /// injects
    #[arg(long, hide = true)]
    pub(super) panic_after_first_frame: bool,
}

/// How the terminal UI looks and what it opens: taken by `edgeprof tui` and by `edgeprof`
/// alone.
#[derive(Args, Debug, Default)]
pub(super) struct UiArgs {
    /// Colour theme: dark, light, high-contrast, monochrome, a theme under
    /// ~/.config/edgeprof/themes/, or a TOML file (NO_COLOR selects monochrome)
    #[arg(long)]
    pub(super) theme: Option<String>,
    /// Draw with ASCII characters only (for terminals without Unicode fonts)
    #[arg(long)]
    pub(super) ascii: bool,
    /// Open this results directory at start
    #[arg(long, value_name = "DIR")]
    pub(super) open: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(super) struct MonitorArgs {
    /// Log to stdout even on a terminal (without it, a terminal gets the terminal UI's Monitor
    /// tab; pipes, files, --duration, --pid and --from-tegrastats always log)
    #[arg(long)]
    pub(super) headless: bool,
    /// Time between samples (e.g. 100ms, 1s)
    #[arg(long, default_value = "1s", value_parser = monitor::parse_duration)]
    pub(super) interval: std::time::Duration,
    /// Stop after this long (default: until Ctrl-C)
    #[arg(long, value_parser = monitor::parse_duration)]
    pub(super) duration: Option<std::time::Duration>,
    /// How samples are written: JSON lines, or CSV whose columns are the first sample's
    #[arg(long, value_enum, default_value = "jsonl")]
    pub(super) format: monitor::Format,
    /// Also sample this process (CPU %, RSS, peak RSS); the monitor stops when it ends
    #[arg(long)]
    pub(super) pid: Option<u32>,
    /// Turn a tegrastats log into samples instead of sampling this machine (lines without
    /// timestamps are --interval apart)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "duration"])]
    pub(super) from_tegrastats: Option<PathBuf>,
    /// Read /proc and /sys under this directory instead of / (a fixture tree, a chroot)
    #[arg(long, default_value = "/")]
    pub(super) root: PathBuf,
}

#[derive(Subcommand, Debug)]
pub(super) enum RooflineCommand {
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
        #[arg(long, value_parser = thread_count)]
        threads: Option<usize>,
        /// Keep this measurement even when other processes disturbed it and the kept one was
        /// measured quietly
        #[arg(long)]
        replace: bool,
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
        /// With --compile-only, also write the PTX to FILE (to read it, or to assemble it with
        /// the toolkit's ptxas for a GPU that is not here)
        #[arg(long, requires = "compile_only", value_name = "FILE")]
        ptx: Option<PathBuf>,
    },
    /// Draw the roofline with this device's ceilings and, given a results directory, its
    /// conditions as points, followed by the advice for each
    Show {
        /// A results directory written by `edgeprof run`
        results: Option<PathBuf>,
        /// Ceilings from this file (as saved by `measure`) instead of this device's
        #[arg(long, value_name = "FILE")]
        ceilings: Option<PathBuf>,
        /// The compute roof the chart is drawn against (fp16, bf16, int8: where the ceilings
        /// have one) [default: fp32, or the ceilings' widest roof when they have no fp32 one]
        #[arg(long, value_enum)]
        precision: Option<PrecisionArg>,
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
    /// ranked by the end-to-end time each can save
    Layers {
        /// A zoo model or an ONNX file
        model: String,
        #[command(flatten)]
        shape: InfoShapeArgs,
        /// tract's threads (0 or left out: all available cores)
        #[arg(long, value_parser = thread_count)]
        threads: Option<usize>,
        /// Profiled inferences (each layer's time is the median run; the ranking's steadiness
        /// is judged by resampling them)
        #[arg(long, default_value_t = edgeprof::roofline::layers::RUNS)]
        runs: usize,
        /// Rank the layers of a profile saved earlier (the `--json` output of `roofline
        /// layers`, from this board or another) instead of profiling: against other ceilings,
        /// say
        #[arg(long, value_name = "FILE", conflicts_with_all = ["threads", "runs"])]
        profile: Option<PathBuf>,
        /// Ceilings from this file instead of this device's
        #[arg(long, value_name = "FILE")]
        ceilings: Option<PathBuf>,
        /// Print the result as JSON instead of text
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
pub(super) enum EffortArg {
    Quick,
    Default,
    Thorough,
}

impl EffortArg {
    pub(super) fn effort(self) -> edgeprof::collect::ceilings::Effort {
        use edgeprof::collect::ceilings::Effort;
        match self {
            EffortArg::Quick => Effort::Quick,
            EffortArg::Default => Effort::Default,
            EffortArg::Thorough => Effort::Thorough,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum ToolArg {
    Ncu,
    Nvprof,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum PrecisionArg {
    Fp64,
    Fp32,
    Fp16,
    Bf16,
    Int8,
}

/// A precision a model runs in.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ModelPrecisionArg {
    Fp32,
    Fp16,
    Bf16,
    Int8,
}

impl From<ModelPrecisionArg> for edgeprof::roofline::Precision {
    fn from(p: ModelPrecisionArg) -> Self {
        use edgeprof::roofline::Precision;
        match p {
            ModelPrecisionArg::Fp32 => Precision::Fp32,
            ModelPrecisionArg::Fp16 => Precision::Fp16,
            ModelPrecisionArg::Bf16 => Precision::Bf16,
            ModelPrecisionArg::Int8 => Precision::Int8,
        }
    }
}

impl From<PrecisionArg> for edgeprof::roofline::Precision {
    fn from(p: PrecisionArg) -> Self {
        use edgeprof::roofline::Precision;
        match p {
            PrecisionArg::Fp64 => Precision::Fp64,
            PrecisionArg::Fp32 => Precision::Fp32,
            PrecisionArg::Fp16 => Precision::Fp16,
            PrecisionArg::Bf16 => Precision::Bf16,
            PrecisionArg::Int8 => Precision::Int8,
        }
    }
}

#[derive(Args, Debug)]
pub(super) struct RunArgs {
    /// The TOML config (`-`: read it from stdin; leave it out with --resume)
    pub(super) config: Option<PathBuf>,
    /// Finish an interrupted run in this results directory, skipping conditions already done
    #[arg(long, value_name = "DIR")]
    pub(super) resume: Option<PathBuf>,
    /// With --resume: go on although the directory was measured on another device (its
    /// records then say where each condition ran)
    #[arg(long, requires = "resume")]
    pub(super) resume_on_other_device: bool,
    /// Create the results directory under DIR instead of the config's output.dir
    #[arg(long, value_name = "DIR")]
    pub(super) output: Option<PathBuf>,
    /// Print tables only, no terminal charts
    #[arg(long)]
    pub(super) no_charts: bool,
    /// Report on stdout as JSON lines (the results directory and manifest, each run's record,
    /// the end) instead of tables: what a fleet run reads from each node
    #[arg(long)]
    pub(super) stream: bool,
    /// With --stream, for a fleet controller: the config on stdin ends at the share's end line,
    /// and stdin then stays open as a control channel; when it closes, the sweep stops as an
    /// interrupted one (a cancelled fleet run)
    #[arg(long, requires = "stream")]
    pub(super) control: bool,
    /// Refuse to start (exit code 2) when the board's state would make the figures wander: a
    /// governor other than performance, turbo on, jetson_clocks off, a power mode below the
    /// board's fastest, a lowered clock limit, throttling (each said with its fix)
    #[arg(long)]
    pub(super) require_stable_clocks: bool,
    /// Lock the board's clocks for the sweep (root; as `edgeprof board lock`) and put them back
    /// when it ends, however it ends
    #[arg(long)]
    pub(super) lock_clocks: bool,
}

#[derive(Args, Debug)]
pub(super) struct ReportArgs {
    /// A results directory written by `edgeprof run`
    pub(super) dir: PathBuf,
    /// Write the SVG charts here instead of DIR/charts
    #[arg(long, value_name = "DIR")]
    pub(super) svg_dir: Option<PathBuf>,
    /// Print tables only, no terminal charts
    #[arg(long)]
    pub(super) no_charts: bool,
    /// Write one self-contained HTML file instead (tables, every chart, the roofline and its
    /// advice, the device) that opens offline in any browser: FILE, or DIR/report.html
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub(super) html: Option<Option<PathBuf>>,
}

#[derive(Args, Debug)]
pub(super) struct RunsArgs {
    /// The output directory to look in (a config's `output.dir`)
    #[arg(default_value = "results")]
    pub(super) dir: PathBuf,
    /// Print the result as JSON instead of text
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Subcommand, Debug)]
pub(super) enum ConfigCommand {
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
pub(super) enum ModelsCommand {
    /// List the zoo's models with their parameter counts
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Per-layer analytic cost (FLOPs, parameters, activation bytes, DRAM traffic) and totals
    /// of a zoo model or an ONNX file
    Info {
        /// Zoo model name (see `edgeprof models list`), or the path of an ONNX file
        #[arg(value_name = "NAME|FILE.onnx")]
        name: String,
        #[command(flatten)]
        shape: InfoShapeArgs,
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
pub(super) struct ChartArgs {
    /// Plain characters instead of braille
    #[arg(long)]
    pub(super) ascii: bool,
    /// Chart size in terminal cells
    #[arg(long, default_value_t = 80)]
    pub(super) width: usize,
    /// Chart height in terminal rows
    #[arg(long, default_value_t = 24)]
    pub(super) height: usize,
    /// Also write the chart as SVG
    #[arg(long, value_name = "FILE")]
    pub(super) svg: Option<PathBuf>,
}

/// Options of the GPU profiler imports.
#[derive(Args, Debug)]
pub(super) struct ImportArgs {
    /// The GPU's ceilings from this file (as saved by `roofline measure-gpu` or
    /// `import-ert --gpu`) instead of the stored ceilings of GPU --gpu
    #[arg(long, value_name = "FILE")]
    pub(super) ceilings: Option<PathBuf>,
    /// Whose stored ceilings to use when there is no --ceilings: this CUDA device's
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(super) gpu: usize,
    /// The program's name on the chart (default: the file's name)
    #[arg(long)]
    pub(super) label: Option<String>,
    /// Print kernels, program, warnings and advice as JSON
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) chart: ChartArgs,
}

/// Shape options shared by the zoo commands.
#[derive(Args, Debug, Clone)]
pub(super) struct ShapeArgs {
    /// Input as CxHxW; height and width at least 32
    #[arg(long, value_name = "CxHxW", default_value = "3x224x224")]
    pub(super) input: InputShape,
    /// Batch size
    #[arg(long, default_value_t = 1)]
    pub(super) batch: usize,
    /// Number of output classes
    #[arg(long, default_value_t = 1000)]
    pub(super) classes: usize,
}

impl ShapeArgs {
    pub(super) fn params(&self) -> ModelParams {
        ModelParams {
            num_classes: self.classes,
            channels: self.input.channels,
            height: self.input.height,
            width: self.input.width,
            batch: self.batch,
        }
    }
}

/// The shape of a zoo model or an ONNX file, as `models info` takes it.
#[derive(Args, Debug)]
pub(super) struct InfoShapeArgs {
    /// A zoo model's input as CxHxW [default: 3x224x224]. An ONNX file's inputs, once each:
    /// NAME=DIMS (images=1x3x640x640), NAME=TYPE:DIMS, NAME=TYPE:VALUE for a scalar
    /// (sr=int64:16000), NAME=@FILE (.pb or .npy) for a tensor's shape and values, or CxHxW
    /// for its one
    /// image input [default: the file's own shapes]
    #[arg(long, value_name = "SPEC")]
    pub(super) input: Vec<String>,
    /// Batch size [default: 1, or an ONNX file's own]
    #[arg(long)]
    pub(super) batch: Option<usize>,
    /// Number of output classes of a zoo model [default: 1000]
    #[arg(long)]
    pub(super) classes: Option<usize>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Engine {
    /// Embedded pure-Rust ONNX engine (always available)
    Tract,
    /// Embedded candle (Hugging Face's Rust ML framework): zoo models built layer by layer
    Candle,
    /// ONNX Runtime in its Python environment (`edgeprof env setup onnxruntime`): zoo models
    /// and ONNX files, in a worker process
    Onnxruntime,
    /// PyTorch in its Python environment: zoo models (torchvision's definitions), in a worker
    Pytorch,
    /// TensorFlow in its Python environment: zoo models (Keras), in a worker
    Tensorflow,
    /// TensorFlow Lite in TensorFlow's environment: zoo models converted to .tflite, in a worker
    Tflite,
}

impl Engine {
    pub(super) fn name(self) -> &'static str {
        match self {
            Engine::Tract => "tract",
            Engine::Candle => "candle",
            Engine::Onnxruntime => "onnxruntime",
            Engine::Pytorch => "pytorch",
            Engine::Tensorflow => "tensorflow",
            Engine::Tflite => "tflite",
        }
    }
}

#[derive(Args, Debug)]
pub(super) struct BenchArgs {
    /// Engine to run the model with
    #[arg(long, value_enum, default_value = "tract")]
    pub(super) engine: Engine,
    /// Zoo model name, or the path of an ONNX file
    #[arg(long, value_name = "NAME|FILE.onnx")]
    pub(super) model: String,
    /// Input as CxHxW [zoo default: 3x224x224; for an ONNX file, overrides its input shape].
    /// An ONNX file's inputs by name, once each: NAME=DIMS, NAME=TYPE:DIMS, NAME=TYPE:VALUE
    /// for a scalar, NAME=@FILE (.pb or .npy) for a tensor's values [default: the file's own
    /// shapes]
    #[arg(long, value_name = "SPEC")]
    pub(super) input: Vec<String>,
    /// Batch size [zoo default: 1]
    #[arg(long)]
    pub(super) batch: Option<usize>,
    /// Number of output classes of a zoo model
    #[arg(long, default_value_t = 1000)]
    pub(super) classes: usize,
    /// An output expected of the ONNX file (an ONNX .pb tensor, as its test data hold them, or
    /// a NumPy .npy file), once per output in order: the first inference's outputs must agree
    /// with them (within 1e-4 of the largest value, or 1e-6 apart), else the bench fails after
    /// its figures
    #[arg(long, value_name = "FILE")]
    pub(super) expect: Vec<PathBuf>,
    /// Write the first inference's outputs of an ONNX file to DIR as output_0.npy, output_1.npy
    /// … (to check another engine against them with --expect)
    #[arg(long, value_name = "DIR")]
    pub(super) save_outputs: Option<PathBuf>,
    /// Threads for the engine's executor (0 or left out: all available cores)
    #[arg(long, value_parser = thread_count)]
    pub(super) threads: Option<usize>,
    /// Untimed iterations before timing
    #[arg(long, default_value_t = 10)]
    pub(super) warmup: usize,
    /// Timed iterations
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) iterations: u64,
    /// Timed loops of --iterations each, averaged (mean of means, with spread)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(super) repeats: u64,
    /// Seed of the random weights and input data
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub(super) seed: u64,
    /// The precision the model runs in (candle runs fp16; the engines say what they lack)
    #[arg(long, value_enum, default_value = "fp32")]
    pub(super) precision: ModelPrecisionArg,
    /// Also profile node by node and show the time per layer
    #[arg(long)]
    pub(super) profile: bool,
    /// Inferences the profile averages over
    #[arg(long, default_value_t = 10)]
    pub(super) profile_runs: usize,
    /// Measure in a separate `edgeprof worker` process (its own process group), as the
    /// evaluation pipeline does, instead of inside this process (the engines run through a
    /// Python harness always are)
    #[arg(long)]
    pub(super) isolated: bool,
    /// The Python interpreter of an engine run through a harness (onnxruntime, pytorch,
    /// tensorflow, tflite) [default: the environment `edgeprof env setup` made, else one found]
    #[arg(long, value_name = "FILE")]
    pub(super) python: Option<PathBuf>,
    /// The longest loading the model (reading, optimising, planning) may take in this process
    /// before the benchmark is stopped with an error; loading may also take at most 7/8 of the
    /// memory left when it began
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = load_timeout)]
    pub(super) load_timeout: std::time::Duration,
    /// Print JSON (with every sample) instead of a summary
    #[arg(long)]
    pub(super) json: bool,
}

/// `--load-timeout`: a positive number of seconds, at most a day.
fn load_timeout(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(std::time::Duration::from_secs_f64(s)),
        _ => Err(format!(
            "{text:?} is not a number of seconds above 0 and at most 86400"
        )),
    }
}

impl ImportArgs {
    pub(super) fn options(&self) -> roofline::ImportOptions<'_> {
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

/// A thread count on the command line, bounded as a config's are (0: every core), so that
/// `bench --threads 5000` is refused as `threads = [5000]` is.
pub(crate) fn thread_count(text: &str) -> Result<usize, edgeprof::error::BadInput> {
    let (low, high) = edgeprof::config::THREADS_RANGE;
    match text.trim().parse::<usize>() {
        Ok(n) if (low..=high).contains(&n) => Ok(n),
        _ => Err(edgeprof::error::BadInput(format!(
            "must be a whole number from {low} to {high}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option and argument of every command, hidden ones aside, says what it is.
    #[test]
    fn every_option_has_a_help_line() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if arg.is_hide_set() || builtin {
                    continue;
                }
                if arg
                    .get_help()
                    .is_none_or(|h| h.to_string().trim().is_empty())
                {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                if !sub.is_hide_set() {
                    walk(sub, &format!("{path} {}", sub.get_name()), missing);
                }
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "edgeprof", &mut missing);
        assert!(missing.is_empty(), "no help line: {missing:#?}");
    }
}
