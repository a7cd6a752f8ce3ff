//! Redis's collection types (lists, hashes, sets, sorted sets, streams) on top of the
//! store's keys.
//!
//! A command reads or changes a collection through [`Handle::read_collection`]
//! and [`Handle::write_collection`]: the closure gets the value as a typed
//! object ([`List`], [`Hash`], [`Set`], [`ZSet`]) and calls its methods. A
//! write runs under the key's bucket lock and lands in one transaction
//! (copy, publish, free: I8), so other workers and a crash see the whole
//! change or none of it. A collection left empty is removed, as Redis does.
//!
//! A small collection is stored in its compact form (`codec`), which a
//! write rewrites whole; a large one is paged (trees of nodes, `paged`),
//! which a write changes node by node. With the log on, a write of a
//! compact value logs its whole image, and a write of a paged one the
//! changes its methods made ([`Journal`]), so its record costs what it
//! changed, not the value's size.

mod codec;
mod hash;
mod list;
mod packed;
pub(crate) mod paged;
mod set;
mod stream;
mod tree;
mod zset;

pub use hash::{Hash, HASH_LISTPACK_ENTRIES_WORD, HASH_LISTPACK_VALUE_WORD};
pub use list::List;
pub use set::Set;
pub use stream::{
    NodeLimits, Pending, Stream, StreamConsumer, StreamEntry, StreamGroup, StreamId, StreamMeta,
    Trim,
};
#[doc(hidden)]
pub use tree::Tree;
pub use zset::ZSet;

/// A hash field and its value.
pub type FieldValue = (Vec<u8>, Vec<u8>);
/// A sorted-set member and its score.
pub type Scored = (Vec<u8>, f64);

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::keyspace::entry::{Raw, ValueType, ENC_PAGED};
use crate::keyspace::handle::{Handle, Locked};
use crate::segment::Shared;

/// The segment a value's trees are built in (opaque outside the store).
#[doc(hidden)]
pub struct Segment(pub(crate) Arc<Shared>);

/// A collection type as the store keeps it.
pub trait Collection: Sized {
    /// The type tag of its entries.
    const TYPE: ValueType;
    /// Whether each tree of the paged form is keyed (else positional).
    #[doc(hidden)]
    const KEYED: &'static [bool];
    /// An empty value (a write to a missing key starts from it).
    fn empty() -> Self;
    /// Decodes a compact value read from the segment.
    fn decode(bytes: &[u8]) -> Result<Self>;
    /// Encodes the value's compact form into `out` (only meaningful while
    /// it is compact; see [`Collection::settle`]).
    fn encode(&self, out: &mut Vec<u8>);
    /// Encodes the whole value in the compact form's bytes, whatever form
    /// it is in (the log's and snapshots' image of the value).
    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()>;
    /// The number of elements.
    fn len(&self) -> u64;
    /// Whether it has no elements (then the key is removed).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether a method changed it since it was decoded.
    fn changed(&self) -> bool;
    /// OBJECT ENCODING's name for the value's shape, by Redis 7.0's default
    /// thresholds.
    fn encoding_name(&self) -> &'static str;
    /// The value of a paged entry, from its trees.
    #[doc(hidden)]
    fn from_trees(trees: Vec<Tree>) -> Result<Self>;
    /// Moves the value to the form its size calls for before it is
    /// written: compact while small, paged once large, and back.
    #[doc(hidden)]
    fn settle(&mut self, seg: &Segment) -> Result<()>;
    /// The trees of a paged value; empty while it is compact.
    #[doc(hidden)]
    fn trees_mut(&mut self) -> Vec<&mut Tree>;
    /// The changes the value's methods made since it was opened, as the log
    /// carries them (see [`Journal`]).
    #[doc(hidden)]
    fn journal_mut(&mut self) -> &mut Journal;
    /// Changes waiting to go in place into the published trees (a list's
    /// pushes at one end): with `in_place`, writes their bytes past the
    /// published ends and returns the words that publish them, or None
    /// when there are none; without, applies them to the trees by copying.
    #[doc(hidden)]
    fn take_growth(&mut self, in_place: bool) -> Result<Option<tree::InPlace>> {
        let _ = in_place;
        Ok(None)
    }
    /// The block the waiting in-place changes go into, and whether they
    /// move its published end back (pops) rather than forward (pushes).
    #[doc(hidden)]
    fn growth_block(&self) -> Option<(u64, bool)> {
        None
    }
}

/// The payload bytes a delta record is kept under (a longer run of one
/// kind of change is split into several records of that kind), so no
/// record approaches the ring's or a reader's limit on its own.
const DELTA_RECORD_BYTES: usize = 1 << 20;

/// The logical changes one write makes to a paged collection, so that the
/// log carries them (an RPUSH of one item onto a long list logs that item)
/// rather than the whole value, which would make each write cost the
/// value's size and overflow the ring for large values.
///
/// Off unless [`Handle::write_collection`] turns it on for a paged value
/// while the log is on. A change with no record kind of its own (LSET,
/// LINSERT in the middle, LREM, …) makes it opaque: then the write logs the
/// whole value, as it always does for compact values.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Journal {
    on: bool,
    opaque: bool,
    ops: Vec<Op>,
    /// The bytes the ops name, back to back: one buffer, not one
    /// allocation per item.
    bytes: Vec<u8>,
}

/// Where an op's bytes are in [`Journal::bytes`].
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    len: usize,
}

/// One logged change, as replay redoes it (log/apply.rs).
#[derive(Debug)]
enum Op {
    /// Pushed at the tail (else the head).
    Push {
        tail: bool,
        item: Span,
    },
    /// Popped `count` items from the tail (else the head).
    Pop {
        tail: bool,
        count: u64,
    },
    HashSet {
        field: Span,
        value: Span,
    },
    HashDel(Span),
    SetAdd(Span),
    SetRem(Span),
    ZSetAdd {
        member: Span,
        score: f64,
    },
    ZSetRem(Span),
    StreamPut {
        item: Span,
        value: Span,
    },
    StreamDel(Span),
}

impl Op {
    /// Changes of one kind merge into one record: the kind byte, and the
    /// end for lists.
    fn kind(&self) -> (u8, bool) {
        use crate::log::record::*;
        match self {
            Op::Push { tail, .. } => (KIND_LIST_PUSH, *tail),
            Op::Pop { tail, .. } => (KIND_LIST_POP, *tail),
            Op::HashSet { .. } => (KIND_HASH_SET, false),
            Op::HashDel(_) => (KIND_HASH_DEL, false),
            Op::SetAdd(_) => (KIND_SET_ADD, false),
            Op::SetRem(_) => (KIND_SET_REM, false),
            Op::ZSetAdd { .. } => (KIND_ZSET_ADD, false),
            Op::ZSetRem(_) => (KIND_ZSET_REM, false),
            Op::StreamPut { .. } => (KIND_STREAM_PUT, false),
            Op::StreamDel(_) => (KIND_STREAM_DEL, false),
        }
    }

    /// About the bytes it adds to its record.
    fn size(&self) -> usize {
        match self {
            Op::Push { item: b, .. }
            | Op::HashDel(b)
            | Op::SetAdd(b)
            | Op::SetRem(b)
            | Op::ZSetRem(b)
            | Op::StreamDel(b) => 4 + b.len,
            Op::Pop { .. } => 0,
            Op::HashSet { field, value } => 8 + field.len + value.len,
            Op::StreamPut { item, value } => 8 + item.len + value.len,
            Op::ZSetAdd { member, .. } => 12 + member.len,
        }
    }
}

impl Journal {
    /// Starts recording (a paged value opened for a logged write).
    pub(crate) fn start(&mut self) {
        self.on = true;
    }

    /// Whether changes are being recorded one by one.
    fn recording(&self) -> bool {
        self.on && !self.opaque
    }

    /// A change with no record of its own: the write logs the whole value.
    pub(crate) fn opaque(&mut self) {
        if self.on {
            self.opaque = true;
            self.ops = Vec::new();
            self.bytes = Vec::new();
        }
    }

    fn keep(&mut self, b: &[u8]) -> Span {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(b);
        Span {
            start,
            len: b.len(),
        }
    }

    fn get(&self, span: Span) -> &[u8] {
        &self.bytes[span.start..span.start + span.len]
    }

    fn record(&mut self, op: impl FnOnce(&mut Journal) -> Op) {
        if self.recording() {
            let op = op(self);
            self.ops.push(op);
        }
    }

    pub(crate) fn push(&mut self, tail: bool, item: &[u8]) {
        self.record(|j| Op::Push {
            tail,
            item: j.keep(item),
        });
    }

    pub(crate) fn pop(&mut self, tail: bool, count: u64) {
        if count > 0 {
            self.record(|_| Op::Pop { tail, count });
        }
    }

    pub(crate) fn hash_set(&mut self, field: &[u8], value: &[u8]) {
        self.record(|j| Op::HashSet {
            field: j.keep(field),
            value: j.keep(value),
        });
    }

    pub(crate) fn hash_del(&mut self, field: &[u8]) {
        self.record(|j| Op::HashDel(j.keep(field)));
    }

    pub(crate) fn set_add(&mut self, member: &[u8]) {
        self.record(|j| Op::SetAdd(j.keep(member)));
    }

    pub(crate) fn set_rem(&mut self, member: &[u8]) {
        self.record(|j| Op::SetRem(j.keep(member)));
    }

    pub(crate) fn zset_add(&mut self, member: &[u8], score: f64) {
        self.record(|j| Op::ZSetAdd {
            member: j.keep(member),
            score,
        });
    }

    pub(crate) fn zset_rem(&mut self, member: &[u8]) {
        self.record(|j| Op::ZSetRem(j.keep(member)));
    }

    pub(crate) fn stream_put(&mut self, item: &[u8], value: &[u8]) {
        self.record(|j| Op::StreamPut {
            item: j.keep(item),
            value: j.keep(value),
        });
    }

    pub(crate) fn stream_del(&mut self, item: &[u8]) {
        self.record(|j| Op::StreamDel(j.keep(item)));
    }

    /// Whether the write can log its changes instead of the whole value.
    fn has_deltas(&self) -> bool {
        self.recording() && !self.ops.is_empty()
    }

    /// Calls `stage` with each record's payload: runs of changes of one
    /// kind merged, in order, each record under [`DELTA_RECORD_BYTES`].
    fn records(&self, db: u8, key: &[u8], mut stage: impl FnMut(&dyn Fn(&mut Vec<u8>))) {
        use crate::log::record::*;
        let mut rest = &self.ops[..];
        while let Some(first) = rest.first() {
            let kind = first.kind();
            let (mut run, mut bytes) = (1, first.size());
            while let Some(op) = rest.get(run) {
                if op.kind() != kind || bytes + op.size() > DELTA_RECORD_BYTES {
                    break;
                }
                bytes += op.size();
                run += 1;
            }
            let (run, next) = rest.split_at(run);
            rest = next;
            let (_, tail) = kind;
            match first {
                Op::Push { .. } => {
                    let items: Vec<&[u8]> = run
                        .iter()
                        .filter_map(|op| match op {
                            Op::Push { item, .. } => Some(self.get(*item)),
                            _ => None,
                        })
                        .collect();
                    stage(&|out| encode_list_push(out, db, key, tail, &items));
                }
                Op::Pop { .. } => {
                    let count = run
                        .iter()
                        .map(|op| match op {
                            Op::Pop { count, .. } => *count,
                            _ => 0,
                        })
                        .sum();
                    stage(&|out| encode_list_pop(out, db, key, tail, count));
                }
                Op::HashSet { .. } => {
                    let pairs: Vec<(&[u8], &[u8])> = run
                        .iter()
                        .filter_map(|op| match op {
                            Op::HashSet { field, value } => {
                                Some((self.get(*field), self.get(*value)))
                            }
                            _ => None,
                        })
                        .collect();
                    stage(&|out| encode_hash_set(out, db, key, &pairs));
                }
                Op::StreamPut { .. } => {
                    let pairs: Vec<(&[u8], &[u8])> = run
                        .iter()
                        .filter_map(|op| match op {
                            Op::StreamPut { item, value } => {
                                Some((self.get(*item), self.get(*value)))
                            }
                            _ => None,
                        })
                        .collect();
                    stage(&|out| encode_stream_put(out, db, key, &pairs));
                }
                Op::StreamDel(_) => {
                    let items: Vec<&[u8]> = run
                        .iter()
                        .filter_map(|op| match op {
                            Op::StreamDel(b) => Some(self.get(*b)),
                            _ => None,
                        })
                        .collect();
                    stage(&|out| encode_stream_del(out, db, key, &items));
                }
                Op::ZSetAdd { .. } => {
                    let members: Vec<(&[u8], f64)> = run
                        .iter()
                        .filter_map(|op| match op {
                            Op::ZSetAdd { member, score } => Some((self.get(*member), *score)),
                            _ => None,
                        })
                        .collect();
                    stage(&|out| encode_zset_add(out, db, key, &members));
                }
                Op::HashDel(_) | Op::SetAdd(_) | Op::SetRem(_) | Op::ZSetRem(_) => {
                    let names: Vec<&[u8]> = run
                        .iter()
                        .filter_map(|op| match op {
                            Op::HashDel(b) | Op::SetAdd(b) | Op::SetRem(b) | Op::ZSetRem(b) => {
                                Some(self.get(*b))
                            }
                            _ => None,
                        })
                        .collect();
                    let encode = match first {
                        Op::HashDel(_) => encode_hash_del,
                        Op::SetAdd(_) => encode_set_add,
                        Op::SetRem(_) => encode_set_rem,
                        _ => encode_zset_rem,
                    };
                    stage(&|out| encode(out, db, key, &names));
                }
            }
        }
    }
}

/// OBJECT ENCODING for a collection value of type `vtype`.
pub fn encoding_name(vtype: ValueType, bytes: &[u8]) -> Result<&'static str> {
    if bytes.first() == Some(&paged::TAG_PAGED) {
        return Ok(match vtype {
            ValueType::List => "quicklist",
            ValueType::Hash | ValueType::Set => "hashtable",
            ValueType::ZSet => "skiplist",
            ValueType::Stream => "stream",
            ValueType::String => return Err(Error::WrongType),
        });
    }
    Ok(match vtype {
        ValueType::List => List::decode(bytes)?.encoding_name(),
        ValueType::Hash => Hash::decode(bytes)?.encoding_name(),
        ValueType::Set => Set::decode(bytes)?.encoding_name(),
        ValueType::ZSet => ZSet::decode(bytes)?.encoding_name(),
        ValueType::Stream => Stream::decode(bytes)?.encoding_name(),
        ValueType::String => return Err(Error::WrongType),
    })
}

/// The 64-bit hash that orders the keyed trees of hashes, sets and sorted
/// sets' member index, followed by the field itself: a key that sorts by
/// hash (a stable cursor for HSCAN) and is unique (the field breaks ties).
fn hashed_key(field: &[u8]) -> Vec<u8> {
    let h = xxhash_rust::xxh3::xxh3_64_with_seed(field, 0x5c0a_1c01);
    let mut key = Vec::with_capacity(8 + field.len());
    key.extend_from_slice(&h.to_be_bytes());
    key.extend_from_slice(field);
    key
}

/// The field of a [`hashed_key`].
fn unhashed(key: &[u8]) -> &[u8] {
    key.get(8..).unwrap_or(&[])
}

/// The hash part of a [`hashed_key`].
fn hash_of(key: &[u8]) -> u64 {
    key.get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// One SCAN step over a hash-ordered tree from `cursor`: at least `count`
/// items (more while the next has the same hash as the last, so a cursor
/// always moves on), and the next cursor (0 when done).
fn scan_tree(tree: &Tree, cursor: u64, count: u64) -> Result<(u64, Vec<FieldValue>)> {
    let from = tree.count_below(&cursor.to_be_bytes(), false)?;
    let mut out: Vec<FieldValue> = Vec::new();
    let mut next = 0;
    tree.visit(from, tree.len(), false, &mut |k, v| {
        let h = hash_of(k);
        if out.len() as u64 >= count.max(1) && out.last().is_some_and(|(l, _)| hash_of(l) != h) {
            next = h;
            return false;
        }
        out.push((k.to_vec(), v.to_vec()));
        true
    })?;
    Ok((next, out))
}

impl Handle {
    /// Stages the whole value of the paged entry `raw` as the record of a
    /// write of it to `key` in `db` (RENAME, MOVE and COPY carry its trees).
    pub(crate) fn stage_paged_image(&mut self, raw: &Raw, db: u8, key: &[u8]) -> Result<()> {
        let vtype = ValueType::from_u8(raw.vtype).ok_or(Error::Corrupted(raw.off))?;
        let mut image = Vec::new();
        match vtype {
            ValueType::List => self
                .open_collection::<List>(raw)?
                .encode_image(&mut image)?,
            ValueType::Hash => self
                .open_collection::<Hash>(raw)?
                .encode_image(&mut image)?,
            ValueType::Set => self.open_collection::<Set>(raw)?.encode_image(&mut image)?,
            ValueType::ZSet => self
                .open_collection::<ZSet>(raw)?
                .encode_image(&mut image)?,
            ValueType::Stream => self
                .open_collection::<Stream>(raw)?
                .encode_image(&mut image)?,
            ValueType::String => return Err(Error::WrongType),
        }
        self.log_stage(|out| {
            crate::log::record::encode_set_entry(
                out,
                db,
                key,
                vtype,
                raw.mc_flags,
                raw.expire,
                &[&image],
            )
        });
        Ok(())
    }

    /// Reads the collection at `key`: `f`'s result, or None when the key is
    /// missing. `WrongType` when it holds another type.
    pub fn read_collection<C: Collection, T>(
        &mut self,
        db: u8,
        key: &[u8],
        f: impl FnOnce(&C) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut bytes = Vec::new();
        let Some(meta) = self.get_into(db, key, &mut bytes)? else {
            return Ok(None);
        };
        if meta.vtype != C::TYPE {
            return Err(Error::WrongType);
        }
        if meta.encoding != ENC_PAGED {
            let value = C::decode(&bytes)?;
            return f(&value).map(Some);
        }
        // A paged value's nodes are replaced and freed by its writers, so
        // it is read under the key's bucket lock.
        self.with_key(db, key, |h, l| {
            let Some(found) = l.found else {
                return Ok(None);
            };
            let value = h.open_collection::<C>(&found.raw)?;
            f(&value).map(Some)
        })
    }

    /// The collection entry `raw` as a typed value.
    fn open_collection<C: Collection>(&self, raw: &Raw) -> Result<C> {
        if raw.meta()?.vtype != C::TYPE {
            return Err(Error::WrongType);
        }
        let bytes = self.read_value(raw)?;
        if raw.encoding == ENC_PAGED {
            let header = paged::Header::decode(&bytes)?;
            let mut value = C::from_trees(paged::open_trees(&self.ctx.sh, &bytes, C::KEYED)?)?;
            for t in value.trees_mut() {
                t.set_count_word(raw.value_off() + header.count_at());
            }
            Ok(value)
        } else {
            C::decode(&bytes)
        }
    }

    /// Changes the collection at `key` in one atomic step. A missing key is
    /// created empty when `create` is set (and `f` runs on it), otherwise
    /// `f` does not run and the result is None. If `f` fails nothing is
    /// written; if it leaves the value empty the key is removed. The key's
    /// expiry is kept.
    pub fn write_collection<C: Collection, T>(
        &mut self,
        db: u8,
        key: &[u8],
        create: bool,
        f: impl FnOnce(&mut C) -> Result<T>,
    ) -> Result<Option<T>> {
        self.with_key(db, key, |h, l| {
            let mut value = match l.found {
                Some(found) => {
                    let mut value = h.open_collection::<C>(&found.raw)?;
                    // A paged value's write logs its changes, not its image.
                    if found.raw.encoding == ENC_PAGED && h.logging() {
                        value.journal_mut().start();
                    }
                    value
                }
                None if create => C::empty(),
                None => return Ok(None),
            };
            let out = f(&mut value)?;
            if !value.changed() {
                return Ok(Some(out));
            }
            match l.found {
                Some(found) if value.is_empty() => h.remove_locked(l.pos.bucket, &found)?,
                _ if value.is_empty() => {}
                _ => h.put_collection(key, l, &mut value, false)?,
            }
            Ok(Some(out))
        })
    }

    /// Writes `value` as the key of `l` (locked), keeping its expiry.
    /// `fresh`: the value does not derive from the key's old one (…STORE),
    /// so the old trees are dropped whole.
    fn put_collection<C: Collection>(
        &mut self,
        key: &[u8],
        l: &mut Locked,
        value: &mut C,
        fresh: bool,
    ) -> Result<()> {
        let (expire, flags) = match (fresh, l.found) {
            (false, Some(f)) => (f.raw.expire, f.raw.mc_flags),
            _ => (0, 0),
        };
        self.put_collection_with(key, l, value, fresh, expire, flags)
    }

    /// Writes `value` (a whole new value, as recovery restores it) as the
    /// key of `l` with this expiry and these flags, dropping the old one.
    pub(crate) fn put_collection_as<C: Collection>(
        &mut self,
        key: &[u8],
        l: &mut Locked,
        value: &mut C,
        expire_flags: Option<(u64, u32)>,
    ) -> Result<()> {
        let (expire, flags) = expire_flags.unwrap_or((0, 0));
        self.put_collection_with(key, l, value, true, expire, flags)
    }

    fn put_collection_with<C: Collection>(
        &mut self,
        key: &[u8],
        l: &mut Locked,
        value: &mut C,
        fresh: bool,
        expire: u64,
        flags: u32,
    ) -> Result<()> {
        value.settle(&Segment(self.ctx.sh.clone()))?;
        let mut fields = self.entry_fields(l.db, C::TYPE, expire, flags);
        let trees = value.trees_mut();
        if trees.is_empty() {
            let mut bytes = Vec::new();
            value.encode(&mut bytes);
            crate::keyspace::handle::check_len(bytes.len() as u64)?;
            let (blk, pending) = self.new_entry(&fields, key, &[&bytes], 0)?;
            return self.publish(l, blk, pending);
        }
        drop(trees);
        let journal = std::mem::take(value.journal_mut());
        if self.logging() && !fresh && journal.has_deltas() {
            // Still paged, and every change has a record: the write logs
            // its changes (contiguous frames of one group). The expiry and
            // flags are the key's own, which the changes keep.
            journal.records(l.db, key, |encode| self.log_stage(encode));
        } else if self.logging() {
            let mut image = Vec::new();
            value.encode_image(&mut image)?;
            self.log_stage(|out| {
                crate::log::record::encode_set_entry(
                    out,
                    l.db,
                    key,
                    C::TYPE,
                    flags,
                    expire,
                    &[&image],
                )
            });
        }
        let mut in_place = !fresh && l.found.is_some_and(|f| f.raw.encoding == ENC_PAGED);
        let growth = value.growth_block();
        if let Some((blk, false)) = growth {
            // Pushes into room an earlier pop of this section gave back
            // would write over bytes its rollback publishes again: they
            // go by copying (the leaf stays as it is for the rollback).
            in_place &= !self.ctx.section_shrank(blk);
        }
        if let Some(words) = value.take_growth(in_place)? {
            if let Some((blk, true)) = growth {
                self.ctx.journal_shrink(blk);
            }
            return self.publish_in_place(l, &words, &[]);
        }
        let mut trees = value.trees_mut();
        let (replaced, mut words) = self.commit_trees(&mut trees)?;
        let header = paged::header_of(&trees);
        // The roots stayed (only nodes below them, or their child words,
        // changed): the entry keeps its block and only its count changes.
        let unmoved: Option<Vec<u64>> = trees.iter().map(|t| t.unmoved_count_word()).collect();
        if let (true, Some(&[count_word, ..])) =
            (in_place && C::TYPE != ValueType::Stream, unmoved.as_deref())
        {
            words.push((count_word, header.count));
            drop(trees);
            return self.publish_in_place(l, &words, &replaced);
        }
        let header = header.encode(key.len());
        fields.encoding = ENC_PAGED;
        let (blk, pending) = self.new_entry(&fields, key, &[&header], 0)?;
        self.publish_paged(l, blk, pending, (&replaced, &words), fresh)
    }

    /// Replaces whatever `key` holds with `value` (no expiry), or removes the
    /// key when `value` is empty: the destination of SINTERSTORE,
    /// ZUNIONSTORE and the like.
    pub fn store_collection<C: Collection>(
        &mut self,
        db: u8,
        key: &[u8],
        mut value: C,
    ) -> Result<()> {
        if value.is_empty() {
            self.delete(db, key)?;
            return Ok(());
        }
        self.with_key(db, key, |h, l| h.put_collection(key, l, &mut value, true))
    }
}

/// Redis's `string2ll` test for integer-looking members (intset encoding).
fn as_int(member: &[u8]) -> Option<i64> {
    crate::keyspace::strings::parse_i64(member)
}
