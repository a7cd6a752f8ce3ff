//! The logical -> physical db indirection behind SWAPDB (I11).
//!
//! Entries, hash seeds and key counters all use the *physical* db. The header
//! holds one map word (nibble `d` = `physical(d) ^ d`, so an all-zero header
//! is the identity) guarded by a lock word pair whose seq word is the map's
//! generation:
//!
//! ```text
//! 1280  owner u32 | gen u32 (odd while a swap is in progress)
//! 1288  map u64   (16 nibbles)
//! ```
//!
//! Readers resolve `(gen, map)` with a seqlock read, do their lock-free read
//! and check `gen` again afterwards. Writers resolve, lock the key's bucket,
//! and check `gen` again *after* the lock (a SeqCst fence between the two).
//! SWAPDB takes the map lock, makes `gen` odd, waits until every bucket lock
//! held by another context at that moment is released, writes the map, commits
//! and makes `gen` even. So a write that passed its check finishes before the
//! map changes, and a write that had not is retried under the new map: every
//! operation acts on the mapping that holds at its linearization point.
//!
//! The same steps around any closure make an *exclusive section* (I13):
//! while `gen` is odd no other context reads or writes a key, so everything
//! the holder does in it appears to every other process as one step (EXEC,
//! multi-key commands). The holder itself resolves through the locked view.

use std::sync::atomic::{fence, Ordering};

use crate::error::{Error, Result};
use crate::keyspace::handle::{check_db, Handle};
use crate::keyspace::index;
use crate::segment::context::Backoff;
use crate::segment::layout::*;

/// The map as one operation resolved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DbView {
    pub gen: u32,
    pub map: u64,
}

impl DbView {
    /// The physical db of logical `db` (checked to be < NUM_DBS).
    pub fn phys(&self, db: u8) -> u8 {
        ((self.map >> (4 * db as u64)) & 0xF) as u8 ^ db
    }
}

/// Whether the stored map word is a permutation of the dbs (I11).
pub(crate) fn valid_map(map: u64) -> bool {
    let mut seen = 0u32;
    for db in 0..NUM_DBS as u8 {
        seen |= 1 << (((map >> (4 * db as u64)) & 0xF) as u8 ^ db);
    }
    seen == (1u32 << NUM_DBS) - 1
}

/// The map word after swapping logical `a` and `b`.
pub(crate) fn swapped(view: &DbView, a: u8, b: u8) -> u64 {
    let (pa, pb) = (view.phys(a), view.phys(b));
    let clear = !(0xF << (4 * a as u64) | 0xF << (4 * b as u64));
    view.map & clear | ((pb ^ a) as u64) << (4 * a as u64) | ((pa ^ b) as u64) << (4 * b as u64)
}

impl Handle {
    /// Resolves the db map: waits out a swap or an exclusive section in
    /// progress (recovering a dead holder, I7) and returns a validated view.
    /// Never called with a bucket lock held (a swap waits for bucket holders:
    /// I11). The map lock's own holder (inside an exclusive section or
    /// FLUSHDB) reads the map directly: nobody else can change it, and
    /// waiting for its own odd generation would never end (I13).
    pub(crate) fn db_view(&mut self) -> Result<DbView> {
        if self.ctx.holds(H_DB_MAP_LOCK) {
            return self.locked_view();
        }
        let view = index::read_stable(&mut self.ctx, H_DB_MAP_LOCK, |r| {
            Ok(DbView {
                gen: r.load32(H_DB_MAP_LOCK + B_SEQ)?,
                map: r.load64(H_DB_MAP)?,
            })
        })?;
        if !valid_map(view.map) {
            return Err(Error::Corrupted(H_DB_MAP));
        }
        Ok(view)
    }

    /// The physical db of logical `db` right now, for hints and figures that
    /// need no consistency (prefetch, INFO).
    pub(crate) fn phys_hint(&self, db: u8) -> u8 {
        let map = self.ctx.region().load64(H_DB_MAP).unwrap_or(0);
        if valid_map(map) {
            DbView { gen: 0, map }.phys(db)
        } else {
            db
        }
    }

    /// After a lock-free read: whether the map did not change since `view`.
    pub(crate) fn db_view_still(&self, view: DbView) -> Result<bool> {
        fence(Ordering::Acquire);
        Ok(self.ctx.region().load32(H_DB_MAP_LOCK + B_SEQ)? == view.gen)
    }

    /// After taking a bucket lock: whether the map did not change since
    /// `view`. The SeqCst fence pairs with the swapper's: either we see its
    /// odd generation, or it sees our lock and waits for us (I11).
    pub(crate) fn db_view_locked(&self, view: DbView) -> Result<bool> {
        fence(Ordering::SeqCst);
        Ok(self.ctx.region().load32(H_DB_MAP_LOCK + B_SEQ)? == view.gen)
    }

    /// After taking a bucket lock outside any resolution (eviction, the
    /// sweeper): whether another context's exclusive section runs. The
    /// SeqCst fence pairs with the section's as in `db_view_locked`.
    pub(crate) fn other_section_running(&self) -> Result<bool> {
        if self.ctx.holds(H_DB_MAP_LOCK) {
            return Ok(false);
        }
        fence(Ordering::SeqCst);
        Ok(self.ctx.region().load32(H_DB_MAP_LOCK + B_SEQ)? & 1 == 1)
    }

    /// The map and its generation, read while holding the map lock.
    fn locked_view(&self) -> Result<DbView> {
        let r = self.ctx.region();
        let view = DbView {
            gen: r.load32(H_DB_MAP_LOCK + B_SEQ)?,
            map: r.load64(H_DB_MAP)?,
        };
        if !valid_map(view.map) {
            return Err(Error::Corrupted(H_DB_MAP));
        }
        Ok(view)
    }

    /// Runs `f` with the map lock held, so the map cannot change meanwhile
    /// (FLUSHDB, FLUSHALL). The map lock comes before bucket locks in the
    /// lock order. Inside an exclusive section the lock is already ours.
    pub(crate) fn with_map_locked<T>(
        &mut self,
        f: impl FnOnce(&mut Self, DbView) -> Result<T>,
    ) -> Result<T> {
        if self.ctx.holds(H_DB_MAP_LOCK) {
            let view = self.locked_view()?;
            return f(self, view);
        }
        self.ctx.lock(H_DB_MAP_LOCK)?;
        let res = (|| {
            let view = self.locked_view()?;
            f(self, view)
        })();
        self.finish(&[H_DB_MAP_LOCK], res)
    }

    /// Whether this handle is inside an exclusive section (I13): it holds the
    /// db map lock with the generation odd.
    pub fn in_exclusive(&self) -> bool {
        self.ctx.holds(H_DB_MAP_LOCK)
            && self
                .ctx
                .region()
                .load32(H_DB_MAP_LOCK + B_SEQ)
                .is_ok_and(|g| g & 1 == 1)
    }

    /// Runs `f` as one step for every other context of every process (I13):
    /// no other handle reads or writes any key until `f` returns, and `f`'s
    /// own operations (any `Handle` method, SWAPDB and FLUSHDB included) work
    /// as usual. Nested calls just run `f`. Keep `f` short and never let it
    /// wait for another handle: every other reader and writer waits for it.
    /// The section's writes share one undo journal (segment/journal.rs): a
    /// process that dies inside is recovered like any lock holder (I7) and
    /// the store is left as before the section. An error inside `f` does
    /// not roll anything back: what `f` did stands once it returns.
    pub fn exclusive<T>(&mut self, f: impl FnOnce(&mut Handle) -> Result<T>) -> Result<T> {
        Self::exclusive_in(self, |h| h, f)
    }

    /// [`exclusive`](Self::exclusive) for a caller whose closure needs more
    /// than the handle (the engine's command context): `handle` finds the
    /// handle inside `owner`, and `f` gets `owner` back. Errors of `f` pass
    /// through unchanged; the store's own become `E`.
    pub fn exclusive_in<C, T, E: From<Error>>(
        owner: &mut C,
        handle: fn(&mut C) -> &mut Handle,
        f: impl FnOnce(&mut C) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if handle(owner).in_exclusive() {
            return f(owner);
        }
        let took = handle(owner).enter_exclusive()?;
        // One journal undoes the whole section if the process dies in it.
        if let Err(e) = handle(owner).ctx.journal_open() {
            handle(owner).leave_exclusive(took)?;
            return Err(e.into());
        }
        // Everything the section writes replays as one unit (MULTI/EXEC).
        handle(owner).log_group_begin();
        // A panic inside (a bug in `f`) must not leave every other process
        // waiting for a holder that is still alive: leave, then unwind on.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(owner)));
        let h = handle(owner);
        // The commit point comes before the group's closing frame: a crash
        // after it finishes the section, and its log group with it (I16).
        let committed = h.ctx.abort().and_then(|()| h.ctx.journal_commit_point());
        let closed = h.log_group_end();
        let finished = h.ctx.journal_close();
        let left = h.leave_exclusive(took);
        let out = res.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        committed?;
        closed?;
        finished?;
        left?;
        Ok(out)
    }

    /// Starts an exclusive section: takes the map lock (unless already held,
    /// by `with_map_locked`), makes the generation odd, and waits out every
    /// lock another context held at that moment. Returns whether it took the
    /// lock.
    fn enter_exclusive(&mut self) -> Result<bool> {
        let took = !self.ctx.holds(H_DB_MAP_LOCK);
        if took {
            self.ctx.lock(H_DB_MAP_LOCK)?;
        }
        let res = (|| {
            // Odd: new resolutions wait, and writers past their check ...
            self.ctx.seq_bump(H_DB_MAP_LOCK)?;
            fence(Ordering::SeqCst);
            // ... are waited for here.
            self.wait_for_bucket_holders()
        })();
        if let Err(e) = res {
            self.leave_exclusive(took)?;
            return Err(e);
        }
        Ok(took)
    }

    /// Ends an exclusive section: rolls back a transaction left open by an
    /// error, makes the generation even and releases the map lock if
    /// `enter_exclusive` took it.
    fn leave_exclusive(&mut self, took: bool) -> Result<()> {
        let res = self.ctx.abort().and_then(|()| {
            let seq = self.ctx.region().a32(H_DB_MAP_LOCK + B_SEQ)?;
            if seq.load(Ordering::Acquire) & 1 == 1 {
                self.ctx.seq_bump(H_DB_MAP_LOCK)?;
            }
            Ok(())
        });
        if took {
            self.ctx.unlock(H_DB_MAP_LOCK)?;
        }
        res
    }

    /// SWAPDB: logical dbs `a` and `b` exchange their contents (keys, expiries
    /// and counters) in one atomic step as every other operation sees it.
    pub fn swap_db(&mut self, a: u8, b: u8) -> Result<()> {
        check_db(a)?;
        check_db(b)?;
        self.ctx.stat_add(crate::segment::context::Stat::Ops, 1);
        if a == b {
            return Ok(());
        }
        self.exclusive(|h| {
            let view = h.locked_view()?;
            h.bump_flush_epoch()?;
            if h.logging() {
                h.log_stage(|out| crate::log::record::encode_swap_db(out, a, b));
                h.log_reserve()?;
            }
            h.ctx.wlog64(H_DB_MAP, swapped(&view, a, b))?;
            // Commit before the generation turns even: nobody acts on the new
            // map before it is permanent (a crash before this is undone, I5).
            h.log_committing()?;
            h.ctx.commit()?;
            h.log_complete()
        })
    }

    /// Waits until every lock another context holds now (except the map lock
    /// itself, which waiters only claim) has been released at least once,
    /// recovering holders that died (I7).
    fn wait_for_bucket_holders(&mut self) -> Result<()> {
        let geo = self.ctx.sh.geo;
        for c in 0..self.ctx.contexts_ever_claimed()? {
            // Most of the slots are free: skipping them keeps an exclusive
            // section (EXEC, a script) from reading every slot's lock list.
            if c == self.ctx.idx || self.ctx.context_is_free(c)? {
                continue;
            }
            let owner = c + 1;
            for i in 0..HELD_CAP {
                let slot = geo.ctx_off + c as u64 * CTX_SIZE + C_HELD + 8 * i;
                let mut backoff = Backoff::new();
                loop {
                    let lock_off = self.ctx.region().load64(slot)?;
                    if lock_off == 0 || lock_off == H_DB_MAP_LOCK {
                        break;
                    }
                    if lock_off
                        .checked_add(8)
                        .is_none_or(|e| e > self.ctx.region().len())
                    {
                        return Err(Error::Corrupted(slot));
                    }
                    // Not (yet) the owner: it checks the generation after it
                    // takes the lock, and will see it odd.
                    if self.ctx.region().load32(lock_off + B_LOCK)? != owner {
                        break;
                    }
                    if backoff.snooze() {
                        self.ctx.check_holder(lock_off, owner)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_the_identity_and_swaps_stay_permutations() {
        let mut v = DbView { gen: 0, map: 0 };
        assert!(valid_map(0));
        assert!((0..16).all(|d| v.phys(d) == d));
        v.map = swapped(&v, 0, 9);
        assert_eq!((v.phys(0), v.phys(9), v.phys(1)), (9, 0, 1));
        v.map = swapped(&v, 9, 3);
        assert_eq!((v.phys(0), v.phys(9), v.phys(3)), (9, 3, 0));
        assert!(valid_map(v.map));
        v.map = swapped(&v, 9, 3);
        v.map = swapped(&v, 0, 9);
        assert_eq!(v.map, 0);
        assert!(!valid_map(1));
    }
}
