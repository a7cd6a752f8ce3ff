//! Redis's LFU counter (`evict.c`: `LFULogIncr`, `LFUDecrAndReturn`), kept
//! in the upper half of an entry's LRU word (docs/design.md, the entry).
//!
//! ```text
//! LRU word (u64 at E_LRU):
//!   bits  0..32  LRU clock: seconds since the epoch, truncated
//!   bits 32..40  LFU counter: logarithmic, 0..=255, new keys LFU_INIT_VAL
//!   bits 40..56  LFU last decrement time: minutes since the epoch, mod 2^16
//!   bits 56..64  0
//! ```
//!
//! The functions below work on the LFU half alone (`counter | minutes << 8`,
//! Redis's 24-bit `lru` field of an object under an LFU policy) and take the
//! random draw as an argument, so that tests can check them against Redis's
//! formulas.

/// The counter of a key just created (Redis's `LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u8 = 5;
pub use crate::segment::layout::{DEFAULT_LFU_DECAY_TIME, DEFAULT_LFU_LOG_FACTOR};

/// The LFU half of an LRU word from a counter and a time in minutes.
pub(crate) fn pack(counter: u8, minutes: u16) -> u32 {
    counter as u32 | (minutes as u32) << 8
}

/// Redis's `LFUGetTimeInMinutes`: minutes since the epoch, mod 2^16.
pub(crate) fn minutes(now_ms: u64) -> u16 {
    (now_ms / 60_000) as u16
}

/// The LFU half of a key created at `now_ms`.
pub(crate) fn init(now_ms: u64) -> u32 {
    pack(LFU_INIT_VAL, minutes(now_ms))
}

/// Redis's `LFUTimeElapsed`: minutes from `ldt` to `now`, across one wrap
/// of the 16-bit clock.
fn elapsed(ldt: u16, now: u16) -> u32 {
    if now >= ldt {
        (now - ldt) as u32
    } else {
        65535 - ldt as u32 + now as u32
    }
}

/// Redis's `LFUDecrAndReturn`: the counter of `lfu` lowered by one for every
/// `decay_time` minutes since its last decrement (0: no decay). Reads only.
pub fn decayed(lfu: u32, now_ms: u64, decay_time: u32) -> u8 {
    let counter = lfu as u8;
    let ldt = (lfu >> 8) as u16;
    let periods = match decay_time {
        0 => 0,
        d => elapsed(ldt, minutes(now_ms)) / d,
    };
    counter.saturating_sub(periods.min(255) as u8)
}

/// Redis's `LFULogIncr`: increments `counter` with probability
/// `1 / ((counter - LFU_INIT_VAL) * log_factor + 1)` (1 at or below the
/// initial value), `r` being a uniform draw from [0, 1]. Saturates at 255.
pub(crate) fn log_incr(counter: u8, log_factor: u32, r: f64) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// Redis's `updateLFU`: the LFU half after one access at `now_ms`, decayed,
/// incremented and stamped with the current minute.
pub(crate) fn touched(lfu: u32, now_ms: u64, log_factor: u32, decay_time: u32, r: f64) -> u32 {
    let counter = log_incr(decayed(lfu, now_ms, decay_time), log_factor, r);
    pack(counter, minutes(now_ms))
}

/// A uniform draw from [0, 1] out of 64 random bits (Redis's
/// `(double)rand() / RAND_MAX`).
pub(crate) fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / ((1u64 << 53) - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;
    /// Some minute, as ms since the epoch, well inside the 16-bit clock.
    const T0: u64 = 1_000 * MIN;

    /// xorshift64*, as the contexts use: reproducible draws.
    struct Rng(u64);
    impl Rng {
        fn draw(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            unit(self.0.wrapping_mul(0x2545_F491_4F6C_DD1D))
        }
    }

    #[test]
    fn new_keys_start_at_lfu_init_val_stamped_now() {
        let lfu = init(T0 + 59_999);
        assert_eq!(lfu as u8, LFU_INIT_VAL);
        assert_eq!(lfu >> 8, 1_000);
        assert_eq!(decayed(lfu, T0, DEFAULT_LFU_DECAY_TIME), 5);
    }

    #[test]
    fn the_minute_clock_wraps_at_16_bits() {
        assert_eq!(minutes(65_536 * MIN), 0);
        assert_eq!(minutes(65_537 * MIN + 1), 1);
        // 65535 - ldt + now, as Redis counts across the wrap.
        assert_eq!(elapsed(65_530, 3), 8);
        assert_eq!(elapsed(7, 7), 0);
        assert_eq!(elapsed(7, 9), 2);
    }

    #[test]
    fn log_incr_always_increments_up_to_the_initial_value() {
        for c in 0..=LFU_INIT_VAL {
            // p = 1: any draw short of exactly 1.0 increments.
            assert_eq!(log_incr(c, 10, 0.999_999), c + 1);
            assert_eq!(log_incr(c, 0, 0.0), c + 1);
        }
        assert_eq!(log_incr(255, 0, 0.0), 255);
        assert_eq!(log_incr(255, 10, 0.0), 255);
    }

    #[test]
    fn log_incr_probability_is_one_over_base_times_factor_plus_one() {
        // counter 15, factor 10: p = 1 / (10 * 10 + 1) = 1/101.
        let p = 1.0 / 101.0;
        assert_eq!(log_incr(15, 10, p * 0.99), 16);
        assert_eq!(log_incr(15, 10, p * 1.01), 15);
        // factor 0: every access counts.
        assert_eq!(log_incr(200, 0, 0.999), 201);
        // factor 1, counter 6: p = 1/2.
        assert_eq!(log_incr(6, 1, 0.49), 7);
        assert_eq!(log_incr(6, 1, 0.51), 6);
    }

    #[test]
    fn decay_removes_one_per_period_elapsed() {
        let lfu = pack(20, minutes(T0));
        assert_eq!(decayed(lfu, T0 + 59_999, 1), 20);
        assert_eq!(decayed(lfu, T0 + MIN, 1), 19);
        assert_eq!(decayed(lfu, T0 + 7 * MIN, 1), 13);
        assert_eq!(decayed(lfu, T0 + 7 * MIN, 2), 17);
        assert_eq!(decayed(lfu, T0 + 500 * MIN, 1), 0);
        // lfu-decay-time 0: never decays.
        assert_eq!(decayed(lfu, T0 + 500 * MIN, 0), 20);
        // Across the wrap of the minute clock.
        let late = pack(20, 65_530);
        assert_eq!(decayed(late, 65_536 * MIN + 3 * MIN, 1), 12);
    }

    #[test]
    fn touch_decays_then_increments_and_restamps() {
        let lfu = pack(20, minutes(T0));
        // Three minutes later: 20 - 3 = 17, and a certain increment (r = 0).
        let t = touched(lfu, T0 + 3 * MIN, 10, 1, 0.0);
        assert_eq!(t, pack(18, minutes(T0 + 3 * MIN)));
        // No increment drawn: still restamped, so the decay is not counted twice.
        let t = touched(lfu, T0 + 3 * MIN, 10, 1, 1.0);
        assert_eq!(t, pack(17, minutes(T0 + 3 * MIN)));
        assert_eq!(decayed(t, T0 + 3 * MIN + 59_999, 1), 17);
    }

    /// The counter after `hits` accesses of a new key within one minute.
    fn after_hits(hits: u32, factor: u32, rng: &mut Rng) -> u8 {
        let mut lfu = init(T0);
        for _ in 0..hits {
            lfu = touched(lfu, T0, factor, 1, rng.draw());
        }
        lfu as u8
    }

    #[test]
    fn hits_to_reach_a_counter_match_the_formula() {
        // From LFU_INIT_VAL, going from c to c + 1 takes 1 / p = (c - 5) * f + 1
        // accesses on average, so reaching `target` takes their sum.
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for (factor, target) in [(1u32, 60u8), (10, 30), (100, 12)] {
            let want: f64 = (LFU_INIT_VAL..target)
                .map(|c| ((c - LFU_INIT_VAL) as u32 * factor + 1) as f64)
                .sum();
            let runs = 40;
            let mut total = 0u64;
            for _ in 0..runs {
                let mut lfu = init(T0);
                while (lfu as u8) < target {
                    lfu = touched(lfu, T0, factor, 1, rng.draw());
                    total += 1;
                }
            }
            let mean = total as f64 / runs as f64;
            assert!(
                (mean - want).abs() <= want * 0.12,
                "factor {factor}: {mean} hits to reach {target}, the formula says {want}"
            );
        }
    }

    #[test]
    fn counters_grow_like_redis_conf_table() {
        // redis.conf's table of the counter after N hits by lfu-log-factor,
        // measured on a Redis server: averages land within 20% of it.
        let table: &[(u32, u32, f64)] = &[
            (0, 100, 104.0),
            (1, 100, 18.0),
            (1, 1_000, 49.0),
            (10, 100, 10.0),
            (10, 1_000, 18.0),
            (10, 100_000, 142.0),
            (100, 1_000, 11.0),
            (100, 100_000, 49.0),
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for &(factor, hits, want) in table {
            let runs = 8;
            let sum: u32 = (0..runs)
                .map(|_| after_hits(hits, factor, &mut rng) as u32)
                .sum();
            let mean = sum as f64 / runs as f64;
            assert!(
                (mean - want).abs() <= want * 0.2,
                "factor {factor}, {hits} hits: counter {mean}, Redis's table says {want}"
            );
        }
        // Enough hits saturate at 255 for small factors.
        assert_eq!(after_hits(1_000, 0, &mut rng), 255);
        assert_eq!(after_hits(100_000, 1, &mut rng), 255);
    }

    #[test]
    fn unit_draws_span_zero_to_one() {
        assert_eq!(unit(0), 0.0);
        assert_eq!(unit(u64::MAX), 1.0);
        assert!(unit(1 << 63) > 0.49 && unit(1 << 63) < 0.51);
    }
}
