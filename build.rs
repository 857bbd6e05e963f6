//! Reads the versions of the built-in engines (tract, candle) from the build's own dependency
//! metadata, `Cargo.lock`, so that results name the engine this binary really holds.

use std::path::Path;

/// The crates whose versions edgeprof reports, and the variables that carry them.
const ENGINES: [(&str, &str); 2] = [
    ("tract-onnx", "EDGEPROF_TRACT_VERSION"),
    ("candle-core", "EDGEPROF_CANDLE_VERSION"),
];

/// `name`'s version among the `[[package]]` entries of a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let quoted = |line: &str, key: &str| {
        line.strip_prefix(key)
            .and_then(|rest| rest.trim().strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    lock.split("[[package]]").find_map(|entry| {
        let mut lines = entry.lines().map(str::trim);
        let found = lines.clone().find_map(|l| quoted(l, "name"))?;
        if found != name {
            return None;
        }
        lines.find_map(|l| quoted(l, "version"))
    })
}

fn main() {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lock_path = Path::new(&dir).join("Cargo.lock");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed=build.rs");
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    for (krate, variable) in ENGINES {
        let version = locked_version(&lock, krate).unwrap_or_else(|| {
            println!(
                "cargo:warning=no version of {krate} in {}; results will say \"unknown\"",
                lock_path.display()
            );
            "unknown".to_string()
        });
        println!("cargo:rustc-env={variable}={version}");
    }
}
