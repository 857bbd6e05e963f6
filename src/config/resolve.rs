//! Resolution: the user layer checked value by value and completed with the defaults into a
//! [`Config`]; each error names the file, the line, the key path and what is accepted.

use super::raw::*;
use super::*;

mod matrix;

/// Turns spans into located errors while the user layer is resolved.
pub(super) struct Resolver<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
    /// Directory of the config file: relative ONNX paths are resolved against it.
    pub(super) base: &'a Path,
}

impl Resolver<'_> {
    pub(super) fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    pub(super) fn error(
        &self,
        key: &str,
        span: Option<Range<usize>>,
        message: String,
    ) -> ConfigError {
        let value = span
            .as_ref()
            .and_then(|s| self.text.get(s.clone()))
            .map(|v| v.trim().to_string());
        ConfigError {
            file: self.file.to_string(),
            line: span.map(|s| self.line_of(s.start)).unwrap_or(1),
            key: key.to_string(),
            value: value.filter(|v| !v.is_empty()),
            message,
        }
    }

    pub(super) fn at<T>(&self, key: &str, v: &Spanned<T>, message: String) -> ConfigError {
        self.error(key, Some(v.span()), message)
    }

    pub(super) fn int_in(
        &self,
        key: &str,
        v: &Spanned<i64>,
        min: i64,
        max: i64,
    ) -> Result<usize, ConfigError> {
        let n = *v.get_ref();
        if n < min || n > max {
            return Err(self.at(
                key,
                v,
                format!("must be a whole number from {min} to {max}"),
            ));
        }
        usize::try_from(n).map_err(|_| self.at(key, v, format!("must be from {min} to {max}")))
    }

    pub(super) fn float_in(
        &self,
        key: &str,
        v: &Spanned<f64>,
        min: f64,
        max: f64,
    ) -> Result<f64, ConfigError> {
        let x = *v.get_ref();
        if !(min..=max).contains(&x) {
            return Err(self.at(key, v, format!("must be a number from {min} to {max}")));
        }
        Ok(x)
    }

    pub(super) fn non_empty<'v, T>(
        &self,
        key: &str,
        list: &'v Option<Spanned<Vec<Spanned<T>>>>,
    ) -> Result<Option<&'v [Spanned<T>]>, ConfigError> {
        match list {
            Some(items) if items.get_ref().is_empty() => Err(self.at(
                key,
                items,
                "must list at least one value (leave the key out for the default)".to_string(),
            )),
            Some(items) => Ok(Some(items.get_ref())),
            None => Ok(None),
        }
    }

    pub(super) fn engine(&self, key: &str, v: &Spanned<String>) -> Result<String, ConfigError> {
        let name = v.get_ref();
        if KNOWN_ENGINES.contains(&name.as_str()) {
            Ok(name.clone())
        } else {
            Err(self.at(
                key,
                v,
                format!(
                    "unknown engine; known engines: {}",
                    KNOWN_ENGINES.join(", ")
                ),
            ))
        }
    }

    pub(super) fn model(&self, key: &str, v: &Spanned<String>) -> Result<ModelRef, ConfigError> {
        let name = v.get_ref();
        if zoo::find(name).is_some() {
            return Ok(ModelRef::Zoo(name.clone()));
        }
        if name.ends_with(".onnx") {
            let path = self.base.join(name);
            return if path.is_file() {
                // One spelling of the file however it was named (`../m.onnx`, a symlink).
                Ok(ModelRef::Onnx(std::fs::canonicalize(&path).unwrap_or(path)))
            } else {
                Err(self.at(key, v, format!("no ONNX file at {}", path.display())))
            };
        }
        if is_torch_program(name) {
            let path = self.base.join(name);
            return if path.is_file() {
                Ok(ModelRef::Torch(
                    std::fs::canonicalize(&path).unwrap_or(path),
                ))
            } else {
                Err(self.at(key, v, format!("no PyTorch program at {}", path.display())))
            };
        }
        if name.to_ascii_lowercase().ends_with(".tflite") {
            let path = self.base.join(name);
            return if path.is_file() {
                Ok(ModelRef::Tflite(
                    std::fs::canonicalize(&path).unwrap_or(path),
                ))
            } else {
                Err(self.at(
                    key,
                    v,
                    format!("no TensorFlow Lite file at {}", path.display()),
                ))
            };
        }
        Err(self.at(
            key,
            v,
            format!(
                "neither a zoo model ({}) nor a path ending in .onnx or .tflite{}",
                zoo::zoo_names().join(", "),
                crate::text::did_you_mean(v.get_ref(), zoo::zoo_names())
            ),
        ))
    }

    pub(super) fn input(&self, key: &str, v: &Spanned<String>) -> Result<InputShape, ConfigError> {
        check_input(v.get_ref()).map_err(|why| self.at(key, v, why.0))
    }

    /// `all` (None) or a CPU list such as `0-3,6`.
    pub(super) fn core_list(
        &self,
        key: &str,
        v: &Spanned<String>,
    ) -> Result<Option<Vec<usize>>, ConfigError> {
        let text = v.get_ref().trim();
        if text == "all" {
            return Ok(None);
        }
        let cpus = crate::collect::telemetry::cpu::parse_cpu_ids(text);
        if cpus.is_empty() || !text.chars().all(|c| c.is_ascii_digit() || ",-".contains(c)) {
            return Err(self.at(
                key,
                v,
                "must be \"all\" or a CPU list such as \"0-3\" or \"4,6\"".to_string(),
            ));
        }
        Ok(Some(cpus))
    }

    /// A core set the tuner tries, written exactly: `all`, `big`, `little`, `one`, `clusterN`
    /// or a CPU list (`0-3,6`); which CPUs it names is found on the machine that tunes.
    pub(super) fn core_set_name(
        &self,
        key: &str,
        v: &Spanned<String>,
    ) -> Result<String, ConfigError> {
        let text = v.get_ref();
        let named = ["all", "big", "little", "one"].contains(&text.as_str())
            || text
                .strip_prefix("cluster")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let cpu_list = !text.is_empty()
            && text.chars().all(|c| c.is_ascii_digit() || ",-".contains(c))
            && !crate::collect::telemetry::cpu::parse_cpu_ids(text).is_empty();
        if named || cpu_list {
            Ok(text.clone())
        } else {
            Err(self.at(
                key,
                v,
                "must be exactly all, big, little, one, clusterN or a CPU list such as \"0-3\" \
                 (no spaces)"
                    .to_string(),
            ))
        }
    }

    pub(super) fn device(&self, key: &str, v: &Spanned<String>) -> Result<Device, ConfigError> {
        v.get_ref()
            .parse()
            .map_err(|_| self.at(key, v, "must be \"cpu\" or \"gpu:N\"".to_string()))
    }

    /// A precision a model can run in: fp32, fp16, bf16 or int8.
    pub(super) fn precision(
        &self,
        key: &str,
        v: &Spanned<String>,
    ) -> Result<crate::collect::kernels::Precision, ConfigError> {
        crate::collect::kernels::Precision::of_models(v.get_ref()).ok_or_else(|| {
            self.at(
                key,
                v,
                "must be \"fp32\", \"fp16\", \"bf16\" or \"int8\"".to_string(),
            )
        })
    }

    /// Resolves a list axis: each element through `f`, or the default when the key is absent.
    /// Two elements that resolve to the same value (`"0-1"` and `"0,1"`, `m.onnx` and
    /// `./m.onnx`) are refused: each would make the same conditions again.
    pub(super) fn axis<T, U: PartialEq>(
        &self,
        key: &str,
        list: &Option<Spanned<Vec<Spanned<T>>>>,
        default: Vec<U>,
        f: impl Fn(&Self, &str, &Spanned<T>) -> Result<U, ConfigError>,
    ) -> Result<Vec<U>, ConfigError> {
        let Some(items) = self.non_empty(key, list)? else {
            return Ok(default);
        };
        let mut out: Vec<U> = Vec::with_capacity(items.len());
        for (i, v) in items.iter().enumerate() {
            let value = f(self, &format!("{key}[{i}]"), v)?;
            self.once(key, &out, i, v, &value)?;
            out.push(value);
        }
        Ok(out)
    }

    /// Refuses element `i` of list `key` (written `v`, resolved to `value`) when an earlier
    /// one in `before` resolved to the same value, naming both places.
    pub(super) fn once<T, U: PartialEq>(
        &self,
        key: &str,
        before: &[U],
        i: usize,
        v: &Spanned<T>,
        value: &U,
    ) -> Result<(), ConfigError> {
        match before.iter().position(|b| b == value) {
            Some(j) => Err(self.at(
                &format!("{key}[{i}]"),
                v,
                format!("is the same as {key}[{j}]: give each value once"),
            )),
            None => Ok(()),
        }
    }

    pub(super) fn nodes(&self, raw: Vec<Spanned<RawNode>>) -> Result<Vec<Node>, ConfigError> {
        // Text that goes into an ssh command line: printable, one line.
        let printable = |key: &str, v: &Spanned<String>| -> Result<String, ConfigError> {
            let text = v.get_ref();
            if text.trim().is_empty() {
                return Err(self.at(key, v, "must not be empty".to_string()));
            }
            if text.chars().any(char::is_control) {
                return Err(self.at(key, v, "must be one line of printable text".to_string()));
            }
            Ok(text.clone())
        };
        let mut out: Vec<Node> = Vec::new();
        for (i, node) in raw.into_iter().enumerate() {
            let span = node.span();
            let node = node.into_inner();
            let at = |k: &str| format!("nodes[{i}].{k}");
            let Some(dest) = &node.destination else {
                return Err(self.error(
                    &at("destination"),
                    Some(span.start..span.start),
                    "missing: user@host, host, or a Host alias of ~/.ssh/config".to_string(),
                ));
            };
            let destination = printable(&at("destination"), dest)?;
            if destination.starts_with('-') || destination.chars().any(char::is_whitespace) {
                return Err(self.at(
                    &at("destination"),
                    dest,
                    "must be user@host, host or an alias: no spaces, and not starting with '-'"
                        .to_string(),
                ));
            }
            // A name given is used as a directory as it is; one taken from the destination
            // (an ssh URI, an IPv6 address) gets a safe directory of its own (node_name::dir_name).
            let name = match &node.name {
                Some(v) => {
                    let name = printable(&at("name"), v)?;
                    if let Some(why) = node_name::name_problem(&name) {
                        return Err(self.at(&at("name"), v, why));
                    }
                    name
                }
                None => destination.clone(),
            };
            if name == LOCAL_NODE {
                let v = node.name.as_ref().unwrap_or(dest);
                return Err(self.at(
                    &at("name"),
                    v,
                    format!("{LOCAL_NODE:?} names this machine in matrix.nodes: give the node another name"),
                ));
            }
            if let Some(other) = out.iter().find(|n| n.name == name) {
                let v = node.name.as_ref().unwrap_or(dest);
                return Err(self.at(
                    &at("name"),
                    v,
                    format!(
                        "another node is already called {:?} (give each a name)",
                        other.name
                    ),
                ));
            }
            let dir = node_name::dir_name(&name);
            if let Some(other) = out.iter().find(|n| node_name::dir_name(&n.name) == dir) {
                let v = node.name.as_ref().unwrap_or(dest);
                return Err(self.at(
                    &at("name"),
                    v,
                    format!(
                        "its results directory would be {dir:?}, as node {:?}'s is (give each a name)",
                        other.name
                    ),
                ));
            }
            let port = match &node.port {
                Some(v) => Some(self.int_in(&at("port"), v, 1, 65535)? as u16),
                None => None,
            };
            let identity = match &node.identity {
                Some(v) => {
                    let text = printable(&at("identity"), v)?;
                    Some(match (text.strip_prefix("~/"), std::env::var_os("HOME")) {
                        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
                        _ => self.base.join(&text),
                    })
                }
                None => None,
            };
            let edgeprof = match &node.edgeprof {
                Some(v) => printable(&at("edgeprof"), v)?,
                None => DEFAULT_NODE_EDGEPROF.to_string(),
            };
            let workdir = match &node.workdir {
                Some(v) => printable(&at("workdir"), v)?,
                None => DEFAULT_NODE_WORKDIR.to_string(),
            };
            let address = match &node.address {
                Some(v) => Some(printable(&at("address"), v)?),
                None => None,
            };
            let mut ssh_options = Vec::new();
            for (j, v) in node.ssh_options.iter().flatten().enumerate() {
                let key = format!("nodes[{i}].ssh_options[{j}]");
                let text = printable(&key, v)?;
                let well_formed = text.split_once('=').is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric())
                });
                if !well_formed {
                    return Err(self.at(
                        &key,
                        v,
                        "must be KEY=VALUE as ssh -o takes it (e.g. \"StrictHostKeyChecking=accept-new\")"
                            .to_string(),
                    ));
                }
                ssh_options.push(text);
            }
            out.push(Node {
                name,
                destination,
                port,
                identity,
                edgeprof,
                workdir,
                address,
                ssh_options,
            });
        }
        Ok(out)
    }

    pub(super) fn tune(&self, raw: RawTune) -> Result<Tune, ConfigError> {
        let d = Tune::default();
        let int = |key: &str, v: &Option<Spanned<i64>>, min: i64, max: i64, default: usize| {
            v.as_ref()
                .map(|v| self.int_in(&format!("tune.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        let objective = match &raw.objective {
            Some(v) => v
                .get_ref()
                .parse()
                .map_err(|e: String| self.at("tune.objective", v, e))?,
            None => d.objective,
        };
        let mut options = std::collections::BTreeMap::new();
        for (engine, table) in raw.options.unwrap_or_default() {
            if !EXTERNAL_FRAMEWORKS.contains(&engine.as_str()) {
                return Err(self.error(
                    &format!("tune.options.{engine}"),
                    None,
                    "only the external frameworks take options (tract and candle have none)"
                        .to_string(),
                ));
            }
            let mut space = tuning::OptionSpace::new();
            for (key, values) in table {
                let path = format!("tune.options.{engine}.{key}");
                if values.get_ref().is_empty() {
                    return Err(self.at(&path, &values, "must list at least one value".into()));
                }
                let mut list = Vec::new();
                for (i, value) in values.get_ref().iter().enumerate() {
                    let value = serde_json::to_value(value)
                        .map_err(|e| self.at(&path, &values, format!("cannot be read: {e}")))?;
                    // The values carry no spans of their own: the list's line is said.
                    self.once(&path, &list, i, &values, &value)?;
                    list.push(value);
                }
                space.insert(key, list);
            }
            options.insert(engine, space);
        }
        Ok(Tune {
            model: raw
                .model
                .as_ref()
                .map(|v| self.model("tune.model", v))
                .transpose()?,
            input: raw
                .input
                .as_ref()
                .map(|v| self.input("tune.input", v))
                .transpose()?,
            engines: match &raw.engines {
                Some(_) => Some(self.axis("tune.engines", &raw.engines, Vec::new(), |r, key, v| {
                    let e = r.engine(key, v)?;
                    if e == "command" {
                        return Err(r.at(
                            key,
                            v,
                            "the tuner searches edgeprof's own engines and frameworks, not a command".to_string(),
                        ));
                    }
                    Ok(e)
                })?),
                None => None,
            },
            budget: int("budget", &raw.budget, 1, 100_000, d.budget)?,
            objective,
            max_memory: raw
                .max_memory
                .as_ref()
                .map(|v| self.int_in("tune.max_memory", v, 1, i64::MAX).map(|n| n as u64))
                .transpose()?,
            threads: self.axis("tune.threads", &raw.threads, Vec::new(), |r, k, v| {
                r.int_in(k, v, 1, 1024)
            })?,
            batch: self.axis("tune.batch", &raw.batch, d.batch.clone(), |r, k, v| {
                r.int_in(k, v, 1, zoo::MAX_BATCH as i64)
            })?,
            cores: self.axis("tune.cores", &raw.cores, Vec::new(), Self::core_set_name)?,
            stall: int("stall", &raw.stall, 0, 100_000, d.stall)?,
            initial: int("initial", &raw.initial, 0, 1000, d.initial)?,
            confirm: int("confirm", &raw.confirm, 0, 100, d.confirm)?,
            seed: int("seed", &raw.seed, 0, i64::MAX, d.seed as usize)? as u64,
            options,
        })
    }

    pub(super) fn measure(&self, raw: RawMeasure) -> Result<Measure, ConfigError> {
        let int = |key: &str, v: &Option<Spanned<i64>>, min: i64, max: i64, default: usize| {
            v.as_ref()
                .map(|v| self.int_in(&format!("measure.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        let float = |key: &str, v: &Option<Spanned<f64>>, min: f64, max: f64, default: f64| {
            v.as_ref()
                .map(|v| self.float_in(&format!("measure.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        let repeats = int("repeats", &raw.repeats, 1, 1000, 5)?;
        // Room for re-measured and added repeats by default; never below `repeats`.
        let max_repeats = match &raw.max_repeats {
            Some(v) => {
                let n = self.int_in("measure.max_repeats", v, 1, 10_000)?;
                if n < repeats {
                    return Err(self.at(
                        "measure.max_repeats",
                        v,
                        format!("must be at least measure.repeats ({repeats})"),
                    ));
                }
                n
            }
            None => (4 * repeats).max(20),
        };
        // DEFAULT_PROCESSES unless there are fewer repeats; never more processes than repeats.
        let processes = match &raw.processes {
            Some(v) => {
                let n = self.int_in("measure.processes", v, 1, 1000)?;
                if n > repeats {
                    return Err(self.at(
                        "measure.processes",
                        v,
                        format!("must be at most measure.repeats ({repeats})"),
                    ));
                }
                n
            }
            None => repeats.min(DEFAULT_PROCESSES),
        };
        let calibration = match &raw.calibration {
            None => None,
            Some(v) => {
                let dir = self.base.join(v.get_ref());
                match crate::models::npy::files_in(&dir) {
                    Ok(_) => Some(std::fs::canonicalize(&dir).unwrap_or(dir)),
                    Err(why) => return Err(self.at("measure.calibration", v, why.0)),
                }
            }
        };
        Ok(Measure {
            calibration,
            target_ci: raw
                .target_ci
                .as_ref()
                .map(|v| self.float_in("measure.target_ci", v, 0.0001, 1.0))
                .transpose()?,
            max_repeats,
            rerun_disturbed: int("rerun_disturbed", &raw.rerun_disturbed, 0, 10, 0)?,
            layer_runs: int("layer_runs", &raw.layer_runs, 0, 10_000, 0)?,
            warmup: int("warmup", &raw.warmup, 0, 1_000_000, 10)?,
            warmup_seconds: float("warmup_seconds", &raw.warmup_seconds, 0.0, 3600.0, 0.0)?,
            iterations: int("iterations", &raw.iterations, 1, 10_000_000, 100)?,
            repeats,
            processes,
            min_duration_s: float("min_duration_s", &raw.min_duration_s, 0.0, 86_400.0, 0.0)?,
            timeout_s: float("timeout_s", &raw.timeout_s, 1.0, 86_400.0, 600.0)?,
            retries: int("retries", &raw.retries, 0, 100, 1)?,
            cooldown_s: float("cooldown_s", &raw.cooldown_s, 0.0, 3600.0, 0.0)?,
            sample_interval_ms: int(
                "sample_interval_ms",
                &raw.sample_interval_ms,
                10,
                60_000,
                500,
            )? as u64,
            seed: int(
                "seed",
                &raw.seed,
                0,
                i64::MAX,
                crate::models::onnx::DEFAULT_SEED as usize,
            )? as u64,
            check_outputs: raw.check_outputs.unwrap_or(true),
            outliers: match &raw.outliers {
                Some(v) => v
                    .get_ref()
                    .parse()
                    .map_err(|e: String| self.at("measure.outliers", v, e))?,
                None => crate::stats::Outliers::default(),
            },
            input_data: match &raw.input_data {
                Some(v) => v
                    .get_ref()
                    .parse()
                    .map_err(|e: String| self.at("measure.input_data", v, e))?,
                None => super::InputData::default(),
            },
        })
    }

    pub(super) fn output(&self, raw: RawOutput) -> Result<Output, ConfigError> {
        let formats = self.axis(
            "output.formats",
            &raw.formats,
            ["csv", "json", "md"].map(String::from).to_vec(),
            |r, k, v| {
                if OUTPUT_FORMATS.contains(&v.get_ref().as_str()) {
                    Ok(v.get_ref().clone())
                } else {
                    Err(r.at(
                        k,
                        v,
                        format!("unknown format; choose from {}", OUTPUT_FORMATS.join(", ")),
                    ))
                }
            },
        )?;
        let dir = match &raw.dir {
            Some(v) if v.get_ref().trim().is_empty() => {
                return Err(self.at("output.dir", v, "must not be empty".to_string()))
            }
            Some(v) => PathBuf::from(v.get_ref()),
            None => PathBuf::from("results"),
        };
        let gpu_profiler = match &raw.gpu_profiler {
            None => GpuProfiler::Auto,
            Some(v) => match v.get_ref().as_str() {
                "auto" => GpuProfiler::Auto,
                "ncu" => GpuProfiler::Ncu,
                "nvprof" => GpuProfiler::Nvprof,
                _ => {
                    return Err(self.at(
                        "output.gpu_profiler",
                        v,
                        "must be \"auto\", \"ncu\" or \"nvprof\"".to_string(),
                    ))
                }
            },
        };
        Ok(Output {
            dir,
            formats,
            roofline: raw.roofline.unwrap_or(false),
            gpu_profiler,
        })
    }
}

impl Resolver<'_> {
    pub(super) fn command(
        &self,
        raw: Option<Spanned<RawCommand>>,
        engines: &[String],
        raw_engines: &Option<Spanned<Vec<Spanned<String>>>>,
    ) -> Result<Option<CommandEngine>, ConfigError> {
        let Some(raw) = raw else {
            if let Some(i) = engines.iter().position(|e| e == "command") {
                let span = raw_engines
                    .as_ref()
                    .and_then(|list| list.get_ref().get(i))
                    .map(|v| v.span());
                return Err(self.error(
                    &format!("matrix.engines[{i}]"),
                    span,
                    "the command engine needs a [command] table naming the program to run"
                        .to_string(),
                ));
            }
            return Ok(None);
        };
        let span = raw.span();
        let raw = raw.into_inner();
        let Some(program) = raw.program else {
            return Err(self.error(
                "command.program",
                Some(span.start..span.start),
                "missing: name the program that speaks the worker protocol".to_string(),
            ));
        };
        let name = program.get_ref();
        let path = if name.contains('/') {
            let path = self.base.join(name);
            if !path.is_file() {
                return Err(self.at(
                    "command.program",
                    &program,
                    format!("no program at {}", path.display()),
                ));
            }
            path
        } else {
            crate::collect::find_on_path(name).ok_or_else(|| {
                self.at(
                    "command.program",
                    &program,
                    "no program of that name on PATH".to_string(),
                )
            })?
        };
        Ok(Some(CommandEngine {
            program: path,
            args: raw.args.unwrap_or_default(),
        }))
    }
}

impl Resolver<'_> {
    pub(super) fn frameworks(
        &self,
        raw: Option<std::collections::BTreeMap<String, Spanned<RawFramework>>>,
    ) -> Result<std::collections::BTreeMap<String, FrameworkSettings>, ConfigError> {
        let mut out = std::collections::BTreeMap::new();
        for (name, table) in raw.unwrap_or_default() {
            let key = format!("frameworks.{name}");
            let span = table.span();
            if !EXTERNAL_FRAMEWORKS.contains(&name.as_str()) {
                return Err(self.error(
                    &key,
                    Some(span.start..span.start),
                    format!(
                        "not an external framework; the ones set up here are {}",
                        EXTERNAL_FRAMEWORKS.join(", ")
                    ),
                ));
            }
            let table = table.into_inner();
            let python = match &table.python {
                None => None,
                Some(v) => {
                    let text = v.get_ref();
                    let path = if text.contains('/') {
                        let path = self.base.join(text);
                        if !path.exists() {
                            return Err(self.at(
                                &format!("{key}.python"),
                                v,
                                format!("no interpreter at {}", path.display()),
                            ));
                        }
                        path
                    } else {
                        crate::collect::find_on_path(text).ok_or_else(|| {
                            self.at(
                                &format!("{key}.python"),
                                v,
                                "no interpreter of that name on PATH".to_string(),
                            )
                        })?
                    };
                    Some(path)
                }
            };
            let options = match table.options {
                None => serde_json::Map::new(),
                Some(t) => match serde_json::to_value(t) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => {
                        return Err(self.error(
                            &format!("{key}.options"),
                            Some(span),
                            "options must be a table of plain values".to_string(),
                        ))
                    }
                },
            };
            out.insert(name, FrameworkSettings { python, options });
        }
        Ok(out)
    }
}
