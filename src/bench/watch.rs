//! The in-process benchmark under a watch: the engine loads and measures the model on a thread
//! of its own while the calling thread bounds the load — its time (`--load-timeout`) and the
//! memory this process takes meanwhile — as `run`'s worker processes are bounded by their
//! timeout and by their memory. A graph that sends the engine into a loop (tract unifying
//! shapes that never agree, its memory growing) then ends with a sentence instead of a hang.
//! The loading thread cannot be stopped from outside: it is left behind, and ends with the
//! process, which the front-end ends after the error.

use super::*;
use std::sync::mpsc;
use std::time::Instant;

/// How often the memory of the process is read while a model loads.
const MEMORY_INTERVAL: Duration = Duration::from_millis(100);

/// The share of the memory left when loading began that loading may take: the rest is the
/// machine's (a loop that took it all would end in the kernel's OOM killer, not a sentence).
const MEMORY_SHARE: (u64, u64) = (7, 8);

/// Why a load was stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadStopped {
    #[error(
        "{model} did not load within {seconds} s (--load-timeout) and the benchmark was \
         stopped: the engine is stuck on a malformed model, or this one needs a longer limit"
    )]
    Timeout { model: String, seconds: f64 },
    #[error(
        "loading {model} took {} of memory, past {} (7/8 of what {}), and the benchmark was \
         stopped: the engine is stuck on a malformed model, or this one is too large here",
        crate::text::bytes(*used),
        crate::text::bytes(*limit),
        room_phrase(*bound)
    )]
    Memory {
        model: String,
        used: u64,
        limit: u64,
        bound: crate::collect::memory_room::Bound,
    },
}

fn room_phrase(bound: crate::collect::memory_room::Bound) -> &'static str {
    use crate::collect::memory_room::Bound;
    match bound {
        Bound::System => "was available when loading began",
        Bound::Cgroup => "this process's cgroup memory limit left when loading began",
        Bound::AddressSpace => "this process's address-space limit left when loading began",
    }
}

/// The most memory a load may take, from the memory left when it began; None when no bound
/// could be read.
pub fn load_memory_limit(room: Option<crate::collect::memory_room::Room>) -> Option<u64> {
    room.map(|r| r.bytes / MEMORY_SHARE.1 * MEMORY_SHARE.0)
}

/// This process's resident memory, in bytes.
fn resident() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    crate::collect::proc::parse_status_memory(&text).0
}

/// What the measuring thread tells the watching one.
enum Told {
    Event(BenchEvent),
    Done(Box<crate::error::Result<BenchReport>>),
}

/// Runs the in-process benchmark (`measure`) on a thread of its own, forwarding its events to
/// `on_event`, and stops waiting for it — with [`LoadStopped`] — when its load passes
/// `timeout` or takes more memory than [`load_memory_limit`] allows.
pub fn watched(
    model: String,
    timeout: Duration,
    measure: impl FnOnce(&mut dyn FnMut(BenchEvent)) -> crate::error::Result<BenchReport>
        + Send
        + 'static,
    mut on_event: impl FnMut(BenchEvent),
) -> crate::error::Result<BenchReport> {
    let (tx, rx) = mpsc::channel::<Told>();
    let room = crate::collect::memory_room::memory_room();
    let limit = load_memory_limit(room);
    let before = resident().unwrap_or(0);
    let start = Instant::now();
    std::thread::Builder::new()
        .name("edgeprof-bench".into())
        .spawn(move || {
            let events = tx.clone();
            let mut send = |e: BenchEvent| {
                let _ = events.send(Told::Event(e));
            };
            let report = measure(&mut send);
            let _ = tx.send(Told::Done(Box::new(report)));
        })
        .map_err(|e| crate::error::failed!("cannot start the benchmark's thread: {e}"))?;
    let mut loading = true;
    loop {
        let told = if loading {
            rx.recv_timeout(MEMORY_INTERVAL)
        } else {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        };
        match told {
            Ok(Told::Event(e)) => {
                if matches!(e, BenchEvent::Loaded { .. }) {
                    loading = false;
                }
                on_event(e);
            }
            Ok(Told::Done(report)) => return *report,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if start.elapsed() >= timeout {
                    return Err(LoadStopped::Timeout {
                        model,
                        seconds: timeout.as_secs_f64(),
                    }
                    .into());
                }
                let used = resident().unwrap_or(0).saturating_sub(before);
                if let (Some(limit), Some(room)) = (limit, room) {
                    if used > limit {
                        return Err(LoadStopped::Memory {
                            model,
                            used,
                            limit,
                            bound: room.bound,
                        }
                        .into());
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                crate::error::bail!("the benchmark's thread ended without a result")
            }
        }
    }
}

crate::error::kinds!(crate::error::Kind::Failed => LoadStopped);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::memory_room::{Bound, Room};

    #[test]
    fn a_load_may_take_seven_eighths_of_the_memory_left() {
        let room = Room {
            bytes: 8 << 30,
            bound: Bound::Cgroup,
        };
        assert_eq!(load_memory_limit(Some(room)), Some(7 << 30));
        assert_eq!(load_memory_limit(None), None);
    }

    #[test]
    fn a_load_past_its_time_is_stopped_with_a_sentence() {
        let outcome = watched(
            "slow.onnx".into(),
            Duration::from_millis(200),
            |_| {
                std::thread::sleep(Duration::from_secs(5));
                Err(crate::error::failed!("finished"))
            },
            |_| {},
        );
        match outcome {
            Err(e) => assert_eq!(
                e.to_string(),
                LoadStopped::Timeout {
                    model: "slow.onnx".into(),
                    seconds: 0.2
                }
                .to_string()
            ),
            Ok(_) => panic!("a load past its time was not stopped"),
        }
    }
}
