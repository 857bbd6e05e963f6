//! A stop request that a waiting thread hears at once. Samplers sleep until their next sample is
//! due; a stop raised meanwhile by another thread wakes them there and then, so nothing has to
//! wake up every few milliseconds to look.

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
}

/// A cancel request that threads and the async event loops hear the moment it is raised:
/// async code awaits [`Cancel::raised`], a blocking supervisor registers [`Cancel::on_raise`]
/// (which can wake its own channel), and a loop between steps looks at [`Cancel::is_raised`].
/// Clones share it; a front-end makes a fresh one for each job.
#[derive(Clone, Default)]
pub struct Cancel(Arc<CancelInner>);

/// What runs when a cancel is raised.
type OnRaiseFn = Box<dyn Fn() + Send>;

#[derive(Default)]
struct CancelInner {
    flag: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
    /// Registered callbacks by their registration number.
    callbacks: Mutex<(u64, Vec<(u64, OnRaiseFn)>)>,
}

/// A callback registered with [`Cancel::on_raise`]; dropping it unregisters it.
pub struct OnRaise {
    cancel: Cancel,
    id: u64,
}

impl Drop for OnRaise {
    fn drop(&mut self) {
        let mut callbacks = self.cancel.callbacks();
        callbacks.1.retain(|(id, _)| *id != self.id);
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    fn callbacks(&self) -> MutexGuard<'_, (u64, Vec<(u64, OnRaiseFn)>)> {
        // A callback that panicked left the list itself intact.
        self.0
            .callbacks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels, now and from now on; every waiter wakes and every registered callback runs
    /// (on this thread). Not for a signal handler: raise it from a thread that waits for the
    /// signals.
    pub fn raise(&self) {
        self.0.flag.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.notify.notify_waiters();
        for (_, f) in &self.callbacks().1 {
            f();
        }
    }

    /// Runs `f` when the cancel is raised (at once when it already is), until the returned
    /// guard is dropped. `f` must be quick (it runs on the raising thread, which holds the list
    /// meanwhile) and may run twice when a raise and the registration meet.
    pub fn on_raise(&self, f: impl Fn() + Send + 'static) -> OnRaise {
        let mut callbacks = self.callbacks();
        // Checked under the lock that `raise` takes after setting the flag: either the raise
        // sees this callback, or this sees the flag.
        if self.is_raised() {
            f();
        }
        callbacks.0 += 1;
        let id = callbacks.0;
        callbacks.1.push((id, Box::new(f)));
        OnRaise {
            cancel: self.clone(),
            id,
        }
    }

    pub fn is_raised(&self) -> bool {
        self.0.flag.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The flag itself, for code that looks at it between steps.
    pub fn flag(&self) -> &std::sync::atomic::AtomicBool {
        &self.0.flag
    }

    /// Returns once the cancel is raised (at once when it already is).
    pub async fn raised(&self) {
        loop {
            // Registered before the flag is read, so a raise in between still wakes it.
            let notified = self.0.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cancel_wakes_its_waiters_raised_before_or_after_they_wait() -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let cancel = Cancel::new();
        assert!(!cancel.is_raised());
        let raiser = cancel.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            raiser.raise();
        });
        let woke = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), cancel.raised()).await
        });
        assert!(woke.is_ok(), "the waiter was not woken");
        assert!(cancel.is_raised());
        assert!(cancel.flag().load(std::sync::atomic::Ordering::SeqCst));
        // Raised already: returns at once.
        let again = runtime.block_on(async {
            tokio::time::timeout(Duration::from_millis(1), cancel.raised()).await
        });
        assert!(again.is_ok());
        let _ = thread.join();
        Ok(())
    }

    #[test]
    fn a_cancel_runs_its_callbacks_until_they_are_dropped() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let cancel = Cancel::new();
        let count = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&count);
        let kept = cancel.on_raise(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let counter = Arc::clone(&count);
        let dropped = cancel.on_raise(move || {
            counter.fetch_add(100, Ordering::SeqCst);
        });
        drop(dropped);
        assert_eq!(count.load(Ordering::SeqCst), 0);
        cancel.raise();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        // Registered after the raise: runs at once.
        let counter = Arc::clone(&count);
        let _late = cancel.on_raise(move || {
            counter.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(count.load(Ordering::SeqCst), 11);
        drop(kept);
    }

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
