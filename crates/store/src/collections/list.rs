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
