//! The paged encoding of a large collection: a B+tree of arena blocks whose
//! inner nodes carry the element count of each child, so that a position
//! (LINDEX), a rank (ZRANK) or a key (HGET) is found in O(log n).
//!
//! A tree is either *positional* (a list: items in list order, found by
//! rank) or *keyed* (items in byte order of their keys, found by key or by
//! rank). Each item is a key and a value; a list's keys are empty.
//!
//! A command edits a [`Tree`] in process memory: every node it changes is
//! copied out of the segment first (its block is then listed in
//! `replaced`), so the published tree is never written. [`Tree::commit`]
//! writes the changed nodes into new blocks, leaves first, and the caller
//! publishes the new root in the key's entry in one transaction (path copy:
//! docs/design.md, "Collections"). Nodes read from the segment are
//! untrusted (I1): their levels, lengths and counts are checked on every
//! read, and a node that does not check out is `Error::BadValue`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;

use super::codec::put_varint;
use crate::error::{Error, Result};
use crate::segment::shm::Region;
use crate::segment::Shared;

/// Body bytes past which a node is split.
pub(crate) const NODE_MAX: usize = 1024;
/// Body bytes under which a node is merged into a neighbour.
const NODE_MIN: usize = NODE_MAX / 4;
/// How full a split or a bulk build leaves each node, so that the next
/// inserts do not split it again at once.
const NODE_FILL: usize = NODE_MAX * 3 / 4;
/// Deepest tree accepted from the segment (a billion items need 6 levels).
pub(crate) const MAX_HEIGHT: u8 = 24;

/// Offsets in a node block's payload (after the block's header word).
/// `P_LINK` chains the block on one of its context's lists while it is new,
/// replaced or dropped (it means nothing while the node is in a tree).
pub(crate) const P_LINK: u64 = 0;
/// Level (0 = leaf) u8, magic u8, 0 u16, entry count u32.
const P_KIND: u64 = 8;
/// Body length u32, 0 u32.
const P_BODY_LEN: u64 = 16;
/// The entry offset table: one u32 per entry (its start in the body),
/// padded to a whole word; the body follows. A search reads single
/// entries through it without copying the node.
const P_TABLE: u64 = 24;

/// Bytes of the offset table of a node of `n` entries.
fn table_len(n: usize) -> u64 {
    (4 * n as u64).next_multiple_of(8)
}
const NODE_MAGIC: u8 = 0xB7;

/// Marks a child pointer that names a node in `Tree::mem`, not a block.
const MEM: u64 = 1 << 63;

fn bad<T>() -> Result<T> {
    Err(Error::BadValue)
}

fn read_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// Reads a length-prefixed byte string; returns its range.
fn read_bytes(b: &[u8], pos: &mut usize) -> Option<(usize, usize)> {
    let len = usize::try_from(read_varint(b, pos)?).ok()?;
    let start = *pos;
    let end = start.checked_add(len).filter(|&e| e <= b.len())?;
    *pos = end;
    Some((start, end))
}

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A leaf entry: the key and the value, each length-prefixed.
pub(crate) fn leaf_entry(key: &[u8], val: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + val.len() + 4);
    put_varint(&mut out, key.len() as u64);
    out.extend_from_slice(key);
    put_varint(&mut out, val.len() as u64);
    out.extend_from_slice(val);
    out
}

/// An inner entry: the child pointer, its subtree's item count, and the
/// separator (the least key the child may hold; empty for the first child
/// and in positional trees).
fn inner_entry(ptr: u64, count: u64, sep: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(sep.len() + 18);
    out.extend_from_slice(&ptr.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    put_varint(&mut out, sep.len() as u64);
    out.extend_from_slice(sep);
    // Whole words, so that each child pointer is an aligned word in the
    // block: a dropped tree is freed through those words (paged.rs).
    out.resize(out.len().next_multiple_of(8), 0);
    out
}

/// The shortest key `s` with `left < s <= right` (for `left < right`): a
/// separator between two neighbouring nodes, short even for long keys.
fn separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

/// One node, decoded: its entries stay encoded in `body`, `offs` says where
/// each starts. Built either from a checked block or by this module.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    level: u8,
    body: Vec<u8>,
    offs: Vec<u32>,
    /// For an inner node read from the segment: where it came from.
    origin: Option<Box<Origin>>,
}

/// An inner node's block and its entries as read, so that a commit can
/// tell whether only child pointers and counts changed: then those words
/// are changed in place (logged, in the publish transaction) instead of
/// copying the node.
#[derive(Clone, Debug)]
struct Origin {
    blk: u64,
    /// Offset of the body in the segment.
    body_at: u64,
    body: Vec<u8>,
    offs: Vec<u32>,
}

/// Logged word writes that change published inner nodes in place.
pub(crate) type InPlace = Vec<(u64, u64)>;

/// At most this many in-place words per commit (the undo log is bounded);
/// a commit that would need more copies every changed node.
const IN_PLACE_WORDS: usize = 96;

impl Node {
    fn new(level: u8) -> Node {
        Node {
            level,
            ..Node::default()
        }
    }

    /// Checks an encoded body of `n` entries and indexes it.
    fn parse(level: u8, body: Vec<u8>, n: usize) -> Result<Node> {
        if n > body.len() {
            return bad();
        }
        let mut offs = Vec::with_capacity(n);
        let mut pos = 0usize;
        for _ in 0..n {
            offs.push(pos as u32);
            if level == 0 {
                read_bytes(&body, &mut pos).ok_or(Error::BadValue)?;
            } else {
                pos = pos
                    .checked_add(16)
                    .filter(|&p| p <= body.len())
                    .ok_or(Error::BadValue)?;
                read_bytes(&body, &mut pos).ok_or(Error::BadValue)?;
                pos = pos.next_multiple_of(8);
                continue;
            }
            read_bytes(&body, &mut pos).ok_or(Error::BadValue)?;
        }
        if pos != body.len() {
            return bad();
        }
        Ok(Node {
            level,
            body,
            offs,
            origin: None,
        })
    }

    fn len(&self) -> usize {
        self.offs.len()
    }

    fn start(&self, i: usize) -> usize {
        self.offs[i] as usize
    }

    fn end(&self, i: usize) -> usize {
        self.offs
            .get(i + 1)
            .map_or(self.body.len(), |&o| o as usize)
    }

    /// A leaf's item `i`: (key, value).
    fn item(&self, i: usize) -> (&[u8], &[u8]) {
        let mut pos = self.start(i);
        let k = read_bytes(&self.body, &mut pos).unwrap_or((0, 0));
        let v = read_bytes(&self.body, &mut pos).unwrap_or((0, 0));
        (&self.body[k.0..k.1], &self.body[v.0..v.1])
    }

    /// An inner node's child `i`: (pointer, count, separator).
    fn child(&self, i: usize) -> (u64, u64, &[u8]) {
        let at = self.start(i);
        let mut pos = at + 16;
        let s = read_bytes(&self.body, &mut pos).unwrap_or((0, 0));
        (
            word(&self.body, at),
            word(&self.body, at + 8),
            &self.body[s.0..s.1],
        )
    }

    /// An inner node's child pointer `i`.
    fn ptr(&self, i: usize) -> u64 {
        word(&self.body, self.start(i))
    }

    /// The item count under an inner node's child `i`.
    fn count(&self, i: usize) -> u64 {
        word(&self.body, self.start(i) + 8)
    }

    fn set_child(&mut self, i: usize, ptr: u64, count: u64) {
        let at = self.start(i);
        self.body[at..at + 8].copy_from_slice(&ptr.to_le_bytes());
        self.body[at + 8..at + 16].copy_from_slice(&count.to_le_bytes());
    }

    fn splice(&mut self, i: usize, remove: usize, bytes: &[u8]) {
        let (from, to) = if i < self.len() {
            let from = self.start(i);
            (
                from,
                if remove == 0 {
                    from
                } else {
                    self.end(i + remove - 1)
                },
            )
        } else {
            (self.body.len(), self.body.len())
        };
        let delta = bytes.len() as i64 - (to - from) as i64;
        self.body.splice(from..to, bytes.iter().copied());
        let tail: Vec<u32> = self.offs[(i + remove).min(self.len())..]
            .iter()
            .map(|&o| (o as i64 + delta) as u32)
            .collect();
        self.offs.truncate(i.min(self.len()));
        if !bytes.is_empty() {
            self.offs.push(from as u32);
        }
        self.offs.extend(tail);
    }

    fn insert(&mut self, i: usize, entry: &[u8]) {
        self.splice(i, 0, entry);
    }

    fn remove(&mut self, i: usize) {
        self.splice(i, 1, &[]);
    }

    fn replace(&mut self, i: usize, entry: &[u8]) {
        self.splice(i, 1, entry);
    }

    /// Removes entries `from..to`.
    fn remove_span(&mut self, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let (a, b) = (self.start(from), self.end(to - 1));
        let delta = (b - a) as u32;
        self.body.drain(a..b);
        let tail: Vec<u32> = self.offs[to..].iter().map(|&o| o - delta).collect();
        self.offs.truncate(from);
        self.offs.extend(tail);
    }

    /// Clears the separator of the first child (it must be empty).
    fn clear_first_sep(&mut self) {
        if self.level > 0 && !self.is_empty() && !self.child(0).2.is_empty() {
            let (p, c, _) = self.child(0);
            self.replace(0, &inner_entry(p, c, &[]));
        }
    }

    fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }

    fn append(&mut self, other: &Node) {
        let base = self.body.len() as u32;
        self.body.extend_from_slice(&other.body);
        self.offs.extend(other.offs.iter().map(|&o| o + base));
    }

    /// Items in the subtree (a leaf's own; the sum of an inner node's).
    fn total(&self) -> Option<u64> {
        if self.level == 0 {
            return Some(self.len() as u64);
        }
        (0..self.len()).try_fold(0u64, |acc, i| acc.checked_add(self.count(i)))
    }

    /// The node cut into pieces of about `target` body bytes each, whole
    /// entries each (a piece holds one entry when that entry is bigger).
    /// An inner piece gets at least two entries, so that every level of a
    /// tree at least halves the one below, however long its separators.
    fn chunk(self, target: usize) -> Vec<Node> {
        let min = if self.level > 0 { 2 } else { 1 };
        let most = (self.len() / min).max(1);
        let pieces = self.body.len().div_ceil(target.max(1)).clamp(1, most);
        let per = self.body.len().div_ceil(pieces).max(1);
        let mut out = Vec::with_capacity(pieces);
        let mut cur = Node::new(self.level);
        for i in 0..self.len() {
            if cur.len() >= min
                && self.len() - i >= min
                && cur.body.len() + (self.end(i) - self.start(i)) > per
            {
                out.push(std::mem::replace(&mut cur, Node::new(self.level)));
            }
            cur.offs.push(cur.body.len() as u32);
            cur.body
                .extend_from_slice(&self.body[self.start(i)..self.end(i)]);
        }
        if !cur.is_empty() || out.is_empty() {
            out.push(cur);
        }
        out
    }

    /// The least key in a leaf, or the separator that bounds an inner
    /// node's children from below.
    fn first_key(&self) -> &[u8] {
        if self.level == 0 {
            self.item(0).0
        } else {
            self.child(0).2
        }
    }

    /// Whether this inner node, read from the segment, still has the same
    /// entries but for their child pointers and counts.
    fn only_children_changed(&self) -> bool {
        let Some(o) = &self.origin else {
            return false;
        };
        self.level > 0
            && self.offs == o.offs
            && self.body.len() == o.body.len()
            && (0..self.len()).all(|i| {
                let (a, b) = (self.start(i) + 16, self.end(i));
                self.body[a..b] == o.body[a..b]
            })
    }

    /// Bytes of [`Node::payload`].
    fn payload_len(&self) -> u64 {
        P_TABLE + table_len(self.len()) + self.body.len() as u64
    }

    /// The node's payload as a block stores it (link word left 0).
    fn payload(&self) -> Vec<u8> {
        let table = table_len(self.len()) as usize;
        let mut out = Vec::with_capacity(P_TABLE as usize + table + self.body.len());
        out.extend_from_slice(&0u64.to_le_bytes());
        let kind = self.level as u64 | (NODE_MAGIC as u64) << 8 | (self.len() as u64) << 32;
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(self.body.len() as u64).to_le_bytes());
        for &o in &self.offs {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out.resize(P_TABLE as usize + table, 0);
        out.extend_from_slice(&self.body);
        out
    }
}

/// Reads and checks the node in block `blk`: it must be at `level` and
/// hold `count` items (what its parent says).
fn read_node(r: &Region, blk: u64, level: u8, count: u64) -> Result<Node> {
    let h = node_header(r, blk)?;
    if h.level != level {
        return bad();
    }
    let mut body = Vec::with_capacity(h.body_len as usize);
    r.read_bytes(h.body, h.body_len, &mut body)?;
    let mut node = Node::parse(level, body, h.n)?;
    if node.total() != Some(count) {
        return bad();
    }
    if level > 0 {
        node.origin = Some(Box::new(Origin {
            blk,
            body_at: h.body,
            body: node.body.clone(),
            offs: node.offs.clone(),
        }));
    }
    Ok(node)
}

/// Where a node block keeps its parts, checked against the block's size.
struct Layout {
    level: u8,
    n: usize,
    /// Offset of the entry table in the segment.
    table: u64,
    /// Offset of the body in the segment, and its length.
    body: u64,
    body_len: u64,
}

fn node_header(r: &Region, blk: u64) -> Result<Layout> {
    if blk == 0 || !r.is_ptr(blk) {
        return bad();
    }
    let (size, flags) = r.load_block_header(blk)?;
    let kind = r.load64(blk + 8 + P_KIND)?;
    let body_len = r.load64(blk + 8 + P_BODY_LEN)?;
    let level = kind as u8;
    let n = (kind >> 32) as usize;
    let table = table_len(n);
    if flags & 1 != 0
        || (kind >> 8) as u8 != NODE_MAGIC
        || level >= MAX_HEIGHT
        || table.saturating_add(body_len) > size.saturating_sub(8 + P_TABLE)
    {
        return bad();
    }
    Ok(Layout {
        level,
        n,
        table: blk + 8 + P_TABLE,
        body: blk + 8 + P_TABLE + table,
        body_len,
    })
}

/// A node read in place in the segment, one entry at a time: what a
/// search uses, so that it copies a few keys rather than whole nodes.
/// Every offset is checked before use (I1).
struct View<'r> {
    r: &'r Region,
    at: Layout,
}

impl<'r> View<'r> {
    /// The node in `blk`, which must be at `level` and hold `count` items.
    fn open(r: &'r Region, blk: u64, level: u8, count: u64) -> Result<View<'r>> {
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

    fn len(&self) -> usize {
        self.at.n
    }

    /// Entry `i`'s (start, end) in the body.
    fn span(&self, i: usize) -> Result<(u64, u64)> {
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

    fn entry(&self, i: usize) -> Result<Vec<u8>> {
        let (start, end) = self.span(i)?;
        let mut out = Vec::with_capacity((end - start) as usize);
        self.r
            .read_bytes(self.at.body + start, end - start, &mut out)?;
        Ok(out)
    }

    fn ptr(&self, i: usize) -> Result<u64> {
        let (start, end) = self.span(i)?;
        if end - start < 16 {
            return bad();
        }
        self.r.load64(self.at.body + start)
    }

    fn count(&self, i: usize) -> Result<u64> {
        let (start, end) = self.span(i)?;
        if end - start < 16 {
            return bad();
        }
        self.r.load64(self.at.body + start + 8)
    }

    /// Compares a leaf's key `i` with `key`, reading the entry into
    /// `scratch`.
    fn cmp_key(&self, i: usize, key: &[u8], scratch: &mut Vec<u8>) -> Result<std::cmp::Ordering> {
        let (start, end) = self.span(i)?;
        scratch.clear();
        self.r
            .read_bytes(self.at.body + start, end - start, scratch)?;
        let mut pos = 0;
        let (a, b) = read_bytes(scratch, &mut pos).ok_or(Error::BadValue)?;
        Ok(scratch[a..b].cmp(key))
    }

    /// Compares an inner node's separator `i` with `key`.
    fn cmp_sep(&self, i: usize, key: &[u8], scratch: &mut Vec<u8>) -> Result<std::cmp::Ordering> {
        let (start, end) = self.span(i)?;
        scratch.clear();
        self.r
            .read_bytes(self.at.body + start, end - start, scratch)?;
        let mut pos = 16;
        let (a, b) = read_bytes(scratch, &mut pos).ok_or(Error::BadValue)?;
        Ok(scratch[a..b].cmp(key))
    }

    /// A leaf's item `i`: (key, value).
    fn item(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
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

fn tree_level(r: &Region, blk: u64) -> Option<u8> {
    node_header(r, blk).ok().map(|h| h.level)
}

/// One step of a path from the root: the node (its pointer, and a copy
/// when it came from the segment) and the entry index taken in it.
struct Step {
    ptr: u64,
    copy: Option<Rc<Node>>,
    idx: usize,
}

/// A node as a read-only search sees it: in process memory (changed, or
/// read whole earlier in the command), or in place in the segment.
enum Src<'a> {
    Mem(&'a Node),
    Read(Rc<Node>),
    Shm(View<'a>),
}

impl Src<'_> {
    fn node(&self) -> Option<&Node> {
        match self {
            Src::Mem(n) => Some(n),
            Src::Read(n) => Some(n),
            Src::Shm(_) => None,
        }
    }

    fn len(&self) -> usize {
        match (self.node(), self) {
            (Some(n), _) => n.len(),
            (None, Src::Shm(v)) => v.len(),
            _ => 0,
        }
    }

    fn ptr(&self, i: usize) -> Result<u64> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.ptr(i)),
            (None, Src::Shm(v)) => v.ptr(i),
            _ => bad(),
        }
    }

    fn count(&self, i: usize) -> Result<u64> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.count(i)),
            (None, Src::Shm(v)) => v.count(i),
            _ => bad(),
        }
    }

    fn cmp_sep(&self, i: usize, key: &[u8], scratch: &mut Vec<u8>) -> Result<std::cmp::Ordering> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.child(i).2.cmp(key)),
            (None, Src::Shm(v)) => v.cmp_sep(i, key, scratch),
            _ => bad(),
        }
    }

    fn cmp_key(&self, i: usize, key: &[u8], scratch: &mut Vec<u8>) -> Result<std::cmp::Ordering> {
        match (self.node(), self) {
            (Some(n), _) => Ok(n.item(i).0.cmp(key)),
            (None, Src::Shm(v)) => v.cmp_key(i, key, scratch),
            _ => bad(),
        }
    }

    fn item(&self, i: usize) -> Result<(Vec<u8>, Vec<u8>)> {
        match (self.node(), self) {
            (Some(n), _) => {
                let (k, v) = n.item(i);
                Ok((k.to_vec(), v.to_vec()))
            }
            (None, Src::Shm(v)) => v.item(i),
            _ => bad(),
        }
    }
}

/// What a read-only search found: the rank of the position, and the item
/// there when the key matched (or the rank was in range).
struct Found {
    rank: u64,
    item: Option<(Vec<u8>, Vec<u8>)>,
}

/// A node as a search sees it: changed in process memory, or read from the
/// segment (shared with the tree's cache).
enum Loaded<'a> {
    Mem(&'a Node),
    Read(Rc<Node>),
}

impl Deref for Loaded<'_> {
    type Target = Node;

    fn deref(&self) -> &Node {
        match self {
            Loaded::Mem(n) => n,
            Loaded::Read(n) => n,
        }
    }
}

impl Loaded<'_> {
    fn into_copy(self) -> Option<Rc<Node>> {
        match self {
            Loaded::Mem(_) => None,
            Loaded::Read(n) => Some(n),
        }
    }
}

/// Where a search ended: the path, the rank of the leaf position, and
/// whether the key was there.
struct Path {
    steps: Vec<Step>,
    rank: u64,
    found: bool,
}

/// A tree being read or changed by one command.
pub struct Tree {
    sh: Arc<Shared>,
    keyed: bool,
    root: u64,
    height: u8,
    count: u64,
    mem: Vec<Node>,
    replaced: Vec<u64>,
    /// Nodes read from the segment during this command, by block: a
    /// command often seeks the same path more than once (ZADD reads the
    /// member's score, then moves it).
    cache: RefCell<HashMap<u64, Rc<Node>>>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("keyed", &self.keyed)
            .field("root", &self.root)
            .field("height", &self.height)
            .field("count", &self.count)
            .finish()
    }
}

impl Tree {
    /// The tree published at `root` (`height` levels, `count` items).
    pub(crate) fn open(
        sh: Arc<Shared>,
        keyed: bool,
        root: u64,
        height: u8,
        count: u64,
    ) -> Result<Tree> {
        if height > MAX_HEIGHT || (height == 0) != (root == 0) || (root == 0) != (count == 0) {
            return bad();
        }
        Ok(Tree {
            sh,
            keyed,
            root,
            height,
            count,
            mem: Vec::new(),
            replaced: Vec::new(),
            cache: RefCell::default(),
        })
    }

    /// A new tree holding `items` (keys ascending when keyed), built in
    /// process memory.
    pub(crate) fn build<'a>(
        sh: Arc<Shared>,
        keyed: bool,
        items: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Tree {
        let mut tree = Tree {
            sh,
            keyed,
            root: 0,
            height: 0,
            count: 0,
            mem: Vec::new(),
            replaced: Vec::new(),
            cache: RefCell::default(),
        };
        let mut all = Node::new(0);
        for (k, v) in items {
            all.offs.push(all.body.len() as u32);
            let e = leaf_entry(if keyed { k } else { &[] }, v);
            all.body.extend_from_slice(&e);
        }
        if all.is_empty() {
            return tree;
        }
        tree.count = all.len() as u64;
        // Each level: (node, count, least key, greatest key).
        let mut level: Vec<(Node, u64, Vec<u8>, Vec<u8>)> = all
            .chunk(NODE_FILL)
            .into_iter()
            .map(|n| {
                let (lo, hi) = match keyed {
                    true => (n.item(0).0.to_vec(), n.item(n.len() - 1).0.to_vec()),
                    false => (Vec::new(), Vec::new()),
                };
                let c = n.len() as u64;
                (n, c, lo, hi)
            })
            .collect();
        let mut height = 1u8;
        while level.len() > 1 {
            let mut parent = Node::new(height);
            let mut bounds = Vec::with_capacity(level.len());
            let mut prev_hi: Option<Vec<u8>> = None;
            for (node, count, lo, hi) in level {
                let sep = match &prev_hi {
                    Some(p) if keyed => separator(p, &lo),
                    _ => Vec::new(),
                };
                tree.mem.push(node);
                parent.offs.push(parent.body.len() as u32);
                let e = inner_entry(MEM | (tree.mem.len() - 1) as u64, count, &sep);
                parent.body.extend_from_slice(&e);
                bounds.push((count, lo, hi.clone()));
                prev_hi = Some(hi);
            }
            // Regroup the children under parents of about NODE_FILL bytes.
            let mut next = Vec::new();
            let mut b = bounds.into_iter();
            for mut p in parent.chunk(NODE_FILL) {
                let mut count = 0;
                let (mut lo, mut hi) = (Vec::new(), Vec::new());
                for i in 0..p.len() {
                    let (c, l, h) = b.next().unwrap_or_default();
                    if i == 0 {
                        lo = l;
                    }
                    hi = h;
                    count += c;
                }
                p.clear_first_sep();
                next.push((p, count, lo, hi));
            }
            level = next;
            height += 1;
        }
        let (root, _, _, _) = level.pop().unwrap_or_default();
        tree.mem.push(root);
        tree.root = MEM | (tree.mem.len() - 1) as u64;
        tree.height = height;
        tree
    }

    /// Items in the tree.
    pub(crate) fn len(&self) -> u64 {
        self.count
    }

    /// (root block, height) once committed.
    pub(crate) fn root(&self) -> (u64, u8) {
        (self.root, self.height)
    }

    /// The blocks this command's changes took out of the tree: the caller
    /// frees them once the new root is published.
    pub(crate) fn take_replaced(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.replaced)
    }

    /// Node `ptr` as this command already read it, if it still checks out
    /// at `level` with `count` items.
    fn cached(&self, ptr: u64, level: u8, count: u64) -> Option<Rc<Node>> {
        let cache = self.cache.borrow();
        let n = cache.get(&ptr)?;
        (n.level == level && n.total() == Some(count)).then(|| n.clone())
    }

    fn node(&self, ptr: u64, level: u8, count: u64) -> Result<Loaded<'_>> {
        if ptr & MEM != 0 {
            return match self.mem.get((ptr & !MEM) as usize) {
                Some(n) => Ok(Loaded::Mem(n)),
                None => bad(),
            };
        }
        if let Some(n) = self.cached(ptr, level, count) {
            return Ok(Loaded::Read(n));
        }
        let n = Rc::new(read_node(&self.sh.region, ptr, level, count)?);
        self.cache.borrow_mut().insert(ptr, n.clone());
        Ok(Loaded::Read(n))
    }

    /// Takes the segment node `ptr` out of the cache to change it.
    fn take_node(
        &mut self,
        ptr: u64,
        copy: Option<Rc<Node>>,
        level: u8,
        count: u64,
    ) -> Result<Node> {
        let rc = match copy.or_else(|| self.cache.get_mut().remove(&ptr)) {
            Some(rc) => rc,
            None => Rc::new(read_node(&self.sh.region, ptr, level, count)?),
        };
        self.cache.get_mut().remove(&ptr);
        Ok(Rc::try_unwrap(rc).unwrap_or_else(|rc| (*rc).clone()))
    }

    // ---------- searching ----------

    fn src(&self, ptr: u64, level: u8, count: u64) -> Result<Src<'_>> {
        if ptr & MEM != 0 {
            return match self.mem.get((ptr & !MEM) as usize) {
                Some(n) => Ok(Src::Mem(n)),
                None => bad(),
            };
        }
        if let Some(n) = self.cached(ptr, level, count) {
            return Ok(Src::Read(n));
        }
        Ok(Src::Shm(View::open(&self.sh.region, ptr, level, count)?))
    }

    /// Finds `key` without changing or copying nodes: its rank (where it is
    /// or would go) and its item when it is there.
    fn find_key(&self, key: &[u8]) -> Result<Found> {
        let mut rank = 0;
        if self.height == 0 {
            return Ok(Found { rank, item: None });
        }
        let (mut ptr, mut count) = (self.root, self.count);
        let mut scratch = Vec::with_capacity(64);
        for level in (0..self.height).rev() {
            let node = self.src(ptr, level, count)?;
            if level == 0 {
                let (mut lo, mut hi) = (0, node.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    match node.cmp_key(mid, key, &mut scratch)? {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Equal => {
                            return Ok(Found {
                                rank: rank + mid as u64,
                                item: Some(node.item(mid)?),
                            });
                        }
                        std::cmp::Ordering::Greater => hi = mid,
                    }
                }
                return Ok(Found {
                    rank: rank + lo as u64,
                    item: None,
                });
            }
            let (mut lo, mut hi) = (1, node.len());
            while lo < hi {
                let mid = (lo + hi) / 2;
                if node.cmp_sep(mid, key, &mut scratch)? != std::cmp::Ordering::Greater {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            let idx = lo - 1;
            for i in 0..idx {
                rank += node.count(i)?;
            }
            (ptr, count) = (node.ptr(idx)?, node.count(idx)?);
        }
        bad()
    }

    /// The item at `rank` (< len), without changing or copying nodes.
    fn find_rank(&self, rank: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if rank >= self.count {
            return Ok(None);
        }
        let (mut ptr, mut count, mut left) = (self.root, self.count, rank);
        for level in (0..self.height).rev() {
            let node = self.src(ptr, level, count)?;
            if level == 0 {
                return node.item(left as usize).map(Some);
            }
            let mut i = 0;
            loop {
                let c = node.count(i)?;
                if left < c || i + 1 >= node.len() {
                    (ptr, count) = (node.ptr(i)?, c);
                    break;
                }
                left -= c;
                i += 1;
            }
        }
        bad()
    }

    /// Descends to `key` (keyed trees): the leaf position where it is or
    /// would go, and its rank.
    fn seek_key(&self, key: &[u8]) -> Result<Path> {
        let mut path = Path {
            steps: Vec::with_capacity(self.height as usize),
            rank: 0,
            found: false,
        };
        if self.height == 0 {
            return Ok(path);
        }
        let (mut ptr, mut count) = (self.root, self.count);
        for level in (0..self.height).rev() {
            let node = self.node(ptr, level, count)?;
            let idx;
            if level == 0 {
                let mut lo = 0;
                let mut hi = node.len();
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    match node.item(mid).0.cmp(key) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Equal => {
                            path.found = true;
                            lo = mid;
                            break;
                        }
                        std::cmp::Ordering::Greater => hi = mid,
                    }
                }
                idx = lo;
                path.rank += idx as u64;
            } else {
                // The last child whose separator is <= key.
                let (mut lo, mut hi) = (1, node.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if node.child(mid).2 <= key {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                idx = lo - 1;
                path.rank += (0..idx).map(|i| node.count(i)).sum::<u64>();
            }
            let next = if level > 0 {
                let (p, c, _) = node.child(idx);
                Some((p, c))
            } else {
                None
            };
            let copy = node.into_copy();
            path.steps.push(Step { ptr, copy, idx });
            if let Some((p, c)) = next {
                (ptr, count) = (p, c);
            }
        }
        Ok(path)
    }

    /// Descends to rank `rank` (<= len; len is the position after the last).
    fn seek_rank(&self, rank: u64) -> Result<Path> {
        let mut path = Path {
            steps: Vec::with_capacity(self.height as usize),
            rank,
            found: rank < self.count,
        };
        if self.height == 0 {
            return Ok(path);
        }
        let (mut ptr, mut count, mut left) = (self.root, self.count, rank.min(self.count));
        for level in (0..self.height).rev() {
            let node = self.node(ptr, level, count)?;
            let idx;
            let mut next = None;
            if level == 0 {
                idx = (left as usize).min(node.len());
            } else {
                let mut i = 0;
                loop {
                    let (p, c) = (node.ptr(i), node.count(i));
                    if left < c || i + 1 == node.len() {
                        next = Some((p, c));
                        break;
                    }
                    left -= c;
                    i += 1;
                }
                idx = i;
            }
            let copy = node.into_copy();
            path.steps.push(Step { ptr, copy, idx });
            if let Some((p, c)) = next {
                (ptr, count) = (p, c);
            }
        }
        Ok(path)
    }

    fn leaf_item(&self, path: &Path) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(last) = path.steps.last() else {
            return Ok(None);
        };
        let node = match &last.copy {
            Some(n) => Loaded::Read(n.clone()),
            None => self.node(last.ptr, 0, 0)?,
        };
        if last.idx >= node.len() {
            return Ok(None);
        }
        let (k, v) = node.item(last.idx);
        Ok(Some((k.to_vec(), v.to_vec())))
    }

    /// The value under `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.find_key(key)?.item.map(|(_, v)| v))
    }

    /// The rank of `key`, if it is there.
    pub(crate) fn rank_of(&self, key: &[u8]) -> Result<Option<u64>> {
        let found = self.find_key(key)?;
        Ok(found.item.is_some().then_some(found.rank))
    }

    /// How many keys are below `key` (at or below it when `inclusive`).
    pub(crate) fn count_below(&self, key: &[u8], inclusive: bool) -> Result<u64> {
        let found = self.find_key(key)?;
        Ok(found.rank + u64::from(inclusive && found.item.is_some()))
    }

    /// The item at `rank`.
    pub(crate) fn nth(&self, rank: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.find_rank(rank)
    }

    /// Calls `f(key, value)` for the items with ranks in `lo..hi`, in order
    /// (backwards when `rev`), until it returns false.
    pub(crate) fn visit(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let hi = hi.min(self.count);
        if lo >= hi {
            return Ok(());
        }
        self.visit_node(self.root, self.height - 1, self.count, 0, lo, hi, rev, f)
            .map(|_| ())
    }

    #[allow(clippy::too_many_arguments)]
    fn visit_node(
        &self,
        ptr: u64,
        level: u8,
        count: u64,
        base: u64,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool> {
        let node = self.node(ptr, level, count)?;
        let n = node.len();
        if level == 0 {
            let from = lo.saturating_sub(base) as usize;
            let to = ((hi - base) as usize).min(n);
            let mut go = |i: usize| {
                let (k, v) = node.item(i);
                f(k, v)
            };
            if rev {
                for i in (from..to).rev() {
                    if !go(i) {
                        return Ok(false);
                    }
                }
            } else {
                for i in from..to {
                    if !go(i) {
                        return Ok(false);
                    }
                }
            }
            return Ok(true);
        }
        let mut starts = Vec::with_capacity(n);
        let mut at = base;
        for i in 0..n {
            starts.push(at);
            at += node.count(i);
        }
        let order: Box<dyn Iterator<Item = usize>> = if rev {
            Box::new((0..n).rev())
        } else {
            Box::new(0..n)
        };
        for i in order {
            let (p, c) = (node.ptr(i), node.count(i));
            let b = starts[i];
            if b + c <= lo || b >= hi {
                continue;
            }
            if !self.visit_node(p, level - 1, c, b, lo, hi, rev, f)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    // ---------- changing ----------

    /// Copies the nodes of `path` into process memory (those not there
    /// yet), relinking each parent to its copy. Returns their indexes in
    /// `mem`, root first.
    fn materialize(&mut self, path: Path) -> Result<Vec<usize>> {
        let mut out: Vec<usize> = Vec::with_capacity(path.steps.len());
        let mut parent_idx = 0usize;
        for step in path.steps {
            let idx = if step.ptr & MEM != 0 {
                (step.ptr & !MEM) as usize
            } else {
                // Every node a search read from the segment came with its copy.
                let copy = step.copy.ok_or(Error::BadValue)?;
                let node = self.take_node(step.ptr, Some(copy), 0, 0)?;
                self.mem.push(node);
                self.replaced.push(step.ptr);
                self.mem.len() - 1
            };
            match out.last() {
                None => self.root = MEM | idx as u64,
                Some(&p) => {
                    let c = self.mem[p].count(parent_idx);
                    self.mem[p].set_child(parent_idx, MEM | idx as u64, c);
                }
            }
            parent_idx = step.idx;
            out.push(idx);
        }
        Ok(out)
    }

    /// Makes child `ci` of mem node `parent` a mem node; returns its index.
    fn child_mut(&mut self, parent: usize, ci: usize) -> Result<usize> {
        let (ptr, count, _) = self.mem[parent].child(ci);
        if ptr & MEM != 0 {
            return Ok((ptr & !MEM) as usize);
        }
        let level = self.mem[parent].level - 1;
        let node = self.take_node(ptr, None, level, count)?;
        self.mem.push(node);
        self.replaced.push(ptr);
        let idx = self.mem.len() - 1;
        self.mem[parent].set_child(ci, MEM | idx as u64, count);
        Ok(idx)
    }

    /// Adds `delta` to the counts along a materialized path.
    fn adjust_counts(&mut self, nodes: &[usize], idxs: &[usize], delta: i64) {
        for d in 0..nodes.len().saturating_sub(1) {
            let (p, ci) = (nodes[d], idxs[d]);
            let (ptr, c) = (self.mem[p].ptr(ci), self.mem[p].count(ci));
            self.mem[p].set_child(ci, ptr, c.wrapping_add(delta as u64));
        }
        self.count = self.count.wrapping_add(delta as u64);
    }

    fn edit(&mut self, path: Path) -> Result<(Vec<usize>, Vec<usize>)> {
        let idxs: Vec<usize> = path.steps.iter().map(|s| s.idx).collect();
        let nodes = self.materialize(path)?;
        Ok((nodes, idxs))
    }

    /// Puts `key` -> `val` in a keyed tree; returns the old value.
    pub(crate) fn upsert(&mut self, key: &[u8], val: &[u8]) -> Result<Option<Vec<u8>>> {
        let path = self.seek_key(key)?;
        let found = path.found;
        let old = if found {
            self.leaf_item(&path)?.map(|(_, v)| v)
        } else {
            None
        };
        if old.as_deref() == Some(val) {
            return Ok(old);
        }
        self.put(path, key, val, found)?;
        Ok(old)
    }

    /// Removes `key` from a keyed tree; returns its value.
    pub(crate) fn remove_key(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let path = self.seek_key(key)?;
        if !path.found {
            return Ok(None);
        }
        let old = self.leaf_item(&path)?.map(|(_, v)| v);
        self.take(path)?;
        Ok(old)
    }

    /// Inserts `val` at position `rank` (<= len) of a positional tree.
    pub(crate) fn insert_at(&mut self, rank: u64, val: &[u8]) -> Result<()> {
        let path = self.seek_rank(rank.min(self.count))?;
        self.put(path, &[], val, false)
    }

    /// Replaces the value at `rank`; false when out of range.
    pub(crate) fn set_at(&mut self, rank: u64, val: &[u8]) -> Result<bool> {
        if rank >= self.count {
            return Ok(false);
        }
        let path = self.seek_rank(rank)?;
        let key = self.leaf_item(&path)?.map(|(k, _)| k).unwrap_or_default();
        self.put(path, &key, val, true)?;
        Ok(true)
    }

    /// Removes and returns the item at `rank`.
    pub(crate) fn remove_at(&mut self, rank: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if rank >= self.count {
            return Ok(None);
        }
        let path = self.seek_rank(rank)?;
        let item = self.leaf_item(&path)?;
        self.take(path)?;
        Ok(item)
    }

    fn put(&mut self, path: Path, key: &[u8], val: &[u8], replace: bool) -> Result<()> {
        let entry = leaf_entry(key, val);
        if self.height == 0 {
            let mut leaf = Node::new(0);
            leaf.insert(0, &entry);
            self.mem.push(leaf);
            self.root = MEM | (self.mem.len() - 1) as u64;
            self.height = 1;
            self.count = 1;
            return Ok(());
        }
        let (nodes, idxs) = self.edit(path)?;
        let leaf = *nodes.last().ok_or(Error::BadValue)?;
        let at = *idxs.last().ok_or(Error::BadValue)?;
        if replace {
            self.mem[leaf].replace(at, &entry);
        } else {
            self.mem[leaf].insert(at, &entry);
            self.adjust_counts(&nodes, &idxs, 1);
        }
        // A split moves entries between the path's nodes, so the path no
        // longer says where the leaf is; a split node is not small anyway.
        if self.fix_overflow(&nodes, &idxs) {
            return Ok(());
        }
        self.fix_underflow(&nodes, &idxs)
    }

    fn take(&mut self, path: Path) -> Result<()> {
        let (nodes, idxs) = self.edit(path)?;
        let leaf = *nodes.last().ok_or(Error::BadValue)?;
        let at = *idxs.last().ok_or(Error::BadValue)?;
        self.mem[leaf].remove(at);
        self.adjust_counts(&nodes, &idxs, -1);
        self.fix_underflow(&nodes, &idxs)
    }

    /// Splits the nodes of a path that grew past `NODE_MAX`, leaf first,
    /// adding a root above a split root.
    fn fix_overflow(&mut self, nodes: &[usize], idxs: &[usize]) -> bool {
        let mut split = false;
        for d in (0..nodes.len()).rev() {
            let me = nodes[d];
            let min = if self.mem[me].level > 0 { 4 } else { 2 };
            if self.mem[me].body.len() <= NODE_MAX || self.mem[me].len() < min {
                continue;
            }
            let node = std::mem::take(&mut self.mem[me]);
            let level = node.level;
            let mut pieces = node.chunk(NODE_FILL);
            if pieces.len() < 2 {
                self.mem[me] = pieces.pop().unwrap_or_default();
                continue;
            }
            split = true;
            let mut entries = Vec::with_capacity(pieces.len());
            let mut prev_last: Option<Vec<u8>> = None;
            for (i, mut piece) in pieces.drain(..).enumerate() {
                let sep = if !self.keyed || i == 0 {
                    Vec::new()
                } else if level == 0 {
                    separator(prev_last.as_deref().unwrap_or(&[]), piece.first_key())
                } else {
                    piece.first_key().to_vec()
                };
                if self.keyed && level == 0 {
                    prev_last = Some(piece.item(piece.len() - 1).0.to_vec());
                }
                piece.clear_first_sep();
                let count = piece.total().unwrap_or(0);
                let idx = if i == 0 {
                    self.mem[me] = piece;
                    me
                } else {
                    self.mem.push(piece);
                    self.mem.len() - 1
                };
                entries.push(inner_entry(MEM | idx as u64, count, &sep));
            }
            if d == 0 {
                let mut root = Node::new(level + 1);
                for e in &entries {
                    root.insert(root.len(), e);
                }
                self.mem.push(root);
                self.root = MEM | (self.mem.len() - 1) as u64;
                self.height += 1;
            } else {
                let (p, ci) = (nodes[d - 1], idxs[d - 1]);
                // The first piece keeps the old separator.
                let old_sep = self.mem[p].child(ci).2.to_vec();
                let (ptr, count, _) = {
                    let c = &entries[0];
                    (word(c, 0), word(c, 8), ())
                };
                self.mem[p].replace(ci, &inner_entry(ptr, count, &old_sep));
                for (k, e) in entries.iter().enumerate().skip(1) {
                    self.mem[p].insert(ci + k, e);
                }
            }
        }
        split
    }

    /// Removes emptied nodes and merges small ones into a neighbour, leaf
    /// first; then shortens the tree while its root has one child.
    fn fix_underflow(&mut self, nodes: &[usize], idxs: &[usize]) -> Result<()> {
        for d in (1..nodes.len()).rev() {
            let (me, p, ci) = (nodes[d], nodes[d - 1], idxs[d - 1]);
            if ci >= self.mem[p].len() {
                continue;
            }
            if self.mem[me].is_empty() {
                self.mem[p].remove(ci);
                if ci == 0 {
                    self.mem[p].clear_first_sep();
                }
                continue;
            }
            if self.mem[me].body.len() >= NODE_MIN || self.mem[p].len() < 2 {
                continue;
            }
            let (l, r) = if ci + 1 < self.mem[p].len() {
                (ci, ci + 1)
            } else {
                (ci - 1, ci)
            };
            let li = self.child_mut(p, l)?;
            let ri = self.child_mut(p, r)?;
            if self.mem[li].body.len() + self.mem[ri].body.len() > NODE_FILL {
                continue;
            }
            let mut right = std::mem::take(&mut self.mem[ri]);
            if right.level > 0 && self.keyed {
                // The separator between the two moves down onto the right
                // node's first child.
                let sep = self.mem[p].child(r).2.to_vec();
                let (ptr, c, _) = right.child(0);
                right.replace(0, &inner_entry(ptr, c, &sep));
            }
            self.mem[li].append(&right);
            let (lptr, lc, _) = self.mem[p].child(l);
            let rc = self.mem[p].count(r);
            self.mem[p].set_child(l, lptr, lc + rc);
            self.mem[p].remove(r);
        }
        self.shorten()
    }

    fn shorten(&mut self) -> Result<()> {
        loop {
            if self.height == 0 {
                return Ok(());
            }
            let root = self.node(self.root, self.height - 1, self.count)?;
            if root.is_empty() {
                self.root = 0;
                self.height = 0;
                self.count = 0;
                return Ok(());
            }
            if root.level == 0 || root.len() > 1 {
                return Ok(());
            }
            let child = root.ptr(0);
            if self.root & MEM == 0 {
                self.replaced.push(self.root);
            }
            self.root = child;
            self.height -= 1;
        }
    }

    /// Removes the items with ranks in `lo..hi`; returns how many.
    pub(crate) fn remove_range(&mut self, lo: u64, hi: u64) -> Result<u64> {
        let hi = hi.min(self.count);
        if lo >= hi {
            return Ok(0);
        }
        let path = self.seek_rank(0)?;
        let root = self.materialize(Path {
            steps: path.steps.into_iter().take(1).collect(),
            rank: 0,
            found: false,
        })?[0];
        self.remove_range_in(root, lo, hi)?;
        self.count -= hi - lo;
        self.shorten()?;
        Ok(hi - lo)
    }

    fn remove_range_in(&mut self, me: usize, lo: u64, hi: u64) -> Result<()> {
        if self.mem[me].level == 0 {
            let n = self.mem[me].len();
            self.mem[me].remove_span((lo as usize).min(n), (hi as usize).min(n));
            return Ok(());
        }
        let mut base = 0u64;
        let mut spans = Vec::new();
        for i in 0..self.mem[me].len() {
            let c = self.mem[me].count(i);
            spans.push((base, c));
            base += c;
        }
        for i in (0..spans.len()).rev() {
            let (b, c) = spans[i];
            if b + c <= lo || b >= hi {
                continue;
            }
            if lo <= b && b + c <= hi {
                let (ptr, count, _) = self.mem[me].child(i);
                let level = self.mem[me].level - 1;
                self.drop_subtree(ptr, level, count)?;
                self.mem[me].remove(i);
                continue;
            }
            let ci = self.child_mut(me, i)?;
            self.remove_range_in(ci, lo.saturating_sub(b), (hi - b).min(c))?;
            let removed = (hi.min(b + c)) - lo.max(b);
            let ptr = self.mem[me].ptr(i);
            if self.mem[ci].is_empty() {
                self.mem[me].remove(i);
            } else {
                self.mem[me].set_child(i, ptr, c - removed);
            }
        }
        self.mem[me].clear_first_sep();
        Ok(())
    }

    /// Lists every segment block of a subtree leaving the tree.
    fn drop_subtree(&mut self, ptr: u64, level: u8, count: u64) -> Result<()> {
        let node = if ptr & MEM != 0 {
            std::mem::take(&mut self.mem[(ptr & !MEM) as usize])
        } else {
            self.replaced.push(ptr);
            if level == 0 {
                self.cache.get_mut().remove(&ptr);
                return Ok(());
            }
            self.take_node(ptr, None, level, count)?
        };
        if node.level > 0 {
            for i in 0..node.len() {
                let (p, c, _) = node.child(i);
                self.drop_subtree(p, level - 1, c)?;
            }
        }
        Ok(())
    }

    /// Writes every node changed in memory into a new block: `alloc(sizes)`
    /// allocates the blocks (payload sizes, children before parents),
    /// `write(block, payload)` fills one. An inner node whose entries
    /// changed only in child pointers and counts keeps its block: the
    /// returned words are to be written, logged, in the transaction that
    /// publishes the tree. Afterwards the tree names only blocks.
    pub(crate) fn commit(
        &mut self,
        alloc: &mut dyn FnMut(&[u64]) -> Result<Vec<u64>>,
        write: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<InPlace> {
        let mut words = InPlace::new();
        if self.root & MEM != 0 {
            let mut order = Vec::new();
            self.post_order((self.root & !MEM) as usize, &mut order);
            let mut in_place: Vec<bool> = order
                .iter()
                .map(|&i| self.mem[i].only_children_changed())
                .collect();
            let budget: usize = order
                .iter()
                .zip(&in_place)
                .filter(|(_, &keep)| keep)
                .map(|(&i, _)| 2 * self.mem[i].len())
                .sum();
            if budget > IN_PLACE_WORDS {
                in_place.iter_mut().for_each(|k| *k = false);
            }
            let sizes: Vec<u64> = order
                .iter()
                .zip(&in_place)
                .filter(|(_, &keep)| !keep)
                .map(|(&i, _)| self.mem[i].payload_len())
                .collect();
            let mut blocks = alloc(&sizes)?.into_iter();
            if blocks.len() != sizes.len() {
                return bad();
            }
            let mut block_of = vec![0u64; self.mem.len()];
            let mut kept = Vec::new();
            for (&i, &keep) in order.iter().zip(&in_place) {
                block_of[i] = match (&self.mem[i].origin, keep) {
                    (Some(o), true) => {
                        kept.push(o.blk);
                        o.blk
                    }
                    _ => blocks.next().ok_or(Error::BadValue)?,
                };
            }
            for (&i, &keep) in order.iter().zip(&in_place) {
                let mut node = std::mem::take(&mut self.mem[i]);
                if node.level > 0 {
                    for c in 0..node.len() {
                        let (ptr, count) = (node.ptr(c), node.count(c));
                        if ptr & MEM != 0 {
                            node.set_child(c, block_of[(ptr & !MEM) as usize], count);
                        }
                    }
                }
                match (&node.origin, keep) {
                    (Some(o), true) => {
                        for c in 0..node.len() {
                            let at = node.start(c);
                            for w in [at, at + 8] {
                                let new = word(&node.body, w);
                                if new != word(&o.body, w) {
                                    words.push((o.body_at + w as u64, new));
                                }
                            }
                        }
                    }
                    _ => write(block_of[i], &node.payload())?,
                }
            }
            // A node changed in place stays in the tree.
            self.replaced.retain(|b| !kept.contains(b));
            self.root = block_of[(self.root & !MEM) as usize];
        }
        self.mem.clear();
        self.cache.get_mut().clear();
        Ok(words)
    }

    /// The mem nodes under mem node `idx`, children before parents.
    fn post_order(&self, idx: usize, out: &mut Vec<usize>) {
        let node = &self.mem[idx];
        if node.level > 0 {
            for c in 0..node.len() {
                let ptr = node.ptr(c);
                if ptr & MEM != 0 {
                    self.post_order((ptr & !MEM) as usize, out);
                }
            }
        }
        out.push(idx);
    }

    /// Every item in order, as owned pairs.
    pub(crate) fn items(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::with_capacity(self.count as usize);
        self.visit(0, self.count, false, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }
}
