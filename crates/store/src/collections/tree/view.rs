//! Nodes read in place in the segment, without copying: what a search and
//! a walk over a published tree use.

use super::*;

/// A node read in place in the segment, one entry at a time: what a
/// search uses, so that it copies a few keys rather than whole nodes.
/// Every offset is checked before use (I1).
pub(super) struct View<'r> {
    pub(super) r: &'r Region,
    pub(super) at: Layout,
}

impl<'r> View<'r> {
    /// The node in `blk`, which must be at `level` and hold `count` items.
    pub(super) fn open(r: &'r Region, blk: u64, level: u8, count: u64) -> Result<View<'r>> {
        let at = node_header(r, blk)?;
        if at.level != level {
            return bad();
        }
        let v = View { r, at };
        let total = if level == 0 {
            Some(v.at.n as u64)
        } else {
            let mut sum = 0u64;
            for i in 0..v.at.n {
                sum = match sum.checked_add(v.count(i)?) {
                    Some(s) => s,
                    None => return bad(),
                };
            }
            Some(sum)
        };
        if total != Some(count) {
            return bad();
        }
        Ok(v)
    }

    pub(super) fn len(&self) -> usize {
        self.at.n
    }

    /// Entry `i`'s (start, end) in the body.
    pub(super) fn span(&self, i: usize) -> Result<(u64, u64)> {
        let start = self.r.load32(self.at.table + 4 * i as u64)? as u64;
        let end = if i + 1 < self.at.n {
            self.r.load32(self.at.table + 4 * (i + 1) as u64)? as u64
        } else {
            self.at.body_len
        };
        if start >= end || end > self.at.body_len || (self.at.level > 0 && !start.is_multiple_of(8))
        {
            return bad();
        }
        Ok((start, end))
    }

    pub(super) fn entry(&self, i: usize) -> Result<Vec<u8>> {
        let (start, end) = self.span(i)?;
        let mut out = Vec::with_capacity((end - start) as usize);
        self.r
            .read_bytes(self.at.body + start, end - start, &mut out)?;
        Ok(out)
    }

    pub(super) fn ptr(&self, i: usize) -> Result<u64> {
        let (start, end) = self.span(i)?;
        if end - start < 16 {
            return bad();
        }
        self.r.load64(self.at.body + start)
    }

    pub(super) fn count(&self, i: usize) -> Result<u64> {
        let (start, end) = self.span(i)?;
        if end - start < 16 {
            return bad();
        }
        self.r.load64(self.at.body + start + 8)
    }

    /// Compares a leaf's key `i` with `key`, reading the entry into
    /// `scratch`.
    pub(super) fn cmp_key(
        &self,
        i: usize,
        key: &[u8],
        scratch: &mut Vec<u8>,
    ) -> Result<std::cmp::Ordering> {
        self.cmp_bytes_at(i, 0, key, scratch)
    }

    /// Compares an inner node's separator `i` with `key` (it follows the
    /// child pointer and count words).
    pub(super) fn cmp_sep(
        &self,
        i: usize,
        key: &[u8],
        scratch: &mut Vec<u8>,
    ) -> Result<std::cmp::Ordering> {
        self.cmp_bytes_at(i, 16, key, scratch)
    }

    /// Compares the length-prefixed bytes `skip` bytes into entry `i`
    /// with `key`, reading the entry into `scratch`.
    fn cmp_bytes_at(
        &self,
        i: usize,
        skip: usize,
        key: &[u8],
        scratch: &mut Vec<u8>,
    ) -> Result<std::cmp::Ordering> {
        let (start, end) = self.span(i)?;
        scratch.clear();
        self.r
            .read_bytes(self.at.body + start, end - start, scratch)?;
        let mut pos = skip;
        let (a, b) = read_bytes(scratch, &mut pos).ok_or(Error::BadValue)?;
        Ok(scratch[a..b].cmp(key))
    }

    /// A leaf's item `i`: (key, value).
    pub(super) fn item(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
        let e = self.entry(i)?;
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
    let mut body = Vec::new();
    r.read_bytes(at.body, at.body_len, &mut body).ok()?;
    let node = Node::parse(at.level, body, at.n).ok()?;
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
    let mut body = Vec::new();
    r.read_bytes(at.body, at.body_len, &mut body)?;
    let mut node = Node::parse(level, body, at.n)?;
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
