//! A `Handle` is one thread's door into the store. This file holds the machinery
//! every operation shares: lock-free lookup, the locked read-modify-publish
//! cycle, removal, and allocation with eviction. The operations themselves live
//! in `strings.rs` and `keys.rs`.

use crate::error::{Error, Result};
use crate::ipc::keylog::{KeyEvent, KeyLog};
use crate::keyspace::entry::{self, NewEntry, Raw, ValueType};
use crate::keyspace::evict::Evicted;
use crate::keyspace::index::{self, Found, KeyPos};
use crate::keyspace::lfu;
use crate::segment::alloc;
use crate::segment::context::{Ctx, Stat};
use crate::segment::layout::*;

/// Eviction attempts in a row that may find every candidate locked by other
/// writers before a write gives up with an out-of-memory error.
const MAX_BUSY_ROUNDS: u32 = 64;

/// One thread's registration in a store (a context slot in the segment).
/// Every operation takes `&mut self`: each thread that uses the store makes
/// its own with [`crate::Store::handle`].
pub struct Handle {
    pub(crate) ctx: Ctx,
    /// A time every operation uses instead of reading the clock, while set
    /// (see [`Handle::freeze_clock`]).
    pub(crate) frozen_ms: Option<u64>,
    /// Keys created, expired or evicted, while asked for (keylog.rs).
    pub(crate) key_log: KeyLog,
    /// Records staged and frames reserved in the log ring (log/ring.rs).
    pub(crate) log: crate::log::ring::LogState,
    /// Reads leave expired keys in place (they still read as missing):
    /// set while clients are paused, when the data set must not change.
    pub(crate) keep_expired: bool,
    /// Allocations may pass `maxmemory` (a script flagged `allow-oom`
    /// writes as Redis lets it; eviction still runs when it can).
    pub(crate) ignore_maxmemory: bool,
    /// The values this operation unpublishes are freed lazily (UNLINK,
    /// FLUSHDB ASYNC; collections/paged.rs).
    pub(crate) lazy_now: bool,
    /// Which removals of the store's own free lazily.
    pub(crate) lazy_policy: crate::collections::paged::LazyFreePolicy,
}

/// Where a publish puts the new entry.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// Over the existing entry `Found`; the old block goes to the pending word.
    Replace(Found, u64),
    /// Into this empty slot word.
    Slot(u64),
    /// Into a fresh overflow node (block, its pending word).
    Node(u64, u64),
}

/// A key locked for writing, with what its chain held for it.
pub(crate) struct Locked {
    pub db: u8,
    pub pos: KeyPos,
    pub found: Option<Found>,
}

pub(crate) fn check_db(db: u8) -> Result<()> {
    if (db as usize) < NUM_DBS {
        Ok(())
    } else {
        Err(Error::BadDb)
    }
}

pub(crate) fn check_len(len: u64) -> Result<()> {
    if len <= MAX_VALUE_LEN {
        Ok(())
    } else {
        Err(Error::TooLarge)
    }
}

impl Handle {
    /// Index of this handle's context slot in the segment.
    pub fn context_id(&self) -> u32 {
        self.ctx.idx
    }

    /// Starts fetching the index bucket of `key` into the CPU cache, so that a
    /// batch of keys (a pipeline) can be hashed and prefetched before it runs.
    pub fn prefetch(&self, db: u8, key: &[u8]) {
        if check_db(db).is_err() {
            return;
        }
        let pos = index::key_pos(&self.ctx, self.phys_hint(db), key);
        self.ctx.region().prefetch(pos.bucket);
    }

    /// The second step of a batch prefetch, once the buckets of the batch
    /// are on their way: starts fetching the entries the home node's slots
    /// tagged like `key` point to (its header, and the key's end where the
    /// value begins), so that the lookup under the lock finds them in cache.
    /// Only a hint: a racing writer can make it fetch the wrong block.
    pub fn prefetch_entry(&self, db: u8, key: &[u8]) {
        if check_db(db).is_err() {
            return;
        }
        let pos = index::key_pos(&self.ctx, self.phys_hint(db), key);
        index::prefetch_tagged(self.ctx.region(), &pos, E_KEY + key.len() as u64);
    }

    /// Adds `n` to one of this context's counters (summed over every context
    /// in [`crate::StoreInfo::stats`]): for counters the store cannot see,
    /// like memcached's command counts.
    pub fn count(&self, stat: Stat, n: u64) {
        self.ctx.stat_add(stat, n);
    }

    /// The segment's clock (ms since the epoch; injectable in tests), or
    /// the frozen time while one is set.
    pub fn now_ms(&self) -> u64 {
        match self.frozen_ms {
            Some(ms) => ms,
            None => self.ctx.sh.clock.now_ms(),
        }
    }

    /// Freezes this handle's clock at the current time (`true`) or lets it
    /// run again (`false`). A server freezes it for one batch of pipelined
    /// requests, as Redis caches the time per event-loop turn: the batch sees
    /// one instant for expiry, and the clock is read once, not per key.
    pub fn freeze_clock(&mut self, frozen: bool) {
        self.frozen_ms = None;
        if frozen {
            self.frozen_ms = Some(self.ctx.sh.clock.now_ms());
        }
    }

    /// While `ignore` is set, allocations may pass `maxmemory` (eviction
    /// still frees what it can first): Redis lets a script flagged
    /// `allow-oom` write over the limit.
    pub fn ignore_maxmemory(&mut self, ignore: bool) {
        self.ignore_maxmemory = ignore;
    }

    /// Whether allocations may pass `maxmemory` now.
    pub fn ignores_maxmemory(&self) -> bool {
        self.ignore_maxmemory
    }

    /// While `keep` is set, a read that finds an expired key reports it
    /// missing without removing it (Redis keeps the data set unchanged
    /// while clients are paused). Writes still remove the expired key they
    /// replace.
    pub fn keep_expired(&mut self, keep: bool) {
        self.keep_expired = keep;
    }

    /// Reads `key` without locking. `read_value(region, raw, out)` copies what
    /// it needs of the value inside the seqlock check. Expired keys are removed
    /// here (lazy expiry) and reported as missing.
    pub(crate) fn lookup<T>(
        &mut self,
        db: u8,
        key: &[u8],
        read_value: impl FnMut(&crate::segment::shm::Region, &Raw) -> Result<T>,
    ) -> Result<Option<(Raw, T)>> {
        self.lookup_opts(db, key, true, read_value)
    }

    /// `lookup`, optionally without moving the LRU clock (OBJECT, TTL, TYPE:
    /// Redis's LOOKUP_NOTOUCH).
    pub(crate) fn lookup_opts<T>(
        &mut self,
        db: u8,
        key: &[u8],
        touch: bool,
        mut read_value: impl FnMut(&crate::segment::shm::Region, &Raw) -> Result<T>,
    ) -> Result<Option<(Raw, T)>> {
        check_db(db)?;
        self.ctx.stat_add(Stat::Ops, 1);
        // Resolve the db map, read, and re-check that the map did not change
        // meanwhile (I11).
        let (pos, found) = loop {
            let view = self.db_view()?;
            let pdb = view.phys(db);
            let pos = index::key_pos(&self.ctx, pdb, key);
            let found = index::read_stable(&mut self.ctx, pos.bucket, |r| {
                match index::find(r, &pos, pdb, key)? {
                    Some(f) => Ok(Some((f.raw, read_value(r, &f.raw)?))),
                    None => Ok(None),
                }
            })?;
            if self.db_view_still(view)? {
                break (pos, found);
            }
        };
        // One clock read serves both the expiry check and the LRU touch.
        let now_ms = self.now_ms();
        match found {
            Some((raw, _)) if raw.expired(now_ms) => {
                if !self.keep_expired {
                    self.expire_key(db, key)?;
                }
                self.ctx.stat_add(Stat::Misses, 1);
                Ok(None)
            }
            Some((raw, v)) => {
                self.ctx.stat_add(Stat::Hits, 1);
                if touch {
                    self.touch(&pos, &raw, now_ms)?;
                }
                Ok(Some((raw, v)))
            }
            None => {
                self.ctx.stat_add(Stat::Misses, 1);
                Ok(None)
            }
        }
    }

    /// Copies the value of a (locked) entry out of the segment.
    pub(crate) fn read_value(&self, raw: &Raw) -> Result<Vec<u8>> {
        let mut v = Vec::with_capacity(raw.vallen as usize);
        self.ctx
            .region()
            .read_bytes(raw.value_off(), raw.vallen, &mut v)?;
        Ok(v)
    }

    /// `read_value` for commands that need a string: `WrongType` otherwise.
    pub(crate) fn read_string(&self, raw: &Raw) -> Result<Vec<u8>> {
        if raw.vtype != ValueType::String as u8 {
            return Err(Error::WrongType);
        }
        self.read_value(raw)
    }

    /// `(lfu-log-factor, lfu-decay-time)` when the policy is an LFU one: only
    /// then do accesses move the LFU counters (as Redis).
    fn lfu_params(&self) -> Result<Option<(u32, u32)>> {
        let r = self.ctx.region();
        if !crate::keyspace::evict::EvictionPolicy::from_u32(r.load32(H_POLICY)?).is_lfu() {
            return Ok(None);
        }
        Ok(Some((
            r.load32(H_LFU_LOG_FACTOR)?,
            r.load32(H_LFU_DECAY_TIME)?,
        )))
    }

    /// The LFU half of the LRU word after one access to an entry whose LFU
    /// half is `old`: decayed and counted under an LFU policy, else as it was.
    pub(crate) fn lfu_accessed(&mut self, old: u32, now_ms: u64) -> Result<u32> {
        Ok(match self.lfu_params()? {
            Some((factor, decay)) => {
                let r = lfu::unit(self.ctx.random());
                lfu::touched(old, now_ms, factor, decay, r)
            }
            None => old,
        })
    }

    /// Records an access in the entry's LRU word: the LRU clock moves to now
    /// (at most once a second per key) and, under an LFU policy, the LFU
    /// counter is counted (lfu.rs; it rarely changes once a key is hot). Only
    /// if the word would change and the bucket is free, under the lock, so the
    /// entry cannot be freed while we write to it (I8).
    fn touch(&mut self, pos: &KeyPos, raw: &Raw, now_ms: u64) -> Result<()> {
        let now_s = (now_ms / 1000) as u32;
        let lfu = self.lfu_accessed(raw.lfu, now_ms)?;
        let word = entry::lru_word(now_s, lfu);
        if word == raw.lru_word() || !self.ctx.try_lock(pos.bucket)? {
            return Ok(());
        }
        let mut still = false;
        index::for_each_slot(self.ctx.region(), pos.bucket, |_, s| {
            still = s & SLOT_OFF_MASK == raw.off;
            Ok(still)
        })?;
        // A word that moved since we read it was touched by someone else
        // meanwhile: theirs stands.
        let r = self.ctx.region();
        if still && r.load64(raw.off + E_LRU)? == raw.lru_word() {
            r.store64(raw.off + E_LRU, word)?;
        }
        self.ctx.unlock(pos.bucket)
    }

    fn expire_key(&mut self, db: u8, key: &[u8]) -> Result<()> {
        // `with_key` removes the key if it is (still) expired.
        self.with_key(db, key, |_, _| Ok(()))
    }

    /// Locks `key`'s bucket, finds the key (removing it first if expired), runs
    /// `f`, unlocks and frees what `f` unpublished. Every write goes through here.
    /// `db` is logical; `f` sees the physical db in `Locked::db` (I11).
    pub(crate) fn with_key<T>(
        &mut self,
        db: u8,
        key: &[u8],
        f: impl FnOnce(&mut Self, &mut Locked) -> Result<T>,
    ) -> Result<T> {
        check_db(db)?;
        self.ctx.stat_add(Stat::Ops, 1);
        loop {
            let view = self.db_view()?;
            let pdb = view.phys(db);
            let pos = index::key_pos(&self.ctx, pdb, key);
            self.ctx.lock(pos.bucket)?;
            // A SWAPDB that started since we resolved: let it finish first.
            match self.db_view_locked(view) {
                Ok(true) => {}
                Ok(false) => {
                    self.ctx.unlock(pos.bucket)?;
                    continue;
                }
                Err(e) => return self.finish(&[pos.bucket], Err(e)),
            }
            let res = self
                .find_locked(pdb, key, pos)
                .and_then(|mut l| f(self, &mut l));
            return self.finish(&[pos.bucket], res);
        }
    }

    /// Finds `key` under its (held) bucket lock, expiring it if due.
    pub(crate) fn find_locked(&mut self, db: u8, key: &[u8], pos: KeyPos) -> Result<Locked> {
        let mut found = index::find(self.ctx.region(), &pos, db, key)?;
        if let Some(f) = found {
            if f.raw.expired(self.now_ms()) {
                let lazy = self.lazy_policy.expire;
                self.lazily(lazy, |h| h.remove_locked(pos.bucket, &f))?;
                self.ctx.stat_add(Stat::Expired, 1);
                if self.key_log.removals {
                    self.log_key(db, key, KeyEvent::Expired);
                }
                found = None;
            }
        }
        Ok(Locked { db, pos, found })
    }

    /// Rolls back an unfinished transaction (after an error), unlocks the
    /// buckets and frees pending blocks.
    pub(crate) fn finish<T>(&mut self, buckets: &[u64], res: Result<T>) -> Result<T> {
        if res.is_err() {
            self.ctx.abort()?;
            self.log_cancel()?;
        }
        for b in buckets {
            self.ctx.unlock(*b)?;
        }
        self.drain_frees()?;
        if res.is_err() {
            self.drain_new()?;
            self.drain_new_tree_nodes()?;
        }
        res
    }

    // ---------- pending blocks ----------

    fn pending_word(&self, base: u64, cap: u64) -> Result<Option<u64>> {
        for i in 0..cap {
            let w = self.ctx.off + base + 8 * i;
            if self.ctx.region().load64(w)? == 0 {
                return Ok(Some(w));
            }
        }
        Ok(None)
    }

    /// A context word to record a block that is allocated but not published.
    pub(crate) fn pending_new_word(&self) -> Result<u64> {
        self.pending_word(C_PENDING_NEW, PENDING_NEW_CAP)?
            .ok_or(Error::Corrupted(self.ctx.off + C_PENDING_NEW))
    }

    /// Frees every block this context has unpublished, and the tree
    /// blocks its writes replaced or dropped.
    pub(crate) fn drain_frees(&mut self) -> Result<()> {
        for i in 0..PENDING_FREE_CAP {
            let w = self.ctx.off + C_PENDING_FREE + 8 * i;
            let blk = self.ctx.region().load64(w)?;
            if blk != 0 {
                self.release(blk, w)?;
            }
        }
        self.drain_tree_chains()
    }

    /// Gives back a block recorded in context word `pending`: into this
    /// context's stash when small (no shared lock), else to the arena.
    fn release(&mut self, blk: u64, pending: u64) -> Result<()> {
        if !alloc::stash_put(&mut self.ctx, blk, pending)? {
            alloc::free(&mut self.ctx, blk, pending)?;
        }
        Ok(())
    }

    /// Frees a block that was allocated but never published, unless an error
    /// path freed it already.
    pub(crate) fn discard_new(&mut self, blk: u64, pending: u64) -> Result<()> {
        if self.ctx.region().load64(pending)? == blk {
            self.release(blk, pending)?;
        }
        Ok(())
    }

    /// Frees every block this context allocated and did not publish (after an
    /// operation failed halfway).
    fn drain_new(&mut self) -> Result<()> {
        for i in 0..PENDING_NEW_CAP {
            let w = self.ctx.off + C_PENDING_NEW + 8 * i;
            let blk = self.ctx.region().load64(w)?;
            if blk != 0 {
                self.release(blk, w)?;
            }
        }
        Ok(())
    }

    // ---------- allocation ----------

    /// Allocates a block for `payload` bytes, recorded in `pending`, evicting by
    /// the configured policy when the arena or `maxmemory` is full.
    pub(crate) fn alloc_block(&mut self, payload: u64, pending: u64) -> Result<u64> {
        if let Some(b) = alloc::stash_take(&mut self.ctx, payload, pending)? {
            return Ok(b);
        }
        let need = alloc::block_size_for(payload);
        let mut busy_rounds = 0u32;
        let mut flushed = false;
        loop {
            if let Some(b) = self.try_alloc_block(payload, need, pending)? {
                return Ok(b);
            }
            if self.ctx.journaling() && flushed {
                // Inside an exclusive section frees wait for its end, so
                // evicting would make no room (segment/journal.rs).
                return self.alloc_past_maxmemory(payload, pending);
            }
            if !flushed {
                // Our own stash first: nobody else can use those blocks.
                flushed = true;
                alloc::stash_flush(&mut self.ctx)?;
                continue;
            }
            match self.evict_one()? {
                Evicted::One => {
                    // The evicted block went to our stash; let it coalesce.
                    alloc::stash_flush(&mut self.ctx)?;
                    busy_rounds = 0;
                }
                Evicted::Busy if busy_rounds < MAX_BUSY_ROUNDS => {
                    busy_rounds += 1;
                    std::thread::yield_now();
                }
                Evicted::Busy | Evicted::Nothing => {
                    return self.alloc_past_maxmemory(payload, pending)
                }
            }
        }
    }

    /// The last resort of an allocation once eviction freed all it could:
    /// under an evicting policy the write goes on past `maxmemory`, as a
    /// command Redis admitted does (Redis evicts before each command, not
    /// during it); the engine refuses the next `denyoom` command while the
    /// arena stays over (`evict_to_maxmemory` first). Under `noeviction`, or
    /// with the arena itself full, the write fails with OOM.
    fn alloc_past_maxmemory(&mut self, payload: u64, pending: u64) -> Result<u64> {
        let policy = crate::EvictionPolicy::from_u32(self.ctx.region().load32(H_POLICY)?);
        if policy == crate::EvictionPolicy::NoEviction {
            return Err(Error::OutOfMemory);
        }
        alloc::alloc(&mut self.ctx, payload, pending)?.ok_or(Error::OutOfMemory)
    }

    /// Evicts by the configured policy until the arena is within
    /// `maxmemory` (Redis evicts at once when CONFIG SET lowers it), or
    /// nothing more can go. Returns how many keys went.
    pub fn evict_to_maxmemory(&mut self) -> Result<u64> {
        let mut evicted = 0;
        let mut busy_rounds = 0u32;
        loop {
            let maxmem = self.ctx.region().load64(H_MAXMEMORY)?;
            if maxmem == 0 || self.counted_used()? <= maxmem {
                return Ok(evicted);
            }
            match self.evict_one()? {
                Evicted::One => {
                    alloc::stash_flush(&mut self.ctx)?;
                    evicted += 1;
                    busy_rounds = 0;
                }
                Evicted::Busy if busy_rounds < MAX_BUSY_ROUNDS => {
                    busy_rounds += 1;
                    std::thread::yield_now();
                }
                Evicted::Busy | Evicted::Nothing => return Ok(evicted),
            }
        }
    }

    /// What `maxmemory` limits: the arena's bytes in use plus what the
    /// workers' clients hold in their buffers (Redis's used_memory counts
    /// client buffers too, so that they push keys out).
    fn counted_used(&self) -> Result<u64> {
        let r = self.ctx.region();
        Ok(r.load64(A_USED_BYTES)?
            .saturating_add(crate::ipc::workers::clients_memory_in(r)?))
    }

    /// One allocation attempt without eviction, honouring `maxmemory`.
    fn try_alloc_block(&mut self, payload: u64, need: u64, pending: u64) -> Result<Option<u64>> {
        let maxmem = self.ctx.region().load64(H_MAXMEMORY)?;
        if maxmem != 0 && !self.ignore_maxmemory && self.counted_used()? + need > maxmem {
            return Ok(None);
        }
        alloc::alloc(&mut self.ctx, payload, pending)
    }

    /// Allocates and fills an entry block; returns (block, pending word).
    pub(crate) fn new_entry(
        &mut self,
        e: &NewEntry,
        key: &[u8],
        parts: &[&[u8]],
        capacity: u64,
    ) -> Result<(u64, u64)> {
        let vallen: u64 = parts.iter().map(|p| p.len() as u64).sum();
        check_len(key.len() as u64)?;
        check_len(vallen)?;
        let pending = self.pending_new_word()?;
        let payload = E_KEY - 8 + key.len() as u64 + capacity.max(vallen);
        let blk = self.alloc_block(payload, pending)?;
        entry::write(self.ctx.region(), blk, e, key, parts)?;
        Ok((blk, pending))
    }

    /// Like `new_entry` with no value yet, for a value that will grow: room
    /// for `want` bytes if that fits without evicting anything, else exactly
    /// `need` bytes (evicting if the policy allows).
    pub(crate) fn new_growable_entry(
        &mut self,
        e: &NewEntry,
        key: &[u8],
        need: u64,
        want: u64,
    ) -> Result<(u64, u64)> {
        check_len(key.len() as u64)?;
        check_len(need)?;
        let pending = self.pending_new_word()?;
        let base = E_KEY - 8 + key.len() as u64;
        let roomy = base + want.max(need);
        let blk = match self.try_alloc_block(roomy, alloc::block_size_for(roomy), pending)? {
            Some(b) => b,
            None => self.alloc_block(base + need, pending)?,
        };
        entry::write(self.ctx.region(), blk, e, key, &[])?;
        Ok((blk, pending))
    }

    pub(crate) fn entry_fields(
        &self,
        db: u8,
        vtype: ValueType,
        expire: u64,
        mc_flags: u32,
    ) -> NewEntry {
        let now_ms = self.now_ms();
        NewEntry {
            db,
            vtype,
            encoding: 0,
            mc_flags,
            expire,
            lru: (now_ms / 1000) as u32,
            lfu: lfu::init(now_ms),
        }
    }

    // ---------- publishing ----------

    /// Reserves `N` distinct empty free-pending words, freeing earlier
    /// pending blocks first if needed. Call outside a transaction.
    /// An array, not a Vec: every write asks for one (no allocation per
    /// request).
    pub(crate) fn pending_free_words<const N: usize>(&mut self) -> Result<[u64; N]> {
        for attempt in 0..2 {
            let mut words = [0; N];
            let mut n = 0;
            for i in 0..PENDING_FREE_CAP {
                if n == N {
                    break;
                }
                let w = self.ctx.off + C_PENDING_FREE + 8 * i;
                if self.ctx.region().load64(w)? == 0 {
                    words[n] = w;
                    n += 1;
                }
            }
            if n == N {
                return Ok(words);
            }
            if attempt == 0 {
                self.drain_frees()?;
            }
        }
        Err(Error::Corrupted(self.ctx.off + C_PENDING_FREE))
    }

    /// Everything publishing into `l` needs that must happen outside the
    /// transaction: a free slot (or a fresh overflow node) and a pending word
    /// for the replaced entry.
    pub(crate) fn prepare_publish(&mut self, l: &Locked, free_word: u64) -> Result<Target> {
        let bucket = l.pos.bucket;
        let target = match l.found {
            Some(f) => Target::Replace(f, free_word),
            None => match index::empty_slot(&mut self.ctx, bucket)? {
                Some(w) => Target::Slot(w),
                None => {
                    let np = self.pending_new_word()?;
                    let nb = self.alloc_block(NODE_SIZE, np)?;
                    self.ctx.region().zero(nb + 8, NODE_SIZE)?;
                    Target::Node(nb, np)
                }
            },
        };
        Ok(target)
    }

    /// The logged writes that make `blk` (recorded in `pending`) the key of
    /// `l`. `drop_old`: a replaced entry's trees go with it (they do unless
    /// `blk` is the next version of the same collection).
    pub(crate) fn publish_in_txn(
        &mut self,
        l: &mut Locked,
        target: Target,
        blk: u64,
        pending: u64,
        drop_old: bool,
    ) -> Result<()> {
        let new_expire = self.ctx.region().load64(blk + E_EXPIRE)?;
        // Stamped now, under the bucket lock, so a key's versions grow in the
        // order its writes land; `blk` is still private: a plain store (I8).
        // With the log on, the version is the LSN of the write's record.
        let version = if let Some(lsn) = self.log.replay_lsn {
            lsn
        } else if self.logging() {
            if !self.log_has_staged() {
                self.stage_entry_image(blk)?;
            }
            self.log_reserve()?
        } else {
            self.next_version()?
        };
        self.ctx.region().store64(blk + E_LSN, version)?;
        let slot_word = match target {
            Target::Replace(f, _) => f.slot_word,
            Target::Slot(w) => w,
            Target::Node(nb, np) => {
                let w = index::link_node(&mut self.ctx, l.pos.bucket, nb)?;
                self.ctx.wlog64(np, 0)?;
                w
            }
        };
        self.ctx.wlog64(slot_word, l.pos.tag() | blk)?;
        self.ctx.wlog64(pending, 0)?;
        let (keys, expires) = match target {
            Target::Replace(f, free_word) => {
                self.ctx.wlog64(free_word, f.raw.off)?;
                if drop_old {
                    let lazy = self.lazy_now || self.lazy_policy.server_del;
                    self.drop_trees_in_txn(&f.raw, lazy)?;
                }
                (0, (new_expire != 0) as i64 - (f.raw.expire != 0) as i64)
            }
            _ => (1, (new_expire != 0) as i64),
        };
        self.ctx.add_db_keys(l.db, keys, expires)?;
        l.found = Some(Found {
            slot_word,
            raw: Raw::read(self.ctx.region(), blk)?,
        });
        Ok(())
    }

    /// Publishes the filled block `blk` (recorded in `pending`) as the key of
    /// `l`, replacing what was there. One transaction (I5, I8). A new value
    /// of an existing key inherits its LFU counter, counted as one access
    /// (Redis's `lookupKeyWrite` then `dbOverwrite`).
    pub(crate) fn publish(&mut self, l: &mut Locked, blk: u64, pending: u64) -> Result<()> {
        self.publish_with(l, blk, pending, true, |_| Ok(()))
    }

    /// [`Handle::publish`], with `also`'s logged writes in the same
    /// transaction; `drop_old` as in [`Handle::publish_in_txn`].
    pub(crate) fn publish_with(
        &mut self,
        l: &mut Locked,
        blk: u64,
        pending: u64,
        drop_old: bool,
        also: impl FnOnce(&mut Handle) -> Result<()>,
    ) -> Result<()> {
        if let Some(f) = l.found {
            let lfu = self.lfu_accessed(f.raw.lfu, self.now_ms())?;
            // `blk` is not published yet: nobody else can see this store (I8).
            self.ctx.region().store32(blk + E_LRU + 4, lfu)?;
        }
        let free_word = self.pending_free_words::<1>()?[0];
        let target = self.prepare_publish(l, free_word)?;
        self.ctx.seq_bump(l.pos.bucket)?;
        self.publish_in_txn(l, target, blk, pending, drop_old)?;
        also(self)?;
        self.log_committing()?;
        self.ctx.commit()?;
        self.log_complete()?;
        self.ctx.seq_bump(l.pos.bucket)?;
        if self.key_log.creations && !matches!(target, Target::Replace(..)) {
            if let Some(f) = l.found {
                self.log_entry(&f.raw, KeyEvent::Created);
            }
        }
        Ok(())
    }

    /// The logged writes that unpublish `f` from the chain of (held) `bucket`,
    /// recording its block (and an emptied overflow node) in `words`.
    /// `drop_trees`: the trees it owns go too (not when RENAME or MOVE
    /// carries them to another entry).
    pub(crate) fn remove_in_txn(
        &mut self,
        bucket: u64,
        f: &Found,
        words: [u64; 2],
        drop_trees: bool,
    ) -> Result<()> {
        if drop_trees && self.logging() && !self.log.quiet {
            let key = self.entry_key(&f.raw)?;
            let db = f.raw.db;
            self.log_stage(|out| crate::log::record::encode_delete(out, db, &key));
            self.log_reserve()?;
        }
        self.ctx.wlog64(f.slot_word, 0)?;
        self.ctx.wlog64(words[0], f.raw.off)?;
        if drop_trees {
            self.drop_trees_in_txn(&f.raw, self.lazy_now)?;
        }
        self.ctx
            .add_db_keys(f.raw.db, -1, -((f.raw.expire != 0) as i64))?;
        if let Some(node) = index::unlink_empty_node(&mut self.ctx, bucket)? {
            self.ctx.wlog64(words[1], node)?;
        }
        Ok(())
    }

    /// Unpublishes the entry `f` from the chain of (held) `bucket`; its block
    /// is freed after the unlock. One transaction.
    pub(crate) fn remove_locked(&mut self, bucket: u64, f: &Found) -> Result<()> {
        let w = self.pending_free_words::<2>()?;
        self.ctx.seq_bump(bucket)?;
        self.remove_in_txn(bucket, f, [w[0], w[1]], true)?;
        self.log_committing()?;
        self.ctx.commit()?;
        self.log_complete()?;
        self.ctx.seq_bump(bucket)
    }

    /// Changes words of a published entry in place (expiry, lengths) in one
    /// transaction, bumping the seqlock so readers see all or none, and
    /// stamps a new version (WATCH). Every in-place change of a published
    /// entry goes through here.
    pub(crate) fn update_in_place(&mut self, l: &Locked, words: &[(u64, u64)]) -> Result<()> {
        self.update_words(l, words, true)
    }

    /// [`Handle::update_in_place`] without a new version: for memcached's
    /// touch, whose CAS value must survive (so WATCH does not see it).
    pub(crate) fn update_in_place_keep_version(
        &mut self,
        l: &Locked,
        words: &[(u64, u64)],
    ) -> Result<()> {
        self.update_words(l, words, false)
    }

    fn update_words(&mut self, l: &Locked, words: &[(u64, u64)], stamp: bool) -> Result<()> {
        let f = l.found.ok_or(Error::NoSuchKey)?;
        let bucket = l.pos.bucket;
        let logged = if self.logging() {
            self.stage_in_place_change(&f.raw, words)?;
            Some(self.log_reserve()?)
        } else {
            self.log.replay_lsn
        };
        self.ctx.seq_bump(bucket)?;
        for &(field, val) in words {
            if field == E_EXPIRE {
                let delta = (val != 0) as i64 - (f.raw.expire != 0) as i64;
                self.ctx.add_db_keys(l.db, 0, delta)?;
            }
            self.ctx.wlog64(f.raw.off + field, val)?;
        }
        if stamp {
            let version = match logged {
                Some(lsn) => lsn,
                None => self.next_version()?,
            };
            self.ctx.wlog64(f.raw.off + E_LSN, version)?;
        }
        self.log_committing()?;
        self.ctx.commit()?;
        self.log_complete()?;
        self.ctx.seq_bump(bucket)
    }

    /// The key bytes of an entry.
    pub(crate) fn entry_key(&self, raw: &Raw) -> Result<Vec<u8>> {
        let mut key = Vec::with_capacity(raw.keylen as usize);
        self.ctx
            .region()
            .read_bytes(raw.off + E_KEY, raw.keylen, &mut key)?;
        Ok(key)
    }

    /// Stages the record of a whole compact entry, read from its (private
    /// or locked) block.
    pub(crate) fn stage_entry_image(&mut self, blk: u64) -> Result<()> {
        let raw = Raw::read(self.ctx.region(), blk)?;
        if raw.encoding == crate::keyspace::entry::ENC_PAGED {
            // A paged value's record is staged by its writer (collections).
            return Err(Error::Corrupted(blk));
        }
        let key = self.entry_key(&raw)?;
        let mut value = Vec::with_capacity(raw.vallen as usize);
        self.ctx
            .region()
            .read_bytes(raw.value_off(), raw.vallen, &mut value)?;
        let vtype = ValueType::from_u8(raw.vtype).ok_or(Error::Corrupted(blk))?;
        self.log_stage(|out| {
            crate::log::record::encode_set_entry(
                out,
                raw.db,
                &key,
                vtype,
                raw.mc_flags,
                raw.expire,
                &[&value],
            )
        });
        Ok(())
    }

    /// Stages the record of an in-place change of a published entry: a new
    /// expiry, or a longer value (APPEND into spare capacity, already
    /// written past the old length).
    fn stage_in_place_change(&mut self, raw: &Raw, words: &[(u64, u64)]) -> Result<()> {
        let key = self.entry_key(raw)?;
        let db = raw.db;
        for &(field, val) in words {
            match field {
                E_EXPIRE => {
                    self.log_stage(|out| crate::log::record::encode_expire(out, db, &key, val))
                }
                E_KEYLEN => {
                    let new_len = val >> 32;
                    let old_len = raw.vallen;
                    let mut tail = Vec::with_capacity(new_len.saturating_sub(old_len) as usize);
                    self.ctx.region().read_bytes(
                        raw.value_off() + old_len,
                        new_len.saturating_sub(old_len),
                        &mut tail,
                    )?;
                    self.log_stage(|out| {
                        crate::log::record::encode_string_append(out, db, &key, &tail)
                    });
                }
                _ => return Err(Error::Corrupted(raw.off + field)),
            }
        }
        Ok(())
    }
}
