//! Eviction by policy when memory is full, and the incremental active expiry
//! sweeper. Both sample the index lock-free and lock only the bucket of the key
//! they remove, with a try-lock, so they never wait on (or deadlock with) a
//! writer that is itself allocating.

use crate::context::Stat;
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::index;
use crate::keys::Seen;
use crate::layout::*;

/// What to do when a write needs memory and none is free (Redis's
/// `maxmemory-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum EvictionPolicy {
    /// Refuse the write with an out-of-memory error.
    #[default]
    NoEviction = 0,
    /// Evict the least recently used key of any kind.
    AllKeysLru = 1,
    /// Evict the least recently used key among keys with an expiry.
    VolatileLru = 2,
    /// Evict a random key.
    AllKeysRandom = 3,
    /// Evict the key with an expiry that expires soonest.
    VolatileTtl = 4,
}

impl EvictionPolicy {
    /// Redis's name for the policy.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Parses Redis's name for a policy.
    pub fn from_name(name: &str) -> Option<EvictionPolicy> {
        Some(match name.to_ascii_lowercase().as_str() {
            "noeviction" => EvictionPolicy::NoEviction,
            "allkeys-lru" => EvictionPolicy::AllKeysLru,
            "volatile-lru" => EvictionPolicy::VolatileLru,
            "allkeys-random" => EvictionPolicy::AllKeysRandom,
            "volatile-ttl" => EvictionPolicy::VolatileTtl,
            _ => return None,
        })
    }

    pub(crate) fn from_u32(v: u32) -> EvictionPolicy {
        match v {
            1 => EvictionPolicy::AllKeysLru,
            2 => EvictionPolicy::VolatileLru,
            3 => EvictionPolicy::AllKeysRandom,
            4 => EvictionPolicy::VolatileTtl,
            _ => EvictionPolicy::NoEviction,
        }
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru | EvictionPolicy::VolatileTtl
        )
    }
}

/// What one sweep slice did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Buckets visited.
    pub visited: u64,
    /// Expired keys removed.
    pub expired: u64,
}

impl Handle {
    /// Evicts one key by the segment's policy, like Redis's sampling
    /// approximation: look at `maxmemory-samples` keys from a random place and
    /// remove the best candidate. False when there is nothing to evict.
    pub(crate) fn evict_one(&mut self) -> Result<bool> {
        let policy = EvictionPolicy::from_u32(self.ctx.region().load32(H_POLICY)?);
        if policy == EvictionPolicy::NoEviction {
            return Ok(false);
        }
        if policy.volatile_only()
            && (0..NUM_DBS as u8)
                .try_fold(0, |n, db| Ok::<_, Error>(n + self.expires_count(db)?))?
                == 0
        {
            return Ok(false);
        }
        let samples = self.ctx.region().load32(H_SAMPLES)?.clamp(1, 64) as usize;
        let buckets = self.ctx.sh.geo.buckets;
        let now_s = self.lru_now();
        let mut seen: Vec<Seen> = Vec::new();
        for _attempt in 0..8 {
            let start = self.ctx.random() % buckets;
            let mut best: Option<(u64, u64, u64)> = None; // (score, bucket, entry)
            let mut sampled = 0;
            let mut visited = 0;
            while sampled < samples && visited < buckets {
                let bucket = index::bucket_at(&self.ctx, (start + visited) % buckets);
                visited += 1;
                self.scan_bucket(bucket, &mut seen)?;
                for s in &seen {
                    if policy.volatile_only() && s.raw.expire == 0 {
                        continue;
                    }
                    sampled += 1;
                    let score = match policy {
                        EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
                            now_s.wrapping_sub(s.raw.lru) as u64
                        }
                        EvictionPolicy::VolatileTtl => u64::MAX - s.raw.expire,
                        _ => self.ctx.random(),
                    };
                    if best.is_none_or(|(b, _, _)| score > b) {
                        best = Some((score, bucket, s.raw.off));
                    }
                }
            }
            let Some((_, bucket, off)) = best else {
                return Ok(false);
            };
            if self.evict_entry(bucket, off)? {
                return Ok(true);
            }
        }
        // Every candidate was busy: report progress anyway so the caller
        // retries its allocation (bounded by the caller).
        Ok(true)
    }

    fn evict_entry(&mut self, bucket: u64, off: u64) -> Result<bool> {
        if !self.ctx.try_lock(bucket)? {
            return Ok(false);
        }
        let res = (|| {
            let r = self.ctx.region();
            let mut hit = None;
            index::for_each_slot(r, bucket, |w, s| {
                if s & SLOT_OFF_MASK == off {
                    hit = Some(index::Found {
                        slot_word: w,
                        raw: crate::entry::Raw::read(r, off)?,
                    });
                }
                Ok(hit.is_some())
            })?;
            match hit {
                Some(f) => {
                    self.remove_locked(bucket, &f)?;
                    self.ctx.stat_add(Stat::Evicted, 1);
                    Ok(true)
                }
                None => Ok(false),
            }
        })();
        self.finish(&[bucket], res)
    }

    /// Runs one slice of the active expiry sweeper: visits up to `max_buckets`
    /// buckets from the shared cursor and removes the expired keys there. Any
    /// attached worker can call it; the cursor spreads the work among them.
    pub fn sweep_expired(&mut self, max_buckets: u64) -> Result<Sweep> {
        let buckets = self.ctx.sh.geo.buckets;
        let n = max_buckets.min(buckets);
        let start = self
            .ctx
            .region()
            .a64(H_SWEEP_CURSOR)?
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        let now = self.now_ms();
        let mut out = Sweep::default();
        for i in 0..n {
            let bucket = index::bucket_at(&self.ctx, (start + i) % buckets);
            out.visited += 1;
            out.expired +=
                self.remove_where(bucket, |raw| raw.expired(now), Some(Stat::Expired))?;
        }
        Ok(out)
    }
}
