//! The Roofline tab's GPU side after opening a results directory whose sweep profiled its GPU
//! conditions (`gpu-roofline.json`): their points under the ceilings the sweep kept, the ordered
//! advice, and the conditions left out with their reasons (a refused profiler, another GPU).

use super::tests::{default_app, screen, snap};
use crate::tui::app::{Shown, Tab};
use edgeprof::roofline::Processor;
use std::path::Path;

#[test]
fn the_gpu_roofline_of_a_sweep_shows_its_conditions_and_advice() {
    let mut a = default_app();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/gpu");
    super::super::open_results(&mut a, &dir);
    a.status = None;
    a.tab = Tab::Roofline;
    // g: the GPU side (what the key does, without the terminal).
    a.roofline.swap_side();
    assert_eq!(a.roofline.processor, Processor::Gpu);
    a.refresh_roofline();
    assert!(
        matches!(&a.roofline.ceilings_of(Processor::Gpu), Some(Shown::Ready((_, from))) if from == "ceilings-orin-gpu.json"),
        "the sweep's own ceilings"
    );
    let shown = screen(&a, (120, 40));
    for needle in [
        "A onnxruntime/mobilenet_v2/3x224x224/b1/t1/gpu",
        "B pytorch/mobilenet_v2/3x224x224/b1/t1/gpu:0",
        "left out onnxruntime/shufflenet_v2_x0_5",
        "1. ",
    ] {
        assert!(shown.contains(needle), "{needle}:\n{shown}");
    }
    // Two points placed on GPU 0; the refused one and GPU 1's are left out with their reasons.
    assert_eq!(a.roofline.programs.len(), 2);
    let reasons: Vec<&str> = a
        .roofline
        .left_out
        .iter()
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("run edgeprof as root")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("on GPU 1")),
        "{reasons:?}"
    );
    snap("roofline_gpu_sweep", &a);
}
