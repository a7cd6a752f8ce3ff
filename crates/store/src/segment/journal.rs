//! The journal of an exclusive section (docs/design.md I5, I13): one undo
//! log spanning every write of the section, so that a process killed inside
//! it leaves the store as before the section, not just its last write undone.
//!
//! A context's undo log (context.rs) holds one transaction. Inside a section
//! each commit first copies the transaction's entries into the journal, a
//! chain of arena blocks ("chunks") named by the context word `C_JOURNAL`,
//! and only then empties the undo log; the copy's single commit point is the
//! chunk's count word. A chunk:
//!
//! ```text
//! +8   previous chunk (0 = first)     +16  records in this chunk
//! +24  records: [word u64, old value u64]
//! ```
//!
//! A record's word is a shared word's offset (tag 0: restore `old value`
//! there), or a block with tag `NEW` (allocated in the section: a rollback
//! frees it) or `FREE` (freed in the section: the free waits for the end, so
//! a rollback finds the block still there). A record word of 0 was settled.
//!
//! What keeps a long section (a script of a million SADDs, an EXEC that
//! overwrites the same keys again and again) within the arena:
//!
//! - A block allocated in the section and freed in it goes back to the
//!   arena at once, in one transaction with the settling of its `NEW`
//!   record: nothing outside the section has seen it, and a rollback would
//!   free it anyway. Only blocks from before the section wait for its end.
//! - A word is recorded once per section (its oldest value is all a
//!   rollback needs), and never when it lies inside a live block of the
//!   section (whose contents a rollback throws away with the block).
//! - A settled `NEW` slot takes the next `NEW` record.
//!
//! So the journal holds a record per word from before the section that the
//! section wrote, per live block it allocated, per block from before it
//! that it freed; the deferred blocks are at most what the store held when
//! the section began. When the arena cannot take the journal's next chunk,
//! the write that needed it fails with OOM and is undone alone (the section
//! goes on, as after any OOM).
//!
//! What the journal leaves out: the allocator's own words (the arena is
//! shared with other processes meanwhile: an allocation commits for good
//! and is recorded as `NEW` instead), and the context's private block
//! bookkeeping (pending, stash and chain words, which a rollback clears:
//! every block they name is `NEW` or referenced again after the undo).
//!
//! Nor does it hold bytes past a block's published end (a list leaf's
//! room, written with plain stores and published by logged words): a
//! rollback restores the words, and the bytes stay unread, unless the
//! section had moved that end back first (an in-place pop), in which case
//! the rollback publishes them again. The mirror keeps those blocks
//! (`shrunk`) and the section writes nothing past their ends.
//!
//! States (`C_JOURNAL_STATE`): `OPEN` while the section runs; `COMMITTING`
//! from the section's commit point (set just before its log group closes)
//! until the deferred frees are done; `ROLLED_BACK` once a recoverer has
//! restored every word of a dead holder's section, until it has freed the
//! section's new blocks. Every step is idempotent, so a recoverer that dies
//! is recovered and its work redone.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::segment::alloc;
use crate::segment::context::Ctx;
use crate::segment::layout::*;

/// No section, or its journal settled.
pub(crate) const JOURNAL_NONE: u64 = 0;
/// A section is running with its journal.
pub(crate) const JOURNAL_OPEN: u64 = 1;
/// The section committed: its deferred frees are owed.
pub(crate) const JOURNAL_COMMITTING: u64 = 2;
/// A recoverer undid the section: its new blocks are to be freed.
pub(crate) const JOURNAL_ROLLED_BACK: u64 = 3;

const TAG_MASK: u64 = 7;
const TAG_NEW: u64 = 1;
const TAG_FREE: u64 = 2;

const CHUNK_PREV: u64 = 8;
const CHUNK_COUNT: u64 = 16;
const CHUNK_RECORDS: u64 = 24;
/// Payload bytes of a chunk: about 4000 records.
const CHUNK_PAYLOAD: u64 = 64 * 1024 - 8;
/// Room a chunk keeps for the next transaction (its copy and the records it
/// appends itself); below it the journal grows at the next commit.
const ROOM: u64 = UNDO_CAP + 16;

/// A change to the in-process mirror made inside the open transaction,
/// reverted if it aborts.
enum MirrorChange {
    /// A `NEW` record for this block was added (in a reused slot or not).
    Added { blk: u64, reused_slot: bool },
    /// This block, allocated in the section, was freed and its record
    /// settled.
    Removed { blk: u64, end: u64, rec: u64 },
}

/// This context's journal, mirrored from its words.
#[derive(Default)]
pub(crate) struct Journal {
    /// The current chunk (0 = no journal).
    chunk: u64,
    /// Records in it, and how many fit.
    count: u64,
    cap: u64,
    /// The open transaction changed allocator or stash words: the journal
    /// leaves it out.
    private_txn: bool,
    /// A chunk is being added (its allocation is not recorded).
    growing: bool,
    /// Frees are real and nothing is recorded (recovery, stash flushes).
    paused: u32,
    /// The live blocks allocated in the section: start -> (end, record).
    new_blocks: BTreeMap<u64, (u64, u64)>,
    /// Settled `NEW` records whose slots take the next `NEW` records.
    free_slots: Vec<u64>,
    /// The words the journal holds the oldest value of.
    recorded: FxHashSet<u64>,
    /// Mirror changes of the open transaction.
    txn_changes: Vec<MirrorChange>,
    /// Blocks whose published end an in-place write of the section moved
    /// back (a list leaf's pop): a rollback moves it forward again, so the
    /// bytes past it are the section's to keep, not free room.
    shrunk: FxHashSet<u64>,
}

/// What freeing a block inside a section does.
pub(crate) enum SectionFree {
    /// Not in a section with a journal: free it.
    Now,
    /// Allocated in the section: free it at once, settling this record.
    NewInSection(u64),
    /// From before the section: the free waits for its end.
    Deferred,
}

impl Ctx {
    /// Whether writes are being journaled: inside this context's own
    /// exclusive section with its journal, not paused.
    #[inline]
    pub(crate) fn journaling(&self) -> bool {
        self.journal.chunk != 0 && self.journal.paused == 0
    }

    /// The open transaction changes allocator (or stash) words, which the
    /// journal leaves out.
    #[inline]
    pub(crate) fn mark_private(&mut self) {
        self.journal.private_txn = true;
    }

    /// Runs `f` with journaling paused: frees in it are real (a stash
    /// flush, recovering another context).
    pub(crate) fn unjournaled<T>(&mut self, f: impl FnOnce(&mut Ctx) -> Result<T>) -> Result<T> {
        self.journal.paused += 1;
        let res = f(self);
        self.journal.paused -= 1;
        res
    }

    /// Starts the journal of an exclusive section. False when there is no
    /// memory for it: the section then runs without rollback (each write
    /// still all or nothing).
    pub(crate) fn journal_open(&mut self) -> Result<bool> {
        debug_assert_eq!(self.journal.chunk, 0);
        match self.journal_grow() {
            Ok(()) => {}
            Err(Error::OutOfMemory) => return Ok(false),
            Err(e) => return Err(e),
        }
        self.wlog64(self.off + C_JOURNAL_STATE, JOURNAL_OPEN)?;
        self.mark_private();
        self.commit()?;
        Ok(true)
    }

    /// The section's commit point: from here a crash finishes the section
    /// instead of undoing it. Called with no transaction open, before the
    /// section's log group closes.
    pub(crate) fn journal_commit_point(&mut self) -> Result<()> {
        if self.journal.chunk == 0 {
            return Ok(());
        }
        self.crash_point();
        self.region()
            .a64(self.off + C_JOURNAL_STATE)?
            .store(JOURNAL_COMMITTING, Ordering::Release);
        self.crash_point();
        Ok(())
    }

    /// Ends the section's journal after its commit point: the deferred frees
    /// happen and the chunks go back to the arena, but the first, which
    /// stays as the spare the next section starts with (a script or EXEC
    /// would otherwise allocate and free 64 KiB each time).
    pub(crate) fn journal_close(&mut self) -> Result<()> {
        if self.journal.chunk == 0 {
            return Ok(());
        }
        self.journal_forget();
        self.journal_settle(self.off)?;
        self.journal_finish(self.off, true)
    }

    /// Drops the mirror of this context's journal (its words are settled by
    /// the caller).
    pub(crate) fn journal_forget(&mut self) {
        let paused = self.journal.paused;
        self.journal = Journal {
            paused,
            ..Journal::default()
        };
    }

    /// Appends a `NEW` or `FREE` record inside the open transaction.
    fn journal_record(&mut self, tag: u64, blk: u64) -> Result<()> {
        let j = &self.journal;
        if j.count >= j.cap {
            return Err(Error::OutOfMemory);
        }
        let (chunk, n) = (j.chunk, j.count);
        let rec = chunk + CHUNK_RECORDS + 16 * n;
        self.wlog64(rec, blk | tag)?;
        self.wlog64(chunk + CHUNK_COUNT, n + 1)?;
        self.journal.count = n + 1;
        Ok(())
    }

    /// Notes that the section moved the published end of `blk` back (see
    /// [`Ctx::section_shrank`]); nothing outside a section.
    pub(crate) fn journal_shrink(&mut self, blk: u64) {
        if self.journaling() {
            self.journal.shrunk.insert(blk);
        }
    }

    /// Whether this section moved the published end of `blk` back: its
    /// rollback publishes the bytes past the end again, so nothing may be
    /// written there in place until the section ends.
    pub(crate) fn section_shrank(&self, blk: u64) -> bool {
        self.journaling() && self.journal.shrunk.contains(&blk)
    }

    /// Records a block allocated inside the section (its allocation itself
    /// commits for good, in a transaction the journal leaves out): in a
    /// settled slot when there is one.
    pub(crate) fn journal_new(&mut self, blk: u64) -> Result<()> {
        if !self.journaling() || self.journal.growing {
            return Ok(());
        }
        let size = self.region().load_block_header(blk)?.0;
        let (rec, reused_slot) = match self.journal.free_slots.pop() {
            Some(slot) => {
                if let Err(e) = self.wlog64(slot, blk | TAG_NEW) {
                    self.journal.free_slots.push(slot);
                    return Err(e);
                }
                (slot, true)
            }
            None => {
                let rec = self.journal.chunk + CHUNK_RECORDS + 16 * self.journal.count;
                self.journal_record(TAG_NEW, blk)?;
                (rec, false)
            }
        };
        self.journal.new_blocks.insert(blk, (blk + size, rec));
        self.journal
            .txn_changes
            .push(MirrorChange::Added { blk, reused_slot });
        Ok(())
    }

    /// How a free of `blk` goes in the current section.
    pub(crate) fn section_free(&self, blk: u64) -> SectionFree {
        if !self.journaling() {
            SectionFree::Now
        } else if let Some(&(_, rec)) = self.journal.new_blocks.get(&blk) {
            SectionFree::NewInSection(rec)
        } else {
            SectionFree::Deferred
        }
    }

    /// Settles the `NEW` record `rec` of `blk`, inside the (private)
    /// transaction that frees the block: a rollback must not free it again.
    pub(crate) fn journal_settle_new(&mut self, blk: u64, rec: u64) -> Result<()> {
        self.wlog64(rec, 0)?;
        if let Some((end, rec)) = self.journal.new_blocks.remove(&blk) {
            self.journal.free_slots.push(rec);
            self.journal
                .txn_changes
                .push(MirrorChange::Removed { blk, end, rec });
        }
        Ok(())
    }

    /// Whether the word at `off` lies inside a live block of the section.
    fn in_new_block(&self, off: u64) -> bool {
        self.journal
            .new_blocks
            .range(..=off)
            .next_back()
            .is_some_and(|(_, &(end, _))| off < end)
    }

    /// Inside a section: records the free of `blk` for the section's end
    /// and sets `word` (which named it) to `value`, in the open transaction.
    /// False outside one (the caller frees for real).
    pub(crate) fn journal_defer_free(&mut self, blk: u64, word: u64, value: u64) -> Result<bool> {
        if !matches!(self.section_free(blk), SectionFree::Deferred) {
            return Ok(false);
        }
        self.journal_record(TAG_FREE, blk)?;
        self.wlog64(word, value)?;
        Ok(true)
    }

    /// Called by `commit` with the transaction's entries still in the undo
    /// log: copies those the journal keeps, then moves the chunk's count
    /// over them (the copy's commit point).
    pub(crate) fn journal_copy(&mut self, undo_len: u64) -> Result<()> {
        if !self.journaling() || std::mem::take(&mut self.journal.private_txn) {
            return Ok(());
        }
        let (chunk, mut n) = (self.journal.chunk, self.journal.count);
        let chunk_end = chunk + CHUNK_RECORDS + 16 * self.journal.cap;
        let (me, me_end) = (self.off, self.off + CTX_SIZE);
        let sh = self.sh.clone();
        let r = &sh.region;
        let start = n;
        let mut added = Vec::new();
        for i in 0..undo_len {
            let e = self.off + C_UNDO + 16 * i;
            let off = r.load64(e)?;
            // The context's own bookkeeping (but its key counts) and the
            // journal's records are not the store's state; a word recorded
            // already keeps its older value; a word inside a block of the
            // section goes with the block.
            let private =
                (me..me_end).contains(&off) && !(me + C_DB_KEYS..me + C_STATS).contains(&off);
            if private
                || (chunk..chunk_end).contains(&off)
                || self.journal.recorded.contains(&off)
                || self.in_new_block(off)
            {
                continue;
            }
            if n >= self.journal.cap {
                for w in &added {
                    self.journal.recorded.remove(w);
                }
                return Err(Error::OutOfMemory);
            }
            let rec = chunk + CHUNK_RECORDS + 16 * n;
            r.store64(rec + 8, r.load64(e + 8)?)?;
            r.store64(rec, off)?;
            self.journal.recorded.insert(off);
            added.push(off);
            n += 1;
        }
        if n != start {
            self.crash_point();
            self.region()
                .a64(chunk + CHUNK_COUNT)?
                .store(n, Ordering::Release);
            self.journal.count = n;
        }
        Ok(())
    }

    /// After a commit inside a section: adds a chunk when the current one
    /// has too little room for the next transaction. Best effort: without
    /// room, the next write fails with OOM (rolled back alone).
    pub(crate) fn journal_after_commit(&mut self) {
        self.journal.private_txn = false;
        self.journal.txn_changes.clear();
        if !self.journaling()
            || self.journal.growing
            || self.journal.cap - self.journal.count >= ROOM
            || self.holds(H_ALLOC_LOCK)
            || self.holds(H_ADMIN_LOCK)
            || self.holds(H_LOG_RESERVE_LOCK)
        {
            return;
        }
        let _ = self.journal_grow();
    }

    /// After an abort: the chunk's count word and the `NEW` records of the
    /// transaction were restored; so is the mirror.
    pub(crate) fn journal_resync(&mut self) -> Result<()> {
        self.journal.private_txn = false;
        while let Some(change) = self.journal.txn_changes.pop() {
            let j = &mut self.journal;
            match change {
                MirrorChange::Added { blk, reused_slot } => {
                    if let Some((_, rec)) = j.new_blocks.remove(&blk) {
                        if reused_slot {
                            j.free_slots.push(rec);
                        }
                    }
                }
                MirrorChange::Removed { blk, end, rec } => {
                    j.free_slots.retain(|&s| s != rec);
                    j.new_blocks.insert(blk, (end, rec));
                }
            }
        }
        if self.journal.chunk != 0 {
            self.journal.count = self.region().load64(self.journal.chunk + CHUNK_COUNT)?;
        }
        Ok(())
    }

    /// Makes the spare chunk (allocated now when there is none) the
    /// current one.
    fn journal_grow(&mut self) -> Result<()> {
        self.journal.growing = true;
        let res = (|| {
            let spare = self.off + C_JOURNAL_SPARE;
            let blk = match self.region().load64(spare)? {
                0 => alloc::alloc(self, CHUNK_PAYLOAD, spare)?.ok_or(Error::OutOfMemory)?,
                kept => kept,
            };
            let size = self.region().load_block_header(blk)?.0;
            if size < CHUNK_RECORDS + 16 * ROOM {
                return Err(Error::Corrupted(spare));
            }
            let r = self.region();
            r.store64(blk + CHUNK_PREV, self.journal.chunk)?;
            r.store64(blk + CHUNK_COUNT, 0)?;
            self.wlog64(self.off + C_JOURNAL, blk)?;
            self.wlog64(spare, 0)?;
            self.mark_private();
            self.commit()?;
            self.journal.chunk = blk;
            self.journal.count = 0;
            self.journal.cap = (size - CHUNK_RECORDS) / 16;
            Ok(())
        })();
        self.journal.growing = false;
        res
    }

    /// The chunks of the journal at context `voff`, newest first, each with
    /// its record count (checked against its block: bytes in shared memory
    /// are untrusted).
    fn journal_chunks(&self, voff: u64) -> Result<Vec<(u64, u64)>> {
        let r = self.region();
        let geo = self.sh.geo;
        let mut out = Vec::new();
        let mut c = r.load64(voff + C_JOURNAL)?;
        while c != 0 {
            if c < geo.arena_off || c >= geo.arena_off + geo.arena_size || out.len() > 1 << 20 {
                return Err(Error::Corrupted(voff + C_JOURNAL));
            }
            let size = r.load_block_header(c)?.0;
            let n = r.load64(c + CHUNK_COUNT)?;
            if size < CHUNK_RECORDS || n > (size - CHUNK_RECORDS) / 16 {
                return Err(Error::Corrupted(c));
            }
            out.push((c, n));
            c = r.load64(c + CHUNK_PREV)?;
        }
        Ok(out)
    }

    /// Recovery of the context at `voff` (or this one, after its commit
    /// point), once its unfinished transaction is undone and while its locks
    /// still hold: an open section's every journaled word is restored
    /// (newest first) and its bookkeeping words cleared. Returns whether the
    /// section was rolled back (its log group must be dropped, not closed).
    pub(crate) fn journal_settle(&mut self, voff: u64) -> Result<bool> {
        let r = self.region();
        let state = r.load64(voff + C_JOURNAL_STATE)?;
        if state != JOURNAL_OPEN {
            return Ok(state == JOURNAL_ROLLED_BACK);
        }
        for (c, n) in self.journal_chunks(voff)? {
            for i in (0..n).rev() {
                let rec = c + CHUNK_RECORDS + 16 * i;
                let word = r.load64(rec)?;
                if word != 0 && word & TAG_MASK == 0 {
                    r.store64(word, r.load64(rec + 8)?)?;
                }
            }
        }
        // Every block these name was allocated in the section (freed below)
        // or is referenced again now.
        for w in (0..PENDING_NEW_CAP)
            .map(|i| C_PENDING_NEW + 8 * i)
            .chain((0..PENDING_FREE_CAP).map(|i| C_PENDING_FREE + 8 * i))
            .chain([C_NEW_CHAIN, C_FREE_CHAIN, C_DROP_CHAIN])
        {
            r.store64(voff + w, 0)?;
        }
        r.a64(voff + C_JOURNAL_STATE)?
            .store(JOURNAL_ROLLED_BACK, Ordering::Release);
        Ok(true)
    }

    /// The memory half of settling the journal at `voff`: frees the blocks
    /// a rolled-back section allocated, or those a committed one freed, then
    /// the chunks and a spare chunk; with `keep_spare` (a section of this
    /// context closing) the oldest chunk becomes the spare instead, unless
    /// there is one. Needs no lock but the allocator's.
    pub(crate) fn journal_finish(&mut self, voff: u64, keep_spare: bool) -> Result<()> {
        self.unjournaled(|ctx| {
            let state = ctx.region().load64(voff + C_JOURNAL_STATE)?;
            let tag = match state {
                JOURNAL_ROLLED_BACK => TAG_NEW,
                JOURNAL_COMMITTING => TAG_FREE,
                _ => 0,
            };
            for (c, n) in ctx.journal_chunks(voff)? {
                if tag != 0 {
                    for i in (0..n).rev() {
                        let rec = c + CHUNK_RECORDS + 16 * i;
                        let word = ctx.region().load64(rec)?;
                        if word & TAG_MASK == tag {
                            alloc::free(ctx, word & !TAG_MASK, rec)?;
                        }
                    }
                }
                let prev = ctx.region().load64(c + CHUNK_PREV)?;
                let spare = voff + C_JOURNAL_SPARE;
                if keep_spare && prev == 0 && ctx.region().load64(spare)? == 0 {
                    // Unlinked and kept in one transaction: a crash leaves
                    // it on the spare word, which recovery frees.
                    ctx.wlog64(voff + C_JOURNAL, 0)?;
                    ctx.wlog64(spare, c)?;
                    ctx.mark_private();
                    ctx.commit()?;
                } else {
                    alloc::free_setting(ctx, c, voff + C_JOURNAL, prev)?;
                }
            }
            let spare = ctx.region().load64(voff + C_JOURNAL_SPARE)?;
            if spare != 0 && !keep_spare {
                alloc::free(ctx, spare, voff + C_JOURNAL_SPARE)?;
            }
            ctx.region()
                .a64(voff + C_JOURNAL_STATE)?
                .store(JOURNAL_NONE, Ordering::Release);
            Ok(())
        })
    }
}
