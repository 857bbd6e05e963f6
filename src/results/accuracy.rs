//! What a lower precision costs in accuracy: each fp16, bf16 or int8 condition's kept output
//! against its fp32 twin's (the same engine, model, input, batch, threads, device and placement,
//! so the same weights and input): how often the top-1 and top-5 classes agree, the largest and
//! the mean absolute error of the outputs, and their cosine similarity.

use crate::results::summary::Row;
use serde::Serialize;
use std::path::Path;

/// A lower-precision output against its fp32 twin's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Images (rows of the output) compared: the batch.
    pub images: usize,
    /// Fraction of images whose highest output is at the same index in both.
    pub top1_agreement: f64,
    /// Fraction of images whose fp32 class (highest output) is among the five highest outputs
    /// of the lower precision: top-5 accuracy with the fp32 answer as the label.
    pub top5_agreement: f64,
    pub max_abs_error: f64,
    pub mean_abs_error: f64,
    /// Cosine similarity of the whole outputs (1: the same direction).
    pub cosine: f64,
}

/// The figures of `other` against `reference`, both `images` rows of equal length; `None`
/// when the lengths differ, are empty or do not split into `images` rows, or a value is not
/// finite.
pub fn figures(reference: &[f32], other: &[f32], images: usize) -> Option<Figures> {
    if reference.len() != other.len()
        || reference.is_empty()
        || images == 0
        || !reference.len().is_multiple_of(images)
        || reference.iter().chain(other).any(|v| !v.is_finite())
    {
        return None;
    }
    let per_image = reference.len() / images;
    let top = |row: &[f32], k: usize| -> Vec<usize> {
        let mut order: Vec<usize> = (0..row.len()).collect();
        // Highest first; equal values by index, so the order is the same on every machine.
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let mut best: Vec<usize> = order.into_iter().take(k).collect();
        best.sort_unstable();
        best
    };
    let (mut top1, mut top5) = (0usize, 0usize);
    for (r, o) in reference
        .chunks_exact(per_image)
        .zip(other.chunks_exact(per_image))
    {
        top1 += usize::from(top(r, 1) == top(o, 1));
        top5 += usize::from(top(r, 1).iter().all(|c| top(o, 5).contains(c)));
    }
    let (mut max_abs, mut sum_abs, mut dot, mut rr, mut oo) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    for (&r, &o) in reference.iter().zip(other) {
        let (r, o) = (f64::from(r), f64::from(o));
        let e = (r - o).abs();
        max_abs = max_abs.max(e);
        sum_abs += e;
        dot += r * o;
        rr += r * r;
        oo += o * o;
    }
    let cosine = if rr > 0.0 && oo > 0.0 {
        (dot / (rr.sqrt() * oo.sqrt())).clamp(-1.0, 1.0)
    } else if rr == oo {
        // Both all zeros: the same output.
        1.0
    } else {
        0.0
    };
    Some(Figures {
        images,
        top1_agreement: top1 as f64 / images as f64,
        top5_agreement: top5 as f64 / images as f64,
        max_abs_error: max_abs,
        mean_abs_error: sum_abs / reference.len() as f64,
        cosine,
    })
}

/// One lower-precision condition's accuracy cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accuracy {
    pub condition: String,
    pub precision: String,
    /// Its fp32 twin's id.
    pub reference: String,
    /// What the outputs were computed from: the input the timing ran on.
    pub inputs: String,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub figures: Option<Figures>,
    /// Why there are no figures, when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What the compared outputs of a record that does not say were computed from (runs before
/// records named their inputs were fed seeded values).
pub const INPUTS: &str = "the condition's seeded synthetic input, uniform in [-1, 1)";

/// What the compared outputs were computed from, in one phrase for a table's heading: the
/// input they all share, or a pointer to each row's where they differ.
pub fn inputs_line(compared: &[Accuracy]) -> String {
    match compared.first() {
        Some(first) if compared.iter().all(|a| a.inputs == first.inputs) => first.inputs.clone(),
        Some(_) => {
            "each condition's own input (they differ: see `inputs` in summary.json)".to_string()
        }
        None => INPUTS.to_string(),
    }
}

/// The id of a lower-precision condition's fp32 twin: the precision stands after the device
/// (`…/cpu/int8/c0-1`), and the twin's id is the same without it.
pub fn twin_id(row: &Row) -> Option<String> {
    let marker = format!("/{}/{}", row.device, row.precision);
    let at = row.id.rfind(&marker)?;
    let end = at + marker.len();
    // The marker ends the id or a part of it.
    if end != row.id.len() && !row.id[end..].starts_with('/') {
        return None;
    }
    Some(format!(
        "{}/{}{}",
        &row.id[..at],
        row.device,
        &row.id[end..]
    ))
}

/// An accuracy's figures as table cells: top-1 and top-5 agreement (%), max and mean absolute
/// error, cosine; or why there are none, in the first cell and blanks after.
pub fn cells(a: &Accuracy) -> [String; 5] {
    match &a.figures {
        Some(f) => [
            format!("{:.1} %", 100.0 * f.top1_agreement),
            format!("{:.1} %", 100.0 * f.top5_agreement),
            format!("{:.2e}", f.max_abs_error),
            format!("{:.2e}", f.mean_abs_error),
            format!("{:.6}", f.cosine),
        ],
        None => [
            a.note.clone().unwrap_or_default(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ],
    }
}

/// Every successful lower-precision condition of a results directory against its fp32 twin.
pub fn compare(dir: &Path, rows: &[Row]) -> Vec<Accuracy> {
    let mut out = Vec::new();
    for row in rows
        .iter()
        .filter(|r| r.status == "ok" && r.precision != "fp32")
    {
        let Some(reference) = twin_id(row) else {
            continue;
        };
        let twin = rows.iter().find(|r| r.id == reference);
        let read = |id: &str| {
            crate::results::agreement::read_output(&crate::protocol::output_path(dir, id))
        };
        let inputs = |r: &Row| r.inputs.clone().unwrap_or_else(|| INPUTS.to_string());
        let (figures, note) = match twin {
            None => (None, Some("no fp32 twin in this run".to_string())),
            Some(t) if t.status != "ok" => (None, Some(format!("its fp32 twin {}", t.status))),
            Some(t) if inputs(t) != inputs(row) => (
                None,
                Some(format!("its fp32 twin was fed other inputs ({})", inputs(t))),
            ),
            Some(_) => match (read(&reference), read(&row.id)) {
                (Some(r), Some(o)) => match figures(&r, &o, row.batch.max(1)) {
                    Some(f) => (Some(f), None),
                    None => (
                        None,
                        Some(format!(
                            "{} values against {}, or values that are not finite",
                            o.len(),
                            r.len()
                        )),
                    ),
                },
                _ => (
                    None,
                    Some("an output was not kept (only engines that run the zoo's seeded weights keep one)".to_string()),
                ),
            },
        };
        out.push(Accuracy {
            condition: row.id.clone(),
            precision: row.precision.clone(),
            reference,
            inputs: inputs(row),
            figures,
            note,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identical_output_agrees_fully_with_no_error() {
        let out: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin()).collect();
        let f = figures(&out, &out, 2);
        assert_eq!(
            f,
            Some(Figures {
                images: 2,
                top1_agreement: 1.0,
                top5_agreement: 1.0,
                max_abs_error: 0.0,
                mean_abs_error: 0.0,
                cosine: 1.0,
            })
        );
    }

    #[test]
    fn a_changed_winner_costs_top1_of_that_image_only() {
        // Two images of six classes; the second image's winner moves from class 5 to 0.
        let reference = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.1, 0.2, 0.3, 0.4, 0.5, 0.9];
        let mut other = reference;
        other[6] = 1.0;
        let Some(f) = figures(&reference, &other, 2) else {
            panic!("no figures");
        };
        assert_eq!(f.top1_agreement, 0.5);
        // The fp32 winner of the second image (class 5) is still among its five highest.
        assert_eq!(f.top5_agreement, 1.0);
        // Pushed below five others, it is not.
        other[11] = 0.0;
        let top5 = figures(&reference, &other, 2).map(|f| f.top5_agreement);
        assert_eq!(top5, Some(0.5));
        assert!((f.max_abs_error - 0.9).abs() < 1e-6, "{f:?}");
        assert!((f.mean_abs_error - 0.9 / 12.0).abs() < 1e-6, "{f:?}");
        assert!(f.cosine < 1.0 && f.cosine > 0.8, "{f:?}");
    }

    #[test]
    fn outputs_that_cannot_be_compared_give_no_figures() {
        assert_eq!(figures(&[1.0, 2.0], &[1.0], 1), None);
        assert_eq!(figures(&[1.0, f32::NAN], &[1.0, 2.0], 1), None);
        assert_eq!(figures(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], 2), None);
        assert_eq!(figures(&[], &[], 1), None);
    }

    #[test]
    fn the_twin_is_the_id_without_its_precision() {
        let mut row = crate::results::summary::tests_support::row(
            &crate::protocol::Condition::new(
                "candle",
                crate::config::ModelRef::Zoo("mobilenet_v2".into()),
                crate::models::InputShape::default(),
                1,
                2,
                crate::config::Device::Cpu,
            )
            .with_precision(crate::collect::kernels::Precision::Fp16)
            .with_placement(Some(vec![0, 1]), serde_json::Map::new()),
            "ok",
        );
        assert_eq!(
            twin_id(&row).as_deref(),
            Some("candle/mobilenet_v2/3x224x224/b1/t2/cpu/c0-1")
        );
        row.id = "candle/mobilenet_v2/3x224x224/b1/t2/cpu/fp16x".into();
        assert_eq!(twin_id(&row), None);
    }
}
