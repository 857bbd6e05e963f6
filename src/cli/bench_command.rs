//! `edgeprof bench`: one model on one engine, in this process or a worker process (always so
//! for the frameworks run through a harness); an ONNX file's inputs by name, its expected
//! outputs and its saved outputs.

use super::*;

pub(super) fn bench_command(args: BenchArgs) -> anyhow::Result<()> {
    let threads = edgeprof::protocol::resolve_threads(args.threads.unwrap_or(0));
    if let Some(warning) = args.threads.and_then(|t| {
        edgeprof::config::threads_warning(t, edgeprof::collect::device::available_cores())
    }) {
        errln!("warning: {warning}");
    }
    // One `CxHxW` is the image input of a zoo model or a file; anything else binds a file's
    // inputs by name, as `models info` does.
    let image = match &args.input[..] {
        [] => None,
        [one] => one.parse::<InputShape>().ok(),
        _ => None,
    };
    let by_name = !args.input.is_empty() && image.is_none();
    let fed = !args.expect.is_empty() || args.save_outputs.is_some();
    // A file's inputs by name, or its one image input.
    let file_specs = || -> anyhow::Result<Vec<edgeprof::models::onnx_graph::InputSpec>> {
        Ok(match image {
            Some(image) => vec![edgeprof::models::onnx_graph::InputSpec::image(image)],
            None => edgeprof::models::onnx_graph::InputSpec::parse_all(&args.input)
                .map_err(|e| BadInput(e.to_string()))?,
        })
    };
    let model = if edgeprof::config::is_torch_program(&args.model) {
        if args.engine.name() != "pytorch" {
            bail!(BadInput(format!(
                "{} is a PyTorch program: it runs on the pytorch engine (--engine pytorch); the \
                 other engines take it exported to ONNX (torch.onnx.export)",
                args.model
            )));
        }
        let inputs = edgeprof::models::onnx_graph::bind_undeclared(&file_specs()?, args.batch)
            .map_err(|e| BadInput(format!("{}: {e}", args.model)))?;
        BenchModel::Fed {
            path: PathBuf::from(&args.model),
            inputs,
            expected: args.expect.clone(),
        }
    } else if args.model.to_ascii_lowercase().ends_with(".tflite") {
        if !args.input.is_empty() || args.batch.is_some() {
            bail!(BadInput(
                "a .tflite file runs at the inputs it declares; leave out --input and --batch"
                    .into()
            ));
        }
        BenchModel::Tflite {
            path: PathBuf::from(&args.model),
            expected: args.expect.clone(),
        }
    } else if is_file_model(&args.model) && (image.is_none() || fed) {
        // An ONNX file is fed by name: as given, else at the shapes the file fixes.
        let path = PathBuf::from(&args.model);
        let inputs =
            edgeprof::models::onnx_graph::bind_file_inputs(&path, &file_specs()?, args.batch)
                .map_err(|e| BadInput(e.to_string()))?;
        BenchModel::Fed {
            path,
            inputs,
            expected: args.expect.clone(),
        }
    } else if fed {
        bail!(BadInput(
            "--expect and --save-outputs take an ONNX file's outputs; run one with --model \
             FILE.onnx"
                .into()
        ));
    } else if by_name {
        bail!(BadInput(format!(
            "input {:?} is not CxHxW: a zoo model has one image input (for example 3x224x224)",
            args.input.join(" ")
        )));
    } else if is_file_model(&args.model) {
        BenchModel::File {
            path: PathBuf::from(&args.model),
            input_shape: image
                .map(|s| vec![args.batch.unwrap_or(1), s.channels, s.height, s.width]),
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
    let request = BenchRequest {
        engine: args.engine.name().to_string(),
        model,
        threads,
        warmup: args.warmup,
        iterations: usize::try_from(args.iterations).unwrap_or(usize::MAX),
        repeats: usize::try_from(args.repeats).unwrap_or(1),
        seed: args.seed,
        precision: args.precision.into(),
        profile_runs: if args.profile {
            args.profile_runs.max(1)
        } else {
            0
        },
        classes: args.classes,
        isolated: args.isolated,
        save_outputs: args.save_outputs.clone(),
        python: args.python.clone(),
        load_timeout: args.load_timeout,
    };
    let report = bench::run(&request, render::progress_line)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_out(&edgeprof::report::text::bench_summary(&report))?;
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
