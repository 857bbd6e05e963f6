//! The Results tab's detail pane with each condition's telemetry curves (GPU load, GPU memory,
//! machine CPU) from a fixture directory whose telemetry has two GPUs.

use super::tests::{default_app, screen, snap};
use crate::tui::app::Tab;
use std::path::Path;

#[test]
fn the_detail_pane_shows_the_conditions_gpu_curves() {
    let mut a = default_app();
    a.tab = Tab::Results;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/gpu");
    super::super::open_results(&mut a, &dir);
    a.results.dir = Some("results/gpu".into());
    a.status = None;
    a.results.detail = true;
    // The pytorch condition on the second GPU.
    let Some(k) = a
        .results
        .rows
        .iter()
        .position(|r| r.id.ends_with("shufflenet_v2_x0_5/3x224x224/b1/t1/gpu:1"))
    else {
        panic!(
            "no gpu:1 row: {:?}",
            a.results.rows.iter().map(|r| &r.id).collect::<Vec<_>>()
        )
    };
    a.results.selected = k;
    snap("results_detail_gpu_curves", &a);
    let shown = screen(&a, (120, 40));
    for needle in [
        "GPU load",
        "mean 80 %, peak 90 %",
        "GPU memory",
        "machine CPU",
    ] {
        assert!(shown.contains(needle), "{needle}:\n{shown}");
    }
    // A directory without GPU figures has no curves.
    let small = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/small");
    super::super::open_results(&mut a, &small);
    assert!(a.results.curves.is_empty());
}
