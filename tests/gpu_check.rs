//! `scripts/gpu-check.sh`, the one script that proves the GPU path on a machine with an NVIDIA
//! GPU: where there is none, it says per check why the check cannot run, and stops. Its probe is
//! a fixture (through a stand-in edgeprof that answers `probe --json` from it and passes
//! everything else to the real binary), so these tests say the same on any machine; on one
//! without NVML the script also runs against the real binary.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const CHECKS: [&str; 7] = [
    "probe",
    "ceilings",
    "framework",
    "run",
    "monitor",
    "place",
    "profiler",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check.sh")
}

/// An edgeprof that answers `probe --json` with fixture `probe` and is the real one otherwise.
fn stand_in(dir: &Path, probe: &str) -> PathBuf {
    let path = dir.join("edgeprof");
    write(
        &path,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = probe ]; then cat '{}'; exit 0; fi\nexec '{}' \"$@\"\n",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/gpu-check")
                .join(probe)
                .display(),
            assert_cmd::cargo::cargo_bin("edgeprof").display()
        ),
    );
    let made_executable =
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    assert!(made_executable.is_ok(), "{made_executable:?}");
    path
}

/// Runs the script with `edgeprof`: its exit code and its lines, by check name.
fn check(edgeprof: &Path, env: &[(&str, &Path)]) -> (Option<i32>, Vec<(String, String)>) {
    let mut command = Command::new("bash");
    command.arg(script()).arg(edgeprof);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = match command.output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run the script: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines = stdout
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(name, rest)| (name.to_string(), rest.to_string()))
        .collect();
    (out.status.code(), lines)
}

/// Every check has one line, in order, and each that cannot run gives a reason.
fn one_line_per_check(lines: &[(String, String)]) {
    let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, CHECKS, "{lines:#?}");
    for (name, rest) in lines {
        if let Some(why) = rest.strip_prefix("cannot run: ") {
            assert!(why.len() > 10, "{name}: no reason: {rest}");
        }
    }
}

#[test]
fn without_a_gpu_every_check_says_why_it_cannot_run() {
    let tmp = temp_dir();
    let (code, lines) = check(&stand_in(tmp.path(), "probe-no-gpu.json"), &[]);
    one_line_per_check(&lines);
    for (name, rest) in &lines {
        assert!(
            rest.starts_with("cannot run: ") && rest.contains("libnvidia-ml.so.1"),
            "{name}: {rest}"
        );
    }
    assert_eq!(code, Some(3), "{lines:#?}");
}

#[test]
fn a_gpu_without_the_cuda_toolkit_runs_what_it_can_and_names_what_is_missing() {
    let tmp = temp_dir();
    // A Python whose onnxruntime has no CUDA provider: the framework check fails, and what
    // needs it cannot run.
    let python = tmp.path().join("python");
    write(&python, "#!/bin/sh\necho 1.20.1 CPUExecutionProvider\n");
    let made_executable =
        std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    assert!(made_executable.is_ok());
    let edgeprof = stand_in(tmp.path(), "probe-gpu-without-toolkit.json");
    let (code, lines) = check(&edgeprof, &[("EDGEPROF_GPU_PYTHON", &python)]);
    one_line_per_check(&lines);
    let said = |name: &str| -> &str {
        lines
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, r)| r.as_str())
    };
    assert!(
        said("probe").starts_with("ok: NVIDIA GeForce RTX 3060"),
        "{lines:#?}"
    );
    assert!(said("ceilings").contains("no NVRTC"), "{lines:#?}");
    assert!(
        said("framework").starts_with("failed: onnxruntime 1.20.1 has no CUDA provider"),
        "{lines:#?}"
    );
    for name in ["run", "monitor", "place", "profiler"] {
        assert!(said(name).starts_with("cannot run: "), "{lines:#?}");
    }
    assert_eq!(code, Some(1), "{lines:#?}");
}

#[test]
fn on_this_machine_the_real_binary_probes_what_the_machine_has() {
    let (code, lines) = check(&assert_cmd::cargo::cargo_bin("edgeprof"), &[]);
    one_line_per_check(&lines);
    let has_gpu = edgeprof::collect::gpuprof::memory_kind(std::path::Path::new("/"), 0).is_ok();
    if has_gpu {
        // A GPU the driver answers for: the probe finds it, whatever the later checks say.
        assert!(lines[0].1.starts_with("ok: "), "{lines:#?}");
    } else {
        // None: every check says it cannot run, and why, with the exit code for that.
        assert!(
            lines.iter().all(|(_, r)| r.starts_with("cannot run: ")),
            "{lines:#?}"
        );
        assert_eq!(code, Some(3));
    }
}
