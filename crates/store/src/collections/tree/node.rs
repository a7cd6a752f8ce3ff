//! A node's format: entries, their offset table, the node block's header,
//! and a node copied into process memory to be read or changed.

use super::*;

/// Body bytes past which a node is split.
pub(crate) const NODE_MAX: usize = 1024;
/// Body bytes under which a node is merged into a neighbour.
pub(super) const NODE_MIN: usize = NODE_MAX / 4;
/// How full a split or a bulk build leaves each node, so that the next
/// inserts do not split it again at once.
pub(super) const NODE_FILL: usize = NODE_MAX * 3 / 4;
/// Deepest tree accepted from the segment (a billion items need 6 levels).
pub(crate) const MAX_HEIGHT: u8 = 24;

/// Offsets in a node block's payload (after the block's header word).
/// `P_LINK` chains the block on one of its context's lists while it is new,
/// replaced or dropped (it means nothing while the node is in a tree).
pub(crate) const P_LINK: u64 = 0;
/// Level (0 = leaf) u8, magic u8, room u16 (leaves only, else 0: see
/// [`ROOM_REVERSED`]), entry count u32.
pub(super) const P_KIND: u64 = 8;
/// In a leaf's room field: its entries are stored last first (a list's
/// head leaf, so that LPUSH appends to it in place).
pub(super) const ROOM_REVERSED: u16 = 1 << 15;
/// In a leaf's room field: the slots its offset table has room for (0: as
/// many as it has entries, the body right after them).
pub(super) const ROOM_SLOTS: u16 = 0x0fff;
/// Body length u32, 0 u32.
pub(super) const P_BODY_LEN: u64 = 16;
/// The entry offset table: one u32 per entry (its start in the body),
/// padded to a whole word; the body follows. A search finds single
/// entries through it without parsing the node whole.
pub(super) const P_TABLE: u64 = 24;

/// Bytes of the offset table of a node of `n` entries.
pub(super) fn table_len(n: usize) -> u64 {
    (4 * n as u64).next_multiple_of(8)
}
pub(super) const NODE_MAGIC: u8 = 0xB7;

/// Marks a child pointer that names a node in `Tree::mem`, not a block.
pub(super) const MEM: u64 = 1 << 63;

pub(super) fn bad<T>() -> Result<T> {
    Err(Error::BadValue)
}

pub(super) fn read_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
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
pub(super) fn read_bytes(b: &[u8], pos: &mut usize) -> Option<(usize, usize)> {
    let len = usize::try_from(read_varint(b, pos)?).ok()?;
    let start = *pos;
    let end = start.checked_add(len).filter(|&e| e <= b.len())?;
    *pos = end;
    Some((start, end))
}

/// The end of the leaf entry at `pos` when its key and value lengths are
/// one byte each and it fits in `b`; None otherwise (the caller then
/// decodes it the general way, which also rejects what does not fit).
fn short_leaf_entry(b: &[u8], pos: usize) -> Option<usize> {
    let klen = *b.get(pos)?;
    if klen >= 0x80 {
        return None;
    }
    let vpos = pos + 1 + klen as usize;
    let vlen = *b.get(vpos)?;
    if vlen >= 0x80 {
        return None;
    }
    let end = vpos + 1 + vlen as usize;
    (end <= b.len()).then_some(end)
}

pub(super) fn word(b: &[u8], at: usize) -> u64 {
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
pub(super) fn inner_entry(ptr: u64, count: u64, sep: &[u8]) -> Vec<u8> {
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
pub(super) fn separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

/// One node, decoded: its entries stay encoded in `body`, `offs` says where
/// each starts. Built either from a checked block or by this module.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    pub(super) level: u8,
    pub(super) body: Vec<u8>,
    pub(super) offs: Vec<u32>,
    /// For an inner node read from the segment: where it came from.
    pub(super) origin: Option<Origin>,
    /// Whether an entry was added, removed or replaced since the node was
    /// read (a child pointer or count set in place does not count).
    pub(super) reshaped: bool,
    /// For an inner node read from the segment: the children whose pointer
    /// or count was set, so that a commit in place visits only those.
    pub(super) touched: Vec<u32>,
    /// For a list's end leaf: write it with spare room for pushes in place
    /// (table slots and body bytes past its end), entries last first when
    /// `Some(true)` (the head leaf, which LPUSH appends to).
    pub(super) room: Option<bool>,
}

/// An inner node's block, so that a commit of a node whose entries changed
/// only in child pointers and counts changes those words in place (logged,
/// in the publish transaction) instead of copying the node. The old words
/// are read back from the block, which the bucket lock keeps as it was.
#[derive(Clone, Copy, Debug)]
pub(super) struct Origin {
    pub(super) blk: u64,
    /// Offset of the body in the segment.
    pub(super) body_at: u64,
}

/// Logged word writes that change published inner nodes in place.
pub(crate) type InPlace = Vec<(u64, u64)>;

/// At most this many in-place words per commit (the undo log is bounded);
/// a commit that would need more copies every changed node.
pub(super) const IN_PLACE_WORDS: usize = 96;

impl Node {
    pub(super) fn new(level: u8) -> Node {
        Node {
            level,
            ..Node::default()
        }
    }

    /// Checks an encoded body of `n` entries and indexes it.
    pub(super) fn parse(level: u8, body: Vec<u8>, n: usize) -> Result<Node> {
        if n > body.len() {
            return bad();
        }
        let mut offs = Vec::with_capacity(n);
        let mut pos = 0usize;
        for _ in 0..n {
            offs.push(pos as u32);
            if level == 0 {
                // Most keys and values are under 128 bytes: one length
                // byte each, checked here without the general decoder.
                if let Some(next) = short_leaf_entry(&body, pos) {
                    pos = next;
                    continue;
                }
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
            reshaped: false,
            touched: Vec::new(),
            room: None,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.offs.len()
    }

    pub(super) fn start(&self, i: usize) -> usize {
        self.offs[i] as usize
    }

    pub(super) fn end(&self, i: usize) -> usize {
        self.offs
            .get(i + 1)
            .map_or(self.body.len(), |&o| o as usize)
    }

    /// A leaf's item `i`: (key, value).
    pub(super) fn item(&self, i: usize) -> (&[u8], &[u8]) {
        let mut pos = self.start(i);
        let k = read_bytes(&self.body, &mut pos).unwrap_or((0, 0));
        let v = read_bytes(&self.body, &mut pos).unwrap_or((0, 0));
        (&self.body[k.0..k.1], &self.body[v.0..v.1])
    }

    /// An inner node's child `i`: (pointer, count, separator).
    pub(super) fn child(&self, i: usize) -> (u64, u64, &[u8]) {
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
    pub(super) fn ptr(&self, i: usize) -> u64 {
        word(&self.body, self.start(i))
    }

    /// The item count under an inner node's child `i`.
    pub(super) fn count(&self, i: usize) -> u64 {
        word(&self.body, self.start(i) + 8)
    }

    pub(super) fn set_child(&mut self, i: usize, ptr: u64, count: u64) {
        if self.origin.is_some() && !self.touched.contains(&(i as u32)) {
            self.touched.push(i as u32);
        }
        let at = self.start(i);
        self.body[at..at + 8].copy_from_slice(&ptr.to_le_bytes());
        self.body[at + 8..at + 16].copy_from_slice(&count.to_le_bytes());
    }

    pub(super) fn splice(&mut self, i: usize, remove: usize, bytes: &[u8]) {
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
        self.reshaped = true;
        self.body.splice(from..to, bytes.iter().copied());
        // The offsets after the span move by `delta`, in place: no vector
        // per edit.
        let tail = (i + remove).min(self.len());
        for o in &mut self.offs[tail..] {
            *o = (*o as i64 + delta) as u32;
        }
        let first = (!bytes.is_empty()).then_some(from as u32);
        self.offs.splice(i.min(self.len())..tail, first);
    }

    pub(super) fn insert(&mut self, i: usize, entry: &[u8]) {
        self.splice(i, 0, entry);
    }

    pub(super) fn remove(&mut self, i: usize) {
        self.splice(i, 1, &[]);
    }

    pub(super) fn replace(&mut self, i: usize, entry: &[u8]) {
        self.splice(i, 1, entry);
    }

    /// Removes entries `from..to`.
    pub(super) fn remove_span(&mut self, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let (a, b) = (self.start(from), self.end(to - 1));
        let delta = (b - a) as u32;
        self.reshaped = true;
        self.body.drain(a..b);
        let tail: Vec<u32> = self.offs[to..].iter().map(|&o| o - delta).collect();
        self.offs.truncate(from);
        self.offs.extend(tail);
    }

    /// Clears the separator of the first child (it must be empty).
    pub(super) fn clear_first_sep(&mut self) {
        if self.level > 0 && !self.is_empty() && !self.child(0).2.is_empty() {
            let (p, c, _) = self.child(0);
            self.replace(0, &inner_entry(p, c, &[]));
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }

    pub(super) fn append(&mut self, other: &Node) {
        let base = self.body.len() as u32;
        self.reshaped = true;
        self.body.extend_from_slice(&other.body);
        self.offs.extend(other.offs.iter().map(|&o| o + base));
    }

    /// Items in the subtree (a leaf's own; the sum of an inner node's).
    pub(super) fn total(&self) -> Option<u64> {
        if self.level == 0 {
            return Some(self.len() as u64);
        }
        (0..self.len()).try_fold(0u64, |acc, i| acc.checked_add(self.count(i)))
    }

    /// The node cut into pieces of about `target` body bytes each, whole
    /// entries each (a piece holds one entry when that entry is bigger).
    /// An inner piece gets at least two entries, so that every level of a
    /// tree at least halves the one below, however long its separators.
    pub(super) fn chunk(self, target: usize) -> Vec<Node> {
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
    pub(super) fn first_key(&self) -> &[u8] {
        if self.level == 0 {
            self.item(0).0
        } else {
            self.child(0).2
        }
    }

    /// How many of this node's entries may point at a node in process
    /// memory: see [`mem_child_slot`](Self::mem_child_slot).
    pub(super) fn mem_child_slots(&self) -> usize {
        match (self.level, self.only_children_changed()) {
            (0, _) => 0,
            (_, true) => self.touched.len(),
            (_, false) => self.len(),
        }
    }

    /// The `k`th entry that may point at a node in process memory. A node
    /// read from the segment and not reshaped links to one only through
    /// [`set_child`](Self::set_child), which lists it in `touched`: a
    /// commit visits those, not every entry of every node on the path.
    pub(super) fn mem_child_slot(&self, k: usize) -> usize {
        if self.only_children_changed() {
            self.touched[k] as usize
        } else {
            k
        }
    }

    /// Whether this inner node, read from the segment, still has the same
    /// entries but for their child pointers and counts.
    pub(super) fn only_children_changed(&self) -> bool {
        self.origin.is_some() && self.level > 0 && !self.reshaped
    }

    /// The table slots a leaf written with room gets: enough for entries
    /// of its average size to fill [`NODE_MAX`] body bytes.
    fn room_slots(&self) -> usize {
        let avg = (self.body.len() / self.len().max(1)).max(2);
        (NODE_MAX / avg + 1).clamp(self.len(), ROOM_SLOTS as usize)
    }

    /// Whether the node is written with room: a leaf small enough, whose
    /// table the room field can describe.
    fn with_room(&self) -> Option<bool> {
        self.room
            .filter(|_| self.level == 0 && self.body.len() <= NODE_MAX)
            .filter(|_| self.len() < ROOM_SLOTS as usize)
    }

    /// Bytes of the block's payload: [`Node::payload`], and the room.
    pub(super) fn payload_len(&self) -> u64 {
        match self.with_room() {
            Some(_) => P_TABLE + table_len(self.room_slots()) + NODE_MAX as u64,
            None => P_TABLE + table_len(self.len()) + self.body.len() as u64,
        }
    }

    /// The node's payload as a block stores it (link word left 0), up to
    /// the end of its body (a block with room has more past it).
    pub(super) fn payload(&self) -> Vec<u8> {
        let reversed = self.with_room();
        let slots = match reversed {
            Some(_) => self.room_slots(),
            None => self.len(),
        };
        let room = match reversed {
            Some(rev) => slots as u64 | if rev { ROOM_REVERSED as u64 } else { 0 },
            None => 0,
        };
        let table = table_len(slots) as usize;
        let mut out = Vec::with_capacity(P_TABLE as usize + table + self.body.len());
        out.extend_from_slice(&0u64.to_le_bytes());
        let kind =
            self.level as u64 | (NODE_MAGIC as u64) << 8 | room << 16 | (self.len() as u64) << 32;
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(self.body.len() as u64).to_le_bytes());
        if reversed == Some(true) {
            let mut at = 0u32;
            for i in (0..self.len()).rev() {
                out.extend_from_slice(&at.to_le_bytes());
                at += (self.end(i) - self.start(i)) as u32;
            }
            out.resize(P_TABLE as usize + table, 0);
            for i in (0..self.len()).rev() {
                out.extend_from_slice(&self.body[self.start(i)..self.end(i)]);
            }
            return out;
        }
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
pub(super) fn read_node(r: &Region, blk: u64, level: u8, count: u64) -> Result<Node> {
    let h = node_header(r, blk)?;
    if h.level != level {
        return bad();
    }
    let mut node = parse_block(r, &h)?;
    if node.total() != Some(count) {
        return bad();
    }
    if h.slots > h.n || h.reversed {
        // Written with room: a copy keeps it, and its orientation.
        node.room = Some(h.reversed);
    }
    if level > 0 {
        node.origin = Some(Origin {
            blk,
            body_at: h.body,
        });
    }
    Ok(node)
}

/// The node whose header is `h`, checked and in logical order (a leaf
/// stored last first is turned around).
pub(super) fn parse_block(r: &Region, h: &Layout) -> Result<Node> {
    let mut body = Vec::with_capacity(h.body_len as usize);
    r.read_bytes(h.body, h.body_len, &mut body)?;
    let node = Node::parse(h.level, body, h.n)?;
    if !h.reversed {
        return Ok(node);
    }
    let mut out = Node::new(h.level);
    out.body.reserve(node.body.len());
    out.offs.reserve(node.len());
    for i in (0..node.len()).rev() {
        out.offs.push(out.body.len() as u32);
        out.body
            .extend_from_slice(&node.body[node.start(i)..node.end(i)]);
    }
    Ok(out)
}

/// Where a node block keeps its parts, checked against the block's size.
pub(super) struct Layout {
    pub(super) level: u8,
    pub(super) n: usize,
    /// Table slots the block has room for (at least `n`).
    pub(super) slots: usize,
    /// A leaf whose entries are stored last first.
    pub(super) reversed: bool,
    /// Offset of the entry table in the segment.
    pub(super) table: u64,
    /// Offset of the body in the segment, and its length.
    pub(super) body: u64,
    pub(super) body_len: u64,
    /// Offset of the block's end in the segment (its room ends there).
    pub(super) end: u64,
    /// The kind and body-length words as read (a push in place sets them).
    pub(super) kind: u64,
    pub(super) len_word: u64,
}

pub(super) fn node_header(r: &Region, blk: u64) -> Result<Layout> {
    if blk == 0 || !r.is_ptr(blk) {
        return bad();
    }
    let (size, flags) = r.load_block_header(blk)?;
    let kind = r.load64(blk + 8 + P_KIND)?;
    let len_word = r.load64(blk + 8 + P_BODY_LEN)?;
    let body_len = len_word & u64::from(u32::MAX);
    let level = kind as u8;
    let n = (kind >> 32) as usize;
    let room = (kind >> 16) as u16;
    let slots = match (room & ROOM_SLOTS) as usize {
        0 => n,
        s => s,
    };
    let table = table_len(slots);
    if flags & 1 != 0
        || (kind >> 8) as u8 != NODE_MAGIC
        || level >= MAX_HEIGHT
        || (level > 0 && room != 0)
        || room & !(ROOM_SLOTS | ROOM_REVERSED) != 0
        || slots < n
        || len_word >> 32 != 0
        || table.saturating_add(body_len) > size.saturating_sub(8 + P_TABLE)
    {
        return bad();
    }
    Ok(Layout {
        level,
        n,
        slots,
        reversed: room & ROOM_REVERSED != 0,
        table: blk + 8 + P_TABLE,
        body: blk + 8 + P_TABLE + table,
        body_len,
        end: blk + size,
        kind,
        len_word,
    })
}
