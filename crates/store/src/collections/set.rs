//! Sets.

use std::collections::HashSet;

use super::codec::{self, Reader, TAG_INTSET, TAG_ITEMS};
use super::packed::Members;
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
    /// Every member an integer, ascending, none repeated: read and written
    /// as the 8-byte integers of the intset form, with no text made.
    Ints(Vec<i64>),
    /// A small set with a member that is not an integer, kept as its
    /// compact bytes (packed.rs).
    Members(Members),
    Paged(Tree),
}

impl Body {
    /// The compact body of distinct members: the intset shape when every
    /// member is an integer and there are few enough.
    fn compact(members: Members) -> Body {
        if members.len() > INTSET_ENTRIES {
            return Body::Members(members);
        }
        let Some(mut ints) = members.iter().map(as_int).collect::<Option<Vec<i64>>>() else {
            return Body::Members(members);
        };
        ints.sort_unstable();
        // A repeated member (only a scribble makes one) stays as it was
        // read, so it answers as the first of the two (packed.rs).
        if ints.windows(2).any(|w| w[0] == w[1]) {
            return Body::Members(members);
        }
        Body::Ints(ints)
    }
}

fn int_text(i: i64) -> Vec<u8> {
    i.to_string().into_bytes()
}

impl Default for Set {
    fn default() -> Self {
        Set {
            body: Body::Ints(Vec::new()),
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
        let body = match tag {
            TAG_INTSET => {
                let mut ints: Vec<i64> = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = r.u64()? as i64;
                    if ints.last().is_some_and(|&last| last >= i) {
                        return Err(Error::BadValue);
                    }
                    ints.push(i);
                }
                r.finish()?;
                Body::Ints(ints)
            }
            TAG_ITEMS => Body::compact(Members::parse(&mut r, n)?),
            _ => return Err(Error::BadValue),
        };
        Ok(Set {
            body,
            changed: false,
            journal: Journal::default(),
        })
    }

    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()> {
        if !matches!(self.body, Body::Paged(_)) {
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
        match &self.body {
            Body::Ints(ints) if ints.len() <= INTSET_ENTRIES => {
                codec::header(out, TAG_INTSET, ints.len());
                for i in ints {
                    out.extend_from_slice(&i.to_le_bytes());
                }
            }
            Body::Ints(ints) => {
                codec::header(out, TAG_ITEMS, ints.len());
                for &i in ints {
                    codec::put_bytes(out, &int_text(i));
                }
            }
            Body::Members(members) => members.encode(out, TAG_ITEMS),
            Body::Paged(_) => {}
        }
    }

    fn len(&self) -> u64 {
        match &self.body {
            Body::Ints(ints) => ints.len() as u64,
            Body::Members(members) => members.len() as u64,
            Body::Paged(t) => t.len(),
        }
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        match &self.body {
            Body::Ints(ints) if ints.len() <= INTSET_ENTRIES => "intset",
            _ => "hashtable",
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
        let mut keys: Vec<Vec<u8>> = match &self.body {
            Body::Ints(ints) if ints.len() > COMPACT_ITEMS => {
                ints.iter().map(|&i| hashed_key(&int_text(i))).collect()
            }
            Body::Members(members)
                if members.len() > COMPACT_ITEMS || members.data_bytes() > COMPACT_BYTES =>
            {
                members.iter().map(hashed_key).collect()
            }
            Body::Paged(tree) if tree.len() as usize <= COMPACT_ITEMS / 2 => {
                let items = tree.items()?;
                let bytes: usize = items.iter().map(|(k, _)| unhashed(k).len()).sum();
                if bytes <= COMPACT_BYTES / 2 {
                    self.body = Body::compact(Members::from_members(
                        items.iter().map(|(k, _)| unhashed(k)),
                    ));
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        keys.sort_unstable();
        // A repeated member (only a scribble makes one, packed.rs) would be
        // two items of one key in the tree.
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::BadValue);
        }
        let tree = Tree::build(
            seg.0.clone(),
            true,
            keys.iter().map(|k| (k.as_slice(), &[][..])),
        );
        self.body = Body::Paged(tree);
        Ok(())
    }

    fn trees_mut(&mut self) -> Vec<&mut Tree> {
        match &mut self.body {
            Body::Paged(t) => vec![t],
            _ => Vec::new(),
        }
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }
}

impl Set {
    /// A copy held wholly in process memory: it stays valid after the
    /// read that made it, when a paged original may change.
    pub fn detached(&self) -> Result<Set> {
        let body = match &self.body {
            Body::Ints(ints) => Body::Ints(ints.clone()),
            Body::Members(members) => Body::Members(members.clone()),
            Body::Paged(_) => {
                let members = self.members()?;
                Body::compact(Members::from_members(members))
            }
        };
        Ok(Set {
            body,
            changed: false,
            journal: Journal::default(),
        })
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> Result<bool> {
        match &self.body {
            Body::Ints(ints) => Ok(as_int(member).is_some_and(|i| ints.binary_search(&i).is_ok())),
            Body::Members(members) => Ok(members.contains(member)),
            Body::Paged(t) => Ok(t.get(&hashed_key(member))?.is_some()),
        }
    }

    /// Adds `member`; true when it is new.
    pub fn insert(&mut self, member: &[u8]) -> Result<bool> {
        let added = match &mut self.body {
            Body::Ints(ints) => match as_int(member) {
                Some(i) => match ints.binary_search(&i) {
                    Ok(_) => false,
                    Err(at) => {
                        ints.insert(at, i);
                        true
                    }
                },
                None => {
                    // Ascending integers, then the new member.
                    let mut members = Members::from_members(ints.iter().map(|&i| int_text(i)));
                    members.insert(member);
                    self.body = Body::Members(members);
                    true
                }
            },
            Body::Members(members) => members.insert(member),
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
            Body::Ints(ints) => match as_int(member).map(|i| ints.binary_search(&i)) {
                Some(Ok(at)) => {
                    ints.remove(at);
                    true
                }
                _ => false,
            },
            Body::Members(members) => members.remove(member),
            Body::Paged(t) => t.remove_key(&hashed_key(member))?.is_some(),
        };
        if removed {
            self.changed = true;
            self.journal.set_rem(member);
            self.back_to_ints();
        }
        Ok(removed)
    }

    /// A small set whose last member that was not an integer is gone takes
    /// the intset shape again, as its encoding says.
    fn back_to_ints(&mut self) {
        if let Body::Members(members) = &mut self.body {
            self.body = Body::compact(std::mem::take(members));
        }
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
            Body::Ints(ints) => {
                let doomed: HashSet<i64> = doomed.iter().filter_map(|m| as_int(m)).collect();
                let before = ints.len();
                ints.retain(|i| {
                    let gone = doomed.contains(i);
                    if gone {
                        journal.set_rem(&int_text(*i));
                    }
                    !gone
                });
                (before - ints.len()) as u64
            }
            Body::Members(set) => {
                let before = set.len();
                set.retain(|m| {
                    let gone = doomed.contains(m);
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
        if removed > 0 {
            self.changed = true;
            self.back_to_ints();
        }
        Ok(removed)
    }

    /// Every member, in the set's iteration order.
    pub fn members(&self) -> Result<Vec<Vec<u8>>> {
        match &self.body {
            Body::Ints(ints) => Ok(ints.iter().map(|&i| int_text(i)).collect()),
            Body::Members(members) => Ok(members.iter().map(<[u8]>::to_vec).collect()),
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
        let at = usize::try_from(index).ok();
        match &self.body {
            Body::Ints(ints) => Ok(at.and_then(|i| ints.get(i)).map(|&i| int_text(i))),
            Body::Members(members) => Ok(at.and_then(|i| members.nth(i)).map(<[u8]>::to_vec)),
            Body::Paged(t) => Ok(t.nth(index)?.map(|(k, _)| unhashed(&k).to_vec())),
        }
    }

    /// One SSCAN step (see [`super::Hash::scan`]).
    pub fn scan(&self, cursor: u64, count: u64) -> Result<(u64, Vec<Vec<u8>>)> {
        match &self.body {
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
            _ => Ok((0, self.members()?)),
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

    fn reopened(s: &Set) -> Set {
        let mut out = Vec::new();
        s.encode(&mut out);
        Set::decode(&out).unwrap()
    }

    #[test]
    fn integers_keep_the_intset_shape_until_a_string_comes_and_after_it_goes() {
        let mut s = Set::empty();
        for m in ["30", "-7", "5", "5"] {
            s.insert(m.as_bytes()).unwrap();
        }
        assert_eq!(s.encoding_name(), "intset");
        let mut s = reopened(&s);
        assert_eq!(
            s.members().unwrap(),
            [b"-7".to_vec(), b"5".to_vec(), b"30".to_vec()]
        );
        assert!(s.contains(b"5").unwrap());
        // "05" and "+5" are strings, not the integer 5.
        assert!(!s.contains(b"05").unwrap());
        assert!(s.insert(b"05").unwrap());
        assert_eq!(s.encoding_name(), "hashtable");
        let mut s = reopened(&s);
        assert_eq!(s.len(), 4);
        assert!(s.contains(b"05").unwrap() && s.contains(b"30").unwrap());
        assert_eq!(s.nth(3).unwrap(), Some(b"05".to_vec()));
        assert!(s.remove(b"05").unwrap());
        assert_eq!(s.encoding_name(), "intset");
        assert_eq!(s.remove_all(&[b"30", b"-7", b"x"]).unwrap(), 2);
        assert_eq!(reopened(&s).members().unwrap(), [b"5".to_vec()]);
    }

    #[test]
    fn a_damaged_intset_is_refused() {
        let mut s = Set::empty();
        for m in ["1", "2", "3"] {
            s.insert(m.as_bytes()).unwrap();
        }
        let mut out = Vec::new();
        s.encode(&mut out);
        // Out of order (a scribble swapped two integers).
        let mut swapped = out.clone();
        swapped[2..10].copy_from_slice(&3i64.to_le_bytes());
        swapped[18..26].copy_from_slice(&1i64.to_le_bytes());
        assert!(Set::decode(&swapped).is_err());
        for cut in 0..out.len() {
            assert!(Set::decode(&out[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn repeated_members_from_a_scribble_answer_as_one() {
        let mut out = Vec::new();
        codec::header(&mut out, TAG_ITEMS, 3);
        for m in ["7", "7", "x"] {
            codec::put_bytes(&mut out, m.as_bytes());
        }
        let mut s = Set::decode(&out).unwrap();
        assert_eq!(s.encoding_name(), "hashtable");
        assert!(s.contains(b"7").unwrap());
        assert!(!s.insert(b"7").unwrap());
        assert!(s.remove(b"7").unwrap());
    }
}
