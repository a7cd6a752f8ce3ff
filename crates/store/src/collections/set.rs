//! Sets.

use std::collections::HashSet;

use indexmap::IndexSet;

use super::codec::{self, Reader, TAG_INTSET, TAG_ITEMS};
use super::{as_int, Collection};
use crate::entry::ValueType;
use crate::error::{Error, Result};

/// Redis 7.0's `set-max-intset-entries` default.
const INTSET_ENTRIES: usize = 512;

/// A set value. A set whose members are all integers (at most 512) is
/// kept, and iterated, in ascending numeric order like Redis's intset;
/// any other set in insertion order.
#[derive(Clone, Debug, Default)]
pub struct Set {
    members: IndexSet<Vec<u8>>,
    changed: bool,
}

impl Collection for Set {
    const TYPE: ValueType = ValueType::Set;

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
            members,
            changed: false,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Some(ints) = self.as_intset() {
            codec::header(out, TAG_INTSET, ints.len());
            for i in ints {
                out.extend_from_slice(&i.to_le_bytes());
            }
        } else {
            codec::header(out, TAG_ITEMS, self.members.len());
            for m in &self.members {
                codec::put_bytes(out, m);
            }
        }
    }

    fn len(&self) -> u64 {
        self.members.len() as u64
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
}

impl Set {
    /// The members as sorted integers when the set has the intset shape.
    fn as_intset(&self) -> Option<Vec<i64>> {
        if self.members.len() > INTSET_ENTRIES {
            return None;
        }
        let mut ints = self
            .members
            .iter()
            .map(|m| as_int(m))
            .collect::<Option<Vec<i64>>>()?;
        ints.sort_unstable();
        Some(ints)
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> Result<bool> {
        Ok(self.members.contains(member))
    }

    /// Adds `member`; true when it is new.
    pub fn insert(&mut self, member: &[u8]) -> Result<bool> {
        if self.members.contains(member) {
            return Ok(false);
        }
        self.members.insert(member.to_vec());
        self.changed = true;
        Ok(true)
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> Result<bool> {
        let removed = self.members.shift_remove(member);
        self.changed |= removed;
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
        let before = self.members.len();
        self.members.retain(|m| !doomed.contains(m.as_slice()));
        let removed = before - self.members.len();
        self.changed |= removed > 0;
        Ok(removed as u64)
    }

    /// Every member, in the set's iteration order.
    pub fn members(&self) -> Result<Vec<Vec<u8>>> {
        if let Some(ints) = self.as_intset() {
            return Ok(ints.iter().map(|i| i.to_string().into_bytes()).collect());
        }
        Ok(self.members.iter().cloned().collect())
    }

    /// The member at position `index` (< len): SPOP and SRANDMEMBER pick by
    /// random position.
    pub fn nth(&self, index: u64) -> Result<Option<Vec<u8>>> {
        Ok(usize::try_from(index)
            .ok()
            .and_then(|i| self.members.get_index(i))
            .cloned())
    }

    /// One SSCAN step (see [`super::Hash::scan`]).
    pub fn scan(&self, _cursor: u64, _count: u64) -> Result<(u64, Vec<Vec<u8>>)> {
        Ok((0, self.members()?))
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
