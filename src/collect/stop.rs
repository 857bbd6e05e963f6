//! A stop request that a waiting thread hears at once. Samplers sleep until their next sample is
//! due; a stop raised meanwhile (by another thread, or by a signal through [`Stop::raise_on`])
//! wakes them there and then, so nothing has to wake up every few milliseconds to look.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// A stop request shared between threads; clones share it.
#[derive(Clone, Default)]
pub struct Stop(Arc<(Mutex<bool>, Condvar)>);

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    fn raised(&self) -> MutexGuard<'_, bool> {
        // A thread that panicked holding the lock left a plain bool behind: still valid.
        self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks every waiter to stop, now and from now on.
    pub fn raise(&self) {
        *self.raised() = true;
        self.0 .1.notify_all();
    }

    pub fn is_raised(&self) -> bool {
        *self.raised()
    }

    /// Sleeps until `deadline` unless the stop is raised first; false when it was.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut raised = self.raised();
        loop {
            if *raised {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            raised = match self.0 .1.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Raises the stop whenever one of `signals` arrives (instead of their default action): a
    /// thread blocks on signal-hook's self-pipe for them.
    pub fn raise_on(&self, signals: &[std::ffi::c_int]) -> std::io::Result<()> {
        let mut incoming = signal_hook::iterator::Signals::new(signals)?;
        let stop = self.clone();
        std::thread::Builder::new()
            .name("stop-on-signal".into())
            .spawn(move || {
                for _ in incoming.forever() {
                    stop.raise();
                }
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_wait_runs_to_its_deadline_unless_stopped() {
        let stop = Stop::new();
        let start = Instant::now();
        assert!(stop.wait_until(start + Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(!stop.is_raised());

        let waiter = stop.clone();
        let handle =
            std::thread::spawn(move || waiter.wait_until(Instant::now() + Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(20));
        stop.raise();
        match handle.join() {
            Ok(completed) => assert!(!completed, "the wait ran to its deadline"),
            Err(_) => panic!("the waiting thread panicked"),
        }
        assert!(stop.is_raised());
        assert!(!stop.wait_until(Instant::now() + Duration::from_secs(60)));
    }
}
