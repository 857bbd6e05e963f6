//! Workloads: the model description, the built-in zoo, analytic costs, the ONNX writer and
//! the reader that describes a user's ONNX file the same way.

pub mod blocks;
pub mod cost;
pub mod graph;
pub mod images;
pub mod npy;
pub mod onnx;
pub mod onnx_graph;
pub mod onnx_read;
pub mod weights;
pub mod zoo;

use thiserror::Error;

/// An input given as `CxHxW` (e.g. `3x224x224`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputShape {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl Default for InputShape {
    fn default() -> Self {
        InputShape {
            channels: 3,
            height: 224,
            width: 224,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
#[error("input shape {text:?} is not CxHxW with positive whole numbers (for example 3x224x224)")]
pub struct ShapeParseError {
    pub text: String,
}

impl std::str::FromStr for InputShape {
    type Err = ShapeParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || ShapeParseError {
            text: text.to_string(),
        };
        let dims: Vec<usize> = text
            .trim()
            .split(['x', 'X', '×'])
            .map(|p| p.trim().parse::<usize>().map_err(|_| err()))
            .collect::<Result<_, _>>()?;
        match dims[..] {
            [c, h, w] if c > 0 && h > 0 && w > 0 => Ok(InputShape {
                channels: c,
                height: h,
                width: w,
            }),
            _ => Err(err()),
        }
    }
}

impl std::fmt::Display for InputShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.channels, self.height, self.width)
    }
}

serde_as_text!(InputShape);

/// True when `model` names a file rather than a zoo entry.
pub fn is_file_model(model: &str) -> bool {
    zoo::find(model).is_none()
        && (model.ends_with(".onnx") || model.contains('/') || std::path::Path::new(model).exists())
}

crate::error::kinds!(crate::error::Kind::BadInput => ShapeParseError);

/// The model `name` stands for, described for analytic costs: an ONNX file read at `input` and
/// `batch` where they are given (else its own), or a zoo model built at them (else at
/// `zoo_input`, batch 1) with `classes` outputs (else 1000). What cannot be described so is
/// the user's to mend.
pub fn describe(
    name: &str,
    input: Option<InputShape>,
    batch: Option<usize>,
    classes: Option<usize>,
    zoo_input: InputShape,
) -> Result<graph::Model, crate::error::BadInput> {
    use crate::error::BadInput;
    if is_file_model(name) {
        if classes.is_some() {
            return Err(BadInput(format!(
                "--classes sets a zoo model's classifier; {name} has its own"
            )));
        }
        let given = onnx_read::Given { input, batch };
        return onnx_read::read_file(std::path::Path::new(name), given)
            .map_err(|e| BadInput(e.to_string()));
    }
    let input = input.unwrap_or(zoo_input);
    let params = zoo::ModelParams {
        num_classes: classes.unwrap_or(1000),
        channels: input.channels,
        height: input.height,
        width: input.width,
        batch: batch.unwrap_or(1),
    };
    zoo::build(name, &params).map_err(|e| BadInput(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cxhxw_and_rejects_the_rest() {
        assert_eq!(
            "3x32x48".parse(),
            Ok(InputShape {
                channels: 3,
                height: 32,
                width: 48
            })
        );
        for bad in [
            "",
            "3x224",
            "3x224x224x1",
            "ax2x2",
            "0x32x32",
            "3x-1x32",
            "3 x 32 x",
        ] {
            assert!(bad.parse::<InputShape>().is_err(), "{bad}");
        }
    }
}
