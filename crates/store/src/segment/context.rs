//! Contexts: one record per attached thread. A context owns the locks it holds,
//! an undo log for the shared words it is changing, the blocks it has allocated
//! but not yet published or unpublished but not yet freed, and its stats. When
//! its process dies, any other context can find that out and recover it
//! (docs/design.md, I5–I8).

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::segment::journal::Journal;
use crate::segment::layout::*;
use crate::segment::shm::Region;
use crate::segment::Shared;

const KIND_FREE: u64 = 0;
const KIND_ALIVE: u64 = 1;
const KIND_RECOVERING: u64 = 2;
/// Aux bits of an ALIVE state whose start time is not written yet: liveness is
/// then judged by the pid alone (the slot may still hold an earlier owner's
/// start time, which must not make a live newcomer look dead).
const AUX_STARTING: u64 = 1;

/// How a context waits for a word another process will change: a lock, a
/// seqlock, the db map's generation. Most waits end within a few hundred
/// nanoseconds (a bucket writer publishing), so it spins first, then yields;
/// but an exclusive section (I13) or a FLUSHDB may keep the db map for a long
/// time, and a hundred waiters yielding in a loop would burn every core the
/// holder needs. So past about a millisecond it sleeps, a little longer each
/// round, up to a millisecond at a time.
pub(crate) struct Backoff {
    rounds: u32,
}

impl Backoff {
    const SPINS: u32 = 64;
    const YIELDS: u32 = 1024;
    const MAX_SLEEP_US: u64 = 1000;

    pub fn new() -> Backoff {
        Backoff { rounds: 0 }
    }

    /// Waits one round. Returns true when the caller should check whether the
    /// holder is still alive (I7): every 256 rounds while spinning and
    /// yielding, every 16 once sleeping (at most about 16 ms apart).
    pub fn snooze(&mut self) -> bool {
        self.rounds = self.rounds.saturating_add(1);
        let n = self.rounds;
        if n <= Self::SPINS {
            std::hint::spin_loop();
        } else if n <= Self::YIELDS {
            std::thread::yield_now();
        } else {
            let us = (10 * (n - Self::YIELDS) as u64).min(Self::MAX_SLEEP_US);
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
        n.is_multiple_of(if n <= Self::YIELDS { 256 } else { 16 })
    }
}

fn state_word(kind: u64, aux: u64, pid: u32) -> u64 {
    kind << 56 | (aux & 0xFF_FFFF) << 32 | pid as u64
}

/// Per-context counters, summed over contexts for INFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Stat {
    /// Operations called through the embedded API.
    Ops,
    /// Lookups that found a live key.
    Hits,
    /// Lookups that found nothing.
    Misses,
    /// Keys removed because their time ran out (lazily or by the sweeper).
    Expired,
    /// Keys removed by the eviction policy.
    Evicted,
    /// Locks taken.
    LockAcquired,
    /// Locks that were held by someone else at the first try.
    LockContended,
    /// Nanoseconds spent waiting for contended locks.
    LockWaitNs,
    /// Dead contexts this context recovered.
    Recovered,
    /// Seqlock reads that had to retry because a writer was active.
    ReadRetries,
    /// memcached retrieval commands, one per key asked for (`cmd_get`).
    McCmdGet,
    /// ... that found the item (`get_hits`).
    McGetHits,
    /// memcached storage commands (`cmd_set`).
    McCmdSet,
    /// flush_all (`cmd_flush`).
    McCmdFlush,
    /// touch, gat and gats, one per key (`cmd_touch`).
    McCmdTouch,
    /// ... that found the item (`touch_hits`).
    McTouchHits,
    /// Deletes that removed an item (`delete_hits`).
    McDeleteHits,
    /// Deletes that found nothing (`delete_misses`).
    McDeleteMisses,
    /// incr on a present item (`incr_hits`).
    McIncrHits,
    /// incr on a missing item (`incr_misses`).
    McIncrMisses,
    /// decr on a present item (`decr_hits`).
    McDecrHits,
    /// decr on a missing item (`decr_misses`).
    McDecrMisses,
    /// cas that stored (`cas_hits`).
    McCasHits,
    /// cas on a missing item (`cas_misses`).
    McCasMisses,
    /// cas whose value was stale (`cas_badval`).
    McCasBadval,
    /// Items stored by memcached commands (`total_items`).
    McTotalItems,
    /// Values freed in the background after a lazy free detached them
    /// (`lazyfreed_objects`).
    LazyFreed,
}

/// Number of `Stat` variants.
pub const STAT_COUNT: usize = 27;

/// All `Stat` variants, in index order.
pub const STATS: [Stat; STAT_COUNT] = [
    Stat::Ops,
    Stat::Hits,
    Stat::Misses,
    Stat::Expired,
    Stat::Evicted,
    Stat::LockAcquired,
    Stat::LockContended,
    Stat::LockWaitNs,
    Stat::Recovered,
    Stat::ReadRetries,
    Stat::McCmdGet,
    Stat::McGetHits,
    Stat::McCmdSet,
    Stat::McCmdFlush,
    Stat::McCmdTouch,
    Stat::McTouchHits,
    Stat::McDeleteHits,
    Stat::McDeleteMisses,
    Stat::McIncrHits,
    Stat::McIncrMisses,
    Stat::McDecrHits,
    Stat::McDecrMisses,
    Stat::McCasHits,
    Stat::McCasMisses,
    Stat::McCasBadval,
    Stat::McTotalItems,
    Stat::LazyFreed,
];

impl Stat {
    /// The snake_case name used in INFO and `shoal store info`.
    pub fn name(self) -> &'static str {
        match self {
            Stat::Ops => "ops",
            Stat::Hits => "keyspace_hits",
            Stat::Misses => "keyspace_misses",
            Stat::Expired => "expired_keys",
            Stat::Evicted => "evicted_keys",
            Stat::LockAcquired => "lock_acquired",
            Stat::LockContended => "lock_contended",
            Stat::LockWaitNs => "lock_wait_ns",
            Stat::Recovered => "recovered_contexts",
            Stat::ReadRetries => "read_retries",
            Stat::McCmdGet => "cmd_get",
            Stat::McGetHits => "get_hits",
            Stat::McCmdSet => "cmd_set",
            Stat::McCmdFlush => "cmd_flush",
            Stat::McCmdTouch => "cmd_touch",
            Stat::McTouchHits => "touch_hits",
            Stat::McDeleteHits => "delete_hits",
            Stat::McDeleteMisses => "delete_misses",
            Stat::McIncrHits => "incr_hits",
            Stat::McIncrMisses => "incr_misses",
            Stat::McDecrHits => "decr_hits",
            Stat::McDecrMisses => "decr_misses",
            Stat::McCasHits => "cas_hits",
            Stat::McCasMisses => "cas_misses",
            Stat::McCasBadval => "cas_badval",
            Stat::McTotalItems => "total_items",
            Stat::LazyFreed => "lazyfreed_objects",
        }
    }
}

/// This thread's registration in the segment.
pub(crate) struct Ctx {
    pub sh: Arc<Shared>,
    pub idx: u32,
    pub off: u64,
    undo_len: u64,
    held: [u64; HELD_CAP as usize],
    /// Mirror of the stash words (block, size); only this context writes them.
    pub stash: [(u64, u64); STASH_CAP as usize],
    rng: u64,
    /// Test hook (`testing::crash_after`): abort the process at the n-th
    /// crash point from now, as a SIGKILL there would.
    pub crash_after: Cell<Option<u64>>,
    /// The undo log of the exclusive section this context runs, if any.
    pub(crate) journal: Journal,
}

/// How recovery of a dead context reaches the layers above this one, which
/// this layer does not import: each finishes or voids what the dead context
/// left in its own words. [`crate::Store::open`] supplies them.
#[derive(Clone, Copy)]
pub(crate) struct RecoveryHooks {
    /// The log: void or complete the dead context's frames, settle its
    /// claim, close its EXEC group (I16). Arguments: the context's offset
    /// and lock owner word.
    pub log: fn(&mut Ctx, u64, u32) -> Result<()>,
    /// Paged collections: free the blocks an unfinished write chained in the
    /// context (new, replaced and dropped trees). Argument: its offset.
    pub collections: fn(&mut Ctx, u64) -> Result<()>,
}

/// See [`Ctx::owner_fate`].
pub(crate) enum OwnerFate {
    /// Its process runs.
    Alive,
    /// Its process died and nobody recovers its context yet (the context's
    /// offset).
    Dead(u64),
    /// Another process is recovering its context.
    Recovering,
    /// The context was recovered or detached: what it held is released.
    Gone,
}

impl Ctx {
    /// Claims a free context slot for the calling thread.
    pub fn register(sh: Arc<Shared>) -> Result<Ctx> {
        let pid = std::process::id();
        let start = proc_start_time(pid).unwrap_or(0);
        let count = sh.geo.ctx_count;
        let seed = (pid as u64) << 20 ^ sh.clock.now_ms() ^ thread_id();
        // First pass: a free slot. Second pass: adopt the slot of a dead process
        // and clean it up as our own (undo, locks, pending blocks, counters).
        // Lowest first, so that the slots ever used stay few (`H_CTX_HIGH`).
        for adopt in [false, true] {
            for idx in 0..count {
                let off = sh.geo.ctx_off + idx as u64 * CTX_SIZE;
                let a = sh.region.a64(off + C_STATE)?;
                let st = a.load(Ordering::Acquire);
                let claimable = if adopt {
                    st >> 56 == KIND_ALIVE && !state_alive(&sh.region, off, st)?
                } else {
                    st >> 56 == KIND_FREE
                };
                if !claimable
                    || a.compare_exchange(
                        st,
                        state_word(KIND_ALIVE, AUX_STARTING, pid),
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .is_err()
                {
                    continue;
                }
                let r = &sh.region;
                // Before this context takes any lock (I13: an exclusive
                // section that read a lower mark has made the map generation
                // odd first, which our first lock taker sees after its fence).
                r.a64(H_CTX_HIGH)?
                    .fetch_max(idx as u64 + 1, Ordering::SeqCst);
                r.store64(off + C_START_TIME, start)?;
                r.store64(off + C_TID, thread_id())?;
                r.store64(off + C_ATTACHED_MS, sh.clock.now_ms())?;
                a.store(state_word(KIND_ALIVE, 0, pid), Ordering::Release);
                let mut ctx = Ctx {
                    sh: sh.clone(),
                    idx,
                    off,
                    undo_len: 0,
                    held: [0; HELD_CAP as usize],
                    stash: [(0, 0); STASH_CAP as usize],
                    rng: seed | 1,
                    crash_after: Cell::new(None),
                    journal: Journal::default(),
                };
                if adopt {
                    ctx.salvage(off, idx + 1)?;
                } else {
                    ctx.recover_dead_contexts()?;
                }
                return Ok(ctx);
            }
        }
        Err(Error::NoContext)
    }

    #[inline]
    pub fn region(&self) -> &Region {
        &self.sh.region
    }

    /// This context's owner word in lock words.
    #[inline]
    fn owner(&self) -> u32 {
        self.idx + 1
    }

    /// A pseudo-random number (xorshift64*), for sampling.
    pub fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn stat_add(&self, stat: Stat, n: u64) {
        if let Ok(a) = self.region().a64(self.off + C_STATS + 8 * stat as u64) {
            a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// A place where the crash tests may stop the process (I5–I8 must hold
    /// whichever one it is). Costs one branch when no test asked for it.
    #[inline]
    pub fn crash_point(&self) {
        if let Some(n) = self.crash_after.get() {
            if n == 0 {
                std::process::abort();
            }
            self.crash_after.set(Some(n - 1));
        }
    }

    // ---------- undo log (I5) ----------

    /// Writes `val` at `off`, first logging the old value so that a recoverer can
    /// undo the write if this process dies before `commit`.
    pub fn wlog64(&mut self, off: u64, val: u64) -> Result<()> {
        self.crash_point();
        let r = &self.sh.region;
        let target = r.a64(off)?;
        let old = target.load(Ordering::Acquire);
        if old == val {
            return Ok(());
        }
        let n = self.undo_len;
        if n >= UNDO_CAP {
            return Err(Error::Corrupted(self.off + C_UNDO_LEN));
        }
        let e = self.off + C_UNDO + 16 * n;
        r.a64(e)?.store(off, Ordering::Relaxed);
        r.a64(e + 8)?.store(old, Ordering::Relaxed);
        // Release: the entry is complete before the length covers it, and the
        // length is visible before the target changes.
        r.a64(self.off + C_UNDO_LEN)?
            .store(n + 1, Ordering::Release);
        self.undo_len = n + 1;
        self.crash_point();
        target.store(val, Ordering::Release);
        Ok(())
    }

    /// Makes every logged write since the last commit permanent (inside an
    /// exclusive section: part of the section, journal.rs).
    pub fn commit(&mut self) -> Result<()> {
        self.crash_point();
        if self.undo_len != 0 {
            self.journal_copy(self.undo_len)?;
            self.region()
                .a64(self.off + C_UNDO_LEN)?
                .store(0, Ordering::Release);
            self.undo_len = 0;
        }
        self.journal_after_commit();
        Ok(())
    }

    /// Undoes this context's own unfinished transaction (after an error in
    /// the middle of one) and leaves the seqlocks of held buckets even.
    pub fn abort(&mut self) -> Result<()> {
        if self.undo_len == 0 {
            return Ok(());
        }
        self.undo_dead(self.off)?;
        self.undo_len = 0;
        self.journal_resync()?;
        self.sync_stash()?;
        for lock_off in self.held {
            // The db map's generation is odd for a whole exclusive section,
            // not for one transaction: `leave_exclusive` makes it even (I13).
            if lock_off != 0 && lock_off != H_DB_MAP_LOCK {
                let seq = self.region().a32(lock_off + B_SEQ)?;
                let s = seq.load(Ordering::Acquire);
                if s & 1 == 1 {
                    seq.store(s.wrapping_add(1), Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// Re-reads the stash words into the mirror (after an undo changed them).
    pub fn sync_stash(&mut self) -> Result<()> {
        for i in 0..STASH_CAP as usize {
            let blk = self.region().load64(self.off + C_STASH + 8 * i as u64)?;
            let size = if blk == 0 {
                0
            } else {
                self.region().load_block_header(blk)?.0
            };
            self.stash[i] = (blk, size);
        }
        Ok(())
    }

    // ---------- locks (I6) ----------

    /// Takes the lock at `lock_off`, waiting for its holder, and recovering the
    /// holder's context if its process has died.
    pub fn lock(&mut self, lock_off: u64) -> Result<()> {
        debug_assert_eq!(self.undo_len, 0, "locks are taken outside transactions");
        let slot = self.claim_held(lock_off)?;
        let sh = self.sh.clone();
        let word = sh.region.a32(lock_off + B_LOCK)?;
        let me = self.owner();
        if word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            self.stat_add(Stat::LockAcquired, 1);
            self.crash_point();
            return Ok(());
        }
        self.stat_add(Stat::LockContended, 1);
        let start = Instant::now();
        let mut backoff = Backoff::new();
        loop {
            let cur = word.load(Ordering::Relaxed);
            if cur == 0 {
                if word
                    .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            if cur == me {
                self.release_held(slot)?;
                return Err(Error::Corrupted(lock_off));
            }
            if backoff.snooze() {
                if let Err(e) = self.check_holder(lock_off, cur) {
                    // Not ours after all: drop the intent recorded above.
                    self.release_held(slot)?;
                    return Err(e);
                }
            }
        }
        self.stat_add(Stat::LockAcquired, 1);
        self.stat_add(Stat::LockWaitNs, start.elapsed().as_nanos() as u64);
        Ok(())
    }

    /// Takes the lock only if it is free right now.
    pub fn try_lock(&mut self, lock_off: u64) -> Result<bool> {
        let slot = self.claim_held(lock_off)?;
        let word = self.sh.region.a32(lock_off + B_LOCK)?;
        if word
            .compare_exchange(0, self.owner(), Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            self.stat_add(Stat::LockAcquired, 1);
            Ok(true)
        } else {
            self.release_held(slot)?;
            Ok(false)
        }
    }

    /// Releases a lock. A transaction still open here failed halfway (an
    /// error on corrupt shared bytes): it is rolled back first, while every
    /// lock it needs is still held.
    pub fn unlock(&mut self, lock_off: u64) -> Result<()> {
        self.crash_point();
        if self.undo_len != 0 {
            self.abort()?;
        }
        self.sh
            .region
            .a32(lock_off + B_LOCK)?
            .store(0, Ordering::Release);
        if let Some(slot) = self.held.iter().position(|&h| h == lock_off) {
            self.release_held(slot)?;
        }
        Ok(())
    }

    /// Whether this context holds (or is taking) the lock at `lock_off`.
    pub fn holds(&self, lock_off: u64) -> bool {
        self.held.contains(&lock_off)
    }

    /// Records the intent to hold `lock_off` before trying it (I6).
    fn claim_held(&mut self, lock_off: u64) -> Result<usize> {
        let slot = self
            .held
            .iter()
            .position(|&h| h == 0)
            .ok_or(Error::Corrupted(self.off + C_HELD))?;
        self.held[slot] = lock_off;
        self.region()
            .store64(self.off + C_HELD + 8 * slot as u64, lock_off)?;
        Ok(slot)
    }

    fn release_held(&mut self, slot: usize) -> Result<()> {
        self.held[slot] = 0;
        self.region()
            .store64(self.off + C_HELD + 8 * slot as u64, 0)
    }

    /// Bumps the seqlock word next to a held lock to odd (writer active) or back
    /// to even. Readers retry on odd or changed values (I4).
    pub fn seq_bump(&self, lock_off: u64) -> Result<()> {
        let seq = self.region().a32(lock_off + B_SEQ)?;
        seq.store(
            seq.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        std::sync::atomic::fence(Ordering::Release);
        self.crash_point();
        Ok(())
    }

    /// A seqlock that stays odd with nobody holding its lock was left so by
    /// damage, not by a writer (writers hold the lock while it is odd): make
    /// it even under the lock.
    pub fn repair_stale_seq(&mut self, lock_off: u64) -> Result<()> {
        if self.try_lock(lock_off)? {
            let seq = self.region().a32(lock_off + B_SEQ)?;
            let s = seq.load(Ordering::Acquire);
            if s & 1 == 1 {
                seq.store(s.wrapping_add(1), Ordering::Release);
            }
            self.unlock(lock_off)?;
        }
        Ok(())
    }

    /// Called while waiting on a lock or seqlock held by owner word `owner`:
    /// recovers the owner's context when its process is gone.
    pub fn check_holder(&mut self, lock_off: u64, owner: u32) -> Result<()> {
        let victim = owner.wrapping_sub(1);
        if victim >= self.sh.geo.ctx_count {
            // An owner word that names no context: only a crash in the middle of
            // nothing we write could cause it, so treat the segment as damaged.
            return Err(Error::Corrupted(lock_off));
        }
        let voff = self.ctx_off(victim);
        let st = self.region().load64(voff + C_STATE)?;
        if st >> 56 == KIND_FREE {
            // The owner detached or was recovered and the word is stale.
            let word = self.region().a32(lock_off + B_LOCK)?;
            if word.load(Ordering::Acquire) == owner {
                let seq = self.region().a32(lock_off + B_SEQ)?;
                let s = seq.load(Ordering::Acquire);
                if s & 1 == 1 {
                    seq.store(s.wrapping_add(1), Ordering::Release);
                }
                let _ = word.compare_exchange(owner, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
            return Ok(());
        }
        self.recover(victim).map(|_| ())
    }

    /// Whether context `idx` is free: a free context holds no lock (it
    /// released them all before it was freed), and one claimed after this
    /// read takes its locks after the claim, so it checks what a lock taker
    /// checks (the map generation, dbmap.rs) after whatever preceded this.
    pub(crate) fn context_is_free(&self, idx: u32) -> Result<bool> {
        let st = self.region().load64(self.ctx_off(idx) + C_STATE)?;
        Ok(st >> 56 == KIND_FREE)
    }

    /// How many context slots an exclusive section must look at: one past
    /// the highest ever claimed (every slot on a damaged mark).
    pub(crate) fn contexts_ever_claimed(&self) -> Result<u32> {
        let high = self.region().load64(H_CTX_HIGH)?;
        let count = self.sh.geo.ctx_count;
        Ok(if high > count as u64 {
            count
        } else {
            high as u32
        })
    }

    fn ctx_off(&self, idx: u32) -> u64 {
        self.sh.geo.ctx_off + idx as u64 * CTX_SIZE
    }

    // ---------- recovery (I7) ----------

    /// What became of the process that owns context `owner` (a lock's owner
    /// word), for a waiter deciding whether to take over what it holds.
    pub(crate) fn owner_fate(&self, owner: u32) -> Result<OwnerFate> {
        let victim = owner.wrapping_sub(1);
        if victim >= self.sh.geo.ctx_count {
            return Err(Error::Corrupted(self.ctx_off(0)));
        }
        let voff = self.ctx_off(victim);
        let st = self.region().load64(voff + C_STATE)?;
        Ok(match st >> 56 {
            KIND_FREE => OwnerFate::Gone,
            KIND_ALIVE if state_alive(self.region(), voff, st)? => OwnerFate::Alive,
            KIND_ALIVE => OwnerFate::Dead(voff),
            _ => OwnerFate::Recovering,
        })
    }

    /// The owner word of this context (what its locks hold).
    pub(crate) fn owner_word(&self) -> u32 {
        self.owner()
    }

    /// Recovers every context whose process has died.
    pub fn recover_dead_contexts(&mut self) -> Result<usize> {
        let mut n = 0;
        for idx in 0..self.sh.geo.ctx_count {
            if idx != self.idx && self.recover(idx)? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Recovers context `victim` if its process is dead; true if this call did.
    pub fn recover(&mut self, victim: u32) -> Result<bool> {
        let voff = self.ctx_off(victim);
        let sh = self.sh.clone();
        let state = sh.region.a64(voff + C_STATE)?;
        let st = state.load(Ordering::Acquire);
        match st >> 56 {
            KIND_ALIVE => {
                if state_alive(self.region(), voff, st)? {
                    return Ok(false);
                }
            }
            KIND_RECOVERING => {
                let rec = ((st >> 32) & 0xFF_FFFF) as u32;
                if rec == 0 || rec > self.sh.geo.ctx_count || rec == self.owner() {
                    return Ok(false);
                }
                let roff = self.ctx_off(rec - 1);
                let rst = self.region().load64(roff + C_STATE)?;
                if rst >> 56 == KIND_ALIVE && state_alive(self.region(), roff, rst)? {
                    return Ok(false);
                }
                // The recoverer died too: recover it first, then take over.
                if rst >> 56 == KIND_ALIVE {
                    self.recover(rec - 1)?;
                }
            }
            _ => return Ok(false),
        }
        let mine = state_word(KIND_RECOVERING, self.owner() as u64, st as u32);
        if state
            .compare_exchange(st, mine, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return Ok(false);
        }
        self.salvage(voff, victim + 1)?;
        self.stat_add(Stat::Recovered, 1);
        state.store(state_word(KIND_FREE, 0, 0), Ordering::Release);
        Ok(true)
    }

    /// Makes the dead context at `voff` (lock owner word `owner`) leave no trace:
    /// its half-done writes undone, its locks released, its unpublished or
    /// unpublished-but-unfreed blocks freed, its counters folded (I7).
    fn salvage(&mut self, voff: u64, owner: u32) -> Result<()> {
        // Its frees are real, and none of it belongs to a section of ours.
        self.unjournaled(|ctx| ctx.salvage_unjournaled(voff, owner))
    }

    fn salvage_unjournaled(&mut self, voff: u64, owner: u32) -> Result<()> {
        self.undo_dead(voff)?;
        // A section it was running is undone as a whole before its locks go
        // (the db map lock among them, I13).
        self.journal_settle(voff)?;
        (self.sh.hooks.log)(self, voff, owner)?;
        self.release_dead_locks(voff, owner)?;
        if voff == self.off {
            // Cleaning up our own slot (detach or adoption): the locks just
            // released were ours.
            self.undo_len = 0;
            self.held = [0; HELD_CAP as usize];
            self.journal_forget();
        }
        self.journal_finish(voff, false)?;
        for i in 0..PENDING_NEW_CAP {
            let word = voff + C_PENDING_NEW + 8 * i;
            let blk = self.region().load64(word)?;
            if blk != 0 {
                crate::segment::alloc::free(self, blk, word)?;
            }
        }
        for i in 0..PENDING_FREE_CAP {
            let word = voff + C_PENDING_FREE + 8 * i;
            let blk = self.region().load64(word)?;
            if blk != 0 {
                crate::segment::alloc::free(self, blk, word)?;
            }
        }
        for i in 0..STASH_CAP {
            let word = voff + C_STASH + 8 * i;
            let blk = self.region().load64(word)?;
            if blk != 0 {
                crate::segment::alloc::free(self, blk, word)?;
            }
        }
        if voff == self.off {
            self.stash = [(0, 0); STASH_CAP as usize];
        }
        (self.sh.hooks.collections)(self, voff)?;
        self.retire_counters(voff)
    }

    /// Applies a dead context's undo log backwards (its locks still protect
    /// every word it names).
    fn undo_dead(&self, voff: u64) -> Result<()> {
        let r = self.region();
        let n = r.load64(voff + C_UNDO_LEN)?;
        if n > UNDO_CAP {
            return Err(Error::Corrupted(voff + C_UNDO_LEN));
        }
        for i in (0..n).rev() {
            let e = voff + C_UNDO + 16 * i;
            let off = r.load64(e)?;
            let old = r.load64(e + 8)?;
            r.store64(off, old)?;
        }
        r.store64(voff + C_UNDO_LEN, 0)
    }

    fn release_dead_locks(&self, voff: u64, owner: u32) -> Result<()> {
        let r = self.region();
        for i in 0..HELD_CAP {
            let slot = voff + C_HELD + 8 * i;
            let lock_off = r.load64(slot)?;
            if lock_off == 0 {
                continue;
            }
            if lock_off.checked_add(8).is_none_or(|end| end > r.len()) {
                return Err(Error::Corrupted(slot));
            }
            let word = r.a32(lock_off + B_LOCK)?;
            if word.load(Ordering::Acquire) == owner {
                let seq = r.a32(lock_off + B_SEQ)?;
                let s = seq.load(Ordering::Acquire);
                if s & 1 == 1 {
                    seq.store(s.wrapping_add(1), Ordering::Release);
                }
                word.store(0, Ordering::Release);
            }
            r.store64(slot, 0)?;
        }
        Ok(())
    }

    /// Folds a leaving context's key counters and stats into the header.
    fn retire_counters(&mut self, voff: u64) -> Result<()> {
        self.lock(H_ADMIN_LOCK)?;
        for db in 0..NUM_DBS as u64 {
            for (ctx_word, base_word) in [
                (voff + C_DB_KEYS + 8 * db, H_DB_KEYS_BASE + 8 * db),
                (voff + C_DB_EXPIRES + 8 * db, H_DB_EXPIRES_BASE + 8 * db),
            ] {
                let delta = self.region().load64(ctx_word)?;
                if delta != 0 {
                    let base = self.region().load64(base_word)?;
                    self.wlog64(base_word, base.wrapping_add(delta))?;
                    self.wlog64(ctx_word, 0)?;
                }
            }
        }
        self.commit()?;
        self.unlock(H_ADMIN_LOCK)?;
        for i in 0..STAT_COUNT as u64 {
            let v = self
                .region()
                .a64(voff + C_STATS + 8 * i)?
                .swap(0, Ordering::Relaxed);
            self.region()
                .a64(H_RETIRED_STATS + 8 * i)?
                .fetch_add(v, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Detaches: leaves nothing behind, exactly as a recoverer would after a
    /// crash (an unfinished transaction undone, locks released, pending blocks
    /// freed, counters folded), then frees the slot. Normally there is nothing
    /// to undo; a panic unwinding out of an operation is the exception.
    pub fn detach(&mut self) -> Result<()> {
        if self.idx == u32::MAX {
            return Ok(());
        }
        let (off, owner) = (self.off, self.owner());
        self.salvage(off, owner)?;
        self.region()
            .store64(self.off + C_STATE, state_word(KIND_FREE, 0, 0))?;
        self.idx = u32::MAX;
        Ok(())
    }

    /// Adds `delta` to this context's share of the key count of `db`, as part
    /// of the current transaction.
    pub fn add_db_keys(&mut self, db: u8, delta: i64, expires_delta: i64) -> Result<()> {
        for (base, d) in [(C_DB_KEYS, delta), (C_DB_EXPIRES, expires_delta)] {
            if d != 0 {
                let w = self.off + base + 8 * db as u64;
                let v = self.region().load64(w)?;
                self.wlog64(w, v.wrapping_add(d as u64))?;
            }
        }
        Ok(())
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

fn thread_id() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut h);
    h.finish()
}

/// Whether the ALIVE context at `off`, whose state word is `st`, belongs to a
/// running process (the same one that registered, when its start time is in).
fn state_alive(r: &Region, off: u64, st: u64) -> Result<bool> {
    let start = if (st >> 32) & 0xFF_FFFF == AUX_STARTING {
        0
    } else {
        r.load64(off + C_START_TIME)?
    };
    Ok(process_alive(st as u32, start))
}

/// Start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat),
/// or None when there is no such process or it is a zombie.
pub(crate) fn proc_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Whether process `pid` is running and (when `start` is known) is the same
/// process that registered, not a later one that reused the pid.
pub(crate) fn process_alive(pid: u32, start: u64) -> bool {
    match proc_start_time(pid) {
        None => false,
        Some(t) => start == 0 || t == start,
    }
}
