//! The clock frames are timed by: nanoseconds since it started
//! (monotonic), and the mapping of kernel receive timestamps (realtime)
//! onto it.

use std::time::Instant;

/// Nanoseconds since the clock started, and kernel timestamps mapped onto
/// that scale.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
    /// realtime - clock time, ns, measured at start.
    offset: i128,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock that starts now.
    pub fn new() -> Self {
        let epoch = Instant::now();
        let real = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME).map_or(0, |t| {
            i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
        });
        Clock {
            epoch,
            offset: real - epoch.elapsed().as_nanos() as i128,
        }
    }

    /// Measures again how far realtime is from this clock: realtime may be
    /// slewed or stepped (NTP) while the clock runs, and kernel timestamps
    /// are realtime. Call it now and then (the engine does every second).
    pub fn resync(&mut self) {
        if let Ok(t) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME) {
            let real = i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec());
            self.offset = real - self.epoch.elapsed().as_nanos() as i128;
        }
    }

    /// Nanoseconds since the clock started.
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Clock time `ns` as Unix time, in nanoseconds.
    pub fn unix_nanos(&self, ns: u64) -> i128 {
        i128::from(ns) + self.offset
    }

    /// The clock time of a frame the kernel stamped at `real` (realtime,
    /// ns), never later than `now` (a realtime step must not push frames
    /// into the future); `None`: unstamped, `now`.
    pub fn arrival(&self, real: Option<i128>, now: u64) -> u64 {
        match real {
            Some(real) => (real - self.offset).clamp(0, i128::from(now)) as u64,
            None => now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_never_in_the_future() {
        let clock = Clock::new();
        let now = clock.now();
        assert_eq!(clock.arrival(None, now), now);
        assert_eq!(clock.arrival(Some(i128::MAX / 2), now), now);
        assert_eq!(clock.arrival(Some(0), now), 0);
    }
}
