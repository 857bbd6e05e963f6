use super::*;

fn zoo(name: &str, input: &str) -> Model {
    match zoo_model(name, input) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn templates_name_the_kind_and_what_sets_its_efficiency() {
    let m = zoo("mobilenet_v3_small", "3x64x64");
    let templates: Vec<String> = m.layers.iter().map(|l| template(&l.op)).collect();
    for t in [
        "conv3x3/s2",
        "dw3x3/s2",
        "dw5x5/s1",
        "conv1x1/s1",
        "scale",
        "linear",
        "avgpool",
    ] {
        assert!(templates.iter().any(|x| x == t), "{t}: {templates:?}");
    }
    assert_eq!(family("dw5x5/s2"), "dw");
    assert_eq!(family("dw3x3/s1"), "dw3");
    assert_eq!(family("conv1x1/s1"), "conv1x1");
    assert_eq!(family("conv7x7/s2"), "conv");
    assert_eq!(family("maxpool"), "other");
}

#[test]
fn planned_groups_fuse_batch_norms_activations_and_additions_into_what_they_follow() {
    let m = zoo("resnet18", "3x64x64");
    let groups = planned_groups(&m);
    assert_eq!(groups[0].label, "conv1+bn1+relu");
    assert_eq!(groups[0].template, "conv7x7/s2");
    // The second convolution of a block carries its batch norm, the residual addition and
    // the ReLU after it.
    assert!(
        groups
            .iter()
            .any(|g| g.label == "layer1.0.conv2+layer1.0.bn2+layer1.0.add+layer1.0.relu_1"),
        "{:?}",
        groups.iter().map(|g| &g.label).collect::<Vec<_>>()
    );
    // Every FLOP of the model is in exactly one group.
    let total = crate::models::cost::analyze(&m).total.flops as f64;
    let summed: f64 = groups.iter().map(|g| g.flops).sum();
    assert!((summed - total).abs() < 1.0, "{summed} vs {total}");
}

#[test]
fn a_linear_cost_is_recovered_and_never_negative() {
    // 2 µs fixed, 1 ns per FLOP, 0.5 ns per byte.
    let truth = |f: f64, b: f64| 2e-6 + 1e-9 * f + 0.5e-9 * b;
    let samples: Vec<(f64, f64, f64)> = (1..30)
        .map(|i| {
            let (f, b) = (i as f64 * 1e5, ((i * 7) % 11) as f64 * 3e4 + 1e3);
            (f, b, truth(f, b))
        })
        .collect();
    let fit = fit_linear(&samples).unwrap_or_else(|| panic!("no fit"));
    assert!((fit.fixed - 2e-6).abs() < 1e-9, "{fit:?}");
    assert!((fit.per_flop - 1e-9).abs() < 1e-12, "{fit:?}");
    assert!((fit.per_byte - 0.5e-9).abs() < 1e-12, "{fit:?}");
    // Time falling with bytes would need a negative coefficient: it is dropped instead.
    let falling: Vec<(f64, f64, f64)> = (1..20)
        .map(|i| {
            let b = 1e6 - i as f64 * 1e4 + (i % 3) as f64 * 5e3;
            (i as f64 * 1e5, b, 1e-9 * i as f64 * 1e5 + 1e-6 - 1e-13 * b)
        })
        .collect();
    let fit = fit_linear(&falling).unwrap_or_else(|| panic!("no fit"));
    assert!(
        fit.fixed >= 0.0 && fit.per_flop >= 0.0 && fit.per_byte >= 0.0,
        "{fit:?}"
    );
}

/// A profile whose group times follow one linear law per template, as a device would.
fn synthetic(model: &str, threads: usize) -> Profile {
    let m = zoo(model, "3x64x64");
    let groups: Vec<Group> = planned_groups(&m)
        .into_iter()
        .map(|mut g| {
            let per_flop = if g.template.starts_with("dw") {
                4e-10
            } else {
                1e-10
            };
            g.seconds = (3e-6 + per_flop * g.flops + 2e-10 * g.bytes) / threads as f64;
            g
        })
        .collect();
    let layers_ms: f64 = groups.iter().map(|g| g.seconds).sum::<f64>() * 1e3;
    let latency_ms = layers_ms * 0.9;
    Profile {
        engine: "tract".into(),
        model: model.into(),
        input: "3x64x64".into(),
        cores: None,
        threads,
        groups,
        latency_ms,
        latency_interval_ms: (latency_ms * 0.99, latency_ms * 1.01),
        runs: 40,
        rounds: 1,
        round_medians_ms: Vec::new(),
        times_ms: Vec::new(),
        stream_bytes_per_s: None,
        memory_bytes_per_s: None,
        written: String::new(),
        precision: Precision::Fp32,
    }
}

#[test]
fn leave_one_model_out_predicts_a_model_it_never_saw_from_its_layers() {
    let mut db = Db::default();
    for model in [
        "resnet18",
        "mobilenet_v2",
        "mnasnet1_0",
        "squeezenet1_1",
        "shufflenet_v2_x0_5",
    ] {
        for threads in [1, 2] {
            if let Err(e) = db.append(synthetic(model, threads)) {
                panic!("{e}");
            }
        }
    }
    // And operator probes, which are learnt from but never held out.
    for seed in 1..=20 {
        for threads in [1, 2] {
            if let Err(e) = db.append(synthetic(&probe::name(seed), threads)) {
                panic!("{e}");
            }
        }
    }
    let held = leave_one_model_out(&db, "tract", None);
    assert_eq!(held.len(), 10);
    for h in &held {
        // The law holds for every layer, so the forest learns it from the probes and four
        // models well enough to predict the fifth's sum.
        assert_eq!(h.fallbacks, 0, "{h:?}");
        assert!(h.error.abs() < 0.10, "{h:?}");
    }
    // A newer profile of the same condition replaces the older one.
    let mut slower = synthetic("resnet18", 1);
    slower.latency_ms *= 2.0;
    if let Err(e) = db.append(slower) {
        panic!("{e}");
    }
    assert_eq!(db.latest().len(), 50);
}

#[test]
fn the_database_keeps_profiles_across_opens_and_skips_broken_lines() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("costmodel-x.jsonl");
    let mut db = Db::open(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(db.profiles.is_empty());
    db.append(synthetic("resnet18", 1))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str("{not json\n");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let db = Db::open(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(db.profiles.len(), 1);
    assert_eq!(db.skipped, vec![2]);
}

#[test]
fn rounds_merge_into_one_profile_whose_interval_shows_how_they_differ() {
    let round = |level: f64| {
        let mut p = synthetic("squeezenet1_1", 1);
        p.times_ms = (0..30).map(|i| level * (1.0 + 0.001 * i as f64)).collect();
        p.latency_ms = level * 1.015;
        for g in &mut p.groups {
            g.seconds *= level;
        }
        p
    };
    // Rounds that agree: a tight interval around their level.
    let Some(same) = Profile::merge(&[round(1.0), round(1.0), round(1.0)]) else {
        panic!("no merge")
    };
    assert_eq!(same.rounds, 3);
    assert_eq!(same.runs, 120);
    assert!(same.times_ms.is_empty(), "the runs are not kept");
    assert!(
        same.relative_half_width() < 0.03,
        "{:?}",
        same.latency_interval_ms
    );
    // One round 30 % slower: the median stays near the two that agree, the interval widens.
    let Some(apart) = Profile::merge(&[round(1.0), round(1.3), round(1.0)]) else {
        panic!("no merge")
    };
    assert!(
        (apart.latency_ms - 1.015).abs() < 0.02,
        "{}",
        apart.latency_ms
    );
    assert!(
        apart.relative_half_width() > 0.05,
        "{:?}",
        apart.latency_interval_ms
    );
    assert_eq!(apart.round_medians_ms.len(), 3);
    let first = synthetic("squeezenet1_1", 1).groups[0].seconds;
    assert!((apart.groups[0].seconds - first).abs() < first * 1e-9);
    // A single round is itself.
    let one = round(1.0);
    let mut want = one.clone();
    want.times_ms.clear();
    assert_eq!(Profile::merge(std::slice::from_ref(&one)), Some(want));
}

#[test]
fn a_profile_written_before_shapes_were_kept_gets_them_from_its_model() {
    let mut p = synthetic("mobilenet_v2", 1);
    let want: Vec<Option<Dims>> = p.groups.iter().map(|g| g.dims).collect();
    for g in &mut p.groups {
        g.dims = None;
    }
    let line = serde_json::to_string(&p).unwrap_or_default();
    assert!(!line.contains("dims"), "{line}");
    let back: Profile = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
    let filled = back.refreshed();
    let got: Vec<Option<Dims>> = filled.groups.iter().map(|g| g.dims).collect();
    assert_eq!(got, want);
    assert!(got.iter().all(|d| d.is_some_and(|d| d.model_bytes > 0)));
}

#[test]
fn each_core_set_is_fitted_apart_and_kept_apart() {
    let mut db = Db::default();
    for model in ["mobilenet_v2", "resnet18", "squeezenet1_1"] {
        let all = synthetic(model, 1);
        let mut one = all.clone();
        one.cores = Some(vec![1]);
        for g in &mut one.groups {
            g.seconds *= 2.0;
        }
        one.latency_ms *= 2.0;
        db.profiles.push(all);
        db.profiles.push(one);
    }
    // The latest per (engine, model, input, threads, core set): both sets stay.
    assert_eq!(db.latest().len(), 6);
    let latest = db.latest();
    let groups = planned_groups(&zoo("shufflenet_v2_x0_5", "3x64x64"));
    let fit = |cores: Option<&[usize]>| {
        CostModel::fit_on(&latest, "tract", 1, cores).map(|m| (m.predict(&groups).0, m.cores))
    };
    let (all, all_cores) = fit(None).unwrap_or_default();
    let (one, one_cores) = fit(Some(&[1])).unwrap_or_default();
    assert_eq!((all_cores, one_cores), (None, Some(vec![1])));
    assert!((one / all - 2.0).abs() < 0.2, "{all} {one}");
    assert!(fit(Some(&[0])).is_none());
    // Held out, each model is predicted from the others of its own core set.
    let held = leave_one_model_out(&db, "tract", Some(1));
    assert_eq!(held.len(), 6);
    assert_eq!(held.iter().filter(|h| h.cores == Some(vec![1])).count(), 3);
}

/// A device whose load bandwidth falls with the working set (less of it fits the caches): each
/// group takes its FLOPs at 50 GFLOP/s plus its bytes at the bandwidth of its model's working
/// set; with `measured`, the profile carries that bandwidth as the profiler measures it.
fn streamed(model: &str, measured: bool) -> Profile {
    let mut p = synthetic(model, 1);
    let bytes = footprint(&p.groups).unwrap_or(1) as f64;
    let rate = 40e9 * (bytes / 1e6).powf(-0.3);
    for g in &mut p.groups {
        g.seconds = 2e-6 + g.flops / 50e9 + g.bytes / rate;
    }
    p.latency_ms = p.layers_ms();
    p.latency_interval_ms = (p.latency_ms * 0.99, p.latency_ms * 1.01);
    p.stream_bytes_per_s = measured.then_some(rate);
    // And at the working set no cache holds, as the first worker of each pass measures it.
    let memory = 40e9 * (crate::collect::ceilings::MAX_STREAM_BYTES as f64 / 1e6).powf(-0.3);
    p.memory_bytes_per_s = measured.then_some(memory);
    p
}

#[test]
fn the_bandwidth_at_each_working_set_carries_layers_across_model_sizes() {
    let lomo = |measured: bool| {
        let mut db = Db::default();
        let models = [
            "mobilenet_v2",
            "mnasnet1_0",
            "squeezenet1_1",
            "shufflenet_v2_x0_5",
            "efficientnet_b0",
            "resnet18",
            "resnet34",
            "resnet50",
            "vgg19",
        ];
        let probes = (1..=20).map(probe::name);
        for model in models.iter().map(|m| m.to_string()).chain(probes) {
            db.append(streamed(&model, measured))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        leave_one_model_out(&db, "tract", None)
    };
    let with = lomo(true);
    let without = lomo(false);
    assert_eq!(with.len(), 9);
    let worst = |held: &[Held]| held.iter().map(|h| h.error.abs()).fold(0.0, f64::max);
    // Weighed by the bandwidth its working set met, every layer's time per unit of work is
    // the same wherever it runs; without, a model's own size shifts it (VGG-19, whose 400 MB
    // of fully connected weights no other model streams, came out 23 % fast).
    assert!(worst(&with) < 0.05, "{with:?}");
    assert!(worst(&with) * 2.0 < worst(&without), "{with:?} {without:?}");
}

#[test]
fn records_with_numbers_out_of_range_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("costmodel-x.jsonl");
    let mut db = Db::open(&path).unwrap_or_else(|e| panic!("{e}"));
    db.append(synthetic("resnet18", 1))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut bad = synthetic("mobilenet_v2", 1);
    bad.groups[2].flops = -1e308;
    db.append(bad).unwrap_or_else(|e| panic!("{e}"));
    let mut negative = synthetic("resnet34", 1);
    negative.groups[0].bytes = -5.0;
    db.append(negative).unwrap_or_else(|e| panic!("{e}"));
    let db = Db::open(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        db.invalid,
        vec![
            (2, "groups[2].flops = -1e308".to_string()),
            (3, "groups[0].bytes = -5".to_string())
        ]
    );
}

#[test]
fn a_prediction_that_is_not_a_number_is_refused() {
    let profiles = [synthetic("resnet18", 1), synthetic("mobilenet_v2", 1)];
    let refs: Vec<&Profile> = profiles.iter().collect();
    let Some(cm) = CostModel::fit_on(&refs, "tract", 1, None) else {
        panic!("no fit")
    };
    let mut groups = profiles[0].groups.clone();
    groups[0].flops = f64::NAN;
    assert!(cm.predict_finite(&groups).is_err());
}
