//! `edgeprof env setup images`: the sample photographs of the pinned scikit-image and
//! scikit-learn wheels ([`crate::models::images::SOURCES`]), fetched with pip from the package
//! index (the wheels are downloaded, not installed), kept in the data directory with a
//! manifest of their digests, each checked to decode. Made whole in a temporary folder and
//! moved into place, so that an interrupted setup leaves nothing half-made.

use super::env::{data_dir, run_step, EnvError};
use crate::collect::child::Spec;
use crate::models::images::{self, Entry, ImageSet, Manifest, SOURCES};
use std::path::{Path, PathBuf};

/// Where the images are kept.
pub fn dir() -> Result<PathBuf, EnvError> {
    Ok(data_dir()?.join("images"))
}

/// The set up images, if there are any.
pub fn set() -> Option<ImageSet> {
    ImageSet::open(&dir().ok()?).ok()
}

/// What setting the images up did.
pub enum Outcome {
    Made(ImageSet),
    AlreadyThere(ImageSet),
}

/// Unpacks the listed members of each wheel into a folder, flat, by their file names.
const UNPACK: &str = r#"
import json, os, sys, zipfile
out, plan = sys.argv[1], json.loads(sys.argv[2])
for wheel, members in plan:
    with zipfile.ZipFile(wheel) as z:
        for m in members:
            with z.open(m) as f, open(os.path.join(out, os.path.basename(m)), "wb") as g:
                g.write(f.read())
"#;

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EnvError {
    let path = path.to_path_buf();
    move |error| EnvError::Io { what, path, error }
}

/// Fetches the images with `base` (a `python3` with its venv module; pip comes from a
/// temporary environment made with it), `pip_args` passed on to pip (e.g. `--index-url`).
/// Kept images are left as they are unless `force`.
pub fn setup(
    base: &Path,
    pip_args: &[String],
    force: bool,
    on_line: &mut dyn FnMut(&str),
) -> Result<Outcome, EnvError> {
    let dir = dir()?;
    let parent = data_dir()?;
    std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
    let _lock = crate::lockfile::LockFile::acquire_waiting(
        &dir.with_extension("lock"),
        "edgeprof env setup images",
        |held| on_line(&format!("waiting: {held}")),
    )?;
    if !force {
        if let Ok(set) = ImageSet::open(&dir) {
            return Ok(Outcome::AlreadyThere(set));
        }
    }
    let work = parent.join("images.part");
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(io("remove", &work))?;
    }
    let made = fetch(base, pip_args, &work, on_line);
    let made = made.and_then(|()| {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io("remove", &dir))?;
        }
        let kept = work.join("images");
        std::fs::rename(&kept, &dir).map_err(io("move into place", &kept))?;
        ImageSet::open(&dir).map_err(|e| EnvError::Failed(e.to_string()))
    });
    let _ = std::fs::remove_dir_all(&work);
    made.map(Outcome::Made).map_err(|e| EnvError::Setup {
        framework: "images".to_string(),
        error: Box::new(e),
    })
}

fn fetch(
    base: &Path,
    pip_args: &[String],
    work: &Path,
    on_line: &mut dyn FnMut(&str),
) -> Result<(), EnvError> {
    let venv = work.join("venv");
    let wheels = work.join("wheels");
    let kept = work.join("images");
    for d in [&wheels, &kept] {
        std::fs::create_dir_all(d).map_err(io("create", d))?;
    }
    let mut make = Spec::new(base);
    make.arg("-m").arg("venv").arg(&venv);
    run_step(&format!("{} -m venv", base.display()), &make, on_line)?;
    let python = venv.join("bin").join("python");
    // The same wheel on every machine (the images are data: any platform's wheel holds them).
    let mut pip = Spec::new(&python);
    pip.args([
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        "manylinux2014_x86_64",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--dest",
    ])
    .arg(&wheels)
    .args(
        SOURCES
            .iter()
            .map(|s| format!("{}=={}", s.distribution, s.version)),
    )
    .args(pip_args);
    run_step("pip download", &pip, on_line)?;
    let listing = std::fs::read_dir(&wheels).map_err(io("read", &wheels))?;
    let files: Vec<PathBuf> = listing.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let mut plan = Vec::new();
    for s in SOURCES {
        // Wheel names spell the distribution with underscores.
        let prefix = format!("{}-{}-", s.distribution.replace('-', "_"), s.version);
        let wheel = files
            .iter()
            .find(|f| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
            .ok_or_else(|| {
                EnvError::Failed(format!(
                    "pip downloaded no {} {} wheel",
                    s.distribution, s.version
                ))
            })?;
        plan.push(serde_json::json!([wheel, s.members]));
    }
    let mut unpack = Spec::new(&python);
    unpack
        .args(["-c", UNPACK])
        .arg(&kept)
        .arg(serde_json::Value::Array(plan).to_string());
    run_step("unpacking the images", &unpack, on_line)?;
    let mut manifest = Manifest { images: Vec::new() };
    for s in SOURCES {
        for m in s.members {
            let file = m.rsplit('/').next().unwrap_or(m).to_string();
            let path = kept.join(&file);
            let bytes = std::fs::read(&path).map_err(io("read", &path))?;
            image::load_from_memory(&bytes).map_err(|e| {
                EnvError::Failed(format!("{m} of {} does not decode: {e}", s.distribution))
            })?;
            manifest.images.push(Entry {
                file,
                source: format!("{} {}", s.distribution, s.version),
                sha256: images::sha256(&bytes),
            });
        }
    }
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| EnvError::Failed(format!("cannot write the manifest: {e}")))?;
    let path = kept.join(images::MANIFEST);
    std::fs::write(&path, text).map_err(io("write", &path))?;
    on_line(&format!("kept {} images", manifest.images.len()));
    Ok(())
}

/// Deletes the kept images; the folder they were in, or None when there were none.
pub fn remove() -> Result<Option<PathBuf>, EnvError> {
    let dir = dir()?;
    if !dir.exists() {
        return Ok(None);
    }
    if !dir.join(images::MANIFEST).exists() {
        return Err(EnvError::Failed(format!(
            "{} holds no {} of edgeprof's; remove it yourself if you mean to",
            dir.display(),
            images::MANIFEST
        )));
    }
    std::fs::remove_dir_all(&dir).map_err(io("remove", &dir))?;
    Ok(Some(dir))
}
