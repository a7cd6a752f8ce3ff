//! Lists.

use std::collections::VecDeque;

use super::codec::{self, Reader, TAG_ITEMS};
use super::Collection;
use crate::entry::ValueType;
use crate::error::{Error, Result};

/// A list value. Indexes are 0-based from the head; callers resolve Redis's
/// negative indexes first.
#[derive(Clone, Debug, Default)]
pub struct List {
    items: VecDeque<Vec<u8>>,
    changed: bool,
}

impl Collection for List {
    const TYPE: ValueType = ValueType::List;

    fn empty() -> Self {
        List::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_ITEMS {
            return Err(Error::BadValue);
        }
        let mut items = VecDeque::with_capacity(n);
        for _ in 0..n {
            items.push_back(r.bytes()?);
        }
        r.finish()?;
        Ok(List {
            items,
            changed: false,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        codec::header(out, TAG_ITEMS, self.items.len());
        for item in &self.items {
            codec::put_bytes(out, item);
        }
    }

    fn len(&self) -> u64 {
        self.items.len() as u64
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        "quicklist"
    }
}

impl List {
    /// The element at `index`, if there is one.
    pub fn get(&self, index: u64) -> Result<Option<Vec<u8>>> {
        Ok(usize::try_from(index)
            .ok()
            .and_then(|i| self.items.get(i))
            .cloned())
    }

    /// The elements in `start..end` (clamped to the list).
    pub fn range(&self, start: u64, end: u64) -> Result<Vec<Vec<u8>>> {
        let len = self.len();
        let (start, end) = (start.min(len) as usize, end.min(len) as usize);
        Ok(self.items.range(start..end.max(start)).cloned().collect())
    }

    /// Adds an element at the head.
    pub fn push_front(&mut self, item: &[u8]) -> Result<()> {
        self.changed = true;
        self.items.push_front(item.to_vec());
        Ok(())
    }

    /// Adds an element at the tail.
    pub fn push_back(&mut self, item: &[u8]) -> Result<()> {
        self.changed = true;
        self.items.push_back(item.to_vec());
        Ok(())
    }

    /// Removes and returns the head element.
    pub fn pop_front(&mut self) -> Result<Option<Vec<u8>>> {
        let item = self.items.pop_front();
        self.changed |= item.is_some();
        Ok(item)
    }

    /// Removes and returns the tail element.
    pub fn pop_back(&mut self) -> Result<Option<Vec<u8>>> {
        let item = self.items.pop_back();
        self.changed |= item.is_some();
        Ok(item)
    }

    /// Replaces the element at `index`; false when out of range.
    pub fn set(&mut self, index: u64, item: &[u8]) -> Result<bool> {
        match usize::try_from(index)
            .ok()
            .and_then(|i| self.items.get_mut(i))
        {
            Some(slot) => {
                *slot = item.to_vec();
                self.changed = true;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Inserts `item` so that it becomes the element at `index` (`index` ≤ len).
    pub fn insert(&mut self, index: u64, item: &[u8]) -> Result<()> {
        let i = (index.min(self.len())) as usize;
        self.items.insert(i, item.to_vec());
        self.changed = true;
        Ok(())
    }

    /// Removes and returns the element at `index`.
    pub fn remove(&mut self, index: u64) -> Result<Option<Vec<u8>>> {
        let item = usize::try_from(index)
            .ok()
            .and_then(|i| self.items.remove(i));
        self.changed |= item.is_some();
        Ok(item)
    }

    /// Calls `f` with each element's index (from the head) and bytes, walking
    /// from the head, or from the tail when `from_tail`, until `f` returns
    /// false. LPOS, LINSERT and LREM search with it without copying the
    /// elements they pass over.
    pub fn scan(&self, from_tail: bool, mut f: impl FnMut(u64, &[u8]) -> bool) -> Result<()> {
        if from_tail {
            for (i, item) in self.items.iter().enumerate().rev() {
                if !f(i as u64, item) {
                    break;
                }
            }
        } else {
            for (i, item) in self.items.iter().enumerate() {
                if !f(i as u64, item) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Calls `f` with each element in `start..end` (clamped to the list), in
    /// order: LRANGE writes them into its reply without copying them first.
    pub fn for_each_in(&self, start: u64, end: u64, mut f: impl FnMut(&[u8])) -> Result<()> {
        let len = self.len();
        let (start, end) = (start.min(len) as usize, end.min(len) as usize);
        for item in self.items.range(start..end.max(start)) {
            f(item);
        }
        Ok(())
    }

    /// Removes the elements equal to `item` (LREM): at most `limit` of them
    /// (0 = all), the first ones from the head, or from the tail when
    /// `from_tail`. Returns how many it removed. One pass over the list
    /// whatever the number removed (two when counting from the tail).
    pub fn remove_equal(&mut self, item: &[u8], limit: u64, from_tail: bool) -> Result<u64> {
        let matches = self.items.iter().filter(|x| x.as_slice() == item).count() as u64;
        let remove = if limit == 0 {
            matches
        } else {
            limit.min(matches)
        };
        if remove == 0 {
            return Ok(0);
        }
        // The matches to keep come before the removed ones (from the tail) or
        // after them (from the head), in head-to-tail order.
        let (first, last) = if from_tail {
            (matches - remove, matches)
        } else {
            (0, remove)
        };
        let mut seen = 0u64;
        self.items.retain(|x| {
            if x.as_slice() != item {
                return true;
            }
            let ordinal = seen;
            seen += 1;
            !(first..last).contains(&ordinal)
        });
        self.changed = true;
        Ok(remove)
    }

    /// Keeps only the elements in `start..end` (LTRIM).
    pub fn retain_range(&mut self, start: u64, end: u64) -> Result<()> {
        let len = self.len();
        let (start, end) = (
            start.min(len) as usize,
            end.min(len).max(start.min(len)) as usize,
        );
        if start == 0 && end == len as usize {
            return Ok(());
        }
        self.items.truncate(end);
        self.items.drain(..start);
        self.changed = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> List {
        let mut l = List::empty();
        for i in items {
            l.push_back(i.as_bytes()).unwrap();
        }
        l
    }

    fn items(l: &List) -> Vec<String> {
        l.range(0, l.len())
            .unwrap()
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn scan_walks_either_way_and_stops() {
        let l = list(&["a", "b", "c"]);
        let mut seen = Vec::new();
        l.scan(true, |i, x| {
            seen.push((i, x.to_vec()));
            i > 1
        })
        .unwrap();
        assert_eq!(seen, [(2, b"c".to_vec()), (1, b"b".to_vec())]);
        let mut n = 0;
        l.scan(false, |_, _| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn for_each_in_clamps() {
        let l = list(&["a", "b", "c"]);
        let mut seen = Vec::new();
        l.for_each_in(1, 10, |x| seen.push(x.to_vec())).unwrap();
        assert_eq!(seen, [b"b".to_vec(), b"c".to_vec()]);
        seen.clear();
        l.for_each_in(2, 1, |x| seen.push(x.to_vec())).unwrap();
        assert!(seen.is_empty());
    }

    #[test]
    fn remove_equal_from_either_end() {
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_equal(b"a", 2, true).unwrap(), 2);
        assert_eq!(items(&l), ["a", "b", "c"]);
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.remove_equal(b"a", 2, false).unwrap(), 2);
        assert_eq!(items(&l), ["b", "c", "a"]);
        assert_eq!(l.remove_equal(b"a", 0, false).unwrap(), 1);
        assert_eq!(items(&l), ["b", "c"]);
        let mut l = list(&["x"]);
        assert_eq!(l.remove_equal(b"y", 0, false).unwrap(), 0);
        assert!(!l.changed());
        assert_eq!(l.remove_equal(b"x", 9, true).unwrap(), 1);
        assert!(l.changed() && l.is_empty());
    }
}
