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
mod set;
mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use zset::ZSet;

/// A hash field and its value.
pub type FieldValue = (Vec<u8>, Vec<u8>);
/// A sorted-set member and its score.
pub type Scored = (Vec<u8>, f64);

use crate::entry::ValueType;
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::strings::{Modify, SetOptions};

/// A collection type as the store keeps it.
pub trait Collection: Sized {
    /// The type tag of its entries.
    const TYPE: ValueType;
    /// An empty value (a write to a missing key starts from it).
    fn empty() -> Self;
    /// Decodes a value read from the segment.
    fn decode(bytes: &[u8]) -> Result<Self>;
    /// Encodes the value for the segment into `out`.
    fn encode(&self, out: &mut Vec<u8>);
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
}

/// OBJECT ENCODING for a collection value of type `vtype`.
pub fn encoding_name(vtype: ValueType, bytes: &[u8]) -> Result<&'static str> {
    Ok(match vtype {
        ValueType::List => List::decode(bytes)?.encoding_name(),
        ValueType::Hash => Hash::decode(bytes)?.encoding_name(),
        ValueType::Set => Set::decode(bytes)?.encoding_name(),
        ValueType::ZSet => ZSet::decode(bytes)?.encoding_name(),
        ValueType::String | ValueType::Stream => return Err(Error::WrongType),
    })
}

impl Handle {
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
        let value = C::decode(&bytes)?;
        f(&value).map(Some)
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
        self.modify(db, key, |old| {
            let mut value = match old {
                Some((_, meta)) if meta.vtype != C::TYPE => return Err(Error::WrongType),
                Some((bytes, _)) => C::decode(bytes)?,
                None if create => C::empty(),
                None => return Ok((Modify::Keep, None)),
            };
            let out = f(&mut value)?;
            let action = if !value.changed() {
                Modify::Keep
            } else if value.is_empty() {
                Modify::Delete
            } else {
                let mut bytes = Vec::new();
                value.encode(&mut bytes);
                crate::handle::check_len(bytes.len() as u64)?;
                Modify::Write(C::TYPE, bytes)
            };
            Ok((action, Some(out)))
        })
    }

    /// Replaces whatever `key` holds with `value` (no expiry), or removes the
    /// key when `value` is empty: the destination of SINTERSTORE,
    /// ZUNIONSTORE and the like.
    pub fn store_collection<C: Collection>(&mut self, db: u8, key: &[u8], value: &C) -> Result<()> {
        if value.is_empty() {
            self.delete(db, key)?;
            return Ok(());
        }
        let mut bytes = Vec::new();
        value.encode(&mut bytes);
        crate::handle::check_len(bytes.len() as u64)?;
        self.write_value(db, key, C::TYPE, &bytes, &SetOptions::default())?;
        Ok(())
    }
}

/// Redis's `string2ll` test for integer-looking members (intset encoding).
fn as_int(member: &[u8]) -> Option<i64> {
    crate::strings::parse_i64(member)
}
