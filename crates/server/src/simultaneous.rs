//! Simultaneous execution: processes agree on an instant of
//! `CLOCK_MONOTONIC` (one clock for every process on the machine) and each
//! spins on it until the instant comes, so they start together within the
//! clock's read cost rather than within a scheduler's wake-up latency.

use std::time::Duration;

use rustix::time::{clock_gettime, ClockId};

/// Nanoseconds on `CLOCK_MONOTONIC`, the clock every process shares.
pub fn monotonic_ns() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// How long before the target a waiter stops sleeping and starts spinning:
/// long enough to absorb a sleep's wake-up latency on a loaded machine.
pub const SPIN_LEAD: Duration = Duration::from_millis(2);

/// Spins until `CLOCK_MONOTONIC` reaches `target_ns` (sleep first until
/// [`SPIN_LEAD`] before it); returns the clock as read when it did.
pub fn spin_until(target_ns: u64) -> u64 {
    let lead = SPIN_LEAD.as_nanos() as u64;
    let now = monotonic_ns();
    if target_ns > now + lead {
        std::thread::sleep(Duration::from_nanos(target_ns - now - lead));
    }
    loop {
        let now = monotonic_ns();
        if now >= target_ns {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// Runs `f` with the calling thread bound to CPU `cpu`, then restores its
/// CPU mask. Processes that spin to one instant each on a CPU of their own
/// cannot queue behind one another (on a 2-core machine two unbound
/// spinners often share a core and one starts a time slice late).
pub fn on_cpu<T>(cpu: usize, f: impl FnOnce() -> T) -> T {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    let before = sched_getaffinity(None).ok();
    let mut one = CpuSet::new();
    one.set(cpu % CpuSet::MAX_CPU);
    let bound = sched_setaffinity(None, &one).is_ok();
    let out = f();
    if let (true, Some(before)) = (bound, before) {
        let _ = sched_setaffinity(None, &before);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_until_never_returns_early() {
        let target = monotonic_ns() + 3_000_000;
        assert!(spin_until(target) >= target);
        // A target in the past returns at once.
        let past = monotonic_ns();
        assert!(spin_until(past) >= past);
    }
}
