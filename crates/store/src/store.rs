//! `Store`: one process's attachment to a segment, shared by its threads; the
//! place for segment-wide settings, figures and the consistency check.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::keyspace::entry::Raw;
use crate::keyspace::evict::EvictionPolicy;
use crate::keyspace::handle::Handle;
use crate::keyspace::index;
use crate::segment::alloc::{self, ArenaStats};
use crate::segment::context::{Ctx, RecoveryHooks, STATS, STAT_COUNT};
use crate::segment::layout::*;
use crate::segment::{self, OpenOptions, Shared};

/// How many times [`Store::arena_stats`] reads before it reports damage.
const ARENA_STATS_TRIES: u32 = 4;

/// An attached segment. Cheap to clone; every thread makes its own [`Handle`].
#[derive(Clone)]
pub struct Store {
    pub(crate) sh: Arc<Shared>,
}

/// Figures about a segment, for INFO and `shoal store info`.
#[derive(Clone, Debug)]
pub struct StoreInfo {
    /// The segment file.
    pub path: String,
    /// Segment size in bytes.
    pub segment_bytes: u64,
    /// Page size the segment was created for.
    pub page_bytes: u64,
    /// Index buckets (six slots each, plus overflow nodes).
    pub buckets: u64,
    /// Context slots and how many are attached.
    pub contexts: u32,
    /// Attached contexts.
    pub contexts_attached: u32,
    /// Arena figures.
    pub arena: ArenaStats,
    /// Keys and keys-with-expiry per db.
    pub keyspace: Vec<(u64, u64)>,
    /// Stat name and value, summed over contexts (live and retired).
    pub stats: Vec<(&'static str, u64)>,
    /// Eviction policy in force.
    pub policy: EvictionPolicy,
    /// Memory limit for the arena (0 = the whole arena).
    pub maxmemory: u64,
}

/// What the consistency check counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Keys reachable from the index.
    pub keys: u64,
    /// Overflow nodes linked from buckets.
    pub nodes: u64,
    /// Used blocks in the arena.
    pub used_blocks: u64,
    /// Free blocks in the arena.
    pub free_blocks: u64,
}

impl Store {
    /// Creates or attaches a segment.
    pub fn open(opts: &OpenOptions) -> Result<Store> {
        let hooks = RecoveryHooks {
            log: Ctx::salvage_log,
            collections: crate::collections::paged::salvage_chains,
        };
        let sh = Arc::new(segment::open(opts, hooks)?);
        Ok(Store { sh })
    }

    /// Registers a context for the calling thread. On attach, dead contexts
    /// left by crashed processes are recovered first.
    pub fn handle(&self) -> Result<Handle> {
        let mut h = Handle {
            ctx: Ctx::register(self.sh.clone())?,
            frozen_ms: None,
            key_log: Default::default(),
            log: Default::default(),
            keep_expired: false,
            ignore_maxmemory: false,
            lazy_now: false,
            lazy_policy: Default::default(),
        };
        h.finish_interrupted_flush()?;
        Ok(h)
    }

    /// The transaction log's shared state (log/ring.rs).
    pub fn log_ring(&self) -> crate::log::LogRing {
        crate::log::LogRing::new(self.sh.clone())
    }

    /// The log's positions and settings (INFO, CONFIG GET).
    pub fn log_status(&self) -> crate::log::LogStatus {
        self.log_ring().status()
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        &self.sh.path
    }

    /// Whether this `open` created the segment (false: attached an existing one).
    pub fn created(&self) -> bool {
        self.sh.created
    }

    /// Sets the eviction policy for every process attached.
    pub fn set_eviction_policy(&self, policy: EvictionPolicy) -> Result<()> {
        self.sh.region.store32(H_POLICY, policy as u32)
    }

    /// The eviction policy in force.
    pub fn eviction_policy(&self) -> Result<EvictionPolicy> {
        Ok(EvictionPolicy::from_u32(self.sh.region.load32(H_POLICY)?))
    }

    /// Whether the arena and the clients' buffers hold more than
    /// `maxmemory` (never with no limit):
    /// Redis refuses commands that may grow memory (`denyoom`) then, under
    /// `noeviction`, before they run.
    pub fn over_maxmemory(&self) -> Result<bool> {
        let r = &self.sh.region;
        let max = r.load64(H_MAXMEMORY)?;
        Ok(max != 0
            && r.load64(A_USED_BYTES)?
                .saturating_add(crate::ipc::workers::clients_memory_in(r)?)
                > max)
    }

    /// The arena memory limit in bytes (0 = the whole arena).
    pub fn maxmemory(&self) -> Result<u64> {
        self.sh.region.load64(H_MAXMEMORY)
    }

    /// Sets the arena memory limit in bytes (0 = the whole arena).
    pub fn set_maxmemory(&self, bytes: u64) -> Result<()> {
        self.sh.region.store64(H_MAXMEMORY, bytes)
    }

    /// Sets how many keys eviction samples (Redis's `maxmemory-samples`).
    pub fn set_eviction_samples(&self, n: u32) -> Result<()> {
        self.sh.region.store32(H_SAMPLES, n.clamp(1, 64))
    }

    /// Sets Redis's `lfu-log-factor` for every process attached: how many
    /// accesses it takes to raise an LFU counter (higher: more).
    pub fn set_lfu_log_factor(&self, factor: u32) -> Result<()> {
        self.sh.region.store32(H_LFU_LOG_FACTOR, factor)
    }

    /// Redis's `lfu-log-factor` in force.
    pub fn lfu_log_factor(&self) -> Result<u32> {
        self.sh.region.load32(H_LFU_LOG_FACTOR)
    }

    /// Sets Redis's `lfu-decay-time` for every process attached: minutes
    /// an idle key's LFU counter takes to lose one (0: never).
    pub fn set_lfu_decay_time(&self, minutes: u32) -> Result<()> {
        self.sh.region.store32(H_LFU_DECAY_TIME, minutes)
    }

    /// Redis's `lfu-decay-time` in force, in minutes.
    pub fn lfu_decay_time(&self) -> Result<u32> {
        self.sh.region.load32(H_LFU_DECAY_TIME)
    }

    /// Buckets of the index (how much work a full pass of the sweeper is).
    pub fn bucket_count(&self) -> u64 {
        self.sh.geo.buckets
    }

    /// How many keys eviction samples.
    pub fn eviction_samples(&self) -> Result<u32> {
        self.sh.region.load32(H_SAMPLES)
    }

    /// Arena figures. They are read without locks while other processes
    /// allocate, so a free block can change under the read and look
    /// damaged: a failed read is tried again, and only damage seen on
    /// every try is reported.
    pub fn arena_stats(&self) -> Result<ArenaStats> {
        let mut tries = 0;
        loop {
            match alloc::stats(&self.sh.region, &self.sh.geo) {
                Ok(stats) => return Ok(stats),
                Err(e) if tries + 1 >= ARENA_STATS_TRIES => return Err(e),
                Err(_) => {
                    tries += 1;
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Everything `shoal store info` prints.
    pub fn info(&self) -> Result<StoreInfo> {
        let r = &self.sh.region;
        let geo = &self.sh.geo;
        let mut stats = [0u64; STAT_COUNT];
        let mut attached = 0;
        let mut keyspace = vec![(0i64, 0i64); NUM_DBS];
        for (db, ks) in keyspace.iter_mut().enumerate() {
            ks.0 = r.load64(H_DB_KEYS_BASE + 8 * db as u64)? as i64;
            ks.1 = r.load64(H_DB_EXPIRES_BASE + 8 * db as u64)? as i64;
        }
        for (i, s) in stats.iter_mut().enumerate() {
            *s = r.load64(H_RETIRED_STATS + 8 * i as u64)?;
        }
        for c in 0..geo.ctx_count as u64 {
            let off = geo.ctx_off + c * CTX_SIZE;
            if r.load64(off + C_STATE)? >> 56 != 0 {
                attached += 1;
            }
            for (i, s) in stats.iter_mut().enumerate() {
                *s = s.wrapping_add(r.load64(off + C_STATS + 8 * i as u64)?);
            }
            for (db, ks) in keyspace.iter_mut().enumerate() {
                ks.0 =
                    ks.0.wrapping_add(r.load64(off + C_DB_KEYS + 8 * db as u64)? as i64);
                ks.1 =
                    ks.1.wrapping_add(r.load64(off + C_DB_EXPIRES + 8 * db as u64)? as i64);
            }
        }
        Ok(StoreInfo {
            path: self.sh.path.display().to_string(),
            segment_bytes: geo.seg_size,
            page_bytes: r.load64(H_PAGE_SIZE)?,
            buckets: geo.buckets,
            contexts: geo.ctx_count,
            contexts_attached: attached,
            arena: self.arena_stats()?,
            keyspace: {
                // Reported by logical db (I11); counters are kept per physical db.
                let map = r.load64(H_DB_MAP)?;
                let map = if crate::keyspace::dbmap::valid_map(map) {
                    map
                } else {
                    0
                };
                let view = crate::keyspace::dbmap::DbView { gen: 0, map };
                (0..NUM_DBS as u8)
                    .map(|db| keyspace[view.phys(db) as usize])
                    .map(|(k, e)| (k.max(0) as u64, e.max(0) as u64))
                    .collect()
            },
            stats: STATS
                .iter()
                .map(|s| (s.name(), stats[*s as usize]))
                .collect(),
            policy: self.eviction_policy()?,
            maxmemory: r.load64(H_MAXMEMORY)?,
        })
    }

    /// Checks every invariant that holds when no writer is active: no lock
    /// held, every seqlock even, every used block referenced exactly once from
    /// the index, every free block on the right free list, and the counters
    /// (bytes, blocks, keys per db) equal to what is there. Recover dead
    /// contexts (attach a handle) before calling it.
    pub fn check(&self) -> Result<CheckReport> {
        let r = &self.sh.region;
        let geo = &self.sh.geo;
        let mut used = HashMap::new();
        let mut free = Vec::new();
        let (mut used_bytes, mut free_bytes) = (0, 0);
        alloc::walk(r, geo, |b, size, is_free| {
            if is_free {
                free.push(b);
                free_bytes += size;
            } else {
                used.insert(b, false);
                used_bytes += size;
            }
        })?;
        let mut listed = alloc::free_list_blocks(r)?;
        listed.sort_unstable();
        if listed != free {
            return fail(
                A_FL_BITMAP,
                "free lists differ from the free blocks in the arena",
            );
        }
        let a = self.arena_stats()?;
        if a.used_bytes != used_bytes
            || a.free_bytes != free_bytes
            || a.used_blocks != used.len() as u64
            || a.free_blocks != free.len() as u64
        {
            return fail(A_USED_BYTES, &format!("arena counters {a:?} differ from the arena ({used_bytes} used bytes in {} blocks, {free_bytes} free bytes in {} blocks)", used.len(), free.len()));
        }
        for lock in [H_ALLOC_LOCK, H_ADMIN_LOCK, H_DB_MAP_LOCK] {
            if r.load32(lock)? != 0 {
                return fail(lock, "lock held");
            }
        }
        if r.load32(H_DB_MAP_LOCK + B_SEQ)? & 1 != 0 {
            return fail(H_DB_MAP_LOCK, "db map generation odd");
        }
        let map = r.load64(H_DB_MAP)?;
        if !crate::keyspace::dbmap::valid_map(map) {
            return fail(H_DB_MAP, "db map is not a permutation");
        }
        let view = crate::keyspace::dbmap::DbView { gen: 0, map };
        let mut report = CheckReport {
            used_blocks: used.len() as u64,
            free_blocks: free.len() as u64,
            ..CheckReport::default()
        };
        let mut keys = [0i64; NUM_DBS];
        let mut expires = [0i64; NUM_DBS];
        let mut claim = |blk: u64, what: &str| -> Result<()> {
            match used.get_mut(&blk) {
                Some(seen @ false) => {
                    *seen = true;
                    Ok(())
                }
                Some(true) => fail(blk, &format!("{what} referenced twice")),
                None => fail(blk, &format!("{what} is not a used block")),
            }
        };
        let probe = ProbeGeo { sh: &self.sh };
        for i in 0..geo.buckets {
            let bucket = geo.index_off + i * BUCKET_SIZE;
            if r.load32(bucket + B_LOCK)? != 0 {
                return fail(bucket, "bucket lock held");
            }
            if r.load32(bucket + B_SEQ)? & 1 != 0 {
                return fail(bucket, "bucket seqlock odd");
            }
            let mut node = r.load_ptr(bucket + B_NODE + N_NEXT)?;
            while node != 0 {
                claim(node, "overflow node")?;
                report.nodes += 1;
                node = r.load_ptr(node + 8 + N_NEXT)?;
            }
            let mut bad = None;
            index::for_each_slot(r, bucket, |w, s| {
                let off = s & SLOT_OFF_MASK;
                let raw = Raw::read(r, off)?;
                let mut key = Vec::new();
                r.read_bytes(off + E_KEY, raw.keylen, &mut key)?;
                let pos = probe.key_pos(raw.db, &key);
                if pos.bucket != bucket
                    || pos.tag() != s & !SLOT_OFF_MASK
                    || raw.db as usize >= NUM_DBS
                {
                    bad = Some(w);
                    return Ok(true);
                }
                keys[raw.db as usize] += 1;
                expires[raw.db as usize] += (raw.expire != 0) as i64;
                claim(off, "entry")?;
                crate::collections::paged::owned_blocks(r, &raw, &mut |b| claim(b, "tree node"))?;
                Ok(false)
            })?;
            if let Some(w) = bad {
                return fail(w, "entry in the wrong bucket or with a bad tag");
            }
        }
        for c in 0..geo.ctx_count as u64 {
            for i in 0..STASH_CAP {
                let blk = r.load_ptr(geo.ctx_off + c * CTX_SIZE + C_STASH + 8 * i)?;
                if blk != 0 {
                    claim(blk, "stashed block")?;
                }
            }
            let spare = r.load_ptr(geo.ctx_off + c * CTX_SIZE + C_JOURNAL_SPARE)?;
            if spare != 0 {
                claim(spare, "spare journal chunk")?;
            }
            let lazy = geo.ctx_off + c * CTX_SIZE + C_LAZY_CHAIN;
            crate::collections::paged::lazy_blocks(r, lazy, &mut |b| {
                claim(b, "lazily freed tree node")
            })?;
        }
        if let Some((b, _)) = used.iter().find(|(_, seen)| !**seen) {
            return fail(*b, "used block referenced by nothing (leaked)");
        }
        let info = self.info()?;
        for db in 0..NUM_DBS {
            // info() reports logical dbs; the entries carry physical ones.
            let p = view.phys(db as u8) as usize;
            report.keys += keys[p] as u64;
            if info.keyspace[db] != (keys[p] as u64, expires[p] as u64) {
                return fail(
                    H_DB_KEYS_BASE,
                    &format!(
                        "db {db} (physical {p}) counters {:?} differ from the index ({}, {})",
                        info.keyspace[db], keys[p], expires[p]
                    ),
                );
            }
        }
        Ok(report)
    }
}

fn fail<T>(off: u64, what: &str) -> Result<T> {
    Err(Error::Attach(format!("check failed at {off:#x}: {what}")))
}

/// Hashing without a context (the checker has none).
struct ProbeGeo<'a> {
    sh: &'a Shared,
}

impl ProbeGeo<'_> {
    fn key_pos(&self, db: u8, key: &[u8]) -> index::KeyPos {
        index::key_pos_in(&self.sh.geo, db, key)
    }
}
