//! `edgeprof config check` through the binary: the shipped default, valid configs, and a folder
//! of broken configs (tests/invalid_configs) that must each give their own located message.

mod common;

use common::*;
use predicates::prelude::*;

fn invalid(name: &str) -> String {
    format!(
        "{}/tests/invalid_configs/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn broken_configs_name_file_line_key_and_value() {
    // (file, line, what the message must say)
    let cases = [
        ("unknown_top_key.toml", 2, "colour: unknown field `colour`"),
        (
            "misspelt_measure_key.toml",
            2,
            "measure.iteratons: unknown field `iteratons`, expected one of",
        ),
        ("syntax_error.toml", 1, "TOML syntax error: unclosed table"),
        (
            "wrong_type.toml",
            2,
            "measure.iterations = \"many\": invalid type: string \"many\", expected a whole number",
        ),
        (
            "unknown_outlier_policy.toml",
            2,
            "measure.outliers = \"drop\": unknown outlier policy \"drop\"; use keep or exclude",
        ),
        (
            "more_processes_than_repeats.toml",
            3,
            "measure.processes = 4: must be at most measure.repeats (3)",
        ),
        (
            "zero_iterations.toml",
            3,
            "measure.iterations = 0: must be a whole number from 1 to",
        ),
        (
            "unknown_model.toml",
            2,
            "matrix.models[1] = \"resnet51\": neither a zoo model",
        ),
        (
            "missing_onnx_file.toml",
            2,
            "matrix.models[0] = \"models/not_there.onnx\": no ONNX file at",
        ),
        (
            "malformed_input.toml",
            2,
            "matrix.inputs[0] = \"3x224\": must be CxHxW",
        ),
        (
            "input_too_small.toml",
            2,
            "matrix.inputs[1] = \"3x16x16\": height and width must be from 32",
        ),
        (
            "unknown_engine.toml",
            2,
            "matrix.engines[1] = \"tensorrt\": unknown engine",
        ),
        (
            "bad_device.toml",
            2,
            "matrix.devices[0] = \"tpu\": must be \"cpu\" or \"gpu:N\"",
        ),
        (
            "empty_model_list.toml",
            2,
            "matrix.models = []: must list at least one value",
        ),
        (
            "empty_exclude_rule.toml",
            4,
            "matrix.exclude[0]: an exclude rule must name at least one",
        ),
        (
            "sampling_too_fine.toml",
            2,
            "measure.sample_interval_ms = 5: must be a whole number from 10",
        ),
        (
            "unknown_output_format.toml",
            2,
            "output.formats[1] = \"pdf\": unknown format",
        ),
        (
            "bad_name.toml",
            1,
            "name = \"my run/1\": must be letters, digits",
        ),
        (
            "negative_timeout.toml",
            2,
            "measure.timeout_s = -1.0: must be a number from 1",
        ),
        (
            "zero_batch.toml",
            2,
            "matrix.batch[1] = 0: must be a whole number from 1",
        ),
        (
            "list_expected.toml",
            2,
            "matrix.models = \"resnet34\": invalid type: string \"resnet34\", expected a list",
        ),
        (
            "command_without_table.toml",
            2,
            "matrix.engines[1] = \"command\": the command engine needs a [command] table",
        ),
        (
            "command_without_program.toml",
            1,
            "command.program: missing: name the program",
        ),
        (
            "command_program_missing.toml",
            2,
            "command.program = \"./no_such_worker.py\": no program at",
        ),
        (
            "command_not_on_path.toml",
            2,
            "command.program = \"no-such-program-on-path-xyz\": no program of that name on PATH",
        ),
        (
            "node_destination_option.toml",
            3,
            "nodes[0].destination = \"-oProxyCommand=sh\": must be user@host, host or an alias",
        ),
        (
            "node_same_name.toml",
            5,
            "nodes[1].name = \"pi@10.0.0.2\": another node is already called \"pi@10.0.0.2\"",
        ),
        (
            "node_bad_ssh_option.toml",
            3,
            "nodes[0].ssh_options[0] = \"-v\": must be KEY=VALUE as ssh -o takes it",
        ),
        (
            "node_name_parent.toml",
            4,
            "nodes[0].name = \"..\": must not start with '.'",
        ),
        (
            "node_without_destination.toml",
            1,
            "nodes[0].destination: missing: user@host, host, or a Host alias",
        ),
    ];
    let files = std::fs::read_dir(format!(
        "{}/tests/invalid_configs",
        env!("CARGO_MANIFEST_DIR")
    ))
    .map(|d| d.count())
    .unwrap_or(0);
    assert_eq!(files, cases.len(), "every broken config has a case here");
    for (file, line, needle) in cases {
        let path = invalid(file);
        assert_bad_input(
            &["config", "check", &path],
            &format!("{path}:{line}: {needle}"),
        );
    }
}

#[test]
fn unreadable_config_is_exit_code_2() {
    assert_bad_input(
        &["config", "check", "no/such/config.toml"],
        "cannot read config no/such/config.toml",
    );
}

#[test]
fn default_config_is_the_seeds_experiment() {
    let path = format!("{}/configs/default.toml", env!("CARGO_MANIFEST_DIR"));
    // A machine with no framework set up: an empty data directory and no python3 on PATH.
    let data = temp_dir();
    edgeprof()
        .env("EDGEPROF_DATA_DIR", data.path())
        .env("PATH", "/nonexistent")
        .args(["config", "check", &path])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("16 condition(s) to run, 32 skipped, 0 excluded")
                // One line per reason: the eight conditions of a framework not set up, counted.
                .and(predicate::str::contains(
                    "skipped 8 conditions of onnxruntime: onnxruntime is not set up \
                     here: run `edgeprof env setup onnxruntime`",
                ))
                .and(predicate::str::contains("skipped onnxruntime/").not())
                .and(predicate::str::contains(
                    "shufflenet_v2_x0_5, mobilenet_v2, resnet34, resnet50",
                ))
                .and(predicate::str::contains("3x32x32, 3x128x128"))
                .and(predicate::str::contains(
                    "10 warm-up + 100 timed iterations × 5 repeats",
                ))
                .and(predicate::str::contains("estimated duration")),
        );
    let check = json_of(&["config", "check", &path, "--json"]);
    assert_eq!(check["config"]["name"], "default");
    let to_run = check["plan"]["to_run"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let skipped = check["plan"]["skipped"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    // Six engines × 8 conditions: the built-in two always run, the others once set up.
    assert_eq!(to_run.len() + skipped, 48);
    assert!(to_run.len() >= 16);
    assert!(check["estimated_seconds"].as_f64().unwrap_or(0.0) > 0.0);
}

#[test]
fn excluded_and_skipped_conditions_are_reported() {
    let dir = temp_dir();
    let file = dir.path().join("mixed.toml");
    let text = "[matrix]\nengines = [\"tract\", \"onnxruntime\"]\nmodels = [\"resnet34\", \"vgg19\"]\n\
                inputs = [\"3x32x32\"]\n\n[[matrix.exclude]]\nengine = \"tract\"\nmodel = \"vgg19\"\n";
    if let Err(e) = std::fs::write(&file, text) {
        panic!("{e}");
    }
    let path = file.to_string_lossy().into_owned();
    let data = temp_dir();
    edgeprof()
        .env("EDGEPROF_DATA_DIR", data.path())
        .env("PATH", "/nonexistent")
        .args(["config", "check", &path])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("1 condition(s) to run, 2 skipped, 1 excluded").and(
                predicate::str::contains(
                    "skipped 2 conditions of onnxruntime: onnxruntime is not set up here",
                ),
            ),
        );
}

/// An ONNX file runs at its own shape when the config gives no inputs, and a shape the file
/// fixes that the config contradicts is refused by `config check`, at the line that gives it.
#[test]
fn an_onnx_file_runs_at_its_own_shape_and_contradictions_are_refused() {
    let dir = temp_dir();
    export_model(
        "shufflenet_v2_x0_5",
        "3x48x64",
        &dir.path().join("fixed.onnx"),
    );
    let config = dir.path().join("own.toml");
    write(
        &config,
        "[matrix]\nmodels = [\"fixed.onnx\", \"resnet34\"]\n",
    );
    let path = config.to_string_lossy().into_owned();
    let check = json_of(&["config", "check", &path, "--json"]);
    let inputs: Vec<&str> = check["plan"]["to_run"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["input"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(inputs, ["3x48x64", "3x224x224"]);
    write(
        &config,
        "[matrix]\nmodels = [\"fixed.onnx\"]\ninputs = [\"3x48x64\", \"3x32x32\"]\n",
    );
    assert_bad_input(
        &["config", "check", &path],
        "own.toml:3: matrix.inputs[1] = \"3x32x32\": at batch 1: ",
    );
    assert_bad_input(
        &["config", "check", &path],
        "input input fixes dimension 2 at 48 in the file; 1x3x32x32 contradicts it",
    );
    write(
        &config,
        "[matrix]\nmodels = [\"fixed.onnx\"]\nbatch = [1, 2]\n",
    );
    assert_bad_input(
        &["config", "check", &path],
        "own.toml:3: matrix.batch[1] = 2: ",
    );
    // With a zoo model at another size: the error says how to run the file at its own shape,
    // and an exclude rule that leaves the file out of that size is honoured.
    let mixed = "[matrix]\nmodels = [\"fixed.onnx\", \"resnet34\"]\ninputs = [\"3x32x32\"]\n";
    write(&config, mixed);
    assert_bad_input(
        &["config", "check", &path],
        "(run it at its own shape with \"fixed.onnx: input=1x3x48x64\" in matrix.inputs, or \
         leave it out with [[matrix.exclude]] model = \"fixed.onnx\")",
    );
    write(
        &config,
        &format!("{mixed}[[matrix.exclude]]\nmodel = \"fixed.onnx\"\ninput = \"3x32x32\"\n"),
    );
    let check = json_of(&["config", "check", &path, "--json"]);
    assert_eq!(check["plan"]["to_run"].as_array().map(Vec::len), Some(1));
}

/// `matrix.inputs` gives an ONNX file's inputs by name, to every file that has them or to one
/// model; the zoo's models keep the image shapes; the sweep feeds them so.
#[test]
fn inputs_by_name_go_to_the_files_that_have_them() {
    let dir = temp_dir();
    let model = fixture("two_inputs.onnx");
    let config = dir.path().join("named.toml");
    write(
        &config,
        &format!(
            "[matrix]\nmodels = [{model:?}, \"resnet34\"]\ninputs = [\"a=1x4 b=1x4\", \"3x32x32\"]\n\
             threads = [1]\n[measure]\nwarmup = 0\niterations = 2\nrepeats = 1\nprocesses = 1\n"
        ),
    );
    let path = config.to_string_lossy().into_owned();
    let check = json_of(&["config", "check", &path, "--json"]);
    let ids: Vec<&str> = check["plan"]["to_run"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        ids,
        [
            format!("tract/{model}/a=1x4,b=1x4/b1/t1/cpu").as_str(),
            "tract/resnet34/3x32x32/b1/t1/cpu"
        ]
    );
    let out = dir.path().join("results");
    run_config(&config, &out);
    let summary = read(&only_entry(&out).join("summary.csv"));
    assert_eq!(summary.matches(",ok,").count(), 2, "{summary}");
    let scoped = format!("\"{model}: a=1x5 b=1x4\"");
    for (inputs, error) in [
        (
            "\"c=1x4\"",
            "named.toml:3: matrix.inputs[0] = \"c=1x4\": no ONNX file among matrix.models has \
             inputs named c",
        ),
        (scoped.as_str(), "contradicts"),
        (
            "\"a=1x4 4x4\"",
            "has no name: in a set of inputs by name each is NAME=SPEC",
        ),
        (
            "\"a=1x4 b=1x4\", \"a=1x4  b=1x4\"",
            "matrix.inputs[1] = \"a=1x4  b=1x4\": is the same as matrix.inputs[0]",
        ),
    ] {
        write(
            &config,
            &format!("[matrix]\nmodels = [{model:?}]\ninputs = [{inputs}]\n"),
        );
        assert_bad_input(&["config", "check", &path], error);
    }
}

/// A near miss is named: a misspelt command, model and config key, and `run` given an axis of
/// its config as an option.
#[test]
fn near_misses_suggest_what_was_meant() {
    let said = |args: &[&str]| -> String {
        let out = edgeprof().args(args).assert().code(2);
        String::from_utf8_lossy(&out.get_output().stderr).into_owned()
    };
    assert!(said(&["modles"]).contains("'models'"));
    assert!(said(&["bench", "--model", "mobilenetv2"])
        .contains("unknown model \"mobilenetv2\" (did you mean mobilenet_v2?)"));
    let tmp = temp_dir();
    let config = tmp.path().join("typo.toml");
    write(
        &config,
        "name = \"typo\"\n[matrix]\nmodel = [\"resnet18\"]\n",
    );
    assert!(said(&["config", "check", &config.display().to_string()])
        .contains("unknown field `model`, expected one of `engines`, `models`"));
    assert!(said(&["config", "check", &config.display().to_string()])
        .contains("; did you mean `models`?"));
    let run = said(&["run", "--threads", "2", "x.toml"]);
    assert!(
        run.contains(
            "set matrix.threads there, or measure one condition with `edgeprof bench --threads"
        ),
        "{run}"
    );
    assert!(!run.contains("--stream"), "{run}");
}
