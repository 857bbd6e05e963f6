//! NumPy `.npy` tensors: read as a model's input or expected output, written for a framework's
//! harness to feed and by `bench --save-outputs`. The element types are ONNX's, so a tensor
//! read here binds to a model's input the way an ONNX `.pb` tensor does.

use npyz::{DType, TypeChar, TypeStr};
use std::path::Path;
use thiserror::Error;

/// Why a `.npy` tensor cannot be read or written, in one sentence.
#[derive(Debug, Error, PartialEq)]
#[error("{0}")]
pub struct NpyError(pub String);
use tract_onnx::pb::tensor_proto::DataType as D;

/// A tensor read from a file: ONNX element type, shape and every value, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub elem: i32,
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
}

/// The `.npy` files directly in `dir`, by name; an error when `dir` is not a folder or holds
/// none.
pub fn files_in(dir: &Path) -> Result<Vec<std::path::PathBuf>, NpyError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| NpyError(format!("cannot read the folder {}: {e}", dir.display())))?;
    let mut files: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "npy"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(NpyError(format!("{} holds no .npy files", dir.display())));
    }
    Ok(files)
}

/// Whether `bytes` begin as a `.npy` file does.
pub fn is_npy(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x93NUMPY")
}

/// The ONNX element type of a NumPy type, or None for types a model takes no input of.
fn onnx_type(t: &TypeStr) -> Option<D> {
    Some(match (t.type_char(), t.size_field()) {
        (TypeChar::Bool, 1) => D::Bool,
        (TypeChar::Int, 1) => D::Int8,
        (TypeChar::Int, 2) => D::Int16,
        (TypeChar::Int, 4) => D::Int32,
        (TypeChar::Int, 8) => D::Int64,
        (TypeChar::Uint, 1) => D::Uint8,
        (TypeChar::Uint, 2) => D::Uint16,
        (TypeChar::Uint, 4) => D::Uint32,
        (TypeChar::Uint, 8) => D::Uint64,
        (TypeChar::Float, 2) => D::Float16,
        (TypeChar::Float, 4) => D::Float,
        (TypeChar::Float, 8) => D::Double,
        _ => return None,
    })
}

/// The most bytes of header NumPy itself reads (its `max_header_size`).
const MAX_HEADER: usize = 10_000;

/// Checks a `.npy` header before it is parsed: the magic, a header of at most [`MAX_HEADER`]
/// bytes, a plain element type of at most 16 bytes (not a structured or object array) and a
/// shape of whole numbers within [`crate::models::onnx_graph::MAX_ELEMENTS`].
fn precheck(bytes: &[u8]) -> Result<(), String> {
    if !is_npy(bytes) || bytes.len() < 10 {
        return Err("it does not begin as a .npy file does".into());
    }
    let (len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("its format version {v} is none NumPy writes")),
    };
    if len > MAX_HEADER {
        return Err(format!(
            "its header of {len} bytes is longer than NumPy reads"
        ));
    }
    let header = bytes
        .get(start..start + len)
        .ok_or("its header is cut short")?;
    let header = String::from_utf8_lossy(header);
    let value_of = |key: &str| {
        let at = header.find(&format!("'{key}'"))?;
        let rest = header[at + key.len() + 2..].trim_start();
        Some(rest.strip_prefix(':')?.trim_start())
    };
    let descr = value_of("descr").ok_or("its header names no element type")?;
    let plain = descr
        .strip_prefix('\'')
        .and_then(|d| d.split_once('\''))
        .map(|(d, _)| d)
        .filter(|d| {
            let mut c = d.chars();
            matches!(c.next(), Some('<' | '>' | '|' | '='))
                && matches!(c.next(), Some('b' | 'i' | 'u' | 'f' | 'c'))
                && (1..=2).contains(&c.as_str().len())
                && c.as_str().chars().all(|c| c.is_ascii_digit())
        });
    if plain.is_none() {
        return Err("it holds a structured or object array, not one tensor".into());
    }
    let shape = value_of("shape").ok_or("its header gives no shape")?;
    let dims = shape
        .strip_prefix('(')
        .and_then(|s| s.split_once(')'))
        .map(|(s, _)| s)
        .ok_or("its shape is not a tuple")?;
    // The product of the dimensions other than zeros: an empty array with a huge dimension
    // holds nothing, but the reader's strides multiply the dimensions all the same.
    let mut count: u64 = 1;
    for d in dims.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let d: u64 = d
            .parse()
            .map_err(|_| format!("its shape holds {d:?}, not a whole number"))?;
        count = count
            .checked_mul(d.max(1))
            .filter(|&n| n <= crate::models::onnx_graph::MAX_ELEMENTS)
            .ok_or("its shape is larger than any model's (over 2^44 elements)")?;
    }
    Ok(())
}

/// The NumPy type written for an ONNX element type (little-endian).
fn numpy_type(elem: i32) -> Option<&'static str> {
    Some(match D::try_from(elem).ok()? {
        D::Bool => "|b1",
        D::Int8 => "|i1",
        D::Int16 => "<i2",
        D::Int32 => "<i4",
        D::Int64 => "<i8",
        D::Uint8 => "|u1",
        D::Uint16 => "<u2",
        D::Uint32 => "<u4",
        D::Uint64 => "<u8",
        D::Float16 => "<f2",
        D::Float => "<f4",
        D::Double => "<f8",
        _ => return None,
    })
}

/// Reads the tensor a `.npy` file's bytes hold; `origin` names the file in errors.
pub fn read(bytes: &[u8], origin: &str) -> Result<Tensor, NpyError> {
    let bad = |why: String| {
        NpyError(format!(
            "{origin} is not a NumPy array file edgeprof reads: {why}"
        ))
    };
    // The header is checked here first: its type plain and its size within a model's, so that
    // the reader never sizes anything from an untrusted product.
    precheck(bytes).map_err(bad)?;
    let npy = npyz::NpyFile::new(bytes).map_err(|e| {
        bad(match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "it is cut short".to_string(),
            _ => e.to_string(),
        })
    })?;
    let DType::Plain(type_str) = npy.dtype() else {
        return Err(bad("it holds a structured array, not one tensor".into()));
    };
    let Some(elem) = onnx_type(&type_str) else {
        return Err(bad(format!(
            "its element type {type_str} is none a model takes (bool, integers, float16/32/64)"
        )));
    };
    if npy.order() == npyz::Order::Fortran {
        return Err(bad(
            "it is in Fortran order; save it C-ordered (numpy.ascontiguousarray)".into(),
        ));
    }
    let mut shape = Vec::with_capacity(npy.shape().len());
    for &d in npy.shape() {
        shape.push(usize::try_from(d).map_err(|_| bad(format!("a dimension of {d}")))?);
    }
    let count = crate::models::onnx_graph::checked_elements(&shape).map_err(bad)?;
    // The data must be there before anything is allocated for it.
    let needed = count.saturating_mul(type_str.size_field());
    if needed > bytes.len() as u64 {
        return Err(bad(format!(
            "it declares {count} values but holds {} bytes",
            bytes.len()
        )));
    }
    let io = |e: std::io::Error| {
        bad(match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "it is cut short".to_string(),
            _ => e.to_string(),
        })
    };
    fn wide<T: Into<f64>>(v: Vec<T>) -> Vec<f64> {
        v.into_iter().map(Into::into).collect()
    }
    let values = match elem {
        D::Bool => npy
            .into_vec::<bool>()
            .map_err(io)?
            .into_iter()
            .map(|b| f64::from(u8::from(b)))
            .collect(),
        D::Int8 => wide(npy.into_vec::<i8>().map_err(io)?),
        D::Int16 => wide(npy.into_vec::<i16>().map_err(io)?),
        D::Int32 => wide(npy.into_vec::<i32>().map_err(io)?),
        D::Int64 => npy
            .into_vec::<i64>()
            .map_err(io)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        D::Uint8 => wide(npy.into_vec::<u8>().map_err(io)?),
        D::Uint16 => wide(npy.into_vec::<u16>().map_err(io)?),
        D::Uint32 => wide(npy.into_vec::<u32>().map_err(io)?),
        D::Uint64 => npy
            .into_vec::<u64>()
            .map_err(io)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        D::Float16 => npy
            .into_vec::<half::f16>()
            .map_err(io)?
            .into_iter()
            .map(f64::from)
            .collect(),
        D::Float => wide(npy.into_vec::<f32>().map_err(io)?),
        _ => npy.into_vec::<f64>().map_err(io)?,
    };
    if values.len() as u64 != count {
        return Err(bad(format!(
            "it holds {} values for its shape's {count}",
            values.len()
        )));
    }
    Ok(Tensor {
        elem: elem as i32,
        shape,
        values,
    })
}

/// The `.npy` bytes of a tensor of ONNX element type `elem` (values row-major, converted to
/// the type as NumPy's `astype` does for values in range).
pub fn encode(elem: i32, shape: &[usize], values: &[f64]) -> Result<Vec<u8>, NpyError> {
    let name = numpy_type(elem).ok_or_else(|| {
        NpyError(format!(
            "a {} tensor has no NumPy type edgeprof writes",
            crate::models::onnx_graph::elem_type_name(elem)
        ))
    })?;
    let dtype = DType::Plain(
        name.parse::<TypeStr>()
            .map_err(|e| NpyError(format!("NumPy type {name}: {e}")))?,
    );
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let mut out = Vec::new();
    let io = |e: std::io::Error| NpyError(format!("cannot encode a .npy tensor: {e}"));
    macro_rules! write_as {
        ($t:ty, $conv:expr) => {{
            use npyz::WriterBuilder;
            let mut w = npyz::WriteOptions::<$t>::new()
                .dtype(dtype)
                .shape(&shape)
                .writer(&mut out)
                .begin_nd()
                .map_err(io)?;
            for &v in values {
                let conv: fn(f64) -> $t = $conv;
                w.push(&conv(v)).map_err(io)?;
            }
            w.finish().map_err(io)?;
        }};
    }
    match D::try_from(elem).map_err(|e| NpyError(e.to_string()))? {
        D::Bool => write_as!(bool, |v| v != 0.0),
        D::Int8 => write_as!(i8, |v| v as i8),
        D::Int16 => write_as!(i16, |v| v as i16),
        D::Int32 => write_as!(i32, |v| v as i32),
        D::Int64 => write_as!(i64, |v| v as i64),
        D::Uint8 => write_as!(u8, |v| v as u8),
        D::Uint16 => write_as!(u16, |v| v as u16),
        D::Uint32 => write_as!(u32, |v| v as u32),
        D::Uint64 => write_as!(u64, |v| v as u64),
        D::Float16 => write_as!(half::f16, half::f16::from_f64),
        D::Float => write_as!(f32, |v| v as f32),
        _ => write_as!(f64, |v| v),
    }
    Ok(out)
}

/// Reads the `.npy` file at `path` (within the size a model's file may have).
pub fn read_file(path: &Path) -> Result<Tensor, NpyError> {
    let bytes = crate::models::onnx_graph::read_model_bytes(path)
        .map_err(|e| NpyError(format!("cannot read {}: {e}", path.display())))?;
    read(&bytes, &path.display().to_string())
}

/// Why `.npy` files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum NpyWriteError {
    #[error(transparent)]
    Encode(#[from] NpyError),
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// The folder to save outputs in is a file: what the user gave, so bad input.
    #[error("{} is a file, not a folder to save the outputs in", .0.display())]
    NotAFolder(std::path::PathBuf),
}

impl NpyWriteError {
    /// Whether what the user gave is at fault rather than the machine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            NpyWriteError::NotAFolder(_) => true,
            NpyWriteError::File(e) => e.is_bad_input(),
            NpyWriteError::Encode(_) => false,
        }
    }
}

/// Writes a tensor as a `.npy` file at `path`, whole or not at all.
pub fn write_file(
    path: &Path,
    elem: i32,
    shape: &[usize],
    values: &[f64],
) -> Result<(), NpyWriteError> {
    let bytes = encode(elem, shape, values)?;
    crate::files::write_atomic(path, &bytes)?;
    Ok(())
}

/// The file of a model's output `k` among saved outputs.
pub fn output_file_name(k: usize) -> String {
    format!("output_{k}.npy")
}

/// Writes each of a model's outputs, (shape, values), as `output_K.npy` (float32) in `dir`,
/// created if need be.
pub fn write_outputs(dir: &Path, outputs: &[(Vec<usize>, Vec<f32>)]) -> Result<(), NpyWriteError> {
    if dir.exists() && !dir.is_dir() {
        return Err(NpyWriteError::NotAFolder(dir.to_path_buf()));
    }
    std::fs::create_dir_all(dir).map_err(|error| crate::files::FileError::Create {
        path: dir.to_path_buf(),
        error,
    })?;
    for (k, (shape, values)) in outputs.iter().enumerate() {
        let wide: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        write_file(
            &dir.join(output_file_name(k)),
            D::Float as i32,
            shape,
            &wide,
        )?;
    }
    Ok(())
}

crate::error::kinds_by_input!(NpyWriteError);

crate::error::kinds!(crate::error::Kind::Failed => NpyError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_a_model_takes_round_trips() -> Result<(), NpyError> {
        for elem in [
            D::Bool,
            D::Int8,
            D::Int16,
            D::Int32,
            D::Int64,
            D::Uint8,
            D::Uint16,
            D::Uint32,
            D::Uint64,
            D::Float16,
            D::Float,
            D::Double,
        ] {
            let values = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0];
            let bytes = encode(elem as i32, &[2, 3], &values)?;
            let back = read(&bytes, "t.npy")?;
            assert_eq!(back.elem, elem as i32, "{elem:?}");
            assert_eq!(back.shape, vec![2, 3], "{elem:?}");
            assert_eq!(back.values, values, "{elem:?}");
        }
        Ok(())
    }

    #[test]
    fn a_scalar_and_negative_integers_keep_their_values() -> Result<(), NpyError> {
        let back = read(&encode(D::Int64 as i32, &[], &[-16000.0])?, "sr.npy")?;
        assert_eq!((back.shape, back.values), (vec![], vec![-16000.0]));
        let back = read(
            &encode(D::Float as i32, &[3], &[-0.5, 1e-7, 3.25])?,
            "x.npy",
        )?;
        assert_eq!(back.values, vec![-0.5, 1e-7f32 as f64, 3.25]);
        Ok(())
    }

    #[test]
    fn broken_files_are_refused_in_a_sentence() -> Result<(), NpyError> {
        let good = encode(D::Float as i32, &[1000], &[0.5; 1000])?;
        // Cut short: the header promises more than the file holds.
        let err = read(&good[..200], "cut.npy")
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(
            err.starts_with("cut.npy is not a NumPy array file") && err.contains("1000 values"),
            "{err}"
        );
        let err = read(b"\x93NUMPY\x01\x00", "short.npy")
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(
            err.starts_with("short.npy is not a NumPy array file"),
            "{err}"
        );
        // A shape of 2^62 elements is refused before anything is allocated.
        let err = refusal(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }",
            "huge.npy",
        );
        assert!(err.contains("larger than any model's"), "{err}");
        // Complex numbers are no model input.
        let mut complex = with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }");
        complex.extend_from_slice(&[0; 8]);
        let err = read(&complex, "c.npy")
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(err.contains("element type <c8"), "{err}");
        Ok(())
    }

    #[test]
    fn bfloat16_has_no_numpy_type() {
        let err = encode(D::Bfloat16 as i32, &[1], &[1.0]).err().map(|e| e.0);
        assert_eq!(
            err.as_deref(),
            Some("a bfloat16 tensor has no NumPy type edgeprof writes")
        );
    }

    /// What the long fuzz campaign found: an empty array (a zero dimension) whose other
    /// dimensions overflow when the reader works out its strides.
    #[test]
    fn an_empty_array_with_a_huge_dimension_is_refused_not_overflowed() {
        let err = refusal(
            "{'descr': '<f2', 'fortran_order': False, 'shape': (0, 18446744073709551615, 2, ), }",
            "empty.npy",
        );
        assert!(err.contains("larger than any model's"), "{err}");
    }

    /// A version 1 file that holds `header` (padded as NumPy pads it) and nothing after it.
    fn with_header(header: &str) -> Vec<u8> {
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let padded = format!("{header:<117}\n");
        bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        bytes.extend_from_slice(padded.as_bytes());
        bytes
    }

    /// Why reading a file of `header` alone is refused.
    fn refusal(header: &str, name: &str) -> String {
        read(&with_header(header), name)
            .err()
            .map(|e| e.0)
            .unwrap_or_default()
    }
}
