//! A deadline the async event loops sleep to with one wake-up: a kernel timer (timerfd) that
//! tokio's reactor watches. tokio's own timer wheel wakes a sleep of more than 64 ms once early,
//! at the boundary of its wheel's slot, and once at the deadline: twice the wake-ups of a
//! sampler that sleeps 100 ms at a time.

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use std::time::Instant;
use tokio::io::unix::AsyncFd;

/// One timer, re-armed for each deadline. Made inside a tokio runtime whose I/O is enabled.
pub struct Alarm(AsyncFd<Timer>);

/// The timer as tokio's reactor takes it.
struct Timer(TimerFd);

impl std::os::fd::AsRawFd for Timer {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

impl Alarm {
    pub fn new() -> std::io::Result<Alarm> {
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // SAFETY: `Timer` owns the timer's descriptor and hands out that one descriptor until
        // the `AsyncFd` (its only owner) is dropped.
        let registered =
            unsafe { AsyncFd::register_with_interest(Timer(timer), tokio::io::Interest::READABLE) };
        registered.map(Alarm).map_err(|e| e.into_parts().1)
    }

    /// Returns at `deadline` (at once when it has passed).
    pub async fn sleep_until(&mut self, deadline: Instant) -> std::io::Result<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        self.0.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(left)),
            TimerSetTimeFlags::empty(),
        )?;
        loop {
            let mut ready = self.0.readable().await?;
            let read = ready.try_io(|timer| {
                let mut expirations = [0u8; 8];
                nix::unistd::read(&timer.get_ref().0, &mut expirations)
                    .map_err(std::io::Error::from)
            });
            match read {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                // Not expired yet (a spurious readiness): wait again.
                Err(_would_block) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_alarm_returns_at_its_deadline_not_before() -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let mut alarm = Alarm::new()?;
            for wait_ms in [30, 5, 0] {
                let start = Instant::now();
                let deadline = start + Duration::from_millis(wait_ms);
                alarm.sleep_until(deadline).await?;
                assert!(Instant::now() >= deadline, "woke before {wait_ms} ms");
            }
            // A deadline already past returns at once.
            alarm
                .sleep_until(Instant::now() - Duration::from_millis(5))
                .await
        })
    }
}
