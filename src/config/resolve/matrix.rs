//! The run matrix's axes, and the ONNX files bound at the inputs they will run at.

use super::*;

impl Resolver<'_> {
    pub(in crate::config) fn matrix(&self, raw: RawMatrix) -> Result<Matrix, ConfigError> {
        let engines = self.axis(
            "matrix.engines",
            &raw.engines,
            vec![DEFAULT_ENGINE.to_string()],
            Self::engine,
        )?;
        let models = self.axis(
            "matrix.models",
            &raw.models,
            ["shufflenet_v2_x0_5", "mobilenet_v2", "resnet34", "resnet50"]
                .map(|m| ModelRef::Zoo(m.to_string()))
                .to_vec(),
            Self::model,
        )?;
        let (inputs, named_inputs) = self.inputs(&raw.inputs)?;
        let inputs_given = raw
            .inputs
            .as_ref()
            .is_some_and(|l| l.get_ref().iter().any(|v| !v.get_ref().contains('=')));
        let batch = self.axis("matrix.batch", &raw.batch, vec![1], |r, k, v| {
            r.int_in(k, v, BATCH_RANGE.0 as i64, BATCH_RANGE.1 as i64)
        })?;
        let threads = self.axis("matrix.threads", &raw.threads, vec![0], |r, k, v| {
            r.int_in(k, v, THREADS_RANGE.0 as i64, THREADS_RANGE.1 as i64)
        })?;
        let devices = self.axis(
            "matrix.devices",
            &raw.devices,
            vec![Device::Cpu],
            Self::device,
        )?;
        let precision = self.axis(
            "matrix.precision",
            &raw.precision,
            vec![crate::collect::kernels::Precision::Fp32],
            Self::precision,
        )?;
        let cores = self.axis("matrix.cores", &raw.cores, vec![None], Self::core_list)?;
        let classes = match &raw.classes {
            Some(v) => self.int_in("matrix.classes", v, 1, 1_000_000)?,
            None => 1000,
        };
        let mut exclude = Vec::new();
        for (i, spanned_rule) in raw.exclude.iter().flatten().enumerate() {
            let rule = spanned_rule.get_ref();
            let key = |field: &str| format!("matrix.exclude[{i}].{field}");
            let parsed = Exclude {
                engine: rule
                    .engine
                    .as_ref()
                    .map(|v| self.engine(&key("engine"), v))
                    .transpose()?,
                model: rule
                    .model
                    .as_ref()
                    .map(|v| self.model(&key("model"), v))
                    .transpose()?,
                input: rule
                    .input
                    .as_ref()
                    .map(|v| self.input(&key("input"), v))
                    .transpose()?,
                batch: rule
                    .batch
                    .as_ref()
                    .map(|v| self.int_in(&key("batch"), v, 1, zoo::MAX_BATCH as i64))
                    .transpose()?,
                threads: rule
                    .threads
                    .as_ref()
                    .map(|v| self.int_in(&key("threads"), v, 0, 1024))
                    .transpose()?,
                device: rule
                    .device
                    .as_ref()
                    .map(|v| self.device(&key("device"), v))
                    .transpose()?,
                precision: rule
                    .precision
                    .as_ref()
                    .map(|v| self.precision(&key("precision"), v))
                    .transpose()?,
            };
            if parsed == Exclude::default() {
                return Err(self.error(
                    &format!("matrix.exclude[{i}]"),
                    Some(spanned_rule.span().start..spanned_rule.span().start),
                    "an exclude rule must name at least one of engine, model, input, batch, threads, device, precision".to_string(),
                ));
            }
            exclude.push(parsed);
        }
        // A `command` program makes of a model name what it will: only the engines that read
        // the file bind it.
        let (own_inputs, named_for) = if engines.iter().all(|e| e == "command") {
            Default::default()
        } else {
            self.file_inputs(&raw, &models, (&inputs, &named_inputs), &batch, &exclude)?
        };
        Ok(Matrix {
            engines,
            models,
            inputs,
            inputs_given,
            own_inputs,
            named_inputs,
            named_for,
            batch,
            threads,
            devices,
            precision,
            cores,
            classes,
            exclude,
            nodes: Vec::new(),
        })
    }

    /// `matrix.inputs`: image shapes (`CxHxW`; the default when there are none) and sets of an
    /// ONNX file's inputs by name (`input=1x512 state=2x1x128 sr=int64:16000`), each entry with
    /// `=` a set; a value from a file (`x=@x.npy`) is found from the config's folder.
    fn inputs(
        &self,
        list: &Option<Spanned<Vec<Spanned<String>>>>,
    ) -> Result<(Vec<InputShape>, Vec<String>), ConfigError> {
        let mut images = Vec::new();
        let mut named = Vec::new();
        // Where each image shape and each set was written, to name both places of a repeat.
        let mut image_at: Vec<(usize, InputShape)> = Vec::new();
        let mut named_at: Vec<usize> = Vec::new();
        for (i, v) in self
            .non_empty("matrix.inputs", list)?
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let key = format!("matrix.inputs[{i}]");
            if !v.get_ref().contains('=') {
                let shape = self.input(&key, v)?;
                if let Some(j) = image_at.iter().position(|&(_, s)| s == shape) {
                    let first = image_at[j].0;
                    return Err(self.at(
                        &key,
                        v,
                        format!("is the same as matrix.inputs[{first}]: give each value once"),
                    ));
                }
                image_at.push((i, shape));
                images.push(shape);
                continue;
            }
            // `MODEL.onnx: NAME=SPEC …` gives the set to that model only.
            let (model, set) = match v.get_ref().split_once(':') {
                Some((m, rest)) if m.trim().ends_with(".onnx") => {
                    let path = self.base.join(m.trim());
                    let path = std::fs::canonicalize(&path).map_err(|_| {
                        self.at(&key, v, format!("no ONNX file at {}", path.display()))
                    })?;
                    (Some(path), rest)
                }
                _ => (None, v.get_ref().as_str()),
            };
            let specs: Vec<String> = set
                .split_whitespace()
                .map(|spec| match spec.split_once("=@") {
                    Some((name, file)) => {
                        format!("{name}=@{}", self.base.join(file).display())
                    }
                    None => spec.to_string(),
                })
                .collect();
            let text = specs.join(" ");
            named_specs(&text).map_err(|e| self.at(&key, v, e.0))?;
            let entry = match model {
                Some(path) => format!("{}: {text}", path.display()),
                None => text,
            };
            if let Some(j) = named.iter().position(|e| *e == entry) {
                let first = named_at[j];
                return Err(self.at(
                    &key,
                    v,
                    format!("is the same as matrix.inputs[{first}]: give each value once"),
                ));
            }
            named.push(entry);
            named_at.push(i);
        }
        if images.is_empty() {
            images.push(InputShape::default());
        }
        Ok((images, named))
    }

    /// The ONNX files among `models` bound at the inputs and batches they will run at, so that
    /// a shape a file fixes and the config contradicts is refused before anything runs. A set
    /// of inputs by name goes to the files that have every input it names; a file without one
    /// runs at the image shapes of `matrix.inputs`, or, when it gives none, at its own image
    /// shape where it fixes one (else the default). Returns the files' own shapes and sets.
    #[allow(clippy::type_complexity)]
    fn file_inputs(
        &self,
        raw: &RawMatrix,
        models: &[ModelRef],
        (inputs, named): (&[InputShape], &[String]),
        batch: &[usize],
        exclude: &[Exclude],
    ) -> Result<
        (
            std::collections::BTreeMap<PathBuf, InputShape>,
            std::collections::BTreeMap<PathBuf, Vec<String>>,
        ),
        ConfigError,
    > {
        use crate::models::onnx_graph::{
            bind_file_inputs, bind_undeclared, input_names, InputSpec,
        };
        let mut own = std::collections::BTreeMap::new();
        let mut named_for: std::collections::BTreeMap<PathBuf, Vec<String>> = Default::default();
        let given = raw.inputs.as_ref().map(|l| l.get_ref());
        // Each entry's place in `matrix.inputs`, images and sets apart.
        let places = |by_name: bool| -> Vec<usize> {
            given
                .map(|list| {
                    (0..list.len())
                        .filter(|&k| list[k].get_ref().contains('=') == by_name)
                        .collect()
                })
                .unwrap_or_default()
        };
        let images_given = given.is_some_and(|l| l.iter().any(|v| !v.get_ref().contains('=')));
        // Each set: its model (when it names one), its text without it, its inputs, its place.
        let sets: Vec<(Option<PathBuf>, String, Vec<InputSpec>, usize)> = named
            .iter()
            .zip(places(true))
            .map(|(text, k)| {
                let (model, set) = split_named(text);
                let specs = named_specs(&set).unwrap_or_default();
                (model, set, specs, k)
            })
            .collect();
        let mut used = vec![false; sets.len()];
        // Each file's inputs to bind, by the place of its model.
        let mut planned = Vec::new();
        // Said at the entry of `matrix.inputs` at `k`, else at model `i`.
        let located = |k: Option<usize>, i: usize, message: String| {
            let at = match (k, given, raw.models.as_ref()) {
                (Some(k), Some(list), _) => Some((format!("matrix.inputs[{k}]"), &list[k])),
                (None, _, Some(list)) => list
                    .get_ref()
                    .get(i)
                    .map(|v| (format!("matrix.models[{i}]"), v)),
                _ => None,
            };
            match at {
                Some((key, v)) => self.at(&key, v, message),
                None => self.error("matrix.models", None, message),
            }
        };
        for (i, model) in models.iter().enumerate() {
            let ModelRef::Onnx(path) = model else {
                continue;
            };
            let names = if sets.is_empty() {
                Vec::new()
            } else {
                input_names(path).map_err(|e| located(None, i, e.to_string()))?
            };
            let mut entries: Vec<(Vec<InputSpec>, Option<usize>, Option<&str>)> = Vec::new();
            for (s, (model, set, specs, k)) in sets.iter().enumerate() {
                let fits = specs
                    .iter()
                    .all(|spec| spec.name.as_ref().is_some_and(|n| names.contains(n)));
                match model {
                    Some(m) if m != path => continue,
                    Some(_) if !fits => {
                        return Err(located(
                            Some(*k),
                            i,
                            format!(
                                "{} has inputs {}, not all of these",
                                path.display(),
                                names.join(", ")
                            ),
                        ))
                    }
                    _ if !fits => continue,
                    _ => {}
                }
                used[s] = true;
                entries.push((specs.clone(), Some(*k), Some(set.as_str())));
                named_for.entry(path.clone()).or_default().push(set.clone());
            }
            if entries.is_empty() && images_given {
                entries = inputs
                    .iter()
                    .zip(places(false))
                    .map(|(&shape, k)| (vec![InputSpec::image(shape)], Some(k), None))
                    .collect();
            } else if entries.is_empty() {
                // Its own image shape where it fixes one, else the default.
                let fixed = bind_file_inputs(path, &[], None).ok().and_then(|bound| {
                    match bound.first().map(|b| &b.shape[..]) {
                        Some(&[_, c, h, w]) => Some(InputShape {
                            channels: c,
                            height: h,
                            width: w,
                        }),
                        _ => None,
                    }
                });
                if let Some(shape) = fixed {
                    own.insert(path.clone(), shape);
                }
                entries.push((
                    vec![InputSpec::image(fixed.unwrap_or_default())],
                    None,
                    None,
                ));
            }
            planned.push((i, path, entries));
        }
        // A PyTorch program declares no inputs to match a set against: it takes the sets given
        // to it by name, and the sets no ONNX file took; else the image shapes.
        let taken_by_files = used.clone();
        for (i, model) in models.iter().enumerate() {
            let ModelRef::Torch(path) = model else {
                continue;
            };
            for (s, (model, set, specs, k)) in sets.iter().enumerate() {
                let mine = match model {
                    Some(m) => m == path,
                    None => !taken_by_files[s],
                };
                if !mine {
                    continue;
                }
                for &b in batch {
                    if let Err(why) = bind_undeclared(specs, named_batch(Some(set.as_str()), b)) {
                        return Err(located(Some(*k), i, format!("{}: {why}", path.display())));
                    }
                }
                used[s] = true;
                named_for.entry(path.clone()).or_default().push(set.clone());
            }
        }
        if let Some(s) = used.iter().position(|u| !u) {
            let (model, _, specs, k) = &sets[s];
            let names: Vec<&str> = specs.iter().filter_map(|s| s.name.as_deref()).collect();
            return Err(located(
                Some(*k),
                0,
                match model {
                    Some(m) => format!("{} is not among matrix.models", m.display()),
                    None => format!(
                        "no ONNX file among matrix.models has inputs named {}",
                        names.join(", ")
                    ),
                },
            ));
        }
        for (i, path, entries) in planned {
            for (specs, k, set) in entries {
                for (j, &b) in batch.iter().enumerate() {
                    // A condition an exclude rule leaves out is not bound.
                    let image = specs.first().and_then(|s| s.image);
                    let excluded = exclude.iter().any(|r| {
                        r.model.as_ref() == Some(&models[i])
                            && r.engine.is_none()
                            && r.threads.is_none()
                            && r.device.is_none()
                            && r.batch.is_none_or(|rb| rb == b)
                            && r.input.is_none_or(|ri| set.is_none() && Some(ri) == image)
                    });
                    if excluded {
                        continue;
                    }
                    let Err(why) = bind_file_inputs(path, &specs, named_batch(set, b)) else {
                        continue;
                    };
                    // A batch the input itself allows is the batch's fault.
                    let by_batch =
                        b != 1 && bind_file_inputs(path, &specs, named_batch(set, 1)).is_ok();
                    let hint = if set.is_none() && !by_batch {
                        own_shape_hint(path)
                    } else {
                        String::new()
                    };
                    return Err(match (by_batch, raw.batch.as_ref()) {
                        (true, Some(list)) => self.at(
                            &format!("matrix.batch[{j}]"),
                            &list.get_ref()[j],
                            format!("{why}{hint}"),
                        ),
                        _ => located(k, i, format!("at batch {b}: {why}{hint}")),
                    });
                }
            }
        }
        Ok((own, named_for))
    }
}

/// How to run a file that fixes its shape at that shape: its inputs by name, given to it, or an
/// exclude rule (empty when its shape is open).
fn own_shape_hint(path: &Path) -> String {
    let Ok(bound) = crate::models::onnx_graph::bind_file_inputs(path, &[], None) else {
        return String::new();
    };
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let specs: Vec<String> = bound
        .iter()
        .map(|b| {
            let dims: Vec<String> = b.shape.iter().map(usize::to_string).collect();
            format!("{}={}", b.name, dims.join("x"))
        })
        .collect();
    format!(
        " (run it at its own shape with \"{file}: {}\" in matrix.inputs, or leave it out with \
         [[matrix.exclude]] model = \"{file}\")",
        specs.join(" ")
    )
}
