//! Sets.

use std::collections::HashSet;

use indexmap::IndexSet;

use super::codec::{self, Reader, TAG_INTSET, TAG_ITEMS};
use super::tree::Tree;
use super::{as_int, hashed_key, scan_tree, unhashed, Collection, Journal, Segment};
use crate::error::{Error, Result};
use crate::keyspace::entry::ValueType;

/// Redis 7.0's `set-max-intset-entries` default.
const INTSET_ENTRIES: usize = 512;
/// A set with more members than this, or more bytes, is paged.
const COMPACT_ITEMS: usize = INTSET_ENTRIES;
const COMPACT_BYTES: usize = 64 * 1024;

/// A set value. A set whose members are all integers (at most 512) is
/// kept, and iterated, in ascending numeric order like Redis's intset;
/// another small set in insertion order; a paged one (a keyed tree by
/// member hash) in hash order.
#[derive(Debug)]
pub struct Set {
    body: Body,
    changed: bool,
    journal: Journal,
}

#[derive(Debug)]
enum Body {
    Compact(IndexSet<Vec<u8>>),
    Paged(Tree),
}

impl Default for Set {
    fn default() -> Self {
        Set {
            body: Body::Compact(IndexSet::new()),
            changed: false,
            journal: Journal::default(),
        }
    }
}

impl Collection for Set {
    const TYPE: ValueType = ValueType::Set;
    const KEYED: &'static [bool] = &[true];

    fn empty() -> Self {
        Set::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        let mut members = IndexSet::with_capacity(n);
        for _ in 0..n {
            let member = match tag {
                TAG_ITEMS => r.bytes()?,
                TAG_INTSET => (r.u64()? as i64).to_string().into_bytes(),
                _ => return Err(Error::BadValue),
            };
            if !members.insert(member) {
                return Err(Error::BadValue);
            }
        }
        r.finish()?;
        Ok(Set {
            body: Body::Compact(members),
            changed: false,
            journal: Journal::default(),
        })
    }

    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()> {
        if let Body::Compact(_) = &self.body {
            self.encode(out);
            return Ok(());
        }
        let members = self.members()?;
        codec::header(out, TAG_ITEMS, members.len());
        for m in &members {
            codec::put_bytes(out, m);
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let Body::Compact(members) = &self.body else {
            return;
        };
        if let Some(ints) = self.as_intset() {
            codec::header(out, TAG_INTSET, ints.len());
            for i in ints {
                out.extend_from_slice(&i.to_le_bytes());
            }
        } else {
            codec::header(out, TAG_ITEMS, members.len());
            for m in members {
                codec::put_bytes(out, m);
            }
        }
    }

    fn len(&self) -> u64 {
        match &self.body {
            Body::Compact(members) => members.len() as u64,
            Body::Paged(t) => t.len(),
        }
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        if self.as_intset().is_some() {
            "intset"
        } else {
            "hashtable"
        }
    }

    fn from_trees(mut trees: Vec<Tree>) -> Result<Self> {
        let tree = trees.pop().ok_or(Error::BadValue)?;
        Ok(Set {
            body: Body::Paged(tree),
            changed: false,
            journal: Journal::default(),
        })
    }

    fn settle(&mut self, seg: &Segment) -> Result<()> {
        match &mut self.body {
            Body::Compact(members) => {
                let bytes: usize = members.iter().map(Vec::len).sum();
                if members.len() > COMPACT_ITEMS || bytes > COMPACT_BYTES {
                    let mut keys: Vec<Vec<u8>> = members.iter().map(|m| hashed_key(m)).collect();
                    keys.sort_unstable();
                    let tree = Tree::build(
                        seg.0.clone(),
                        true,
                        keys.iter().map(|k| (k.as_slice(), &[][..])),
                    );
                    self.body = Body::Paged(tree);
                }
            }
            Body::Paged(tree) => {
                if tree.len() as usize <= COMPACT_ITEMS / 2 {
                    let members: IndexSet<Vec<u8>> = tree
                        .items()?
                        .into_iter()
                        .map(|(k, _)| unhashed(&k).to_vec())
                        .collect();
                    if members.iter().map(Vec::len).sum::<usize>() <= COMPACT_BYTES / 2 {
                        self.body = Body::Compact(members);
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

impl Set {
    /// The members as sorted integers when the set has the intset shape.
    fn as_intset(&self) -> Option<Vec<i64>> {
        let Body::Compact(members) = &self.body else {
            return None;
        };
        if members.len() > INTSET_ENTRIES {
            return None;
        }
        let mut ints = members
            .iter()
            .map(|m| as_int(m))
            .collect::<Option<Vec<i64>>>()?;
        ints.sort_unstable();
        Some(ints)
    }

    /// A copy held wholly in process memory: it stays valid after the
    /// read that made it, when a paged original may change.
    pub fn detached(&self) -> Result<Set> {
        let members = match &self.body {
            Body::Compact(members) => members.clone(),
            Body::Paged(_) => self.members()?.into_iter().collect(),
        };
        Ok(Set {
            body: Body::Compact(members),
            changed: false,
            journal: Journal::default(),
        })
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> Result<bool> {
        match &self.body {
            Body::Compact(members) => Ok(members.contains(member)),
            Body::Paged(t) => Ok(t.get(&hashed_key(member))?.is_some()),
        }
    }

    /// Adds `member`; true when it is new.
    pub fn insert(&mut self, member: &[u8]) -> Result<bool> {
        let added = match &mut self.body {
            Body::Compact(members) => {
                if members.contains(member) {
                    false
                } else {
                    members.insert(member.to_vec())
                }
            }
            Body::Paged(t) => t.upsert(&hashed_key(member), &[])?.is_none(),
        };
        if added {
            self.changed = true;
            self.journal.set_add(member);
        }
        Ok(added)
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> Result<bool> {
        let removed = match &mut self.body {
            Body::Compact(members) => members.shift_remove(member),
            Body::Paged(t) => t.remove_key(&hashed_key(member))?.is_some(),
        };
        if removed {
            self.changed = true;
            self.journal.set_rem(member);
        }
        Ok(removed)
    }

    /// Removes each of `members` that is there; returns how many were. One
    /// pass over the set however many are named (SREM of many members,
    /// SPOP with a count), where [`remove`](Self::remove) once each would
    /// shift the set's order once each.
    pub fn remove_all(&mut self, members: &[&[u8]]) -> Result<u64> {
        if let [one] = members {
            return Ok(u64::from(self.remove(one)?));
        }
        let doomed: HashSet<&[u8]> = members.iter().copied().collect();
        let journal = &mut self.journal;
        let removed = match &mut self.body {
            Body::Compact(set) => {
                let before = set.len();
                set.retain(|m| {
                    let gone = doomed.contains(m.as_slice());
                    if gone {
                        journal.set_rem(m);
                    }
                    !gone
                });
                (before - set.len()) as u64
            }
            Body::Paged(t) => {
                let mut n = 0;
                for m in doomed {
                    if t.remove_key(&hashed_key(m))?.is_some() {
                        journal.set_rem(m);
                        n += 1;
                    }
                }
                n
            }
        };
        self.changed |= removed > 0;
        Ok(removed)
    }

    /// Every member, in the set's iteration order.
    pub fn members(&self) -> Result<Vec<Vec<u8>>> {
        if let Some(ints) = self.as_intset() {
            return Ok(ints.iter().map(|i| i.to_string().into_bytes()).collect());
        }
        match &self.body {
            Body::Compact(members) => Ok(members.iter().cloned().collect()),
            Body::Paged(t) => Ok(t
                .items()?
                .into_iter()
                .map(|(k, _)| unhashed(&k).to_vec())
                .collect()),
        }
    }

    /// The member at position `index` (< len): SPOP and SRANDMEMBER pick by
    /// random position.
    pub fn nth(&self, index: u64) -> Result<Option<Vec<u8>>> {
        match &self.body {
            Body::Compact(members) => Ok(usize::try_from(index)
                .ok()
                .and_then(|i| members.get_index(i))
                .cloned()),
            Body::Paged(t) => Ok(t.nth(index)?.map(|(k, _)| unhashed(&k).to_vec())),
        }
    }

    /// One SSCAN step (see [`super::Hash::scan`]).
    pub fn scan(&self, cursor: u64, count: u64) -> Result<(u64, Vec<Vec<u8>>)> {
        match &self.body {
            Body::Compact(_) => Ok((0, self.members()?)),
            Body::Paged(t) => {
                let (next, items) = scan_tree(t, cursor, count)?;
                Ok((
                    next,
                    items
                        .into_iter()
                        .map(|(k, _)| unhashed(&k).to_vec())
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
    fn remove_all_counts_each_member_once_and_keeps_order() {
        let mut s = Set::empty();
        for m in ["c", "a", "x", "b"] {
            s.insert(m.as_bytes()).unwrap();
        }
        let mut s = Set::decode(&{
            let mut out = Vec::new();
            s.encode(&mut out);
            out
        })
        .unwrap();
        assert_eq!(s.remove_all(&[b"zz"]).unwrap(), 0);
        assert!(!s.changed());
        assert_eq!(s.remove_all(&[b"a", b"zz", b"a", b"x"]).unwrap(), 2);
        assert!(s.changed());
        assert_eq!(s.members().unwrap(), [b"c".to_vec(), b"b".to_vec()]);
        assert_eq!(s.remove_all(&[b"c"]).unwrap(), 1);
        assert_eq!(s.remove_all(&[b"b", b"c"]).unwrap(), 1);
        assert!(s.is_empty());
    }
}
