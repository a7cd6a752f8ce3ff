//! The arena allocator: TLSF (two-level segregated fit) with boundary tags, so
//! allocation and free are O(1) and freed neighbours coalesce. All of its state
//! lives in the segment header and in the blocks themselves, guarded by one lock
//! and changed only through the owner's undo log, so a process killed inside
//! `alloc` or `free` leaves nothing half-linked (docs/design.md I5, I9).
//!
//! A block starts with one header word: `size | FREE | PREV_FREE`, size in
//! bytes including the header, a multiple of 8, at least 32. A free block also
//! holds `next` and `prev` free-list links at +8 and +16 and its size again in
//! its last word (the footer), which lets `free` find a free left neighbour.
//! A used header of size 0 closes the arena.

use crate::error::{Error, Result};
use crate::segment::context::Ctx;
use crate::segment::journal::SectionFree;
use crate::segment::layout::*;
use crate::segment::shm::Region;
use crate::segment::Geometry;

const FREE: u64 = 1;
const PREV_FREE: u64 = 2;
const FLAGS: u64 = 7;
/// Smallest block: header, two links and a footer.
pub(crate) const MIN_BLOCK: u64 = 32;
const SMALL: u64 = 1 << (SL_BITS + 3);

/// Size of the block that holds `payload` bytes.
pub(crate) fn block_size_for(payload: u64) -> u64 {
    align_up(payload + 8, 8).max(MIN_BLOCK)
}

fn mapping(size: u64) -> (u64, u64) {
    if size < SMALL {
        (0, size / 8)
    } else {
        let f = 63 - size.leading_zeros() as u64;
        (
            (f - 6).min(FL_COUNT - 1),
            (size >> (f - SL_BITS)) & (SL_COUNT - 1),
        )
    }
}

/// The class whose every block fits `size`.
fn mapping_search(size: u64) -> (u64, u64) {
    if size < SMALL {
        return mapping(size);
    }
    let f = 63 - size.leading_zeros() as u64;
    mapping(size + (1 << (f - SL_BITS)) - 1)
}

fn head_word(fl: u64, sl: u64) -> u64 {
    A_HEADS + 8 * (fl * SL_COUNT + sl)
}

/// Lays out an empty arena in a segment being created (no other process can
/// see it yet, so no undo log).
pub(crate) fn init(region: &Region, geo: &Geometry) -> Result<()> {
    let start = geo.arena_off;
    let size = arena_capacity(geo);
    let end = start + size;
    region.store64(end, 0)?;
    region.store64(start, size | FREE)?;
    region.store64(start + 8, 0)?;
    region.store64(start + 16, 0)?;
    region.store64(end - 8, size)?;
    let (fl, sl) = mapping(size);
    region.store64(head_word(fl, sl), start)?;
    region.store64(A_FL_BITMAP, 1 << fl)?;
    region.store64(A_SL_BITMAPS + 8 * fl, 1 << sl)?;
    region.store64(A_FREE_BLOCKS, 1)?;
    Ok(())
}

/// Allocates a block with room for `payload` bytes and records it in the
/// context word `pending` in the same transaction; None when no free block is
/// big enough (the caller may evict and retry).
pub(crate) fn alloc(ctx: &mut Ctx, payload: u64, pending: u64) -> Result<Option<u64>> {
    let need = block_size_for(payload);
    ctx.lock(H_ALLOC_LOCK)?;
    let got = alloc_locked(ctx, need, pending);
    let done = got.and_then(|b| {
        ctx.commit()?;
        Ok(b)
    });
    ctx.unlock(H_ALLOC_LOCK)?;
    done
}

fn alloc_locked(ctx: &mut Ctx, need: u64, pending: u64) -> Result<Option<u64>> {
    ctx.mark_private();
    let (fl, sl) = mapping_search(need);
    if fl >= FL_COUNT {
        return Ok(None);
    }
    let found = match find_suitable(ctx.region(), fl, sl)? {
        Some(b) => Some(b),
        // Every block of a larger class fits; none does. A block of the
        // request's own class may still be big enough: look at a few, so a
        // full arena can still reuse exactly the space a free just made.
        None => first_fit_in_class(ctx.region(), need)?,
    };
    let Some(blk) = found else {
        return Ok(None);
    };
    let (bsize, flags) = ctx.region().load_block_header(blk)?;
    let hdr = bsize | flags;
    if hdr & FREE == 0 || bsize < need {
        return Err(Error::Corrupted(blk));
    }
    remove_free(ctx, blk, bsize)?;
    let mut used = bsize;
    if bsize - need >= MIN_BLOCK {
        used = need;
        let rem = blk + need;
        ctx.wlog64(rem, (bsize - need) | FREE)?;
        insert_free(ctx, rem, bsize - need)?;
    } else {
        add(ctx, A_FREE_BLOCKS, -1)?;
        let next = blk + bsize;
        let nh = ctx.region().load64(next)?;
        ctx.wlog64(next, nh & !PREV_FREE)?;
    }
    ctx.wlog64(blk, used | (hdr & PREV_FREE))?;
    add(ctx, A_USED_BYTES, used as i64)?;
    add(ctx, A_USED_BLOCKS, 1)?;
    ctx.wlog64(pending, blk)?;
    ctx.journal_new(blk)?;
    Ok(Some(blk))
}

/// Allocates blocks of `sizes` payload bytes, as many as fit the arena
/// and `maxmem` (0 = no limit), and chains each on the context word
/// `chain` through its first payload word, a few per transaction (the
/// undo log holds a few allocations): tree nodes (collections/paged.rs).
/// Returns the blocks, fewer than asked when the arena is full.
pub(crate) fn alloc_chained(
    ctx: &mut Ctx,
    sizes: &[u64],
    chain: u64,
    maxmem: u64,
) -> Result<Vec<u64>> {
    const PER_TXN: usize = 6;
    let mut out = Vec::with_capacity(sizes.len());
    for batch in sizes.chunks(PER_TXN) {
        ctx.lock(H_ALLOC_LOCK)?;
        let res = (|| {
            let mut full = false;
            for &payload in batch {
                let need = block_size_for(payload);
                if maxmem != 0 && ctx.region().load64(A_USED_BYTES)?.saturating_add(need) > maxmem {
                    full = true;
                    break;
                }
                let head = ctx.region().load64(chain)?;
                match alloc_locked(ctx, need, chain)? {
                    Some(blk) => {
                        ctx.wlog64(blk + 8, head)?;
                        out.push(blk);
                    }
                    None => {
                        full = true;
                        break;
                    }
                }
            }
            ctx.commit()?;
            Ok(full)
        })();
        ctx.unlock(H_ALLOC_LOCK)?;
        if res? {
            break;
        }
    }
    Ok(out)
}

/// Frees up to a few blocks of the chain at context word `word` (each
/// block's first payload word links the next) in one transaction; returns
/// how many it freed (0: the chain is empty).
pub(crate) fn free_chained(ctx: &mut Ctx, word: u64) -> Result<usize> {
    const PER_TXN: usize = 6;
    if ctx.region().load_ptr(word)? == 0 {
        return Ok(0);
    }
    ctx.lock(H_ALLOC_LOCK)?;
    let res = (|| {
        let mut n = 0;
        while n < PER_TXN {
            let blk = ctx.region().load_ptr(word)?;
            if blk == 0 {
                break;
            }
            // A damaged link ends the chain: leaking the rest beats failing.
            let next = ctx.region().load_ptr(blk + 8).unwrap_or(0);
            free_locked(ctx, blk, word, next)?;
            n += 1;
        }
        ctx.commit()?;
        Ok(n)
    })();
    ctx.unlock(H_ALLOC_LOCK)?;
    res
}

/// Blocks up to this size go to the freeing context's stash (I10).
const STASH_MAX_BLOCK: u64 = 512;

/// Takes a block for `payload` bytes from the context's own stash, recording
/// it in `pending`: no shared lock at all (I10). None when no stashed block
/// fits within less than a minimum block of waste.
pub(crate) fn stash_take(ctx: &mut Ctx, payload: u64, pending: u64) -> Result<Option<u64>> {
    let need = block_size_for(payload);
    // Inside an exclusive section every allocation is recorded (journal.rs).
    if need > STASH_MAX_BLOCK || ctx.journaling() {
        return Ok(None);
    }
    let Some(i) = ctx
        .stash
        .iter()
        .position(|&(b, size)| b != 0 && size >= need && size - need < MIN_BLOCK)
    else {
        return Ok(None);
    };
    let blk = ctx.stash[i].0;
    ctx.wlog64(pending, blk)?;
    ctx.wlog64(ctx.off + C_STASH + 8 * i as u64, 0)?;
    ctx.mark_private();
    ctx.commit()?;
    ctx.stash[i] = (0, 0);
    Ok(Some(blk))
}

/// Keeps a small freed block in the context's stash for its next allocation
/// of that size, clearing `pending` in the same transaction. False when the
/// block is too big or the stash is full (the caller frees it for real).
pub(crate) fn stash_put(ctx: &mut Ctx, blk: u64, pending: u64) -> Result<bool> {
    if ctx.journaling() {
        // A section's frees wait for its end (journal.rs).
        return Ok(false);
    }
    let (size, flags) = ctx.region().load_block_header(blk)?;
    if !(MIN_BLOCK..=STASH_MAX_BLOCK).contains(&size)
        || flags & FREE != 0
        || blk < ctx.sh.geo.arena_off
    {
        return Ok(false);
    }
    let Some(i) = ctx.stash.iter().position(|&(b, _)| b == 0) else {
        return Ok(false);
    };
    ctx.wlog64(ctx.off + C_STASH + 8 * i as u64, blk)?;
    ctx.wlog64(pending, 0)?;
    ctx.mark_private();
    ctx.commit()?;
    ctx.stash[i] = (blk, size);
    Ok(true)
}

/// Frees every block of the context's stash, and the spare journal chunk
/// its last exclusive section kept, into the shared arena (before evicting
/// anything, and when the context leaves).
pub(crate) fn stash_flush(ctx: &mut Ctx) -> Result<()> {
    // Stashed blocks belong to no key: freed for real even in a section.
    ctx.unjournaled(|ctx| {
        for i in 0..STASH_CAP {
            if ctx.stash[i as usize].0 != 0 {
                let blk = ctx.stash[i as usize].0;
                free(ctx, blk, ctx.off + C_STASH + 8 * i)?;
                ctx.stash[i as usize] = (0, 0);
            }
        }
        let spare = ctx.off + C_JOURNAL_SPARE;
        match ctx.region().load64(spare)? {
            0 => Ok(()),
            blk => free(ctx, blk, spare),
        }
    })
}

/// Frees the block at `blk` and clears the context word `pending` that named
/// it, in one transaction.
pub(crate) fn free(ctx: &mut Ctx, blk: u64, pending: u64) -> Result<()> {
    free_setting(ctx, blk, pending, 0)
}

/// Frees the block at `blk` and sets `word` (which named it) to `value` in
/// one transaction: freeing a chain (`value` is the next link) or a tree
/// leaf-first (`word` is the parent's child pointer) stays restartable.
pub(crate) fn free_setting(ctx: &mut Ctx, blk: u64, word: u64, value: u64) -> Result<()> {
    ctx.lock(H_ALLOC_LOCK)?;
    let done = free_locked(ctx, blk, word, value).and_then(|_| ctx.commit());
    ctx.unlock(H_ALLOC_LOCK)?;
    done
}

fn free_locked(ctx: &mut Ctx, blk: u64, pending: u64, value: u64) -> Result<()> {
    match ctx.section_free(blk) {
        SectionFree::Now => {}
        SectionFree::Deferred => {
            // From before the section: a rollback needs it (journal.rs).
            ctx.journal_defer_free(blk, pending, value)?;
            return Ok(());
        }
        SectionFree::NewInSection(rec) => {
            // Allocated in the section: the word that named it changes in a
            // journaled transaction, then the block goes back to the arena
            // in one of its own that also settles its `NEW` record (a crash
            // between the two: the rollback frees it by that record).
            ctx.wlog64(pending, value)?;
            ctx.commit()?;
            ctx.mark_private();
            free_block_locked(ctx, blk)?;
            ctx.journal_settle_new(blk, rec)?;
            return ctx.commit();
        }
    }
    ctx.mark_private();
    free_block_locked(ctx, blk)?;
    ctx.wlog64(pending, value)
}

/// Returns `blk` to the arena (coalescing with free neighbours), inside the
/// open transaction, which holds the allocator lock.
fn free_block_locked(ctx: &mut Ctx, blk: u64) -> Result<()> {
    let geo = ctx.sh.geo;
    let arena_end = geo.arena_off + geo.arena_size;
    let r = ctx.region();
    let (size, flags) = r.load_block_header(blk)?;
    let hdr = size | flags;
    if blk < geo.arena_off || hdr & FREE != 0 || size < MIN_BLOCK || blk + size >= arena_end {
        return Err(Error::Corrupted(blk));
    }
    let mut start = blk;
    let mut total = size;
    // Free blocks: +1 for this one, -1 for each neighbour it absorbs.
    let mut free_blocks = 1;
    let next = blk + size;
    let (nsize, nflags) = r.load_block_header(next)?;
    if nflags & FREE != 0 {
        remove_free(ctx, next, nsize)?;
        total += nsize;
        free_blocks -= 1;
    }
    if hdr & PREV_FREE != 0 {
        let (psize, _) = ctx.region().load_block_header(blk - 8)?;
        let prev = blk.checked_sub(psize).ok_or(Error::Corrupted(blk))?;
        let ph = ctx.region().load64(prev)?;
        if prev < geo.arena_off || ph & FREE == 0 || ph & !FLAGS != psize {
            return Err(Error::Corrupted(prev));
        }
        remove_free(ctx, prev, psize)?;
        start = prev;
        total += psize;
        free_blocks -= 1;
    }
    ctx.wlog64(start, total | FREE)?;
    insert_free(ctx, start, total)?;
    add(ctx, A_USED_BYTES, -(size as i64))?;
    add(ctx, A_USED_BLOCKS, -1)?;
    add(ctx, A_FREE_BLOCKS, free_blocks)
}

fn add(ctx: &mut Ctx, word: u64, delta: i64) -> Result<()> {
    if delta == 0 {
        return Ok(());
    }
    let v = ctx.region().load64(word)?;
    ctx.wlog64(word, v.wrapping_add(delta as u64))
}

fn find_suitable(r: &Region, fl: u64, sl: u64) -> Result<Option<u64>> {
    let mut fl = fl;
    let mut sl_map = r.load64(A_SL_BITMAPS + 8 * fl)? & (!0u64 << sl);
    if sl_map == 0 {
        let above = if fl + 1 >= 64 { 0 } else { !0u64 << (fl + 1) };
        let fl_map = r.load64(A_FL_BITMAP)? & above;
        if fl_map == 0 {
            return Ok(None);
        }
        fl = fl_map.trailing_zeros() as u64;
        if fl >= FL_COUNT {
            return Err(Error::Corrupted(A_FL_BITMAP));
        }
        sl_map = r.load64(A_SL_BITMAPS + 8 * fl)?;
    }
    if sl_map == 0 {
        return Err(Error::Corrupted(A_SL_BITMAPS + 8 * fl));
    }
    let sl = sl_map.trailing_zeros() as u64;
    if sl >= SL_COUNT {
        return Err(Error::Corrupted(A_SL_BITMAPS + 8 * fl));
    }
    let blk = r.load_ptr(head_word(fl, sl))?;
    Ok(if blk == 0 { None } else { Some(blk) })
}

/// Blocks of a size class looked at by the first-fit fallback.
const FIRST_FIT_PROBES: u32 = 64;

fn first_fit_in_class(r: &Region, need: u64) -> Result<Option<u64>> {
    let (fl, sl) = mapping(need);
    let mut blk = r.load_ptr(head_word(fl, sl))?;
    for _ in 0..FIRST_FIT_PROBES {
        if blk == 0 {
            break;
        }
        if r.load_block_header(blk)?.0 >= need {
            return Ok(Some(blk));
        }
        blk = r.load_ptr(blk + 8)?;
    }
    Ok(None)
}

/// Links the free block `blk` of `size` (header already says FREE) at the head
/// of its class, writes its footer and tells the right neighbour.
fn insert_free(ctx: &mut Ctx, blk: u64, size: u64) -> Result<()> {
    let (fl, sl) = mapping(size);
    let hw = head_word(fl, sl);
    let head = ctx.region().load_ptr(hw)?;
    ctx.wlog64(blk + 8, head)?;
    ctx.wlog64(blk + 16, 0)?;
    if head != 0 {
        ctx.wlog64(head + 16, blk)?;
    }
    ctx.wlog64(hw, blk)?;
    let slw = A_SL_BITMAPS + 8 * fl;
    let slm = ctx.region().load64(slw)?;
    ctx.wlog64(slw, slm | 1 << sl)?;
    let flm = ctx.region().load64(A_FL_BITMAP)?;
    ctx.wlog64(A_FL_BITMAP, flm | 1 << fl)?;
    ctx.wlog64(blk + size - 8, size)?;
    let next = blk + size;
    let nh = ctx.region().load64(next)?;
    ctx.wlog64(next, nh | PREV_FREE)
}

fn remove_free(ctx: &mut Ctx, blk: u64, size: u64) -> Result<()> {
    let (fl, sl) = mapping(size);
    let next = ctx.region().load_ptr(blk + 8)?;
    let prev = ctx.region().load_ptr(blk + 16)?;
    if next != 0 {
        ctx.wlog64(next + 16, prev)?;
    }
    if prev != 0 {
        ctx.wlog64(prev + 8, next)?;
    } else {
        let hw = head_word(fl, sl);
        if ctx.region().load64(hw)? != blk {
            return Err(Error::Corrupted(blk));
        }
        ctx.wlog64(hw, next)?;
        if next == 0 {
            let slw = A_SL_BITMAPS + 8 * fl;
            let slm = ctx.region().load64(slw)? & !(1 << sl);
            ctx.wlog64(slw, slm)?;
            if slm == 0 {
                let flm = ctx.region().load64(A_FL_BITMAP)?;
                ctx.wlog64(A_FL_BITMAP, flm & !(1 << fl))?;
            }
        }
    }
    Ok(())
}

/// Arena figures for INFO and the consistency check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Bytes of the arena.
    pub total_bytes: u64,
    /// Bytes in used blocks, block headers included.
    pub used_bytes: u64,
    /// Bytes in free blocks.
    pub free_bytes: u64,
    /// Used blocks (entries and index overflow nodes).
    pub used_blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Size of the largest free block.
    pub largest_free: u64,
    /// Bytes of small freed blocks kept by contexts for their next writes
    /// (counted in `used_bytes`).
    pub stashed_bytes: u64,
}

impl ArenaStats {
    /// Share of free bytes that a request for all of them could not use
    /// because they are split into pieces: 0 when one block holds all.
    pub fn fragmentation(&self) -> f64 {
        if self.free_bytes == 0 {
            0.0
        } else {
            1.0 - self.largest_free as f64 / self.free_bytes as f64
        }
    }
}

/// Bytes of blocks the arena holds (all of it but the closing header): used
/// plus free always add up to this, so only the used bytes are counted.
fn arena_capacity(geo: &Geometry) -> u64 {
    (geo.arena_size - 8) & !7
}

/// Reads the arena counters (a racy but word-consistent view).
pub(crate) fn stats(r: &Region, geo: &Geometry) -> Result<ArenaStats> {
    let flm = r.load64(A_FL_BITMAP)?;
    let mut largest = 0;
    if flm != 0 {
        let fl = 63 - flm.leading_zeros() as u64;
        let slm = r.load64(A_SL_BITMAPS + 8 * fl.min(FL_COUNT - 1))?;
        if slm != 0 {
            let sl = 63 - slm.leading_zeros() as u64;
            let mut blk = r.load_ptr(head_word(fl.min(FL_COUNT - 1), sl.min(SL_COUNT - 1)))?;
            let mut steps = 0;
            while blk != 0 && steps < 1024 {
                largest = largest.max(r.load_block_header(blk)?.0);
                blk = r.load_ptr(blk + 8)?;
                steps += 1;
            }
        }
    }
    let mut stashed = 0;
    for c in 0..geo.ctx_count as u64 {
        for i in 0..STASH_CAP {
            let blk = r.load_ptr(geo.ctx_off + c * CTX_SIZE + C_STASH + 8 * i)?;
            if blk != 0 {
                stashed += r.load_block_header(blk)?.0;
            }
        }
    }
    Ok(ArenaStats {
        stashed_bytes: stashed,
        total_bytes: geo.arena_size,
        used_bytes: r.load64(A_USED_BYTES)?,
        free_bytes: arena_capacity(geo).saturating_sub(r.load64(A_USED_BYTES)?),
        used_blocks: r.load64(A_USED_BLOCKS)?,
        free_blocks: r.load64(A_FREE_BLOCKS)?,
        largest_free: largest,
    })
}

/// Walks every block of the arena (only meaningful when no writer is active):
/// calls `f(offset, size, is_free)`. Checks the boundary tags as it goes.
pub(crate) fn walk(r: &Region, geo: &Geometry, mut f: impl FnMut(u64, u64, bool)) -> Result<()> {
    let mut blk = geo.arena_off;
    let end = geo.arena_off + geo.arena_size;
    let mut prev_free = false;
    loop {
        let (size, flags) = r.load_block_header(blk)?;
        let hdr = size | flags;
        if size == 0 {
            return Ok(());
        }
        let free = hdr & FREE != 0;
        if size < MIN_BLOCK || blk + size >= end || (hdr & PREV_FREE != 0) != prev_free {
            return Err(Error::Corrupted(blk));
        }
        if free && (prev_free || r.load64(blk + size - 8)? != size) {
            return Err(Error::Corrupted(blk));
        }
        f(blk, size, free);
        prev_free = free;
        blk += size;
    }
}

/// Every block on the free lists, with the class check (for the checker).
pub(crate) fn free_list_blocks(r: &Region) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let flm = r.load64(A_FL_BITMAP)?;
    for fl in 0..FL_COUNT {
        let slm = r.load64(A_SL_BITMAPS + 8 * fl)?;
        if (flm >> fl) & 1 != u64::from(slm != 0) {
            return Err(Error::Corrupted(A_FL_BITMAP));
        }
        for sl in 0..SL_COUNT {
            let mut blk = r.load_ptr(head_word(fl, sl))?;
            if ((slm >> sl) & 1 == 1) != (blk != 0) {
                return Err(Error::Corrupted(A_SL_BITMAPS + 8 * fl));
            }
            let mut prev = 0;
            while blk != 0 {
                let size = r.load_block_header(blk)?.0;
                if mapping(size) != (fl, sl) || r.load_ptr(blk + 16)? != prev {
                    return Err(Error::Corrupted(blk));
                }
                out.push(blk);
                prev = blk;
                blk = r.load_ptr(blk + 8)?;
                if out.len() as u64 > r.len() / MIN_BLOCK {
                    return Err(Error::Corrupted(blk));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_search_class_always_fits() {
        for size in (MIN_BLOCK..100_000).step_by(8) {
            let (fl, sl) = mapping_search(size);
            // The smallest block in class (fl, sl) must be >= size.
            let min_in_class = if fl == 0 {
                sl * 8
            } else {
                let f = fl + 6;
                (1 << f) | (sl << (f - SL_BITS))
            };
            assert!(
                min_in_class >= size,
                "size {size} -> ({fl},{sl}) min {min_in_class}"
            );
            let (ifl, isl) = mapping(size);
            assert!((fl, sl) >= (ifl, isl));
        }
    }
}
