//! Redis's collection types (lists, hashes, sets, sorted sets) on top of the
//! store's keys.
//!
//! A command reads or changes a collection through [`Handle::read_collection`]
//! and [`Handle::write_collection`]: the closure gets the value as a typed
//! object ([`List`], [`Hash`], [`Set`], [`ZSet`]) and calls its methods. A
//! write runs under the key's bucket lock and lands in one transaction
//! (copy, publish, free: I8), so other workers and a crash see the whole
//! change or none of it. A collection left empty is removed, as Redis does.
//!
//! Today every collection is stored in its compact form ([`codec`]): a write
//! rewrites the whole value, which costs O(n) for a large collection. The
//! methods take `&self`/`&mut self` and return `Result` so that a paged
//! encoding can replace the compact one for large values without touching
//! the commands.

mod codec;
mod hash;
mod list;
pub(crate) mod paged;
mod set;
mod tree;
mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
#[doc(hidden)]
pub use tree::Tree;
pub use zset::ZSet;

/// A hash field and its value.
pub type FieldValue = (Vec<u8>, Vec<u8>);
/// A sorted-set member and its score.
pub type Scored = (Vec<u8>, f64);

use std::sync::Arc;

use crate::entry::{Raw, ValueType, ENC_PAGED};
use crate::error::{Error, Result};
use crate::handle::{Handle, Locked};
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
}

/// OBJECT ENCODING for a collection value of type `vtype`.
pub fn encoding_name(vtype: ValueType, bytes: &[u8]) -> Result<&'static str> {
    if bytes.first() == Some(&paged::TAG_PAGED) {
        return Ok(match vtype {
            ValueType::List => "quicklist",
            ValueType::Hash | ValueType::Set => "hashtable",
            ValueType::ZSet => "skiplist",
            ValueType::String | ValueType::Stream => return Err(Error::WrongType),
        });
    }
    Ok(match vtype {
        ValueType::List => List::decode(bytes)?.encoding_name(),
        ValueType::Hash => Hash::decode(bytes)?.encoding_name(),
        ValueType::Set => Set::decode(bytes)?.encoding_name(),
        ValueType::ZSet => ZSet::decode(bytes)?.encoding_name(),
        ValueType::String | ValueType::Stream => return Err(Error::WrongType),
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
            ValueType::List => self.open_collection::<List>(raw)?.encode_image(&mut image)?,
            ValueType::Hash => self.open_collection::<Hash>(raw)?.encode_image(&mut image)?,
            ValueType::Set => self.open_collection::<Set>(raw)?.encode_image(&mut image)?,
            ValueType::ZSet => self.open_collection::<ZSet>(raw)?.encode_image(&mut image)?,
            ValueType::String | ValueType::Stream => return Err(Error::WrongType),
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
            C::from_trees(paged::open_trees(&self.ctx.sh, &bytes, C::KEYED)?)
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
                Some(found) => h.open_collection::<C>(&found.raw)?,
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
            crate::handle::check_len(bytes.len() as u64)?;
            let (blk, pending) = self.new_entry(&fields, key, &[&bytes], 0)?;
            return self.publish(l, blk, pending);
        }
        drop(trees);
        if self.logging() {
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
        let mut trees = value.trees_mut();
        let (replaced, words) = self.commit_trees(&mut trees)?;
        let header = paged::header_of(&trees).encode();
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
    crate::strings::parse_i64(member)
}
