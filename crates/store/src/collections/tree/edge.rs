//! Pushes at either end of a positional tree (a list).
//!
//! A list's end leaves are written with room: spare table slots and body
//! bytes past their published end, the head leaf's entries stored last
//! first, so that a push at either end is an append to its leaf. A push
//! that fits goes in place ([`Tree::edge`], [`Tree::grow`]): its entry and
//! table slot are written past the published end, where nothing reads, and
//! one transaction sets the leaf's entry count and body length, the counts
//! on the path and the entry's count (each word logged, I5): no node is
//! copied, allocated or freed. A push that does not fit starts a new end
//! leaf beside the full one, which is left as it is. A pop at the end a
//! leaf stores last (the tail of a leaf in order, the head of one stored
//! last first) goes in place the same way, unless it would empty the leaf:
//! the words move the published end back.

use super::*;

/// Pushes waiting to go in place into one end leaf of a published tree.
#[derive(Clone, Debug)]
pub(crate) struct Edge {
    tail: bool,
    leaf: u64,
    n: usize,
    slots: usize,
    table: u64,
    body: u64,
    body_len: u64,
    /// Body bytes the leaf may hold (its room ends there).
    body_cap: u64,
    kind: u64,
    len_word: u64,
    /// The count words to raise by the pushes: the path's inner nodes and
    /// the entry's.
    counts: Vec<u64>,
    /// The pushed items' entries, back to back in push order, and where
    /// each starts.
    added: Vec<u8>,
    starts: Vec<u32>,
    items: Vec<Vec<u8>>,
    /// Entries popped from the leaf's stored end (never with pushes), and
    /// where its body ends after them.
    pops: usize,
    pop_end: u64,
}

impl Edge {
    /// The leaf the pushes or pops go into.
    pub(crate) fn leaf(&self) -> u64 {
        self.leaf
    }

    /// Whether the pushes go at the tail (else the head).
    pub(crate) fn tail(&self) -> bool {
        self.tail
    }

    /// Takes one more push if the leaf has room for it.
    pub(crate) fn add(&mut self, item: &[u8]) -> bool {
        if self.pops > 0 {
            return false;
        }
        let entry = leaf_entry(&[], item);
        let bytes = self.body_len + self.added.len() as u64 + entry.len() as u64;
        if self.n + self.starts.len() >= self.slots || bytes > self.body_cap {
            return false;
        }
        self.starts.push(self.added.len() as u32);
        self.added.extend_from_slice(&entry);
        self.items.push(item.to_vec());
        true
    }

    /// The items pushed, in push order.
    pub(crate) fn items(&self) -> &[Vec<u8>] {
        &self.items
    }

    /// Entries popped so far.
    pub(crate) fn pops(&self) -> usize {
        self.pops
    }

    /// Takes one more pop at the leaf's end and returns the item, unless
    /// that would empty the leaf (or there are pushes waiting).
    pub(crate) fn pop(&mut self, r: &Region) -> Result<Option<Vec<u8>>> {
        // The kind word must name the table's size once the count drops
        // (else the body would seem to start elsewhere).
        if !self.starts.is_empty() || self.n <= self.pops + 1 || self.slots > ROOM_SLOTS as usize {
            return Ok(None);
        }
        let p = self.n - self.pops - 1;
        let end = if self.pops == 0 {
            self.body_len
        } else {
            self.pop_end
        };
        let start = u64::from(r.load32(self.table + 4 * p as u64)?);
        if start >= end || end > self.body_len {
            return bad();
        }
        let mut e = Vec::with_capacity((end - start) as usize);
        r.read_bytes(self.body + start, end - start, &mut e)?;
        let mut pos = 0;
        read_bytes(&e, &mut pos).ok_or(Error::BadValue)?;
        let v = read_bytes(&e, &mut pos).ok_or(Error::BadValue)?;
        if pos != e.len() {
            return bad();
        }
        self.pops += 1;
        self.pop_end = start;
        Ok(Some(e[v.0..v.1].to_vec()))
    }
}

impl Tree {
    /// The end leaf (the last one when `tail`) if pushes there can go in
    /// place: the tree is as published, the entry's count word is known,
    /// and the leaf was written with room facing that end.
    pub(crate) fn edge(&self, tail: bool) -> Result<Option<Edge>> {
        if self.keyed
            || self.height == 0
            || self.root & MEM != 0
            || !self.mem.is_empty()
            || self.count_word == 0
        {
            return Ok(None);
        }
        let r = &self.sh.region;
        let mut counts = Vec::with_capacity(self.height as usize);
        let (mut ptr, mut count) = (self.root, self.count);
        for level in (1..self.height).rev() {
            let v = View::open_unsummed(r, ptr, level)?;
            if v.len() == 0 {
                return bad();
            }
            let i = if tail { v.len() - 1 } else { 0 };
            counts.push(v.count_word(i)?);
            (ptr, count) = (v.ptr(i)?, v.count(i)?);
        }
        counts.push(self.count_word);
        let h = node_header(r, ptr)?;
        if h.level != 0 || h.n as u64 != count {
            return bad();
        }
        if h.reversed == tail || h.n == 0 {
            return Ok(None);
        }
        let body_cap = (h.end.saturating_sub(h.body)).min(NODE_MAX as u64);
        Ok(Some(Edge {
            tail,
            leaf: ptr,
            n: h.n,
            slots: h.slots,
            table: h.table,
            body: h.body,
            body_len: h.body_len,
            body_cap,
            kind: h.kind,
            len_word: h.len_word,
            counts,
            added: Vec::new(),
            starts: Vec::new(),
            items: Vec::new(),
            pops: 0,
            pop_end: 0,
        }))
    }

    /// Writes the pushes of `edge` past its leaf's published end and
    /// returns the words that publish them, to be written (logged) in one
    /// transaction. The tree then counts them.
    pub(crate) fn grow(&mut self, edge: &Edge) -> Result<InPlace> {
        let r = &self.sh.region;
        let mut words = InPlace::with_capacity(edge.counts.len() + 2);
        if edge.pops > 0 {
            // Pops: the leaf's published end moves back; the bytes past it
            // stay as they were, unread.
            let k = edge.pops as u64;
            // A leaf whose table was sized by its count keeps that size:
            // its room field now names it.
            let room = (edge.kind >> 16) as u16 & ROOM_REVERSED | edge.slots as u16;
            let kind = (edge.kind & !(0xffff << 16)) | u64::from(room) << 16;
            words.push((edge.leaf + 8 + P_KIND, kind - (k << 32)));
            words.push((edge.leaf + 8 + P_BODY_LEN, edge.pop_end));
            for &w in &edge.counts {
                words.push((w, r.load64(w)?.wrapping_sub(k)));
            }
            self.count -= k;
            self.cache.get_mut().clear();
            return Ok(words);
        }
        let k = edge.starts.len() as u64;
        // Past the published end: no reader looks there (I8), so plain
        // stores do, and a crash leaves them unpublished.
        r.write_bytes(edge.body + edge.body_len, &edge.added)?;
        for (j, &s) in edge.starts.iter().enumerate() {
            let slot = edge.table + 4 * (edge.n + j) as u64;
            r.store32(slot, (edge.body_len + u64::from(s)) as u32)?;
        }
        words.push((edge.leaf + 8 + P_KIND, edge.kind + (k << 32)));
        words.push((
            edge.leaf + 8 + P_BODY_LEN,
            edge.len_word + edge.added.len() as u64,
        ));
        for &w in &edge.counts {
            words.push((w, r.load64(w)?.wrapping_add(k)));
        }
        self.count += k;
        self.cache.get_mut().clear();
        Ok(words)
    }

    /// The segment the tree is in (an edge's pops read from it).
    pub(crate) fn region(&self) -> &Region {
        &self.sh.region
    }

    /// Pushes `val` at the tail (else the head) by copying: into the end
    /// leaf if it fits there (the leaf is then written with room), else
    /// into a new end leaf beside it.
    pub(crate) fn push_end(&mut self, tail: bool, val: &[u8]) -> Result<()> {
        if self.keyed {
            return bad();
        }
        let entry = leaf_entry(&[], val);
        if self.height == 0 {
            let mut leaf = Node::new(0);
            leaf.insert(0, &entry);
            leaf.room = Some(!tail);
            self.mem.push(leaf);
            self.root = MEM | (self.mem.len() - 1) as u64;
            self.height = 1;
            self.count = 1;
            return Ok(());
        }
        let mut path = self.seek_rank(if tail { self.count } else { 0 })?;
        let last = path.steps.last().ok_or(Error::BadValue)?;
        let leaf_bytes = match (&last.copy, last.ptr & MEM != 0) {
            (_, true) => self
                .mem
                .get((last.ptr & !MEM) as usize)
                .map_or(0, |n| n.body.len()),
            (Some(n), false) => n.body.len(),
            (None, false) => return bad(),
        };
        if leaf_bytes + entry.len() <= NODE_MAX {
            let (nodes, idxs) = self.edit(path)?;
            let leaf = *nodes.last().ok_or(Error::BadValue)?;
            let at = *idxs.last().ok_or(Error::BadValue)?;
            self.mem[leaf].insert(at, &entry);
            self.mem[leaf].room = Some(!tail);
            self.adjust_counts(&nodes, &idxs, 1);
            return Ok(());
        }
        // The end leaf is full: a new one beside it.
        let mut fresh = Node::new(0);
        fresh.insert(0, &entry);
        fresh.room = Some(!tail);
        self.mem.push(fresh);
        let fresh = MEM | (self.mem.len() - 1) as u64;
        let leaf = path.steps.pop().ok_or(Error::BadValue)?;
        if path.steps.is_empty() {
            let mut root = Node::new(1);
            let (old, new) = (
                inner_entry(leaf.ptr, self.count, &[]),
                inner_entry(fresh, 1, &[]),
            );
            let (first, second) = if tail { (old, new) } else { (new, old) };
            root.insert(0, &first);
            root.insert(1, &second);
            self.mem.push(root);
            self.root = MEM | (self.mem.len() - 1) as u64;
            self.height += 1;
            self.count += 1;
            return Ok(());
        }
        let (nodes, idxs) = self.edit(path)?;
        let parent = *nodes.last().ok_or(Error::BadValue)?;
        let ci = *idxs.last().ok_or(Error::BadValue)?;
        let at = if tail { ci + 1 } else { ci };
        self.mem[parent].insert(at, &inner_entry(fresh, 1, &[]));
        // The counts above the parent grow by one; the parent's own entry
        // for the new leaf says 1.
        self.adjust_counts(&nodes, &idxs, 1);
        self.fix_overflow(&nodes, &idxs);
        Ok(())
    }

    /// Sets where the published entry keeps the item count (an aligned
    /// word), so that pushes may go in place.
    pub(crate) fn set_count_word(&mut self, word: u64) {
        self.count_word = if word.is_multiple_of(8) { word } else { 0 };
    }
}
