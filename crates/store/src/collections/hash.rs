//! Hashes.

use std::collections::HashSet;

use super::codec::{self, Reader, TAG_ITEMS};
use super::packed::Pairs;
use super::tree::Tree;
use super::{hashed_key, scan_tree, unhashed, Collection, FieldValue, Journal, Segment};
use crate::error::{Error, Result};
use crate::keyspace::entry::ValueType;

/// Redis 7.0's `hash-max-listpack-entries` / `-value` defaults: the shape
/// OBJECT ENCODING calls `listpack`.
const LISTPACK_ENTRIES: usize = 512;
const LISTPACK_VALUE: usize = 64;
/// A hash with more fields than this, or more bytes, is paged (unless
/// raised thresholds keep it compact, [`listpack_thresholds`]).
const COMPACT_ITEMS: usize = LISTPACK_ENTRIES;
const COMPACT_BYTES: usize = 64 * 1024;
/// The most bytes of fields and values a compact hash holds whatever the
/// thresholds say (each write rewrites a compact value whole).
const COMPACT_BYTES_MAX: usize = 32 << 20;

/// The shared setting word holding `hash-max-listpack-entries` plus one
/// (0 = never set: Redis's default).
pub const HASH_LISTPACK_ENTRIES_WORD: u64 = 14;
/// The shared setting word holding `hash-max-listpack-value` plus one.
pub const HASH_LISTPACK_VALUE_WORD: u64 = 15;

/// `hash-max-listpack-entries` and `hash-max-listpack-value` in force.
/// While a hash is within them Redis keeps it as a listpack, in insertion
/// order (HGETALL, HSCAN and HRANDFIELD show that order), so a compact
/// hash within them stays compact past shoal's own caps.
fn listpack_thresholds(seg: &Segment) -> (usize, usize) {
    let word = |i: u64, default: usize| match crate::ipc::workers::config_word_in(&seg.0, i) {
        Ok(v) if v != 0 => usize::try_from(v - 1).unwrap_or(usize::MAX),
        _ => default,
    };
    (
        word(HASH_LISTPACK_ENTRIES_WORD, LISTPACK_ENTRIES),
        word(HASH_LISTPACK_VALUE_WORD, LISTPACK_VALUE),
    )
}

/// A hash value: small ones keep their fields in insertion order, as
/// Redis's listpack does; a paged one (a keyed tree by field hash) in hash
/// order, as a hashtable has its own order.
#[derive(Debug)]
pub struct Hash {
    body: Body,
    changed: bool,
    journal: Journal,
}

#[derive(Debug)]
enum Body {
    /// Its compact bytes, edited in place (packed.rs).
    Compact(Pairs),
    Paged(Tree),
}

impl Default for Hash {
    fn default() -> Self {
        Hash {
            body: Body::Compact(Pairs::default()),
            changed: false,
            journal: Journal::default(),
        }
    }
}

impl Collection for Hash {
    const TYPE: ValueType = ValueType::Hash;
    const KEYED: &'static [bool] = &[true];

    fn empty() -> Self {
        Hash::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_ITEMS {
            return Err(Error::BadValue);
        }
        let fields = Pairs::parse(&mut r, n)?;
        r.finish()?;
        Ok(Hash {
            body: Body::Compact(fields),
            changed: false,
            journal: Journal::default(),
        })
    }

    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()> {
        if let Body::Compact(_) = &self.body {
            self.encode(out);
            return Ok(());
        }
        let entries = self.entries()?;
        codec::header(out, TAG_ITEMS, entries.len());
        for (field, value) in &entries {
            codec::put_bytes(out, field);
            codec::put_bytes(out, value);
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Body::Compact(fields) = &self.body {
            fields.encode(out, TAG_ITEMS);
        }
    }

    fn len(&self) -> u64 {
        match &self.body {
            Body::Compact(fields) => fields.len() as u64,
            Body::Paged(t) => t.len(),
        }
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        let Body::Compact(fields) = &self.body else {
            return "hashtable";
        };
        let small = fields.len() <= LISTPACK_ENTRIES
            && fields
                .iter()
                .all(|(f, v)| f.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
        if small {
            "listpack"
        } else {
            "hashtable"
        }
    }

    fn from_trees(mut trees: Vec<Tree>) -> Result<Self> {
        let tree = trees.pop().ok_or(Error::BadValue)?;
        Ok(Hash {
            body: Body::Paged(tree),
            changed: false,
            journal: Journal::default(),
        })
    }

    fn settle(&mut self, seg: &Segment) -> Result<()> {
        match &mut self.body {
            Body::Compact(fields) => {
                let bytes = fields.data_bytes();
                let over = fields.len() > COMPACT_ITEMS || bytes > COMPACT_BYTES;
                let within_listpack = || {
                    let (entries, value) = listpack_thresholds(seg);
                    bytes <= COMPACT_BYTES_MAX
                        && fields.len() <= entries
                        && fields
                            .iter()
                            .all(|(f, v)| f.len() <= value && v.len() <= value)
                };
                if over && !within_listpack() {
                    let mut items: Vec<(Vec<u8>, &[u8])> =
                        fields.iter().map(|(f, v)| (hashed_key(f), v)).collect();
                    items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    // A repeated field (only a scribble makes one, packed.rs)
                    // would be two items of one key in the tree.
                    if items.windows(2).any(|w| w[0].0 == w[1].0) {
                        return Err(Error::BadValue);
                    }
                    let tree = Tree::build(
                        seg.0.clone(),
                        true,
                        items.iter().map(|(k, v)| (k.as_slice(), *v)),
                    );
                    self.body = Body::Paged(tree);
                }
            }
            Body::Paged(tree) => {
                if tree.len() as usize <= COMPACT_ITEMS / 2 {
                    let items = tree.items()?;
                    let bytes: usize = items.iter().map(|(k, v)| unhashed(k).len() + v.len()).sum();
                    if bytes <= COMPACT_BYTES / 2 {
                        self.body = Body::Compact(Pairs::from_pairs(
                            items.iter().map(|(k, v)| (unhashed(k), v.as_slice())),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn trees_mut(&mut self) -> Vec<&mut Tree> {
        match &mut self.body {
            Body::Compact(_) => Vec::new(),
            Body::Paged(t) => vec![t],
        }
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }
}

impl Hash {
    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Result<Option<Vec<u8>>> {
        match &self.body {
            Body::Compact(fields) => Ok(fields.get(field).map(<[u8]>::to_vec)),
            Body::Paged(t) => t.get(&hashed_key(field)),
        }
    }

    /// Whether `field` exists.
    pub fn contains(&self, field: &[u8]) -> Result<bool> {
        match &self.body {
            Body::Compact(fields) => Ok(fields.get(field).is_some()),
            Body::Paged(t) => Ok(t.get(&hashed_key(field))?.is_some()),
        }
    }

    /// Sets `field`; true when it is new.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> Result<bool> {
        self.changed = true;
        self.journal.hash_set(field, value);
        match &mut self.body {
            Body::Compact(fields) => Ok(fields.set(field, value)),
            Body::Paged(t) => Ok(t.upsert(&hashed_key(field), value)?.is_none()),
        }
    }

    /// Removes `field`; true when it existed.
    pub fn remove(&mut self, field: &[u8]) -> Result<bool> {
        let removed = match &mut self.body {
            Body::Compact(fields) => fields.remove(field),
            Body::Paged(t) => t.remove_key(&hashed_key(field))?.is_some(),
        };
        if removed {
            self.changed = true;
            self.journal.hash_del(field);
        }
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
        let journal = &mut self.journal;
        let removed = match &mut self.body {
            Body::Compact(map) => {
                let before = map.len();
                map.retain(|f| {
                    let gone = doomed.contains(f);
                    if gone {
                        journal.hash_del(f);
                    }
                    !gone
                });
                (before - map.len()) as u64
            }
            Body::Paged(t) => {
                let mut n = 0;
                for f in doomed {
                    if t.remove_key(&hashed_key(f))?.is_some() {
                        journal.hash_del(f);
                        n += 1;
                    }
                }
                n
            }
        };
        self.changed |= removed > 0;
        Ok(removed)
    }

    /// Every field and value.
    pub fn entries(&self) -> Result<Vec<FieldValue>> {
        match &self.body {
            Body::Compact(fields) => Ok(fields
                .iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect()),
            Body::Paged(t) => Ok(t
                .items()?
                .into_iter()
                .map(|(k, v)| (unhashed(&k).to_vec(), v))
                .collect()),
        }
    }

    /// The field and value at position `index` (< len) of the hash's
    /// iteration order: HRANDFIELD picks by random position.
    pub fn nth(&self, index: u64) -> Result<Option<FieldValue>> {
        match &self.body {
            Body::Compact(fields) => Ok(usize::try_from(index)
                .ok()
                .and_then(|i| fields.nth(i))
                .map(|(f, v)| (f.to_vec(), v.to_vec()))),
            Body::Paged(t) => Ok(t.nth(index)?.map(|(k, v)| (unhashed(&k).to_vec(), v))),
        }
    }

    /// One HSCAN step from `cursor`: the next cursor (0 when done) and the
    /// fields visited. A compact value is returned whole with cursor 0, as
    /// Redis does for a listpack; a paged one about `count` fields at a
    /// time, the cursor being the hash where the next step starts.
    pub fn scan(&self, cursor: u64, count: u64) -> Result<(u64, Vec<FieldValue>)> {
        match &self.body {
            Body::Compact(_) => Ok((0, self.entries()?)),
            Body::Paged(t) => {
                let (next, items) = scan_tree(t, cursor, count)?;
                Ok((
                    next,
                    items
                        .into_iter()
                        .map(|(k, v)| (unhashed(&k).to_vec(), v))
                        .collect(),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_field_answers_as_its_first() {
        let mut bytes = Vec::new();
        codec::header(&mut bytes, TAG_ITEMS, 2);
        for (f, v) in [("f", "1"), ("f", "2")] {
            codec::put_bytes(&mut bytes, f.as_bytes());
            codec::put_bytes(&mut bytes, v.as_bytes());
        }
        let mut h = Hash::decode(&bytes).unwrap();
        assert_eq!(h.get(b"f").unwrap(), Some(b"1".to_vec()));
        assert!(!h.insert(b"f", b"3").unwrap());
        assert_eq!(h.get(b"f").unwrap(), Some(b"3".to_vec()));
        assert_eq!(h.len(), 2);
    }

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
