//! `[train]`: a distributed-training study, the other task a config can hold besides the
//! inference matrix. `edgeprof run` carries it out (and `edgeprof train --config` starts from
//! it); the terminal UI's Training pane edits it.

use super::resolve::Resolver;
use super::{ConfigError, Node, LOCAL_NODE};
use serde::Deserialize;
use std::path::PathBuf;
use toml::Spanned;

/// The frameworks a study can train with.
pub const FRAMEWORKS: [&str; 2] = ["pytorch", "tensorflow"];

/// A distributed-training study (`[train]`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Train {
    /// `pytorch` (DDP over gloo, torchrun) or `tensorflow` (MultiWorkerMirroredStrategy).
    pub framework: String,
    /// `cnn`, or a torchvision / Keras applications model name.
    pub model: String,
    pub epochs: usize,
    /// Images per rank per step.
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
    /// A CIFAR-10 directory in the standard binary format, at this path on every member (None:
    /// the synthetic set).
    pub data: Option<PathBuf>,
    /// Training images of the synthetic set (and a fifth as many test images).
    pub synthetic: usize,
    /// Cluster sizes (empty: 1, 2, 4, … up to the members, and all of them).
    pub sizes: Vec<usize>,
    /// The members in rank order: `local` or names of `[[nodes]]` (empty: every node, or this
    /// machine when there are none).
    pub nodes: Vec<String>,
    /// The first port: rank r listens on port + r.
    pub port: u16,
    /// Threads per rank (None: a member's cores, shared among the ranks on this machine).
    pub threads: Option<usize>,
    /// The Python with the framework on every member (None: where `edgeprof env setup` put it).
    pub python: Option<PathBuf>,
    /// This machine's address as the boards reach it.
    pub local_address: String,
    /// Seconds one cluster size may take.
    pub timeout_s: u64,
}

impl Default for Train {
    fn default() -> Self {
        Train {
            framework: "pytorch".into(),
            model: "cnn".into(),
            epochs: 2,
            batch: 32,
            lr: 0.01,
            seed: 1,
            data: None,
            synthetic: 2000,
            sizes: Vec::new(),
            nodes: Vec::new(),
            port: 29500,
            threads: None,
            python: None,
            local_address: "127.0.0.1".into(),
            timeout_s: 3600,
        }
    }
}

impl Train {
    /// The members' names in rank order: the section's, else every `[[nodes]]`, else this
    /// machine.
    pub fn members(&self, nodes: &[Node]) -> Vec<String> {
        if !self.nodes.is_empty() {
            self.nodes.clone()
        } else if !nodes.is_empty() {
            nodes.iter().map(|n| n.name.clone()).collect()
        } else {
            vec![LOCAL_NODE.to_string()]
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrain {
    framework: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    epochs: Option<Spanned<i64>>,
    batch: Option<Spanned<i64>>,
    lr: Option<Spanned<f64>>,
    seed: Option<Spanned<i64>>,
    data: Option<Spanned<String>>,
    synthetic: Option<Spanned<i64>>,
    sizes: Option<Spanned<Vec<Spanned<i64>>>>,
    nodes: Option<Spanned<Vec<Spanned<String>>>>,
    port: Option<Spanned<i64>>,
    threads: Option<Spanned<i64>>,
    python: Option<Spanned<String>>,
    local_address: Option<Spanned<String>>,
    timeout_s: Option<Spanned<i64>>,
}

impl Resolver<'_> {
    pub(super) fn train(&self, raw: RawTrain, nodes: &[Node]) -> Result<Train, ConfigError> {
        let d = Train::default();
        let int = |key: &str, v: &Option<Spanned<i64>>, min: i64, max: i64, default: usize| {
            v.as_ref()
                .map(|v| self.int_in(&format!("train.{key}"), v, min, max))
                .unwrap_or(Ok(default))
        };
        let word = |key: &str, v: &Spanned<String>| -> Result<String, ConfigError> {
            let text = v.get_ref().trim();
            let ok = !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
            if ok {
                Ok(text.to_string())
            } else {
                Err(self.at(
                    &format!("train.{key}"),
                    v,
                    "must be one word of letters, digits, '-', '_', '.' or ':'".to_string(),
                ))
            }
        };
        let framework = match &raw.framework {
            Some(v) if FRAMEWORKS.contains(&v.get_ref().as_str()) => v.get_ref().clone(),
            Some(v) => {
                return Err(self.at(
                    "train.framework",
                    v,
                    format!("must be one of {}", FRAMEWORKS.join(", ")),
                ))
            }
            None => d.framework,
        };
        let path = |v: &Spanned<String>| self.base.join(v.get_ref());
        let sizes = self.axis("train.sizes", &raw.sizes, Vec::new(), |r, k, v| {
            r.int_in(k, v, 1, 1024)
        })?;
        let mut members = Vec::new();
        for (i, v) in self
            .non_empty("train.nodes", &raw.nodes)?
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let name = v.get_ref();
            let key = format!("train.nodes[{i}]");
            if name != LOCAL_NODE && !nodes.iter().any(|n| &n.name == name) {
                let mut known = vec![LOCAL_NODE.to_string()];
                known.extend(nodes.iter().map(|n| n.name.clone()));
                return Err(self.at(
                    &key,
                    v,
                    format!("not a node: the [[nodes]] here are {}", known.join(", ")),
                ));
            }
            self.once("train.nodes", &members, i, v, name)?;
            members.push(name.clone());
        }
        let largest = sizes.iter().max().copied().unwrap_or(0);
        let named = Train {
            nodes: members.clone(),
            ..Train::default()
        }
        .members(nodes);
        // This machine alone trains as processes, as many as the largest size.
        let available = named.len();
        let processes = named == [LOCAL_NODE];
        if let (Some(v), true) = (&raw.sizes, largest > available && !processes) {
            return Err(self.at(
                "train.sizes",
                v,
                format!("a cluster of {largest} needs {largest} members; there are {available}"),
            ));
        }
        Ok(Train {
            framework,
            model: match &raw.model {
                Some(v) => word("model", v)?,
                None => d.model,
            },
            epochs: int("epochs", &raw.epochs, 1, 100_000, d.epochs)?,
            batch: int("batch", &raw.batch, 1, 1 << 20, d.batch)?,
            lr: match &raw.lr {
                Some(v) => self.float_in("train.lr", v, f64::MIN_POSITIVE, 100.0)?,
                None => d.lr,
            },
            seed: int("seed", &raw.seed, 0, i64::MAX, d.seed as usize)? as u64,
            data: raw.data.as_ref().map(path),
            synthetic: int("synthetic", &raw.synthetic, 10, 10_000_000, d.synthetic)?,
            sizes,
            nodes: members,
            port: int("port", &raw.port, 1, 65535 - 1024, usize::from(d.port))? as u16,
            threads: raw
                .threads
                .as_ref()
                .map(|v| self.int_in("train.threads", v, 1, 4096))
                .transpose()?,
            python: raw.python.as_ref().map(path),
            local_address: match &raw.local_address {
                Some(v) => match address_problem(v.get_ref()) {
                    None => v.get_ref().clone(),
                    Some(why) => return Err(self.at("train.local_address", v, why)),
                },
                None => d.local_address,
            },
            timeout_s: int("timeout_s", &raw.timeout_s, 1, 30 * 24 * 3600, 3600)? as u64,
        })
    }
}

/// `[train]` as TOML, every key written out (defaults included), as the reader reads it back.
pub(super) fn to_table(t: &Train) -> toml::Table {
    use toml::Value;
    let mut table = toml::Table::new();
    table.insert("framework".into(), Value::String(t.framework.clone()));
    table.insert("model".into(), Value::String(t.model.clone()));
    table.insert("epochs".into(), Value::Integer(t.epochs as i64));
    table.insert("batch".into(), Value::Integer(t.batch as i64));
    table.insert("lr".into(), Value::Float(t.lr));
    table.insert("seed".into(), Value::Integer(t.seed as i64));
    if let Some(data) = &t.data {
        table.insert("data".into(), Value::String(data.display().to_string()));
    }
    table.insert("synthetic".into(), Value::Integer(t.synthetic as i64));
    if !t.sizes.is_empty() {
        let sizes = t.sizes.iter().map(|&k| Value::Integer(k as i64)).collect();
        table.insert("sizes".into(), Value::Array(sizes));
    }
    if !t.nodes.is_empty() {
        let nodes = t.nodes.iter().cloned().map(Value::String).collect();
        table.insert("nodes".into(), Value::Array(nodes));
    }
    table.insert("port".into(), Value::Integer(i64::from(t.port)));
    if let Some(threads) = t.threads {
        table.insert("threads".into(), Value::Integer(threads as i64));
    }
    if let Some(python) = &t.python {
        table.insert("python".into(), Value::String(python.display().to_string()));
    }
    table.insert(
        "local_address".into(),
        Value::String(t.local_address.clone()),
    );
    table.insert("timeout_s".into(), Value::Integer(t.timeout_s as i64));
    table
}

/// Why `text` is not an address the boards can reach this machine at, if it is not: an IPv4 or
/// IPv6 address, or a host name with a domain (`desk.lan`), written exactly. A bare word
/// (`tpu`) is refused: it reads as a device or a typo, and a board resolves it, if at all,
/// by a search domain of its own.
pub fn address_problem(text: &str) -> Option<String> {
    if text.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let labels: Vec<&str> = text.split('.').collect();
    let host = text.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|l| label(l))
        && labels
            .last()
            .is_some_and(|tld| !tld.chars().all(|c| c.is_ascii_digit()));
    if host {
        None
    } else {
        Some(
            "must be this machine's IP address (e.g. 192.168.1.10) or a host name with its \
             domain (e.g. desk.lan), written exactly"
                .to_string(),
        )
    }
}
