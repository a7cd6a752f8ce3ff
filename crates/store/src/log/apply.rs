//! Recovery's side of the log: applying a record to the store (snapshot
//! load and log replay), and reading the store out as records (fuzzy
//! snapshots). docs/design.md I16: a record whose LSN is not above the key's
//! version is already in the store and is skipped.
//!
//! Records name the physical db (the one an entry lives in); SWAPDB's
//! record names the logical pair, and a snapshot starts with the SWAPDB
//! records that rebuild its db map, so both agree once applied in order.

use crate::collections::{Collection, Hash, List, Set, Stream, ZSet};
use crate::error::{Error, Result};
use crate::keyspace::entry::{Raw, ValueType, ENC_PAGED};
use crate::keyspace::handle::Handle;
use crate::keyspace::index;
use crate::segment::layout::*;

use super::record::{self, Record};

/// What applying a record did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The store changed.
    Changed,
    /// The key already had this write (its version is at or past the LSN).
    Skipped,
    /// Nothing to do (a `Pad`, a removal of a missing key, an expired value).
    Nothing,
}

impl Handle {
    /// Applies the record `payload` logged at `lsn`, unless the store
    /// already has it. Recovery only: no other writer may run meanwhile.
    pub fn apply_record(&mut self, lsn: u64, payload: &[u8]) -> Result<Applied> {
        self.apply_with(lsn, payload, true)
    }

    /// Applies a snapshot's record to a store being loaded from it, where
    /// each key comes once and nothing else writes: no version check.
    /// Several threads may load one snapshot together.
    pub fn load_record(&mut self, lsn: u64, payload: &[u8]) -> Result<Applied> {
        self.apply_with(lsn, payload, false)
    }

    fn apply_with(&mut self, lsn: u64, payload: &[u8], check: bool) -> Result<Applied> {
        let (rec, _) = Record::decode(payload).map_err(|_| Error::BadValue)?;
        let before = self.log.replay_lsn.replace(lsn);
        let res = self.apply_decoded(lsn, &rec, check);
        self.log.replay_lsn = before;
        res
    }

    fn apply_decoded(&mut self, lsn: u64, rec: &Record<'_>, check: bool) -> Result<Applied> {
        match *rec {
            Record::Pad => return Ok(Applied::Nothing),
            Record::FlushDb { db } => {
                self.flush(Some(db), lsn)?;
                return Ok(Applied::Changed);
            }
            Record::FlushAll => {
                self.flush(None, lsn)?;
                return Ok(Applied::Changed);
            }
            Record::SwapDb { a, b } => {
                self.swap_db(a, b)?;
                return Ok(Applied::Changed);
            }
            // The libraries are the engine's: the caller applies them.
            Record::Functions { .. } => return Ok(Applied::Nothing),
            _ => {}
        }
        let Some((phys, key)) = rec.key() else {
            return Err(Error::BadValue);
        };
        let db = self.logical_of(phys)?;
        if check && self.key_version(db, key)?.is_some_and(|v| v >= lsn) {
            return Ok(Applied::Skipped);
        }
        let now = self.now_ms();
        let changed = match *rec {
            Record::SetEntry {
                vtype,
                mc_flags,
                expire_ms,
                value,
                ..
            } => {
                if expire_ms != 0 && expire_ms <= now {
                    self.delete(db, key)?
                } else {
                    self.restore_entry(db, key, vtype, mc_flags, expire_ms, value)?;
                    true
                }
            }
            Record::Delete { .. } => self.delete(db, key)?,
            Record::Expire { expire_ms, .. } => {
                if expire_ms == 0 {
                    self.persist(db, key)?
                } else {
                    self.expire_at(
                        db,
                        key,
                        expire_ms as i64,
                        crate::keyspace::keys::ExpireCondition::Always,
                    )?
                }
            }
            Record::StringAppend { tail, .. } => {
                self.append(db, key, tail)?;
                true
            }
            Record::ListPush {
                tail, ref items, ..
            } => self
                .write_collection::<List, _>(db, key, true, |l| {
                    for item in items {
                        if tail {
                            l.push_back(item)?;
                        } else {
                            l.push_front(item)?;
                        }
                    }
                    Ok(())
                })?
                .is_some(),
            Record::ListPop { tail, count, .. } => self
                .write_collection::<List, _>(db, key, false, |l| {
                    for _ in 0..count {
                        let popped = if tail { l.pop_back()? } else { l.pop_front()? };
                        if popped.is_none() {
                            break;
                        }
                    }
                    Ok(())
                })?
                .is_some(),
            Record::HashSet { ref pairs, .. } => self
                .write_collection::<Hash, _>(db, key, true, |h| {
                    for (field, value) in pairs {
                        h.insert(field, value)?;
                    }
                    Ok(())
                })?
                .is_some(),
            Record::HashDel { ref fields, .. } => self
                .write_collection::<Hash, _>(db, key, false, |h| {
                    for field in fields {
                        h.remove(field)?;
                    }
                    Ok(())
                })?
                .is_some(),
            Record::StreamPut { ref pairs, .. } => self
                .write_collection::<Stream, _>(db, key, true, |s| s.replay_put(pairs))?
                .is_some(),
            Record::StreamDel { ref items, .. } => self
                .write_collection::<Stream, _>(db, key, false, |s| s.replay_del(items))?
                .is_some(),
            Record::SetAdd { ref members, .. } => self
                .write_collection::<Set, _>(db, key, true, |s| {
                    for m in members {
                        s.insert(m)?;
                    }
                    Ok(())
                })?
                .is_some(),
            Record::SetRem { ref members, .. } => self
                .write_collection::<Set, _>(db, key, false, |s| {
                    for m in members {
                        s.remove(m)?;
                    }
                    Ok(())
                })?
                .is_some(),
            Record::ZSetAdd { ref members, .. } => self
                .write_collection::<ZSet, _>(db, key, true, |z| {
                    for (m, score) in members {
                        z.insert(m, *score)?;
                    }
                    Ok(())
                })?
                .is_some(),
            Record::ZSetRem { ref members, .. } => self
                .write_collection::<ZSet, _>(db, key, false, |z| {
                    for m in members {
                        z.remove(m)?;
                    }
                    Ok(())
                })?
                .is_some(),
            Record::Pad
            | Record::FlushDb { .. }
            | Record::FlushAll
            | Record::SwapDb { .. }
            | Record::Functions { .. } => false,
        };
        Ok(if changed {
            Applied::Changed
        } else {
            Applied::Nothing
        })
    }

    /// The logical db whose physical db is `phys` under the current map.
    fn logical_of(&mut self, phys: u8) -> Result<u8> {
        let view = self.db_view()?;
        (0..NUM_DBS as u8)
            .find(|&d| view.phys(d) == phys)
            .ok_or(Error::BadDb)
    }

    /// Writes a whole value as `key` (a record's image), replacing whatever
    /// is there.
    fn restore_entry(
        &mut self,
        db: u8,
        key: &[u8],
        vtype: ValueType,
        mc_flags: u32,
        expire_ms: u64,
        value: &[u8],
    ) -> Result<()> {
        match vtype {
            ValueType::String => self.with_key(db, key, |h, l| {
                let fields = h.entry_fields(l.db, ValueType::String, expire_ms, mc_flags);
                let (blk, pending) = h.new_entry(&fields, key, &[value], 0)?;
                h.publish(l, blk, pending)
            }),
            ValueType::List => {
                self.restore_collection(db, key, List::decode(value)?, mc_flags, expire_ms)
            }
            ValueType::Hash => {
                self.restore_collection(db, key, Hash::decode(value)?, mc_flags, expire_ms)
            }
            ValueType::Set => {
                self.restore_collection(db, key, Set::decode(value)?, mc_flags, expire_ms)
            }
            ValueType::ZSet => {
                self.restore_collection(db, key, ZSet::decode(value)?, mc_flags, expire_ms)
            }
            ValueType::Stream => {
                self.restore_collection(db, key, Stream::decode(value)?, mc_flags, expire_ms)
            }
        }
    }

    fn restore_collection<C: Collection>(
        &mut self,
        db: u8,
        key: &[u8],
        mut value: C,
        mc_flags: u32,
        expire_ms: u64,
    ) -> Result<()> {
        if value.is_empty() {
            self.delete(db, key)?;
            return Ok(());
        }
        self.with_key(db, key, |h, l| {
            h.put_collection_as(key, l, &mut value, Some((expire_ms, mc_flags)))
        })
    }

    /// A fuzzy snapshot of the whole store: calls `f(lsn, payload)` for
    /// the records that rebuild it: first the SWAPDB records of the db map,
    /// then one `SetEntry` per live key with the key's version as its LSN.
    /// Each bucket is locked only while its entries are read, so writers
    /// never wait for more than that. Fails with `Error::Attach` if a SWAPDB
    /// ran meanwhile (the caller starts again).
    pub fn snapshot_records(
        &mut self,
        f: &mut dyn FnMut(u64, &[u8]) -> std::io::Result<()>,
    ) -> Result<std::io::Result<()>> {
        let io = |e: std::io::Error| Ok(Err(e));
        let view = self.db_view()?;
        let mut payload = Vec::new();
        for (a, b) in swaps_for(&view) {
            payload.clear();
            record::encode_swap_db(&mut payload, a, b);
            if let Err(e) = f(0, &payload) {
                return io(e);
            }
        }
        let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
        for i in 0..self.ctx.sh.geo.buckets {
            let bucket = index::bucket_at(&self.ctx, i);
            batch.clear();
            self.snapshot_bucket(bucket, &mut batch)?;
            for (lsn, payload) in &batch {
                if let Err(e) = f(*lsn, payload) {
                    return io(e);
                }
            }
        }
        if self.db_view()?.map != view.map {
            return Err(Error::Attach(
                "a SWAPDB ran while the snapshot was written".into(),
            ));
        }
        Ok(Ok(()))
    }

    /// The records of one bucket's live entries, read under its lock.
    fn snapshot_bucket(&mut self, bucket: u64, out: &mut Vec<(u64, Vec<u8>)>) -> Result<()> {
        let mut any = false;
        index::read_stable(&mut self.ctx, bucket, |r| {
            any = false;
            index::for_each_slot(r, bucket, |_, _| {
                any = true;
                Ok(true)
            })
        })?;
        if !any {
            return Ok(());
        }
        let now = self.now_ms();
        loop {
            self.ctx.lock(bucket)?;
            // Another context's exclusive section commits its writes one by
            // one but stands only once it ends: its holder killed, recovery
            // undoes them and drops their log group, so a snapshot that had
            // read one would rebuild a write the store no longer holds. The
            // section may need this bucket: let go, wait it out, read again.
            if !self.other_section_running()? {
                break;
            }
            self.finish(&[bucket], Ok(()))?;
            self.db_view()?;
        }
        let res = (|| {
            let mut raws = Vec::new();
            index::for_each_slot(self.ctx.region(), bucket, |_, s| {
                raws.push(Raw::read(self.ctx.region(), s & SLOT_OFF_MASK)?);
                Ok(false)
            })?;
            for raw in raws {
                if raw.expired(now) {
                    continue;
                }
                let payload = self.entry_record(&raw)?;
                out.push((raw.lsn, payload));
            }
            Ok(())
        })();
        self.finish(&[bucket], res)
    }

    /// The `SetEntry` record of a locked entry.
    fn entry_record(&mut self, raw: &Raw) -> Result<Vec<u8>> {
        let staged = std::mem::take(&mut self.log);
        let res = (|| {
            let key = self.entry_key(raw)?;
            if raw.encoding == ENC_PAGED {
                self.stage_paged_image(raw, raw.db, &key)?;
            } else {
                self.stage_entry_image(raw.off)?;
            }
            Ok(self.log.take_staged())
        })();
        self.log = staged;
        res
    }
}

/// SWAPDB pairs that turn the identity map into `view`'s map.
fn swaps_for(view: &crate::keyspace::dbmap::DbView) -> Vec<(u8, u8)> {
    let target: Vec<u8> = (0..NUM_DBS as u8).map(|d| view.phys(d)).collect();
    let mut cur: Vec<u8> = (0..NUM_DBS as u8).collect();
    let mut swaps = Vec::new();
    for d in 0..NUM_DBS {
        if cur[d] != target[d] {
            let j = (d + 1..NUM_DBS).find(|&j| cur[j] == target[d]).unwrap_or(d);
            cur.swap(d, j);
            swaps.push((d as u8, j as u8));
        }
    }
    swaps
}
