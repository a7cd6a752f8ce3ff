//! Published nodes read for a search (in place, entry by entry) and
//! walked over (the consistency check, freeing, COPY).

use super::*;
use crate::segment::shm::cmp_atomic;
use std::sync::atomic::Ordering::Relaxed;

/// A published node as a search reads it: in place, only the table slots
/// and entries the search looks at (a binary search touches a few of a
/// node's entries; copying the node whole cost more than the search).
/// Every slot and length is checked where it is read (I1): a damaged node
/// gives a wrong answer or `BadValue`, never a read outside its body.
pub(super) struct View<'a> {
    r: &'a Region,
    level: u8,
    n: usize,
    /// A leaf stored last first: entry `i` is the table's `n - 1 - i`.
    reversed: bool,
    /// Offset of the entry table in the segment.
    table: u64,
    /// Offset of the body in the segment, and its length.
    body: u64,
    body_len: u64,
}

impl<'a> View<'a> {
    /// The node in `blk`, which must be at `level` and hold `count` items.
    pub(super) fn open(r: &'a Region, blk: u64, level: u8, count: u64) -> Result<View<'a>> {
        let v = View::open_unsummed(r, blk, level)?;
        let total = if level == 0 {
            Some(v.n as u64)
        } else {
            let mut sum = Some(0u64);
            for i in 0..v.n {
                sum = sum.and_then(|s| s.checked_add(v.count(i).ok()?));
            }
            sum
        };
        if total != Some(count) {
            return bad();
        }
        Ok(v)
    }

    /// [`View::open`] without adding up an inner node's counts: for a walk
    /// down one end of a list, which checks the count of the child it
    /// takes where it arrives (the leaf's entries), and reads every slot
    /// and length checked as any view does.
    pub(super) fn open_unsummed(r: &'a Region, blk: u64, level: u8) -> Result<View<'a>> {
        let at = node_header(r, blk)?;
        if at.level != level {
            return bad();
        }
        let v = View {
            r,
            level,
            n: at.n,
            reversed: at.reversed,
            table: at.table,
            body: at.body,
            body_len: at.body_len,
        };
        if v.n > 0 && r.load32(v.table)? != 0 {
            return bad();
        }
        Ok(v)
    }

    pub(super) fn len(&self) -> usize {
        self.n
    }

    /// Entry `i`'s start and end, as offsets in the segment, checked
    /// against the body and (inner nodes) the word layout.
    fn entry(&self, i: usize) -> Result<(u64, u64)> {
        if i >= self.n {
            return bad();
        }
        let i = if self.reversed { self.n - 1 - i } else { i };
        let start = u64::from(self.r.load32(self.table + 4 * i as u64)?);
        let end = if i + 1 < self.n {
            u64::from(self.r.load32(self.table + 4 * (i + 1) as u64)?)
        } else {
            self.body_len
        };
        if start >= end
            || end > self.body_len
            || (self.level > 0 && (!start.is_multiple_of(8) || end - start < 16))
        {
            return bad();
        }
        Ok((self.body + start, self.body + end))
    }

    pub(super) fn ptr(&self, i: usize) -> Result<u64> {
        if self.level == 0 {
            return bad();
        }
        self.r.load64(self.entry(i)?.0)
    }

    pub(super) fn count(&self, i: usize) -> Result<u64> {
        if self.level == 0 {
            return bad();
        }
        self.r.load64(self.entry(i)?.0 + 8)
    }

    /// Where an inner node's count of child `i` is, in the segment.
    pub(super) fn count_word(&self, i: usize) -> Result<u64> {
        if self.level == 0 {
            return bad();
        }
        Ok(self.entry(i)?.0 + 8)
    }

    /// Compares a leaf's key `i` with `key`.
    pub(super) fn cmp_key(&self, i: usize, key: &[u8]) -> Result<std::cmp::Ordering> {
        self.cmp_bytes_at(i, 0, key)
    }

    /// Compares an inner node's separator `i` with `key` (it follows the
    /// child pointer and count words).
    pub(super) fn cmp_sep(&self, i: usize, key: &[u8]) -> Result<std::cmp::Ordering> {
        self.cmp_bytes_at(i, 16, key)
    }

    /// The length prefix at `*pos` (below `end`), moving `*pos` past it;
    /// the bytes it announces must end by `end`.
    fn read_len(&self, pos: &mut u64, end: u64) -> Result<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            if *pos >= end {
                return bad();
            }
            let byte = self.r.load8(*pos)?;
            *pos += 1;
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return match pos.checked_add(n) {
                    Some(e) if e <= end => Ok(n),
                    _ => bad(),
                };
            }
        }
        bad()
    }

    /// Compares the length-prefixed bytes `skip` bytes into entry `i`
    /// with `key`.
    fn cmp_bytes_at(&self, i: usize, skip: u64, key: &[u8]) -> Result<std::cmp::Ordering> {
        let (start, end) = self.entry(i)?;
        // The entry checked once as a whole, then read without a check a
        // byte (the search's hottest loop).
        let b = self
            .r
            .bytes(start, end - start)?
            .get(skip as usize..)
            .ok_or(Error::BadValue)?;
        let mut len = 0usize;
        let mut pos = 0usize;
        for shift in (0..64).step_by(7) {
            let byte = b.get(pos).ok_or(Error::BadValue)?.load(Relaxed);
            pos += 1;
            len |= usize::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
            if byte & 0x80 == 0 {
                let bytes = pos
                    .checked_add(len)
                    .and_then(|e| b.get(pos..e))
                    .ok_or(Error::BadValue)?;
                return Ok(cmp_atomic(bytes, key));
            }
        }
        bad()
    }

    /// A leaf's item `i`: (key, value).
    /// Where a leaf's item `i` keeps its value: (offset, length).
    pub(super) fn value_span(&self, i: usize) -> Result<(u64, u64)> {
        if self.level != 0 {
            return bad();
        }
        let (start, end) = self.entry(i)?;
        let mut pos = start;
        let klen = self.read_len(&mut pos, end)?;
        pos += klen;
        let vlen = self.read_len(&mut pos, end)?;
        if pos + vlen != end {
            return bad();
        }
        Ok((pos, vlen))
    }

    pub(super) fn item(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
        let (start, end) = self.entry(i)?;
        let mut e = Vec::with_capacity((end - start) as usize);
        self.r.read_bytes(start, end - start, &mut e)?;
        let mut pos = 0;
        let k = read_bytes(&e, &mut pos).ok_or(Error::BadValue)?;
        let v = read_bytes(&e, &mut pos).ok_or(Error::BadValue)?;
        Ok((e[k.0..k.1].to_vec(), e[v.0..v.1].to_vec()))
    }
}

/// The blocks of the tree at `root`: `f(block)` for every node, parents
/// before children, each node checked on the way (the consistency check).
pub(crate) fn walk(
    r: &Region,
    root: u64,
    height: u8,
    count: u64,
    f: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<()> {
    if height == 0 || height > MAX_HEIGHT {
        return if root == 0 && count == 0 {
            Ok(())
        } else {
            bad()
        };
    }
    let node = read_node(r, root, height - 1, count)?;
    f(root)?;
    if node.level > 0 {
        for i in 0..node.len() {
            let (ptr, c, _) = node.child(i);
            walk(r, ptr, height - 1, c, f)?;
        }
    }
    Ok(())
}

/// The level of the node in block `blk` and the offsets of its child
/// pointer words (none for a leaf), for freeing a dropped tree leaf-first;
/// None when `blk` does not read as a node.
pub(crate) fn child_words(r: &Region, blk: u64) -> Option<(u8, Vec<u64>)> {
    let at = node_header(r, blk).ok()?;
    if at.level == 0 {
        return Some((0, Vec::new()));
    }
    let node = parse_block(r, &at).ok()?;
    let words = node.offs.iter().map(|&o| at.body + o as u64).collect();
    Some((at.level, words))
}

/// The payload of the node in `blk` with each child pointer replaced by
/// `map(child)`: COPY's deep copy of a tree.
pub(crate) fn copy_payload(
    r: &Region,
    blk: u64,
    map: &mut dyn FnMut(u64) -> Result<u64>,
) -> Result<Vec<u8>> {
    let at = node_header(r, blk)?;
    let level = at.level;
    let mut node = parse_block(r, &at)?;
    if level > 0 {
        for i in 0..node.len() {
            let (ptr, count, _) = node.child(i);
            match tree_level(r, ptr) {
                Some(l) if l + 1 == level => {}
                _ => return bad(),
            }
            let copy = map(ptr)?;
            node.set_child(i, copy, count);
        }
    }
    Ok(node.payload())
}

pub(super) fn tree_level(r: &Region, blk: u64) -> Option<u8> {
    node_header(r, blk).ok().map(|h| h.level)
}
