//! `edgeprof bench`: one model on one engine, in this process or an isolated worker; an ONNX
//! file's inputs by name and its expected outputs on tract.

use super::*;

pub(super) fn bench_command(args: BenchArgs) -> anyhow::Result<()> {
    let threads = edgeprof::runner::resolve_threads(args.threads.unwrap_or(0));
    // One `CxHxW` is the image input of a zoo model or a file; anything else binds a file's
    // inputs by name, as `models info` does.
    let image = match &args.input[..] {
        [] => None,
        [one] => one.parse::<InputShape>().ok(),
        _ => None,
    };
    let by_name = !args.input.is_empty() && image.is_none();
    let model = if is_file_model(&args.model) && (by_name || !args.expect.is_empty()) {
        if args.engine.name() != "tract" {
            bail!(BadInput(format!(
                "inputs by name and --expect run on tract; {} runs one image input",
                args.engine.name()
            )));
        }
        if args.profile {
            bail!(BadInput(
                "--profile runs one image input (CxHxW); leave it out with inputs by name or \
                 --expect"
                    .into()
            ));
        }
        let mut specs = args
            .input
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<edgeprof::models::onnx_graph::InputSpec>, _>>()
            .map_err(|e| BadInput(e.to_string()))?;
        if let Some(image) = image {
            specs = vec![edgeprof::models::onnx_graph::InputSpec::image(image)];
        }
        let path = PathBuf::from(&args.model);
        let inputs = edgeprof::models::onnx_graph::bind_file_inputs(&path, &specs, args.batch)
            .map_err(|e| BadInput(e.to_string()))?;
        BenchModel::Fed {
            path,
            inputs,
            expected: args.expect.clone(),
        }
    } else if !args.expect.is_empty() {
        bail!(BadInput(
            "--expect checks an ONNX file's outputs; a zoo model has no expected outputs".into()
        ));
    } else if by_name {
        bail!(BadInput(format!(
            "input {:?} is not CxHxW: a zoo model has one image input (for example 3x224x224)",
            args.input.join(" ")
        )));
    } else if is_file_model(&args.model) {
        let input_shape = match (image, args.batch) {
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
        let input = image.unwrap_or_default();
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
        print_json(&report)?;
    } else {
        print_out(&render::bench_summary(&report))?;
    }
    // Outputs that differ from the expected are the run's failure, after its figures.
    if let Some(bad) = report.checked.iter().find(|c| !c.agree) {
        bail!(
            "output {} differs from the expected: {}",
            bad.output,
            if bad.shape != bad.expected_shape {
                format!("shape {:?}, expected {:?}", bad.shape, bad.expected_shape)
            } else {
                format!(
                    "{:.3e} apart, {:.3e} of the expected's largest value",
                    bad.max_abs_diff, bad.max_rel_diff
                )
            }
        );
    }
    Ok(())
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
            args.input
                .first()
                .and_then(|s| s.parse::<InputShape>().ok())
                .unwrap_or_default(),
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
        BenchModel::Fed { .. } => bail!(BadInput(
            "--isolated runs one image input (CxHxW); inputs by name and --expect run in this \
             process: leave out --isolated"
                .into()
        )),
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
        layer_runs: 0,
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
        &edgeprof::collect::stop::Cancel::new(),
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
