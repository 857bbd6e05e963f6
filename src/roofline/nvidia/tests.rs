//! Tests of `roofline/nvidia.rs`.

use super::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/gpu-profilers/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => panic!("{path}: {e}"),
    }
}

#[test]
fn numbers_and_units() {
    assert_eq!(number("134,957,158,144"), Some(134_957_158_144.0));
    assert_eq!(number("83.340104%"), Some(83.340104));
    assert_eq!(number("1.5GB/s"), Some(1.5));
    assert_eq!(number("2.5e+03"), Some(2500.0));
    assert_eq!(number("nan"), None);
    assert_eq!(number("n/a"), None);
    assert_eq!(unit_scale("Kbyte"), Some(1e3));
    assert_eq!(unit_scale("usecond"), Some(1e-6));
    assert_eq!(unit_scale("furlong"), None);
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn ncu_kernels_after_application_output_with_units_and_a_failed_launch() {
    let import = match parse_ncu(&fixture("ncu-orin.csv")) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(import.kernels.len(), 2, "{import:?}");
    let conv = &import.kernels[0];
    assert!(conv.name.starts_with("void implicit_convolve_sgemm"));
    // 1.2 M cycles at 1.2 GHz; FLOPs = fadd + 2 × ffma + fmul; lts in Kbyte.
    assert!(close(conv.seconds.unwrap_or(0.0), 1e-3));
    assert!(close(
        conv.flops[&Precision::Fp32],
        10e6 + 2.0 * 400e6 + 5e6
    ));
    assert_eq!(conv.flops[&Precision::Fp64], 0.0);
    assert!(close(conv.bytes[&Level::L1], 2e9));
    assert!(close(conv.bytes[&Level::L2], 6e8));
    assert!(close(conv.bytes[&Level::Dram], 2e8));
    // The frequency in Ghz.
    assert!(close(import.kernels[1].seconds.unwrap_or(0.0), 1e-4));
    assert!(
        import
            .warnings
            .iter()
            .any(|w| w.contains("launch 2 (layernorm_kernel") && w.contains("failed launch")),
        "{:?}",
        import.warnings
    );
    let Some(p) = program(&import, "resnet_infer") else {
        panic!("no program")
    };
    assert!(close(p.seconds, 1.1e-3));
    assert!(close(p.flops, 815e6 + 1e6));
    assert_eq!(p.precision, Precision::Fp32);
    let traffic: BTreeMap<Level, f64> = p.traffic.iter().copied().collect();
    assert!(close(traffic[&Level::L1], 2.008e9));
    assert!(close(traffic[&Level::L2], 6.08e8));
    assert!(close(traffic[&Level::Dram], 2.08e8));
    // Consistent data: AI_L1 ≤ AI_L2 ≤ AI_DRAM, and no data-quality warning.
    let ai = |l| p.intensity(l).unwrap_or(f64::NAN);
    assert!(ai(Level::L1) <= ai(Level::L2) && ai(Level::L2) <= ai(Level::Dram));
    assert!(!import.warnings.iter().any(|w| w.contains("data quality")));
}

#[test]
fn broken_ncu_files_are_reported_not_hidden() {
    let truncated = match parse_ncu(&fixture("ncu-truncated.csv")) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(truncated.kernels.len(), 1);
    assert!(truncated.warnings.iter().any(|w| w.contains("truncated")));
    let inconsistent = match parse_ncu(&fixture("ncu-inconsistent.csv")) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert!(
        inconsistent
            .warnings
            .iter()
            .any(|w| w.starts_with("data quality: copy_kernel") && w.contains("AI_L2 > AI_DRAM")),
        "{:?}",
        inconsistent.warnings
    );
    assert!(matches!(
        parse_ncu(&fixture("not-a-profile.txt")),
        Err(ImportError::NoHeader(..))
    ));
    assert!(matches!(parse_ncu(""), Err(ImportError::NoHeader(..))));
    // nvprof output is not ncu output.
    assert!(parse_ncu(&fixture("nvprof-nano-metrics.csv")).is_err());
}

#[test]
fn nvprof_totals_are_averages_times_invocations() {
    let metrics = fixture("nvprof-nano-metrics.csv");
    let summary = fixture("nvprof-nano-summary.csv");
    let import = match parse_nvprof(&metrics, Some(&summary)) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(import.kernels.len(), 2, "{import:?}");
    let gemv = &import.kernels[0];
    assert_eq!(gemv.invocations, 10);
    assert!(close(gemv.flops[&Precision::Fp32], 2e6 * 10.0));
    // (gld + gst + shared load + shared store) × 32 B × 10 invocations.
    assert!(close(
        gemv.bytes[&Level::L1],
        (40000.0 + 1000.0 + 9000.0) * 32.0 * 10.0
    ));
    assert!(close(gemv.bytes[&Level::L2], 31000.0 * 320.0));
    assert!(close(gemv.bytes[&Level::Dram], 25500.0 * 320.0));
    // Times from the GPU summary, in ms by its units row; the memcpy is not a kernel.
    assert!(close(gemv.seconds.unwrap_or(0.0), 4.5e-3));
    assert!(close(import.kernels[1].seconds.unwrap_or(0.0), 0.93e-3));
    assert!(import
        .warnings
        .iter()
        .any(|w| w.starts_with("broken_kernel(int)")));
    let Some(p) = program(&import, "mlp_infer") else {
        panic!("no program")
    };
    assert!(close(p.seconds, 5.43e-3));
    assert!(close(p.flops, 20e6));
    // Without the summary there is no time, so no point, and the import says why.
    let untimed = match parse_nvprof(&metrics, None) {
        Ok(i) => i,
        Err(e) => panic!("{e}"),
    };
    assert!(program(&untimed, "x").is_none());
    assert!(untimed
        .warnings
        .iter()
        .any(|w| w.contains("--print-gpu-summary")));
    assert!(parse_nvprof(&fixture("ncu-orin.csv"), None).is_err());
    assert!(matches!(
        parse_nvprof(&metrics, Some("garbage")),
        Err(ImportError::NoHeader(..))
    ));
}
