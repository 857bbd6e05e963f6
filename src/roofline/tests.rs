//! Tests of `roofline/mod.rs`.

use super::*;

#[test]
fn layers_tract_fused_away_join_their_neighbours_as_named_groups() {
    use crate::engines::tract::LayerTime;
    use crate::models::cost::LayerCost;
    let cost = |name: &str, kind: &'static str, flops: u64| LayerCost {
        name: name.into(),
        kind,
        output_shape: Vec::new(),
        macs: flops / 2,
        flops,
        params: 0,
        buffers: 0,
        param_bytes: 0,
        input_bytes: 0,
        output_bytes: 0,
        dram_bytes: 1000,
    };
    let time = |layer: &str, runs: &[f64]| LayerTime {
        layer: layer.into(),
        mapped: true,
        ms_per_run: 0.0,
        runs_ms: runs.to_vec(),
        tract_nodes: 1,
    };
    let costs = [
        // tract keeps this chain under the ReLU's name: the convolution has no time.
        cost("conv1.0", "Conv2d", 1_000_000),
        cost("conv1.1", "BatchNorm2d", 10),
        cost("conv1.2", "ReLU", 5),
        // Here under the convolution's: the BatchNorm after it has none.
        cost("conv2.0", "Conv2d", 2_000_000),
        cost("conv2.1", "BatchNorm2d", 10),
        cost("fc", "Linear", 500),
    ];
    let times = [
        time("conv1.2", &[3.0, 1.0, 2.0]),
        time("conv2.0", &[4.0, 4.0, 5.0]),
        time("fc", &[0.1, 0.1, 0.1]),
    ];
    let p = group_layers(&costs, &times);
    let labels: Vec<&str> = p.programs.iter().map(|x| x.label.as_str()).collect();
    assert_eq!(labels, ["conv1.0+conv1.1+conv1.2", "conv2.0+conv2.1", "fc"]);
    assert_eq!(p.programs[0].flops, 1_000_015.0);
    assert_eq!(p.programs[1].traffic, vec![(Level::Dram, 2000.0)]);
    // The median run, and every run kept beside it.
    assert!((p.programs[0].seconds - 0.002).abs() < 1e-12);
    assert_eq!(p.runs_s[1], vec![0.004, 0.004, 0.005]);
}

#[test]
fn an_onnx_condition_has_the_cost_of_its_file_at_the_condition_s_input_and_batch() {
    use crate::config::{Device, ModelRef};
    use crate::protocol::Condition;
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/onnx/torch/small_opset13.onnx");
    let at = |batch: usize, path: &std::path::Path| {
        let input = crate::models::InputShape {
            channels: 3,
            height: 64,
            width: 64,
        };
        let c = Condition::new(
            "tract",
            ModelRef::Onnx(path.to_path_buf()),
            input,
            batch,
            1,
            Device::Cpu,
        );
        condition_cost(&c, 1000)
    };
    let (one, four) = match (at(1, &file), at(4, &file)) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => panic!("{a:?} {b:?}"),
    };
    assert!(one.flops > 0 && one.params > 0);
    assert_eq!(four.flops, 4 * one.flops);
    assert_eq!(four.params, one.params);
    let gone = at(1, &file.with_file_name("moved.onnx"));
    assert!(gone.is_err_and(|e| e.0.starts_with("cannot read ")));
}

#[test]
fn program_points_are_checked() {
    let p = Program {
        label: "p".into(),
        precision: Precision::Fp32,
        flops: 1e9,
        seconds: 0.01,
        traffic: vec![(Level::Dram, 1e8)],
        source: PointSource::Analytic,
        basis: Vec::new(),
    };
    assert_eq!(p.check(), Ok(()));
    let with = |edit: &dyn Fn(&mut Program)| {
        let mut q = p.clone();
        edit(&mut q);
        q.check().err().unwrap_or_default().0
    };
    assert_eq!(
        with(&|q| q.seconds = 1e-300),
        "a time of 1e-300 s is not one a program takes"
    );
    assert_eq!(with(&|q| q.flops = f64::NAN), "NaN FLOPs is not a count");
    assert_eq!(
        with(&|q| q.traffic[0].1 = -1.0),
        "-1 bytes at DRAM is not a count"
    );
    assert!(with(&|q| q.flops = 1e21).contains("FLOP/s is more than any machine"));
    assert_eq!(
        with(&|q| q.traffic[0].1 = 4e-316),
        "4e-316 bytes at DRAM is not a count"
    );
}

#[test]
fn ceilings_are_checked_figure_by_figure() {
    assert_eq!(test_ceilings().check(), Ok(()));
    let with = |edit: &dyn Fn(&mut Ceilings)| {
        let mut c = test_ceilings();
        edit(&mut c);
        c.check().err().unwrap_or_default().0
    };
    assert_eq!(
        with(&|c| c.compute[1].flops_per_s = f64::INFINITY),
        "compute[1].flops_per_s (fp32 peak) = inf FLOP/s is not a finite number"
    );
    assert!(with(&|c| c.compute[0].flops_per_s = 0.0).ends_with("is not positive"));
    assert!(with(&|c| c.bandwidth[2].bytes_per_s = 1e20)
        .starts_with("bandwidth[2].bytes_per_s (DRAM bandwidth) = 1e20 B/s is more than"));
    assert!(with(&|c| c.bandwidth[0].bytes_per_s = f64::NAN).contains("(L1 bandwidth)"));
    assert!(with(&|c| c.sweep.push(SweepPoint {
        bytes_per_thread: 1,
        threads: 1,
        bytes_per_s: -1.0
    }))
    .starts_with("sweep[0].bytes_per_s = -1 B/s"));
    assert!(with(&|c| c.compute[0].flops_per_s = 1e-311).contains("less than any machine"));
    assert_eq!(figure(2.5), "2.5");
    assert_eq!(figure(1e300), "1e300");
    assert_eq!(figure(f64::NEG_INFINITY), "-inf");
}

#[test]
fn roof_maths_by_hand() {
    // 100 GFLOP/s, 20 GB/s: ridge at 5 FLOP/byte.
    assert_eq!(ridge(100e9, 20e9), 5.0);
    assert_eq!(attainable(100e9, 20e9, 2.0), 40e9);
    assert_eq!(attainable(100e9, 20e9, 10.0), 100e9);
    let p = Program {
        label: "x".into(),
        precision: Precision::Fp32,
        flops: 8e9,
        seconds: 0.5,
        traffic: vec![(Level::Dram, 2e9), (Level::L1, 0.0)],
        source: PointSource::Analytic,
        basis: Vec::new(),
    };
    assert_eq!(p.flops_per_s(), Some(16e9));
    assert_eq!(p.intensity(Level::Dram), Some(4.0));
    assert_eq!(p.intensity(Level::L1), None);
    assert_eq!(p.intensity(Level::L2), None);
}

#[test]
fn peaks_take_the_best_thread_count() {
    let c = Ceilings {
        source: "test".into(),
        compute: vec![
            ComputeRoof {
                precision: Precision::Fp64,
                threads: 1,
                flops_per_s: 10e9,
                via: None,
            },
            ComputeRoof {
                precision: Precision::Fp64,
                threads: 4,
                flops_per_s: 38e9,
                via: None,
            },
        ],
        bandwidth: vec![BandwidthRoof {
            level: Level::Dram,
            threads: 4,
            bytes_per_s: 12e9,
        }],
        sweep: Vec::new(),
        notes: Vec::new(),
        processor: crate::roofline::Processor::Cpu,
        gpu_sweep: Vec::new(),
        trials: Vec::new(),
        busy: Vec::new(),
    };
    assert_eq!(c.peak(Precision::Fp64), Some(38e9));
    assert_eq!(c.peak(Precision::Fp32), None);
    assert_eq!(c.bandwidth(Level::Dram), Some(12e9));
    assert_eq!(c.bandwidth(Level::L2), None);
}

/// A lower-precision condition is placed under its own precision's roof, with the analytic
/// bytes narrowed to its elements; its fp32 twin keeps float32's.
#[test]
fn a_condition_is_placed_in_its_own_precision() -> crate::error::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/small");
    let mut stored = crate::results::load(&dir)?;
    let Some(fp32) = stored.runs.iter().find(|r| r.ok && r.last).cloned() else {
        panic!("the fixture has no successful run");
    };
    let mut int8 = fp32.clone();
    int8.condition = int8.condition.with_precision(Precision::Int8);
    let (twin_id, int8_id) = (fp32.condition.id.clone(), int8.condition.id.clone());
    stored.runs = vec![fp32, int8];
    let (programs, left_out) = programs_from_results(&stored, &[]);
    assert!(left_out.is_empty(), "{left_out:?}");
    let find = |id: &str| programs.iter().find(|p| p.label == id);
    let (Some(twin), Some(narrow)) = (find(&twin_id), find(&int8_id)) else {
        panic!("not both placed: {programs:?}");
    };
    assert_eq!(
        (twin.precision, narrow.precision),
        (Precision::Fp32, Precision::Int8)
    );
    let dram = |p: &Program| p.traffic.iter().find(|t| t.0 == Level::Dram).map(|t| t.1);
    assert_eq!(dram(narrow), dram(twin).map(|b| b / 4.0));
    assert_eq!(narrow.flops, twin.flops);
    Ok(())
}
