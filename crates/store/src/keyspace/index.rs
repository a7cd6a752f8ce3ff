//! The hash index: a fixed table of 64-byte buckets, each a lock word, a seqlock
//! word and a chain node of six slots, with overflow nodes in the arena. The
//! home bucket's lock guards its whole chain (I3); readers never take it: they
//! walk the chain and re-check the seqlock word (I4).

use std::sync::atomic::{fence, Ordering};

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::error::{Error, Result};
use crate::keyspace::entry::Raw;
use crate::segment::context::{Backoff, Ctx, Stat};
use crate::segment::layout::*;
use crate::segment::shm::Region;
use crate::segment::Geometry;

/// Longest chain a walk follows before calling the segment corrupted.
const MAX_CHAIN_NODES: u32 = 1 << 20;

/// Where a key hashes to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyPos {
    pub hash: u64,
    pub bucket: u64,
}

impl KeyPos {
    pub fn tag(&self) -> u64 {
        (self.hash & 0xFFFF) << 48
    }
}

pub(crate) fn key_pos(ctx: &Ctx, db: u8, key: &[u8]) -> KeyPos {
    key_pos_in(&ctx.sh.geo, db, key)
}

pub(crate) fn key_pos_in(geo: &Geometry, db: u8, key: &[u8]) -> KeyPos {
    let hash = xxh3_64_with_seed(key, 0x5ead_0000 ^ db as u64);
    let idx = ((hash as u128 * geo.buckets as u128) >> 64) as u64;
    KeyPos {
        hash,
        bucket: geo.index_off + idx * BUCKET_SIZE,
    }
}

pub(crate) fn bucket_at(ctx: &Ctx, idx: u64) -> u64 {
    ctx.sh.geo.index_off + idx * BUCKET_SIZE
}

/// Calls `f(slot_word, slot)` for each occupied slot of the chain at `bucket`
/// until `f` returns true.
pub(crate) fn for_each_slot(
    r: &Region,
    bucket: u64,
    mut f: impl FnMut(u64, u64) -> Result<bool>,
) -> Result<()> {
    let mut node = bucket + B_NODE;
    let mut nodes = 0;
    loop {
        for i in 0..SLOTS {
            let w = node + N_SLOTS + 8 * i;
            let s = r.load64(w)?;
            if s != 0 && f(w, s)? {
                return Ok(());
            }
        }
        let next = r.load_ptr(node + N_NEXT)?;
        if next == 0 {
            return Ok(());
        }
        node = next + 8;
        nodes += 1;
        if nodes > MAX_CHAIN_NODES {
            return Err(Error::Corrupted(bucket));
        }
    }
}

/// Whether the entry at `off` is `key` in `db`.
pub(crate) fn entry_is(r: &Region, off: u64, db: u8, key: &[u8]) -> Result<bool> {
    let lens = r.load64(off + E_KEYLEN)?;
    if lens & 0xFFFF_FFFF != key.len() as u64 {
        return Ok(false);
    }
    if (r.load64(off + E_KIND)? >> 8) as u8 != db {
        return Ok(false);
    }
    r.bytes_eq(off + E_KEY, key)
}

/// A located key: the slot word that points to it and its fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub slot_word: u64,
    pub raw: Raw,
}

/// Prefetches, for each slot of the home node of `pos` carrying its tag,
/// the entry's first cache line and the one `at` bytes in (no lock, no
/// seqlock: a stale slot only wastes a prefetch).
pub(crate) fn prefetch_tagged(r: &Region, pos: &KeyPos, at: u64) {
    let tag = pos.tag();
    for i in 0..SLOTS {
        let Ok(s) = r.load64(pos.bucket + B_NODE + N_SLOTS + 8 * i) else {
            return;
        };
        if s != 0 && s & !SLOT_OFF_MASK == tag {
            let off = s & SLOT_OFF_MASK;
            r.prefetch(off);
            r.prefetch(off.saturating_add(at));
        }
    }
}

/// Finds `key` in the chain of `pos` (caller holds the lock or validates).
pub(crate) fn find(r: &Region, pos: &KeyPos, db: u8, key: &[u8]) -> Result<Option<Found>> {
    let tag = pos.tag();
    let mut found = None;
    for_each_slot(r, pos.bucket, |w, s| {
        if s & !SLOT_OFF_MASK == tag {
            let off = s & SLOT_OFF_MASK;
            if entry_is(r, off, db, key)? {
                found = Some(Found {
                    slot_word: w,
                    raw: Raw::read(r, off)?,
                });
                return Ok(true);
            }
        }
        Ok(false)
    })?;
    Ok(found)
}

/// Runs `read` under the bucket's seqlock until it sees a stable chain: no
/// lock taken, so readers in different processes never block each other. A
/// writer that died with the seqlock odd is recovered by the waiting reader.
pub(crate) fn read_stable<T>(
    ctx: &mut Ctx,
    bucket: u64,
    mut read: impl FnMut(&Region) -> Result<T>,
) -> Result<T> {
    let mut backoff = Backoff::new();
    loop {
        let r = &ctx.sh.region;
        let seq = r.a32(bucket + B_SEQ)?;
        let s1 = seq.load(Ordering::Acquire);
        if s1 & 1 == 0 {
            let res = read(r);
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return res;
            }
        }
        ctx.stat_add(Stat::ReadRetries, 1);
        if backoff.snooze() {
            let owner = ctx.region().load32(bucket + B_LOCK)?;
            if owner != 0 {
                ctx.check_holder(bucket, owner)?;
            } else {
                ctx.repair_stale_seq(bucket)?;
            }
        }
    }
}

/// Makes sure the chain of `bucket` has an empty slot, linking a new overflow
/// node (allocated beforehand into `node_pending`) if needed. Returns the empty
/// slot's word. Runs inside the caller's transaction.
pub(crate) fn empty_slot(ctx: &mut Ctx, bucket: u64) -> Result<Option<u64>> {
    let r = ctx.region();
    let mut node = bucket + B_NODE;
    let mut nodes = 0;
    loop {
        for i in 0..SLOTS {
            let w = node + N_SLOTS + 8 * i;
            if r.load64(w)? == 0 {
                return Ok(Some(w));
            }
        }
        let next = r.load_ptr(node + N_NEXT)?;
        if next == 0 {
            return Ok(None);
        }
        node = next + 8;
        nodes += 1;
        if nodes > MAX_CHAIN_NODES {
            return Err(Error::Corrupted(bucket));
        }
    }
}

/// Links the zeroed overflow block `blk` at the end of the chain of `bucket`
/// (in the caller's transaction) and returns its first slot word.
pub(crate) fn link_node(ctx: &mut Ctx, bucket: u64, blk: u64) -> Result<u64> {
    let mut node = bucket + B_NODE;
    loop {
        let next = ctx.region().load_ptr(node + N_NEXT)?;
        if next == 0 {
            break;
        }
        node = next + 8;
    }
    ctx.wlog64(node + N_NEXT, blk)?;
    Ok(blk + 8 + N_SLOTS)
}

/// After a slot of `bucket`'s chain was cleared: unlinks the first empty
/// overflow node, if any, and returns its block for freeing. In the caller's
/// transaction.
pub(crate) fn unlink_empty_node(ctx: &mut Ctx, bucket: u64) -> Result<Option<u64>> {
    let mut node = bucket + B_NODE;
    loop {
        let next = ctx.region().load_ptr(node + N_NEXT)?;
        if next == 0 {
            return Ok(None);
        }
        let child = next + 8;
        let mut empty = true;
        for i in 0..SLOTS {
            if ctx.region().load64(child + N_SLOTS + 8 * i)? != 0 {
                empty = false;
                break;
            }
        }
        if empty {
            let after = ctx.region().load_ptr(child + N_NEXT)?;
            ctx.wlog64(node + N_NEXT, after)?;
            return Ok(Some(next));
        }
        node = child;
    }
}
