//! A model's inputs as the user gives them (`NAME=DIMS`, `NAME=TYPE:VALUE`, `NAME=@FILE`,
//! `CxHxW`) and as they are bound against what the file declares.

use super::*;

/// Why an input cannot be bound or read, in one sentence.
#[derive(Debug, Error, PartialEq)]
#[error("{0}")]
pub struct InputError(pub String);

/// An input as the user gives it: `NAME=DIMS`, `NAME=TYPE:DIMS`, a scalar's value
/// `NAME=TYPE:VALUE` (for an input the file declares as a scalar), or `CxHxW` for a model with
/// one image input (with the batch apart).
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    /// The input's name; None for the model's first input.
    pub name: Option<String>,
    pub elem: Option<i32>,
    pub dims: Option<Vec<usize>>,
    pub value: Option<f64>,
    /// A whole tensor's values (read from an ONNX `.pb` or a NumPy `.npy` file), row-major.
    pub values: Option<Vec<f64>>,
    /// `CxHxW` given the old way: the last three dimensions of a 4-D input.
    pub image: Option<InputShape>,
}

impl InputSpec {
    /// The old way: `CxHxW` of a model's one image input.
    pub fn image(shape: InputShape) -> InputSpec {
        InputSpec {
            name: None,
            elem: None,
            dims: None,
            value: None,
            values: None,
            image: Some(shape),
        }
    }

    /// An input given as a tensor (an ONNX test's `input_0.pb`): its type, shape and, when
    /// small, its values.
    pub fn from_tensor(
        name: Option<String>,
        tensor: &pb::TensorProto,
    ) -> Result<InputSpec, InputError> {
        let t = tensor_of(tensor).map_err(InputError)?;
        // Values of a type this does not read leave the input its type and shape only.
        let values = t.value.or_else(|| tensor_values(tensor));
        Ok(InputSpec {
            name,
            elem: Some(t.elem),
            dims: Some(t.shape),
            value: None,
            values,
            image: None,
        })
    }

    /// The tensor in an ONNX `.pb` or a NumPy `.npy` file, unnamed (an expected output).
    pub fn from_pb_file(path: &Path) -> Result<InputSpec, InputError> {
        Self::from_file(None, path).map_err(InputError)
    }

    /// `NAME=@FILE`: the tensor in an ONNX `.pb` file (as ONNX's test data hold them) or a
    /// NumPy `.npy` file.
    fn from_file(name: Option<String>, path: &Path) -> Result<InputSpec, String> {
        use prost::Message;
        let bytes =
            read_model_bytes(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if crate::models::npy::is_npy(&bytes) {
            let t =
                crate::models::npy::read(&bytes, &path.display().to_string()).map_err(|e| e.0)?;
            return Ok(InputSpec {
                name,
                elem: Some(t.elem),
                dims: Some(t.shape),
                value: None,
                values: Some(t.values),
                image: None,
            });
        }
        let no_tensor = |why: String| format!("{} holds no ONNX tensor ({why})", path.display());
        if bytes.is_empty() {
            return Err(format!("{} is empty: it holds no tensor", path.display()));
        }
        let tensor =
            pb::TensorProto::decode(&bytes[..]).map_err(|e| no_tensor(short_decode_error(&e)))?;
        if tensor.data_type == 0 {
            return Err(no_tensor("it names no element type".into()));
        }
        Self::from_tensor(name, &tensor).map_err(|e| e.0)
    }
}

#[derive(Debug, PartialEq)]
pub struct InputSpecError {
    pub text: String,
    pub why: String,
    /// The text is well formed but names a file that cannot be read as a tensor.
    pub file: bool,
}

impl std::fmt::Display for InputSpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.file {
            write!(f, "input {:?}: {}", self.text, self.why)
        } else {
            write!(
                f,
                "input {:?} is not NAME=DIMS (images=1x3x640x640), NAME=TYPE:DIMS \
                 (ids=int64:1x77), NAME=TYPE:VALUE for a scalar (sr=int64:16000), NAME=@FILE (a \
                 .pb or .npy tensor) or CxHxW (3x224x224): {}",
                self.text, self.why
            )
        }
    }
}

impl std::error::Error for InputSpecError {}

impl InputSpec {
    /// Inputs as a user gives them on the command line, each parsed.
    pub fn parse_all(texts: &[String]) -> Result<Vec<InputSpec>, InputSpecError> {
        texts.iter().map(|t| t.parse()).collect()
    }
}

impl std::str::FromStr for InputSpec {
    type Err = InputSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| InputSpecError {
            text: text.to_string(),
            why: why.to_string(),
            file: false,
        };
        let (name, rest) = match text.split_once('=') {
            Some((n, r)) => {
                let n = n.trim();
                if n.is_empty() {
                    return Err(err("the name before = is empty"));
                }
                (Some(n.to_string()), r.trim())
            }
            None => (None, text.trim()),
        };
        if let Some(file) = rest.strip_prefix('@') {
            if file.trim().is_empty() {
                return Err(err("no file after @"));
            }
            return Self::from_file(name, Path::new(file.trim())).map_err(|why| InputSpecError {
                text: text.to_string(),
                why,
                file: true,
            });
        }
        let (elem, body) = match rest.split_once(':') {
            Some((t, b)) => (
                Some(elem_type_named(t.trim()).ok_or_else(|| {
                    err(&format!(
                        "unknown element type {:?} (float32, float16, int64, int32, int8, \
                         uint8, bool, …)",
                        t.trim()
                    ))
                })?),
                b.trim(),
            ),
            None => (None, rest),
        };
        if body.is_empty() {
            return Err(err("no dimensions"));
        }
        let parts: Vec<&str> = body.split(['x', 'X', '×']).map(str::trim).collect();
        let dims: Option<Vec<usize>> = parts.iter().map(|p| p.parse::<usize>().ok()).collect();
        let value = if parts.len() == 1 {
            match body.to_ascii_lowercase().as_str() {
                "true" => Some(1.0),
                "false" => Some(0.0),
                _ => body.parse::<f64>().ok().filter(|v| v.is_finite()),
            }
        } else {
            None
        };
        if dims.is_none() && value.is_none() {
            if parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(err("a dimension is larger than any tensor's"));
            }
            return Err(err("dimensions are whole numbers joined by x"));
        }
        if dims.as_ref().is_some_and(|d| d.len() > 1 && d.contains(&0)) {
            return Err(err("a dimension is 0"));
        }
        if name.is_none() && elem.is_none() {
            if let Ok(image) = body.parse::<InputShape>() {
                return Ok(InputSpec::image(image));
            }
        }
        Ok(InputSpec {
            name,
            elem,
            dims,
            value,
            values: None,
            image: None,
        })
    }
}

/// The ONNX element type a user's name stands for.
pub(super) fn elem_type_named(name: &str) -> Option<i32> {
    use pb::tensor_proto::DataType as D;
    let t = match name.to_ascii_lowercase().as_str() {
        "float32" | "f32" | "float" => D::Float,
        "float16" | "f16" | "half" => D::Float16,
        "bfloat16" | "bf16" => D::Bfloat16,
        "float64" | "f64" | "double" => D::Double,
        "int64" | "i64" => D::Int64,
        "int32" | "i32" => D::Int32,
        "int16" | "i16" => D::Int16,
        "int8" | "i8" => D::Int8,
        "uint8" | "u8" => D::Uint8,
        "uint16" | "u16" => D::Uint16,
        "uint32" | "u32" => D::Uint32,
        "uint64" | "u64" => D::Uint64,
        "bool" => D::Bool,
        _ => return None,
    };
    Some(t as i32)
}

/// One input of the model bound as the user gave it: name, ONNX element type, shape, and the
/// values when given (a scalar's, or a `.pb` or `.npy` file's).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundInput {
    pub name: String,
    pub elem: i32,
    pub shape: Vec<usize>,
    pub values: Option<Vec<f64>>,
}

impl BoundInput {
    /// The values the input is fed: its given values, else seeded uniform values in [-1, 1)
    /// for a floating-point input and zeros for the others. Every engine feeds input `k` of the
    /// model (counting from 0) with `seed + k`, so each is fed the same values.
    pub fn values_or_seeded(&self, seed: u64) -> Vec<f64> {
        use pb::tensor_proto::DataType as D;
        match &self.values {
            Some(v) => v.clone(),
            None if matches!(
                D::try_from(self.elem),
                Ok(D::Float | D::Float16 | D::Double | D::Bfloat16)
            ) =>
            {
                crate::models::weights::input_data(&self.shape, seed)
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect()
            }
            None => vec![0.0; self.shape.iter().product()],
        }
    }
}

/// The inputs of the ONNX file at `path` bound by `given`, as [`bind_inputs`] binds them.
pub fn bind_file_inputs(
    path: &Path,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Vec<BoundInput>, AnalysisError> {
    let (proto, file) = decode_file(path)?;
    let inputs_err = |reason: String| AnalysisError::Inputs {
        file: file.clone(),
        reason,
    };
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| inputs_err("the file holds no graph".into()))?;
    bind(graph, given, batch).map_err(inputs_err)
}

/// The names of the ONNX file's inputs (graph inputs that are no initializer), in order.
pub fn input_names(path: &Path) -> Result<Vec<String>, AnalysisError> {
    let (proto, _) = decode_file(path)?;
    let Some(graph) = proto.graph.as_ref() else {
        return Ok(Vec::new());
    };
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    Ok(graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_str()))
        .map(|v| v.name.clone())
        .collect())
}

/// A declared dimension: fixed, or open under a symbol (empty when anonymous).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Dim {
    Fixed(usize),
    Open(String),
}

pub(super) fn declared(v: &pb::ValueInfoProto) -> (i32, Option<Vec<Dim>>) {
    use pb::tensor_shape_proto::dimension::Value;
    match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => (
            t.elem_type,
            t.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(Value::DimValue(v)) if *v > 0 => Dim::Fixed(*v as usize),
                        // "?" is what some exporters write for an anonymous dimension.
                        Some(Value::DimParam(p)) if p != "?" => Dim::Open(p.clone()),
                        _ => Dim::Open(String::new()),
                    })
                    .collect()
            }),
        ),
        None => (0, None),
    }
}

pub(super) fn show_declared(dims: &[Dim]) -> String {
    let dims: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(v) => v.to_string(),
            Dim::Open(s) if s.is_empty() => "?".into(),
            Dim::Open(s) => s.clone(),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// Inputs given to a program that declares none (a PyTorch program), each as given: its
/// dimensions (`CxHxW` of one image input, with `batch` before it), or a scalar's value;
/// float32 unless the spec names a type. The first may go without a name (`input`).
pub fn bind_undeclared(
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Vec<BoundInput>, InputError> {
    if given.is_empty() {
        return Err(InputError(
            "a PyTorch program declares no input shapes: give each input with --input              NAME=DIMS (NAME=int64:VALUE for a number), or CxHxW for one image input"
                .into(),
        ));
    }
    let mut bound: Vec<BoundInput> = Vec::with_capacity(given.len());
    for (k, spec) in given.iter().enumerate() {
        let name = match (&spec.name, k) {
            (Some(n), _) => n.clone(),
            (None, 0) => "input".to_string(),
            (None, _) => {
                return Err(InputError(
                    "more than one input given without a name: name them (NAME=DIMS)".into(),
                ))
            }
        };
        if bound.iter().any(|b| b.name == name) {
            return Err(InputError(format!("input {name} is given twice")));
        }
        // With nothing declared, one number is a scalar's value where a type says what it is
        // (`sr=int64:16000`, `scale=float32:0.5`) and a 1-D length without one (`x=512`).
        let number = spec.elem.is_some() && spec.values.is_none();
        let (shape, values) = match (&spec.image, &spec.dims, spec.value, &spec.values) {
            (Some(i), _, _, _) => (
                vec![batch.unwrap_or(1), i.channels, i.height, i.width],
                None,
            ),
            (_, _, Some(v), _) if number => (Vec::new(), Some(vec![v])),
            (_, Some(d), _, v) => (d.clone(), v.clone()),
            (_, None, Some(v), _) => (Vec::new(), Some(vec![v])),
            _ => {
                return Err(InputError(format!(
                    "input {name} needs its dimensions (NAME=DIMS) or its value                      (NAME=TYPE:VALUE)"
                )))
            }
        };
        checked_elements(&shape).map_err(InputError)?;
        bound.push(BoundInput {
            name,
            elem: spec
                .elem
                .unwrap_or(pb::tensor_proto::DataType::Float as i32),
            shape,
            values,
        });
    }
    Ok(bound)
}

/// The model's inputs (graph inputs that are no initializer), each bound: the file's fixed
/// dimensions, the user's where given (a contradiction refused), a symbol bound once holds
/// everywhere, and an open leading dimension of an input of rank ≥ 2 is a batch of 1.
pub fn bind_inputs(
    graph: &pb::GraphProto,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Vec<BoundInput>, InputError> {
    bind(graph, given, batch).map_err(InputError)
}

fn bind(
    graph: &pb::GraphProto,
    given: &[InputSpec],
    batch: Option<usize>,
) -> Result<Vec<BoundInput>, String> {
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<&pb::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_str()))
        .collect();
    let names: Vec<&str> = inputs.iter().map(|v| v.name.as_str()).collect();
    for spec in given {
        if let Some(n) = &spec.name {
            if !names.contains(&n.as_str()) {
                return Err(format!(
                    "it has no input named {n:?} (its inputs: {})",
                    names.join(", ")
                ));
            }
        }
    }
    if batch == Some(0) {
        return Err("the batch must be at least 1".into());
    }
    for (k, spec) in given.iter().enumerate() {
        if let Some(n) = &spec.name {
            if given[..k].iter().any(|s| s.name.as_ref() == Some(n)) {
                return Err(format!("input {n} is given twice"));
            }
        }
    }
    let unnamed: Vec<&InputSpec> = given.iter().filter(|s| s.name.is_none()).collect();
    if unnamed.len() > 1 {
        return Err("more than one input given without a name: name them (NAME=DIMS)".into());
    }
    let mut symbols: HashMap<String, usize> = HashMap::new();
    let mut bound = Vec::new();
    for (k, v) in inputs.iter().enumerate() {
        if matches!(&v.r#type, Some(t) if t.value.is_none()) {
            return Err(format!(
                "input {} is not a tensor (a sequence, a map or an optional), which edgeprof \
                 does not analyse",
                v.name
            ));
        }
        let (decl_elem, decl) = declared(v);
        let spec = given
            .iter()
            .find(|s| s.name.as_deref() == Some(v.name.as_str()))
            .or_else(|| (k == 0).then(|| unnamed.first().copied()).flatten());
        let elem = spec.and_then(|s| s.elem).unwrap_or(if decl_elem == 0 {
            pb::tensor_proto::DataType::Float as i32
        } else {
            decl_elem
        });
        if decl_elem != 0 && elem != decl_elem {
            return Err(format!(
                "input {} is {} in the file, not {}",
                v.name,
                elem_type_name(decl_elem),
                elem_type_name(elem)
            ));
        }
        let mut value = None;
        let dims: Vec<usize> = match (spec, &decl) {
            (Some(s), Some(d)) if d.is_empty() && s.value.is_some() => {
                value = s.value.map(|x| vec![x]);
                Vec::new()
            }
            (
                Some(InputSpec {
                    values: Some(v),
                    dims: Some(g),
                    ..
                }),
                _,
            ) => {
                value = Some(v.clone());
                g.clone()
            }
            (Some(s), _) if s.value.is_some() && s.dims.is_none() => {
                return Err(format!(
                    "input {}: {} is a value, but the input is not a scalar (give its \
                     dimensions)",
                    v.name,
                    s.value.unwrap_or_default()
                ))
            }
            (
                Some(InputSpec {
                    image: Some(img), ..
                }),
                d,
            ) => {
                let rank = d.as_ref().map_or(4, Vec::len);
                if rank != 4 {
                    return Err(format!(
                        "input {} is not an image batch (N, C, H, W) but {}: give it as {}=DIMS",
                        v.name,
                        d.as_deref()
                            .map_or_else(|| "undeclared".into(), show_declared),
                        v.name
                    ));
                }
                let n = batch.map(Ok).unwrap_or_else(|| match d.as_deref() {
                    Some([Dim::Fixed(n), ..]) => Ok(*n),
                    _ => Ok::<usize, String>(1),
                })?;
                vec![n, img.channels, img.height, img.width]
            }
            (Some(InputSpec { dims: Some(g), .. }), _) => {
                if let (Some(b), Some(&first)) = (batch, g.first()) {
                    if g.len() >= 2 && first != b {
                        return Err(format!(
                            "--batch {b} contradicts input {}'s first dimension {first}",
                            v.name
                        ));
                    }
                }
                g.clone()
            }
            (_, Some(d)) => {
                let mut out = Vec::with_capacity(d.len());
                for (i, dim) in d.iter().enumerate() {
                    out.push(match dim {
                        Dim::Fixed(n) if i == 0 && batch.is_some() && d.len() >= 2 => {
                            batch.unwrap_or(*n)
                        }
                        Dim::Fixed(n) => *n,
                        Dim::Open(s) if !s.is_empty() && symbols.contains_key(s) => symbols[s],
                        Dim::Open(_) if i == 0 && d.len() >= 2 => batch.unwrap_or(1),
                        Dim::Open(_) => {
                            return Err(format!(
                                "input {} has open dimensions ({}): give them with --input \
                                 {}=DIMS",
                                v.name,
                                show_declared(d),
                                v.name
                            ))
                        }
                    });
                }
                out
            }
            (_, None) => {
                return Err(format!(
                    "input {} declares no shape: give it with --input {}=DIMS",
                    v.name, v.name
                ))
            }
        };
        if let Some(d) = &decl {
            if d.len() != dims.len() {
                return Err(format!(
                    "input {} has {} dimensions in the file ({}), not {} ({})",
                    v.name,
                    d.len(),
                    show_declared(d),
                    dims.len(),
                    show_shape(&dims)
                ));
            }
            for (i, (dim, &n)) in d.iter().zip(&dims).enumerate() {
                match dim {
                    Dim::Fixed(f) if *f != n => {
                        return Err(format!(
                            "input {} fixes dimension {i} at {f} in the file; {} contradicts \
                             it",
                            v.name,
                            show_shape(&dims)
                        ))
                    }
                    Dim::Open(s) if !s.is_empty() => match symbols.get(s) {
                        Some(&prev) if prev != n => {
                            return Err(format!(
                                "dimension {s} is {prev} in one input and {n} in input {}",
                                v.name
                            ))
                        }
                        _ => {
                            symbols.insert(s.clone(), n);
                        }
                    },
                    _ => {}
                }
            }
        }
        checked_elements(&dims).map_err(|e| format!("input {}: {e}", v.name))?;
        if let (Some(v2), true) = (&value, dims.is_empty()) {
            check_scalar(&v.name, elem, v2.first().copied().unwrap_or_default())?;
        }
        if let Some(v2) = &value {
            if v2.len() as u64 != checked_elements(&dims)? {
                return Err(format!(
                    "input {} has {} values for its shape {}",
                    v.name,
                    v2.len(),
                    show_shape(&dims)
                ));
            }
        }
        bound.push(BoundInput {
            name: v.name.clone(),
            elem,
            shape: dims,
            values: value,
        });
    }
    Ok(bound)
}

/// A scalar input's value fits its element type: a whole number in range for an integer, 0 or
/// 1 for a bool.
fn check_scalar(name: &str, elem: i32, value: f64) -> Result<(), String> {
    use pb::tensor_proto::DataType as D;
    let (lo, hi) = match D::try_from(elem) {
        Ok(D::Bool) => (0.0, 1.0),
        Ok(D::Int8) => (-128.0, 127.0),
        Ok(D::Uint8) => (0.0, 255.0),
        Ok(D::Int16) => (-32768.0, 32767.0),
        Ok(D::Uint16) => (0.0, 65535.0),
        Ok(D::Int32) => (-2147483648.0, 2147483647.0),
        Ok(D::Uint32) => (0.0, 4294967295.0),
        // Exactly representable integers only.
        Ok(D::Int64) => (-9007199254740992.0, 9007199254740992.0),
        Ok(D::Uint64) => (0.0, 9007199254740992.0),
        _ => return Ok(()),
    };
    if value.fract() != 0.0 || value < lo || value > hi {
        return Err(format!(
            "input {name} is {}: {value} is not one of its values",
            elem_type_name(elem)
        ));
    }
    Ok(())
}
