//! Published nodes read for a search (copied in bulk, decoded lazily) and
//! walked over (the consistency check, freeing, COPY).

use super::*;

/// A published node as a search reads it: its offset table and body
/// copied out in two bulk reads, checked once, and entries decoded only
/// where the search looks (no per-entry parse, no per-entry allocation).
/// Every offset is checked before use (I1).
pub(super) struct View {
    level: u8,
    /// Entry starts in `body`, ascending, each below the next (and the
    /// last below the body's end); word-aligned in an inner node.
    table: Vec<u32>,
    body: Vec<u8>,
}

impl View {
    /// The node in `blk`, which must be at `level` and hold `count` items.
    pub(super) fn open(r: &Region, blk: u64, level: u8, count: u64) -> Result<View> {
        let at = node_header(r, blk)?;
        if at.level != level {
            return bad();
        }
        let mut raw = Vec::with_capacity(4 * at.n);
        r.read_bytes(at.table, 4 * at.n as u64, &mut raw)?;
        let table: Vec<u32> = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut body = Vec::with_capacity(at.body_len as usize);
        r.read_bytes(at.body, at.body_len, &mut body)?;
        let v = View { level, table, body };
        let ends = v.table.iter().skip(1).copied().map(|o| o as usize);
        let ends = ends.chain(std::iter::once(v.body.len()));
        for (&start, end) in v.table.iter().zip(ends) {
            let start = start as usize;
            if start >= end || (level > 0 && (!start.is_multiple_of(8) || end - start < 16)) {
                return bad();
            }
        }
        if v.table.first().is_some_and(|&o| o != 0) {
            return bad();
        }
        let total = if level == 0 {
            Some(v.len() as u64)
        } else {
            (0..v.len()).try_fold(0u64, |sum, i| sum.checked_add(v.count_unchecked(i)))
        };
        if total != Some(count) {
            return bad();
        }
        Ok(v)
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Entry `i`'s bytes (the table was checked when the view opened).
    fn entry(&self, i: usize) -> Result<&[u8]> {
        let start = *self.table.get(i).ok_or(Error::BadValue)? as usize;
        let end = self
            .table
            .get(i + 1)
            .map_or(self.body.len(), |&o| o as usize);
        self.body.get(start..end).ok_or(Error::BadValue)
    }

    /// An inner entry's count word, for an index below `len` of a checked
    /// table (entries of an inner node are at least 16 bytes).
    fn count_unchecked(&self, i: usize) -> u64 {
        let at = self.table[i] as usize;
        word(&self.body, at + 8)
    }

    pub(super) fn ptr(&self, i: usize) -> Result<u64> {
        if self.level == 0 {
            return bad();
        }
        Ok(word(self.entry(i)?, 0))
    }

    pub(super) fn count(&self, i: usize) -> Result<u64> {
        if self.level == 0 {
            return bad();
        }
        Ok(word(self.entry(i)?, 8))
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

    /// Compares the length-prefixed bytes `skip` bytes into entry `i`
    /// with `key`.
    fn cmp_bytes_at(&self, i: usize, skip: usize, key: &[u8]) -> Result<std::cmp::Ordering> {
        let e = self.entry(i)?;
        let mut pos = skip;
        let (a, b) = read_bytes(e, &mut pos).ok_or(Error::BadValue)?;
        Ok(e[a..b].cmp(key))
    }

    /// A leaf's item `i`: (key, value).
    pub(super) fn item(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
        let e = self.entry(i)?;
        let mut pos = 0;
        let k = read_bytes(e, &mut pos).ok_or(Error::BadValue)?;
        let v = read_bytes(e, &mut pos).ok_or(Error::BadValue)?;
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
