//! Hashes.

use std::collections::HashSet;

use indexmap::IndexMap;

use super::codec::{self, Reader, TAG_ITEMS};
use super::{Collection, FieldValue};
use crate::entry::ValueType;
use crate::error::{Error, Result};

/// Redis 7.0's `hash-max-listpack-entries` / `-value` defaults: the shape
/// OBJECT ENCODING calls `listpack`.
const LISTPACK_ENTRIES: usize = 512;
const LISTPACK_VALUE: usize = 64;

/// A hash value: fields in insertion order, as Redis's listpack keeps them.
#[derive(Clone, Debug, Default)]
pub struct Hash {
    fields: IndexMap<Vec<u8>, Vec<u8>>,
    changed: bool,
}

impl Collection for Hash {
    const TYPE: ValueType = ValueType::Hash;

    fn empty() -> Self {
        Hash::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_ITEMS {
            return Err(Error::BadValue);
        }
        let mut fields = IndexMap::with_capacity(n);
        for _ in 0..n {
            let field = r.bytes()?;
            let value = r.bytes()?;
            if fields.insert(field, value).is_some() {
                return Err(Error::BadValue);
            }
        }
        r.finish()?;
        Ok(Hash {
            fields,
            changed: false,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        codec::header(out, TAG_ITEMS, self.fields.len());
        for (field, value) in &self.fields {
            codec::put_bytes(out, field);
            codec::put_bytes(out, value);
        }
    }

    fn len(&self) -> u64 {
        self.fields.len() as u64
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        let small = self.fields.len() <= LISTPACK_ENTRIES
            && self
                .fields
                .iter()
                .all(|(f, v)| f.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
        if small {
            "listpack"
        } else {
            "hashtable"
        }
    }
}

impl Hash {
    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.fields.get(field).cloned())
    }

    /// Whether `field` exists.
    pub fn contains(&self, field: &[u8]) -> Result<bool> {
        Ok(self.fields.contains_key(field))
    }

    /// Sets `field`; true when it is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> Result<bool> {
        self.changed = true;
        match self.fields.get_mut(field) {
            Some(v) => {
                *v = value.to_vec();
                Ok(false)
            }
            None => {
                self.fields.insert(field.to_vec(), value.to_vec());
                Ok(true)
            }
        }
    }

    /// Removes `field`; true when it existed.
    pub fn remove(&mut self, field: &[u8]) -> Result<bool> {
        let removed = self.fields.shift_remove(field).is_some();
        self.changed |= removed;
        Ok(removed)
    }

    /// Removes each of `fields` that exists; returns how many did. One pass
    /// over the hash however many are named (HDEL of many fields), where
    /// [`remove`](Self::remove) once each would shift the order once each.
    pub fn remove_all(&mut self, fields: &[&[u8]]) -> Result<u64> {
        if let [one] = fields {
            return Ok(u64::from(self.remove(one)?));
        }
        let doomed: HashSet<&[u8]> = fields.iter().copied().collect();
        let before = self.fields.len();
        self.fields.retain(|f, _| !doomed.contains(f.as_slice()));
        let removed = before - self.fields.len();
        self.changed |= removed > 0;
        Ok(removed as u64)
    }

    /// Every field and value.
    pub fn entries(&self) -> Result<Vec<FieldValue>> {
        Ok(self
            .fields
            .iter()
            .map(|(f, v)| (f.clone(), v.clone()))
            .collect())
    }

    /// The field and value at position `index` (< len) of the hash's
    /// iteration order: HRANDFIELD picks by random position.
    pub fn nth(&self, index: u64) -> Result<Option<FieldValue>> {
        Ok(usize::try_from(index)
            .ok()
            .and_then(|i| self.fields.get_index(i))
            .map(|(f, v)| (f.clone(), v.clone())))
    }

    /// One HSCAN step from `cursor`: the next cursor (0 when done) and the
    /// fields visited. A compact value is returned whole with cursor 0, as
    /// Redis does for a listpack.
    pub fn scan(&self, _cursor: u64, _count: u64) -> Result<(u64, Vec<FieldValue>)> {
        Ok((0, self.entries()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_all_counts_each_field_once_and_keeps_order() {
        let mut h = Hash::empty();
        for (f, v) in [("c", "1"), ("a", "2"), ("x", "3"), ("b", "4")] {
            h.insert(f.as_bytes(), v.as_bytes()).unwrap();
        }
        let mut h = Hash::decode(&{
            let mut out = Vec::new();
            h.encode(&mut out);
            out
        })
        .unwrap();
        assert_eq!(h.remove_all(&[b"zz", b"yy"]).unwrap(), 0);
        assert!(!h.changed());
        assert_eq!(h.remove_all(&[b"a", b"zz", b"a", b"x"]).unwrap(), 2);
        assert!(h.changed());
        let fields: Vec<Vec<u8>> = h.entries().unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(fields, [b"c".to_vec(), b"b".to_vec()]);
        assert_eq!(h.remove_all(&[b"c"]).unwrap(), 1);
        assert_eq!(h.remove_all(&[b"b", b"c"]).unwrap(), 1);
        assert!(h.is_empty());
    }
}
