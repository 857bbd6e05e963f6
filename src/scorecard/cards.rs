//! The curated development- and deployment-time facts about each framework: one TOML
//! file per framework under `configs/frameworks/`, compiled into the binary, every value citing
//! one of the file's sources with the date it was recorded. GitHub figures refreshed later
//! (`edgeprof frameworks refresh`) are laid over the shipped values from the data directory.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shipped files: (file name, text).
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "tract.toml",
        include_str!("../../configs/frameworks/tract.toml"),
    ),
    (
        "candle.toml",
        include_str!("../../configs/frameworks/candle.toml"),
    ),
    (
        "onnxruntime.toml",
        include_str!("../../configs/frameworks/onnxruntime.toml"),
    ),
    (
        "pytorch.toml",
        include_str!("../../configs/frameworks/pytorch.toml"),
    ),
    (
        "tensorflow.toml",
        include_str!("../../configs/frameworks/tensorflow.toml"),
    ),
    (
        "tflite.toml",
        include_str!("../../configs/frameworks/tflite.toml"),
    ),
    (
        "ncnn.toml",
        include_str!("../../configs/frameworks/ncnn.toml"),
    ),
    (
        "mnn.toml",
        include_str!("../../configs/frameworks/mnn.toml"),
    ),
    (
        "openvino.toml",
        include_str!("../../configs/frameworks/openvino.toml"),
    ),
    (
        "tensorrt.toml",
        include_str!("../../configs/frameworks/tensorrt.toml"),
    ),
];

/// One framework's facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Card {
    /// Short lower-case name; the engine name where edgeprof runs the framework.
    pub name: String,
    pub title: String,
    /// The edgeprof engine that benchmarks it (`run`, `tune`); absent when none does yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// GitHub `owner/name`.
    pub repository: String,
    pub homepage: String,
    /// How to find it on a device (`edgeprof frameworks probe`).
    pub probe: ProbeSpec,
    /// Key → where values were recorded from and when.
    pub sources: BTreeMap<String, Source>,
    pub development: Development,
    pub deployment: Deployment,
}

/// Where a framework shows itself on a device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Compiled into edgeprof (tract, candle).
    #[serde(default)]
    pub built_in: bool,
    /// The Python module whose presence means it is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_module: Option<String>,
    /// The distribution whose version is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// Its command-line tools, looked up on PATH and in `command_dirs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command_dirs: Vec<String>,
    /// Shared libraries looked up in the system's library directories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<String>,
}

/// A page or registry entry values were recorded from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub url: String,
    /// The date (YYYY-MM-DD) the values citing it were recorded.
    pub as_of: String,
}

/// The source keys a value cites: one, or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cites {
    One(String),
    Many(Vec<String>),
}

impl Cites {
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Cites::One(k) => vec![k.as_str()],
            Cites::Many(ks) => ks.iter().map(String::as_str).collect(),
        }
    }
}

/// One value with the sources it cites and an optional qualification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact<T> {
    pub value: T,
    pub source: Cites,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Development {
    pub last_release: Release,
    pub pretrained: Pretrained,
    /// Community figures from the GitHub REST API; absent until read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GitHubFigures>,
    pub api: Api,
    pub tooling: Tooling,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    pub version: String,
    /// Publication date, YYYY-MM-DD.
    pub date: String,
    pub source: Cites,
}

/// How readily trained models come for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PretrainedLevel {
    /// An official hub or model library with many ready weights.
    Hub,
    /// An official zoo of converted or curated models.
    Zoo,
    /// Models come from other frameworks through conversion.
    ViaConversion,
}

impl PretrainedLevel {
    pub fn label(self) -> &'static str {
        match self {
            PretrainedLevel::Hub => "hub",
            PretrainedLevel::Zoo => "zoo",
            PretrainedLevel::ViaConversion => "via conversion",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pretrained {
    pub level: PretrainedLevel,
    pub value: Vec<String>,
    pub source: Cites,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// GitHub's figures for the repository, as read at `read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHubFigures {
    pub stars: Option<u64>,
    pub forks: Option<u64>,
    /// Contributors with GitHub accounts (the API's contributor list, anonymous authors left
    /// out).
    pub contributors: Option<u64>,
    /// Open issues and pull requests, as GitHub counts them.
    pub open_issues: Option<u64>,
    /// When they were read (RFC 3339).
    pub read: String,
    /// The API address they were read from.
    pub source: String,
}

/// The API completeness rubric: one point per criterion (docs/frameworks.md, "API completeness").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Api {
    pub python: Fact<bool>,
    pub c_cpp: Fact<bool>,
    pub more_languages: Fact<bool>,
    pub training: Fact<bool>,
    pub custom_ops: Fact<bool>,
    pub dynamic_shapes: Fact<bool>,
    pub quantization: Fact<bool>,
    pub profiling: Fact<bool>,
}

/// The rubric's criteria: key and what earns the point.
pub const API_CRITERIA: [(&str, &str); 8] = [
    ("python", "an official Python API"),
    ("c_cpp", "an official C or C++ API for native applications"),
    (
        "more_languages",
        "official bindings in another language (Rust, Java, C#, JavaScript, Swift …)",
    ),
    (
        "training",
        "trains models (autograd and optimizers), not only inference",
    ),
    (
        "custom_ops",
        "a documented way to add custom operators or layers",
    ),
    (
        "dynamic_shapes",
        "runs inputs whose shapes change at run time",
    ),
    (
        "quantization",
        "an API to quantize models or run quantized ones",
    ),
    ("profiling", "a per-operator profiler of its own"),
];

impl Api {
    /// The criteria in rubric order with their facts.
    pub fn criteria(&self) -> [(&'static str, &Fact<bool>); 8] {
        [
            ("python", &self.python),
            ("c_cpp", &self.c_cpp),
            ("more_languages", &self.more_languages),
            ("training", &self.training),
            ("custom_ops", &self.custom_ops),
            ("dynamic_shapes", &self.dynamic_shapes),
            ("quantization", &self.quantization),
            ("profiling", &self.profiling),
        ]
    }

    /// Points earned, out of `API_CRITERIA.len()`.
    pub fn score(&self) -> usize {
        self.criteria().iter().filter(|(_, f)| f.value).count()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tooling {
    pub profiler: Fact<String>,
    pub converter: Fact<String>,
    pub visualizer: Fact<String>,
    pub quantizer: Fact<String>,
}

impl Tooling {
    pub fn tools(&self) -> [(&'static str, &Fact<String>); 4] {
        [
            ("profiler", &self.profiler),
            ("converter", &self.converter),
            ("visualizer", &self.visualizer),
            ("quantizer", &self.quantizer),
        ]
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployment {
    pub hardware: Fact<Vec<String>>,
    pub accelerators: Fact<Vec<String>>,
    pub os: Fact<Vec<String>>,
    pub bindings: Fact<Vec<String>>,
    /// How prebuilt packages come (registries, platforms).
    pub packages: Fact<Vec<String>>,
    pub tasks: Fact<Vec<String>>,
    pub formats_in: Fact<Vec<String>>,
    pub formats_out: Fact<Vec<String>>,
    pub conversion: Fact<Vec<String>>,
    pub quantization: Fact<Vec<String>>,
}

impl Deployment {
    /// Every metric with its row label.
    pub fn metrics(&self) -> [(&'static str, &Fact<Vec<String>>); 10] {
        [
            ("hardware", &self.hardware),
            ("accelerators", &self.accelerators),
            ("OS", &self.os),
            ("bindings", &self.bindings),
            ("packages", &self.packages),
            ("tasks", &self.tasks),
            ("formats in", &self.formats_in),
            ("formats out", &self.formats_out),
            ("conversion", &self.conversion),
            ("quantization", &self.quantization),
        ]
    }
}

impl Card {
    /// Parses one file's text.
    pub fn parse(file: &str, text: &str) -> crate::error::Result<Card> {
        toml::from_str(text).map_err(|e| {
            crate::error::failed!(
                "{file} is not a valid framework file: {}",
                e.to_string().trim()
            )
        })
    }

    /// Every value's path and the sources it cites, for validation and the sources list.
    pub fn citations(&self) -> Vec<(String, &Cites)> {
        let d = &self.development;
        let mut out = vec![
            (
                "development.last_release".to_string(),
                &d.last_release.source,
            ),
            ("development.pretrained".to_string(), &d.pretrained.source),
        ];
        for (key, fact) in d.api.criteria() {
            out.push((format!("development.api.{key}"), &fact.source));
        }
        for (key, fact) in d.tooling.tools() {
            out.push((format!("development.tooling.{key}"), &fact.source));
        }
        for (key, fact) in self.deployment.metrics() {
            out.push((
                format!("deployment.{}", key.to_lowercase().replace(' ', "_")),
                &fact.source,
            ));
        }
        out
    }

    /// What is wrong with the file, one sentence each; empty when it is valid.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let name = &self.name;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            out.push(format!(
                "name {name:?} must be lower-case letters, digits and '-'"
            ));
        }
        if let Some(engine) = &self.engine {
            if !crate::config::KNOWN_ENGINES.contains(&engine.as_str()) {
                out.push(format!("engine {engine:?} is not an edgeprof engine"));
            }
        }
        let parts: Vec<&str> = self.repository.split('/').collect();
        if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
            out.push(format!(
                "repository {:?} is not GitHub's owner/name",
                self.repository
            ));
        }
        if !self.homepage.starts_with("https://") {
            out.push(format!("homepage {:?} is not an https URL", self.homepage));
        }
        if self.probe.built_in == self.probe.python_module.is_some() {
            out.push(
                "probe must say either built_in = true or python_module, not both or neither"
                    .to_string(),
            );
        }
        if self.probe.python_module.is_some() != self.probe.distribution.is_some() {
            out.push("probe.python_module and probe.distribution go together".to_string());
        }
        for (key, source) in &self.sources {
            if !source.url.starts_with("https://") {
                out.push(format!(
                    "sources.{key}.url {:?} is not an https URL",
                    source.url
                ));
            }
            if !is_date(&source.as_of) {
                out.push(format!(
                    "sources.{key}.as_of {:?} is not a date (YYYY-MM-DD)",
                    source.as_of
                ));
            }
        }
        let citations = self.citations();
        for (path, cites) in &citations {
            let keys = cites.keys();
            if keys.is_empty() {
                out.push(format!("{path} cites no source"));
            }
            for key in keys {
                if !self.sources.contains_key(key) {
                    out.push(format!(
                        "{path} cites {key:?}, which is not under [sources]"
                    ));
                }
            }
        }
        for key in self.sources.keys() {
            if !citations
                .iter()
                .any(|(_, c)| c.keys().contains(&key.as_str()))
            {
                out.push(format!("sources.{key} is cited by no value"));
            }
        }
        let release = &self.development.last_release;
        if release.version.trim().is_empty() {
            out.push("development.last_release.version is empty".to_string());
        }
        if !is_date(&release.date) {
            out.push(format!(
                "development.last_release.date {:?} is not a date (YYYY-MM-DD)",
                release.date
            ));
        }
        if self.development.pretrained.value.is_empty() {
            out.push("development.pretrained lists nothing".to_string());
        }
        for (key, fact) in self.development.tooling.tools() {
            if fact.value.trim().is_empty() {
                out.push(format!(
                    "development.tooling.{key} is empty (say \"none\" when there is none)"
                ));
            }
        }
        for (key, fact) in self.deployment.metrics() {
            if fact.value.is_empty() || fact.value.iter().any(|v| v.trim().is_empty()) {
                out.push(format!("deployment {key} has an empty value"));
            }
        }
        if let Some(g) = &self.development.github {
            if time::OffsetDateTime::parse(&g.read, &time::format_description::well_known::Rfc3339)
                .is_err()
            {
                out.push(format!(
                    "development.github.read {:?} is not an RFC 3339 time",
                    g.read
                ));
            }
        }
        out
    }

    /// The GitHub REST address of the repository under `api`.
    pub fn api_url(&self, api: &str) -> String {
        format!("{}/repos/{}", api.trim_end_matches('/'), self.repository)
    }
}

/// Whether `text` is a calendar date written YYYY-MM-DD.
pub fn is_date(text: &str) -> bool {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(text, format).is_ok()
}

/// The shipped cards, checked: an error names the file and its first problem.
pub fn shipped() -> crate::error::Result<Vec<Card>> {
    SHIPPED
        .iter()
        .map(|(file, text)| {
            let card = Card::parse(file, text)?;
            if let Some(problem) = card.problems().first() {
                crate::error::bail!("{file}: {problem}");
            }
            Ok(card)
        })
        .collect()
}

/// The card called `name` (case-insensitive), or the list of names.
pub fn find<'a>(cards: &'a [Card], name: &str) -> crate::error::Result<&'a Card> {
    cards
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let names: Vec<&str> = cards.iter().map(|c| c.name.as_str()).collect();
            crate::error::Error::from(crate::error::BadInput(format!(
                "no framework called {name:?}; known: {}",
                names.join(", ")
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The acceptance check: every shipped framework has every metric, and every value cites a
    /// source with a URL and a date.
    #[test]
    fn every_shipped_framework_has_every_metric_with_a_dated_source() -> crate::error::Result<()> {
        let expected = [
            "tract",
            "candle",
            "onnxruntime",
            "pytorch",
            "tensorflow",
            "tflite",
            "ncnn",
            "mnn",
            "openvino",
            "tensorrt",
        ];
        let mut names = Vec::new();
        for (file, text) in SHIPPED {
            let card = Card::parse(file, text)?;
            assert_eq!(format!("{}.toml", card.name), *file);
            assert_eq!(card.problems(), Vec::<String>::new(), "{file}");
            // Every metric is present (the types make them required) and cites dated sources.
            let citations = card.citations();
            assert_eq!(citations.len(), 2 + 8 + 4 + 10, "{file}");
            for (path, cites) in citations {
                for key in cites.keys() {
                    let source = card
                        .sources
                        .get(key)
                        .ok_or_else(|| crate::error::failed!("{file}: {path} cites {key}"))?;
                    assert!(source.url.starts_with("https://"), "{file}: {path}");
                    assert!(is_date(&source.as_of), "{file}: {path}");
                }
            }
            // A shipped file carries no GitHub figures it did not read.
            if let Some(g) = &card.development.github {
                assert!(!g.read.is_empty() && g.source.contains(&card.repository));
            }
            if let Some(engine) = &card.engine {
                assert_eq!(engine, &card.name, "{file}");
            }
            names.push(card.name);
        }
        assert_eq!(names, expected);
        // Every framework edgeprof runs has its card (`command` is the user's own program).
        for engine in crate::config::KNOWN_ENGINES
            .iter()
            .filter(|e| **e != "command")
        {
            assert!(names.iter().any(|n| n == engine), "{engine} has no card");
        }
        assert_eq!(shipped()?.len(), expected.len());
        Ok(())
    }

    #[test]
    fn problems_name_the_missing_source_the_bad_date_and_the_unused_source(
    ) -> crate::error::Result<()> {
        let (_, text) = SHIPPED[2];
        let broken = text
            .replace(
                "as_of = \"2026-11-30\" }\napi =",
                "as_of = \"30/11/2026\" }\napi =",
            )
            .replace(
                "python = { value = true, source = \"api\" }",
                "python = { value = true, source = \"nowhere\" }",
            )
            .replace("built_in = false\n", "");
        let card = Card::parse("onnxruntime.toml", &broken)?;
        let problems = card.problems();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("sources.docs.as_of \"30/11/2026\" is not a date")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("development.api.python cites \"nowhere\"")),
            "{problems:?}"
        );
        // A missing metric is a parse error naming it.
        let without = text.replace("tasks = {", "tasks_typo = {");
        let error = format!(
            "{:#}",
            Card::parse("onnxruntime.toml", &without)
                .err()
                .ok_or_else(|| crate::error::failed!("parsed"))?
        );
        assert!(error.contains("onnxruntime.toml"), "{error}");
        assert!(error.contains("tasks"), "{error}");
        Ok(())
    }

    #[test]
    fn the_api_score_counts_the_criteria_met() -> crate::error::Result<()> {
        let cards = shipped()?;
        let tensorrt = find(&cards, "TensorRT")?;
        // Python, C++, custom ops (plugins), dynamic shapes, quantization, profiling.
        assert_eq!(tensorrt.development.api.score(), 6);
        assert_eq!(
            API_CRITERIA.len(),
            tensorrt.development.api.criteria().len()
        );
        for ((key, _), (rubric, _)) in tensorrt
            .development
            .api
            .criteria()
            .iter()
            .zip(API_CRITERIA.iter())
        {
            assert_eq!(key, rubric);
        }
        assert!(find(&cards, "caffe").is_err());
        Ok(())
    }
}
