//! `edgeprof board show | lock | restore`: the board's performance state (governors, clock
//! limits, turbo, power mode, jetson_clocks, throttling), what in it makes figures wander, and
//! setting it for steady figures with everything put back after. The state and the lock are
//! `edgeprof::collect::board`.

use super::{print_json, print_out, BadInput};
use anyhow::Context;
use clap::Subcommand;
use edgeprof::collect::board::{self, lock, BoardState, Found, LiveCommands};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub(super) enum BoardCommand {
    /// The board's performance state, source by source, and a warning with its fix for each
    /// thing in it that makes figures wander
    Show {
        /// Read /sys, /etc and /var/lib/nvpmodel under this directory instead of / (a copy of
        /// another board's)
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
        /// Print the state as JSON
        #[arg(long)]
        json: bool,
    },
    /// Set the board for steady figures (root): the performance governor, every CPU clock
    /// pinned at its maximum, turbo off, a Jetson's GPU clock pinned and jetson_clocks run, an
    /// nvpmodel mode when asked; held until Ctrl-C (or while COMMAND runs), then put back.
    /// After a crash or SIGKILL, the next edgeprof puts it back
    Lock {
        /// Under this directory instead of / (a chroot, a test tree)
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
        /// Select this nvpmodel mode first (Jetson; `board show` lists the current and the
        /// fastest)
        #[arg(long, value_name = "ID")]
        mode: Option<u32>,
        /// Run this command with the clocks locked, and put them back when it ends
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Put back a state that an edgeprof which is gone (killed, crashed) left locked
    Restore,
}

/// Where a lock keeps what it changed: beside the cached ceilings.
pub(super) fn restore_file() -> anyhow::Result<PathBuf> {
    edgeprof::roofline::store::cache_dir()
        .map(|d| d.join("board-restore.json"))
        .ok_or_else(|| {
            anyhow::anyhow!(BadInput(
                "no cache directory for the restore file: set HOME or EDGEPROF_CACHE_DIR".into()
            ))
        })
}

/// On every start: a lock that an edgeprof which is gone left in place is put back, and said.
pub(super) fn restore_left_over() {
    if let Ok(file) = restore_file() {
        if let Some(said) = lock::restore_left_over(&file, &LiveCommands) {
            edgeprof::errln!("edgeprof: {said}");
        }
    }
}

fn found<T>(f: &Found<T>, show: impl Fn(&T) -> String) -> String {
    match f {
        Found::Found(t) => show(t),
        Found::Absent(why) => format!("- ({why})"),
    }
}

/// The state source by source, then the warnings.
fn show_text(s: &BoardState) -> String {
    let mut out = format!("{}\n\n", s.summary());
    let khz = |v: Option<u64>| v.map_or("?".to_string(), |k| board::hz(k.saturating_mul(1000)));
    out.push_str(&format!(
        "cpufreq      {}\n",
        found(&s.cpufreq, |ps| {
            ps.iter()
                .map(|p| {
                    format!(
                        "{} (CPUs {}): {} {}, {}–{} of {}–{}, now {}",
                        p.policy,
                        edgeprof::collect::device::cpu_list(&p.cpus),
                        p.driver.as_deref().unwrap_or("?"),
                        p.governor.as_deref().unwrap_or("?"),
                        khz(p.min_khz),
                        khz(p.max_khz),
                        khz(p.hw_min_khz),
                        khz(p.hw_max_khz),
                        khz(p.cur_khz)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n             ")
        })
    ));
    out.push_str(&format!(
        "turbo        {}\n",
        found(&s.turbo, |t| format!(
            "{} ({})",
            if t.on { "on" } else { "off" },
            t.file
        ))
    ));
    out.push_str(&format!(
        "idle states  {}\n",
        found(&s.idle, |i| {
            let states: Vec<String> = i
                .states
                .iter()
                .map(|x| format!("{}{}", x.name, if x.disabled { " (disabled)" } else { "" }))
                .collect();
            format!(
                "{}: {}",
                i.driver.as_deref().unwrap_or("no driver"),
                states.join(", ")
            )
        })
    ));
    out.push_str(&format!(
        "Jetson       {}\n",
        found(&s.jetson, |j| {
            let mut parts = vec![format!(
                "power mode {}",
                found(&j.mode, ToString::to_string)
            )];
            if let Some(f) = &j.fastest {
                parts.push(format!("fastest {f}"));
            }
            parts.push(format!(
                "GPU {}",
                found(&j.gpu, |g| format!(
                    "{} {}, {}–{}, now {}",
                    g.device,
                    g.governor.as_deref().unwrap_or("?"),
                    g.min_hz.map_or("?".into(), board::hz),
                    g.max_hz.map_or("?".into(), board::hz),
                    g.cur_hz.map_or("?".into(), board::hz)
                ))
            ));
            parts.push(format!("EMC {}", found(&j.emc_hz, |h| board::hz(*h))));
            parts.push(format!(
                "fan {}{}",
                found(&j.fan_pwm, |p| format!("PWM {p}/255")),
                j.fan_mode
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ));
            parts.join("; ")
        })
    ));
    out.push_str(&format!(
        "Raspberry Pi {}\n",
        found(&s.pi, |p| format!(
            "ARM {}, core {}, throttling now {}{}",
            found(&p.arm_hz, |h| board::hz(*h)),
            found(&p.core_hz, |h| board::hz(*h)),
            found(&p.throttled_now, |t| if t.is_empty() {
                "none".to_string()
            } else {
                t.join(", ")
            }),
            if p.throttled_since_boot.is_empty() {
                String::new()
            } else {
                format!(", since boot {}", p.throttled_since_boot.join(", "))
            }
        ))
    ));
    out.push_str(&format!(
        "NVIDIA GPUs  {}\n",
        found(&s.nvidia, |gs| gs
            .iter()
            .map(|g| format!(
                "GPU {} {}: persistence {}, application clocks {}/{} MHz, power limit {}",
                g.index,
                g.name,
                g.persistence.map_or("?", |p| if p { "on" } else { "off" }),
                g.app_sm_mhz.map_or("?".into(), |v| v.to_string()),
                g.app_mem_mhz.map_or("?".into(), |v| v.to_string()),
                g.power_limit_w.map_or("?".into(), |w| format!("{w:.0} W"))
            ))
            .collect::<Vec<_>>()
            .join("; "))
    ));
    out.push_str(&format!(
        "AMD GPUs     {}\n",
        found(&s.amd, |gs| gs
            .iter()
            .map(|g| format!(
                "{}: performance level {}, profile {}",
                g.card,
                g.performance_level.as_deref().unwrap_or("?"),
                g.power_profile.as_deref().unwrap_or("?")
            ))
            .collect::<Vec<_>>()
            .join("; "))
    ));
    let warnings = s.warnings();
    if warnings.is_empty() {
        out.push_str("\nNothing in this state makes the figures wander.\n");
    } else {
        out.push('\n');
        for w in warnings {
            out.push_str(&format!("warning: {}\n  fix: {}\n", w.problem, w.fix));
        }
    }
    out
}

#[derive(serde::Serialize)]
struct Shown<'a> {
    summary: String,
    state: &'a BoardState,
    warnings: Vec<board::Warning>,
}

pub(super) fn run(command: BoardCommand) -> anyhow::Result<()> {
    match command {
        BoardCommand::Show { root, json } => {
            let state = board::read(&root, &LiveCommands);
            if json {
                print_json(&Shown {
                    summary: state.summary(),
                    warnings: state.warnings(),
                    state: &state,
                })
            } else {
                print_out(&show_text(&state))
            }
        }
        BoardCommand::Lock {
            root,
            mode,
            command,
        } => lock_command(&root, mode, &command),
        BoardCommand::Restore => {
            let file = restore_file()?;
            if !file.exists() {
                return print_out(
                    "Nothing to put back: no edgeprof left the board's state locked.\n",
                );
            }
            match lock::restore_left_over(&file, &LiveCommands) {
                Some(said) => print_out(&format!("{said}\n")),
                None => anyhow::bail!(BadInput(format!(
                    "an edgeprof that still runs holds the board's clocks ({}): stop it, and it \
                     puts them back",
                    file.display()
                ))),
            }
        }
    }
}

/// Locks the clocks for the length of a run (`run --lock-clocks`) or of `board lock`; what was
/// set goes to stderr.
pub(super) fn lock_for(root: &Path, mode: Option<u32>) -> anyhow::Result<lock::Locked> {
    let file = restore_file()?;
    let locked = lock::lock(
        root,
        &file,
        Box::new(LiveCommands),
        &lock::LockOptions { mode },
    )
    .map_err(|e| match e {
        lock::LockError::Cannot(why) => anyhow::anyhow!(BadInput(format!("board lock: {why}"))),
        lock::LockError::Failed(why) => anyhow::anyhow!("board lock: {why}"),
    })?;
    edgeprof::errln!("locked the board's clocks: {}", locked.done.join(", "));
    for note in &locked.notes {
        edgeprof::errln!("  not set: {note}");
    }
    Ok(locked)
}

/// Puts a lock back, saying what could not be.
pub(super) fn release(locked: lock::Locked) {
    let problems = locked.release();
    if problems.is_empty() {
        edgeprof::errln!("put the board's clocks back as they were");
    } else {
        edgeprof::errln!(
            "put the board's clocks back, except: {}",
            problems.join("; ")
        );
    }
}

fn lock_command(root: &Path, mode: Option<u32>, command: &[String]) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // The signals are ours before anything is changed: each one ends the lock, never edgeprof
    // before the state is back.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("cannot install the signal handlers")?;
    let locked = lock_for(root, mode)?;
    let Some((program, args)) = command.split_first() else {
        edgeprof::errln!("holding them until Ctrl-C (or SIGTERM, or a hang-up)");
        let _ = signals.forever().next();
        release(locked);
        return Ok(());
    };
    let mut spec = edgeprof::collect::child::Spec::new(program);
    spec.args(args);
    let mut child = match spec.spawn_attached() {
        Ok(c) => c,
        Err(e) => {
            release(locked);
            anyhow::bail!(BadInput(e.0));
        }
    };
    // The command has its own process group: a signal to edgeprof is passed on to it, and the
    // lock ends when it does.
    let group = nix::unistd::Pid::from_raw(-i32::try_from(child.id()).unwrap_or(i32::MAX));
    let handle = signals.handle();
    let forward = std::thread::spawn(move || {
        for signal in signals.forever() {
            if let Ok(s) = nix::sys::signal::Signal::try_from(signal) {
                let _ = nix::sys::signal::kill(group, s);
            }
        }
    });
    let status = child.wait();
    handle.close();
    let _ = forward.join();
    release(locked);
    let status = status.with_context(|| format!("cannot wait for {program}"))?;
    match status.code() {
        Some(0) => Ok(()),
        // Its status is edgeprof's, as for any wrapper (it said why itself).
        Some(code) => std::process::exit(code),
        None => anyhow::bail!("{program} was ended by a signal"),
    }
}
