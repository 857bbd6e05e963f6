//! The config reader's tests: every key, its defaults, and an error for each bad value.

use super::*;

fn parse_str(text: &str) -> Result<Config, ConfigError> {
    parse(text, Path::new("test.toml"))
}

#[test]
fn empty_config_resolves_to_documented_defaults() {
    let Ok(c) = parse_str("") else {
        panic!("empty config rejected")
    };
    assert_eq!(c.name, "test");
    assert_eq!(c.matrix.engines, vec!["tract"]);
    assert_eq!(c.matrix.models.len(), 4);
    assert_eq!(c.matrix.inputs, vec![InputShape::default()]);
    assert_eq!(
        (c.matrix.batch.clone(), c.matrix.threads.clone()),
        (vec![1], vec![0])
    );
    assert_eq!(c.measure.iterations, 100);
    assert_eq!(c.measure.repeats, 5);
    assert_eq!(c.measure.processes, DEFAULT_PROCESSES);
    assert_eq!(c.measure.sample_interval_ms, 500);
    // One repeat cannot be spread.
    let one = parse_str("[measure]\nrepeats = 1\n").map(|c| c.measure.processes);
    assert_eq!(one.ok(), Some(1));
    assert_eq!(c.output.dir, PathBuf::from("results"));
}

#[test]
fn written_configs_read_back_the_same() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let texts = [
        (
            dir.join("default.toml"),
            include_str!("../../configs/default.toml").to_string(),
        ),
        // A config whose path was typed relative to where the user stands (as the terminal
        // UI's starting config is): its resolved paths must not stay relative to that place.
        (
            PathBuf::from("tests/fixtures/workers/relative.toml"),
            "[command]\nprogram = \"./slow.sh\"\n[matrix]\nengines = [\"command\"]\n\
             models = [\"../onnx/two_inputs.onnx\"]\n"
                .to_string(),
        ),
        (
            dir.join("command-example.toml"),
            include_str!("../../configs/command-example.toml").to_string(),
        ),
        (
            dir.join("x.toml"),
            "name = \"x\"\n[matrix]\nthreads = [1, 2]\ndevices = [\"cpu\", \"gpu:1\"]\n\
             precision = [\"fp32\", \"fp16\", \"int8\"]\n\
             [[matrix.exclude]]\nthreads = 2\nmodel = \"resnet34\"\n[measure]\ncooldown_s = 1.5\ntarget_ci = 0.02\n\
             rerun_disturbed = 2\noutliers = \"exclude\"\nmax_repeats = 40\nprocesses = 5\n\
             [output]\nroofline = true\nformats = [\"svg\"]\n"
                .to_string(),
        ),
        (
            dir.join("f.toml"),
            "[matrix]\nengines = [\"onnxruntime\", \"pytorch\"]\n[measure]\ncheck_outputs = false\n\
             [frameworks.pytorch]\npython = \"sh\"\noptions = { mode = \"torchscript\" }\n\
             [frameworks.onnxruntime.options]\ngraph_optimization_level = \"basic\"\n\
             spinning = false\ninter_op_threads = 2\n"
                .to_string(),
        ),
        (
            dir.join("t.toml"),
            "[matrix]\ncores = [\"all\", \"0-1\", \"3,5\"]\n[tune]\nmodel = \"resnet34\"\n\
             input = \"3x64x64\"\nengines = [\"tract\", \"onnxruntime\"]\nbudget = 9\n\
             objective = \"p99\"\nmax_memory = 1000000\nthreads = [1, 3]\nbatch = [1, 2]\n\
             cores = [\"big\", \"0-1\"]\nstall = 0\ninitial = 3\nconfirm = 0\nseed = 4\n\
             [tune.options.onnxruntime]\nspinning = [true, false]\n\
             graph_optimization_level = [\"basic\"]\n"
                .to_string(),
        ),
        (
            dir.join("n.toml"),
            "[[nodes]]\ndestination = \"pi@10.0.0.2\"\n[[nodes]]\nname = \"orin\"\n\
             destination = \"orin\"\nport = 2222\nidentity = \"/keys/id_ed25519\"\n\
             edgeprof = \"/opt/edgeprof/edgeprof\"\nworkdir = \"~/runs\"\n\
             ssh_options = [\"StrictHostKeyChecking=accept-new\"]\n\
             [[nodes]]\ndestination = \"ssh://pi@board:2222\"\n"
                .to_string(),
        ),
    ];
    for (file, text) in texts {
        let first = match parse(&text, &file) {
            Ok(c) => c,
            Err(e) => panic!("{}: {e}", file.display()),
        };
        let written = to_toml(&first);
        // Written elsewhere: nothing in it may depend on the original file's directory.
        let second = match parse(&written, Path::new("/elsewhere/saved.toml")) {
            Ok(c) => c,
            Err(e) => panic!("{written}\n{e}"),
        };
        assert_eq!(first, second, "{written}");
    }
}

#[test]
fn nodes_take_defaults_and_names() {
    let Ok(c) = parse_str("[[nodes]]\ndestination = \"pi@10.0.0.2\"\n") else {
        panic!("refused")
    };
    assert_eq!(
        c.nodes,
        vec![Node {
            name: "pi@10.0.0.2".into(),
            destination: "pi@10.0.0.2".into(),
            port: None,
            identity: None,
            edgeprof: DEFAULT_NODE_EDGEPROF.into(),
            workdir: DEFAULT_NODE_WORKDIR.into(),
            address: None,
            ssh_options: Vec::new(),
        }]
    );
    assert!(parse_str("[[nodes]]\ndestination = \"a b\"\n").is_err());
    assert!(parse_str("[[nodes]]\ndestination = \"pi\"\nworkdir = \"a\\nb\"\n").is_err());
    assert!(parse_str("[[nodes]]\ndestination = \"pi\"\nport = 70000\n").is_err());
}

/// A node's name is its results directory in a fleet run: one plain path component.
#[test]
fn node_names_that_would_not_be_one_plain_directory_are_refused_where_written() {
    for (name, why) in [
        ("..", "must not start with '.'"),
        (".", "must not start with '.'"),
        (".hidden", "must not start with '.'"),
        ("../../x", "must be letters, digits"),
        ("/etc", "must be letters, digits"),
        ("fleet.json", "the fleet run's own file"),
    ] {
        let text = format!("[[nodes]]\ndestination = \"pi\"\nname = \"{name}\"\n");
        match parse_str(&text) {
            Ok(_) => panic!("{name:?} accepted"),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains(&format!("test.toml:3: nodes[0].name = {name:?}")),
                    "{e}"
                );
                assert!(e.contains(why), "{name:?}: {e}");
            }
        }
    }
    let long = "n".repeat(101);
    assert!(parse_str(&format!(
        "[[nodes]]\ndestination = \"pi\"\nname = \"{long}\"\n"
    ))
    .is_err());
    // A destination (an ssh URI, an IPv6 address) names its node as it is; two whose
    // directories would be the same need names.
    let Ok(c) = parse_str("[[nodes]]\ndestination = \"ssh://pi@board:2222\"\n") else {
        panic!("refused")
    };
    assert_eq!(c.nodes[0].name, "ssh://pi@board:2222");
    match parse_str("[[nodes]]\ndestination = \"a:b\"\n[[nodes]]\ndestination = \"a_b\"\n") {
        Ok(_) => panic!("two nodes share a results directory"),
        Err(e) => assert!(
            e.to_string()
                .contains("its results directory would be \"a_b\", as node \"a:b\"'s is"),
            "{e}"
        ),
    }
}

#[test]
fn core_sets_are_an_axis_and_tune_settings_resolve() {
    let Ok(c) = parse_str(
        "[matrix]\ncores = [\"all\", \"2-3\"]\n[tune]\nobjective = \"throughput\"\n\
         [tune.options.pytorch]\nmode = [\"eager\"]\n",
    ) else {
        panic!("refused")
    };
    assert_eq!(c.matrix.cores, vec![None, Some(vec![2, 3])]);
    assert_eq!(c.tune.objective, tuning::Objective::Throughput);
    assert_eq!(c.tune.budget, Tune::default().budget);
    assert_eq!(
        c.tune.options["pytorch"]["mode"],
        vec![serde_json::json!("eager")]
    );
    for (text, key, message) in [
        (
            "[matrix]\ncores = [\"some\"]\n",
            "matrix.cores[0]",
            "CPU list",
        ),
        (
            "[tune]\nobjective = \"fast\"\n",
            "tune.objective",
            "latency, p99 or throughput",
        ),
        (
            "[tune]\nengines = [\"command\"]\n",
            "tune.engines[0]",
            "not a command",
        ),
        (
            "[tune.options.tract]\nx = [1]\n",
            "tune.options.tract",
            "only the external",
        ),
        (
            "[tune.options.onnxruntime]\nspinning = []\n",
            "tune.options.onnxruntime.spinning",
            "at least one",
        ),
        ("[tune]\nbudget = 0\n", "tune.budget", "from 1"),
        ("[tune]\nthreads = [0]\n", "tune.threads[0]", "from 1"),
        ("[tune]\nbudgett = 3\n", "tune.budgett", "unknown field"),
    ] {
        let Err(e) = parse_str(text) else {
            panic!("{text} accepted")
        };
        assert_eq!(e.key, key, "{text}: {e}");
        assert!(e.message.contains(message), "{text}: {e}");
    }
}

#[test]
fn errors_name_line_key_and_value() {
    let text = "name = \"x\"\n\n[measure]\niterations = 0\n";
    let Err(e) = parse_str(text) else {
        panic!("accepted")
    };
    assert_eq!(e.line, 4);
    assert_eq!(e.key, "measure.iterations");
    assert_eq!(e.value.as_deref(), Some("0"));
    assert_eq!(
        e.to_string(),
        "test.toml:4: measure.iterations = 0: must be a whole number from 1 to 10000000"
    );
    let Err(e) = parse_str("[matrix]\ninputs = [\"3x32x32\", \"3x16x16\"]\n") else {
        panic!("accepted")
    };
    assert_eq!((e.line, e.key.as_str()), (2, "matrix.inputs[1]"));
    assert_eq!(e.value.as_deref(), Some("\"3x16x16\""));
    let Err(e) = parse_str("[measure]\niteratons = 5\n") else {
        panic!("accepted")
    };
    assert_eq!((e.line, e.key.as_str()), (2, "measure.iteratons"));
    assert!(e.message.contains("unknown field"), "{e}");
}

#[test]
fn precision_is_an_axis_of_known_precisions_fp32_by_default() {
    use crate::collect::kernels::Precision;
    let Ok(c) = parse_str("") else {
        panic!("the empty config")
    };
    assert_eq!(c.matrix.precision, [Precision::Fp32]);
    let Ok(c) = parse_str("[matrix]\nprecision = [\"int8\", \"fp16\", \"bf16\", \"fp32\"]\n")
    else {
        panic!("four precisions")
    };
    assert_eq!(
        c.matrix.precision,
        [
            Precision::Int8,
            Precision::Fp16,
            Precision::Bf16,
            Precision::Fp32
        ]
    );
    for (bad, key) in [
        ("[\"fp8\"]", "matrix.precision[0]"),
        ("[\"fp32\", \"fp64\"]", "matrix.precision[1]"),
        ("[\"fp16\", \"fp16\"]", "matrix.precision[1]"),
    ] {
        let Err(e) = parse_str(&format!("[matrix]\nprecision = {bad}\n")) else {
            panic!("accepted {bad}")
        };
        assert_eq!((e.line, e.key.as_str()), (2, key), "{e}");
    }
    let Err(e) = parse_str("[matrix]\nprecision = [\"fp8\"]\n") else {
        panic!("accepted fp8")
    };
    assert_eq!(
        e.to_string(),
        "test.toml:2: matrix.precision[0] = \"fp8\": must be \"fp32\", \"fp16\", \"bf16\" or \"int8\""
    );
}

#[test]
fn framework_tables_name_known_frameworks_and_real_interpreters() {
    let Ok(c) =
        parse_str("[frameworks.tensorflow]\noptions = { xla = true, mode = \"function\" }\n")
    else {
        panic!("rejected")
    };
    let tf = c.frameworks.get("tensorflow").cloned().unwrap_or_default();
    assert_eq!(tf.python, None);
    assert_eq!(tf.options.get("xla"), Some(&serde_json::Value::Bool(true)));
    assert!(c.interpreters().is_empty());
    assert!(c.measure.check_outputs);
    let Err(e) = parse_str("\n[frameworks.caffe]\npython = \"sh\"\n") else {
        panic!("accepted")
    };
    assert_eq!((e.line, e.key.as_str()), (2, "frameworks.caffe"));
    assert!(
        e.message
            .contains("onnxruntime, pytorch, tensorflow, tflite"),
        "{e}"
    );
    let Err(e) = parse_str("[frameworks.pytorch]\npython = \"./no/such/python\"\n") else {
        panic!("accepted")
    };
    assert_eq!((e.line, e.key.as_str()), (2, "frameworks.pytorch.python"));
    assert!(e.message.starts_with("no interpreter at"), "{e}");
    let Err(e) = parse_str("[frameworks.pytorch]\npython = \"no-such-python-here\"\n") else {
        panic!("accepted")
    };
    assert!(e.message.contains("on PATH"), "{e}");
    let Err(e) = parse_str("[frameworks.pytorch]\npyhton = \"python3\"\n") else {
        panic!("accepted")
    };
    assert!(e.message.contains("unknown field"), "{e}");
}

#[test]
fn devices_parse() {
    assert_eq!("cpu".parse(), Ok(Device::Cpu));
    assert_eq!("gpu:1".parse(), Ok(Device::Gpu(1)));
    assert_eq!("gpu".parse(), Ok(Device::Gpu(0)));
    assert_eq!("tpu".parse::<Device>(), Err(()));
}

#[test]
fn a_train_section_reads_every_key_and_writes_back_the_same() {
    let text =
        "[[nodes]]\nname = \"pi-1\"\ndestination = \"pi@10.0.0.2\"\naddress = \"10.0.0.2\"\n\
                [[nodes]]\nname = \"pi-2\"\ndestination = \"pi@10.0.0.3\"\n\
                [train]\nframework = \"tensorflow\"\nmodel = \"mobilenet_v2\"\nepochs = 5\n\
                batch = 64\nlr = 0.05\nseed = 7\ndata = \"cifar\"\nsizes = [1, 2, 3]\n\
                nodes = [\"local\", \"pi-1\", \"pi-2\"]\nport = 23456\nthreads = 2\n\
                python = \"/opt/tf/bin/python\"\nlocal_address = \"10.0.0.1\"\ntimeout_s = 600\n";
    let c = match parse_str(text) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let Some(t) = &c.train else {
        panic!("no [train]")
    };
    assert_eq!(t.framework, "tensorflow");
    assert_eq!((t.epochs, t.batch, t.seed, t.port), (5, 64, 7, 23456));
    assert_eq!(t.sizes, [1, 2, 3]);
    assert_eq!(t.nodes, ["local", "pi-1", "pi-2"]);
    assert_eq!(t.threads, Some(2));
    assert!(t.data.as_ref().is_some_and(|d| d.ends_with("cifar")));
    assert_eq!(c.nodes[0].address.as_deref(), Some("10.0.0.2"));
    // Written out and read again: the same config.
    let again = parse_str(&to_toml(&c));
    assert_eq!(again.as_ref().ok(), Some(&c), "{again:?}");
    // Defaults: every node, or this machine.
    let Ok(d) = parse_str("[train]\n") else {
        panic!("[train] alone refused")
    };
    assert_eq!(d.train, Some(Train::default()));
    assert_eq!(Train::default().members(&d.nodes), ["local"]);
    assert_eq!(Train::default().members(&c.nodes), ["pi-1", "pi-2"]);
    assert_eq!(parse_str("").map(|c| c.train).ok(), Some(None));
}

#[test]
fn a_bad_train_section_names_the_key() {
    for (text, key, says) in [
        (
            "[train]\nframework = \"jax\"\n",
            "train.framework",
            "must be one of",
        ),
        ("[train]\nepochs = 0\n", "train.epochs", "from 1"),
        ("[train]\nsizes = []\n", "train.sizes", "at least one"),
        (
            "[[nodes]]\ndestination = \"pi\"\n[train]\nsizes = [1, 2]\n",
            "train.sizes",
            "a cluster of 2 needs 2 members",
        ),
        (
            "[train]\nnodes = [\"pi\"]\n",
            "train.nodes[0]",
            "not a node",
        ),
        ("[train]\nmodel = \"a b\"\n", "train.model", "one word"),
        ("[train]\nlr = -1.0\n", "train.lr", "must be a number"),
        ("[train]\nwho = 1\n", "train.who", "unknown field"),
    ] {
        match parse_str(text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => {
                assert_eq!(e.key, key, "{text}: {e}");
                assert!(e.message.contains(says), "{text}: {e}");
            }
        }
    }
}

#[test]
fn a_value_given_twice_in_a_list_is_refused_naming_both_places() {
    for (text, key, message) in [
        (
            "[matrix]\nengines = [\"tract\", \"tract\"]\n",
            "matrix.engines[1]",
            "the same as matrix.engines[0]",
        ),
        (
            "[matrix]\nmodels = [\"resnet34\", \"mobilenet_v2\", \"resnet34\"]\n",
            "matrix.models[2]",
            "the same as matrix.models[0]",
        ),
        (
            "[matrix]\ninputs = [\"3x32x32\", \"3x32x32\"]\n",
            "matrix.inputs[1]",
            "the same as matrix.inputs[0]",
        ),
        (
            "[matrix]\nbatch = [1, 2, 1]\n",
            "matrix.batch[2]",
            "the same as matrix.batch[0]",
        ),
        (
            "[matrix]\nthreads = [2, 2]\n",
            "matrix.threads[1]",
            "the same as matrix.threads[0]",
        ),
        (
            "[matrix]\ndevices = [\"cpu\", \"cpu\"]\n",
            "matrix.devices[1]",
            "the same as matrix.devices[0]",
        ),
        // Two spellings of one CPU set make one condition id.
        (
            "[matrix]\ncores = [\"0-1\", \"0,1\"]\n",
            "matrix.cores[1]",
            "the same as matrix.cores[0]",
        ),
        (
            "[matrix]\nnodes = [\"local\", \"local\"]\n",
            "matrix.nodes[1]",
            "the same as matrix.nodes[0]",
        ),
        (
            "[tune]\nengines = [\"tract\", \"tract\"]\n",
            "tune.engines[1]",
            "the same as tune.engines[0]",
        ),
        (
            "[tune]\nthreads = [1, 1]\n",
            "tune.threads[1]",
            "the same as tune.threads[0]",
        ),
        (
            "[tune]\nbatch = [4, 4]\n",
            "tune.batch[1]",
            "the same as tune.batch[0]",
        ),
        (
            "[tune]\ncores = [\"big\", \"big\"]\n",
            "tune.cores[1]",
            "the same as tune.cores[0]",
        ),
        (
            "[tune.options.onnxruntime]\nspinning = [true, true]\n",
            "tune.options.onnxruntime.spinning[1]",
            "the same as tune.options.onnxruntime.spinning[0]",
        ),
    ] {
        let Err(e) = parse_str(text) else {
            panic!("{text} accepted")
        };
        assert_eq!(e.key, key, "{text}: {e}");
        assert!(e.message.contains(message), "{text}: {e}");
    }
}

#[test]
fn two_spellings_of_one_model_file_are_refused() {
    let Ok(dir) = tempfile::tempdir() else {
        panic!("no temporary directory")
    };
    if let Err(e) = std::fs::write(dir.path().join("m.onnx"), b"") {
        panic!("cannot write the model: {e}")
    }
    let text = "[matrix]\nengines = [\"command\"]\nmodels = [\"m.onnx\", \"./m.onnx\"]\n\
                [command]\nprogram = \"/bin/true\"\n";
    let Err(e) = parse(text, &dir.path().join("c.toml")) else {
        panic!("accepted")
    };
    assert_eq!(e.key, "matrix.models[1]", "{e}");
}

#[test]
fn tune_core_sets_are_named_exactly() {
    let Err(e) = parse_str("[tune]\ncores = [\"cpu \"]\n") else {
        panic!("accepted")
    };
    assert_eq!(e.key, "tune.cores[0]", "{e}");
    let Ok(c) =
        parse_str("[tune]\ncores = [\"all\", \"little\", \"cluster2\", \"one\", \"0-3,6\"]\n")
    else {
        panic!("refused")
    };
    assert_eq!(c.tune.cores.len(), 5);
}

#[test]
fn train_local_address_is_an_address() {
    let Err(e) = parse_str("[train]\nlocal_address = \"tpu\"\n") else {
        panic!("accepted")
    };
    assert_eq!(e.key, "train.local_address", "{e}");
    for good in ["192.168.1.10", "fe80::1", "host.lan", "desk-1.example.org"] {
        let text = format!("[train]\nlocal_address = \"{good}\"\n");
        if let Err(e) = parse_str(&text) {
            panic!("{good} refused: {e}")
        }
    }
}

#[test]
fn a_calibration_folder_must_hold_npy_files() {
    let Err(e) = parse_str("[measure]\ncalibration = \"/nonexistent/calibration\"\n") else {
        panic!("a missing folder accepted")
    };
    assert_eq!((e.line, e.key.as_str()), (2, "measure.calibration"));
    assert!(e.message.contains("cannot read the folder"), "{e}");
    let Ok(dir) = tempfile::tempdir() else {
        panic!("no temporary folder")
    };
    let text = format!("[measure]\ncalibration = \"{}\"\n", dir.path().display());
    let Err(e) = parse_str(&text) else {
        panic!("an empty folder accepted")
    };
    assert!(e.message.contains("holds no .npy files"), "{e}");
    if let Err(e) = std::fs::write(dir.path().join("b0.npy"), b"") {
        panic!("{e}")
    }
    let Ok(c) = parse_str(&text) else {
        panic!("a folder with a .npy file refused")
    };
    assert!(c.measure.calibration.is_some());
    // Written back with the rest of the measure section.
    assert!(crate::config::to_toml(&c).contains("calibration = "));
}

#[test]
fn input_data_is_auto_images_or_seeded() {
    let Ok(c) = parse_str("") else {
        panic!("an empty config refused")
    };
    assert_eq!(c.measure.input_data, crate::config::InputData::Auto);
    let Ok(c) = parse_str("[measure]\ninput_data = \"seeded\"\n") else {
        panic!("seeded refused")
    };
    assert_eq!(c.measure.input_data, crate::config::InputData::Seeded);
    // Written back, and read again the same.
    assert!(crate::config::to_toml(&c).contains("input_data = \"seeded\""));
    let Err(e) = parse_str("[measure]\ninput_data = \"noise\"\n") else {
        panic!("an unknown kind accepted")
    };
    assert_eq!((e.line, e.key.as_str()), (2, "measure.input_data"));
    assert!(e.message.contains("use auto, images or seeded"), "{e}");
}
