//! Do the engines compute the same thing? Every condition of an engine that runs the zoo's
//! seeded weights keeps its first output (`outputs/` in the results directory); conditions of the
//! same model, input and batch are compared with one reference (tract where it ran).

use crate::results::summary::Row;
use serde::Serialize;
use std::path::Path;

/// Largest difference allowed, relative to the reference output's largest magnitude. Engines
/// reorder float32 sums (blocked GEMM, Winograd, fused batch-norm), so their outputs differ by a
/// few ulps of the accumulated values; 1e-4 is far above that and far below a wrong layer.
pub const TOLERANCE: f64 = 1e-4;

/// Differences up to this are agreement whatever the outputs' scale: a detector's sigmoid
/// scores can all sit below 0.004, where a few float32 ulps of the values inside the network
/// exceed 1e-4 of the largest output (4.5e-7 of 0.0035 was once flagged).
pub const ABSOLUTE_FLOOR: f64 = 1e-6;

/// Whether outputs `abs` apart, `rel` of the reference's largest magnitude, agree.
pub fn agrees(abs: f64, rel: f64) -> bool {
    rel <= TOLERANCE || abs <= ABSOLUTE_FLOOR
}

/// One condition's output against its group's reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// `model/input/bN`.
    pub group: String,
    pub reference: String,
    pub condition: String,
    pub values: usize,
    pub max_abs_diff: f64,
    /// `max_abs_diff` over the reference's largest magnitude.
    pub max_rel_diff: f64,
    pub agree: bool,
    /// Why the outputs cannot be compared, when they cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The largest absolute difference and that over the reference's largest magnitude; `None`
/// when the lengths differ or a value is not finite.
pub fn difference(reference: &[f32], other: &[f32]) -> Option<(f64, f64)> {
    if reference.len() != other.len() || reference.is_empty() {
        return None;
    }
    let mut max_abs = 0.0f64;
    let mut scale = 0.0f64;
    for (&a, &b) in reference.iter().zip(other) {
        if !a.is_finite() || !b.is_finite() {
            return None;
        }
        max_abs = max_abs.max((f64::from(a) - f64::from(b)).abs());
        scale = scale.max(f64::from(a).abs());
    }
    let rel = if scale > 0.0 {
        max_abs / scale
    } else {
        max_abs
    };
    Some((max_abs, rel))
}

/// A kept output: little-endian f32 values.
pub fn read_output(path: &Path) -> Option<Vec<f32>> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// A condition's row with its kept output.
type Kept<'a> = (&'a Row, Vec<f32>);

/// Compares the kept outputs of the successful conditions of a results directory.
pub fn compare(dir: &Path, rows: &[Row]) -> Vec<Agreement> {
    let mut groups: Vec<(String, Vec<Kept>)> = Vec::new();
    // Lower precisions differ from fp32 by design: their cost is measured against their fp32
    // twins instead (`results::accuracy`).
    for row in rows
        .iter()
        .filter(|r| r.status == "ok" && r.precision == "fp32")
    {
        let path = crate::protocol::output_path(dir, &row.id);
        let Some(values) = read_output(&path) else {
            continue;
        };
        let group = format!("{}/{}/b{}", row.model, row.input, row.batch);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, members)) => members.push((row, values)),
            None => groups.push((group, vec![(row, values)])),
        }
    }
    let mut out = Vec::new();
    for (group, members) in groups {
        if members.len() < 2 {
            continue;
        }
        let reference = members
            .iter()
            .position(|(r, _)| r.engine == "tract")
            .unwrap_or(0);
        let (ref_row, ref_values) = &members[reference];
        for (k, (row, values)) in members.iter().enumerate() {
            if k == reference {
                continue;
            }
            let (max_abs_diff, max_rel_diff, agree, note) = match difference(ref_values, values) {
                Some((abs, rel)) => (abs, rel, agrees(abs, rel), None),
                None => (
                    f64::NAN,
                    f64::NAN,
                    false,
                    Some(format!(
                        "{} values against {}, or values that are not finite",
                        values.len(),
                        ref_values.len()
                    )),
                ),
            };
            out.push(Agreement {
                group: group.clone(),
                reference: ref_row.id.clone(),
                condition: row.id.clone(),
                values: values.len(),
                max_abs_diff,
                max_rel_diff,
                agree,
                note,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_relative_to_the_reference_scale() {
        let (abs, rel) = difference(&[1.0, -4.0, 2.0], &[1.0, -4.0004, 2.0]).unwrap_or_default();
        assert!((abs - 4e-4).abs() < 1e-6, "{abs}");
        assert!((rel - 1e-4).abs() < 1e-6, "{rel}");
        assert_eq!(difference(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(difference(&[1.0], &[f32::NAN]), None);
        assert_eq!(difference(&[], &[]), None);
        assert_eq!(difference(&[0.0, 0.0], &[0.0, 0.0]), Some((0.0, 0.0)));
    }

    #[test]
    fn tiny_outputs_agree_by_the_absolute_floor() {
        // A detector's scores all below 0.0035: 4.5e-7 apart is 1.3e-4 of the largest, but a
        // few float32 ulps of what the network computes.
        let reference = [0.0035f32, 0.001, 0.0002];
        let other = [0.003_500_45f32, 0.001, 0.0002];
        let Some((abs, rel)) = difference(&reference, &other) else {
            panic!("no difference computed");
        };
        assert!(rel > TOLERANCE, "{rel}");
        assert!(agrees(abs, rel), "{abs} {rel}");
        // A wrong layer on such outputs is still caught.
        let wrong = [0.0025f32, 0.001, 0.0002];
        let Some((abs, rel)) = difference(&reference, &wrong) else {
            panic!("no difference computed");
        };
        assert!(!agrees(abs, rel), "{abs} {rel}");
    }

    #[test]
    fn groups_compare_with_tract_and_flag_what_differs() -> crate::error::Result<()> {
        use crate::config::{Device, ModelRef};
        use crate::protocol::Condition;
        let dir = tempfile::tempdir()?;
        let shape = crate::models::InputShape::default();
        let cond = |engine: &str, model: &str| {
            Condition::new(
                engine,
                ModelRef::Zoo(model.into()),
                shape,
                1,
                1,
                Device::Cpu,
            )
        };
        let write = |c: &Condition, values: &[f32]| -> crate::error::Result<()> {
            let path = crate::protocol::output_path(dir.path(), &c.id);
            std::fs::create_dir_all(dir.path().join(crate::protocol::OUTPUTS))?;
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(path, bytes)?;
            Ok(())
        };
        let conds = [
            cond("candle", "resnet34"),
            cond("tract", "resnet34"),
            cond("onnxruntime", "resnet34"),
            cond("tract", "vgg19"),
        ];
        write(&conds[0], &[1.0, 2.0, 3.0000005])?;
        write(&conds[1], &[1.0, 2.0, 3.0])?;
        write(&conds[2], &[1.0, 2.5, 3.0])?;
        write(&conds[3], &[1.0])?;
        let rows: Vec<Row> = conds
            .iter()
            .map(|c| crate::results::summary::tests_support::row(c, "ok"))
            .collect();
        let found = compare(dir.path(), &rows);
        // vgg19 ran on one engine only: nothing to compare.
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|a| a.reference == conds[1].id));
        assert!(found[0].agree && found[0].condition == conds[0].id);
        assert!(!found[1].agree && (found[1].max_rel_diff - 0.5 / 3.0).abs() < 1e-6);
        Ok(())
    }
}
