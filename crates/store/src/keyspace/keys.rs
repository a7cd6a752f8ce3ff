//! Key-space operations: DEL, EXISTS, TYPE, EXPIRE and friends, TTL, PERSIST,
//! RENAME, DBSIZE, FLUSHDB/FLUSHALL, SCAN.

use crate::error::{Error, Result};
use crate::ipc::keylog::KeyEvent;
use crate::keyspace::entry::{Raw, ValueType};
use crate::keyspace::glob::glob_match;
use crate::keyspace::handle::{check_db, Handle};
use crate::keyspace::index::{self, Found};
use crate::segment::context::Stat;
use crate::segment::layout::*;

/// EXPIRE's NX / XX / GT / LT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExpireCondition {
    /// Always set.
    #[default]
    Always,
    /// NX: only when the key has no expiry.
    IfNone,
    /// XX: only when the key has an expiry.
    IfSome,
    /// GT: only when the new expiry is later (no expiry counts as infinite).
    IfGreater,
    /// LT: only when the new expiry is sooner (no expiry counts as infinite).
    IfLess,
    /// XX and LT together: only when the key has an expiry and the new one is
    /// sooner.
    IfSomeAndLess,
}

/// The answer to TTL/PTTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// The key does not exist (-2).
    Missing,
    /// The key exists and has no expiry (-1).
    Persistent,
    /// Milliseconds left.
    Ms(u64),
}

/// One page of a SCAN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanPage {
    /// Cursor for the next call; 0 when the scan is complete.
    pub cursor: u64,
    /// Keys of this page.
    pub keys: Vec<Vec<u8>>,
}

/// A key as seen by a scan of one bucket.
pub(crate) struct Seen {
    pub raw: Raw,
    pub key: Vec<u8>,
}

impl Handle {
    /// DEL of one key: whether it existed.
    pub fn delete(&mut self, db: u8, key: &[u8]) -> Result<bool> {
        self.with_key(db, key, |h, l| match l.found {
            Some(f) => {
                h.remove_locked(l.pos.bucket, &f)?;
                Ok(true)
            }
            None => Ok(false),
        })
    }

    /// Whether the key exists; the lookup moves its LRU clock (TOUCH).
    pub fn exists(&mut self, db: u8, key: &[u8]) -> Result<bool> {
        Ok(self.lookup(db, key, |_, _| Ok(()))?.is_some())
    }

    /// EXISTS of one key: leaves the LRU clock, as Redis's EXISTS does.
    pub fn exists_untouched(&mut self, db: u8, key: &[u8]) -> Result<bool> {
        Ok(self.lookup_opts(db, key, false, |_, _| Ok(()))?.is_some())
    }

    /// TYPE: the value type, or None for a missing key. Leaves the LRU clock.
    pub fn key_type(&mut self, db: u8, key: &[u8]) -> Result<Option<ValueType>> {
        match self.lookup_opts(db, key, false, |_, _| Ok(()))? {
            Some((raw, ())) => Ok(Some(raw.meta()?.vtype)),
            None => Ok(None),
        }
    }

    /// The metadata of `key` without moving its LRU clock (OBJECT, EXPIRETIME),
    /// and its value copied into `out` when it is at most `max_len` bytes
    /// (`out` is left empty otherwise).
    pub fn peek(
        &mut self,
        db: u8,
        key: &[u8],
        max_len: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<crate::keyspace::entry::Meta>> {
        let got = self.lookup_opts(db, key, false, |r, raw| {
            out.clear();
            if raw.vallen <= max_len {
                r.read_bytes(raw.value_off(), raw.vallen, out)?;
            }
            Ok(())
        })?;
        match got {
            Some((raw, ())) => Ok(Some(raw.meta()?)),
            None => {
                out.clear();
                Ok(None)
            }
        }
    }

    /// PEXPIREAT with a condition. A time not in the future deletes the key.
    /// Returns whether the expiry was set (or the key deleted).
    pub fn expire_at(
        &mut self,
        db: u8,
        key: &[u8],
        at_ms: i64,
        cond: ExpireCondition,
    ) -> Result<bool> {
        let now = self.now_ms() as i64;
        self.with_key(db, key, |h, l| {
            let Some(f) = l.found else { return Ok(false) };
            let current = (f.raw.expire != 0).then_some(f.raw.expire as i64);
            let allowed = match cond {
                ExpireCondition::Always => true,
                ExpireCondition::IfNone => current.is_none(),
                ExpireCondition::IfSome => current.is_some(),
                ExpireCondition::IfGreater => current.is_some_and(|c| at_ms > c),
                ExpireCondition::IfLess => current.is_none_or(|c| at_ms < c),
                ExpireCondition::IfSomeAndLess => current.is_some_and(|c| at_ms < c),
            };
            if !allowed {
                return Ok(false);
            }
            if at_ms <= now {
                h.remove_locked(l.pos.bucket, &f)?;
                return Ok(true);
            }
            h.update_in_place(l, &[(E_EXPIRE, at_ms as u64)])?;
            Ok(true)
        })
    }

    /// EXPIRE: `seconds` from now. `None` when now + seconds overflows (Redis
    /// answers "invalid expire time" then).
    pub fn expire(
        &mut self,
        db: u8,
        key: &[u8],
        seconds: i64,
        cond: ExpireCondition,
    ) -> Result<Option<bool>> {
        match seconds.checked_mul(1000) {
            Some(ms) => self.pexpire(db, key, ms, cond),
            None => Ok(None),
        }
    }

    /// PEXPIRE: `ms` from now; `None` on overflow.
    pub fn pexpire(
        &mut self,
        db: u8,
        key: &[u8],
        ms: i64,
        cond: ExpireCondition,
    ) -> Result<Option<bool>> {
        match (self.now_ms() as i64).checked_add(ms) {
            Some(at) => self.expire_at(db, key, at, cond).map(Some),
            None => Ok(None),
        }
    }

    /// PTTL in a typed form.
    pub fn ttl(&mut self, db: u8, key: &[u8]) -> Result<Ttl> {
        let now = self.now_ms();
        Ok(match self.lookup_opts(db, key, false, |_, _| Ok(()))? {
            None => Ttl::Missing,
            Some((raw, ())) if raw.expire == 0 => Ttl::Persistent,
            Some((raw, ())) => Ttl::Ms(raw.expire.saturating_sub(now)),
        })
    }

    /// PERSIST: whether an expiry was removed.
    pub fn persist(&mut self, db: u8, key: &[u8]) -> Result<bool> {
        self.with_key(db, key, |h, l| match l.found {
            Some(f) if f.raw.expire != 0 => {
                h.update_in_place(l, &[(E_EXPIRE, 0)])?;
                Ok(true)
            }
            _ => Ok(false),
        })
    }

    /// RENAME (`nx` = RENAMENX): moves the value and its expiry. Errors with
    /// `NoSuchKey` when `src` is missing; false when `nx` and `dst` exists.
    pub fn rename(&mut self, db: u8, src: &[u8], dst: &[u8], nx: bool) -> Result<bool> {
        if src == dst {
            // Redis: OK for RENAME, 0 for RENAMENX, once the key is known to exist.
            return if self.exists(db, src)? {
                Ok(!nx)
            } else {
                Err(Error::NoSuchKey)
            };
        }
        let moved = self.transfer(db, src, db, dst, !nx, true)?;
        moved.ok_or(Error::NoSuchKey)
    }

    /// COPY: the value, type and expiry of `src` in `src_db` written as `dst`
    /// in `dst_db`. False when `src` is missing, or `dst` exists and not
    /// `replace`. `SameObject` when both name the same key of the same db.
    pub fn copy(
        &mut self,
        src_db: u8,
        src: &[u8],
        dst_db: u8,
        dst: &[u8],
        replace: bool,
    ) -> Result<bool> {
        if src_db == dst_db && src == dst {
            return Err(Error::SameObject);
        }
        Ok(self
            .transfer(src_db, src, dst_db, dst, replace, false)?
            .unwrap_or(false))
    }

    /// MOVE: `key` from `db` to `dst_db`, only if it is not there already.
    /// `SameObject` when the two dbs are the same.
    pub fn move_key(&mut self, db: u8, key: &[u8], dst_db: u8) -> Result<bool> {
        if db == dst_db {
            return Err(Error::SameObject);
        }
        Ok(self
            .transfer(db, key, dst_db, key, false, true)?
            .unwrap_or(false))
    }

    /// The one primitive behind RENAME, COPY and MOVE: with both buckets locked
    /// (lower first, so two transfers never deadlock), writes a copy of `src`
    /// as `dst` (unless `dst` exists and not `replace`) and, if `remove_src`,
    /// unpublishes `src` in the same transaction, with both seqlocks odd
    /// throughout: no reader and no crash ever sees both keys or neither.
    /// None when `src` is missing; Some(false) when `dst` blocked it.
    fn transfer(
        &mut self,
        src_db: u8,
        src: &[u8],
        dst_db: u8,
        dst: &[u8],
        replace: bool,
        remove_src: bool,
    ) -> Result<Option<bool>> {
        check_db(src_db)?;
        check_db(dst_db)?;
        self.ctx.stat_add(Stat::Ops, 1);
        // Both dbs resolved from one view of the map, re-checked once both
        // buckets are locked (I11).
        let (src_db, dst_db, sp, dp, buckets) = loop {
            let view = self.db_view()?;
            let (src_db, dst_db) = (view.phys(src_db), view.phys(dst_db));
            let sp = index::key_pos(&self.ctx, src_db, src);
            let dp = index::key_pos(&self.ctx, dst_db, dst);
            let mut buckets = vec![sp.bucket.min(dp.bucket)];
            if sp.bucket != dp.bucket {
                buckets.push(sp.bucket.max(dp.bucket));
            }
            for (i, b) in buckets.iter().enumerate() {
                if let Err(e) = self.ctx.lock(*b) {
                    return self.finish(&buckets[..i], Err(e));
                }
            }
            match self.db_view_locked(view) {
                Ok(true) => break (src_db, dst_db, sp, dp, buckets),
                Ok(false) => self.finish(&buckets, Ok(()))?,
                Err(e) => return self.finish(&buckets, Err(e)),
            }
        };
        let res = (|| {
            let s = self.find_locked(src_db, src, sp)?;
            let Some(sf) = s.found else {
                return Ok(None);
            };
            let mut d = self.find_locked(dst_db, dst, dp)?;
            if d.found.is_some() && !replace {
                return Ok(Some(false));
            }
            let fields = crate::keyspace::entry::NewEntry {
                db: dst_db,
                vtype: ValueType::from_u8(sf.raw.vtype).ok_or(Error::Corrupted(sf.raw.off))?,
                encoding: sf.raw.encoding,
                mc_flags: sf.raw.mc_flags,
                expire: sf.raw.expire,
                lru: sf.raw.lru,
                // RENAME and MOVE keep the key's LFU state; COPY is a new key.
                lfu: match remove_src {
                    true => sf.raw.lfu,
                    false => crate::keyspace::lfu::init(self.now_ms()),
                },
            };
            let (blk, pending) = self.new_entry(&fields, dst, &[], sf.raw.vallen)?;
            let r = self.ctx.region();
            r.copy_within(
                sf.raw.value_off(),
                blk + E_KEY + dst.len() as u64,
                sf.raw.vallen,
            )?;
            r.store64(blk + E_KEYLEN, dst.len() as u64 | sf.raw.vallen << 32)?;
            if !remove_src {
                // A copy owns copies of the source's trees, if it has any.
                self.copy_trees(&sf.raw, blk, E_KEY + dst.len() as u64)?;
            }
            let words = self.pending_free_words::<3>()?;
            let target = self.prepare_publish(&d, words[0])?;
            if self.logging() {
                // The destination's whole value, then the source's removal:
                // contiguous frames of one group.
                self.stage_transfer(&sf.raw, blk, dst_db, dst)?;
                if remove_src {
                    let src_key = self.entry_key(&sf.raw)?;
                    self.log_stage(|out| crate::log::record::encode_delete(out, src_db, &src_key));
                }
            }
            for b in &buckets {
                self.ctx.seq_bump(*b)?;
            }
            self.publish_in_txn(&mut d, target, blk, pending, true)?;
            if remove_src {
                self.remove_in_txn(sp.bucket, &sf, [words[1], words[2]], false)?;
            } else {
                self.ctx.wlog64(self.ctx.off + C_NEW_CHAIN, 0)?;
            }
            self.log_committing()?;
            self.ctx.commit()?;
            self.log_complete()?;
            for b in &buckets {
                self.ctx.seq_bump(*b)?;
            }
            // Redis deletes an existing destination and adds the key anew.
            if self.key_log.creations {
                self.log_key(dst_db, dst, KeyEvent::Created);
            }
            Ok(Some(true))
        })();
        self.finish(&buckets, res)
    }

    /// Stages the records of a RENAME, MOVE or COPY's destination: the whole
    /// value of `src`, now copied into `blk`.
    fn stage_transfer(&mut self, src: &Raw, blk: u64, dst_db: u8, dst: &[u8]) -> Result<()> {
        if src.encoding == crate::keyspace::entry::ENC_PAGED {
            self.stage_paged_image(src, dst_db, dst)
        } else {
            self.stage_entry_image(blk)
        }
    }

    /// RANDOMKEY: a key of `db` chosen at random (expired keys skipped), or
    /// None when the db is empty.
    ///
    /// Random buckets are probed first: every bucket holding live keys of
    /// `db` is equally likely, as in Redis's own dict sampling. Taking the
    /// first key after one random bucket instead would draw each key in
    /// proportion to the empty run before it, so with two keys one could be
    /// drawn almost always. Only a db too sparse for the probes to find is
    /// walked in order, gathering keys from a random start.
    pub fn random_key(&mut self, db: u8) -> Result<Option<Vec<u8>>> {
        check_db(db)?;
        loop {
            let view = self.db_view()?;
            let key = self.random_key_phys(view.phys(db))?;
            if self.db_view_still(view)? {
                return Ok(key);
            }
        }
    }

    fn random_key_phys(&mut self, db: u8) -> Result<Option<Vec<u8>>> {
        /// Random buckets looked at before the walk.
        const PROBES: usize = 1024;
        /// Keys the walk gathers before it draws: a db with fewer live keys
        /// is walked whole, so each of its keys is equally likely.
        const WALK_SAMPLE: usize = 64;
        if self.phys_count(H_DB_KEYS_BASE, C_DB_KEYS, db)? == 0 {
            return Ok(None);
        }
        let buckets = self.ctx.sh.geo.buckets;
        let now = self.now_ms();
        let live = |seen: &mut Vec<Seen>| seen.retain(|s| s.raw.db == db && !s.raw.expired(now));
        let mut seen = Vec::new();
        for _ in 0..PROBES {
            let bucket = self.ctx.random() % buckets;
            self.scan_bucket(index::bucket_at(&self.ctx, bucket), &mut seen)?;
            live(&mut seen);
            if !seen.is_empty() {
                let pick = (self.ctx.random() % seen.len() as u64) as usize;
                return Ok(Some(seen.swap_remove(pick).key));
            }
        }
        let start = self.ctx.random() % buckets;
        let mut gathered: Vec<Vec<u8>> = Vec::new();
        for i in 0..buckets {
            self.scan_bucket(
                index::bucket_at(&self.ctx, (start + i) % buckets),
                &mut seen,
            )?;
            live(&mut seen);
            gathered.extend(seen.drain(..).map(|s| s.key));
            if gathered.len() >= WALK_SAMPLE {
                break;
            }
        }
        if gathered.is_empty() {
            return Ok(None);
        }
        let pick = (self.ctx.random() % gathered.len() as u64) as usize;
        Ok(Some(gathered.swap_remove(pick)))
    }

    /// DBSIZE: keys in `db` (expired keys not yet removed included, as Redis).
    pub fn dbsize(&mut self, db: u8) -> Result<u64> {
        self.logical_count(H_DB_KEYS_BASE, C_DB_KEYS, db)
    }

    /// Keys in `db` that have an expiry (INFO keyspace's `expires`).
    pub fn expires_count(&mut self, db: u8) -> Result<u64> {
        self.logical_count(H_DB_EXPIRES_BASE, C_DB_EXPIRES, db)
    }

    /// Whether any db has a key with an expiry. Reads no db map (the dbs
    /// are counted physically), so it never waits for a SWAPDB or another
    /// context's exclusive section: background work asks it between
    /// requests, and must not stall its worker behind a running script.
    pub fn any_expires(&self) -> Result<bool> {
        let counts = self.phys_counts(H_DB_EXPIRES_BASE, C_DB_EXPIRES)?;
        Ok(counts.iter().any(|&n| n > 0))
    }

    /// Every physical db's counter, as [`phys_count`](Self::phys_count)
    /// gives one, in one pass over the contexts: each context is a page of
    /// its own, and a pass per db touched every context's page sixteen
    /// times (the sweeper asks on every tick of every worker, and those
    /// loads were most of an idle worker's CPU).
    pub(crate) fn phys_counts(&self, base: u64, per_ctx: u64) -> Result<[u64; crate::NUM_DBS]> {
        let r = self.ctx.region();
        let geo = &self.ctx.sh.geo;
        let mut sums = [0u64; crate::NUM_DBS];
        for (db, sum) in (0u64..).zip(sums.iter_mut()) {
            *sum = r.load64(base + 8 * db)?;
        }
        for i in 0..geo.ctx_count as u64 {
            let at = geo.ctx_off + i * CTX_SIZE + per_ctx;
            for (db, sum) in (0u64..).zip(sums.iter_mut()) {
                *sum = sum.wrapping_add(r.load64(at + 8 * db)?);
            }
        }
        Ok(sums.map(|sum| (sum as i64).max(0) as u64))
    }

    fn logical_count(&mut self, base: u64, per_ctx: u64, db: u8) -> Result<u64> {
        check_db(db)?;
        loop {
            let view = self.db_view()?;
            let n = self.phys_count(base, per_ctx, view.phys(db))?;
            if self.db_view_still(view)? {
                return Ok(n);
            }
        }
    }

    /// A per-db counter of physical db `db`, summed over the header and
    /// every context.
    pub(crate) fn phys_count(&self, base: u64, per_ctx: u64, db: u8) -> Result<u64> {
        let r = self.ctx.region();
        let geo = &self.ctx.sh.geo;
        let mut sum = r.load64(base + 8 * db as u64)?;
        for i in 0..geo.ctx_count as u64 {
            sum = sum.wrapping_add(r.load64(geo.ctx_off + i * CTX_SIZE + per_ctx + 8 * db as u64)?);
        }
        Ok((sum as i64).max(0) as u64)
    }

    /// FLUSHDB: removes every key of `db`.
    pub fn flushdb(&mut self, db: u8) -> Result<()> {
        check_db(db)?;
        // Under the map lock: no SWAPDB moves the db while we empty it (I11),
        // and no exclusive section sees it half empty (I13).
        self.with_map_locked(|h, view| {
            h.bump_flush_epoch()?;
            let db = view.phys(db);
            let cutoff =
                h.flush_cutoff(Some(db), |out| crate::log::record::encode_flush_db(out, db))?;
            h.flush(Some(db), cutoff)
        })
    }

    /// FLUSHALL: removes every key of every db.
    pub fn flushall(&mut self) -> Result<()> {
        // Under the map lock for the same reason as FLUSHDB: an exclusive
        // section (EXEC) never runs in the middle of a flush.
        self.with_map_locked(|h, _| {
            h.bump_flush_epoch()?;
            let cutoff = h.flush_cutoff(None, crate::log::record::encode_flush_all)?;
            h.flush(None, cutoff)
        })
    }

    /// The version a flush removes keys below: its record's LSN (a key
    /// written after it was reserved stays, in the store as in a replay).
    /// With the log on, the context records the flush until it has removed
    /// every key, so that recovery finishes a flush its record promised.
    fn flush_cutoff(&mut self, db: Option<u8>, encode: impl FnOnce(&mut Vec<u8>)) -> Result<u64> {
        if let Some(lsn) = self.log.replay_lsn {
            return Ok(lsn);
        }
        if self.logging() {
            self.log_stage(encode);
            let lsn = self.log_reserve()?;
            let r = self.ctx.region();
            r.store64(
                self.ctx.off + C_LOG_FLUSH_DB,
                db.map_or(0, |d| d as u64 + 1),
            )?;
            r.store64(self.ctx.off + C_LOG_FLUSH, lsn + 1)?;
            r.store64(self.ctx.off + C_LOG_UNCOMMITTED, 0)?;
            self.log_complete()?;
            return Ok(lsn);
        }
        self.next_version()
    }

    /// Removes every key of `db` (all dbs when None) whose version is below
    /// `cutoff`, logging no record per key.
    pub(crate) fn flush(&mut self, db: Option<u8>, cutoff: u64) -> Result<()> {
        self.ctx.stat_add(Stat::Ops, 1);
        let quiet = std::mem::replace(&mut self.log.quiet, true);
        let res = (|| {
            for i in 0..self.ctx.sh.geo.buckets {
                let bucket = index::bucket_at(&self.ctx, i);
                self.remove_where(
                    bucket,
                    |raw| db.is_none_or(|d| raw.db == d) && raw.lsn < cutoff,
                    None,
                )?;
            }
            Ok(())
        })();
        self.log.quiet = quiet;
        if res.is_ok() {
            self.ctx.region().store64(self.ctx.off + C_LOG_FLUSH, 0)?;
        }
        res
    }

    /// Finishes a flush a dead context logged but did not complete (see
    /// `H_FLUSH_REDO`). Every new handle calls it.
    pub(crate) fn finish_interrupted_flush(&mut self) -> Result<()> {
        let r = self.ctx.region();
        let redo = r.load64(H_FLUSH_REDO)?;
        if redo == 0 {
            return Ok(());
        }
        let db = r.load64(H_FLUSH_REDO_DB)?;
        let db = match db {
            0 => None,
            d if d <= NUM_DBS as u64 => Some(d as u8 - 1),
            _ => return Err(Error::Corrupted(H_FLUSH_REDO_DB)),
        };
        self.flush(db, redo - 1)?;
        let _ = self.ctx.region().a64(H_FLUSH_REDO)?.compare_exchange(
            redo,
            0,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    /// Removes the entries of `bucket` for which `pred` holds (checked again
    /// under the lock); counts them under `stat`. Returns how many.
    pub(crate) fn remove_where(
        &mut self,
        bucket: u64,
        pred: impl Fn(&Raw) -> bool,
        stat: Option<Stat>,
    ) -> Result<u64> {
        let mut any = false;
        index::read_stable(&mut self.ctx, bucket, |r| {
            any = false;
            index::for_each_slot(r, bucket, |_, s| {
                any = pred(&Raw::read(r, s & SLOT_OFF_MASK)?);
                Ok(any)
            })
        })?;
        if !any {
            return Ok(0);
        }
        self.ctx.lock(bucket)?;
        if stat == Some(Stat::Expired) && self.other_section_running()? {
            // The sweeper leaves keys alone while another context's section
            // runs: its journal must find every word as it left it.
            self.ctx.unlock(bucket)?;
            return Ok(0);
        }
        let res = (|| {
            let mut n = 0;
            loop {
                let mut victim = None;
                let r = self.ctx.region();
                index::for_each_slot(r, bucket, |w, s| {
                    let raw = Raw::read(r, s & SLOT_OFF_MASK)?;
                    if pred(&raw) {
                        victim = Some(Found { slot_word: w, raw });
                    }
                    Ok(victim.is_some())
                })?;
                let Some(f) = victim else { return Ok(n) };
                let lazy = stat == Some(Stat::Expired) && self.lazy_policy.expire;
                self.lazily(lazy, |h| h.remove_locked(bucket, &f))?;
                if let Some(stat) = stat {
                    self.ctx.stat_add(stat, 1);
                }
                if stat == Some(Stat::Expired) && self.key_log.removals {
                    self.log_entry(&f.raw, KeyEvent::Expired);
                }
                n += 1;
            }
        })();
        self.finish(&[bucket], res)
    }

    /// Reads the live entries (with keys) of one bucket's chain, lock-free.
    pub(crate) fn scan_bucket(&mut self, bucket: u64, out: &mut Vec<Seen>) -> Result<()> {
        index::read_stable(&mut self.ctx, bucket, |r| {
            out.clear();
            index::for_each_slot(r, bucket, |_, s| {
                let raw = Raw::read(r, s & SLOT_OFF_MASK)?;
                let mut key = Vec::with_capacity(raw.keylen as usize);
                r.read_bytes(raw.off + E_KEY, raw.keylen, &mut key)?;
                out.push(Seen { raw, key });
                Ok(false)
            })
        })
    }

    /// SCAN: from `cursor`, about `count` keys of `db` matching `pattern` and
    /// `vtype`. The index never rehashes, so every key present for the whole
    /// scan is returned exactly once.
    pub fn scan(
        &mut self,
        db: u8,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        vtype: Option<ValueType>,
    ) -> Result<ScanPage> {
        check_db(db)?;
        self.ctx.stat_add(Stat::Ops, 1);
        loop {
            let view = self.db_view()?;
            let page = self.scan_phys(view.phys(db), cursor, pattern, count, vtype)?;
            if self.db_view_still(view)? {
                return Ok(page);
            }
        }
    }

    fn scan_phys(
        &mut self,
        db: u8,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        vtype: Option<ValueType>,
    ) -> Result<ScanPage> {
        let buckets = self.ctx.sh.geo.buckets;
        let count = count.max(1);
        // Empty buckets are cheap to pass over, but the index is sized to the
        // segment, not to the keys: a call passes over at most this many
        // (about 2 ms of a 1 GiB segment's million buckets), so a sparse db
        // costs a few calls where Redis's table, sized to its keys, takes
        // one. A db of no more than COUNT keys is walked to the end in one
        // call instead (one pass over the index, as KEYS makes), so it is
        // returned whole with cursor 0, as Redis returns a small table:
        // clients and their tests expect that of a nearly empty db.
        let small_db = self.phys_count(H_DB_KEYS_BASE, C_DB_KEYS, db)? <= count as u64;
        let max_visits = 131_072 + count as u64 * 10;
        let now = self.now_ms();
        // As Redis: a lone `*` is no filter at all (the matcher itself would
        // not match the empty key with it).
        let pattern = pattern.filter(|p| *p != b"*");
        let mut page = ScanPage::default();
        let mut seen = Vec::new();
        let mut examined = 0;
        let mut i = cursor;
        let mut visits = 0;
        while i < buckets && (small_db || (examined < count && visits < max_visits)) {
            self.scan_bucket(index::bucket_at(&self.ctx, i), &mut seen)?;
            for s in seen.drain(..) {
                if s.raw.db != db || s.raw.expired(now) {
                    continue;
                }
                examined += 1;
                if vtype.is_some_and(|t| t as u8 != s.raw.vtype) {
                    continue;
                }
                if pattern.is_none_or(|p| glob_match(p, &s.key, false)) {
                    page.keys.push(s.key);
                }
            }
            i += 1;
            visits += 1;
        }
        page.cursor = if i >= buckets { 0 } else { i };
        Ok(page)
    }
}

impl Handle {
    /// MEMORY USAGE: the bytes of the arena that `key` holds — its entry
    /// block (header, key, inline value) plus, for a paged collection,
    /// every node block of its trees. None when the key does not exist.
    /// Unlike Redis it counts every block rather than sampling, so it is
    /// exact and O(nodes).
    pub fn memory_usage(&mut self, db: u8, key: &[u8]) -> Result<Option<u64>> {
        let got = self.lookup_opts(db, key, false, |r, raw| {
            // `raw.block` is the entry block's size (its header word).
            let entry = raw.block;
            let mut nodes = 0u64;
            crate::collections::paged::owned_blocks(r, raw, &mut |blk| {
                nodes += r.load_block_header(blk)?.0;
                Ok(())
            })?;
            Ok(entry + nodes)
        })?;
        Ok(got.map(|(_, bytes)| bytes))
    }
}
