//! The terminal UI end to end: the real binary inside tmux (its own server socket per test),
//! driven by keys, its screen read back with `capture-pane`. Also: the terminal is restored after
//! quit, a panic and SIGTERM (checked with `stty` in the same pane afterwards), and a run goes on
//! to a complete results directory after SIGHUP. tmux must be installed (.ci/run installs it).

mod common;

use common::tmux::Tmux;
use common::{edgeprof, temp_dir};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The shell line that runs edgeprof with `args`, then records its exit code and the terminal's
/// modes for the test.
fn script(args: &str, env: &str) -> String {
    let bin = edgeprof().get_program().to_string_lossy().into_owned();
    format!(
        "EDGEPROF_CACHE_DIR=cache {env} '{bin}' {args}; echo EXIT=$? > exit.txt; \
         stty -a > stty.txt; tput cnorm; echo done > finished.txt"
    )
}

/// The terminal is back in cooked mode with echo: what raw mode turns off.
fn assert_restored(t: &Tmux) {
    t.wait_file("finished.txt", 30);
    let stty = std::fs::read_to_string(t.dir.join("stty.txt")).unwrap_or_default();
    let flags: Vec<&str> = stty.split_whitespace().collect();
    for flag in ["icanon", "echo", "isig"] {
        assert!(flags.contains(&flag), "{flag} not restored: {stty}");
    }
    let alternate = t.tmux(&["display-message", "-p", "-t", "s", "#{alternate_on}"]);
    assert_eq!(alternate.trim(), "0", "still on the alternate screen");
}

fn small_config(dir: &Path, iterations: usize, models: &str) {
    let text = format!(
        "name = \"small\"\n[matrix]\nmodels = [{models}]\ninputs = [\"3x32x32\"]\nthreads = [1]\n\
         [measure]\nwarmup = 1\niterations = {iterations}\nrepeats = 2\nsample_interval_ms = 100\n\
         retries = 0\n"
    );
    if let Err(e) = std::fs::write(dir.join("small.toml"), text) {
        panic!("{e}");
    }
}

#[test]
fn select_run_read_results_and_save_the_config() {
    let tmp = temp_dir();
    let dir = tmp.path();
    small_config(dir, 20, "\"shufflenet_v2_x0_5\", \"mobilenet_v2\"");
    let t = Tmux::start(dir, &script("tui small.toml", ""));
    t.wait_for("Frameworks", 20);
    // Threads: add 2 beside 1 (the axis is the 7th; its items: all, 1, 2, …).
    for _ in 0..6 {
        t.keys(&["Down"]);
    }
    t.keys(&["Right", "Down", "Down", "Space"]);
    let screen = t.wait_for("4 conditions", 10);
    assert!(screen.contains("[✓] 2"), "{screen}");
    t.keys(&["r"]);
    let screen = t.wait_for("done: 4 ok, 0 failed", 120);
    assert!(screen.contains("4/4 100%"), "{screen}");
    t.keys(&["3"]);
    let screen = t.wait_for("mean ms", 10);
    // The names without what every condition shares, which the title says once.
    assert!(
        screen.contains("every condition is tract/*/3x32x32"),
        "{screen}"
    );
    assert!(screen.contains("shufflenet_v2_x0_5/t1"), "{screen}");
    // The roofline needs this device's ceilings: measure them from the tab, then read the advice
    // for the first condition and drill into its layers.
    t.keys(&["4"]);
    t.wait_for("no ceilings for this device yet: press m", 10);
    t.keys(&["m"]);
    let screen = t.wait_for("Advice, in order", 240);
    assert!(screen.contains("A tract/shufflenet_v2_x0_5"), "{screen}");
    assert!(screen.contains("1. "), "no ordered advice:\n{screen}");
    t.keys(&["l"]);
    let screen = t.wait_for("Layers of tract/shufflenet_v2_x0_5", 120);
    assert!(screen.contains("×"), "{screen}");
    t.keys(&["Escape"]);
    t.wait_for("Programs (l: layers)", 10);
    // Back to the conditions; save the selection as saved.toml.
    t.keys(&["1", "w"]);
    t.wait_for("save the selection as: small.toml", 10);
    t.keys(&["BSpace"; 10]);
    t.keys(&["-l", "saved.toml"]);
    t.keys(&["Enter"]);
    t.wait_for("saved saved.toml", 10);
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert_restored(&t);
    // The saved selection is a config `edgeprof run` takes unchanged.
    let check = edgeprof()
        .args(["config", "check"])
        .arg(dir.join("saved.toml"))
        .assert()
        .success();
    let out = String::from_utf8_lossy(&check.get_output().stdout).into_owned();
    assert!(out.contains("4 condition"), "{out}");
}

#[test]
fn a_panic_leaves_the_terminal_restored() {
    let tmp = temp_dir();
    // Without a backtrace, whatever the caller's environment says: a long one scrolls the
    // message off the 24-row screen.
    let t = Tmux::start(
        tmp.path(),
        &script("tui --panic-after-first-frame", "RUST_BACKTRACE=0"),
    );
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=101");
    assert_restored(&t);
    let screen = t.screen();
    assert!(
        screen.contains("panicking after the first frame"),
        "{screen}"
    );
}

/// Opens the UI on `dir`'s small.toml and starts the run; returns once its first condition is
/// timing.
fn running(dir: &Path) -> Tmux {
    let t = Tmux::start(dir, &script("tui small.toml", ""));
    t.wait_for("Frameworks", 20);
    t.keys(&["r"]);
    t.wait_for("timed iterations", 60);
    t
}

/// Opens the UI on `dir`'s small.toml, starts the run, and sends `signal` to edgeprof once the
/// first condition is timing.
fn signal_mid_run(dir: &Path, signal: &str) -> Tmux {
    let t = running(dir);
    let pid = t.edgeprof_pid();
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
    t
}

#[test]
fn sigterm_cancels_the_run_and_restores_the_terminal() {
    let tmp = temp_dir();
    small_config(tmp.path(), 100_000, "\"resnet50\"");
    let t = signal_mid_run(tmp.path(), "-TERM");
    assert_eq!(t.wait_file("exit.txt", 30).trim(), "EXIT=143");
    assert_restored(&t);
    // What ran is on disk, marked interrupted, ready for --resume.
    let results = common::only_entry(&tmp.path().join("results"));
    let manifest = std::fs::read_to_string(results.join("manifest.json")).unwrap_or_default();
    assert!(
        manifest.contains("\"status\": \"interrupted\""),
        "{manifest}"
    );
}

#[test]
fn a_run_survives_sighup_and_completes_its_results() {
    let tmp = temp_dir();
    small_config(tmp.path(), 300, "\"shufflenet_v2_x0_5\", \"mobilenet_v2\"");
    let t = signal_mid_run(tmp.path(), "-HUP");
    // The run finished and edgeprof left on its own, without a terminal to restore.
    assert_eq!(t.wait_file("exit.txt", 180).trim(), "EXIT=0");
    let results = common::only_entry(&tmp.path().join("results"));
    let manifest = std::fs::read_to_string(results.join("manifest.json")).unwrap_or_default();
    assert!(manifest.contains("\"status\": \"complete\""), "{manifest}");
    let runs = std::fs::read_to_string(results.join("runs.jsonl")).unwrap_or_default();
    assert_eq!(runs.lines().count(), 2, "{runs}");
    assert!(runs.lines().all(|l| l.contains("\"ok\":true")), "{runs}");
    assert!(results.join("summary.csv").is_file());
}

#[test]
fn without_a_terminal_the_ui_says_what_to_use_instead() {
    common::assert_bad_input(&[], "the terminal UI needs a terminal");
    common::assert_bad_input(&["tui"], "edgeprof run CONFIG");
}

/// `edgeprof --ascii` (no `tui`) draws with ASCII only, as `edgeprof tui --ascii` does; the UI's
/// options are refused beside another command.
#[test]
fn the_uis_options_work_on_edgeprof_alone() {
    let tmp = temp_dir();
    let t = Tmux::start(tmp.path(), &script("--ascii --theme monochrome", ""));
    let screen = t.wait_for("Frameworks", 20);
    assert!(screen.is_ascii(), "{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert_restored(&t);
    common::assert_bad_input(&["--ascii", "models", "list"], "are the terminal UI's");
}

/// Ctrl-C during a run asks first, as q does; a second one cancels the run, restores the
/// terminal, says how to finish the run and exits 130.
#[test]
fn ctrl_c_twice_cancels_a_run_and_says_how_to_resume_it() {
    let tmp = temp_dir();
    small_config(tmp.path(), 100_000, "\"resnet50\"");
    let t = running(tmp.path());
    t.keys(&["C-c"]);
    t.wait_for("again, or Q", 20);
    t.keys(&["C-c"]);
    assert_eq!(t.wait_file("exit.txt", 30).trim(), "EXIT=130");
    assert_restored(&t);
    let screen = t.screen();
    assert!(
        screen.contains(
            "interrupted with 0 of 1 condition(s) done; finish with: edgeprof run --resume"
        ),
        "{screen}"
    );
}

/// The first frame does not wait for the frameworks' interpreters: they read "finding out"
/// until they have answered, then their state.
#[test]
fn the_frameworks_state_arrives_after_the_first_frame() {
    let tmp = temp_dir();
    let t = Tmux::start(tmp.path(), &script("", ""));
    t.wait_for("Frameworks", 20);
    let until = Instant::now() + Duration::from_secs(30);
    let mut screen = t.screen();
    while screen.contains("finding out") {
        assert!(Instant::now() < until, "never answered:\n{screen}");
        std::thread::sleep(Duration::from_millis(100));
        screen = t.screen();
    }
    assert!(screen.contains("onnxruntime"), "{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
}

#[test]
fn monitor_on_a_terminal_opens_the_monitor_tab() {
    let tmp = temp_dir();
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/boards/orin-jp5"
    );
    let t = Tmux::start(
        tmp.path(),
        &script(&format!("monitor --root {root} --interval 200ms"), ""),
    );
    // The Orin tree's GPU reads 78.1 % busy; its cores and the INA3221 board power show too.
    let screen = t.wait_for("GPU % 78 %", 20);
    assert!(screen.contains("cpu0"), "{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert_restored(&t);
}

#[test]
fn the_ui_follows_a_resize_and_c_cancels_the_run() {
    let tmp = temp_dir();
    small_config(tmp.path(), 100_000, "\"resnet50\"");
    let t = running(tmp.path());
    // From 100×30 down to 80×24: the frame is redrawn to the new size.
    t.tmux(&["resize-window", "-t", "s", "-x", "80", "-y", "24"]);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let screen = t.screen();
        let widths: Vec<usize> = screen.lines().map(|l| l.chars().count()).collect();
        let progress = screen.lines().nth(1).unwrap_or("");
        if widths.len() == 24
            && progress.starts_with("┌ Progress")
            && progress.ends_with('┐')
            && progress.chars().count() == 80
        {
            break;
        }
        if Instant::now() > until {
            panic!("not redrawn at 80×24:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.keys(&["c"]);
    let screen = t.wait_for("cancelled after 0 ok, 0 failed", 60);
    assert!(screen.contains("edgeprof run --resume"), "{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert_restored(&t);
    let results = common::only_entry(&tmp.path().join("results"));
    let manifest = std::fs::read_to_string(results.join("manifest.json")).unwrap_or_default();
    assert!(
        manifest.contains("\"status\": \"interrupted\""),
        "{manifest}"
    );
}

#[test]
fn g_shows_the_gpu_roofline_and_m_measures_its_ceilings() {
    let tmp = temp_dir();
    let worker = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bin/gpu-bench-worker"
    );
    // The stand-in worker replays a recorded report (no GPU here); first a failure, said on
    // screen, then the report.
    let t = Tmux::start(
        tmp.path(),
        &script(
            "tui",
            &format!("EDGEPROF_GPU_BENCH_WORKER='{worker}' FAKE_GPU=unavailable"),
        ),
    );
    t.wait_for("Conditions", 20);
    t.keys(&["4", "g"]);
    t.wait_for("no ceilings for GPU 0 yet", 20);
    t.keys(&["m"]);
    t.wait_for("GPU ceilings unavailable: no CUDA driver (stand-in)", 20);
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    drop(t);
    let tmp = temp_dir();
    let t = Tmux::start(
        tmp.path(),
        &script("tui", &format!("EDGEPROF_GPU_BENCH_WORKER='{worker}'")),
    );
    t.wait_for("Conditions", 20);
    t.keys(&["4", "g", "m"]);
    let screen = t.wait_for(
        "GPU roofline (fp32; g: CPU; ceilings: measured by edgeprof",
        30,
    );
    assert!(screen.contains("GPU profiles"), "{screen}");
    // Kept for later: the GPU's file beside (not instead of) the CPU's.
    let kept: Vec<String> = std::fs::read_dir(tmp.path().join("cache"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        kept.iter().all(|n| n.ends_with("-gpu0.json")) && kept.len() == 1,
        "{kept:?}"
    );
    t.keys(&["g"]);
    t.wait_for("CPU roofline", 20);
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert_restored(&t);
}

#[test]
fn tui_open_follows_a_sweep_that_runs_headless() {
    let tmp = temp_dir();
    let slow = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/workers/slow.sh"
    );
    let config = tmp.path().join("slow.toml");
    common::write(
        &config,
        &format!(
            "name = \"slow\"\n[command]\nprogram = \"{slow}\"\nargs = [\"1.5\"]\n[matrix]\n\
             engines = [\"command\"]\nmodels = [\"resnet34\"]\nbatch = [1, 2, 3]\n\
             [measure]\nretries = 0\n[output]\ndir = \"{}\"\n",
            tmp.path().join("results").display()
        ),
    );
    // Started headless, as over an SSH session that then dropped.
    let mut sweep = match Command::new(edgeprof().get_program())
        .args(["run", "--no-charts"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let until = Instant::now() + Duration::from_secs(20);
    let dir = loop {
        let found = std::fs::read_dir(tmp.path().join("results"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path());
        if let Some(dir) = found.filter(|d| d.join("runs.jsonl").is_file()) {
            break dir;
        }
        assert!(Instant::now() < until, "the sweep did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    let t = Tmux::start(
        tmp.path(),
        &script(&format!("tui --open '{}'", dir.display()), ""),
    );
    t.wait_for(
        &format!("following a running sweep (edgeprof pid {})", sweep.id()),
        20,
    );
    t.wait_for("the sweep ended: complete, 3 of 3", 60);
    assert!(sweep.wait().is_ok_and(|s| s.success()));
    let screen = t.screen();
    assert!(screen.contains("b3"), "{screen}");
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
}

#[test]
fn capital_r_resumes_a_cancelled_run_to_completion() {
    let tmp = temp_dir();
    // Two conditions of a few seconds each, cancelled during the first.
    small_config(tmp.path(), 3000, "\"shufflenet_v2_x0_5\", \"mobilenet_v2\"");
    let t = running(tmp.path());
    t.keys(&["c"]);
    let screen = t.wait_for("cancelled after 0 ok, 0 failed", 60);
    assert!(screen.contains("R resumes it"), "{screen}");
    t.keys(&["R"]);
    t.wait_for("done: 2 ok, 0 failed", 180);
    // Once complete there is nothing to resume, and R starts nothing.
    t.keys(&["R"]);
    t.wait_for("is complete: nothing to resume", 20);
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert_restored(&t);
    // One directory, finished by the resume: both conditions ok, the resume recorded.
    let results = common::only_entry(&tmp.path().join("results"));
    let manifest = std::fs::read_to_string(results.join("manifest.json")).unwrap_or_default();
    assert!(manifest.contains("\"status\": \"complete\""), "{manifest}");
    let resumed: serde_json::Value = serde_json::from_str(&manifest).unwrap_or_default();
    assert_eq!(
        resumed["resumed"].as_array().map(Vec::len),
        Some(1),
        "{manifest}"
    );
    let runs = std::fs::read_to_string(results.join("runs.jsonl")).unwrap_or_default();
    assert_eq!(runs.lines().count(), 2, "{runs}");
    assert!(runs.lines().all(|l| l.contains("\"ok\":true")), "{runs}");
}

/// Every file under `dir`, relative to it, sorted (the writer's lock aside: it is there while a
/// run holds the directory).
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.retain(|f| f != "writer.lock");
    out.sort();
    out
}

/// The top-level keys of a JSON file.
fn json_keys(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let mut keys: Vec<String> = value
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

/// The one results directory under `parent`.
fn only_dir(parent: &Path) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(parent)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn a_run_from_the_ui_writes_what_edgeprof_run_writes() {
    let tmp = temp_dir();
    let dir = tmp.path();
    small_config(
        dir,
        400,
        "\"shufflenet_v2_x0_5\", \"mobilenet_v2\", \"squeezenet1_1\"",
    );
    let mut config = std::fs::read_to_string(dir.join("small.toml")).unwrap_or_default();
    config = config.replace(
        "name = \"small\"\n",
        "name = \"small\"\n[output]\nroofline = true\n",
    );
    let ui_config = config.replace("[output]\n", "[output]\ndir = \"ui\"\n");
    let cli_config = config.replace("[output]\n", "[output]\ndir = \"cli\"\n");
    std::fs::write(dir.join("ui.toml"), ui_config).unwrap_or_default();
    std::fs::write(dir.join("cli.toml"), cli_config).unwrap_or_default();
    // Both runs read the same kept ceilings (a quick measurement, made once here).
    edgeprof()
        .current_dir(dir)
        .env("EDGEPROF_CACHE_DIR", "cache")
        .args(["roofline", "measure", "--quick"])
        .assert()
        .success();
    let t = Tmux::start(dir, &script("tui ui.toml", ""));
    t.wait_for("Frameworks", 20);
    t.keys(&["r"]);
    // The progress log grows while the run goes on, as `tail -f` would show it.
    let mut sizes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        let screen = t.screen();
        if screen.contains("done: 3 ok") {
            break;
        }
        let log = std::fs::read_dir(dir.join("ui"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .and_then(|e| std::fs::metadata(e.path().join("progress.log")).ok())
            .map_or(0, |m| m.len());
        if log > 0 && sizes.last() != Some(&log) {
            sizes.push(log);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.wait_for("done: 3 ok, 0 failed", 60);
    t.keys(&["q"]);
    assert_eq!(t.wait_file("exit.txt", 20).trim(), "EXIT=0");
    assert!(
        sizes.len() >= 2,
        "progress.log did not grow during the run: {sizes:?}"
    );
    edgeprof()
        .current_dir(dir)
        .env("EDGEPROF_CACHE_DIR", "cache")
        .args(["run", "cli.toml"])
        .assert()
        .success();
    let (ui, cli) = (only_dir(&dir.join("ui")), only_dir(&dir.join("cli")));
    let ui_files = files_under(&ui);
    assert_eq!(ui_files, files_under(&cli));
    for must in ["roofline.json", "charts/roofline.svg", "progress.log"] {
        assert!(
            ui_files.iter().any(|f| f == must),
            "{must} missing: {ui_files:?}"
        );
    }
    for json in ["roofline.json", "manifest.json", "summary.json"] {
        assert_eq!(
            json_keys(&ui.join(json)),
            json_keys(&cli.join(json)),
            "{json}"
        );
    }
}
