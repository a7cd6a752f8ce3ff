//! Eviction by policy when memory is full, and the incremental active expiry
//! sweeper. Both sample the index lock-free and lock only the bucket of the key
//! they remove, with a try-lock, so they never wait on (or deadlock with) a
//! writer that is itself allocating.

use crate::error::Result;
use crate::ipc::keylog::KeyEvent;
use crate::keyspace::handle::Handle;
use crate::keyspace::index;
use crate::keyspace::keys::Seen;
use crate::keyspace::lfu;
use crate::segment::context::Stat;
use crate::segment::layout::*;

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
    /// Evict the least frequently used key of any kind (Redis's LFU counter,
    /// lfu.rs).
    AllKeysLfu = 5,
    /// Evict the least frequently used key among keys with an expiry.
    VolatileLfu = 6,
    /// Evict a random key among keys with an expiry.
    VolatileRandom = 7,
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
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
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
            "allkeys-lfu" => EvictionPolicy::AllKeysLfu,
            "volatile-lfu" => EvictionPolicy::VolatileLfu,
            "volatile-random" => EvictionPolicy::VolatileRandom,
            _ => return None,
        })
    }

    pub(crate) fn from_u32(v: u32) -> EvictionPolicy {
        match v {
            1 => EvictionPolicy::AllKeysLru,
            2 => EvictionPolicy::VolatileLru,
            3 => EvictionPolicy::AllKeysRandom,
            4 => EvictionPolicy::VolatileTtl,
            5 => EvictionPolicy::AllKeysLfu,
            6 => EvictionPolicy::VolatileLfu,
            7 => EvictionPolicy::VolatileRandom,
            _ => EvictionPolicy::NoEviction,
        }
    }

    /// Whether the policy evicts by access frequency: then reads keep each
    /// key's LFU counter (OBJECT FREQ answers it) and Redis stops reporting
    /// idle times.
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }

    /// Whether the policy orders keys by their own accesses (LRU or LFU):
    /// then Redis gives every small integer value an object of its own,
    /// where it shares one otherwise.
    pub fn tracks_access(self) -> bool {
        self.is_lfu()
            || matches!(
                self,
                EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru
            )
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileTtl
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
        )
    }
}

/// What one eviction attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evicted {
    /// A key was removed.
    One,
    /// Candidates exist but their buckets were locked by other writers.
    Busy,
    /// Nothing the policy allows to evict (or only the caller's own keys).
    Nothing,
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
    /// remove the best candidate that is not locked (by us or anyone).
    pub(crate) fn evict_one(&mut self) -> Result<Evicted> {
        let policy = EvictionPolicy::from_u32(self.ctx.region().load32(H_POLICY)?);
        if policy == EvictionPolicy::NoEviction {
            return Ok(Evicted::Nothing);
        }
        if policy.volatile_only() {
            // Physical counters: no db map resolution under a bucket lock
            // (I11); every db's in one pass over the contexts.
            let volatile: u64 = self
                .phys_counts(H_DB_EXPIRES_BASE, C_DB_EXPIRES)?
                .iter()
                .sum();
            if volatile == 0 {
                return Ok(Evicted::Nothing);
            }
        }
        let samples = self.ctx.region().load32(H_SAMPLES)?.clamp(1, 64) as usize;
        let buckets = self.ctx.sh.geo.buckets;
        let now_ms = self.now_ms();
        let now_s = (now_ms / 1000) as u32;
        let decay = match policy.is_lfu() {
            true => self.ctx.region().load32(H_LFU_DECAY_TIME)?,
            false => 0,
        };
        let mut seen: Vec<Seen> = Vec::new();
        // (score, bucket, entry): higher score evicts first.
        let mut candidates: Vec<(u64, u64, u64)> = Vec::new();
        let start = self.ctx.random() % buckets;
        let mut visited = 0;
        while candidates.len() < samples && visited < buckets {
            let bucket = index::bucket_at(&self.ctx, (start + visited) % buckets);
            visited += 1;
            self.scan_bucket(bucket, &mut seen)?;
            for s in &seen {
                if policy.volatile_only() && s.raw.expire == 0 {
                    continue;
                }
                let score = match policy {
                    EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
                        now_s.wrapping_sub(s.raw.lru) as u64
                    }
                    EvictionPolicy::VolatileTtl => u64::MAX - s.raw.expire,
                    // Least frequent first (Redis's 255 - counter); among
                    // equals, least recently used.
                    EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => {
                        let freq = lfu::decayed(s.raw.lfu, now_ms, decay);
                        (255 - freq as u64) << 32 | now_s.wrapping_sub(s.raw.lru) as u64
                    }
                    _ => self.ctx.random(),
                };
                candidates.push((score, bucket, s.raw.off));
            }
        }
        if candidates.is_empty() {
            return Ok(Evicted::Nothing);
        }
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        let mut busy = false;
        for (_, bucket, off) in candidates {
            if self.ctx.holds(bucket) {
                // The caller's own key (or its neighbour): never ours to evict.
                continue;
            }
            match self.evict_entry(bucket, off)? {
                Some(true) => return Ok(Evicted::One),
                Some(false) => {}
                None => busy = true,
            }
        }
        Ok(if busy {
            Evicted::Busy
        } else {
            Evicted::Nothing
        })
    }

    /// Removes entry `off` from `bucket` if it is still there: Some(true) if it
    /// was, Some(false) if it was gone, None if the bucket is locked.
    fn evict_entry(&mut self, bucket: u64, off: u64) -> Result<Option<bool>> {
        if !self.ctx.try_lock(bucket)? {
            return Ok(None);
        }
        if self.other_section_running()? {
            // Another context's section runs: its journal must find every
            // word as it left it (a writer blocked by it is waiting anyway).
            self.ctx.unlock(bucket)?;
            return Ok(None);
        }
        let res = (|| {
            let r = self.ctx.region();
            let mut hit = None;
            index::for_each_slot(r, bucket, |w, s| {
                if s & SLOT_OFF_MASK == off {
                    hit = Some(index::Found {
                        slot_word: w,
                        raw: crate::keyspace::entry::Raw::read(r, off)?,
                    });
                }
                Ok(hit.is_some())
            })?;
            match hit {
                Some(f) => {
                    // Freed now whatever lazyfree-lazy-eviction says: the
                    // writer evicts because it needs the memory at once, and
                    // a detached value would still hold it (every key would go).
                    let was = std::mem::replace(&mut self.lazy_now, false);
                    let removed = self.remove_locked(bucket, &f);
                    self.lazy_now = was;
                    removed?;
                    self.ctx.stat_add(Stat::Evicted, 1);
                    if self.key_log.removals {
                        self.log_entry(&f.raw, KeyEvent::Evicted);
                    }
                    Ok(Some(true))
                }
                None => Ok(Some(false)),
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
            // The cursor is a shared word: any value (a scribbled one too) wraps.
            let bucket = index::bucket_at(&self.ctx, start.wrapping_add(i) % buckets);
            out.visited += 1;
            out.expired +=
                self.remove_where(bucket, |raw| raw.expired(now), Some(Stat::Expired))?;
        }
        Ok(out)
    }
}
